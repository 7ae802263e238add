/* SPDX-License-Identifier: MIT */
/*
 * The first end-to-end slice: cumodd as a real process (on tests/fakecuda,
 * or on the real driver when built as tests/gpu's gpu_slice_test), its
 * socket in a temp folder, and cumodctl talking to it.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"

#ifdef CUMOD_TEST_REAL_GPU
TH_SUITE_DRIVER(1);
#else
TH_SUITE_DRIVER(0);
#endif

#define REQUIRE_GPU()                                                          \
    do {                                                                       \
        const char *why_;                                                      \
        if (!th_gpu_available(&why_))                                          \
            cr_skip_test("%s", why_);                                          \
    } while (0)

static const char *const kernels_args[] = {"--kernels", CUMOD_TEST_KERNEL_DIR,
                                           NULL};

/* For the daemons of the two tests that trigger nng 1.5.2's #1518 on
 * purpose: the pipes stuck in the dead listener are nng's, never freed by
 * nng_close, and a sanitizer build's leak check would report them at exit.
 * Every other daemon of the suite keeps the leak check. */
static const char *const nng1518_env[] = {"ASAN_OPTIONS=detect_leaks=0", NULL};

static void
start_or_fail(th_daemon *d, const char *const *args, const char *const *env)
{
    if (th_daemon_start(d, args, env) != 0) {
        char *log = th_daemon_log(d);
        int rc = th_daemon_stop(d);
        cr_assert_fail("cumodd did not come up (exit %d); its log:\n%s", rc,
                       log);
    }
}

static void
stop_clean(th_daemon *d)
{
    /* Stop, then read the log: a sanitizer's report comes at exit. */
    kill(d->pid, SIGTERM);
    (void)th_daemon_wait(d, 10000);
    char *log = th_daemon_log(d);
    int rc = th_daemon_stop(d);
    cr_expect_eq(rc, 0, "cumodd should exit 0 on SIGTERM, got %d; log:\n%s", rc,
                 log);
    free(log);
}

/* A number that follows key in out, or -1. */
static long long
json_number(const char *out, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\": ", key);
    const char *p = strstr(out, pat);
    return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

Test(slice, status_prints_device_driver_and_memory, .timeout = 90)
{
    th_daemon d;
    char *out, *err;

    REQUIRE_GPU();
    start_or_fail(&d, kernels_args, NULL);
    int rc = th_ctl(&d, (const char *[]){"status", NULL}, &out, &err);
    cr_assert_eq(rc, 0, "cumodctl status failed (%d): %s", rc, err);
    cr_expect(strstr(out, "device:   0: ") != NULL, "no device line:\n%s", out);
    cr_expect(strstr(out, "sm:       ") != NULL, "no SM line:\n%s", out);
    cr_expect(strstr(out, "driver:   CUDA ") != NULL, "no driver:\n%s", out);
    cr_expect(strstr(out, " total, ") && strstr(out, " free ("),
              "no memory line:\n%s", out);
    cr_expect(strstr(out, CUMOD_TEST_KERNEL_DIR) != NULL,
              "the kernel folder is not shown:\n%s", out);
    if (th_real_gpu()) {
        cr_expect(strstr(out, "NVIDIA") != NULL, "not an NVIDIA device:\n%s",
                  out);
    } else {
        cr_expect(strstr(out, "fakecuda") != NULL, "not the fake:\n%s", out);
        cr_expect(strstr(out, "sm:       9.0 (sm_90), 132 multiprocessors"),
                  "the fake is an H100 (9.0, 132 SMs) by default:\n%s", out);
        cr_expect(strstr(out, "driver:   CUDA 13.0 (13000)"),
                  "the fake reports driver 13.0:\n%s", out);
        cr_expect(strstr(out, "memory:   80.0 GiB total, 80.0 GiB free"),
                  "the fake has 80 GiB, none used:\n%s", out);
    }
    printf("cumodctl status:\n%s", out);
    free(out);
    free(err);
    stop_clean(&d);
}

