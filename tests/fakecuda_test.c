/* SPDX-License-Identifier: MIT */
/*
 * tests/fakecuda: the fake driver's entry points, initialisation, devices,
 * contexts and memory. Its other suites, in tests/fakecuda/test/, cover
 * work and faults (work_test.c), images (image_test.c) and malformed input
 * (fuzz_test.c). Each test runs in its own process, on a fresh library.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "exec/driver.h"
#include "fake_test.h"

/* ---- cuGetProcAddress -----------------------------------------------------
 */

Test(proc, resolves_every_driver_sym)
{
    /* Each row the daemon resolves gives the function cuda.h names for it. */
#define TEST_SYM(field, name, proto)                                           \
    do {                                                                       \
        void *fn = NULL;                                                       \
        CUdriverProcAddressQueryResult status =                                \
            CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                              \
        CU_OK(cuGetProcAddress(name, &fn, CUMOD_CUDA_VERSION, 0, &status));    \
        cr_expect_eq(status, CU_GET_PROC_ADDRESS_SUCCESS, "%s", name);         \
        cr_expect_eq(fn, (void *)proto, "%s resolves to another function",     \
                     name);                                                    \
    } while (0);
    CUMOD_DRIVER_SYMS(TEST_SYM)
    /* The optional ones too: the fake has them all. */
#define TEST_OPTIONAL_SYM(field, name, proto, fallback)                        \
    TEST_SYM(field, name, proto)
    CUMOD_DRIVER_OPTIONAL_SYMS(TEST_OPTIONAL_SYM)
#undef TEST_OPTIONAL_SYM
#undef TEST_SYM
}

Test(proc, refuses_unknown_names_and_versions)
{
    void *fn = (void *)1;
    CUdriverProcAddressQueryResult status;
    CU_IS(CUDA_ERROR_NOT_FOUND,
          cuGetProcAddress("cuNoSuchCall", &fn, 12040, 0, &status));
    cr_expect_eq(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    cr_expect_null(fn);
    /* _v2 names are not base names: the driver picks the version. */
    CU_IS(CUDA_ERROR_NOT_FOUND,
          cuGetProcAddress("cuMemAlloc_v2", &fn, 12040, 0, &status));
    CU_IS(CUDA_ERROR_NOT_FOUND,
          cuGetProcAddress("cuInit", &fn, 13010, 0, &status));
    cr_expect_eq(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    /* cuFuncGetParamInfo came with 12.4. */
    CU_IS(CUDA_ERROR_NOT_FOUND,
          cuGetProcAddress("cuFuncGetParamInfo", &fn, 12030, 0, &status));
    cr_expect_eq(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    CU_IS(CUDA_ERROR_INVALID_VALUE,
          cuGetProcAddress("cuInit", &fn, 12040, 4, &status));
    CU_IS(CUDA_ERROR_INVALID_VALUE,
          cuGetProcAddress(NULL, &fn, 12040, 0, &status));
}

Test(proc, works_through_dlopen_like_the_daemon)
{
    void *lib = dlopen(CUMOD_TEST_FAKECUDA_LIB, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(lib, "%s", dlerror());
    CUresult (*gpa2)(const char *, void **, int, cuuint64_t,
                     CUdriverProcAddressQueryResult *);
    CUresult (*gpa1)(const char *, void **, int, cuuint64_t);
    *(void **)&gpa2 = dlsym(lib, "cuGetProcAddress_v2");
    *(void **)&gpa1 = dlsym(lib, "cuGetProcAddress");
    cr_assert(gpa2 != NULL && gpa1 != NULL,
              "both ABIs of cuGetProcAddress are exported");
    CUresult (*version)(int *);
    CU_OK(gpa1("cuDriverGetVersion", (void **)&version, CUMOD_CUDA_VERSION, 0));
    int v = 0;
    CU_OK(version(&v));
    cr_expect_eq(v, FAKECUDA_DRIVER_VERSION);
    /* Asked at 11.3, "cuGetProcAddress" is the v1 ABI. */
    void *fn = NULL;
    CU_OK(gpa2("cuGetProcAddress", &fn, 11030, 0, NULL));
    cr_expect_eq(fn, (void *)gpa1);
    CU_OK(gpa2("cuGetProcAddress", &fn, CUMOD_CUDA_VERSION, 0, NULL));
    cr_expect_eq(fn, (void *)gpa2);
    /* Only the API is exported: internals stay hidden. */
    cr_expect_null(dlsym(lib, "fake_lock"));
    cr_expect_not_null(dlsym(lib, "fakecuda_reset"));
    dlclose(lib);
}

/* ---- initialisation and configuration --------------------------------------
 */

Test(init, calls_before_cuinit_fail)
{
    int n = 0;
    CUdeviceptr p;
    CUmodule mod;
    CU_IS(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGetCount(&n));
    CU_IS(CUDA_ERROR_NOT_INITIALIZED, cuMemAlloc(&p, 16));
    CU_IS(CUDA_ERROR_NOT_INITIALIZED, cuModuleLoadData(&mod, "x"));
    CU_IS(CUDA_ERROR_NOT_INITIALIZED, cuCtxSynchronize());
    /* These need no initialisation. */
    const char *s = NULL;
    CU_OK(cuGetErrorName(CUDA_ERROR_NO_BINARY_FOR_GPU, &s));
    cr_expect_str_eq(s, "CUDA_ERROR_NO_BINARY_FOR_GPU");
    CU_OK(cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s));
    cr_expect_str_eq(s, "invalid argument");
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuGetErrorName((CUresult)12345, &s));
    CU_OK(cuDriverGetVersion(&n));
    cr_expect_eq(n, 13000);
}

Test(init, flags_and_repeats)
{
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuInit(1));
    CU_OK(cuInit(0));
    CU_OK(cuInit(0));
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuInit(2));
    fakecuda_reset();
    int n;
    CU_IS(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGetCount(&n));
}

