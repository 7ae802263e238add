/* SPDX-License-Identifier: MIT */
/*
 * GPU time per tenant (issue 20, point 6), on the fake driver with the
 * real daemon: the device time of completed launches, copies and GEMMs in
 * cumod_gpu_seconds_total{device,domain,module,kernel} and per session in
 * cumod_session_gpu_seconds_total (gone with its session), per-kernel
 * series for resident modules only, and cumodctl top.
 *
 * Work whose device time must be known is held by the fake (a hold file
 * naming the kernel or cublasGemmEx, CUMOD_FAKE_COPY_HOLD for copies) for
 * at least HOLD_MS after the fake's log shows it submitted: the time
 * counted is at least that (it runs from the submission to the completion
 * seen). Only lower bounds are asserted: no figure depends on how fast
 * this machine is.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cumod/cumod.h"
#include "fixture.h"

TH_SUITE_DRIVER(0);

#define HOLD_MS 300

typedef struct gt {
    th_env e;
    int port;
    char copy_hold[320];
} gt;

/* How many times needle is in the fake's log. */
static int
gt_log_count(const gt *t, const char *needle)
{
    char *log = th_read_file(t->e.fake_log);
    int n = th_count(log, needle);
    free(log);
    return n;
}

/* Waits (up to 20 s) until the fake's log has needle more than n times:
 * the work was submitted; then HOLD_MS more. */
static void
gt_held_for(const gt *t, const char *needle, int n)
{
    for (int i = 0; i < 2000 && gt_log_count(t, needle) <= n; i++)
        th_sleep_ms(10);
    cr_assert_gt(gt_log_count(t, needle), n, "the fake never saw %s", needle);
    th_sleep_ms(HOLD_MS);
}

static void
gt_start(gt *t)
{
    static const char *const k[] = {"vadd", "empty", NULL};
    char listen[64], env_copy[400];
    th_env_init(&t->e, k);
    t->port = th_free_port();
    cr_assert_gt(t->port, 0);
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", t->port);
    snprintf(t->copy_hold, sizeof(t->copy_hold), "%s/.copy_hold", t->e.dir);
    snprintf(env_copy, sizeof(env_copy), "CUMOD_FAKE_COPY_HOLD=%s",
             t->copy_hold);
    const char *extra[] = {"--metrics-listen", listen, NULL};
    const char *env[] = {env_copy, NULL};
    th_env_start(&t->e, extra, env);
}

/* GET /metrics (malloc'd). */
static char *
gt_metrics(const gt *t)
{
    char *m = th_metrics_get(t->port);
    cr_assert_not_null(m, "no answer from --metrics-listen");
    return m;
}

/* The value of the series whose line starts with prefix ("name{labels}"),
 * or -1 when there is none. */