Test(slice, status_json_has_the_same_facts, .timeout = 90)
{
    th_daemon d;
    char *out, *err;

    REQUIRE_GPU();
    start_or_fail(&d, kernels_args, NULL);
    int rc = th_ctl(&d, (const char *[]){"status", "--json", NULL}, &out, &err);
    cr_assert_eq(rc, 0, "cumodctl status --json failed (%d): %s", rc, err);
    cr_expect(out[0] == '{' && strstr(out, "}\n") != NULL,
              "not one JSON object:\n%s", out);
    long long total = json_number(out, "total_bytes");
    long long freeb = json_number(out, "free_bytes");
    cr_expect(total > 0 && freeb > 0 && freeb <= total,
              "memory figures wrong (total %lld, free %lld):\n%s", total, freeb,
              out);
    cr_expect(json_number(out, "ordinal") == 0, "ordinal:\n%s", out);
    cr_expect(json_number(out, "executor_pid") > 1, "pid:\n%s", out);
    cr_expect(json_number(out, "protocol_version") == 1, "proto:\n%s", out);
    if (!th_real_gpu()) {
        cr_expect(strstr(out, "\"sm\": \"9.0\"") != NULL, "sm:\n%s", out);
        cr_expect(json_number(out, "sm_major") == 9, "sm_major:\n%s", out);
        cr_expect(json_number(out, "cuda_version") == 13000, "drv:\n%s", out);
        cr_expect_eq(total, 80LL << 30, "total:\n%s", out);
    } else {
        printf("cumodctl status --json:\n%s", out);
    }
    free(out);
    free(err);
    stop_clean(&d);
}

Test(slice, fake_sm_and_memory_are_what_the_driver_reports, .timeout = 60)
{
    th_daemon d;
    char *out;

    if (th_real_gpu())
        cr_skip_test("fakecuda settings: only on the fake driver");
    start_or_fail(&d, kernels_args,
                  (const char *[]){"CUMOD_FAKE_SM=86",
                                   "CUMOD_FAKE_MEM=1073741824", NULL});
    cr_assert_eq(
        th_ctl(&d, (const char *[]){"status", "--json", NULL}, &out, NULL), 0);
    cr_expect(strstr(out, "\"sm\": \"8.6\"") != NULL, "sm 8.6:\n%s", out);
    cr_expect_eq(json_number(out, "total_bytes"), 1073741824LL, "%s", out);
    free(out);
    stop_clean(&d);
}

Test(slice, missing_driver_says_so_in_plain_words, .timeout = 60)
{
    th_daemon d;

    int up = th_daemon_start(
        &d,
        (const char *[]){"--kernels", CUMOD_TEST_KERNEL_DIR, "--cuda-library",
                         "/nonexistent/libcuda.so.1", NULL},
        NULL);
    cr_assert_neq(up, 0, "cumodd came up without a driver");
    char *log = th_daemon_log(&d);
    int rc = th_daemon_stop(&d);
    cr_expect_eq(rc, 69, "exit status should be EX_UNAVAILABLE (69), got %d",
                 rc);
    cr_expect(strstr(log, "NVIDIA CUDA driver library") != NULL &&
                  strstr(log, "could not be loaded") != NULL,
              "the message should say the driver library is missing:\n%s", log);
    cr_expect(strstr(log, "cumodd needs an NVIDIA GPU") != NULL,
              "the message should say an NVIDIA GPU is needed:\n%s", log);
    cr_expect(strstr(log, "CUMOD-START-FAIL") != NULL, "tag:\n%s", log);
    free(log);
}

Test(slice, device_out_of_range_is_refused_with_the_count, .timeout = 60)
{
    th_daemon d;

    REQUIRE_GPU();
    int up =
        th_daemon_start(&d,
                        (const char *[]){"--kernels", CUMOD_TEST_KERNEL_DIR,
                                         "--device", "7", NULL},
                        NULL);
    cr_assert_neq(up, 0, "cumodd came up on device 7");
    char *log = th_daemon_log(&d);
    cr_expect_eq(th_daemon_stop(&d), 69);
    cr_expect(strstr(log, "CUDA device 7 does not exist: this machine has"),
              "%s", log);
    free(log);
}

Test(slice, a_driver_without_devices_is_a_clear_error, .timeout = 60)
{
    th_daemon d;

    if (th_real_gpu())
        cr_skip_test("fakecuda settings: only on the fake driver");
    int up = th_daemon_start(&d, kernels_args,
                             (const char *[]){"CUMOD_FAKE_DEVICES=0", NULL});
    cr_assert_neq(up, 0);
    char *log = th_daemon_log(&d);
    cr_expect_eq(th_daemon_stop(&d), 69);
    cr_expect(strstr(log, "found no CUDA device") != NULL, "%s", log);
    free(log);
}

