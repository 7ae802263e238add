/* SPDX-License-Identifier: MIT */
/*
 * Modules and functions: load, unload, look up, enumerate, describe.
 *
 * A module handle names a slot of st->modules and its generation; a function
 * handle adds the kernel's index. Unloading frees the module and empties the
 * slot, so every older handle to it or its functions fails the generation
 * check (CUDA_ERROR_INVALID_HANDLE, as the real driver answers) without the
 * freed memory ever being read.
 */
#include "fake.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *
module_kind(fake_image_kind kind)
{
    switch (kind) {
    case FAKE_IMAGE_CUBIN:
        return "cubin";
    case FAKE_IMAGE_PTX:
        return "ptx";
    case FAKE_IMAGE_FATBIN_CUBIN:
        return "fatbin-cubin";
    case FAKE_IMAGE_FATBIN_PTX:
        return "fatbin-ptx";
    }
    return "?";
}

static void
module_log_load(fake_state *st, uintptr_t h, const fake_image *img)
{
    if (st->log_fd < 0)
        return;
    size_t len = 1;
    for (uint32_t i = 0; i < img->nkernels; i++)
        len += strlen(img->kernels[i].name) + 1;
    char *names = malloc(len), *at = names;
    if (names == NULL)
        return;
    for (uint32_t i = 0; i < img->nkernels; i++) {
        size_t n = strlen(img->kernels[i].name);
        if (i > 0)
            *at++ = ',';
        memcpy(at, img->kernels[i].name, n);
        at += n;
    }
    *at = '\0';
    fake_log(st,
             "load module=0x%jx result=CUDA_SUCCESS kind=%s sm=%d functions=%s",
             (uintmax_t)h, module_kind(img->kind), img->sm, names);
    free(names);
}

