/* SPDX-License-Identifier: MIT */
/*
 * Service: the table of loaded modules (modtab.h). Handles are tag << 32 |
 * slot, so a stale handle (an unloaded slot reused) never matches. The
 * load and reclaim lanes change the table while the submission thread
 * looks up; ex->mods_mtx guards it (a leaf lock, held for no driver
 * call).
 */
#include <stdlib.h>
#include <string.h>

#include "cumod/errors.h"
#include "modtab.h"

cumod_exec_module *
cumod__exec_module(cumod_exec *ex, uint64_t handle)
{
    uint32_t slot = (uint32_t)(handle & 0xffffffffu);
    cumod_exec_module *m = NULL;
    pthread_mutex_lock(&ex->mods_mtx);
    if (handle != 0 && slot < ex->nmods && ex->mods[slot] != NULL &&
        ex->mods[slot]->handle == handle)
        m = ex->mods[slot];
    pthread_mutex_unlock(&ex->mods_mtx);
    return m;
}

/* Puts m in a free slot and gives it its handle. CUMOD_ENOMEM. */
cumod_err
cumod__exec_module_insert(cumod_exec *ex, cumod_exec_module *m)
{
    uint32_t slot;
    cumod_err rv = CUMOD_OK;

    pthread_mutex_lock(&ex->mods_mtx);
    for (slot = 0; slot < ex->nmods && ex->mods[slot] != NULL; slot++)
        ;
    if (slot == ex->nmods) {
        uint32_t n = ex->nmods ? ex->nmods * 2 : 16;
        cumod_exec_module **t = realloc(ex->mods, n * sizeof(*t));
        if (t == NULL) {
            rv = CUMOD_ENOMEM;
            goto out;
        }
        memset(t + ex->nmods, 0, (n - ex->nmods) * sizeof(*t));
        ex->mods = t;
        ex->nmods = n;
    }
    if (++ex->next_tag == 0)
        ex->next_tag = 1;
    m->handle = ((uint64_t)ex->next_tag << 32) | slot;
    ex->mods[slot] = m;
out:
    pthread_mutex_unlock(&ex->mods_mtx);
    return rv;
}

/* Takes the module of handle out of the table; NULL when unknown. */
cumod_exec_module *
cumod__exec_module_take(cumod_exec *ex, uint64_t handle)
{
    uint32_t slot = (uint32_t)(handle & 0xffffffffu);
    cumod_exec_module *m = NULL;
    pthread_mutex_lock(&ex->mods_mtx);
    if (handle != 0 && slot < ex->nmods && ex->mods[slot] != NULL &&
        ex->mods[slot]->handle == handle) {
        m = ex->mods[slot];
        ex->mods[slot] = NULL;
    }
    pthread_mutex_unlock(&ex->mods_mtx);
    return m;
}

void
cumod__exec_module_free(cumod_exec *ex, cumod_exec_module *m)
{
    if (m == NULL)
        return;
    if (m->mod != NULL)
        (void)ex->drv.module_unload(m->mod);
    for (uint32_t i = 0; m->param_off != NULL && i < m->nfunc; i++)
        free(m->param_off[i]);
    free(m->param_off);
    free(m->nparams);
    free(m->dyn_max);
    free(m->carveout);
    free(m->nonportable);
    free(m->funcs);
    free(m);
}

void
cumod__exec_modules_fini(cumod_exec *ex)
{
    for (uint32_t i = 0; i < ex->nmods; i++)
        cumod__exec_module_free(ex, ex->mods[i]);
    free(ex->mods);
    ex->mods = NULL;
    ex->nmods = 0;
}
