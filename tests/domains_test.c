/* SPDX-License-Identifier: MIT */
/*
 * Fault domains (docs/faults.md "Domains", issue 20): each tenant's sessions
 * share an executor of their own, so a fault, a hang or an executor's death in
 * one domain costs the others nothing. cumodd runs as a real process on
 * tests/fakecuda; tenants are processes of their own (tests/
 * domain_client), run as another user where the domain is the uid:
 *   - a fault, a hang past its deadline and a SIGKILL of its executor in
 *     one uid's domain, while another domain's client checks vadd in a
 *     loop: that client has no failure and keeps its buffers;
 *   - a quarantined generation is refused in every domain (one catalog);
 *   - a [domain] section's own socket puts its clients in that domain;
 *   - a standby takes a dead executor's place (the domain's bystander is
 *     served by the standby's process), and a new standby is made;
 *   - a request sent while its domain's executor restarts waits for it;
 *   - two fake devices: a session on device 1 faults, device 0's client
 *     sees nothing; SetDevice after an allocation is refused;
 *   - a domain without sessions stops its executor after --domain-idle,
 *     and starts it again for the next;
 *   - --domain-memory-max counts every session of the domain;
 *   - status (Hello) and metrics per domain and device.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cumod/cumod.h"
#include "fixture.h"
#include "harness.h"
#include "tenant.h"

TH_SUITE_DRIVER(0);

#define NEED_ROOT()                                                            \
    do {                                                                       \
        if (geteuid() != 0)                                                    \
            cr_skip_test("needs root, to run tenants as other users");         \
    } while (0)

#define FAULTS CUMOD_TEST_BENCH_KERNEL_DIR "/faults.cubin"
#define BAD_VADD CUMOD_TEST_BAD_KERNEL_DIR "/vadd.cubin"

/* Waits until the series has at least want. */
static void
dt_wait_metric(int port, const char *series, double want)
{
    double v = -1;
    for (int w = 0; w < 3000; w++) {
        if ((v = th_metric(port, series)) >= want)
            return;
        th_sleep_ms(10);
    }
    cr_assert_fail("%s stayed %g, not %g", series, v, want);
}

/* The pid of the executor the daemon last started for label ("domain
 * uid-65534", "a standby"), from its log. */
static pid_t
dt_executor_pid(th_env *t, const char *label)
{
    char *log = th_daemon_log(&t->d), *p, *last = NULL;
    char needle[160];
    snprintf(needle, sizeof(needle), ", %s\n", label);
    for (p = log; p && (p = strstr(p, needle)) != NULL; p++)
        last = p;
    pid_t pid = 0;
    if (last != NULL) {
        char *b = last;
        while (b > log && b[-1] != '\n')
            b--;
        char *q = strstr(b, "executor started, pid ");
        if (q != NULL && q < last)
            pid = (pid_t)atoi(q + strlen("executor started, pid "));
    }
    free(log);
    return pid;
}