static double
gt_value(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);
    for (const char *p = text; p != NULL && *p; p = strchr(p, '\n')) {
        if (*p == '\n')
            p++;
        if (strncmp(p, prefix, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    }
    return -1;
}

#define KSERIES(mod, kern)                                                     \
    "cumod_gpu_seconds_total{device=\"0\",domain=\"default\",module=\"" mod    \
    "\",kernel=\"" kern "\"" TH_DEV_END(0)

/* The scrape once pred holds of it (polled for up to 10 s: the front
 * accounts a completion on its loop, maybe after the answer). */
static char *
gt_metrics_until(const gt *t, int (*pred)(const char *, const void *),
                 const void *arg)
{
    char *m = NULL;
    for (int i = 0; i < 1000; i++) {
        free(m);
        m = gt_metrics(t);
        if (pred(m, arg))
            return m;
        th_sleep_ms(10);
    }
    return m;
}

typedef struct gt_vadd {
    cumod_buffer a, b, out;
    cumod_arg args[4];
    cumod_launch_params p;
} gt_vadd;

static void
gt_vadd_init(gt_vadd *v, cumod_client *c)
{
    memset(v, 0, sizeof(*v));
    cr_assert_eq(cumod_buffer_alloc(c, 4096, &v->a), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_buffer_alloc(c, 4096, &v->b), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(c, 4096, &v->out), CUMOD_OK);
    v->args[0] = cumod_arg_buffer(v->a, 0);
    v->args[1] = cumod_arg_buffer(v->b, 0);
    v->args[2] = cumod_arg_buffer(v->out, 0);
    v->args[3] = cumod_arg_i32(1024);
    v->p = (cumod_launch_params){.kernel = "vadd:vadd",
                                 .grid = {4, 1, 1},
                                 .block = {256, 1, 1},
                                 .nargs = 4,
                                 .args = v->args};
}

/* Launches vadd held for HOLD_MS, and waits for it. */
static void
gt_vadd_held(gt *t, cumod_client *c, gt_vadd *v)
{
    cumod_ticket tk = 0;
    int n = gt_log_count(t, "launch fn=vadd ");
    cr_assert_eq(th_write_file(t->e.fake_hold, "vadd\n"), 0);
    cr_assert_eq(cumod_launch(c, &v->p, &tk, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    gt_held_for(t, "launch fn=vadd ", n);
    cr_assert_eq(unlink(t->e.fake_hold), 0);
    cr_assert_eq(cumod_wait(c, tk), CUMOD_OK, "%s", cumod_last_detail());
}

static int
gt_has_sessions(const char *m, const void *arg)
{
    return th_count(m, "cumod_session_gpu_seconds_total{") == *(const int *)arg;
}

/* The session series' values, in the order of the scrape (at most n). */
static int
gt_session_values(const char *m, double *v, int n)
{
    int k = 0;
    const char *name = "\ncumod_session_gpu_seconds_total{";
    for (const char *p = strstr(m, name); p != NULL && k < n;
         p = strstr(p + 1, name)) {
        const char *sp = strchr(p + 1, ' ');
        cr_assert_not_null(sp);
        cr_expect(strstr(p, "domain=\"default\"") != NULL &&
                      strstr(p, "domain=\"default\"") < sp,
                  "the session's domain is labelled");
        v[k++] = strtod(sp + 1, NULL);
    }
    return k;
}

Test(gputime, sessions_and_kernels_accumulate_device_time, .timeout = 120)
{
    gt t;
    gt_vadd va;
    cumod_client *b;
    double v[4];

    gt_start(&t);
    gt_vadd_init(&va, t.e.c);
    gt_vadd_held(&t, t.e.c, &va);
    /* A second session runs empty, briefly. */
    cr_assert_eq(cumod_open(t.e.d.url, 30000, &b), CUMOD_OK);
    cumod_launch_params e = {
        .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {1, 1, 1}};
    for (int i = 0; i < 3; i++)
        cr_assert_eq(cumod_launch(b, &e, NULL, NULL), CUMOD_OK, "%s",
                     cumod_last_detail());

    int two = 2;
    char *m = gt_metrics_until(&t, gt_has_sessions, &two);
    double vadd = gt_value(m, KSERIES("vadd", "vadd"));
    cr_expect_geq(vadd, HOLD_MS / 1e3,
                  "vadd held %d ms counts at least that:\n%s", HOLD_MS, m);
    cr_expect_gt(gt_value(m, KSERIES("empty", "empty")), 0,
                 "empty's launches count:\n%s", m);
    cr_assert_eq(gt_session_values(m, v, 4), 2, "two sessions:\n%s", m);
    /* One session holds vadd's time, the other only empty's. */
    double hi = v[0] > v[1] ? v[0] : v[1], lo = v[0] > v[1] ? v[1] : v[0];
    cr_expect_geq(hi, HOLD_MS / 1e3, "%s", m);
    cr_expect_gt(lo, 0, "the other session's launches count too:\n%s", m);
    free(m);

    /* A session's series goes with it; the totals stay. */
    cumod_close(b);
    int one = 1;
    m = gt_metrics_until(&t, gt_has_sessions, &one);
    cr_expect_eq(th_count(m, "cumod_session_gpu_seconds_total{"), 1,
                 "the closed session's series is gone:\n%s", m);
    cr_assert_eq(gt_session_values(m, v, 4), 1);
    cr_expect_geq(v[0], HOLD_MS / 1e3, "%s", m);
    cr_expect_geq(gt_value(m, KSERIES("vadd", "vadd")), vadd, "%s", m);
    cr_expect_gt(gt_value(m, KSERIES("empty", "empty")), 0, "%s", m);
    free(m);
    th_env_stop(&t.e);
}

static int
gt_vadd_folded(const char *m, const void *arg)
{
    (void)arg;
    return gt_value(m, KSERIES("vadd", "vadd")) < 0 &&
           gt_value(m, KSERIES("vadd", "")) > 0;
}

Test(gputime, per_kernel_series_only_for_resident_modules, .timeout = 120)
{
    gt t;
    gt_vadd va;

    gt_start(&t);
    gt_vadd_init(&va, t.e.c);
    gt_vadd_held(&t, t.e.c, &va);
    char *m = gt_metrics(&t);
    double before = gt_value(m, KSERIES("vadd", "vadd"));
    cr_expect_geq(before, HOLD_MS / 1e3, "%s", m);
    cr_expect_lt(gt_value(m, KSERIES("vadd", "")), 0,
                 "no module series while it is resident:\n%s", m);
    free(m);
    /* Unloaded: its kernels' time folds into the module's series. */
    cumod_module_result r;
    cr_assert_eq(cumod_module_unload(t.e.c, "vadd", &r), CUMOD_OK, "%s",
                 cumod_last_detail());
    m = gt_metrics_until(&t, gt_vadd_folded, NULL);
    cr_expect_lt(gt_value(m, KSERIES("vadd", "vadd")), 0,
                 "no per-kernel series of a module not resident:\n%s", m);
    cr_expect_geq(gt_value(m, KSERIES("vadd", "")), before,
                  "its time kept under kernel=\"\":\n%s", m);
    free(m);
    /* Resident again: a per-kernel series anew, the folded one stays. */
    gt_vadd_held(&t, t.e.c, &va);
    m = gt_metrics(&t);
    cr_expect_geq(gt_value(m, KSERIES("vadd", "vadd")), HOLD_MS / 1e3, "%s", m);
    cr_expect_geq(gt_value(m, KSERIES("vadd", "")), before, "%s", m);
    free(m);
    th_env_stop(&t.e);
}

typedef struct gt_release {
    const gt *t;
    int n; /* copy-waiting lines before */
    pthread_t th;
} gt_release;

static void *
gt_release_later(void *arg)
{
    gt_release *r = arg;
    gt_held_for(r->t, "copy-waiting", r->n);
    (void)unlink(r->t->copy_hold);
    return NULL;
}

static int
gt_has_copy_and_gemm(const char *m, const void *arg)
{
    (void)arg;
    return gt_value(m, KSERIES("", "copy")) >= HOLD_MS / 1e3 &&
           gt_value(m, KSERIES("", "gemm")) >= HOLD_MS / 1e3;
}

Test(gputime, copies_and_gemms_count, .timeout = 120)
{
    enum { M = 8, K = 16 };
    float ones[M * K], vec[K], out[M];
    cumod_buffer a, bb, c;
    cumod_ticket tk = 0;
    gt t;

    gt_start(&t);
    for (int i = 0; i < M * K; i++)
        ones[i] = 1;
    for (int i = 0; i < K; i++)
        vec[i] = 1;
    cr_assert_eq(cumod_buffer_alloc(t.e.c, sizeof(ones), &a), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.e.c, sizeof(vec), &bb), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.e.c, sizeof(out), &c), CUMOD_OK);
    cr_assert_eq(cumod_buffer_write(t.e.c, bb, 0, vec, sizeof(vec), 0),
                 CUMOD_OK);
    /* A copy held for HOLD_MS (it blocks the executor's submission: the
     * release comes from another thread). */
    gt_release rel = {.t = &t, .n = gt_log_count(&t, "copy-waiting")};
    cr_assert_eq(th_write_file(t.copy_hold, ""), 0);
    cr_assert_eq(pthread_create(&rel.th, NULL, gt_release_later, &rel), 0);
    cr_assert_eq(cumod_buffer_write(t.e.c, a, 0, ones, sizeof(ones), 0),
                 CUMOD_OK, "%s", cumod_last_detail());
    pthread_join(rel.th, NULL);
    /* A GEMM held for HOLD_MS. */
    cumod_gemm_desc d = {.type = CUMOD_GEMM_FP32,
                         .m = M,
                         .n = 1,
                         .k = K,
                         .alpha = 1,
                         .a = {a, 0, 0, 0},
                         .b = {bb, 0, 0, 0},
                         .c = {c, 0, 0, 0}};
    int n = gt_log_count(&t, "fn=cublasGemmEx");
    cr_assert_eq(th_write_file(t.e.fake_hold, "cublasGemmEx\n"), 0);
    cr_assert_eq(cumod_gemm(t.e.c, &d, &tk), CUMOD_OK, "%s",
                 cumod_last_detail());
    gt_held_for(&t, "fn=cublasGemmEx", n);
    cr_assert_eq(unlink(t.e.fake_hold), 0);
    cr_assert_eq(cumod_wait(t.e.c, tk), CUMOD_OK, "%s", cumod_last_detail());
    cr_assert_eq(cumod_buffer_read(t.e.c, c, 0, out, sizeof(out), 0), CUMOD_OK);
    cr_expect_eq(out[0], (float)K, "the GEMM ran");

    char *m = gt_metrics_until(&t, gt_has_copy_and_gemm, NULL);
    cr_expect_geq(gt_value(m, KSERIES("", "copy")), HOLD_MS / 1e3, "%s", m);
    cr_expect_geq(gt_value(m, KSERIES("", "gemm")), HOLD_MS / 1e3, "%s", m);
    double v[2];
    cr_assert_eq(gt_session_values(m, v, 2), 1, "%s", m);
    cr_expect_geq(v[0], 2 * HOLD_MS / 1e3, "the session has both:\n%s", m);
    free(m);
    th_env_stop(&t.e);
}

/* cumodctl top in a child, its JSON into out (run while the test goes
 * on). */
static pid_t
gt_top_start(gt *t, const char *interval, const char *out)
{
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        char *o = NULL, *err = NULL;
        const char *args[] = {"top", "--json", "--interval", interval, NULL};
        int rc = th_ctl(&t->e.d, args, &o, &err);
        if (rc != 0 || th_write_file(out, o ? o : "") != 0) {
            fprintf(stderr, "cumodctl top: %d: %s\n", rc, err ? err : "");
            _exit(1);
        }
        _exit(0);
    }
    return pid;
}

