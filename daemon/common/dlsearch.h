/* SPDX-License-Identifier: MIT */
/*
 * Finding a CUDA library to dlopen (cuBLAS in the executor, NVRTC in the
 * compile worker): the path a flag names, else the one an environment
 * variable names, else the first of a default list that loads (sonames
 * the dynamic loader knows, then the CUDA toolkit's usual folder, which
 * is often not registered with it). Each is opened RTLD_NOW | RTLD_LOCAL:
 * a broken library fails at once, and nothing else binds to its symbols.
 */
#ifndef CUMOD_DLSEARCH_H
#define CUMOD_DLSEARCH_H

#include <stddef.h>

/* The library a search would try alone: explicit_path if not NULL or
 * empty, else $env_var if set and not empty, else NULL (the default list).
 * Borrowed. */
const char *cumod__dl_named(const char *explicit_path, const char *env_var);

/* dlopens path, or with path NULL the first of defaults (n of them) that
 * loads. The handle, with the name that loaded in loaded (loadedlen
 * bytes); NULL with "name (dlerror's answer)" for each name tried,
 * separated by "; ", in tried (triedlen bytes). */
void *cumod__dl_search(const char *path, const char *const *defaults, size_t n,
                       char *loaded, size_t loadedlen, char *tried,
                       size_t triedlen);

#endif
