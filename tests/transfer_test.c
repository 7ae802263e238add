/* SPDX-License-Identifier: MIT */
/*
 * Transfers of any size (issue 22, point 1), through libcumod's plain
 * cumod_buffer_write / cumod_buffer_read against cumodd on the fake driver:
 * small ones inline, large ones staged through the library's shared
 * segment, or in pieces under --max-message where no segment can be had;
 * a request over --max-message refused in the client, naming both sizes,
 * with the connection and its fast path kept.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumod/cumod.h"
#include "fixture.h"

TH_SUITE_DRIVER(0);

/* Bytes no two offsets share by accident (xorshift). */
static void
tt_pattern(uint8_t *p, size_t n, uint32_t seed)
{
    uint32_t x = seed | 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (uint8_t)x;
    }
}

static void
tt_start(th_env *t, const char *const *extra)
{
    static const char *const kernels[] = {"vadd", NULL};
    th_env_init(t, kernels);
    th_env_start(t, extra, NULL);
}

/* No message over --max-message reached cumodd (it would have dropped it
 * and closed the connection). */
static void
tt_nothing_dropped(th_env *t)
{
    char *log = th_daemon_log(&t->d);
    cr_expect(strstr(log, "dropped a request") == NULL,
              "a message over --max-message reached cumodd:\n%s", log);
    free(log);
}

/* Writes len bytes at offset and reads them back (and a range straddling
 * them); asserts they are the same. */
static void
tt_round_trip(cumod_client *c, cumod_buffer b, size_t offset, size_t len,
              uint32_t seed)
{
    uint8_t *in = malloc(len), *out = malloc(len);
    cr_assert(in != NULL && out != NULL);
    tt_pattern(in, len, seed);
    memset(out, 0, len);
    cr_assert_eq(cumod_buffer_write(c, b, offset, in, len, 0), CUMOD_OK,
                 "write %zu bytes at %zu: %s", len, offset,
                 cumod_last_detail());
    cr_assert_eq(cumod_buffer_read(c, b, offset, out, len, 0), CUMOD_OK,
                 "read %zu bytes at %zu: %s", len, offset, cumod_last_detail());
    size_t bad = 0;
    while (bad < len && in[bad] == out[bad])
        bad++;
    cr_assert_eq(bad, len, "%zu bytes at %zu: byte %zu differs", len, offset,
                 bad);
    /* A part of it, not starting on a piece's boundary. */
    if (len > 4096) {
        size_t o = len / 3 + 5, n = len / 2;
        memset(out, 0, n);
        cr_assert_eq(cumod_buffer_read(c, b, offset + o, out, n, 0), CUMOD_OK,
                     "%s", cumod_last_detail());
        cr_assert(memcmp(out, in + o, n) == 0,
                  "%zu bytes from %zu of %zu come back", n, o, len);
    }
    free(in);
    free(out);
}

Test(transfers, any_size_comes_back_and_the_fast_path_stays, .timeout = 120)
{
    th_env t;
    cumod_buffer b;
    const size_t big = (size_t)80 << 20; /* the 80 MiB of the issue */
    const size_t sizes[] = {1,  4096, 64 << 10, (64 << 10) + 1, (3 << 20) + 7,
                            big};
    char why[256];

    tt_start(&t, NULL);
    cr_assert_eq(cumod_fast_path(t.c), 1);
    cr_assert_eq(cumod_buffer_alloc(t.c, big + 8192, &b), CUMOD_OK, "%s",
                 cumod_last_detail());
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        tt_round_trip(t.c, b, 4093, sizes[i], (uint32_t)i + 11);
    /* The largest again: the staging segment is reused, and right. */
    tt_round_trip(t.c, b, 0, big, 99);
    cr_expect_eq(cumod_fast_path(t.c), 1,
                 "the fast path stays after 80 MiB went up and down");
    cr_expect_eq(cumod_fast_path_why(t.c, why, sizeof(why)), 0, "%s", why);
    /* Past the buffer's end: refused, naming the buffer, as a small one
     * is. */
    uint8_t *x = calloc(1, (size_t)1 << 20);
    cr_expect_eq(cumod_buffer_write(t.c, b, big + 8192 - 1000, x, 1 << 20, 0),
                 CUMOD_EINVAL);
    cr_expect(strstr(cumod_last_detail(), "cumod_buffer_write") &&
                  strstr(cumod_last_detail(), "past the end"),
              "%s", cumod_last_detail());
    free(x);
    tt_nothing_dropped(&t);
    cr_expect_eq(cumod_buffer_free(t.c, b), CUMOD_OK);
    th_env_stop(&t);
}

