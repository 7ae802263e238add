/* SPDX-License-Identifier: MIT */
/*
 * Launches (the driver's checks and the packed parameter buffer), sticky
 * faults (by count, by name, by an image's marker), the crash file, and
 * the log file.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fake_test.h"

Test(launch, packs_vadd_parameters)
{
    test_start();
    CUfunction vadd = test_function("vadd.cubin", "vadd");
    CUdeviceptr a = 0x1111222233334444, b = 0x5555666677778888,
                c = 0x0102030405060708;
    int n = 0x0a0b0c0d;
    void *args[] = {&a, &b, &c, &n};
    CUstream s;
    CU_OK(cuStreamCreate(&s, 0));
    CU_OK(cuLaunchKernel(vadd, 4, 2, 1, 256, 1, 1, 128, s, args, NULL));
    unsigned char want[28];
    memcpy(want, &a, 8);
    memcpy(want + 8, &b, 8);
    memcpy(want + 16, &c, 8);
    memcpy(want + 24, &n, 4);
    fakecuda_launch l;
    cr_assert_eq(fakecuda_launch_count(), 1);
    cr_assert_eq(fakecuda_launch_get(0, &l), 0);
    cr_expect_str_eq(l.function, "vadd");
    cr_expect(l.grid[0] == 4 && l.grid[1] == 2 && l.grid[2] == 1);
    cr_expect(l.block[0] == 256 && l.block[1] == 1 && l.block[2] == 1);
    cr_expect(l.shared_mem == 128 && l.stream == s);
    cr_assert_eq(l.params_size, sizeof(want));
    cr_expect_arr_eq(l.params, want, sizeof(want));
}

Test(launch, packs_struct_and_template_parameters)
{
    test_start();
    /* affine's struct as the device ABI lays it out: 24 bytes. */
    struct {
        float a;
        double b;
        int n;
        char tag;
    } p = {1.5f, -2.25, 7, 'q'};
    memset(&p, 0, sizeof(p)); /* zero the padding, then set the fields */
    p.a = 1.5f, p.b = -2.25, p.n = 7, p.tag = 'q';
    cr_assert_eq(sizeof(p), 24);
    CUdeviceptr x = 0xa0a0a0a0a0a0a0a0, y = 0xb0b0b0b0b0b0b0b0;
    void *args[] = {&p, &x, &y};
    CUfunction affine = test_function("affine.cubin", "affine");
    CU_OK(cuLaunchKernel(affine, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    unsigned char want[40];
    memcpy(want, &p, 24);
    memcpy(want + 24, &x, 8);
    memcpy(want + 32, &y, 8);
    fakecuda_launch l;
    cr_assert_eq(fakecuda_launch_get(0, &l), 0);
    cr_assert_eq(l.params_size, 40);
    cr_expect_arr_eq(l.params, want, 40);

    /* axpy<float>: a float at 0, then 4 bytes of zeroed padding. */
    CUfunction axpyf = test_function("axpy.cubin", "_Z4axpyIfEvT_PKS0_PS0_i");
    float a = 3.0f;
    int n = 99;
    void *args2[] = {&a, &x, &y, &n};
    CU_OK(cuLaunchKernel(axpyf, 1, 1, 1, 1, 1, 1, 0, NULL, args2, NULL));
    unsigned char want2[28] = {0};
    memcpy(want2, &a, 4);
    memcpy(want2 + 8, &x, 8);
    memcpy(want2 + 16, &y, 8);
    memcpy(want2 + 24, &n, 4);
    cr_assert_eq(fakecuda_launch_get(1, &l), 0);
    cr_assert_eq(l.params_size, 28);
    cr_expect_arr_eq(l.params, want2, 28);
}

Test(launch, checks_the_configuration)
{
    test_start();
    CUfunction empty = test_function("empty.cubin", "empty");
    CUfunction vadd = test_function("vadd.cubin", "vadd");
    struct {
        unsigned g[3], b[3], shmem;
    } bad[] = {
        {{1, 1, 1}, {1025, 1, 1}, 0},  {{1, 1, 1}, {1, 1, 65}, 0},
        {{1, 1, 1}, {32, 32, 2}, 0},   {{1, 1, 1}, {0, 1, 1}, 0},
        {{0, 1, 1}, {1, 1, 1}, 0},     {{1, 65536, 1}, {1, 1, 1}, 0},
        {{1, 1, 65536}, {1, 1, 1}, 0}, {{1, 1, 1}, {1, 1, 1}, 49153},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CU_IS(CUDA_ERROR_INVALID_VALUE,
              cuLaunchKernel(empty, bad[i].g[0], bad[i].g[1], bad[i].g[2],
                             bad[i].b[0], bad[i].b[1], bad[i].b[2],
                             bad[i].shmem, NULL, NULL, NULL));
    CU_OK(cuLaunchKernel(empty, 2147483647u, 65535, 65535, 1024, 1, 1, 49152,
                         NULL, NULL, NULL));
    CU_IS(CUDA_ERROR_INVALID_VALUE,
          cuLaunchKernel(vadd, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    CUdeviceptr p = 0x42;
    int n = 5;
    void *args[] = {&p, &p, &p, &n};
    void *nulls[] = {&p, NULL, &p, &n};
    unsigned char buf[28] = {1, 2, 3};
    size_t size = sizeof(buf);
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf,
                     CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    CU_IS(CUDA_ERROR_INVALID_VALUE,
          cuLaunchKernel(vadd, 1, 1, 1, 1, 1, 1, 0, NULL, nulls, NULL));
    CU_IS(CUDA_ERROR_INVALID_VALUE,
          cuLaunchKernel(vadd, 1, 1, 1, 1, 1, 1, 0, NULL, args, extra));
    cr_expect_eq(fakecuda_launch_count(), 1,
                 "rejected launches are not recorded");
    CU_OK(cuLaunchKernel(vadd, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra));
    fakecuda_launch l;
    cr_assert_eq(fakecuda_launch_get(1, &l), 0);
    cr_expect_arr_eq(l.params, buf, sizeof(buf));
    size = 27;
    CU_IS(CUDA_ERROR_INVALID_VALUE,
          cuLaunchKernel(vadd, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra));
}

Test(fault, a_faulting_launch_poisons_every_later_call)
{
    CUcontext ctx = test_start();
    CUfunction empty = test_function("empty.cubin", "empty");
    cr_assert_eq(fakecuda_inject_fault(FAKECUDA_FAULT_LAUNCH, 2), 0);
    CU_OK(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    CU_OK(cuCtxSynchronize());
    /* Asynchronous: the launch itself is accepted. */
    CU_OK(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    const CUresult lost = CUDA_ERROR_ILLEGAL_ADDRESS;
    CUdeviceptr p;
    CUmodule mod;
    CUstream s;
    CUcontext c2;
    int n;
    CU_IS(lost, cuCtxSynchronize());
    CU_IS(lost, cuMemAlloc(&p, 16));
    CU_IS(lost, cuModuleLoadData(&mod, "x"));
    CU_IS(lost, cuStreamCreate(&s, 0));
    CU_IS(lost, cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    CU_IS(lost, cuDeviceGetCount(&n));
    CU_IS(lost, cuCtxSetCurrent(ctx));
    CU_IS(lost, cuDevicePrimaryCtxRelease(0));
    CU_IS(lost, cuDevicePrimaryCtxRetain(&c2, 0));
    CU_IS(lost, cuInit(0));
    const char *s1;
    CU_OK(cuGetErrorString(lost, &s1));
    cr_expect_str_eq(s1, "an illegal memory access was encountered");
    CU_OK(cuDriverGetVersion(&n));
    cr_expect_eq(fakecuda_sticky_error(), lost);
    fakecuda_launch l;
    cr_assert_eq(fakecuda_launch_get(1, &l), 0);
    cr_expect(l.completed && l.faulted);
}

Test(fault, a_held_fault_lands_when_released)
{
    CUcontext ctx = test_start();
    CUfunction empty = test_function("empty.cubin", "empty");
    CUfunction scale = test_function("scale.cubin", "scale");
    cr_assert_eq(fakecuda_inject_launch_fault("scale"), 0);
    CUdeviceptr x = 0;
    float f = 2.0f;
    int n = 1;
    void *args[] = {&x, &f, &n};
    CUstream s;
    CU_OK(cuStreamCreate(&s, 0));
    fakecuda_hold(1);
    CU_OK(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
    CU_OK(cuLaunchKernel(scale, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    CU_OK(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
    CU_IS(CUDA_ERROR_NOT_READY, cuStreamQuery(s));
    test_waiter w = {.what = TEST_WAIT_STREAM, .stream = s, .ctx = ctx};
    test_waiter_start(&w);
    test_sleep_ms(20);
    cr_expect_eq(fakecuda_sticky_error(), CUDA_SUCCESS,
                 "nothing has faulted yet");
    fakecuda_hold(0);
    test_waiter_join(&w);
    cr_expect_eq(w.rc, CUDA_ERROR_ILLEGAL_ADDRESS);
    fakecuda_launch l[3];
    for (int i = 0; i < 3; i++)
        cr_assert_eq(fakecuda_launch_get((size_t)i, &l[i]), 0);
    cr_expect(l[0].completed && !l[0].faulted,
              "work before the fault completes");
    cr_expect(l[1].completed && l[1].faulted);
    cr_expect(!l[2].completed, "work behind the fault never does");
    cr_expect_eq(fakecuda_pending(), 0);
}

Test(fault, nth_launch_from_environment)
{
    setenv("CUMOD_FAKE_FAULT", "launch:3", 1);
    test_start();
    CUfunction empty = test_function("empty.cubin", "empty");
    for (int i = 0; i < 2; i++)
        CU_OK(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    CU_OK(cuCtxSynchronize());
    CU_OK(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    CU_IS(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
    cr_expect_eq(fakecuda_launch_count(), 3);
}

Test(fault, launch_fault_by_name_from_environment)
{
    setenv("CUMOD_FAKE_FAULT", "launch:vadd", 1);
    test_start();
    CUfunction empty = test_function("empty.cubin", "empty");
    CUfunction vadd = test_function("vadd.cubin", "vadd");
    CU_OK(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    CU_OK(cuCtxSynchronize());
    CUdeviceptr p = 0;
    int n = 0;
    void *args[] = {&p, &p, &p, &n};
    CU_OK(cuLaunchKernel(vadd, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    CU_IS(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
}

Test(fault, poison_faults_the_launches_of_an_image_that_has_the_marker)
{
    setenv("CUMOD_FAKE_FAULT", "poison:cumod_fake_poison", 1);
    test_start();
    CUmodule good = test_load(TEST_KERNELS, "vadd.cubin");
    CUmodule bad = test_load(CUMOD_TEST_BAD_KERNEL_DIR, "vadd.cubin");
    CUfunction gv, bv;
    CU_OK(cuModuleGetFunction(&gv, good, "vadd"));
    CU_OK(cuModuleGetFunction(&bv, bad, "vadd"));
    CUdeviceptr p = 0;
    int n = 0;
    void *args[] = {&p, &p, &p, &n};
    CU_OK(cuLaunchKernel(gv, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    CU_OK(cuCtxSynchronize());
    /* The same function name, from the image with the marker: a fault. */
    CU_OK(cuLaunchKernel(bv, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    CU_IS(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
}

Test(fault, a_crash_file_makes_cuinit_abort)
{
    char path[] = "/tmp/fakecuda_crash_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    for (int exists = 1; exists >= 0; exists--) {
        if (!exists)
            unlink(path);
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
            setenv("CUMOD_FAKE_CRASH", path, 1);
            _exit(cuInit(0) == CUDA_SUCCESS ? 0 : 1);
        }
        int status;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        if (exists)
            cr_expect(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
                      "cuInit aborts while %s exists", path);
        else
            cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "cuInit works once it is gone");
    }
}

Test(log, one_line_per_event)
{
    char path[] = "/tmp/fakecuda_log_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    setenv("CUMOD_FAKE_LOG", path, 1);
    test_start();
    CUmodule mod = test_load(TEST_KERNELS, "vadd.cubin");
    CUfunction vadd;
    CU_OK(cuModuleGetFunction(&vadd, mod, "vadd"));
    CUdeviceptr d;
    unsigned char host[16] = {0};
    CU_OK(cuMemAlloc(&d, 16));
    CU_OK(cuMemcpyHtoD(d, host, 16));
    CUdeviceptr a = 0x0102030405060708;
    int n = 0x11223344;
    void *args[] = {&a, &a, &a, &n};
    CU_OK(cuLaunchKernel(vadd, 2, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
    CU_OK(cuMemFree(d));
    CU_OK(cuModuleUnload(mod));

    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    char line[1024], tail[64];
    snprintf(tail, sizeof(tail), " pid=%ld\n", (long)getpid());
    const char *want[] = {"init sm=90 devices=1 mem=85899345920",
                          "retain device=0 refs=1",
                          "load module=0x",
                          "alloc ptr=0x",
                          "copy kind=htod dst=0x",
                          "launch fn=vadd module=0x",
                          "free ptr=0x",
                          "unload module=0x"};
    size_t i = 0;
    while (fgets(line, sizeof(line), f) != NULL &&
           i < sizeof(want) / sizeof(want[0])) {
        cr_expect_eq(strncmp(line, want[i], strlen(want[i])), 0, "line %zu: %s",
                     i, line);
        size_t len = strlen(line);
        cr_expect(len > strlen(tail) &&
                      strcmp(line + len - strlen(tail), tail) == 0,
                  "%s", line);
        if (i == 2)
            cr_expect(strstr(line, "kind=cubin sm=90 functions=vadd ") != NULL,
                      "%s", line);
        if (i == 5) {
            cr_expect(
                strstr(line, " grid=2,1,1 block=128,1,1 shmem=0 stream=0x0 ") !=
                    NULL,
                "%s", line);
            cr_expect(
                strstr(line,
                       " params="
                       "0807060504030201080706050403020108070605040302014433"
                       "2211 ") != NULL,
                "%s", line);
        }
        i++;
    }
    cr_expect_eq(i, sizeof(want) / sizeof(want[0]), "%zu lines", i);
    fclose(f);
    unlink(path);
}
