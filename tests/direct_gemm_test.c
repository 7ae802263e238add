/* SPDX-License-Identifier: MIT */
/*
 * GEMMs served by the executor that reads the session's ring (issue 33
 * point 7): the first GEMM of a stream goes through the front (cuBLAS
 * loaded, the stream's workspace charged to the session), the next ones
 * are checked against the executor's snapshot and run there. On the fake
 * driver and cuBLAS (which computes small GEMMs), and, built as
 * gpu_direct_gemm_test, on a GPU: numbers checked against a host
 * reference either way; the counts, the device time and every refusal the
 * same as through the front.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cumod/cumod.h"
#include "fixture.h"
#include "gemm_util.h"

#ifndef CUMOD_TEST_REAL_GPU
#define CUMOD_TEST_REAL_GPU 0
#endif
TH_SUITE_DRIVER(CUMOD_TEST_REAL_GPU);

static void
dg_start(th_env *t, int *port, const char *const *more)
{
    static char ps[32];
    const char *args[16];
    int n = 0;
    *port = th_free_port();
    cr_assert_gt(*port, 0);
    snprintf(ps, sizeof(ps), "127.0.0.1:%d", *port);
    args[n++] = "--metrics-listen";
    args[n++] = ps;
    for (int i = 0; more != NULL && more[i] != NULL && n < 15; i++)
        args[n++] = more[i];
    args[n] = NULL;
    static const char *const k[] = {"empty", NULL};
    th_env_init(t, k);
    th_env_start(t, args, NULL);
    char why[256] = "";
    (void)cumod_fast_path_why(t->c, why, sizeof(why));
    cr_assert(cumod_fast_path(t->c), "the client has its ring: %s", why);
}

/* The counter once it reaches want (the executor tells the front its
 * counts as its work completes), or as it is after 5 s. */
static double
dg_metric_until(int port, const char *name, const char *label, double want)
{
    double v = -1;
    for (int w = 0; w < 500; w++) {
        if ((v = th_metric_sum(port, name, label)) >= want)
            return v;
        th_sleep_ms(10);
    }
    return v;
}

static gm_case
dg_case(cumod_gemm_type type, int order)
{
    return (gm_case){.type = type,
                     .order = (cumod_gemm_order)order,
                     .transa = order,
                     .m = 9,
                     .n = 7,
                     .k = 5,
                     .pad_a = 1,
                     .off_c = 2,
                     .alpha = 1.25,
                     .beta = -0.5};
}

/* h's three operands (FP32) uploaded into new buffers of c, in b[]. */
static void
dg_upload(cumod_client *c, const gm_host *h, cumod_buffer b[3])
{
    for (int i = 0; i < 3; i++) {
        size_t bytes = h->elems[i] * gm_esize(CUMOD_GEMM_FP32);
        cr_assert_eq(cumod_buffer_alloc(c, bytes, &b[i]), CUMOD_OK, "%s",
                     cumod_last_detail());
        cr_assert_eq(cumod_buffer_write(c, b[i], 0, h->bytes[i], bytes, 0),
                     CUMOD_OK, "%s", cumod_last_detail());
    }
}

/* Every type and both orders, on the default stream and a stream of its
 * own: right numbers, and all but each stream's first GEMM the
 * executor's (cumod_direct_launches_total), with their device time under
 * "gemm" as the front's. */