Test(slice, bad_options_and_folders_exit_with_a_message, .timeout = 60)
{
    char *err;
    int rc = th_run((const char *[]){th_cumodd, "--kernels", "/tmp", "--device",
                                     "abc", NULL},
                    NULL, NULL, &err, 10000);
    cr_expect_eq(rc, 64, "usage errors exit EX_USAGE (64), got %d", rc);
    cr_expect(strstr(err, "--device: 'abc' is not a number") != NULL, "%s",
              err);
    free(err);

    rc = th_run((const char *[]){th_cumodd, "--listen", "ipc:///tmp/x", NULL},
                NULL, NULL, &err, 10000);
    cr_expect_eq(rc, 64);
    cr_expect(strstr(err, "--kernels DIR is required") != NULL, "%s", err);
    free(err);

    rc =
        th_run((const char *[]){th_cumodd, "--kernels", "/nonexistent/k", NULL},
               NULL, NULL, &err, 10000);
    cr_expect_eq(rc, 78, "a missing kernel folder exits EX_CONFIG (78): %d",
                 rc);
    cr_expect(strstr(err, "kernel folder /nonexistent/k: No such file") != NULL,
              "%s", err);
    free(err);
}

Test(slice, sigterm_stops_cleanly_and_logs_why, .timeout = 60)
{
    th_daemon d;

    REQUIRE_GPU();
    start_or_fail(&d, kernels_args, NULL);
    char sock[300];
    snprintf(sock, sizeof(sock), "%s/cumodd.sock", d.dir);
    kill(d.pid, SIGTERM);
    int rc = th_daemon_wait(&d, 10000);
    char *log = th_daemon_log(&d);
    cr_expect_eq(rc, 0, "exit status %d; log:\n%s", rc, log);
    cr_expect(strstr(log, "CUMOD-STOP") && strstr(log, "SIGTERM"), "%s", log);
    cr_expect(strstr(log, "error") == NULL, "errors in a clean stop:\n%s", log);
    free(log);
    th_daemon_stop(&d);
}

Test(slice, under_journald_lines_have_priority_and_no_timestamp, .timeout = 60)
{
    th_daemon d;

    REQUIRE_GPU();
    start_or_fail(&d, kernels_args,
                  (const char *[]){"JOURNAL_STREAM=8:1234", NULL});
    char *log = th_daemon_log(&d);
    cr_expect(strstr(log, "<5>CUMOD-READY: cumodd ") != NULL,
              "journal lines start <priority>TAG:\n%s", log);
    cr_expect(strstr(log, "Z cumodd[") == NULL, "no timestamps:\n%s", log);
    free(log);
    stop_clean(&d);
}

Test(slice, a_second_daemon_on_the_same_socket_is_refused, .timeout = 90)
{
    th_daemon a, b;

    REQUIRE_GPU();
    start_or_fail(&a, kernels_args, nng1518_env);
    char url[300];
    snprintf(url, sizeof(url), "%s", a.url);
    int up =
        th_daemon_start(&b,
                        (const char *[]){"--kernels", CUMOD_TEST_KERNEL_DIR,
                                         "--listen", url, NULL},
                        NULL);
    cr_expect_neq(up, 0);
    char *log = th_daemon_log(&b);
    cr_expect_eq(th_daemon_stop(&b), 69, "%s", log);
    cr_expect(strstr(log, "is another cumodd running?") != NULL, "%s", log);
    free(log);
    /* The first one goes on serving (the second's probe of the socket
     * is a connect-and-close, which nng 1.5.2 survives only with the
     * daemon's listener guard: give it its second to notice). */
    int rc = -1;
    for (int i = 0; i < 10 && rc != 0; i++)
        rc = th_ctl(&a, (const char *[]){"--timeout", "1000", "status", NULL},
                    NULL, NULL);
    cr_expect_eq(rc, 0, "the first daemon should serve again");
    stop_clean(&a);
}