Test(init, environment_configures_the_device)
{
    setenv("CUMOD_FAKE_SM", "86", 1);
    setenv("CUMOD_FAKE_MEM", "3m", 1);
    setenv("CUMOD_FAKE_DEVICES", "2", 1);
    CU_OK(cuInit(0));
    int n = 0, major = 0, minor = 0;
    size_t total = 0;
    char name[128];
    CU_OK(cuDeviceGetCount(&n));
    cr_expect_eq(n, 2);
    CU_OK(cuDeviceGetAttribute(
        &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 1));
    CU_OK(cuDeviceGetAttribute(
        &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 1));
    cr_expect(major == 8 && minor == 6);
    CU_OK(cuDeviceTotalMem(&total, 0));
    cr_expect_eq(total, (size_t)3 << 20);
    CU_OK(cuDeviceGetName(name, sizeof(name), 0));
    cr_expect(strstr(name, "fakecuda") != NULL,
              "a fake says so in its name: %s", name);
}

Test(init, api_settings_win_over_environment)
{
    setenv("CUMOD_FAKE_SM", "86", 1);
    cr_assert_eq(fakecuda_set_sm(100), 0);
    cr_assert_eq(fakecuda_set_sm(5), -1);
    CU_OK(cuInit(0));
    int major = 0;
    CU_OK(cuDeviceGetAttribute(
        &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
    cr_expect_eq(major, 10);
}

Test(init, no_devices)
{
    setenv("CUMOD_FAKE_DEVICES", "0", 1);
    CU_IS(CUDA_ERROR_NO_DEVICE, cuInit(0));
    int n;
    CU_IS(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGetCount(&n));
}

static void
init_bad_env(void *arg)
{
    CUresult *rc = arg;
    *rc = cuInit(0);
}

Test(init, bad_environment_names_the_variable)
{
    static const char *const cases[][2] = {
        {"CUMOD_FAKE_SM", "9x"},
        {"CUMOD_FAKE_SM", "300"},
        {"CUMOD_FAKE_MEM", "0"},
        {"CUMOD_FAKE_MEM", "12q"},
        {"CUMOD_FAKE_DEVICES", "17"},
        {"CUMOD_FAKE_FAULT", "launch:0"},
        {"CUMOD_FAKE_FAULT", "bogus:1"},
        {"CUMOD_FAKE_FAULT", "load:1:NOT_A_CODE"},
        {"CUMOD_FAKE_LOG", "/nonexistent/dir/fake.log"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fakecuda_reset();
        setenv(cases[i][0], cases[i][1], 1);
        CUresult rc = CUDA_SUCCESS;
        char *err = test_capture_stderr(init_bad_env, &rc);
        cr_expect_eq(rc, CUDA_ERROR_INVALID_VALUE, "%s=%s", cases[i][0],
                     cases[i][1]);
        cr_expect(strstr(err, cases[i][0]) != NULL, "stderr names %s: '%s'",
                  cases[i][0], err);
        cr_expect_eq(strchr(err, '\n'), err + strlen(err) - 1, "one line: '%s'",
                     err);
        free(err);
        unsetenv(cases[i][0]);
    }
    /* With the environment fixed, the same process initialises. */
    fakecuda_reset();
    CU_OK(cuInit(0));
}

/* ---- devices and contexts
 * ----------------------------------------------------- */

Test(device, answers_like_an_h100)
{
    CU_OK(cuInit(0));
    static const struct {
        CUdevice_attribute a;
        int v;
    } want[] = {
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0},
        {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132},
        {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024},
        {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024},
        {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, 1024},
        {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64},
        {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647},
        {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535},
        {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, 65535},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 49152},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 232448},
        {CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        int v = -1;
        CU_OK(cuDeviceGetAttribute(&v, want[i].a, 0));
        cr_expect_eq(v, want[i].v, "attribute %d: %d, want %d", (int)want[i].a,
                     v, want[i].v);
    }
    int v;
    CUdevice dev;
    char name[64];
    size_t total;
    CU_IS(CUDA_ERROR_INVALID_VALUE,
          cuDeviceGetAttribute(&v, (CUdevice_attribute)0x7fff, 0));
    CU_IS(CUDA_ERROR_INVALID_DEVICE,
          cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 1));
    CU_IS(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&dev, 1));
    CU_IS(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&dev, -1));
    CU_IS(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetName(name, sizeof(name), 3));
    CU_OK(cuDeviceGetName(name, sizeof(name), 0));
    cr_expect_str_eq(name, "NVIDIA H100 80GB HBM3 (fakecuda)");
    CU_OK(cuDeviceTotalMem(&total, 0));
    cr_expect_eq(total, (size_t)80 << 30);
}

