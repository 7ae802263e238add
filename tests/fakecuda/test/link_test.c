/* SPDX-License-Identifier: MIT */
/*
 * The JIT linker: cuLinkCreate, cuLinkAddData, cuLinkComplete,
 * cuLinkDestroy, and what cuModuleLoadData makes of the linked image.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_test.h"

/* A link with both logs; the sizes come back in vals[1] and vals[3]. */
typedef struct link_logs {
    char err[2048], info[2048];
    CUjit_option opts[6];
    void *vals[6];
} link_logs;

static CUlinkState
link_create(link_logs *g, int verbose)
{
    g->err[0] = g->info[0] = 'x';
    CUjit_option opts[6] = {
        CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        CU_JIT_INFO_LOG_BUFFER,  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
        CU_JIT_LOG_VERBOSE,      CU_JIT_OPTIMIZATION_LEVEL};
    void *vals[6] = {g->err,
                     (void *)(uintptr_t)sizeof(g->err),
                     g->info,
                     (void *)(uintptr_t)sizeof(g->info),
                     (void *)(uintptr_t)verbose,
                     (void *)(uintptr_t)4};
    memcpy(g->opts, opts, sizeof(opts));
    memcpy(g->vals, vals, sizeof(vals));
    CUlinkState ls = NULL;
    CU_OK(cuLinkCreate(6, g->opts, g->vals, &ls));
    cr_expect(g->err[0] == '\0' && g->info[0] == '\0', "logs start empty");
    return ls;
}

static CUresult
link_add(CUlinkState ls, const char *ptx)
{
    return cuLinkAddData(ls, CU_JIT_INPUT_PTX, (void *)ptx, strlen(ptx) + 1,
                         "input.ptx", 0, NULL, NULL);
}

/* Links one PTX file and loads the result. */
static CUmodule
link_load(const char *dir, const char *file, CUlinkState *out)
{
    test_file f = test_read(dir, file);
    link_logs g;
    CUlinkState ls = link_create(&g, 0);
    CU_OK(link_add(ls, (const char *)f.bytes));
    test_file_free(&f);
    void *image = NULL;
    size_t size = 0;
    CU_OK(cuLinkComplete(ls, &image, &size));
    cr_assert(image != NULL && size > 0);
    CUmodule mod = NULL;
    CU_OK(cuModuleLoadData(&mod, image));
    *out = ls;
    return mod;
}

/* Same functions, in the same order, with the same parameter layouts. */
static void
link_expect_same(CUmodule a, CUmodule b)
{
    unsigned na = 0, nb = 0;
    CU_OK(cuModuleGetFunctionCount(&na, a));
    CU_OK(cuModuleGetFunctionCount(&nb, b));
    cr_assert_eq(na, nb);
    cr_assert_gt(na, 0);
    CUfunction fa[16], fb[16];
    cr_assert_leq(na, 16);
    CU_OK(cuModuleEnumerateFunctions(fa, na, a));
    CU_OK(cuModuleEnumerateFunctions(fb, nb, b));
    for (unsigned i = 0; i < na; i++) {
        const char *x, *y;
        CU_OK(cuFuncGetName(&x, fa[i]));
        CU_OK(cuFuncGetName(&y, fb[i]));
        cr_expect_str_eq(x, y);
        size_t k = 0, ox, sx, oy, sy;
        for (; cuFuncGetParamInfo(fa[i], k, &ox, &sx) == CUDA_SUCCESS; k++) {
            CU_OK(cuFuncGetParamInfo(fb[i], k, &oy, &sy));
            cr_expect(ox == oy && sx == sy, "%s param %zu", x, k);
        }
        CU_IS(CUDA_ERROR_INVALID_VALUE, cuFuncGetParamInfo(fb[i], k, &oy, &sy));
    }
}

Test(link, a_linked_image_loads_like_its_ptx)
{
    char path[] = "/tmp/fakecuda_log_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    setenv("CUMOD_FAKE_LOG", path, 1);
    test_start();
    const char *files[][2] = {{TEST_IMAGES, "fake_multi.ptx"},
                              {TEST_KERNELS, "scale_ptx.ptx"}};
    for (size_t i = 0; i < 2; i++) {
        CUlinkState ls;
        CUmodule linked = link_load(files[i][0], files[i][1], &ls);
        CUmodule direct = test_load(files[i][0], files[i][1]);
        link_expect_same(linked, direct);
        CU_OK(cuModuleUnload(linked));
        CU_OK(cuModuleUnload(direct));
        CU_OK(cuLinkDestroy(ls));
        CU_IS(CUDA_ERROR_INVALID_HANDLE, cuLinkDestroy(ls));
    }
    FILE *f = fopen(path, "r");
    char *log = NULL;
    size_t len = 0;
    cr_assert_geq(getdelim(&log, &len, '\0', f), 0);
    fclose(f);
    cr_expect(strstr(log, "link inputs=1 size=") != NULL, "%s", log);
    cr_expect(strstr(log, "kind=ptx sm=90 functions=zeta,alpha,middle,big,"
                          "bounded ") != NULL,
              "%s", log);
    free(log);
    unlink(path);
}

