/* SPDX-License-Identifier: MIT */
/*
 * cumod__imeta_describe against tests/fakecuda, an independent reading of
 * the same images (its own ELF, .nv.info and PTX code): for every image,
 * on an sm_90 and an sm_100 device, what the description says must be
 * what the fake driver says once the image is loaded. The fake itself is
 * held to the real driver by tests/gpu/driver_report.c (run on a GPU by
 * tests/gpu/device-run), which makes the same comparison on libcuda.
 */
#include <criterion/criterion.h>
#include <cuda.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/image/image_meta.h"
#include "cumod/errors.h"
#include "image_meta_test.h"

typedef struct fake {
    void *lib;
    __typeof__(cuInit) *init;
    __typeof__(cuDeviceGet) *device_get;
    __typeof__(cuDevicePrimaryCtxRetain) *retain;
    __typeof__(cuCtxSetCurrent) *set_current;
    __typeof__(cuModuleLoadData) *load;
    __typeof__(cuModuleUnload) *unload;
    __typeof__(cuModuleGetFunctionCount) *count;
    __typeof__(cuModuleEnumerateFunctions) *enumerate;
    __typeof__(cuFuncGetName) *name;
    __typeof__(cuFuncGetParamInfo) *param;
    __typeof__(cuFuncGetAttribute) *attr;
    int (*set_sm)(int);
} fake;