Test(direct_gemm, gemms_after_a_streams_first_are_the_executors, .timeout = 120)
{
    static const cumod_gemm_type types[] = {CUMOD_GEMM_FP32, CUMOD_GEMM_FP64,
                                            CUMOD_GEMM_FP16, CUMOD_GEMM_BF16};
    th_env t;
    int port;
    char why[1024], name[200];
    dg_start(&t, &port, NULL);
    cumod_stream s;
    cr_assert_eq(cumod_stream_create(t.c, &s), CUMOD_OK);
    unsigned seed = 7;
    int n = 0;
    for (int stream = 0; stream < 2; stream++)
        for (int ti = 0; ti < 4; ti++)
            for (int order = 0; order < 2; order++) {
                gm_case k = dg_case(types[ti], order);
                long bad = gm_run(t.c, &k, seed++, stream ? s : 0,
                                  gm_tolerance(types[ti], th_real_gpu()), why,
                                  sizeof(why));
                gm_case_name(&k, name, sizeof(name));
                cr_expect_eq(bad, 0, "%s (stream %d): %ld wrong: %s", name,
                             stream, bad, why);
                n++;
            }
    /* Two firsts (one a stream) through the front; the rest direct. */
    double direct =
        dg_metric_until(port, "cumod_direct_launches_total", "", n - 2);
    cr_expect_eq(direct, n - 2,
                 "all but each stream's first GEMM ran in the executor: "
                 "%.0f of %d",
                 direct, n);
    if (!th_real_gpu()) {
        char *log = th_read_file(t.fake_log);
        cr_assert_not_null(log);
        cr_expect_eq(th_count(log, "call fn=cublasGemmEx "), n,
                     "one cuBLAS call per GEMM, wherever it ran");
        free(log);
    }
    /* A few more, enqueued, and waited for by ticket. */
    gm_host h;
    cumod_buffer b[3];
    gm_case k = dg_case(CUMOD_GEMM_FP32, 0);
    cr_assert_eq(gm_host_make(&h, &k, 99), 0);
    dg_upload(t.c, &h, b);
    cumod_gemm_desc d = gm_desc(&h, b[0], b[1], b[2]);
    cumod_ticket tk = 0;
    cr_assert_eq(cumod_gemm(t.c, &d, &tk), CUMOD_OK, "%s", cumod_last_detail());
    cr_assert_eq(cumod_wait(t.c, tk), CUMOD_OK, "%s", cumod_last_detail());
    size_t cb = h.elems[2] * gm_esize(CUMOD_GEMM_FP32);
    void *got = malloc(cb);
    cr_assert_eq(cumod_buffer_read(t.c, b[2], 0, got, cb, 0), CUMOD_OK);
    cr_expect_eq(gm_compare(&h, got,
                            gm_tolerance(CUMOD_GEMM_FP32, th_real_gpu()), why,
                            sizeof(why)),
                 0, "the enqueued GEMM: %s", why);
    free(got);
    gm_host_free(&h);
    direct = dg_metric_until(port, "cumod_direct_launches_total", "", n - 1);
    cr_expect_eq(direct, n - 1, "the enqueued one was the executor's too");
    cr_expect_gt(dg_metric_until(port, "cumod_gpu_seconds_total", "gemm", 1e-9),
                 0, "their device time counted under kernel \"gemm\"");
    cr_expect_leq(th_metric_sum(port, "cumod_launches_total", ""), 0,
                  "a GEMM is no launch, wherever it ran");
    th_env_stop(&t);
}

/* What the executor's snapshot cannot pass goes to the front, which
 * refuses it in its own words: an operand past its buffer's end, C laid
 * over A's buffer, a buffer freed since the last GEMM. A deadline
 * sends it to the front too, and it runs there. */
