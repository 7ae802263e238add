/* SPDX-License-Identifier: MIT */
/*
 * Malformed images: every truncation and many random corruptions of every
 * image the build makes, each placed so that it ends against an unmapped
 * page. The fake must answer each with a driver error code (or load it, if
 * the damage left a valid image) and never read past the end; run under
 * -DCUMOD_SANITIZE=address,undefined this also catches any read of the
 * fake's own copies out of bounds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_test.h"

typedef struct fuzz_image {
    const char *dir;
    const char *file;
    int text; /* PTX: a truncation can still be valid text */
} fuzz_image;

static const fuzz_image fuzz_images[] = {
    {TEST_KERNELS, "affine.cubin", 0},     {TEST_KERNELS, "axpy.cubin", 0},
    {TEST_KERNELS, "empty.cubin", 0},      {TEST_KERNELS, "scale.cubin", 0},
    {TEST_KERNELS, "vadd.cubin", 0},       {TEST_KERNELS, "vadd_fat.fatbin", 0},
    {TEST_KERNELS, "scale_ptx.ptx", 1},    {TEST_IMAGES, "fake_multi.cubin", 0},
    {TEST_IMAGES, "fake_multi.fatbin", 0}, {TEST_IMAGES, "fake_multi.ptx", 1},
};

/* The codes a damaged image may get. */
static int
fuzz_allowed(CUresult rc)
{
    return rc == CUDA_SUCCESS || rc == CUDA_ERROR_INVALID_IMAGE ||
           rc == CUDA_ERROR_INVALID_PTX || rc == CUDA_ERROR_NO_BINARY_FOR_GPU ||
           rc == CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
}

enum { FUZZ_MAX_NAMES = 8 };

/* What a loaded module holds: its kernels' names and parameter counts. */
typedef struct fuzz_module {
    unsigned n;
    char names[FUZZ_MAX_NAMES][64];
    size_t params[FUZZ_MAX_NAMES];
} fuzz_module;

/* Uses a loaded module the way the daemon would, then unloads it. */
static void
fuzz_exercise(CUmodule mod, fuzz_module *out)
{
    unsigned n = 0;
    CU_OK(cuModuleGetFunctionCount(&n, mod));
    CUfunction *fs = calloc(n + 1, sizeof(*fs));
    cr_assert_not_null(fs);
    CU_OK(cuModuleEnumerateFunctions(fs, n, mod));
    out->n = n;
    for (unsigned i = 0; i < n; i++) {
        const char *name;
        size_t off, size, k = 0;
        CU_OK(cuFuncGetName(&name, fs[i]));
        for (; cuFuncGetParamInfo(fs[i], k, &off, &size) == CUDA_SUCCESS; k++)
            cr_assert_lt(k, 4096);
        if (i < FUZZ_MAX_NAMES) {
            snprintf(out->names[i], sizeof(out->names[i]), "%s", name);
            out->params[i] = k;
        }
    }
    free(fs);
    CU_OK(cuModuleUnload(mod));
}

static CUresult
fuzz_load(test_guard *g, const unsigned char *bytes, size_t n, fuzz_module *out)
{
    CUmodule mod = NULL;
    fuzz_module ignored;
    CUresult rc = cuModuleLoadData(&mod, test_guard_put(g, bytes, n));
    cr_assert(fuzz_allowed(rc), "unexpected %s", test_errname(rc));
    if (rc == CUDA_SUCCESS)
        fuzz_exercise(mod, out != NULL ? out : &ignored);
    return rc;
}

/* Every length of an image up to 12 KiB (the examples); of a larger one,
 * its first and last KiB whole and a prime stride between: enough to cut
 * every header and section of the multi-kernel images, in a second. */
static size_t
fuzz_next_length(size_t len, size_t size)
{
    if (size <= 12 * 1024 || len < 1024 || len + 1024 >= size)
        return len + 1;
    return len + 61 < size - 1024 ? len + 61 : size - 1024;
}

