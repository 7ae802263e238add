/* SPDX-License-Identifier: MIT */
#include "dlsearch.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *
cumod__dl_named(const char *explicit_path, const char *env_var)
{
    const char *env = env_var != NULL ? getenv(env_var) : NULL;
    if (explicit_path != NULL && explicit_path[0] != '\0')
        return explicit_path;
    if (env != NULL && env[0] != '\0')
        return env;
    return NULL;
}

void *
cumod__dl_search(const char *path, const char *const *defaults, size_t n,
                 char *loaded, size_t loadedlen, char *tried, size_t triedlen)
{
    const char *const *names = path != NULL ? &path : defaults;
    size_t count = path != NULL ? 1 : n, at = 0;

    if (triedlen > 0)
        tried[0] = '\0';
    for (size_t i = 0; i < count; i++) {
        void *dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (dl != NULL) {
            snprintf(loaded, loadedlen, "%s", names[i]);
            return dl;
        }
        const char *why = dlerror();
        if (at < triedlen)
            at += (size_t)snprintf(tried + at, triedlen - at, "%s%s (%s)",
                                   at ? "; " : "", names[i],
                                   why ? why : "unknown reason");
    }
    return NULL;
}
