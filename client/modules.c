/* Module queries of libcumod. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"

void
cumod_module_list_free(cumod_module_list *list)
{
    if (list == NULL)
        return;
    for (size_t i = 0; i < list->count; i++) {
        cumod_module_info *m = &list->modules[i];
        for (size_t k = 0; k < m->nkernels; k++)
            free(m->kernels[k]);
        free(m->kernels);
        free(m->error);
    }
    free(list->modules);
    free(list);
}

static int
modules_copy(cumod_module_info *m, const Cumod__ModuleInfo *src)
{
    snprintf(m->name, sizeof(m->name), "%s", src->name);
    snprintf(m->state, sizeof(m->state), "%s", src->state);
    snprintf(m->sha256, sizeof(m->sha256), "%s", src->sha256);
    snprintf(m->kind, sizeof(m->kind), "%s", src->kind);
    m->generation = src->generation;
    m->size = src->size;
    m->pinned = src->pinned;
    if (src->error != NULL && src->error[0] != '\0' &&
        (m->error = strdup(src->error)) == NULL)
        return -1;
    if (src->n_kernels > 0 &&
        (m->kernels = calloc(src->n_kernels, sizeof(char *))) == NULL)
        return -1;
    for (size_t k = 0; k < src->n_kernels; k++) {
        if ((m->kernels[k] = strdup(src->kernels[k])) == NULL)
            return -1;
        m->nkernels++;
    }
    return 0;
}

int
cumod_modules_list(cumod_client *c, cumod_module_list **out)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__ListModules lm = CUMOD__LIST_MODULES__INIT;
    Cumod__Reply *reply;
    cumod_module_list *list = NULL;
    int rv;

    if (c == NULL || out == NULL)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_modules_list: NULL argument");
    req.body_case = CUMOD__REQUEST__BODY_LIST_MODULES;
    req.list_modules = &lm;
    if ((rv = cumod__client_call(c, &req, &reply)) != CUMOD_OK)
        return rv;
    if (reply->body_case != CUMOD__REPLY__BODY_LIST_MODULES) {
        rv = cumod__client_set_error(CUMOD_EPROTO,
                                     "cumodd answered ListModules with "
                                     "another kind of reply");
        goto fail;
    }
    const Cumod__ListModulesReply *r = reply->list_modules;
    if ((list = calloc(1, sizeof(*list))) == NULL ||
        (r->n_modules > 0 &&
         (list->modules = calloc(r->n_modules, sizeof(cumod_module_info))) ==
             NULL))
        goto nomem;
    for (size_t i = 0; i < r->n_modules; i++) {
        list->count++;
        if (modules_copy(&list->modules[i], r->modules[i]) != 0)
            goto nomem;
    }
    cumod__reply__free_unpacked(reply, NULL);
    *out = list;
    return CUMOD_OK;

nomem:
    rv = cumod__client_set_error(CUMOD_ENOMEM, "out of memory");
fail:
    cumod_module_list_free(list);
    cumod__reply__free_unpacked(reply, NULL);
    return rv;
}