Test(fuzz, every_truncation_fails_cleanly, .timeout = 120)
{
    test_start();
    for (size_t i = 0; i < sizeof(fuzz_images) / sizeof(fuzz_images[0]); i++) {
        test_file f = test_read(fuzz_images[i].dir, fuzz_images[i].file);
        test_guard g;
        test_guard_init(&g, f.size);
        fuzz_module whole, part;
        CU_OK(fuzz_load(&g, f.bytes, f.size,
                        &whole)); /* whole, against the guard */
        size_t loaded = 0;
        for (size_t len = 0; len < f.size;
             len = fuzz_next_length(len, f.size)) {
            if (fuzz_load(&g, f.bytes, len, &part) != CUDA_SUCCESS)
                continue;
            loaded++;
            /* Text cut between two kernels is a smaller, valid module: its
             * kernels are the first ones of the whole, complete. */
            cr_assert(fuzz_images[i].text, "%s loaded cut at %zu",
                      fuzz_images[i].file, len);
            cr_assert_leq(part.n, whole.n, "%s cut at %zu", fuzz_images[i].file,
                          len);
            for (unsigned k = 0; k < part.n && k < FUZZ_MAX_NAMES; k++) {
                cr_assert_str_eq(part.names[k], whole.names[k]);
                cr_assert_eq(part.params[k], whole.params[k]);
            }
        }
        if (!fuzz_images[i].text)
            cr_expect_eq(loaded, 0, "%s: %zu truncations loaded",
                         fuzz_images[i].file, loaded);
        test_guard_fini(&g);
        test_file_free(&f);
    }
}

/* xorshift64*: a fixed sequence, so a failure can be replayed. */
static uint64_t
fuzz_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

Test(fuzz, random_corruption_fails_cleanly, .timeout = 120)
{
    test_start();
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    size_t outcomes[4] = {0};
    for (size_t i = 0; i < sizeof(fuzz_images) / sizeof(fuzz_images[0]); i++) {
        test_file f = test_read(fuzz_images[i].dir, fuzz_images[i].file);
        test_guard g;
        test_guard_init(&g, f.size);
        unsigned char *work = malloc(f.size);
        cr_assert_not_null(work);
        for (int round = 0; round < 400; round++) {
            memcpy(work, f.bytes, f.size);
            int flips = 1 + (int)(fuzz_next(&seed) % 4);
            for (int k = 0; k < flips; k++) {
                uint64_t r = fuzz_next(&seed);
                /* Half the damage in the headers, where the offsets are. */
                size_t at =
                    (r & 1) ? (size_t)(r >> 8) % (f.size < 256 ? f.size : 256)
                            : (size_t)(r >> 8) % f.size;
                switch ((r >> 4) % 4) {
                case 0:
                    work[at] ^= (unsigned char)(1u << ((r >> 40) % 8));
                    break;
                case 1:
                    work[at] = (unsigned char)(r >> 48);
                    break;
                case 2:
                    work[at] = 0xff;
                    break;
                default:
                    work[at] = 0;
                    break;
                }
            }
            CUresult rc = fuzz_load(&g, work, f.size, NULL);
            outcomes[rc == CUDA_SUCCESS               ? 0
                     : rc == CUDA_ERROR_INVALID_IMAGE ? 1
                     : rc == CUDA_ERROR_INVALID_PTX   ? 2
                                                      : 3]++;
        }
        free(work);
        test_guard_fini(&g);
        test_file_free(&f);
    }
    /* The damage was varied enough to reach both answers. */
    cr_expect_gt(outcomes[0], 0, "some corruptions leave a loadable image");
    cr_expect_gt(outcomes[1], 0, "some are refused as invalid images");
    cr_expect_gt(outcomes[2], 0, "some are refused as invalid PTX");
    cr_expect_eq(fakecuda_module_count(), 0);
}
