/* SPDX-License-Identifier: MIT */
/*
 * Per-stream completion: one stream's held work holds only what follows it
 * on that stream and what waits on it through an event; the legacy stream's
 * implicit syncs; holding launches by function name, through the API and
 * through the CUMOD_FAKE_HOLD file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_test.h"

/* The two example kernels the tests launch: scale is the one they hold. */
typedef struct queue_fns {
    CUcontext ctx;
    CUfunction empty, scale;
    CUdeviceptr x;
    float f;
    int n;
    void *args[3];
} queue_fns;

static void
queue_start(queue_fns *q)
{
    q->ctx = test_start();
    q->empty = test_function("empty.cubin", "empty");
    q->scale = test_function("scale.cubin", "scale");
    q->x = 0;
    q->f = 2.0f;
    q->n = 0;
    q->args[0] = &q->x;
    q->args[1] = &q->f;
    q->args[2] = &q->n;
}

static void
queue_empty(queue_fns *q, CUstream s)
{
    CU_OK(cuLaunchKernel(q->empty, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
}

static void
queue_scale(queue_fns *q, CUstream s)
{
    CU_OK(cuLaunchKernel(q->scale, 1, 1, 1, 32, 1, 1, 0, s, q->args, NULL));
}

static int
queue_completed(size_t i)
{
    fakecuda_launch l;
    cr_assert_eq(fakecuda_launch_get(i, &l), 0, "launch %zu", i);
    return l.completed;
}

Test(queue, a_held_launch_holds_only_its_own_stream)
{
    queue_fns q;
    queue_start(&q);
    CUstream a, b;
    CUevent ea, eb;
    CU_OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CU_OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    CU_OK(cuEventCreate(&ea, CU_EVENT_DISABLE_TIMING));
    CU_OK(cuEventCreate(&eb, CU_EVENT_DISABLE_TIMING));
    cr_assert_eq(fakecuda_hold_functions("scale"), 0);
    queue_scale(&q, a); /* 0: held */
    queue_empty(&q, a); /* 1: behind it */
    CU_OK(cuEventRecord(ea, a));
    queue_empty(&q, b); /* 2: another stream: completes */
    CU_OK(cuEventRecord(eb, b));

    cr_expect(!queue_completed(0) && !queue_completed(1));
    cr_expect(queue_completed(2), "the other stream goes on");
    CU_IS(CUDA_ERROR_NOT_READY, cuStreamQuery(a));
    CU_IS(CUDA_ERROR_NOT_READY, cuEventQuery(ea));
    CU_OK(cuStreamQuery(b));
    CU_OK(cuEventQuery(eb));
    CU_OK(cuStreamSynchronize(b));
    CU_OK(cuEventSynchronize(eb));
    cr_expect_eq(fakecuda_pending(), 2);

    /* A synchronize on the held stream blocks until the release. */
    test_waiter w = {.what = TEST_WAIT_STREAM, .stream = a, .ctx = q.ctx};
    test_waiter_start(&w);
    test_sleep_ms(30);
    cr_expect_eq(atomic_load(&w.done), 0);
    queue_empty(&q, b); /* 3: still goes on meanwhile */
    cr_expect(queue_completed(3));
    cr_assert_eq(fakecuda_hold_functions(NULL), 0);
    test_waiter_join(&w);
    cr_expect_eq(w.rc, CUDA_SUCCESS);
    cr_expect(queue_completed(0) && queue_completed(1));
    CU_OK(cuEventQuery(ea));
    cr_expect_eq(fakecuda_pending(), 0);
}

Test(queue, work_on_one_stream_completes_in_order)
{
    queue_fns q;
    queue_start(&q);
    CUstream a;
    CUdeviceptr d;
    unsigned char in[16], out[16] = {0};
    memset(in, 0x42, sizeof(in));
    CU_OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CU_OK(cuMemAlloc(&d, sizeof(in)));
    cr_assert_eq(fakecuda_hold_functions("scale"), 0);
    CU_OK(cuMemcpyHtoDAsync(d, in, sizeof(in), a)); /* ahead: completes */
    queue_scale(&q, a);
    CU_OK(cuMemcpyDtoHAsync(out, d, sizeof(out), a)); /* behind: waits */
    fakecuda_copy c;
    cr_assert_eq(fakecuda_copy_get(0, &c), 0);
    cr_expect(c.completed);
    cr_assert_eq(fakecuda_copy_get(1, &c), 0);
    cr_expect(!c.completed);
    cr_expect_eq(out[0], 0, "no bytes moved behind the held launch");
    /* A synchronous copy is never held, whatever the streams hold. */
    CU_OK(cuMemcpyDtoH(out, d, 4));
    cr_expect_eq(out[0], 0x42);
    out[0] = 0;
    cr_assert_eq(fakecuda_hold_functions(""), 0);
    CU_OK(cuStreamSynchronize(a));
    cr_expect_eq(out[15], 0x42);
}

Test(queue, wait_event_makes_a_real_dependency)
{
    queue_fns q;
    queue_start(&q);
    CUstream a, b, c;
    CUevent ev, after;
    CU_OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CU_OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    CU_OK(cuStreamCreate(&c, CU_STREAM_NON_BLOCKING));
    CU_OK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    CU_OK(cuEventCreate(&after, CU_EVENT_DISABLE_TIMING));
    cr_assert_eq(fakecuda_hold_functions("scale"), 0);
    queue_scale(&q, a); /* 0: held */
    CU_OK(cuEventRecord(ev, a));
    CU_OK(cuStreamWaitEvent(b, ev, 0));
    queue_empty(&q, b); /* 1: waits for 0 through the event */
    CU_OK(cuEventRecord(after, b));
    /* Recording the event again elsewhere does not move b's wait. */
    queue_empty(&q, c); /* 2 */
    CU_OK(cuEventRecord(ev, c));
    CU_OK(cuEventQuery(ev));
    cr_expect(queue_completed(2));
    cr_expect(!queue_completed(1), "b still waits for what ev marked");
    CU_IS(CUDA_ERROR_NOT_READY, cuStreamQuery(b));
    CU_IS(CUDA_ERROR_NOT_READY, cuEventQuery(after));
    /* The wait is part of b: a synchronize of b waits for it too. */
    test_waiter w = {.what = TEST_WAIT_EVENT, .event = after, .ctx = q.ctx};
    test_waiter_start(&w);
    test_sleep_ms(20);
    cr_expect_eq(atomic_load(&w.done), 0);
    cr_assert_eq(fakecuda_hold_functions(NULL), 0);
    test_waiter_join(&w);
    cr_expect_eq(w.rc, CUDA_SUCCESS);
    cr_expect(queue_completed(0) && queue_completed(1));
    /* A wait on an event already complete (or never recorded) is none. */
    CUevent fresh;
    CU_OK(cuEventCreate(&fresh, CU_EVENT_DISABLE_TIMING));
    fakecuda_hold(1);
    CU_OK(cuStreamWaitEvent(c, fresh, 0));
    CU_OK(cuStreamWaitEvent(c, ev, 0));
    CU_OK(cuStreamQuery(c));
    fakecuda_hold(0);
}

Test(queue, a_wait_holds_a_stream_with_nothing_queued_after_it)
{
    queue_fns q;
    queue_start(&q);
    CUstream a, b;
    CUevent ev, mark;
    CU_OK(cuStreamCreate(&a, 0));
    CU_OK(cuStreamCreate(&b, 0));
    CU_OK(cuEventCreate(&ev, 0));
    CU_OK(cuEventCreate(&mark, 0));
    cr_assert_eq(fakecuda_hold_functions("scale"), 0);
    queue_scale(&q, a);
    CU_OK(cuEventRecord(ev, a));
    CU_OK(cuStreamWaitEvent(b, ev, 0));
    CU_OK(cuEventRecord(mark, b)); /* after the wait, on an idle stream */
    CU_IS(CUDA_ERROR_NOT_READY, cuEventQuery(mark));
    CU_IS(CUDA_ERROR_NOT_READY, cuStreamQuery(b));
    cr_expect_eq(fakecuda_pending(), 1, "a wait is no work item of its own");
    cr_assert_eq(fakecuda_hold_functions(NULL), 0);
    CU_OK(cuEventQuery(mark));
    CU_OK(cuStreamQuery(b));
}

Test(queue, the_legacy_stream_syncs_with_blocking_streams_only)
{
    queue_fns q;
    queue_start(&q);
    CUstream blocking, other, nonblocking;
    CUevent ev;
    CU_OK(cuStreamCreate(&blocking, 0));
    CU_OK(cuStreamCreate(&other, 0));
    CU_OK(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
    CU_OK(cuEventCreate(&ev, 0));
    cr_assert_eq(fakecuda_hold_functions("scale"), 0);
    queue_scale(&q, blocking);    /* 0: held */
    queue_empty(&q, nonblocking); /* 1: no implicit sync: completes */
    queue_empty(&q, other);       /* 2: nothing on the legacy stream yet */
    queue_empty(&q, NULL);        /* 3: waits for blocking streams' work */
    queue_empty(&q, other);       /* 4: waits for the legacy stream's */
    queue_empty(&q, nonblocking); /* 5 */
    cr_expect(queue_completed(1) && queue_completed(2) && queue_completed(5));
    cr_expect(!queue_completed(3) && !queue_completed(4));
    CU_IS(CUDA_ERROR_NOT_READY, cuStreamQuery(NULL));
    CU_IS(CUDA_ERROR_NOT_READY, cuStreamQuery(other));
    CU_OK(cuStreamQuery(nonblocking));
    /* An event on the legacy stream marks the blocking streams' work too,
     * even with nothing of the legacy stream's own in flight. */
    cr_assert_eq(fakecuda_hold_functions(NULL), 0);
    CU_OK(cuCtxSynchronize());
    cr_assert_eq(fakecuda_hold_functions("scale"), 0);
    queue_scale(&q, blocking); /* 6 */
    CU_OK(cuEventRecord(ev, NULL));
    CU_IS(CUDA_ERROR_NOT_READY, cuEventQuery(ev));
    cr_assert_eq(fakecuda_hold_functions(NULL), 0);
    CU_OK(cuEventSynchronize(ev));
    cr_expect(queue_completed(3) && queue_completed(4) && queue_completed(6));
    /* And an event on an idle blocking stream waits for the legacy
     * stream's work before it; one on a non-blocking stream does not. */
    CUevent on_other, on_nonblocking;
    CU_OK(cuEventCreate(&on_other, 0));
    CU_OK(cuEventCreate(&on_nonblocking, 0));
    cr_assert_eq(fakecuda_hold_functions("scale"), 0);
    queue_scale(&q, NULL); /* 7 */
    CU_OK(cuEventRecord(on_other, other));
    CU_OK(cuEventRecord(on_nonblocking, nonblocking));
    CU_IS(CUDA_ERROR_NOT_READY, cuEventQuery(on_other));
    CU_OK(cuEventQuery(on_nonblocking));
    cr_assert_eq(fakecuda_hold_functions(NULL), 0);
    CU_OK(cuEventQuery(on_other));
}

Test(queue, a_destroyed_streams_work_still_completes)
{
    queue_fns q;
    queue_start(&q);
    CUstream a;
    CUevent ev;
    CU_OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CU_OK(cuEventCreate(&ev, 0));
    cr_assert_eq(fakecuda_hold_functions("scale"), 0);
    queue_scale(&q, a);
    queue_empty(&q, a);
    CU_OK(cuEventRecord(ev, a));
    CU_OK(cuStreamDestroy(a)); /* at once, with work pending */
    CU_IS(CUDA_ERROR_INVALID_HANDLE, cuStreamQuery(a));
    CU_IS(CUDA_ERROR_NOT_READY, cuEventQuery(ev));
    cr_expect_eq(fakecuda_pending(), 2);
    test_waiter w = {.what = TEST_WAIT_CTX, .ctx = q.ctx};
    test_waiter_start(&w);
    test_sleep_ms(20);
    cr_expect_eq(atomic_load(&w.done), 0, "cuCtxSynchronize waits for it");
    cr_assert_eq(fakecuda_hold_functions(NULL), 0);
    test_waiter_join(&w);
    cr_expect_eq(w.rc, CUDA_SUCCESS);
    CU_OK(cuEventQuery(ev));
    cr_expect(queue_completed(0) && queue_completed(1));
    CU_OK(cuEventDestroy(ev));
}

Test(queue, hold_all_and_hold_some_add_up)
{
    queue_fns q;
    queue_start(&q);
    CUstream a, b;
    CU_OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CU_OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    cr_assert_eq(fakecuda_hold_functions(" scale , nothing_by_this_name,"), 0);
    fakecuda_hold(1);
    queue_scale(&q, a);
    queue_empty(&q, b);
    cr_expect_eq(fakecuda_pending(), 2);
    fakecuda_hold(0); /* the function list still holds scale */
    cr_expect(queue_completed(1) && !queue_completed(0));
    cr_assert_eq(fakecuda_hold_functions("empty"), 0);
    cr_expect(queue_completed(0), "the list was replaced");
    queue_empty(&q, b);
    cr_expect(!queue_completed(2));
    cr_assert_eq(fakecuda_hold_functions(NULL), 0);
    cr_expect_eq(fakecuda_pending(), 0);
}

/* Replaces the hold file with `text` at once (write, then rename). */
static void
queue_hold_file(const char *path, const char *text)
{
    char tmp[512];
    snprintf(tmp, sizeof(tmp), "%s.new", path);
    FILE *f = fopen(tmp, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    cr_assert_eq(rename(tmp, path), 0);
}

Test(queue, the_hold_file_names_functions)
{
    char path[] = "/tmp/fakecuda_hold_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    unlink(path);
    setenv("CUMOD_FAKE_HOLD", path, 1);
    queue_fns q;
    queue_start(&q);
    CUstream a, b;
    CU_OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CU_OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));

    queue_hold_file(path, "\n  scale \r\n\n");
    queue_scale(&q, a); /* 0 */
    queue_empty(&q, b); /* 1 */
    cr_expect(!queue_completed(0) && queue_completed(1));
    /* The names are read again at every poll: now empty is held. */
    queue_hold_file(path, "empty\n");
    queue_empty(&q, b); /* 2 */
    cr_expect(queue_completed(0), "scale is no longer named");
    cr_expect(!queue_completed(2));
    /* A waiter sees the file change without any other call. */
    test_waiter w = {.what = TEST_WAIT_STREAM, .stream = b, .ctx = q.ctx};
    test_waiter_start(&w);
    test_sleep_ms(20);
    cr_expect_eq(atomic_load(&w.done), 0);
    queue_hold_file(path, "other\nnames\n");
    test_waiter_join(&w);
    cr_expect_eq(w.rc, CUDA_SUCCESS);
    /* An empty file holds everything, as before names were possible. */
    queue_hold_file(path, "");
    queue_empty(&q, a); /* 3 */
    cr_expect(!queue_completed(3));
    cr_expect_eq(fakecuda_pending(), 1);
    unlink(path);
    cr_expect_eq(fakecuda_pending(), 0);
    cr_expect(queue_completed(3));
}

Test(queue, a_fault_on_one_stream_stops_every_stream)
{
    queue_fns q;
    queue_start(&q);
    CUstream a, b;
    CU_OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CU_OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    cr_assert_eq(fakecuda_hold_functions("empty"), 0);
    cr_assert_eq(fakecuda_inject_launch_fault("scale"), 0);
    queue_empty(&q, b); /* 0: held */
    test_waiter w = {.what = TEST_WAIT_STREAM, .stream = b, .ctx = q.ctx};
    test_waiter_start(&w);
    queue_scale(&q, a); /* 1: completes with the fault */
    test_waiter_join(&w);
    cr_expect_eq(w.rc, CUDA_ERROR_ILLEGAL_ADDRESS,
                 "a waiter on another stream learns of it");
    cr_assert_eq(fakecuda_hold_functions(NULL), 0);
    cr_expect(!queue_completed(0), "nothing completes after the fault");
    fakecuda_launch l;
    cr_assert_eq(fakecuda_launch_get(1, &l), 0);
    cr_expect(l.completed && l.faulted);
    CU_IS(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamQuery(b));
    CU_IS(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamSynchronize(a));
    cr_expect_eq(fakecuda_pending(), 0);
}
