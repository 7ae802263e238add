/* SPDX-License-Identifier: MIT */
/*
 * The fake's asynchronous side: streams, events, holding work in flight,
 * and the threads of a daemon submitting and completing work.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_test.h"

Test(stream, work_completes_at_once_unless_held)
{
    test_start();
    CUfunction empty = test_function("empty.cubin", "empty");
    CUstream s;
    CUevent ev;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU_OK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    CU_OK(cuEventQuery(ev)); /* never recorded: complete */
    CU_OK(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
    CU_OK(cuEventRecord(ev, s));
    CU_OK(cuEventQuery(ev));
    CU_OK(cuStreamQuery(s));
    cr_expect_eq(fakecuda_pending(), 0);
    fakecuda_launch l;
    cr_assert_eq(fakecuda_launch_get(0, &l), 0);
    cr_expect(l.completed && !l.faulted && l.stream == s);
}

Test(stream, hold_keeps_work_in_flight_until_released)
{
    CUcontext ctx = test_start();
    CUfunction empty = test_function("empty.cubin", "empty");
    CUstream s;
    CUevent before, after;
    CU_OK(cuStreamCreate(&s, 0));
    CU_OK(cuEventCreate(&before, 0));
    CU_OK(cuEventCreate(&after, 0));
    CU_OK(cuEventRecord(before, s));
    fakecuda_hold(1);
    CU_OK(cuLaunchKernel(empty, 4, 1, 1, 64, 1, 1, 0, s, NULL, NULL));
    CU_OK(cuEventRecord(after, s));
    CU_OK(cuEventQuery(before));
    CU_IS(CUDA_ERROR_NOT_READY, cuEventQuery(after));
    CU_IS(CUDA_ERROR_NOT_READY, cuStreamQuery(s));
    CU_IS(CUDA_ERROR_NOT_READY,
          cuStreamQuery(NULL)); /* the legacy stream waits too */
    cr_expect_eq(fakecuda_pending(), 1);

    test_waiter w = {.what = TEST_WAIT_EVENT, .event = after, .ctx = ctx};
    test_waiter_start(&w);
    test_sleep_ms(30);
    cr_expect_eq(atomic_load(&w.done), 0,
                 "cuEventSynchronize blocks while held");
    fakecuda_launch l;
    cr_assert_eq(fakecuda_launch_get(0, &l), 0);
    cr_expect_eq(l.completed, 0);

    fakecuda_hold(0);
    test_waiter_join(&w);
    cr_expect_eq(w.rc, CUDA_SUCCESS);
    CU_OK(cuEventQuery(after));
    CU_OK(cuStreamQuery(s));
    cr_assert_eq(fakecuda_launch_get(0, &l), 0);
    cr_expect_eq(l.completed, 1);
    cr_expect_eq(fakecuda_pending(), 0);
}

