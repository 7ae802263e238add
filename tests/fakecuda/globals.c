/* SPDX-License-Identifier: MIT */
/*
 * Module globals: the __device__ and __constant__ variables of a cubin
 * (STT_OBJECT symbols in .nv.global*, .nv.constant* sections; cubin.c
 * finds them), and cuModuleGetGlobal. A global's memory is made at its
 * first lookup, holding its initial bytes, and freed with its module. It
 * is a device allocation like any other (copies to and from it are
 * checked), but does not count toward CUMOD_FAKE_FAULT alloc:N and is
 * logged as "global", not "alloc", as the real driver's module memory is
 * no cuMemAlloc.
 */
#include "fake.h"

#include <stdlib.h>
#include <string.h>

int
fake_image_add_global(fake_image *img, const char *name, uint64_t size,
                      const uint8_t *init, int constant)
{
    if (size == 0 || size > ((uint64_t)1 << 32))
        return -1;
    fake_global *g = realloc(img->globals, (img->nglobals + 1) * sizeof(*g));
    if (g == NULL)
        return -1;
    img->globals = g;
    g = &img->globals[img->nglobals];
    memset(g, 0, sizeof(*g));
    if ((g->name = strdup(name)) == NULL)
        return -1;
    if (init != NULL && (g->init = malloc(size)) == NULL) {
        free(g->name);
        return -1;
    }
    if (init != NULL)
        memcpy(g->init, init, size);
    g->size = size;
    g->constant = constant;
    img->nglobals++;
    return 0;
}

void
fake_module_globals_free(fake_state *st, fake_module *mod)
{
    for (uint32_t i = 0; mod->global_ptr != NULL && i < mod->img.nglobals; i++)
        if (mod->global_ptr[i] != 0)
            (void)fake_mem_release_quiet(st, mod->global_ptr[i]);
    free(mod->global_ptr);
    mod->global_ptr = NULL;
}

CUresult CUDAAPI
cuModuleGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod,
                  const char *name)
{
    fake_state *st = fake_lock();
    int dev;
    CUresult rc = fake_check_ctx(st, &dev);
    fake_module *mod = NULL;
    if (rc == CUDA_SUCCESS) {
        mod = fake_table_get(&st->modules, (uintptr_t)hmod, FAKE_TAG_MODULE,
                             NULL);
        if (mod == NULL)
            rc = CUDA_ERROR_INVALID_HANDLE;
    }
    if (rc == CUDA_SUCCESS && name == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    uint32_t i = 0;
    if (rc == CUDA_SUCCESS) {
        while (i < mod->img.nglobals && strcmp(mod->img.globals[i].name, name))
            i++;
        if (i == mod->img.nglobals)
            rc = CUDA_ERROR_NOT_FOUND;
    }
    if (rc == CUDA_SUCCESS && mod->global_ptr == NULL &&
        (mod->global_ptr = calloc(mod->img.nglobals, sizeof(uintptr_t))) ==
            NULL)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS && mod->global_ptr[i] == 0) {
        const fake_global *g = &mod->img.globals[i];
        CUdeviceptr p;
        rc = fake_mem_alloc_quiet(st, mod->dev, g->size, &p);
        if (rc == CUDA_SUCCESS) {
            if (g->init != NULL)
                memcpy((void *)(uintptr_t)p, g->init, g->size);
            mod->global_ptr[i] = (uintptr_t)p;
            fake_log(st, "global ptr=0x%jx size=%ju name=%s",
                     (uintmax_t)(uintptr_t)p, (uintmax_t)g->size, g->name);
        }
    }
    if (rc == CUDA_SUCCESS) {
        if (dptr != NULL)
            *dptr = (CUdeviceptr)mod->global_ptr[i];
        if (bytes != NULL)
            *bytes = mod->img.globals[i].size;
    }
    fake_unlock(st);
    return rc;
}