Test(transfers, without_a_segment_go_in_pieces_under_max_message,
     .timeout = 120)
{
    th_env t;
    cumod_buffer b;
    cumod_segment *mine;
    const char *const extra[] = {"--max-message", "8192",
                                 "--session-max-segments", "1", NULL};

    tt_start(&t, extra);
    /* The session's one segment is the caller's: the library's staging
     * segment is refused, and transfers go in pieces of under 8 KiB. */
    cr_assert_eq(cumod_segment_create(t.c, 4096, &mine), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_buffer_alloc(t.c, (size_t)2 << 20, &b), CUMOD_OK);
    tt_round_trip(t.c, b, 3, (size_t)1 << 20, 5);
    tt_round_trip(t.c, b, 0, 8192 + 1, 6);
    cr_expect_eq(cumod_fast_path(t.c), 1);
    tt_nothing_dropped(&t);
    cr_expect_eq(cumod_segment_destroy(t.c, mine), CUMOD_OK);
    th_env_stop(&t);
}

Test(transfers, a_request_over_max_message_is_refused_in_the_client,
     .timeout = 60)
{
    th_env t;
    cumod_buffer b;
    cumod_batch *batch;
    const char *const extra[] = {"--max-message", "4096", NULL};

    tt_start(&t, extra);
    cr_assert_eq(cumod_buffer_alloc(t.c, 1 << 20, &b), CUMOD_OK);
    /* More memsets than the ring takes in one message, so it goes over
     * the connection, and more bytes than --max-message. */
    cr_assert_eq(cumod_batch_alloc(&batch), CUMOD_OK);
    for (int i = 0; i < 9000; i++)
        cr_assert_eq(cumod_batch_memset(batch, b, (size_t)i, 1, 7), CUMOD_OK);
    int rv = cumod_batch_submit(t.c, batch, 0, NULL, NULL);
    cr_expect_eq(rv, CUMOD_ETOOBIG, "%d: %s", rv, cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(), "--max-message (4096 bytes)") &&
                  strstr(cumod_last_detail(), "the request is "),
              "names both sizes: %s", cumod_last_detail());
    cumod_batch_free(batch);
    /* Nothing was sent: the connection, its session and its ring are
     * as they were. */
    uint8_t v = 0;
    cr_expect_eq(cumod_buffer_read(t.c, b, 0, &v, 1, 0), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect_eq(v, 0, "the refused batch did not run");
    cr_expect_eq(cumod_fast_path(t.c), 1);
    tt_nothing_dropped(&t);
    th_env_stop(&t);
}

Test(transfers, several_copy_threads_move_the_same_bytes, .timeout = 120)
{
    th_env t;
    cumod_client *c;
    cumod_buffer b;
    const size_t len = ((size_t)40 << 20) + 3;

    tt_start(&t, NULL);
    /* Large pieces are copied by helper threads (one per core pair by
     * default, so none on a 2-core machine: asked for here). */
    setenv("CUMOD_COPY_THREADS", "3", 1);
    cr_assert_eq(cumod_open(t.d.url, 30000, &c), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_buffer_alloc(c, len + 4096, &b), CUMOD_OK);
    tt_round_trip(c, b, 4091, len, 21);
    tt_round_trip(c, b, 0, (size_t)2 << 20, 22); /* one piece, split */
    unsetenv("CUMOD_COPY_THREADS");
    cumod_close(c); /* stops the threads */
    th_env_stop(&t);
}