static void
dt_start(th_env *t, int *port, const char *const *extra, const char *const *env)
{
    static const char *const k[] = {"vadd", "empty", NULL};
    const char *args[32];
    char ps[32];
    int n = 0;

    th_env_init(t, k);
    th_env_put(t, FAULTS, "faults.cubin");
    /* The same kernels as a module of their own: one quarantined does not
     * refuse the other. */
    th_env_put(t, FAULTS, "hangs.cubin");
    *port = th_free_port();
    snprintf(ps, sizeof(ps), "127.0.0.1:%d", *port);
    args[n++] = "--metrics-listen";
    args[n++] = ps;
    args[n++] = "--socket-mode";
    args[n++] = "0666";
    for (int i = 0; extra[i] != NULL && n < 31; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    th_env_start(t, args, env);
    cr_assert_eq(chmod(t->d.dir, 0755), 0);
    cr_assert_eq(chmod(t->dir, 0755), 0);
}

Test(domains, a_fault_a_hang_and_a_kill_in_one_domain_cost_another_nothing,
     .timeout = 180)
{
    th_env t;
    int port;
    char *out;
    NEED_ROOT();
    dt_start(&t, &port,
             (const char *const[]){"--domains", "uid", "--restart-wait",
                                   "20000", NULL},
             (const char *const[]){"CUMOD_FAKE_FAULT=launch:oob", NULL});
    cr_assert_eq(th_write_file(t.fake_hold, "hang"), 0);

    th_check b;
    th_check_start(&b, &t, -1, NULL, t.d.url, 0);
    /* A fault in uid 65534's domain. */
    int rc = th_tenant_run(
        &t, 65534, NULL, t.d.url,
        (const char *const[]){"fault", "faults:oob", "0", NULL}, &out);
    cr_expect_neq(rc, 0, "the faulting launch failed: %s", out);
    free(out);
    dt_wait_metric(port,
                   "cumod_domain_restarts_total{device=\"0\",domain=\"uid-"
                   "65534\"" TH_DEV_END(0),
                   1);
    /* A hang past its deadline there. */
    rc = th_tenant_run(
        &t, 65534, NULL, t.d.url,
        (const char *const[]){"fault", "hangs:hang", "300", NULL}, &out);
    cr_expect_eq(rc, CUMOD_ETIMEDOUT, "the hang timed out: %s", out);
    free(out);
    dt_wait_metric(port,
                   "cumod_domain_restarts_total{device=\"0\",domain=\"uid-"
                   "65534\"" TH_DEV_END(0),
                   2);
    /* Its executor killed while a client of it holds a buffer. */
    th_tenant h;
    th_tenant_spawn(&h, &t, 65534, NULL, t.d.url,
                    (const char *const[]){"hold", NULL});
    th_tenant_wait_for(&h, "ready");
    pid_t xp = dt_executor_pid(&t, "domain uid-65534");
    cr_assert(xp > 0);
    cr_assert_eq(kill(xp, SIGKILL), 0);
    dt_wait_metric(port,
                   "cumod_domain_restarts_total{device=\"0\",domain=\"uid-"
                   "65534\"" TH_DEV_END(0),
                   3);
    cr_expect_eq(th_tenant_wait(&h), 0);
    /* That domain serves again. */
    rc = th_tenant_run(&t, 65534, NULL, t.d.url,
                       (const char *const[]){"alloc", "4096", NULL}, &out);
    cr_expect_eq(rc, 0, "%s", out);
    free(out);

    th_check_result r;
    th_check_stop(&b, &r);
    cr_expect_gt(r.ok, 0);
    cr_expect_eq(r.failed, 0, "the other domain's client failed %ld times: %s",
                 r.failed, r.first);
    cr_expect_eq(r.lost, 0, "the other domain's buffers were lost");
    cr_expect_eq(th_metric(port, "cumod_domain_restarts_total{device=\"0\","
                                 "domain=\"uid-0\"" TH_DEV_END(0)),
                 0);
    cr_expect_eq(th_metric(port, "cumod_domain_executor_up{device=\"0\","
                                 "domain=\"uid-0\"" TH_DEV_END(0)),
                 1);
    th_env_stop(&t);
}

Test(domains, a_quarantine_holds_in_every_domain, .timeout = 120)
{
    th_env t;
    int port;
    char *out;
    NEED_ROOT();
    dt_start(&t, &port,
             (const char *const[]){"--domains", "uid", "--quarantine-after",
                                   "1", NULL},
             (const char *const[]){"CUMOD_FAKE_FAULT=launch:oob", NULL});
    int rc = th_tenant_run(
        &t, 65534, NULL, t.d.url,
        (const char *const[]){"fault", "faults:oob", "0", NULL}, &out);
    cr_expect_neq(rc, 0, "%s", out);
    cr_expect(strstr(out, "oob") != NULL, "the culprit is named: %s", out);
    free(out);
    /* Another domain (uid 0's) is refused the quarantined bytes too. */
    rc = th_tenant_run(&t, -1, NULL, t.d.url,
                       (const char *const[]){"fault", "faults:oob", "0", NULL},
                       &out);
    cr_expect_eq(rc, CUMOD_EQUARANTINED, "%s", out);
    free(out);
    th_env_stop(&t);
}

Test(domains, a_domains_own_socket_puts_its_clients_in_it, .timeout = 120)
{
    th_env t;
    int port;
    char conf[300], sock[300], url[320], text[1024];
    char *out;

    th_env_init(&t, (const char *const[]){"vadd", NULL});
    snprintf(sock, sizeof(sock), "%s/.tenant-a.sock", t.dir);
    snprintf(url, sizeof(url), "ipc://%s", sock);
    snprintf(conf, sizeof(conf), "%s/.cumodd.conf", t.dir);
    snprintf(text, sizeof(text),
             "[domain tenant-a]\nlisten = %s\nmemory-max = 1M\n", url);
    cr_assert_eq(th_write_file(conf, text), 0);
    port = th_free_port();
    char ps[32];
    snprintf(ps, sizeof(ps), "127.0.0.1:%d", port);
    th_env_start(
        &t,
        (const char *const[]){"--config", conf, "--metrics-listen", ps, NULL},
        NULL);
    /* Through its socket: domain tenant-a, with its memory limit. */
    int rc = th_tenant_run(&t, -1, NULL, url,
                           (const char *const[]){"alloc", "4096", NULL}, &out);
    cr_expect_eq(rc, 0, "%s", out);
    free(out);
    rc = th_tenant_run(&t, -1, NULL, url,
                       (const char *const[]){"alloc", "2000000", NULL}, &out);
    cr_expect_eq(rc, CUMOD_EDEVMEM, "%s", out);
    cr_expect(strstr(out, "tenant-a") != NULL, "names the domain: %s", out);
    free(out);
    dt_wait_metric(port,
                   "cumod_domain_executor_up{device=\"0\",domain=\"tenant-"
                   "a\"" TH_DEV_END(0),
                   1);
    /* Through the main socket: the default domain, no such limit. */
    cumod_buffer x;
    cr_expect_eq(cumod_buffer_alloc(t.c, 2000000, &x), CUMOD_OK, "%s",
                 cumod_last_detail());
    dt_wait_metric(
        port,
        "cumod_domain_executor_up{device=\"0\",domain=\"default\"" TH_DEV_END(
            0),
        1);
    th_env_stop(&t);
}

Test(domains, a_standby_takes_a_dead_executors_place, .timeout = 120)
{
    th_env t;
    int port;
    dt_start(&t, &port,
             (const char *const[]){"--standby", "1", "--restart-wait", "20000",
                                   NULL},
             NULL);
    cumod_buffer x, y;
    /* The default domain serves; a standby waits beside it. */
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &x), CUMOD_OK, "%s",
                 cumod_last_detail());
    dt_wait_metric(port, "cumod_standby_executors{device=\"0\"" TH_DEV_END(0),
                   1);
    pid_t serving = dt_executor_pid(&t, "domain default");
    pid_t spare = dt_executor_pid(&t, "a standby");
    cr_assert(serving > 0 && spare > 0 && serving != spare);
    cr_assert_eq(kill(serving, SIGKILL), 0);
    dt_wait_metric(port,
                   "cumod_domain_takeovers_total{device=\"0\",domain="
                   "\"default\"" TH_DEV_END(0),
                   1);
    /* The lost buffer says so; a new one is served by the standby. */
    int rv = cumod_buffer_memset(t.c, x, 0, 16, 0, 0, NULL);
    cr_expect_eq(rv, CUMOD_ECTXLOST, "%s", cumod_last_detail());
    cr_expect_eq(cumod_buffer_alloc(t.c, 4096, &y), CUMOD_OK, "%s",
                 cumod_last_detail());
    cumod_device_info di;
    cr_assert_eq(cumod_device_info_get(t.c, &di), CUMOD_OK);
    cr_expect_eq((pid_t)di.executor_pid, spare,
                 "the standby (%d) serves now, not %llu", (int)spare,
                 (unsigned long long)di.executor_pid);
    /* And the executor that died comes back as the new standby. */
    dt_wait_metric(port, "cumod_standby_executors{device=\"0\"" TH_DEV_END(0),
                   1);
    th_env_stop(&t);
}