Test(stream, hold_file_releases_waiters)
{
    char path[] = "/tmp/fakecuda_hold_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    setenv("CUMOD_FAKE_HOLD", path, 1);
    CUcontext ctx = test_start();
    CUfunction empty = test_function("empty.cubin", "empty");
    CU_OK(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    CU_IS(CUDA_ERROR_NOT_READY, cuStreamQuery(NULL));
    test_waiter w = {.what = TEST_WAIT_CTX, .ctx = ctx};
    test_waiter_start(&w);
    test_sleep_ms(30);
    cr_expect_eq(atomic_load(&w.done), 0,
                 "cuCtxSynchronize blocks while the file exists");
    unlink(path);
    /* The waiter polls the file every 5 ms: no other call is needed. */
    for (int i = 0; i < 200 && !atomic_load(&w.done); i++)
        test_sleep_ms(5);
    cr_expect_eq(atomic_load(&w.done), 1, "released within a second");
    test_waiter_join(&w);
    cr_expect_eq(w.rc, CUDA_SUCCESS);
    CU_OK(cuStreamQuery(NULL));
}

Test(stream, async_copies_move_bytes_when_they_complete)
{
    test_start();
    CUstream s;
    CUdeviceptr d;
    unsigned char in[64], out[64] = {0};
    memset(in, 0x5c, sizeof(in));
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU_OK(cuMemAlloc(&d, sizeof(in)));
    fakecuda_hold(1);
    CU_OK(cuMemcpyHtoDAsync(d, in, sizeof(in), s));
    CU_OK(cuMemsetD8Async(d, 0x11, 8, s));
    CU_OK(cuMemcpyDtoHAsync(out, d, sizeof(out), s));
    cr_expect_eq(fakecuda_pending(), 3);
    cr_expect_eq(out[0], 0, "nothing moved while held");
    fakecuda_copy c;
    cr_assert_eq(fakecuda_copy_get(0, &c), 0);
    cr_expect(c.async && !c.completed && c.stream == s);
    fakecuda_hold(0);
    CU_OK(cuStreamSynchronize(s));
    cr_expect(out[0] == 0x11 && out[7] == 0x11 && out[8] == 0x5c &&
              out[63] == 0x5c);
    cr_assert_eq(fakecuda_copy_get(2, &c), 0);
    cr_expect(c.kind == FAKECUDA_COPY_DTOH && c.completed);
}

/* The daemon's shape: one thread submits launches and records an event
 * after each; another waits on the events in order, as completions. */
typedef struct work_pipeline {
    CUcontext ctx;
    CUfunction empty;
    CUstream stream;
    CUevent events[64];
    atomic_int submitted, completed;
    int total;
    CUresult rc;
} work_pipeline;

static void *
work_submit(void *arg)
{
    work_pipeline *p = arg;
    cuCtxSetCurrent(p->ctx);
    for (int i = 0; i < p->total; i++) {
        while (i - atomic_load(&p->completed) >= 64) /* all 64 events in use */
            test_sleep_ms(1);
        CUresult rc = cuLaunchKernel(p->empty, 1, 1, 1, 32, 1, 1, 0, p->stream,
                                     NULL, NULL);
        if (rc == CUDA_SUCCESS)
            rc = cuEventRecord(p->events[i % 64], p->stream);
        if (rc != CUDA_SUCCESS)
            p->rc = rc;
        atomic_store(&p->submitted, i + 1);
    }
    return NULL;
}

static void *
work_complete(void *arg)
{
    work_pipeline *p = arg;
    for (int i = 0; i < p->total; i++) {
        while (atomic_load(&p->submitted) <= i)
            test_sleep_ms(1);
        CUresult rc;
        while ((rc = cuEventQuery(p->events[i % 64])) == CUDA_ERROR_NOT_READY)
            test_sleep_ms(1);
        if (rc != CUDA_SUCCESS)
            p->rc = rc;
        atomic_store(&p->completed, i + 1);
    }
    return NULL;
}

Test(stream, submission_and_completion_threads)
{
    work_pipeline p = {.ctx = test_start(), .total = 2000};
    p.empty = test_function("empty.cubin", "empty");
    CU_OK(cuStreamCreate(&p.stream, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < 64; i++)
        CU_OK(cuEventCreate(&p.events[i], CU_EVENT_DISABLE_TIMING));
    atomic_init(&p.submitted, 0);
    atomic_init(&p.completed, 0);
    pthread_t sub, com;
    pthread_create(&sub, NULL, work_submit, &p);
    pthread_create(&com, NULL, work_complete, &p);
    /* Hold and release while they run: completions stall, then catch up. */
    for (int i = 0; i < 10; i++) {
        fakecuda_hold(i % 2 == 0);
        test_sleep_ms(3);
    }
    fakecuda_hold(0);
    pthread_join(sub, NULL);
    pthread_join(com, NULL);
    cr_expect_eq(p.rc, CUDA_SUCCESS, "%s", test_errname(p.rc));
    cr_expect_eq(atomic_load(&p.completed), p.total);
    cr_expect_eq(fakecuda_launch_count(), (size_t)p.total);
    cr_expect_eq(fakecuda_pending(), 0);
}

Test(stream, bad_handles_and_flags)
{
    test_start();
    CUfunction empty = test_function("empty.cubin", "empty");
    CUstream s;
    CUevent ev;
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuStreamCreate(&s, 0x8));
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuEventCreate(&ev, CU_EVENT_INTERPROCESS));
    CU_OK(cuStreamCreate(&s, 0));
    CU_OK(cuEventCreate(&ev, 0));
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuStreamWaitEvent(s, ev, 0x4));
    CU_OK(cuStreamWaitEvent(s, ev, 0));
    CU_OK(cuStreamDestroy(s));
    CU_OK(cuEventDestroy(ev));
    CU_IS(CUDA_ERROR_INVALID_HANDLE, cuStreamDestroy(s));
    CU_IS(CUDA_ERROR_INVALID_HANDLE, cuStreamQuery(s));
    CU_IS(CUDA_ERROR_INVALID_HANDLE, cuStreamSynchronize(s));
    CU_IS(CUDA_ERROR_INVALID_HANDLE,
          cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
    CU_IS(CUDA_ERROR_INVALID_HANDLE, cuEventQuery(ev));
    CU_IS(CUDA_ERROR_INVALID_HANDLE, cuEventRecord(ev, NULL));
    CU_IS(CUDA_ERROR_INVALID_HANDLE, cuEventDestroy(ev));
    CU_IS(CUDA_ERROR_INVALID_HANDLE, cuStreamQuery((CUstream)0x7f0000001000));
    CU_IS(CUDA_ERROR_INVALID_HANDLE, cuEventSynchronize((CUevent)0x10));
}

Test(stream, releasing_the_context_drops_held_work)
{
    test_start();
    CUfunction empty = test_function("empty.cubin", "empty");
    fakecuda_hold(1);
    CU_OK(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    cr_expect_eq(fakecuda_pending(), 1);
    CU_OK(cuDevicePrimaryCtxRelease(0));
    cr_expect_eq(fakecuda_pending(), 0, "the context's work went with it");
    cr_expect_eq(fakecuda_module_count(), 0, "and its modules");
    CUcontext ctx;
    CU_OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU_OK(cuCtxSetCurrent(ctx));
    /* Nothing left to wait for, held or not. */
    CU_OK(cuCtxSynchronize());
    CU_OK(cuStreamSynchronize(NULL));
}