Test(link, the_image_belongs_to_the_state)
{
    test_start();
    test_file f = test_read(TEST_KERNELS, "scale_ptx.ptx");
    CUlinkState ls;
    CU_OK(cuLinkCreate(0, NULL, NULL, &ls));
    CU_OK(link_add(ls, (const char *)f.bytes));
    void *image = NULL, *again = NULL;
    CU_OK(cuLinkComplete(ls, &image, NULL));
    CU_OK(cuLinkComplete(ls, &again, NULL));
    cr_expect_eq(image, again, "completing again gives the same image");
    /* The fake's choices: no input after completion, none to complete. */
    CU_IS(CUDA_ERROR_INVALID_VALUE, link_add(ls, (const char *)f.bytes));
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuLinkComplete(ls, NULL, NULL));
    CUmodule a, b;
    CU_OK(cuModuleLoadData(&a, image));
    CU_OK(cuModuleLoadData(&b, image)); /* as often as wanted */
    CU_OK(cuLinkDestroy(ls));
    CUfunction fn;
    CU_OK(cuModuleGetFunction(&fn, a, "scale")); /* outlives the state */
    CU_IS(CUDA_ERROR_INVALID_HANDLE, cuLinkComplete(ls, &image, NULL));
    CU_IS(CUDA_ERROR_INVALID_HANDLE, link_add(ls, (const char *)f.bytes));
    CU_OK(cuLinkCreate(0, NULL, NULL, &ls));
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuLinkComplete(ls, &image, NULL));
    CU_OK(cuLinkDestroy(ls));
    test_file_free(&f);
}

/* The example PTX with `from` replaced by `to`. */
static char *
link_patch(const char *from, const char *to)
{
    test_file f = test_read(TEST_KERNELS, "scale_ptx.ptx");
    char *at = strstr((char *)f.bytes, from);
    cr_assert_not_null(at, "%s", from);
    char *out = calloc(1, f.size + strlen(to) + 1);
    memcpy(out, f.bytes, (size_t)(at - (char *)f.bytes));
    strcat(out, to);
    strcat(out, at + strlen(from));
    test_file_free(&f);
    return out;
}

Test(link, ptx_is_checked_when_added)
{
    test_start();
    static const struct {
        const char *from, *to;
        CUresult rc;
        const char *log;
    } cases[] = {
        {".address_size 64", ".address_size 64\nthis is not ptx;",
         CUDA_ERROR_INVALID_PTX, "Parsing error near 'this': syntax error"},
        {".version 9.0", ".version 9.9", CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
         "Unsupported .version 9.9"},
        {".target sm_90", ".target sm_100", CUDA_ERROR_INVALID_PTX,
         "SM version specified by .target is higher"},
        {".version", "junk\n.version", CUDA_ERROR_INVALID_IMAGE,
         "is not recognized"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        link_logs g;
        CUlinkState ls = link_create(&g, 0);
        char *p = link_patch(cases[i].from, cases[i].to);
        CU_IS(cases[i].rc, link_add(ls, p));
        cr_expect(strstr(g.err, cases[i].log) != NULL, "%zu: %s", i, g.err);
        cr_expect_eq((size_t)(uintptr_t)g.vals[1], strlen(g.err) + 1,
                     "the error log's size is written back");
        free(p);
        /* A failed input is not kept: a good one still links. */
        p = link_patch("", "");
        CU_OK(link_add(ls, p));
        void *image;
        CU_OK(cuLinkComplete(ls, &image, NULL));
        CU_OK(cuLinkDestroy(ls));
        free(p);
    }
    CUlinkState ls;
    link_logs g;
    ls = link_create(&g, 1);
    CU_IS(CUDA_ERROR_INVALID_PTX, link_add(ls, ".version 9.0\n"));
    cr_expect(strstr(g.err, "Missing .target directive") != NULL, "%s", g.err);
    char *p = link_patch("", "");
    CU_OK(link_add(ls, p));
    cr_expect(strstr(g.info, "Compiling entry function 'scale' for 'sm_90'") !=
                  NULL,
              "verbose: %s", g.info);
    cr_expect_eq((size_t)(uintptr_t)g.vals[3], strlen(g.info) + 1);
    /* Other input types are beyond the fake; bad arguments are refused. */
    CU_IS(CUDA_ERROR_NOT_SUPPORTED,
          cuLinkAddData(ls, CU_JIT_INPUT_CUBIN, p, strlen(p), NULL, 0, NULL,
                        NULL));
    CU_IS(CUDA_ERROR_INVALID_VALUE,
          cuLinkAddData(ls, (CUjitInputType)99, p, strlen(p), NULL, 0, NULL,
                        NULL));
    CU_IS(CUDA_ERROR_INVALID_VALUE,
          cuLinkAddData(ls, CU_JIT_INPUT_PTX, NULL, 10, NULL, 0, NULL, NULL));
    CU_IS(
        CUDA_ERROR_INVALID_VALUE,
        cuLinkAddData(ls, CU_JIT_INPUT_PTX, p, strlen(p), NULL, 1, NULL, NULL));
    CUjit_option bad[] = {CU_JIT_ERROR_LOG_BUFFER};
    void *badv[] = {g.err};
    CU_IS(
        CUDA_ERROR_INVALID_VALUE,
        cuLinkAddData(ls, CU_JIT_INPUT_PTX, p, strlen(p), NULL, 1, bad, badv));
    CUjit_option ok[] = {CU_JIT_OPTIMIZATION_LEVEL};
    void *okv[] = {(void *)(uintptr_t)0};
    CU_OK(cuLinkAddData(ls, CU_JIT_INPUT_PTX, p, strlen(p) + 1, NULL, 1, ok,
                        okv));
    /* Two inputs that both define `scale`: nvlink refuses them. */
    void *image;
    CU_IS(CUDA_ERROR_INVALID_IMAGE, cuLinkComplete(ls, &image, NULL));
    cr_expect(strstr(g.err, "Multiple definition of 'scale'") != NULL, "%s",
              g.err);
    CU_OK(cuLinkDestroy(ls));
    free(p);
    CUjit_option unknown[] = {(CUjit_option)999};
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuLinkCreate(1, unknown, okv, &ls));
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuLinkCreate(0, NULL, NULL, NULL));
    CU_IS(CUDA_ERROR_INVALID_HANDLE, cuLinkDestroy((CUlinkState)0x10));
    CU_OK(cuCtxSetCurrent(NULL));
    CU_IS(CUDA_ERROR_INVALID_CONTEXT, cuLinkCreate(0, NULL, NULL, &ls));
}