Test(domains, a_request_during_its_domains_restart_waits, .timeout = 120)
{
    th_env t;
    int port;
    char *out;
    NEED_ROOT();
    dt_start(&t, &port,
             (const char *const[]){"--domains", "uid", "--restart-wait",
                                   "30000", NULL},
             (const char *const[]){"CUMOD_FAKE_INIT_DELAY_MS=700", NULL});
    th_tenant h;
    th_tenant_spawn(&h, &t, 65534, NULL, t.d.url,
                    (const char *const[]){"hold", NULL});
    th_tenant_wait_for(&h, "ready");
    pid_t xp = dt_executor_pid(&t, "domain uid-65534");
    cr_assert(xp > 0);
    cr_assert_eq(kill(xp, SIGKILL), 0);
    /* Sent while the new one's cuInit is still slow: it waits. */
    int rc = th_tenant_run(&t, 65534, NULL, t.d.url,
                           (const char *const[]){"alloc", "4096", NULL}, &out);
    cr_expect_eq(rc, 0, "%s", out);
    free(out);
    cr_expect_eq(th_tenant_wait(&h), 0);
    th_env_stop(&t);
}

Test(domains, a_fault_on_one_device_leaves_the_other_alone, .timeout = 120)
{
    th_env t;
    int port;
    char *out;
    dt_start(&t, &port,
             (const char *const[]){"--device", "0,1", "--restart-wait", "20000",
                                   NULL},
             (const char *const[]){"CUMOD_FAKE_DEVICES=2",
                                   "CUMOD_FAKE_FAULT=launch:oob", NULL});
    th_check b;
    th_check_start(&b, &t, -1, NULL, t.d.url, 0); /* device 0 */
    int rc = th_tenant_run(
        &t, -1, (const char *const[]){"CUMOD_DEVICE=1", NULL}, t.d.url,
        (const char *const[]){"fault", "faults:oob", "0", NULL}, &out);
    cr_expect_neq(rc, 0, "%s", out);
    free(out);
    dt_wait_metric(port,
                   "cumod_domain_restarts_total{device=\"1\",domain="
                   "\"default\"" TH_DEV_END(1),
                   1);
    th_check_result r;
    th_check_stop(&b, &r);
    cr_expect_gt(r.ok, 0);
    cr_expect_eq(r.failed, 0, "device 0's client failed: %s", r.first);
    cr_expect_eq(r.lost, 0);
    cr_expect_eq(th_metric(port, "cumod_domain_restarts_total{device=\"0\","
                                 "domain=\"default\"" TH_DEV_END(0)),
                 0);
    /* Both devices are listed, each with its own UUID. */
    char *m = th_metrics_get(port);
    cr_assert(m != NULL);
    cr_expect(strstr(m, "cumod_device_info{device=\"0\"") != NULL, "%s", m);
    cr_expect(strstr(m, "cumod_device_info{device=\"1\"") != NULL, "%s", m);
    free(m);
    /* A device that is not served, and a change after an allocation. */
    rc = th_tenant_run(&t, -1, (const char *const[]){"CUMOD_DEVICE=5", NULL},
                       t.d.url, (const char *const[]){"alloc", "4096", NULL},
                       &out);
    cr_expect_neq(rc, 0, "%s", out);
    free(out);
    th_env_stop(&t);
}

