/* SPDX-License-Identifier: MIT */
#include "fixture.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
th_env_init(th_env *t, const char *const *kernels)
{
    const char *why;
    if (!th_gpu_available(&why))
        cr_skip_test("%s", why);
    memset(t, 0, sizeof(*t));
    th_tmpdir(t->dir, sizeof(t->dir));
    snprintf(t->fake_log, sizeof(t->fake_log), "%s/.fake.log", t->dir);
    snprintf(t->fake_hold, sizeof(t->fake_hold), "%s/.hold", t->dir);
    for (int i = 0; kernels && kernels[i]; i++) {
        char src[512], name[160];
        snprintf(src, sizeof(src), "%s/%s.cubin", th_kernel_dir, kernels[i]);
        snprintf(name, sizeof(name), "%s.cubin", kernels[i]);
        th_env_put(t, src, name);
    }
}

void
th_env_start(th_env *t, const char *const *extra, const char *const *env)
{
    const char *all[32];
    char log[400], hold[400];
    int n = 0;

    snprintf(log, sizeof(log), "CUMOD_FAKE_LOG=%s", t->fake_log);
    snprintf(hold, sizeof(hold), "CUMOD_FAKE_HOLD=%s", t->fake_hold);
    all[n++] = log;
    all[n++] = hold;
    for (int i = 0; env && env[i] && n < 31; i++)
        all[n++] = env[i];
    all[n] = NULL;
    if (th_daemon_start_in(&t->d, t->dir, extra, all) != 0) {
        char *dlog = th_daemon_log(&t->d);
        cr_assert_fail("cumodd did not start:\n%s", dlog);
    }
    cr_assert_eq(cumod_open(t->d.url, 30000, &t->c), CUMOD_OK, "%s",
                 cumod_last_detail());
}

void
th_env_put(th_env *t, const char *src, const char *name)
{
    cr_assert_eq(th_copy(src, t->dir, name), 0, "cp %s %s", src, name);
}

void
th_env_stop(th_env *t)
{
    cumod_close(t->c);
    t->c = NULL;
    /* Stop, then read the log: a sanitizer's report comes at exit. */
    if (!t->d.exited)
        kill(t->d.pid, SIGTERM);
    (void)th_daemon_wait(&t->d, 10000);
    char *log = th_daemon_log(&t->d);
    int rc = th_daemon_stop(&t->d);
    cr_expect_eq(rc, 0, "cumodd should stop cleanly (%d); log:\n%s", rc, log);
    /* An executor that crashes on its way out is seen by nobody else. */
    cr_expect_eq(th_count(log, "while stopping"), 0,
                 "an executor ended by a signal while cumodd stopped; "
                 "log:\n%s",
                 log);
    free(log);
    th_rmtree(t->dir);
}

char *
th_env_fake_log_wait(th_env *t, const char *needle, int ms)
{
    char *log = NULL;
    double until = th_now_ms() + ms;
    for (;;) {
        free(log);
        log = th_read_file(t->fake_log);
        if ((log != NULL && strstr(log, needle) != NULL) ||
            th_now_ms() >= until)
            return log;
        th_sleep_ms(10);
    }
}

int
th_count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; p && (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

uint64_t
th_env_alloc_ptr(th_env *t, size_t bytes)
{
    char *log = th_read_file(t->fake_log), pat[64];
    uint64_t ptr = 0;
    snprintf(pat, sizeof(pat), " bytes=%zu ", bytes);
    for (char *p = log; p && (p = strstr(p, "alloc ptr=0x")) != NULL; p++) {
        char *eol = strchr(p, '\n');
        char *b = strstr(p, pat);
        if (b && (!eol || b < eol))
            ptr = strtoull(p + 12, NULL, 16);
    }
    free(log);
    return ptr;
}