static CUresult
module_load(fake_state *st, CUmodule *module, const void *image,
            fake_jitlog *log)
{
    int dev;
    CUresult rc = fake_check_ctx(st, &dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (module == NULL || image == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    fake_module *mod = calloc(1, sizeof(*mod));
    if (mod == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult code = CUDA_ERROR_INVALID_IMAGE;
    if (fake_fault_fires(st, FAKECUDA_FAULT_LOAD, ++st->n_load, NULL, &code)) {
        fake_jitlog_printf(log, 1, "fakecuda: injected load failure");
        rc = code;
        goto fail;
    }
    rc = fake_image_load(image, st->sm, &mod->img, log);
    if (rc != CUDA_SUCCESS)
        goto fail;
    uint32_t slot, gen;
    if (fake_table_add(st, &st->modules, mod, &slot, &gen) != 0) {
        fake_image_fini(&mod->img);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto fail;
    }
    mod->dev = dev;
    uintptr_t h = fake_handle(FAKE_TAG_MODULE, gen, slot, 0);
    module_log_load(st, h, &mod->img);
    *module = (CUmodule)h;
    return CUDA_SUCCESS;
fail:
    fake_log(st, "load result=%s", fake_errname(rc));
    free(mod);
    return rc;
}

CUresult CUDAAPI
cuModuleLoadData(CUmodule *module, const void *image)
{
    fake_state *st = fake_lock();
    fake_load_hold_wait(st, "cuModuleLoadData");
    CUresult rc = module_load(st, module, image, NULL);
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                   CUjit_option *options, void **optionValues)
{
    fake_jitlog log = {.verbose = 0};
    CUresult rc = fake_jit_options(&log, numOptions, options, optionValues);
    if (rc != CUDA_SUCCESS)
        return rc;
    fake_state *st = fake_lock();
    fake_load_hold_wait(st, "cuModuleLoadDataEx");
    rc = module_load(st, module, image, &log);
    if (rc == CUDA_SUCCESS)
        fake_jit_report(&log);
    fake_unlock(st);
    fake_jit_done(&log, numOptions, options, optionValues);
    return rc;
}

/* A module handle of the calling thread's context. */
static CUresult
module_get(fake_state *st, CUmodule h, fake_module **mod, uint32_t *slot)
{
    int dev;
    CUresult rc = fake_check_ctx(st, &dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    *mod = fake_table_get(&st->modules, (uintptr_t)h, FAKE_TAG_MODULE, slot);
    return *mod != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult CUDAAPI
cuModuleUnload(CUmodule hmod)
{
    fake_state *st = fake_lock();
    fake_module *mod;
    uint32_t slot;
    CUresult rc = module_get(st, hmod, &mod, &slot);
    if (rc == CUDA_SUCCESS) {
        fake_log(st, "unload module=0x%jx", (uintmax_t)(uintptr_t)hmod);
        fake_table_del(&st->modules, slot);
        fake_module_globals_free(st, mod);
        fake_image_fini(&mod->img);
        free(mod);
    }
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    fake_state *st = fake_lock();
    fake_module *mod;
    uint32_t slot;
    CUresult rc = module_get(st, hmod, &mod, &slot);
    if (rc == CUDA_SUCCESS && (hfunc == NULL || name == NULL))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        rc = CUDA_ERROR_NOT_FOUND;
        for (uint32_t i = 0; i < mod->img.nkernels; i++)
            if (strcmp(mod->img.kernels[i].name, name) == 0) {
                uint32_t gen = st->modules.gens[slot];
                *hfunc =
                    (CUfunction)fake_handle(FAKE_TAG_FUNC, gen, slot, i + 1);
                rc = CUDA_SUCCESS;
                break;
            }
    }
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuModuleGetFunctionCount(unsigned int *count, CUmodule mod)
{
    fake_state *st = fake_lock();
    fake_module *m;
    uint32_t slot;
    CUresult rc = module_get(st, mod, &m, &slot);
    if (rc == CUDA_SUCCESS && count == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        *count = m->img.nkernels;
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuModuleEnumerateFunctions(CUfunction *functions, unsigned int numFunctions,
                           CUmodule mod)
{
    fake_state *st = fake_lock();
    fake_module *m;
    uint32_t slot;
    CUresult rc = module_get(st, mod, &m, &slot);
    if (rc == CUDA_SUCCESS && functions == NULL && numFunctions > 0)
        rc = CUDA_ERROR_INVALID_VALUE;
    /* Fewer slots than functions is no error: the driver fills what fits. */
    for (uint32_t i = 0;
         rc == CUDA_SUCCESS && i < m->img.nkernels && i < numFunctions; i++)
        functions[i] = (CUfunction)fake_handle(
            FAKE_TAG_FUNC, st->modules.gens[slot], slot, i + 1);
    fake_unlock(st);
    return rc;
}

CUresult
fake_function_resolve(fake_state *st, CUfunction f, fake_module **mod,
                      fake_kernel **k)
{
    uint32_t gen, slot, sub;
    if (!fake_handle_split((uintptr_t)f, FAKE_TAG_FUNC, &gen, &slot, &sub))
        return CUDA_ERROR_INVALID_HANDLE;
    fake_module *m =
        fake_table_get(&st->modules, fake_handle(FAKE_TAG_MODULE, gen, slot, 0),
                       FAKE_TAG_MODULE, NULL);
    if (m == NULL || sub == 0 || sub > m->img.nkernels)
        return CUDA_ERROR_INVALID_HANDLE;
    *mod = m;
    *k = &m->img.kernels[sub - 1];
    return CUDA_SUCCESS;
}

void
fake_modules_clear(fake_state *st, int dev)
{
    for (uint32_t i = 0; i < st->modules.cap; i++) {
        fake_module *m = st->modules.items[i];
        if (m != NULL && (dev < 0 || m->dev == dev)) {
            fake_table_del(&st->modules, i);
            fake_module_globals_free(st, m);
            fake_image_fini(&m->img);
            free(m);
        }
    }
}

/* The function queries need no current context, only a live function. */
static CUresult
module_func(fake_state *st, CUfunction f, fake_module **mod, fake_kernel **k)
{
    CUresult rc = fake_check(st);
    return rc != CUDA_SUCCESS ? rc : fake_function_resolve(st, f, mod, k);
}

CUresult CUDAAPI
cuFuncGetName(const char **name, CUfunction hfunc)
{
    fake_state *st = fake_lock();
    fake_module *mod;
    fake_kernel *k;
    CUresult rc = module_func(st, hfunc, &mod, &k);
    if (rc == CUDA_SUCCESS && name == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        *name = k->name;
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset,
                   size_t *paramSize)
{
    fake_state *st = fake_lock();
    fake_module *mod;
    fake_kernel *k;
    CUresult rc = module_func(st, func, &mod, &k);
    if (rc == CUDA_SUCCESS && (paramOffset == NULL || paramIndex >= k->nparams))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        *paramOffset = k->params[paramIndex].offset;
        if (paramSize != NULL)
            *paramSize = k->params[paramIndex].size;
    }
    fake_unlock(st);
    return rc;
}

static int
module_attribute(const fake_module *mod, const fake_kernel *k,
                 CUfunction_attribute a, int *v)
{
    switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        *v = k->max_threads;
        break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
        *v = k->shared_bytes;
        break;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
        *v = mod->img.const_bytes;
        break;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
        *v = k->local_bytes;
        break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
        *v = k->num_regs;
        break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
        *v = mod->img.ptx_version;
        break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
        *v = mod->img.sm;
        break;
    case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA:
        *v = 0;
        break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        *v = fake_kernel_dyn_max(k);
        break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        *v = k->carveout ? k->carveout - 1 : -1;
        break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET:
        *v = k->cluster_explicit;
        break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
        *v = k->cluster[a - CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH];
        break;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        *v = 0;
        break;
    default:
        return -1;
    }
    return 0;
}

CUresult CUDAAPI
cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    fake_state *st = fake_lock();
    fake_module *mod;
    fake_kernel *k;
    CUresult rc = module_func(st, hfunc, &mod, &k);
    int v = 0;
    if (rc == CUDA_SUCCESS &&
        (pi == NULL || module_attribute(mod, k, attrib, &v) != 0))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        *pi = v;
    fake_unlock(st);
    return rc;
}