Test(device, uuid_per_ordinal)
{
    CUuuid a, b, again;
    setenv("CUMOD_FAKE_DEVICES", "2", 1);
    CU_IS(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGetUuid(&a, 0));
    CU_OK(cuInit(0));
    CU_OK(cuDeviceGetUuid(&a, 0));
    CU_OK(cuDeviceGetUuid(&b, 1));
    CU_OK(cuDeviceGetUuid(&again, 0));
    cr_expect(memcmp(a.bytes, b.bytes, 16) != 0, "two devices, two UUIDs");
    cr_expect(memcmp(a.bytes, again.bytes, 16) == 0, "the same every time");
    CU_IS(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetUuid(&a, 2));
    CU_IS(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetUuid(&a, -1));
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuDeviceGetUuid(NULL, 0));
}

/* What cumodd puts on the channel for each device, as nvidia-smi prints
 * it, through the driver table it resolves the way the executor does. */
Test(device, uuid_as_cumodd_writes_it)
{
    cumod_driver drv;
    char msg[512], u0[48], u1[48], small[40];
    setenv("CUMOD_FAKE_DEVICES", "2", 1);
    cr_assert_eq(
        cumod__driver_open(&drv, CUMOD_TEST_FAKECUDA_LIB, msg, sizeof(msg)),
        CUMOD_OK, "%s", msg);
    cr_assert_not_null(drv.device_get_uuid);
    CU_OK(drv.init(0));
    cumod__driver_device_uuid(&drv, 0, u0, sizeof(u0));
    cumod__driver_device_uuid(&drv, 1, u1, sizeof(u1));
    cr_expect_str_eq(u0, "GPU-fa6ec0da-c0de-4000-8000-000000000000");
    cr_expect_str_eq(u1, "GPU-fa6ec0da-c0de-4000-8000-000000000001");
    /* No such device, too little room, no entry point: "". */
    cumod__driver_device_uuid(&drv, 7, u1, sizeof(u1));
    cr_expect_str_eq(u1, "");
    cumod__driver_device_uuid(&drv, 0, small, sizeof(small));
    cr_expect_str_eq(small, "");
    drv.device_get_uuid = NULL;
    cumod__driver_device_uuid(&drv, 0, u0, sizeof(u0));
    cr_expect_str_eq(u0, "");
    cumod__driver_close(&drv);
    static const unsigned char ff[16] = {0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa,
                                         0x99, 0x88, 0x77, 0x66, 0x55, 0x44,
                                         0x33, 0x22, 0x11, 0x00};
    cumod__driver_uuid_format(ff, u0, 41);
    cr_expect_str_eq(u0, "GPU-ffeeddcc-bbaa-9988-7766-554433221100");
}