Test(domains, an_idle_domain_stops_its_executor_and_starts_again,
     .timeout = 120)
{
    th_env t;
    int port;
    char *out;
    NEED_ROOT();
    dt_start(
        &t, &port,
        (const char *const[]){"--domains", "uid", "--domain-idle", "1", NULL},
        NULL);
    int rc = th_tenant_run(&t, 65534, NULL, t.d.url,
                           (const char *const[]){"alloc", "4096", NULL}, &out);
    cr_expect_eq(rc, 0, "%s", out);
    free(out);
    pid_t xp = dt_executor_pid(&t, "domain uid-65534");
    cr_assert(xp > 0);
    /* No session left: within a few seconds its executor is gone. */
    int gone = 0;
    for (int w = 0; w < 1000 && !gone; w++) {
        gone = th_metric(port, "cumod_domain_executor_up{device=\"0\","
                               "domain=\"uid-65534\"" TH_DEV_END(0)) == 0 &&
               kill(xp, 0) != 0;
        th_sleep_ms(10);
    }
    cr_expect(gone, "the idle domain's executor %d still runs", (int)xp);
    char *log = th_daemon_log(&t.d);
    cr_expect(strstr(log, "domain uid-65534 on device 0: no session") != NULL,
              "%s", log);
    free(log);
    /* The next session starts it again. */
    rc = th_tenant_run(&t, 65534, NULL, t.d.url,
                       (const char *const[]){"alloc", "4096", NULL}, &out);
    cr_expect_eq(rc, 0, "%s", out);
    free(out);
    cr_expect_neq(dt_executor_pid(&t, "domain uid-65534"), xp);
    th_env_stop(&t);
}