Test(link, two_inputs_make_one_module)
{
    test_start();
    test_file a = test_read(TEST_KERNELS, "scale_ptx.ptx");
    test_file b = test_read(TEST_IMAGES, "fake_multi.ptx");
    CUlinkState ls;
    CU_OK(cuLinkCreate(0, NULL, NULL, &ls));
    CU_OK(link_add(ls, (const char *)a.bytes));
    CU_OK(link_add(ls, (const char *)b.bytes));
    void *image;
    CU_OK(cuLinkComplete(ls, &image, NULL));
    CUmodule mod;
    CU_OK(cuModuleLoadData(&mod, image));
    unsigned n = 0;
    CU_OK(cuModuleGetFunctionCount(&n, mod));
    cr_expect_eq(n, 6);
    CUfunction fn;
    CU_OK(cuModuleGetFunction(&fn, mod, "scale"));
    CU_OK(cuModuleGetFunction(&fn, mod, "big"));
    size_t off, size;
    CU_OK(cuFuncGetParamInfo(fn, 1, &off, &size));
    cr_expect(off == 4000 && size == 8);
    CU_OK(cuLinkDestroy(ls));
    test_file_free(&a);
    test_file_free(&b);
}

Test(link, load_faults_count_the_module_load_not_the_link)
{
    test_start();
    cr_assert_eq(fakecuda_inject_load_fault(1, CUDA_ERROR_INVALID_PTX), 0);
    test_file f = test_read(TEST_KERNELS, "scale_ptx.ptx");
    CUlinkState ls;
    void *image;
    CU_OK(cuLinkCreate(0, NULL, NULL, &ls));
    CU_OK(link_add(ls, (const char *)f.bytes));
    CU_OK(cuLinkComplete(ls, &image, NULL));
    CUmodule mod;
    CU_IS(CUDA_ERROR_INVALID_PTX, cuModuleLoadData(&mod, image));
    CU_OK(cuModuleLoadData(&mod, image));
    CU_OK(cuLinkDestroy(ls));
    test_file_free(&f);
}

Test(link, a_corrupt_linked_image_is_refused)
{
    test_start();
    test_file f = test_read(TEST_KERNELS, "scale_ptx.ptx");
    CUlinkState ls;
    void *image;
    size_t size;
    CU_OK(cuLinkCreate(0, NULL, NULL, &ls));
    CU_OK(link_add(ls, (const char *)f.bytes));
    CU_OK(cuLinkComplete(ls, &image, &size));
    unsigned char *copy = calloc(1, size + 64);
    CUmodule mod;
    /* Cut anywhere in the header or the kernel's body (the text ends in
     * "}\n\n" and its NUL), the rest read as zeros. A cut between the
     * PTX's directives would leave a valid text: not tried. */
    const char *body = memchr(image, '{', size);
    cr_assert_not_null(body);
    size_t from = (size_t)(body - (const char *)image);
    for (size_t keep = 0; keep + 4 < size; keep += keep < 40 ? 1 : 7) {
        if (keep >= 40 && keep < from)
            keep = from;
        memset(copy, 0, size + 64);
        memcpy(copy, image, keep);
        CUresult rc = cuModuleLoadData(&mod, copy);
        cr_expect(rc == CUDA_ERROR_INVALID_IMAGE ||
                      rc == CUDA_ERROR_INVALID_PTX,
                  "%zu of %zu bytes: %s", keep, size, test_errname(rc));
    }
    memcpy(copy, image, size);
    copy[24] = 0xff; /* the input count */
    CU_IS(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadData(&mod, copy));
    free(copy);
    CU_OK(cuLinkDestroy(ls));
    test_file_free(&f);
}
