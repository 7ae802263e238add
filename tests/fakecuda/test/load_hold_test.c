/* SPDX-License-Identifier: MIT */
/*
 * Held loads (CUMOD_FAKE_LOAD_HOLD, fakecuda_hold_loads): a module load or
 * cuLinkComplete waits, without the fake's lock, while the context's other
 * calls go on.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_test.h"

typedef struct held_load {
    CUcontext ctx;
    const void *image;
    int link; /* 1: cuLinkComplete instead */
    CUlinkState ls;
    CUresult rc;
    atomic_int done;
    pthread_t thread;
} held_load;

static void *
held_load_run(void *arg)
{
    held_load *l = arg;
    cuCtxSetCurrent(l->ctx);
    CUmodule mod;
    void *image;
    l->rc = l->link ? cuLinkComplete(l->ls, &image, NULL)
                    : cuModuleLoadData(&mod, l->image);
    atomic_store(&l->done, 1);
    return NULL;
}

static void
held_load_start(held_load *l)
{
    atomic_init(&l->done, 0);
    cr_assert_eq(pthread_create(&l->thread, NULL, held_load_run, l), 0);
}

Test(load_hold, loads_wait_while_launches_go_on)
{
    char path[] = "/tmp/fakecuda_loadhold_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    unlink(path);
    char logpath[] = "/tmp/fakecuda_log_XXXXXX";
    fd = mkstemp(logpath);
    cr_assert_geq(fd, 0);
    close(fd);
    setenv("CUMOD_FAKE_LOAD_HOLD", path, 1);
    setenv("CUMOD_FAKE_LOG", logpath, 1);
    CUcontext ctx = test_start();
    /* Loaded before the hold file is made; the load below is held. */
    CUfunction empty = test_function("empty.cubin", "empty");
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    cr_assert_geq(fd, 0);
    close(fd);
    test_file f = test_read(TEST_KERNELS, "vadd.cubin");
    held_load l = {.ctx = ctx, .image = f.bytes};
    held_load_start(&l);
    test_sleep_ms(30);
    cr_expect_eq(atomic_load(&l.done), 0, "the load waits for the file");
    /* Meanwhile the context's other calls go on: the lock is free. */
    CUstream s;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < 10; i++)
        CU_OK(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
    CU_OK(cuStreamSynchronize(s));
    CU_OK(cuCtxSynchronize());
    cr_expect_eq(fakecuda_module_count(), 1);
    cr_expect_eq(atomic_load(&l.done), 0);
    unlink(path);
    pthread_join(l.thread, NULL);
    cr_expect_eq(l.rc, CUDA_SUCCESS);
    cr_expect_eq(fakecuda_module_count(), 2);
    test_file_free(&f);

    FILE *lf = fopen(logpath, "r");
    char *log = NULL;
    size_t len = 0;
    cr_assert_geq(getdelim(&log, &len, '\0', lf), 0);
    fclose(lf);
    cr_expect(strstr(log, "load-held call=cuModuleLoadData ms=") != NULL, "%s",
              log);
    free(log);
    unlink(logpath);
}

Test(load_hold, the_api_holds_loads_too)
{
    CUcontext ctx = test_start();
    test_file f = test_read(TEST_KERNELS, "vadd.cubin");
    fakecuda_hold_loads(1);
    held_load l = {.ctx = ctx, .image = f.bytes};
    held_load_start(&l);
    test_sleep_ms(30);
    cr_expect_eq(atomic_load(&l.done), 0);
    cr_expect_eq(fakecuda_module_count(), 0);
    fakecuda_hold_loads(0);
    pthread_join(l.thread, NULL);
    cr_expect_eq(l.rc, CUDA_SUCCESS);
    cr_expect_eq(fakecuda_module_count(), 1);
    test_file_free(&f);
}

Test(load_hold, link_complete_waits_too)
{
    CUcontext ctx = test_start();
    test_file f = test_read(TEST_KERNELS, "scale_ptx.ptx");
    CUlinkState ls;
    CU_OK(cuLinkCreate(0, NULL, NULL, &ls));
    fakecuda_hold_loads(1);
    /* Adding an input is not held. */
    CU_OK(cuLinkAddData(ls, CU_JIT_INPUT_PTX, f.bytes, f.size + 1, NULL, 0,
                        NULL, NULL));
    held_load l = {.ctx = ctx, .link = 1, .ls = ls};
    held_load_start(&l);
    test_sleep_ms(30);
    cr_expect_eq(atomic_load(&l.done), 0);
    /* A module load now waits as well; the linker state is not locked. */
    test_file cubin = test_read(TEST_KERNELS, "empty.cubin");
    held_load m = {.ctx = ctx, .image = cubin.bytes};
    held_load_start(&m);
    test_sleep_ms(20);
    cr_expect_eq(atomic_load(&m.done), 0);
    fakecuda_hold_loads(0);
    pthread_join(l.thread, NULL);
    pthread_join(m.thread, NULL);
    cr_expect_eq(l.rc, CUDA_SUCCESS);
    cr_expect_eq(m.rc, CUDA_SUCCESS);
    CU_OK(cuLinkDestroy(ls));
    test_file_free(&f);
    test_file_free(&cubin);
}