Test(domains, the_domain_memory_limit_counts_every_session_of_it,
     .timeout = 120)
{
    th_env t;
    int port;
    char *out;
    dt_start(&t, &port,
             (const char *const[]){"--domains", "uid", "--domain-memory-max",
                                   "1M", NULL},
             NULL);
    cumod_buffer x;
    cr_assert_eq(cumod_buffer_alloc(t.c, 700000, &x), CUMOD_OK, "%s",
                 cumod_last_detail());
    /* Another session of the same domain (uid 0): over the domain's 1 MiB. */
    int rc =
        th_tenant_run(&t, -1, NULL, t.d.url,
                      (const char *const[]){"alloc", "700000", NULL}, &out);
    cr_expect_eq(rc, CUMOD_EDEVMEM, "%s", out);
    cr_expect(strstr(out, "domain uid-0") != NULL &&
                  strstr(out, "--domain-memory-max") != NULL,
              "%s", out);
    free(out);
    cr_expect_eq(th_metric(port, "cumod_domain_memory_bytes{device=\"0\","
                                 "domain=\"uid-0\"" TH_DEV_END(0)),
                 700000);
    cr_expect_eq(th_metric(port, "cumod_domain_memory_max_bytes{device=\"0\","
                                 "domain=\"uid-0\"" TH_DEV_END(0)),
                 1048576);
    th_env_stop(&t);
}

Test(domains, a_session_chooses_its_device_before_its_first_allocation,
     .timeout = 120)
{
    th_env t;
    int port;
    dt_start(&t, &port,
             (const char *const[]){"--device", "0,1", "--standby", "1", NULL},
             (const char *const[]){"CUMOD_FAKE_DEVICES=2", NULL});
    /* A device not served: refused, naming those that are. */
    int rv = cumod_set_device(t.c, 5);
    cr_expect_eq(rv, CUMOD_EINVAL);
    cr_expect(strstr(cumod_last_detail(), "it serves 0, 1") != NULL, "%s",
              cumod_last_detail());
    cr_assert_eq(cumod_set_device(t.c, 1), CUMOD_OK, "%s", cumod_last_detail());
    cr_expect_eq(cumod_device(t.c), 1);
    cumod_buffer x;
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &x), CUMOD_OK, "%s",
                 cumod_last_detail());
    /* Its work is on device 1 now: another device is refused, the same
     * one is fine. */
    rv = cumod_set_device(t.c, 0);
    cr_expect_eq(rv, CUMOD_EBUSY, "%s", cumod_last_detail());
    cr_expect_eq(cumod_set_device(t.c, 1), CUMOD_OK, "%s", cumod_last_detail());
    cumod_session_info *l = NULL;
    size_t n = 0;
    cr_assert_eq(cumod_sessions_list(t.c, &l, &n, NULL), CUMOD_OK);
    int on1 = 0;
    for (size_t i = 0; i < n; i++)
        on1 += l[i].device == 1 && l[i].memory_bytes == 4096;
    free(l);
    cr_expect_eq(on1, 1, "the session is listed on device 1");

    /* Status: both devices with their UUIDs, the session's domain and
     * device, the standbys (one per device) and their memory. */
    dt_wait_metric(port, "cumod_standby_executors{device=\"1\"" TH_DEV_END(1),
                   1);
    /* and device 0's, which starts beside the others (on a loaded
     * machine, under ASan, it can come after device 1's) */
    dt_wait_metric(port, "cumod_standby_executors{device=\"0\"" TH_DEV_END(0),
                   1);
    cumod_domains *d = NULL;
    cr_assert_eq(cumod_domains_get(t.c, &d), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect_str_eq(d->domain, "default");
    cr_expect_eq(d->device, 1);
    cr_assert_eq(d->ndevices, 2);
    cr_expect_str_eq(d->devices[0].uuid,
                     "GPU-fa6ec0da-c0de-4000-8000-000000000000");
    cr_expect_str_eq(d->devices[1].uuid,
                     "GPU-fa6ec0da-c0de-4000-8000-000000000001");
    cr_expect_eq(d->devices[1].executors, 1);
    if (d->devices[0].standby + d->devices[1].standby != 2 || d->standby != 2) {
        /* say what the executors did (a loss would show here) */
        char *log = th_daemon_log(&t.d);
        cr_log_error("standbys %u + %u, %u in all; cumodd's log:\n%s",
                     d->devices[0].standby, d->devices[1].standby, d->standby,
                     log);
        free(log);
    }
    cr_expect_eq(d->devices[0].standby + d->devices[1].standby, 2);
    cr_expect_eq(d->standby, 2);
    char *elog = th_daemon_log(&t.d);
    cr_expect_eq(th_count(elog, "CUMOD-EXEC-LOST"), 0,
                 "no executor was lost:\n%s", elog);
    free(elog);
    int found = 0;
    for (size_t i = 0; i < d->ndomains; i++)
        if (strcmp(d->domains[i].name, "default") == 0 &&
            d->domains[i].device == 1) {
            found = 1;
            cr_expect_str_eq(d->domains[i].executor_state, "serving");
            cr_expect_eq(d->domains[i].sessions, 1);
            cr_expect_eq(d->domains[i].memory_bytes, 4096);
        }
    cr_expect(found, "domain default on device 1 is listed");
    cumod_domains_free(d);

    /* $CUMOD_DEVICE chooses at open, and the fast path still comes. */
    setenv("CUMOD_DEVICE", "1", 1);
    cumod_client *c2;
    cr_assert_eq(cumod_open(t.d.url, 10000, &c2), CUMOD_OK, "%s",
                 cumod_last_detail());
    unsetenv("CUMOD_DEVICE");
    cr_expect_eq(cumod_device(c2), 1);
    cr_expect(cumod_fast_path(c2), "the ring is open after SetDevice");
    cr_expect_eq(cumod_buffer_alloc(c2, 4096, &x), CUMOD_OK, "%s",
                 cumod_last_detail());
    cumod_close(c2);
    th_env_stop(&t);
}

