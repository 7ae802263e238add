/* SPDX-License-Identifier: MIT */
/*
 * Images: what the fake reads out of the cubins, fatbins and PTX the build
 * makes, against layouts written out by hand from the kernels' signatures
 * (and checked against the H100's driver with cumod_driver_report).
 */
#include <stdlib.h>
#include <string.h>

#include "fake_test.h"

typedef struct image_kernel {
    const char *name;
    test_param params[8];
    size_t nparams;
} image_kernel;

/* Loads dir/file and checks its functions, in the driver's order. */
static CUmodule
image_expect(const char *dir, const char *file, const image_kernel *want,
             unsigned n)
{
    CUmodule mod = test_load(dir, file);
    unsigned count = 0;
    CU_OK(cuModuleGetFunctionCount(&count, mod));
    cr_assert_eq(count, n, "%s: %u functions, want %u", file, count, n);
    CUfunction fs[8];
    CU_OK(cuModuleEnumerateFunctions(fs, n, mod));
    for (unsigned i = 0; i < n; i++) {
        test_expect_function(fs[i], want[i].name, want[i].params,
                             want[i].nparams);
        CUfunction g;
        CU_OK(cuModuleGetFunction(&g, mod, want[i].name));
        cr_expect_eq(g, fs[i], "lookup by name gives the enumerated handle");
    }
    CUfunction g;
    CU_IS(CUDA_ERROR_NOT_FOUND, cuModuleGetFunction(&g, mod, "no_such_kernel"));
    return mod;
}

static const image_kernel image_vadd = {
    "vadd", {{0, 8}, {8, 8}, {16, 8}, {24, 4}}, 4};
static const image_kernel image_scale = {"scale", {{0, 8}, {8, 4}, {12, 4}}, 3};

Test(images, example_kernels)
{
    test_start();
    /* affine's struct {float; double; int; char} is 24 bytes, 8-aligned. */
    const image_kernel affine[] = {{"affine", {{0, 24}, {24, 8}, {32, 8}}, 3}};
    /* The driver lists axpy<float> first: the symbol table from its end. */
    const image_kernel axpy[] = {
        {"_Z4axpyIfEvT_PKS0_PS0_i", {{0, 4}, {8, 8}, {16, 8}, {24, 4}}, 4},
        {"_Z4axpyIdEvT_PKS0_PS0_i", {{0, 8}, {8, 8}, {16, 8}, {24, 4}}, 4},
    };
    const image_kernel empty[] = {{"empty", {{0, 0}}, 0}};
    image_expect(TEST_KERNELS, "affine.cubin", affine, 1);
    image_expect(TEST_KERNELS, "axpy.cubin", axpy, 2);
    image_expect(TEST_KERNELS, "empty.cubin", empty, 1);
    image_expect(TEST_KERNELS, "scale.cubin", &image_scale, 1);
    image_expect(TEST_KERNELS, "vadd.cubin", &image_vadd, 1);
    image_expect(TEST_KERNELS, "vadd_fat.fatbin", &image_vadd, 1);
    image_expect(TEST_KERNELS, "scale_ptx.ptx", &image_scale, 1);
    cr_expect_eq(fakecuda_module_count(), 7);
}

/* fake_multi.cu: every size and alignment class, five kernels. */
static const image_kernel image_multi[] = {
    {"zeta", {{0, 1}, {2, 2}, {4, 4}, {8, 8}, {16, 4}, {24, 8}, {32, 8}}, 7},
    {"alpha", {{0, 3}, {8, 16}, {24, 1}, {32, 32}, {64, 8}}, 5},
    {"middle", {{0, 8}, {8, 4}}, 2},
    {"big", {{0, 4000}, {4000, 8}}, 2},
    {"bounded", {{0, 8}}, 1},
};

static int
image_attr(CUmodule mod, const char *name, CUfunction_attribute a)
{
    CUfunction f;
    int v = -1;
    CU_OK(cuModuleGetFunction(&f, mod, name));
    CU_OK(cuFuncGetAttribute(&v, a, f));
    return v;
}