Test(context, primary_context_is_refcounted)
{
    CUcontext a = NULL, b = NULL, c = NULL;
    CU_OK(cuInit(0));
    CU_OK(cuDevicePrimaryCtxRetain(&a, 0));
    CU_OK(cuDevicePrimaryCtxRetain(&b, 0));
    cr_expect_eq(a, b, "one primary context per device");
    cr_expect_eq(fakecuda_primary_refs(0), 2);
    CU_OK(cuCtxSetCurrent(a));
    CUdeviceptr p;
    CU_OK(cuMemAlloc(&p, 64));
    CU_OK(cuDevicePrimaryCtxRelease(0));
    CU_OK(cuMemFree(p)); /* still alive: one reference left */
    CU_OK(cuMemAlloc(&p, 64));
    CU_OK(cuDevicePrimaryCtxRelease(0));
    cr_expect_eq(fakecuda_primary_refs(0), 0);
    cr_expect_eq(fakecuda_allocation_count(), 0,
                 "the context's memory went with it");
    CU_IS(CUDA_ERROR_INVALID_CONTEXT, cuMemAlloc(&p, 64));
    CU_IS(CUDA_ERROR_INVALID_CONTEXT, cuDevicePrimaryCtxRelease(0));
    CU_OK(cuDevicePrimaryCtxRetain(&c, 0));
    CU_IS(CUDA_ERROR_INVALID_CONTEXT, cuCtxSetCurrent(a));
    CU_OK(cuCtxSetCurrent(c));
    CU_OK(cuMemAlloc(&p, 64));
    CU_IS(CUDA_ERROR_INVALID_DEVICE, cuDevicePrimaryCtxRetain(&c, 1));
}

static void *
context_other_thread(void *arg)
{
    CUdeviceptr p;
    *(CUresult *)arg = cuMemAlloc(&p, 64);
    return NULL;
}

Test(context, calls_need_a_current_context)
{
    CU_OK(cuInit(0));
    CUcontext ctx;
    CUdeviceptr p;
    CUmodule mod;
    CUstream s;
    size_t fr, total;
    CU_OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU_IS(CUDA_ERROR_INVALID_CONTEXT, cuMemAlloc(&p, 64));
    CU_IS(CUDA_ERROR_INVALID_CONTEXT, cuModuleLoadData(&mod, "x"));
    CU_IS(CUDA_ERROR_INVALID_CONTEXT, cuMemGetInfo(&fr, &total));
    CU_IS(CUDA_ERROR_INVALID_CONTEXT, cuStreamCreate(&s, 0));
    CU_IS(CUDA_ERROR_INVALID_CONTEXT, cuCtxSetCurrent((CUcontext)0x1234));
    CU_OK(cuCtxSetCurrent(ctx));
    CU_OK(cuMemAlloc(&p, 64));
    /* The current context is per thread, as in the real driver. */
    pthread_t t;
    CUresult rc = CUDA_SUCCESS;
    pthread_create(&t, NULL, context_other_thread, &rc);
    pthread_join(t, NULL);
    cr_expect_eq(rc, CUDA_ERROR_INVALID_CONTEXT);
}

/* ---- memory
 * ---------------------------------------------------------------------- */

Test(memory, copies_round_trip)
{
    test_start();
    unsigned char in[1000], out[1000];
    for (size_t i = 0; i < sizeof(in); i++)
        in[i] = (unsigned char)(i * 13 + 7);
    CUdeviceptr a, b;
    CU_OK(cuMemAlloc(&a, sizeof(in)));
    CU_OK(cuMemAlloc(&b, sizeof(in)));
    cr_expect_eq(a % 256, 0, "device pointers are 256-byte aligned");
    CU_OK(cuMemcpyDtoH(out, a, sizeof(out)));
    cr_expect_eq(out[0] | out[999], 0, "allocations start zeroed");
    CU_OK(cuMemcpyHtoD(a, in, sizeof(in)));
    CU_OK(cuMemcpyDtoD(b + 100, a, 900));
    CU_OK(cuMemcpyDtoH(out, b + 100, 900));
    cr_expect_arr_eq(out, in, 900);
    CU_OK(cuMemsetD8(a + 10, 0xab, 20));
    CU_OK(cuMemcpyDtoH(out, a, 40));
    cr_expect(out[9] == in[9] && out[10] == 0xab && out[29] == 0xab &&
              out[30] == in[30]);

    fakecuda_copy c;
    cr_assert_eq(fakecuda_copy_count(), 6);
    cr_assert_eq(fakecuda_copy_get(1, &c), 0);
    cr_expect(c.kind == FAKECUDA_COPY_HTOD && c.dst == a &&
              c.src == (uintptr_t)in && c.bytes == 1000 && !c.async &&
              c.completed);
    cr_assert_eq(fakecuda_copy_get(4, &c), 0);
    cr_expect(c.kind == FAKECUDA_COPY_MEMSET && c.dst == a + 10 &&
              c.value == 0xab && c.bytes == 20);
    cr_expect_eq(fakecuda_copy_get(6, &c), -1);
}

