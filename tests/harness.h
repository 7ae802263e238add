/* SPDX-License-Identifier: MIT */
/*
 * What the daemon suites share: temp folders, running cumodd as a real
 * process with its socket in a temp folder, running cumodctl and capturing
 * its output. Every wait is bounded, so a hung daemon fails a test instead
 * of hanging the suite.
 */
#ifndef CUMOD_TEST_HARNESS_H
#define CUMOD_TEST_HARNESS_H

#include <stddef.h>
#include <sys/types.h>

typedef struct th_daemon {
    pid_t pid;
    char dir[256]; /* temp folder: socket, log; removed by th_daemon_stop */
    char url[300]; /* ipc://<dir>/cumodd.sock */
    char log[300]; /* the daemon's stderr */
    int exited;    /* set when the daemon exited on its own */
    int status;    /* its wait status then */
} th_daemon;

/* A fresh temp folder (mkdtemp) under $TMPDIR or /tmp. */
void th_tmpdir(char *out, size_t cap);

/* Removes a folder tree; ignores what is not there. */
void th_rmtree(const char *path);

/* Starts cumodd with --listen d->url and the given arguments (NULL-ended),
 * plus "--cuda-library <fake>" and "--cublas-library <fake>" unless the
 * suite runs on the real driver,
 * and the NAME=VALUE settings of env (NULL-ended, may be NULL) added to the
 * environment. Waits until the socket answers or the daemon exits (then
 * d->exited is set). Returns 0 when it answers, -1 when it exited. */
int th_daemon_start(th_daemon *d, const char *const *args,
                    const char *const *env);

/* Starts cumodd again as th_daemon_start did, on d's folder and URL (a
 * restart: the one before has exited; its log is started afresh). */
int th_daemon_start_again(th_daemon *d, const char *const *args,
                          const char *const *env);

/* th_daemon_start on kernel folder dir: "--kernels dir", then extra
 * (NULL-ended, may be NULL). */
int th_daemon_start_in(th_daemon *d, const char *dir, const char *const *extra,
                       const char *const *env);

/* Copies file src to dir/name with cp(1): open, write, close, as an
 * operator's copy reaches the daemon. 0, or -1 when cp failed. */
int th_copy(const char *src, const char *dir, const char *name);

/* SIGTERM, then waits up to 10 s (SIGKILL after). Returns the exit status
 * (the signal number + 128 if it died of one). Removes d->dir. */
int th_daemon_stop(th_daemon *d);

/* Waits up to ms for the daemon to exit on its own; returns its exit
 * status, or -1 if it is still running. */
int th_daemon_wait(th_daemon *d, int ms);

/* The daemon's log so far; the caller frees it. */
char *th_daemon_log(const th_daemon *d);

/* Runs argv (argv[0] a path) with env settings added, stdin from /dev/null,
 * for at most timeout_ms; stdout and stderr come back in *out and *err
 * (caller frees; either may be NULL to discard). Returns the exit status,
 * or -1 if it had to be killed. */
int th_run(const char *const *argv, const char *const *env, char **out,
           char **err, int timeout_ms);

/* Runs cumodctl --url d->url with the given arguments. */
int th_ctl(const th_daemon *d, const char *const *args, char **out, char **err);

/* Reads a whole file; NULL if it cannot. Caller frees. */
char *th_read_file(const char *path);

/* Sleeps ms milliseconds. */
void th_sleep_ms(int ms);

/* The monotonic clock in milliseconds. */
double th_now_ms(void);

/* Writes text to path (created or truncated). 0, or -1. */
int th_write_file(const char *path, const char *text);

/* Paths of what the build made, fixed at build time. */
extern const char *const th_cumodd;
extern const char *const th_cumodctl;
extern const char *const th_fakecuda;
extern const char *const th_fakecublas;
extern const char *const th_kernel_dir;

/* A TCP port on 127.0.0.1 that nothing holds now (bound, then let go), or
 * -1. */
int th_free_port(void);

/* GET /metrics from 127.0.0.1:port (cumodd's --metrics-listen): the whole
 * HTTP answer, headers too (malloc'd), or NULL when it cannot be had. */
char *th_metrics_get(int port);

/* The value of the first series of cumodd's metrics at port whose line
 * starts with series (its name and labels, e.g. "cumod_domain_sessions{
 * device=\"0\"", or a name and a space), or -1 when there is none. Only
 * sample lines count, not # HELP and # TYPE. */
double th_metric(int port, const char *series);

/* The sum of the sample lines of metric name (with no labels, or labels
 * containing label; "" for all) at port, or -1 when there is none. */
double th_metric_sum(int port, const char *name, const char *label);

/* The fake driver's UUID of device n (tests/fakecuda/device.c), and the
 * end of the labels of a metrics series of that device: every one carries
 * gpu_uuid last, e.g. "cumod_executor_up{device=\"0\"" TH_DEV_END(0). */
#define TH_FAKE_UUID(n) "GPU-fa6ec0da-c0de-4000-8000-00000000000" #n
#define TH_DEV_END(n) ",gpu_uuid=\"" TH_FAKE_UUID(n) "\"}"

/* Each suite's source says once which driver it runs on:
 * TH_SUITE_DRIVER(0) for tests/fakecuda, TH_SUITE_DRIVER(1) for the real
 * libcuda.so.1 (tests/gpu). */
extern const int th_suite_real_gpu;
#define TH_SUITE_DRIVER(real) const int th_suite_real_gpu = (real)

/* 1 when this suite runs on the real driver (tests/gpu). */
int th_real_gpu(void);

/* On the real driver: 1 if libcuda.so.1 loads and cuInit finds a device.
 * Suites skip with a message otherwise. Always 1 on the fake. */
int th_gpu_available(const char **why);

#endif