/* The n-th (0-based) value of "key": in text, or -1. */
static double
gt_json_nth(const char *text, const char *key, int n)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\": ", key);
    const char *p = text;
    for (int i = 0; p != NULL; i++) {
        p = strstr(p, pat);
        if (p == NULL)
            break;
        p += strlen(pat);
        if (i == n)
            return strtod(p, NULL);
    }
    return -1;
}

Test(gputime, top_lists_sessions_by_gpu_time, .timeout = 120)
{
    gt t;
    gt_vadd va;
    cumod_client *b;
    char out[400];
    int status;

    gt_start(&t);
    snprintf(out, sizeof(out), "%s/.top", t.e.dir);
    /* Session b runs empty a few times first: more time in all than t's
     * (none yet), less in the interval top measures. */
    cr_assert_eq(cumod_open(t.e.d.url, 30000, &b), CUMOD_OK);
    cumod_launch_params e = {
        .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {1, 1, 1}};
    for (int i = 0; i < 3; i++)
        cr_assert_eq(cumod_launch(b, &e, NULL, NULL), CUMOD_OK);
    gt_vadd_init(&va, t.e.c);
    cumod_ticket tk = 0;
    int n = gt_log_count(&t, "launch fn=vadd ");
    cr_assert_eq(th_write_file(t.e.fake_hold, "vadd\n"), 0);
    cr_assert_eq(cumod_launch(t.e.c, &va.p, &tk, NULL), CUMOD_OK);
    /* top's first listing comes before vadd completes (it is held until
     * released below), its second after: vadd's time is in its interval
     * (a listing is one round trip: well within the 4 s). */
    pid_t pid = gt_top_start(&t, "4", out);
    gt_held_for(&t, "launch fn=vadd ", n);
    /* top connected (a third session), and had time to list once. */
    size_t ns = 0;
    for (int i = 0; i < 2000 && ns < 3; i++) {
        cumod_session_info *l = NULL;
        cr_assert_eq(cumod_sessions_list(t.e.c, &l, &ns, NULL), CUMOD_OK);
        free(l);
        if (ns < 3)
            th_sleep_ms(10);
    }
    cr_assert_eq(ns, 3, "cumodctl top never connected");
    th_sleep_ms(HOLD_MS);
    cr_assert_eq(unlink(t.e.fake_hold), 0);
    cr_assert_eq(cumod_wait(t.e.c, tk), CUMOD_OK);
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char *j = th_read_file(out);
    cr_assert_not_null(j);
    /* Three sessions: t's, b's and top's own; t's first. */
    cr_expect_eq(th_count(j, "\"session\":"), 3, "%s", j);
    cr_expect_eq(th_count(j, "\"domain\": \"default\""), 3, "%s", j);
    cr_expect_geq(gt_json_nth(j, "interval_gpu_seconds", 0), HOLD_MS / 1e3,
                  "the session whose vadd ran in the interval comes first:\n%s",
                  j);
    cr_expect_gt(gt_json_nth(j, "gpu_percent", 0), 0, "%s", j);
    cr_expect_eq(gt_json_nth(j, "pid", 0), getpid(), "%s", j);
    cr_expect_eq(gt_json_nth(j, "interval_gpu_seconds", 1), 0, "%s", j);
    cr_expect_gt(gt_json_nth(j, "gpu_seconds", 1), 0,
                 "b's earlier time comes second (by time in all):\n%s", j);
    free(j);

    /* The text form: a header and a row each. */
    char *o = NULL, *err = NULL;
    const char *args[] = {"top", "--interval", "0.1", NULL};
    cr_assert_eq(th_ctl(&t.e.d, args, &o, &err), 0, "%s", err);
    cr_expect(strncmp(o, "SESSION", 7) == 0, "%s", o);
    cr_expect_eq(th_count(o, "default"), 3, "%s", o);
    free(o);
    free(err);
    cumod_close(b);
    th_env_stop(&t.e);
}