Test(memory, ranges_must_lie_in_one_allocation)
{
    test_start();
    unsigned char host[1024] = {0};
    CUdeviceptr a, b;
    CU_OK(cuMemAlloc(&a, 256));
    CU_OK(cuMemAlloc(&b, 256));
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(a, host, 257));
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(a + 255, host, 2));
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH(host, a + 128, 256));
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoD(a, b + 8, 256));
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemsetD8(a + 200, 0, 100));
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD((CUdeviceptr)0x1000, host, 4));
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(a, NULL, 4));
    CU_OK(cuMemcpyHtoD(a + 255, host, 1));
    CU_OK(cuMemcpyHtoD(a, host, 0));
    cr_expect_eq(fakecuda_copy_count(), 1,
                 "rejected and empty copies are not recorded");
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemFree(a + 8));
    CU_OK(cuMemFree(a));
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemFree(a));
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(a, host, 4));
    CU_OK(cuMemFree(0));
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemAlloc(&a, 0));
}

Test(memory, accounting_and_out_of_memory)
{
    cr_assert_eq(fakecuda_set_memory(1 << 20), 0);
    test_start();
    size_t fr, total;
    CUdeviceptr a, b, c;
    CU_OK(cuMemGetInfo(&fr, &total));
    cr_expect(fr == 1 << 20 && total == 1 << 20);
    CU_OK(cuMemAlloc(&a, 768 << 10));
    CU_OK(cuMemGetInfo(&fr, &total));
    cr_expect_eq(fr, 256 << 10);
    CU_IS(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&b, 512 << 10));
    CU_OK(cuMemAlloc(&b, 256 << 10));
    cr_expect_eq(fakecuda_allocation_count(), 2);
    cr_expect_eq(fakecuda_allocated_bytes(), 1 << 20);
    CU_OK(cuMemFree(a));
    CU_OK(cuMemAlloc(&c, 512 << 10));
    CU_OK(cuMemGetInfo(&fr, &total));
    cr_expect_eq(fr, 256 << 10);
}

Test(memory, injected_out_of_memory)
{
    test_start();
    CUdeviceptr p;
    cr_assert_eq(fakecuda_inject_fault(FAKECUDA_FAULT_ALLOC, 2), 0);
    CU_OK(cuMemAlloc(&p, 16));
    CU_IS(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&p, 16));
    CU_OK(cuMemAlloc(&p, 16));
    cr_expect_eq(fakecuda_sticky_error(), CUDA_SUCCESS,
                 "out of memory is not sticky");
}

Test(memory, injected_out_of_memory_from_environment)
{
    setenv("CUMOD_FAKE_FAULT", "alloc:1,alloc:3", 1);
    test_start();
    CUdeviceptr p;
    CU_IS(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&p, 16));
    CU_OK(cuMemAlloc(&p, 16));
    CU_IS(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&p, 16));
    CU_OK(cuMemAlloc(&p, 16));
}

Test(memory, host_registration)
{
    test_start();
    char *page = aligned_alloc(4096, 16384);
    cr_assert_not_null(page);
    CU_IS(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, cuMemHostUnregister(page));
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemHostRegister(page, 8192, 0x80));
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemHostRegister(page, 0, 0));
    CU_OK(cuMemHostRegister(page, 8192, CU_MEMHOSTREGISTER_PORTABLE));
    CU_IS(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
          cuMemHostRegister(page + 4096, 8192, 0));
    CU_OK(cuMemHostRegister(page + 8192, 8192, 0));
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemHostUnregister(page + 4096));
    CU_OK(cuMemHostUnregister(page));
    CU_IS(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, cuMemHostUnregister(page));
    CU_OK(cuMemHostUnregister(page + 8192));
    free(page);
}