Test(images, parameter_layouts_of_every_kind)
{
    test_start();
    const char *files[] = {"fake_multi.cubin", "fake_multi.ptx",
                           "fake_multi.fatbin"};
    for (size_t i = 0; i < 3; i++) {
        CUmodule mod = image_expect(TEST_IMAGES, files[i], image_multi, 5);
        /* As the H100 reports them, from the cubin and from the JIT alike. */
        cr_expect_eq(
            image_attr(mod, "middle", CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
            1024);
        cr_expect_eq(
            image_attr(mod, "middle", CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES), 256);
        cr_expect_eq(
            image_attr(mod, "middle",
                       CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES),
            48 * 1024 - 1024);
        cr_expect_eq(
            image_attr(mod, "bounded", CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
            128);
        cr_expect_eq(image_attr(mod, "zeta", CU_FUNC_ATTRIBUTE_PTX_VERSION),
                     90);
        cr_expect_eq(image_attr(mod, "zeta", CU_FUNC_ATTRIBUTE_BINARY_VERSION),
                     90);
        CU_OK(cuModuleUnload(mod));
    }
    CUmodule mod = test_load(TEST_IMAGES, "fake_multi.cubin");
    cr_expect_eq(image_attr(mod, "middle", CU_FUNC_ATTRIBUTE_NUM_REGS), 16);
    cr_expect_eq(image_attr(mod, "alpha", CU_FUNC_ATTRIBUTE_NUM_REGS), 12);
    CUfunction bounded;
    CU_OK(cuModuleGetFunction(&bounded, mod, "bounded"));
    CUdeviceptr p = 0;
    void *args[] = {&p};
    CU_IS(CUDA_ERROR_INVALID_VALUE,
          cuLaunchKernel(bounded, 1, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    CU_OK(cuLaunchKernel(bounded, 1, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
    int v;
    CU_IS(CUDA_ERROR_INVALID_VALUE,
          cuFuncGetAttribute(&v, (CUfunction_attribute)999, bounded));
}

/* Loads a file on a device of the given SM: the result, and the image's SM. */
static CUresult
image_load_on(int sm, const char *dir, const char *file, int *binary)
{
    cr_assert_eq(fakecuda_set_sm(sm), 0);
    test_file f = test_read(dir, file);
    CUmodule mod;
    CUresult rc = cuModuleLoadData(&mod, f.bytes);
    test_file_free(&f);
    *binary = -1;
    if (rc == CUDA_SUCCESS) {
        CUfunction fn;
        CU_OK(cuModuleEnumerateFunctions(&fn, 1, mod));
        CU_OK(cuFuncGetAttribute(binary, CU_FUNC_ATTRIBUTE_BINARY_VERSION, fn));
        CU_OK(cuModuleUnload(mod));
    }
    return rc;
}

Test(images, fatbin_picks_the_image_for_the_device)
{
    test_start();
    static const struct {
        int sm;
        CUresult rc;
        int binary;
    } cases[] = {
        {90, CUDA_SUCCESS, 90}, /* its own SASS */
        {86, CUDA_SUCCESS, 80}, /* same major, lower minor */
        {89, CUDA_SUCCESS, 80},
        {80, CUDA_SUCCESS, 80},
        {100, CUDA_SUCCESS, 100}, /* no SASS for 10.x: compute_90 PTX, JIT */
        {120, CUDA_SUCCESS, 120},
        {75, CUDA_ERROR_NO_BINARY_FOR_GPU, -1},
        {70, CUDA_ERROR_NO_BINARY_FOR_GPU, -1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int binary;
        CUresult rc = image_load_on(cases[i].sm, TEST_KERNELS,
                                    "vadd_fat.fatbin", &binary);
        cr_expect_eq(rc, cases[i].rc, "sm_%d: %s", cases[i].sm,
                     test_errname(rc));
        cr_expect_eq(binary, cases[i].binary, "sm_%d: image for sm_%d",
                     cases[i].sm, binary);
    }
    /* nvcc's default compresses the PTX; the fake cannot read it. */
    int binary;
    CU_OK(image_load_on(90, TEST_IMAGES, "vadd_zstd.fatbin", &binary));
    CU_IS(CUDA_ERROR_NO_BINARY_FOR_GPU,
          image_load_on(100, TEST_IMAGES, "vadd_zstd.fatbin", &binary));
}

Test(images, cubins_run_on_their_sm_family_only)
{
    test_start();
    static const struct {
        const char *file;
        int sm;
        CUresult rc;
    } cases[] = {
        {"vadd.sm_80.cubin", 90, CUDA_ERROR_NO_BINARY_FOR_GPU},
        {"vadd.sm_80.cubin", 80, CUDA_SUCCESS},
        {"vadd.sm_80.cubin", 86, CUDA_SUCCESS},
        {"vadd.sm_86.cubin", 80, CUDA_ERROR_NO_BINARY_FOR_GPU},
        {"vadd.sm_86.cubin", 89, CUDA_SUCCESS},
        {"vadd.sm_90a.cubin", 90, CUDA_SUCCESS},
        {"vadd.sm_90a.cubin", 91,
         CUDA_ERROR_NO_BINARY_FOR_GPU}, /* "a": exactly 9.0 */
        {"vadd.sm_100.cubin", 90, CUDA_ERROR_NO_BINARY_FOR_GPU},
        {"vadd.sm_100.cubin", 103, CUDA_SUCCESS},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int binary;
        CUresult rc =
            image_load_on(cases[i].sm, TEST_IMAGES, cases[i].file, &binary);
        cr_expect_eq(rc, cases[i].rc, "%s on sm_%d: %s", cases[i].file,
                     cases[i].sm, test_errname(rc));
    }
    int binary;
    CU_OK(image_load_on(91, TEST_KERNELS, "vadd.cubin", &binary));
    cr_expect_eq(binary, 90);
}

/* Loads PTX text with both JIT logs; returns the result. */
static CUresult
image_jit(const char *text, char *err, char *info, int verbose, size_t *err_len)
{
    CUjit_option opts[] = {
        CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
        CU_JIT_LOG_VERBOSE};
    void *vals[] = {err, (void *)(uintptr_t)1024, info, (void *)(uintptr_t)1024,
                    (void *)(uintptr_t)verbose};
    CUmodule mod;
    CUresult rc = cuModuleLoadDataEx(&mod, text, 5, opts, vals);
    *err_len = (size_t)(uintptr_t)vals[1];
    if (rc == CUDA_SUCCESS)
        CU_OK(cuModuleUnload(mod));
    return rc;
}

/* The example PTX with `from` replaced by `to`. */
static char *
image_ptx_patch(const char *from, const char *to)
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

Test(images, ptx_errors_come_with_a_jit_log)
{
    test_start();
    char err[1024], info[1024];
    size_t len;
    char *p = image_ptx_patch(".address_size 64",
                              ".address_size 64\nthis is not ptx;");
    CU_IS(CUDA_ERROR_INVALID_PTX, image_jit(p, err, info, 0, &len));
    cr_expect(
        strstr(err,
               "line 12; fatal   : Parsing error near 'this': syntax error") !=
            NULL,
        "%s", err);
    cr_expect_eq(len, strlen(err) + 1,
                 "the size slot says how much was written");
    free(p);
    p = image_ptx_patch(".version 9.0", ".version 9.9");
    CU_IS(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, image_jit(p, err, info, 0, &len));
    cr_expect(
        strstr(err, "Unsupported .version 9.9; current version is '9.0'") !=
            NULL,
        "%s", err);
    free(p);
    p = image_ptx_patch(".target sm_90", ".target sm_100");
    CU_IS(CUDA_ERROR_INVALID_PTX, image_jit(p, err, info, 0, &len));
    cr_expect(strstr(err, "SM version specified by .target is higher") != NULL,
              "%s", err);
    free(p);
    p = image_ptx_patch(".version", "junk\n.version");
    CU_IS(CUDA_ERROR_INVALID_IMAGE, image_jit(p, err, info, 0, &len));
    cr_expect(strstr(err, "is not recognized") != NULL, "%s", err);
    free(p);
    CU_IS(CUDA_ERROR_INVALID_PTX,
          image_jit(".version 9.0\n", err, info, 0, &len));
    cr_expect(strstr(err, "Missing .target directive") != NULL, "%s", err);
    p = image_ptx_patch("{", "{\n{");
    CU_IS(CUDA_ERROR_INVALID_PTX, image_jit(p, err, info, 0, &len));
    free(p);
    /* A module without kernels loads, with none. */
    CU_OK(image_jit(".version 9.0\n.target sm_90\n.address_size 64\n", err,
                    info, 0, &len));
    cr_expect_eq(err[0], '\0');
    p = image_ptx_patch("", "");
    CU_OK(image_jit(p, err, info, 1, &len));
    cr_expect(strstr(info, "Compiling entry function 'scale' for 'sm_90'") !=
                  NULL,
              "%s", info);
    free(p);
    /* A .target below the device is compiled up. */
    cr_assert_eq(fakecuda_set_sm(100), 0);
    CU_OK(image_jit(".version 9.0\n.target sm_80\n.visible .entry k(.param "
                    ".u32 k_p)\n{\nret;\n}\n",
                    err, info, 0, &len));
}

Test(images, malformed_images_get_the_drivers_codes)
{
    test_start();
    CUmodule mod;
    static const unsigned char zeros[4096];
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuModuleLoadData(&mod, NULL));
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuModuleLoadData(NULL, zeros));
    CU_IS(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadData(&mod, zeros));
    CU_IS(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadData(&mod, "cumod junk bytes"));
    test_file cubin = test_read(TEST_KERNELS, "vadd.cubin");
    unsigned char *copy = calloc(1, cubin.size + 65536);
    memcpy(copy, cubin.bytes, 100);
    CU_IS(CUDA_ERROR_INVALID_IMAGE,
          cuModuleLoadData(&mod, copy)); /* truncated, zeros after */
    memcpy(copy, cubin.bytes, cubin.size);
    copy[18] = 62; /* e_machine: x86-64 */
    CU_IS(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadData(&mod, copy));
    copy[18] = 190;
    CU_OK(cuModuleLoadData(&mod, copy));
    free(copy);
    test_file_free(&cubin);

    /* A fatbin whose only SASS is for another major SM, and no PTX. */
    test_file fat = test_read(TEST_KERNELS, "vadd_fat.fatbin");
    uint64_t size;
    memcpy(&size, fat.bytes + 8, 8);
    size_t first = 16, len = 64 + (size_t)fat.bytes[16 + 8] +
                             ((size_t)fat.bytes[16 + 9] << 8);
    cr_assert_eq(fat.bytes[first], 2, "the first entry is sm_80 SASS");
    size = len;
    memcpy(fat.bytes + 8, &size, 8);
    CU_IS(CUDA_ERROR_NO_BINARY_FOR_GPU, cuModuleLoadData(&mod, fat.bytes));
    /* An entry header of zeros, as in a truncated, zero-padded file (the
     * real driver 580 never returns from this one; the fake says no). */
    size = 8296;
    memcpy(fat.bytes + 8, &size, 8);
    memset(fat.bytes + 16 + len, 0, 64);
    CU_IS(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadData(&mod, fat.bytes));
    test_file_free(&fat);
}

Test(images, stale_handles_are_refused_not_followed)
{
    test_start();
    CUmodule mod = test_load(TEST_KERNELS, "vadd.cubin");
    CUfunction f, g;
    CU_OK(cuModuleGetFunction(&f, mod, "vadd"));
    CU_OK(cuModuleUnload(mod));
    unsigned n;
    size_t off;
    const char *name;
    int v;
    CU_IS(CUDA_ERROR_INVALID_HANDLE, cuModuleUnload(mod));
    CU_IS(CUDA_ERROR_INVALID_HANDLE, cuModuleGetFunction(&g, mod, "vadd"));
    CU_IS(CUDA_ERROR_INVALID_HANDLE, cuModuleGetFunctionCount(&n, mod));
    CU_IS(CUDA_ERROR_INVALID_HANDLE, cuModuleEnumerateFunctions(&g, 1, mod));
    CU_IS(CUDA_ERROR_INVALID_HANDLE, cuFuncGetParamInfo(f, 0, &off, NULL));
    CU_IS(CUDA_ERROR_INVALID_HANDLE, cuFuncGetName(&name, f));
    CU_IS(CUDA_ERROR_INVALID_HANDLE,
          cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
    CU_IS(CUDA_ERROR_INVALID_HANDLE,
          cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    /* The slot is reused by the next load; the old handles stay dead. */
    CUmodule again = test_load(TEST_KERNELS, "vadd.cubin");
    cr_expect_neq(again, mod);
    CU_IS(CUDA_ERROR_INVALID_HANDLE, cuFuncGetName(&name, f));
    CU_IS(CUDA_ERROR_INVALID_HANDLE, cuModuleUnload(mod));
    CU_IS(CUDA_ERROR_INVALID_HANDLE, cuModuleUnload((CUmodule)0xdeadbeef));
    CU_IS(CUDA_ERROR_INVALID_HANDLE,
          cuFuncGetName(&name, (CUfunction)(uintptr_t)again));
    CU_OK(cuModuleUnload(again));
}

Test(images, load_failures_on_request)
{
    setenv("CUMOD_FAKE_FAULT", "load:2:CUDA_ERROR_NO_BINARY_FOR_GPU", 1);
    test_start();
    test_file f = test_read(TEST_KERNELS, "vadd.cubin");
    CUmodule mod;
    CU_OK(cuModuleLoadData(&mod, f.bytes));
    CU_IS(CUDA_ERROR_NO_BINARY_FOR_GPU, cuModuleLoadData(&mod, f.bytes));
    CU_OK(cuModuleLoadData(&mod, f.bytes));
    cr_assert_eq(fakecuda_inject_fault(FAKECUDA_FAULT_LOAD, 1), 0);
    CU_IS(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadData(&mod, f.bytes));
    cr_assert_eq(fakecuda_inject_load_fault(2, CUDA_ERROR_INVALID_PTX), 0);
    CU_OK(cuModuleLoadData(&mod, f.bytes));
    CU_IS(CUDA_ERROR_INVALID_PTX, cuModuleLoadData(&mod, f.bytes));
    cr_assert_eq(fakecuda_inject_fault(FAKECUDA_FAULT_LOAD, 1), 0);
    fakecuda_clear_faults();
    CU_OK(cuModuleLoadData(&mod, f.bytes));
    cr_expect_eq(fakecuda_module_count(), 4);
    test_file_free(&f);
}