/* A new file reaches a domain's executor: the launch after the swap runs
 * the new generation there (the domain loads it again from the catalog's
 * image), the one before ran the old. */
Test(domains, a_new_file_reaches_every_domains_executor, .timeout = 120)
{
    th_env t;
    int port;
    uint64_t gen = 0;
    dt_start(&t, &port, (const char *const[]){"--standby", "1", NULL}, NULL);
    cumod_launch_params p = {
        .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {1, 1, 1}};
    cr_assert_eq(cumod_launch(t.c, &p, NULL, &gen), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect_eq(gen, 1);
    /* New bytes under the same name (vadd's image, as module empty: its
     * kernels differ, so the swap is visible in what the launch finds). */
    char tmp[320], dst[320];
    th_env_put(&t, CUMOD_TEST_BAD_KERNEL_DIR "/vadd.cubin", ".incoming");
    snprintf(tmp, sizeof(tmp), "%s/.incoming", t.dir);
    snprintf(dst, sizeof(dst), "%s/empty.cubin", t.dir);
    cr_assert_eq(rename(tmp, dst), 0);
    int rv = CUMOD_OK;
    for (int w = 0; w < 1000; w++) {
        rv = cumod_launch(t.c, &p, NULL, &gen);
        if (rv != CUMOD_OK)
            break; /* empty:empty is gone with the new bytes */
        th_sleep_ms(10);
    }
    cr_expect_eq(rv, CUMOD_ENOENT,
                 "the new generation, without kernel "
                 "empty, serves in the domain: %s",
                 cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(), "vadd") != NULL, "%s",
              cumod_last_detail());
    th_env_stop(&t);
}

/* Another user sees its own domain in status, not the others' (their
 * names carry uids, their executors' pids). */
Test(domains, another_user_sees_only_its_own_domain, .timeout = 120)
{
    th_env t;
    int port;
    char *out;
    NEED_ROOT();
    dt_start(&t, &port, (const char *const[]){"--domains", "uid", NULL}, NULL);
    cumod_buffer x;
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &x), CUMOD_OK, "%s",
                 cumod_last_detail()); /* uid 0's domain serves */
    int rc = th_tenant_run(&t, 65534, NULL, t.d.url,
                           (const char *const[]){"alloc", "4096", NULL}, &out);
    cr_expect_eq(rc, 0, "%s", out);
    free(out);
    rc = th_tenant_run(&t, 65534, NULL, t.d.url,
                       (const char *const[]){"domains", NULL}, &out);
    cr_expect_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "mine uid-65534") != NULL, "%s", out);
    cr_expect(strstr(out, "uid-0") == NULL, "another user's domain shown: %s",
              out);
    free(out);
    /* root sees both. */
    rc = th_tenant_run(&t, -1, NULL, t.d.url,
                       (const char *const[]){"domains", NULL}, &out);
    cr_expect(strstr(out, "domain uid-0 ") != NULL &&
                  strstr(out, "domain uid-65534 ") != NULL,
              "%s", out);
    free(out);
    th_env_stop(&t);
}