static void
fake_open(fake *d, int sm)
{
    CUdevice dev;
    CUcontext ctx;

    d->lib = dlopen(CUMOD_TEST_FAKECUDA, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(d->lib, "%s", dlerror());
#define SYM(field, name)                                                       \
    *(void **)&d->field = dlsym(d->lib, name);                                 \
    cr_assert_not_null(d->field, "%s", name)
    SYM(init, "cuInit");
    SYM(device_get, "cuDeviceGet");
    SYM(retain, "cuDevicePrimaryCtxRetain");
    SYM(set_current, "cuCtxSetCurrent");
    SYM(load, "cuModuleLoadData");
    SYM(unload, "cuModuleUnload");
    SYM(count, "cuModuleGetFunctionCount");
    SYM(enumerate, "cuModuleEnumerateFunctions");
    SYM(name, "cuFuncGetName");
    SYM(param, "cuFuncGetParamInfo");
    SYM(attr, "cuFuncGetAttribute");
    SYM(set_sm, "fakecuda_set_sm");
#undef SYM
    cr_assert_eq(d->set_sm(sm), 0);
    cr_assert_eq(d->init(0), CUDA_SUCCESS);
    cr_assert_eq(d->device_get(&dev, 0), CUDA_SUCCESS);
    cr_assert_eq(d->retain(&ctx, dev), CUDA_SUCCESS);
    cr_assert_eq(d->set_current(ctx), CUDA_SUCCESS);
}

static int
fake_attr(fake *d, CUfunction f, CUfunction_attribute a)
{
    int v = -12345;

    cr_assert_eq(d->attr(&v, a, f), CUDA_SUCCESS, "attribute %d", (int)a);
    return v;
}

/* One image on the fake's device: the description against the driver. */
static void
compare(fake *d, const mt_file *img, int sm, size_t *compared)
{
    cumod_imeta m = {0}; /* written only on success */
    char msg[512] = "";
    CUmodule mod;
    CUfunction fs[16];
    unsigned n = 0;
    cumod_err rc = cumod__imeta_describe(
        img->bytes, img->len, img->kind, img->name, (unsigned)sm / 10,
        (unsigned)sm % 10, &m, msg, sizeof(msg));
    /* The fake reads a copy padded as the driver would find it: a PTX text
     * ends at a NUL. */
    uint8_t *padded = calloc(1, img->len + 64);

    cr_assert_not_null(padded);
    memcpy(padded, img->bytes, img->len);
    CUresult lrc = d->load(&mod, padded);
    if (rc == CUMOD_ENOTSUP) { /* compressed: neither reads it */
        cr_expect_neq(lrc, CUDA_SUCCESS, "%s on sm_%d", img->name, sm);
        goto out;
    }
    if (rc != CUMOD_OK) {
        cr_expect_neq(lrc, CUDA_SUCCESS,
                      "%s on sm_%d: %s, yet the fake loads "
                      "it",
                      img->name, sm, msg);
        goto out;
    }
    cr_assert_eq(lrc, CUDA_SUCCESS,
                 "%s on sm_%d: described, but the fake "
                 "says %d",
                 img->name, sm, (int)lrc);
    cr_assert_eq(d->count(&n, mod), CUDA_SUCCESS);
    cr_assert_eq(n, m.nkernels, "%s on sm_%d: %u functions, %zu kernels",
                 img->name, sm, n, m.nkernels);
    cr_assert_leq(n, 16);
    cr_assert_eq(d->enumerate(fs, n, mod), CUDA_SUCCESS);
    for (unsigned i = 0; i < n; i++) {
        const cumod_kdesc *k = &m.kernels[i];
        const char *name = NULL;
        size_t off, size;
        cr_assert_eq(d->name(&name, fs[i]), CUDA_SUCCESS);
        cr_expect_str_eq(name, k->name, "%s on sm_%d: function %u", img->name,
                         sm, i);
        for (uint32_t j = 0; j < k->nparams; j++) {
            cr_assert_eq(d->param(fs[i], j, &off, &size), CUDA_SUCCESS);
            cr_expect(off == k->params[j].offset && size == k->params[j].size,
                      "%s: %s: param %u: fake %zu+%zu, described %u+%u",
                      img->name, k->name, j, off, size, k->params[j].offset,
                      k->params[j].size);
        }
        cr_expect_neq(d->param(fs[i], k->nparams, &off, &size), CUDA_SUCCESS,
                      "%s: %s: more than %u params", img->name, k->name,
                      k->nparams);
        if (k->static_shared >= 0)
            cr_expect_eq(
                fake_attr(d, fs[i], CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
                k->static_shared, "%s: %s: shared", img->name, k->name);
        if (k->registers >= 0)
            cr_expect_eq(fake_attr(d, fs[i], CU_FUNC_ATTRIBUTE_NUM_REGS),
                         k->registers, "%s: %s: registers", img->name, k->name);
        if (k->max_threads > 0)
            cr_expect_leq(
                fake_attr(d, fs[i], CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
                k->max_threads, "%s: %s: threads", img->name, k->name);
        for (int c = 0; c < 3; c++)
            cr_expect_eq(
                fake_attr(
                    d, fs[i],
                    (CUfunction_attribute)(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH +
                                           c)),
                (int)k->cluster[c], "%s: %s: cluster %d", img->name, k->name,
                c);
        cr_expect_eq(
            fake_attr(d, fs[i], CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET),
            k->cluster_explicit, "%s: %s: must-set", img->name, k->name);
        cr_expect_eq(fake_attr(d, fs[i], CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES),
                     (int)m.const_bytes, "%s: %s: const", img->name, k->name);
    }
    cr_expect_eq(d->unload(mod), CUDA_SUCCESS);
    (*compared)++;
out:
    free(padded);
    cumod__imeta_fini(&m);
}

static void
compare_all(int sm)
{
    fake d;
    size_t n, compared = 0;
    mt_file *files = mt_read_all(&n);

    fake_open(&d, sm);
    for (size_t i = 0; i < n; i++)
        compare(&d, &files[i], sm, &compared);
    /* Most images run on an sm_90 device; on sm_100, the fatbins' and the
     * PTX texts' (the JIT compiles them for it) and the sm_100 cubin. */
    cr_expect_geq(compared, sm == 90 ? 20 : 8, "%zu images compared", compared);
    mt_free_all(files, n);
}

Test(image_meta_driver, agrees_with_the_fake_on_sm_90)
{
    compare_all(90);
}

Test(image_meta_driver, agrees_with_the_fake_on_sm_100)
{
    compare_all(100);
}