Test(direct_gemm, refusals_are_the_fronts_words, .timeout = 120)
{
    th_env t;
    int port;
    char why[1024];
    dg_start(&t, &port, NULL);
    gm_case k = dg_case(CUMOD_GEMM_FP32, 0);
    gm_host h;
    cumod_buffer b[3];
    cr_assert_eq(gm_host_make(&h, &k, 3), 0);
    dg_upload(t.c, &h, b);
    cumod_gemm_desc d = gm_desc(&h, b[0], b[1], b[2]);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(cumod_gemm(t.c, &d, NULL), CUMOD_OK, "%s",
                     cumod_last_detail());
    double direct = dg_metric_until(port, "cumod_direct_launches_total", "", 2);
    cr_assert_eq(direct, 2, "the GEMMs after the first are direct");

    cumod_gemm_desc past = d;
    past.c.offset += 4096;
    cr_expect_eq(cumod_gemm(t.c, &past, NULL), CUMOD_EINVAL);
    cr_expect_not_null(strstr(cumod_last_detail(), "C: needs"), "%s",
                       cumod_last_detail());
    cumod_gemm_desc onto_a = d; /* C written over A's buffer */
    onto_a.c = d.a;
    cr_expect_eq(cumod_gemm(t.c, &onto_a, NULL), CUMOD_EINVAL);
    cr_expect_eq(strncmp(cumod_last_detail(), "C", 1), 0, "%s",
                 cumod_last_detail());
    cumod_gemm_desc late = d;
    late.deadline_ms = 60000;
    cr_expect_eq(cumod_gemm(t.c, &late, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_buffer_free(t.c, b[1]), CUMOD_OK);
    cr_expect_eq(cumod_gemm(t.c, &d, NULL), CUMOD_ENOENT,
                 "a freed B is refused at the very next GEMM");
    cr_expect_not_null(strstr(cumod_last_detail(), "B: buffer"), "%s",
                       cumod_last_detail());
    th_sleep_ms(200);
    cr_expect_eq(th_metric_sum(port, "cumod_direct_launches_total", ""), 2,
                 "none of these ran in the executor");
    /* And the good one still computes right after them. */
    cr_assert_eq(cumod_buffer_alloc(t.c, h.elems[1] * 4, &b[1]), CUMOD_OK);
    cr_assert_eq(
        cumod_buffer_write(t.c, b[1], 0, h.bytes[1], h.elems[1] * 4, 0),
        CUMOD_OK);
    cumod_gemm_desc again = gm_desc(&h, b[0], b[1], b[2]);
    cr_assert_eq(
        cumod_buffer_write(t.c, b[2], 0, h.bytes[2], h.elems[2] * 4, 0),
        CUMOD_OK);
    cr_assert_eq(cumod_gemm(t.c, &again, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    void *got = malloc(h.elems[2] * 4);
    cr_assert_eq(cumod_buffer_read(t.c, b[2], 0, got, h.elems[2] * 4, 0),
                 CUMOD_OK);
    cr_expect_eq(gm_compare(&h, got,
                            gm_tolerance(CUMOD_GEMM_FP32, th_real_gpu()), why,
                            sizeof(why)),
                 0, "%s", why);
    free(got);
    gm_host_free(&h);
    th_env_stop(&t);
}

/* A stream destroyed and made again: its workspace was given back, so its
 * next GEMM is the front's again (which charges it anew), then direct. */
Test(direct_gemm, a_new_stream_is_charged_again_by_the_front, .timeout = 120)
{
    th_env t;
    int port;
    char why[1024];
    dg_start(&t, &port, NULL);
    gm_case k = dg_case(CUMOD_GEMM_FP16, 1);
    for (int round = 0; round < 2; round++) {
        cumod_stream s;
        cr_assert_eq(cumod_stream_create(t.c, &s), CUMOD_OK);
        for (int i = 0; i < 3; i++)
            cr_expect_eq(gm_run(t.c, &k, 11u + (unsigned)i, s,
                                gm_tolerance(CUMOD_GEMM_FP16, th_real_gpu()),
                                why, sizeof(why)),
                         0, "round %d GEMM %d: %s", round, i, why);
        cr_assert_eq(cumod_stream_destroy(t.c, s), CUMOD_OK);
    }
    cr_expect_eq(dg_metric_until(port, "cumod_direct_launches_total", "", 4), 4,
                 "each stream's first through the front, two direct each");
    th_env_stop(&t);
}

/* Two sessions on one executor, each with its GEMMs on the direct path:
 * one naming buffer handles only the other holds is refused (the
 * snapshot is per session, and the front says the buffer is not its
 * connection's), and the other's C keeps its bytes. */
Test(direct_gemm, another_sessions_buffers_are_out_of_reach, .timeout = 120)
{
    th_env t;
    int port;
    char why[1024];
    dg_start(&t, &port, NULL);
    cumod_client *b;
    cr_assert_eq(cumod_open(t.d.url, 10000, &b), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert(cumod_fast_path(b));
    /* a: six buffers (its last three a GEMM's); b: three, GEMMs direct. */
    gm_case k = dg_case(CUMOD_GEMM_FP32, 0);
    gm_host h;
    cr_assert_eq(gm_host_make(&h, &k, 5), 0);
    cumod_buffer pad[3], ab[3], bb[3];
    for (int i = 0; i < 3; i++)
        cr_assert_eq(cumod_buffer_alloc(t.c, 64, &pad[i]), CUMOD_OK);
    dg_upload(t.c, &h, ab);
    dg_upload(b, &h, bb);
    cumod_gemm_desc db = gm_desc(&h, bb[0], bb[1], bb[2]);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(cumod_gemm(b, &db, NULL), CUMOD_OK, "%s",
                     cumod_last_detail());
    cr_assert_eq(dg_metric_until(port, "cumod_direct_launches_total", "", 2), 2,
                 "b's GEMMs after its first are direct");
    /* b names a's handles: its own numbering has no such buffers. */
    cr_assert(ab[2] != bb[2], "a's C has a handle b never got");
    cumod_gemm_desc stolen = gm_desc(&h, bb[0], bb[1], ab[2]);
    cr_expect_eq(cumod_gemm(b, &stolen, NULL), CUMOD_ENOENT);
    cr_expect_not_null(strstr(cumod_last_detail(), "C: buffer"), "%s",
                       cumod_last_detail());
    cr_expect_not_null(strstr(cumod_last_detail(), "this connection"), "%s",
                       cumod_last_detail());
    /* a's C: as written, not a product. */
    size_t cb = h.elems[2] * 4;
    char *got = malloc(cb);
    cr_assert_eq(cumod_buffer_read(t.c, ab[2], 0, got, cb, 0), CUMOD_OK);
    cr_expect_eq(memcmp(got, h.bytes[2], cb), 0, "a's C untouched by b's GEMM");
    /* and a's own GEMM on it still computes right */
    cumod_gemm_desc da = gm_desc(&h, ab[0], ab[1], ab[2]);
    cr_assert_eq(cumod_gemm(t.c, &da, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_buffer_read(t.c, ab[2], 0, got, cb, 0), CUMOD_OK);
    cr_expect_eq(gm_compare(&h, got,
                            gm_tolerance(CUMOD_GEMM_FP32, th_real_gpu()), why,
                            sizeof(why)),
                 0, "%s", why);
    free(got);
    gm_host_free(&h);
    cumod_close(b);
    th_env_stop(&t);
}

/* A waited GEMM of its own client. */
typedef struct dg_waiter {
    cumod_client *c;
    cumod_gemm_desc d;
    int rv;
    char detail[512];
} dg_waiter;

static void *
dg_wait_main(void *arg)
{
    dg_waiter *w = arg;
    w->rv = cumod_gemm(w->c, &w->d, NULL);
    snprintf(w->detail, sizeof(w->detail), "%s", cumod_last_detail());
    return NULL;
}

/* The executor killed with direct GEMMs held in flight (one waited for by
 * a second client, one answered when enqueued): each is answered once,
 * with the loss (the front answers them from the ring's state block; a
 * GEMM has no module to blame), and both clients are served again, the
 * next GEMMs through the new executor's cuBLAS. */
Test(direct_gemm, gemms_in_flight_when_the_executor_dies_are_answered_once,
     .timeout = 120)
{
    th_env t;
    int port;
    if (th_real_gpu())
        cr_skip_test("holds GEMMs in the fake cuBLAS");
    dg_start(&t, &port, NULL);
    cumod_client *b;
    cr_assert_eq(cumod_open(t.d.url, 10000, &b), CUMOD_OK, "%s",
                 cumod_last_detail());
    gm_case k = dg_case(CUMOD_GEMM_FP32, 0);
    gm_host h;
    cr_assert_eq(gm_host_make(&h, &k, 21), 0);
    cumod_buffer ab[3], bb[3];
    dg_upload(t.c, &h, ab);
    dg_upload(b, &h, bb);
    cumod_gemm_desc da = gm_desc(&h, ab[0], ab[1], ab[2]),
                    db = gm_desc(&h, bb[0], bb[1], bb[2]);
    /* The first of each stream through the front. */
    cr_assert_eq(cumod_gemm(t.c, &da, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_gemm(b, &db, NULL), CUMOD_OK, "%s", cumod_last_detail());
    cumod_device_info di;
    cr_assert_eq(cumod_device_info_get(t.c, &di), CUMOD_OK);
    pid_t exec_pid = (pid_t)di.executor_pid;
    cr_assert_gt(exec_pid, 0);
    cr_assert_eq(th_write_file(t.fake_hold, "cublasGemmEx\n"), 0);
    cumod_ticket tk = 0;
    cr_assert_eq(cumod_gemm(t.c, &da, &tk), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_geq(tk, 1ull << 62, "the executor's ticket: served direct");
    dg_waiter w = {.c = b, .d = db};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, dg_wait_main, &w), 0);
    th_sleep_ms(300);
    cr_assert_eq(kill(exec_pid, SIGKILL), 0);
    pthread_join(th, NULL);
    unlink(t.fake_hold);
    cr_expect_eq(w.rv, CUMOD_ECTXLOST, "the waited GEMM hears the loss: %s",
                 w.detail);
    int rv = cumod_wait(t.c, tk);
    cr_expect_eq(rv, CUMOD_ECTXLOST, "the enqueued one's Wait too: %s",
                 cumod_last_detail());
    rv = cumod_wait(t.c, tk);
    cr_expect_neq(rv, CUMOD_ECTXLOST, "its failure is reported once");
    /* Served again: new buffers (the old ones went with the context), a
     * GEMM computed right on each client. */
    for (int i = 0; i < 1000; i++) {
        if ((rv = cumod_buffer_alloc(t.c, 64, &ab[0])) == CUMOD_OK)
            break;
        th_sleep_ms(10);
    }
    cr_assert_eq(rv, CUMOD_OK, "served again: %s", cumod_last_detail());
    char why[1024];
    cr_expect_eq(gm_run(t.c, &k, 22, 0, gm_tolerance(CUMOD_GEMM_FP32, 0), why,
                        sizeof(why)),
                 0, "%s", why);
    cr_expect_eq(gm_run(b, &k, 23, 0, gm_tolerance(CUMOD_GEMM_FP32, 0), why,
                        sizeof(why)),
                 0, "%s", why);
    gm_host_free(&h);
    cumod_close(b);
    th_env_stop(&t);
}