Test(transfers, the_staging_segment_outlives_a_lost_context, .timeout = 120)
{
    th_env t;
    static const char *const kernels[] = {"scale", NULL};
    const char *env[] = {"CUMOD_FAKE_FAULT=launch:scale", NULL};
    cumod_buffer x, y;
    const size_t len = (size_t)1 << 20;
    uint8_t *in = malloc(len), *out = malloc(len);

    th_env_init(&t, kernels);
    th_env_start(&t, NULL, env);
    tt_pattern(in, len, 3);
    /* The staging segment is made in this context... */
    cr_assert_eq(cumod_buffer_alloc(t.c, len, &x), CUMOD_OK);
    cr_assert_eq(cumod_buffer_write(t.c, x, 0, in, len, 0), CUMOD_OK, "%s",
                 cumod_last_detail());
    /* ...which a faulting kernel loses. */
    cumod_arg args[] = {cumod_arg_buffer(x, 0), cumod_arg_f32(2.0f),
                        cumod_arg_i32(256)};
    cumod_launch_params p = {.kernel = "scale:scale",
                             .grid = {1, 1, 1},
                             .block = {256, 1, 1},
                             .nargs = 3,
                             .args = args};
    cr_expect_eq(cumod_launch(t.c, &p, NULL, NULL), CUMOD_ECTXLOST);
    /* A buffer of the new context moves large data again (a new staging
     * segment); the lost one says it was lost, naming the buffer. */
    int ok = 0;
    for (int i = 0; i < 100 && !ok; i++) {
        ok = cumod_buffer_alloc(t.c, len, &y) == CUMOD_OK;
        if (!ok)
            th_sleep_ms(50);
    }
    cr_assert(ok, "served again: %s", cumod_last_detail());
    cr_expect_eq(cumod_buffer_write(t.c, y, 0, in, len, 0), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect_eq(cumod_buffer_read(t.c, y, 0, out, len, 0), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect(memcmp(in, out, len) == 0, "the bytes come back");
    cr_expect_eq(cumod_buffer_write(t.c, x, 0, in, len, 0), CUMOD_ECTXLOST);
    cr_expect(strstr(cumod_last_detail(), "was lost with the CUDA context"),
              "%s", cumod_last_detail());
    free(in);
    free(out);
    th_env_stop(&t);
}

/* Several clients, several threads each, moving large data at once: each
 * thread's bytes come back as it wrote them (one client's threads share
 * its staging segment, one transfer at a time; clients have their own). */
typedef struct tt_worker {
    cumod_client *c;
    uint32_t seed;
    int bad;
    char detail[256];
} tt_worker;

static void *
tt_worker_main(void *arg)
{
    tt_worker *w = arg;
    const size_t len = ((size_t)3 << 20) + 11;
    uint8_t *in = malloc(len), *out = malloc(len);
    cumod_buffer b;
    cumod_stream s;

    if (in == NULL || out == NULL ||
        cumod_buffer_alloc(w->c, len, &b) != CUMOD_OK ||
        cumod_stream_create(w->c, &s) != CUMOD_OK) {
        snprintf(w->detail, sizeof(w->detail), "%s", cumod_last_detail());
        w->bad = 1;
    }
    for (int round = 0; round < 4 && !w->bad; round++) {
        tt_pattern(in, len, w->seed + (uint32_t)round);
        /* A small transfer between the large ones, on another stream. */
        uint32_t small = w->seed, back = 0;
        if (cumod_buffer_write(w->c, b, 0, in, len, s) != CUMOD_OK ||
            cumod_buffer_read(w->c, b, 0, out, len, s) != CUMOD_OK ||
            cumod_buffer_write(w->c, b, 8, &small, 4, 0) != CUMOD_OK ||
            cumod_buffer_read(w->c, b, 8, &back, 4, 0) != CUMOD_OK) {
            snprintf(w->detail, sizeof(w->detail), "%s", cumod_last_detail());
            w->bad = 1;
        } else if (memcmp(in, out, len) != 0 || back != small) {
            snprintf(w->detail, sizeof(w->detail),
                     "round %d: other bytes came back", round);
            w->bad = 1;
        }
    }
    free(in);
    free(out);
    return NULL;
}

Test(transfers, several_clients_and_threads_move_large_data_at_once,
     .timeout = 180)
{
    th_env t;
    enum { CLIENTS = 2, THREADS = 3 };
    cumod_client *c[CLIENTS];
    tt_worker w[CLIENTS * THREADS];
    pthread_t th[CLIENTS * THREADS];

    tt_start(&t, NULL);
    for (int i = 0; i < CLIENTS; i++)
        cr_assert_eq(cumod_open(t.d.url, 30000, &c[i]), CUMOD_OK);
    for (int i = 0; i < CLIENTS * THREADS; i++) {
        w[i] = (tt_worker){.c = c[i / THREADS], .seed = 1000u * (unsigned)i};
        cr_assert_eq(pthread_create(&th[i], NULL, tt_worker_main, &w[i]), 0);
    }
    for (int i = 0; i < CLIENTS * THREADS; i++) {
        pthread_join(th[i], NULL);
        cr_expect_eq(w[i].bad, 0, "thread %d: %s", i, w[i].detail);
    }
    for (int i = 0; i < CLIENTS; i++) {
        cr_expect_eq(cumod_fast_path(c[i]), 1);
        cumod_close(c[i]);
    }
    th_env_stop(&t);
}

/* A staged transfer whose work is held past the client's timeout: it
 * fails with CUMOD_ETIMEDOUT within about that timeout, and the client's
 * next large transfers, once the work goes on, are right, on another
 * stream and on the held one (the segment that had pieces in flight is
 * given back, not reused). */
Test(transfers, a_held_transfer_times_out_once_and_the_next_are_right,
     .timeout = 120)
{
    th_env t;
    cumod_client *c;
    cumod_buffer b;
    cumod_stream s;
    const size_t len = (size_t)12 << 20; /* two pieces of an 8 MiB half */
    uint8_t *in = malloc(len), *out = malloc(len);

    tt_start(&t, NULL);
    cr_assert_eq(cumod_open(t.d.url, 2000, &c), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(c, len, &b), CUMOD_OK);
    cr_assert_eq(cumod_stream_create(c, &s), CUMOD_OK);
    tt_pattern(in, len, 7);
    cr_assert_eq(cumod_buffer_write(c, b, 0, in, len, 0), CUMOD_OK, "%s",
                 cumod_last_detail());
    /* The fake driver completes nothing while the hold file exists. */
    cr_assert_eq(th_write_file(t.fake_hold, ""), 0);
    double t0 = th_now_ms();
    int rv = cumod_buffer_write(c, b, 0, in, len, 0);
    double took = th_now_ms() - t0;
    cr_expect_eq(rv, CUMOD_ETIMEDOUT, "%d: %s", rv, cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(), "cumod_buffer_write"), "%s",
              cumod_last_detail());
    cr_expect_lt(took, 3500, "about one timeout (2 s): %.0f ms", took);
    remove(t.fake_hold);
    /* On another stream, and back on the first: the bytes are right. */
    tt_pattern(in, len, 8);
    cr_assert_eq(cumod_buffer_write(c, b, 0, in, len, s), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_buffer_read(c, b, 0, out, len, s), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect(memcmp(in, out, len) == 0, "the bytes come back after a hold");
    cr_assert_eq(cumod_stream_synchronize(c, 0), CUMOD_OK);
    cr_assert_eq(cumod_buffer_read(c, b, 0, out, len, 0), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect(memcmp(in, out, len) == 0, "and on the held stream");
    cumod_close(c);
    free(in);
    free(out);
    th_env_stop(&t);
}