Test(slice, a_client_dropping_mid_handshake_does_not_stop_service,
     .timeout = 90)
{
    th_daemon d;

    REQUIRE_GPU();
    start_or_fail(&d,
                  (const char *[]){"--kernels", CUMOD_TEST_KERNEL_DIR,
                                   "--log-level", "debug", NULL},
                  nng1518_env);
    for (int round = 0; round < 3; round++) {
        /* Connect and close without the SP handshake. */
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        cr_assert_lt(strlen(d.url + 6), sizeof(sa.sun_path));
        memcpy(sa.sun_path, d.url + 6, strlen(d.url + 6) + 1);
        cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        close(fd);
        int rc = -1;
        for (int i = 0; i < 10 && rc != 0; i++)
            rc = th_ctl(&d,
                        (const char *[]){"--timeout", "1000", "status", NULL},
                        NULL, NULL);
        if (rc != 0) {
            char *log = th_daemon_log(&d);
            cr_expect_eq(rc, 0, "round %d: cumodd should serve again; log:\n%s",
                         round, log);
            free(log);
        }
    }
    stop_clean(&d);
}

Test(slice, a_dead_executor_is_replaced_and_service_resumes, .timeout = 90)
{
    th_daemon d;
    char *out;

    REQUIRE_GPU();
    start_or_fail(&d, kernels_args, NULL);
    cr_assert_eq(
        th_ctl(&d, (const char *[]){"status", "--json", NULL}, &out, NULL), 0);
    long long pid = json_number(out, "executor_pid");
    free(out);
    cr_assert_gt(pid, 1);
    kill((pid_t)pid, SIGKILL);

    long long now = pid;
    int serving = 0;
    /* Status answers during the restart too: no executor pid, or the new
     * one's while it starts; then it serves. */
    for (int i = 0; i < 200 && (now == pid || now <= 0 || !serving); i++) {
        th_sleep_ms(50);
        if (th_ctl(&d, (const char *[]){"status", "--json", NULL}, &out,
                   NULL) == 0) {
            now = json_number(out, "executor_pid");
            serving = strstr(out, "\"state\": \"serving\"") != NULL;
        }
        free(out);
    }
    cr_expect(now > 1 && now != pid,
              "a new executor should serve (old pid %lld, now %lld)", pid, now);
    char *log = th_daemon_log(&d);
    cr_expect(strstr(log, "CUMOD-EXEC-LOST") != NULL, "%s", log);
    cr_expect(strstr(log, "CUMOD-EXEC-RESTARTED") != NULL, "%s", log);
    free(log);
    stop_clean(&d);
}

Test(cumodctl, ls_on_an_empty_folder_prints_an_empty_array, .timeout = 60)
{
    th_daemon d;
    char *out;
    char dir[256];

    REQUIRE_GPU();
    th_tmpdir(dir, sizeof(dir));
    start_or_fail(&d, (const char *[]){"--kernels", dir, NULL}, NULL);
    cr_assert_eq(th_ctl(&d, (const char *[]){"ls", "--json", NULL}, &out, NULL),
                 0);
    cr_expect_str_eq(out, "[]\n");
    free(out);
    stop_clean(&d);
    th_rmtree(dir);
}

Test(cumodctl, no_daemon_is_a_clear_error, .timeout = 30)
{
    char *err;
    int rc = th_run((const char *[]){th_cumodctl, "--url",
                                     "ipc:///nonexistent/cumodd.sock", "status",
                                     NULL},
                    NULL, NULL, &err, 10000);
    cr_expect_eq(rc, 1);
    cr_expect(strstr(err, "no cumodd is listening there") != NULL, "%s", err);
    free(err);
}

Test(cumodctl, usage_errors_exit_2, .timeout = 30)
{
    char *err;
    cr_expect_eq(th_run((const char *[]){th_cumodctl, "frobnicate", NULL}, NULL,
                        NULL, &err, 10000),
                 2);
    cr_expect(strstr(err, "unknown command 'frobnicate'") != NULL, "%s", err);
    free(err);
    cr_expect_eq(
        th_run((const char *[]){th_cumodctl, "--timeout", "x", "status", NULL},
               NULL, NULL, &err, 10000),
        2);
    cr_expect(strstr(err, "--timeout: 'x'") != NULL, "%s", err);
    free(err);
}
