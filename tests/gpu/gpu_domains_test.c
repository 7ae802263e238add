/* SPDX-License-Identifier: MIT */
/*
 * Fault domains on a real GPU (issue 20, point 8): two domains, each with
 * a socket of its own ([domain NAME] listen =, so no second uid is
 * needed), and a tenant of domain b (tests/domain_client, a process of its
 * own) checking vadd sums in a loop while domain a suffers
 *   - an illegal address, a device-side assert, a trap (bench/faults.cu),
 *   - a kernel that never returns, past a 300 ms deadline,
 *   - a SIGKILL of its executor.
 * Domain b's tenant has no failed launch and loses no buffer; domain a's
 * fault is reported to its launcher, and domain a serves again after.
 * A standby executor takes a dead executor's place. The tenants print
 * their longest gap between successes; nothing here asserts a time (the
 * figures are bench/bench_domains.c's). Each test skips with a message
 * where there is no GPU.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cumod/cumod.h"
#include "fixture.h"
#include "harness.h"
#include "tenant.h"

TH_SUITE_DRIVER(1);

#define FAULTS CUMOD_TEST_BENCH_KERNEL_DIR "/faults.cubin"

/* Domain name's entry as the daemon reports it now (through t->c, a
 * session of cumodd's own user, which sees every domain); 0 when found. */
static int
gd_domain(th_env *t, const char *name, cumod_domain_info *out)
{
    cumod_domains *d;
    int found = -1;
    if (cumod_domains_get(t->c, &d) != CUMOD_OK)
        return -1;
    for (size_t i = 0; i < d->ndomains; i++)
        if (strcmp(d->domains[i].name, name) == 0 &&
            d->domains[i].device == 0) {
            *out = d->domains[i];
            found = 0;
        }
    cumod_domains_free(d);
    return found;
}

/* Waits until domain name has restarted at least restarts times and
 * serves again; fails the test after 60 s. */
static void
gd_wait_serving(th_env *t, const char *name, unsigned restarts)
{
    cumod_domain_info di = {0};
    for (int w = 0; w < 6000; w++) {
        if (gd_domain(t, name, &di) == 0 && di.restarts >= restarts &&
            strcmp(di.executor_state, "serving") == 0)
            return;
        th_sleep_ms(10);
    }
    cr_assert_fail("domain %s: %u restarts, %s (wanted %u, serving)", name,
                   di.restarts, di.executor_state, restarts);
}

/* The standby count the daemon reports now. */
static unsigned
gd_standbys(th_env *t)
{
    cumod_domains *d;
    unsigned n = 0;
    if (cumod_domains_get(t->c, &d) == CUMOD_OK) {
        n = d->standby;
        cumod_domains_free(d);
    }
    return n;
}

/* The pid of the executor the daemon last started for label ("a
 * standby"), from its log line "executor started, pid P, device D,
 * LABEL". */
static pid_t
gd_executor_pid(th_env *t, const char *label)
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

/* cumodd with domains a and b, each on a socket of its own (urls into
 * ua, ub) and started with it; the faulting kernels as modules of their
 * own (a fault quarantines its module). */
static void
gd_start(th_env *t, char *ua, char *ub, size_t len)
{
    char conf[300], text[2048];

    th_env_init(t, (const char *const[]){"vadd", NULL});
    th_env_put(t, FAULTS, "f_oob.cubin");
    th_env_put(t, FAULTS, "f_assert.cubin");
    th_env_put(t, FAULTS, "f_trap.cubin");
    th_env_put(t, FAULTS, "f_hang.cubin");
    snprintf(ua, len, "ipc://%s/.a.sock", t->dir);
    snprintf(ub, len, "ipc://%s/.b.sock", t->dir);
    snprintf(conf, sizeof(conf), "%s/.cumodd.conf", t->dir);
    snprintf(text, sizeof(text),
             "[domain a]\nlisten = %s\nstart = always\n\n"
             "[domain b]\nlisten = %s\nstart = always\n",
             ua, ub);
    cr_assert_eq(th_write_file(conf, text), 0);
    /* A long restart wait: a request sent while a's executor restarts
     * waits for it however slow the machine, never fails for that. */
    th_env_start(t,
                 (const char *const[]){"--config", conf, "--restart-wait",
                                       "20000", NULL},
                 NULL);
    gd_wait_serving(t, "a", 0);
    gd_wait_serving(t, "b", 0);
}

/* Domain b checks vadd while what() happens in domain a; b sees nothing
 * of it, and a serves again (an allocation) after its executor's
 * restart. */
static void
gd_b_sees_nothing(th_env *t, const char *ua, const char *ub, const char *what,
                  void (*in_a)(th_env *, const char *, const char *))
{
    th_check b;
    th_check_result r;
    char *out;

    th_check_start(&b, t, -1, NULL, ub, 1);
    th_sleep_ms(200); /* b in its loop: the fault lands among its rounds */
    in_a(t, ua, what);
    gd_wait_serving(t, "a", 1);
    int rc = th_tenant_run(t, -1, NULL, ua,
                           (const char *const[]){"alloc", "4096", NULL}, &out);
    cr_expect_eq(rc, 0, "domain a serves again after %s: %s", what, out);
    free(out);
    th_sleep_ms(200); /* b's rounds after a's restart count too */
    th_check_stop(&b, &r);
    printf("gpu_domains: %s in domain a: domain b's tenant %ld checked "
           "rounds, %ld failed, buffers %s; its longest gap between "
           "successes %.1f ms\n",
           what, r.ok, r.failed, r.lost ? "LOST" : "kept", r.gap_ms);
    cr_expect_gt(r.ok, 0, "%s: domain b's tenant ran", what);
    cr_expect_eq(r.failed, 0, "%s: domain b's tenant failed %ld times: %s",
                 what, r.failed, r.first);
    cr_expect_eq(r.lost, 0, "%s: domain b's buffers were lost", what);
    cumod_domain_info di;
    cr_assert_eq(gd_domain(t, "b", &di), 0);
    cr_expect_eq(di.restarts, 0, "%s: domain b's executor never restarted",
                 what);
    cr_expect_str_eq(di.executor_state, "serving");
}

/* Domain a's tenant launches what ("f_oob:oob") once: the launch fails
 * with the context's loss, naming the CUDA error. */
static void
gd_fault(th_env *t, const char *ua, const char *what)
{
    char *out;
    int rc = th_tenant_run(
        t, -1, NULL, ua, (const char *const[]){"fault", what, "0", NULL}, &out);
    cr_expect_eq(rc, CUMOD_ECTXLOST, "%s fails, its context lost: %s", what,
                 out);
    cr_expect(strstr(out, "CUDA_ERROR_") != NULL, "names the fault: %s", out);
    free(out);
}

/* A kernel that never returns, with a 300 ms deadline. */
static void
gd_hang(th_env *t, const char *ua, const char *what)
{
    char *out;
    int rc =
        th_tenant_run(t, -1, NULL, ua,
                      (const char *const[]){"fault", what, "300", NULL}, &out);
    cr_expect_eq(rc, CUMOD_ETIMEDOUT, "%s times out: %s", what, out);
    cr_expect(strstr(out, "deadline") != NULL, "says so: %s", out);
    free(out);
}

/* Domain a's executor killed while a tenant of a holds a buffer there:
 * the tenant's session stays, it exits cleanly. */
static void
gd_kill(th_env *t, const char *ua, const char *what)
{
    th_tenant h;
    cumod_domain_info di;
    (void)what;
    th_tenant_spawn(&h, t, -1, NULL, ua, (const char *const[]){"hold", NULL});
    th_tenant_wait_for(&h, "ready");
    cr_assert_eq(gd_domain(t, "a", &di), 0);
    cr_assert(di.executor_pid > 0);
    cr_assert_eq(kill((pid_t)di.executor_pid, SIGKILL), 0);
    gd_wait_serving(t, "a", 1);
    cr_expect_eq(th_tenant_wait(&h), 0);
}

Test(gpu_domains, an_illegal_address_in_one_domain_costs_another_nothing,
     .timeout = 120)
{
    th_env t;
    char ua[320], ub[320];
    gd_start(&t, ua, ub, sizeof(ua));
    gd_b_sees_nothing(&t, ua, ub, "f_oob:oob", gd_fault);
    th_env_stop(&t);
}

Test(gpu_domains, a_device_assert_in_one_domain_costs_another_nothing,
     .timeout = 120)
{
    th_env t;
    char ua[320], ub[320];
    gd_start(&t, ua, ub, sizeof(ua));
    gd_b_sees_nothing(&t, ua, ub, "f_assert:dev_assert", gd_fault);
    th_env_stop(&t);
}

Test(gpu_domains, a_trap_in_one_domain_costs_another_nothing, .timeout = 120)
{
    th_env t;
    char ua[320], ub[320];
    gd_start(&t, ua, ub, sizeof(ua));
    gd_b_sees_nothing(&t, ua, ub, "f_trap:trap", gd_fault);
    th_env_stop(&t);
}

Test(gpu_domains, a_hang_past_its_deadline_costs_another_domain_nothing,
     .timeout = 120)
{
    th_env t;
    char ua[320], ub[320];
    gd_start(&t, ua, ub, sizeof(ua));
    gd_b_sees_nothing(&t, ua, ub, "f_hang:hang", gd_hang);
    th_env_stop(&t);
}

Test(gpu_domains, a_killed_executor_costs_another_domain_nothing,
     .timeout = 120)
{
    th_env t;
    char ua[320], ub[320];
    gd_start(&t, ua, ub, sizeof(ua));
    gd_b_sees_nothing(&t, ua, ub, "SIGKILL of the executor", gd_kill);
    th_env_stop(&t);
}

Test(gpu_domains, a_standby_takes_a_dead_executors_place, .timeout = 120)
{
    th_env t;
    cumod_buffer x, y;
    cumod_domain_info di;

    th_env_init(&t, (const char *const[]){"vadd", NULL});
    th_env_start(&t,
                 (const char *const[]){"--standby", "1", "--restart-wait",
                                       "20000", NULL},
                 NULL);
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &x), CUMOD_OK, "%s",
                 cumod_last_detail());
    for (int w = 0; w < 6000 && gd_standbys(&t) < 1; w++)
        th_sleep_ms(10);
    cr_assert_geq(gd_standbys(&t), 1, "a standby comes up");
    cr_assert_eq(gd_domain(&t, "default", &di), 0);
    pid_t serving = (pid_t)di.executor_pid;
    pid_t spare = gd_executor_pid(&t, "a standby");
    cr_assert(serving > 0 && spare > 0 && serving != spare, "%d %d",
              (int)serving, (int)spare);
    cr_assert_eq(kill(serving, SIGKILL), 0);
    /* Until the daemon has seen the death, a request would go to the dead
     * executor's channel: wait for the takeover first. */
    gd_wait_serving(&t, "default", 1);
    /* The lost buffer says so; a new one is served by the standby. */
    int rv = cumod_buffer_memset(t.c, x, 0, 16, 0, 0, NULL);
    cr_expect_eq(rv, CUMOD_ECTXLOST, "%s", cumod_last_detail());
    cr_expect_eq(cumod_buffer_alloc(t.c, 4096, &y), CUMOD_OK, "%s",
                 cumod_last_detail());
    cumod_device_info info;
    cr_assert_eq(cumod_device_info_get(t.c, &info), CUMOD_OK);
    cr_expect_eq((pid_t)info.executor_pid, spare,
                 "the standby (%d) serves now, not %lld", (int)spare,
                 (long long)info.executor_pid);
    printf("gpu_domains: standby: executor %d killed, standby %d serves\n",
           (int)serving, (int)spare);
    /* And a new standby is made. */
    for (int w = 0; w < 6000 && gd_standbys(&t) < 1; w++)
        th_sleep_ms(10);
    cr_expect_geq(gd_standbys(&t), 1, "a new standby comes up");
    th_env_stop(&t);
}

/* Two GPUs from one daemon (`--device all`; skipped with one GPU): a
 * tenant on device 1 faults while device 0's checks its sums. */
Test(gpu_domains, a_fault_on_one_gpu_costs_the_other_nothing, .timeout = 120)
{
    th_env t;
    cumod_domains *d;
    char *out;

    th_env_init(&t, (const char *const[]){"vadd", NULL});
    th_env_put(&t, FAULTS, "f_oob.cubin");
    th_env_start(&t,
                 (const char *const[]){"--device", "all", "--restart-wait",
                                       "20000", NULL},
                 NULL);
    cr_assert_eq(cumod_domains_get(t.c, &d), CUMOD_OK, "%s",
                 cumod_last_detail());
    size_t ndev = d->ndevices;
    for (size_t i = 0; i < ndev; i++)
        printf("gpu_domains: device %d: %s %s\n", d->devices[i].ordinal,
               d->devices[i].name, d->devices[i].uuid);
    cumod_domains_free(d);
    if (ndev < 2) {
        th_env_stop(&t);
        cr_skip_test("this machine has %zu GPU: the two-GPU scenario needs "
                     "two",
                     ndev);
    }
    th_check b;
    th_check_result r;
    th_check_start(&b, &t, -1, NULL, t.d.url, 1); /* device 0 */
    th_sleep_ms(200);
    setenv("CUMOD_DEVICE", "1", 1);
    int rc = th_tenant_run(
        &t, -1, NULL, t.d.url,
        (const char *const[]){"fault", "f_oob:oob", "0", NULL}, &out);
    unsetenv("CUMOD_DEVICE");
    cr_expect_eq(rc, CUMOD_ECTXLOST, "the fault on device 1: %s", out);
    free(out);
    setenv("CUMOD_DEVICE", "1", 1);
    rc = th_tenant_run(&t, -1, NULL, t.d.url,
                       (const char *const[]){"alloc", "4096", NULL}, &out);
    unsetenv("CUMOD_DEVICE");
    cr_expect_eq(rc, 0, "device 1 serves again: %s", out);
    free(out);
    th_check_stop(&b, &r);
    printf("gpu_domains: an illegal address on GPU 1: GPU 0's tenant %ld "
           "checked rounds, %ld failed, buffers %s; its longest gap %.1f ms\n",
           r.ok, r.failed, r.lost ? "LOST" : "kept", r.gap_ms);
    cr_expect_gt(r.ok, 0);
    cr_expect_eq(r.failed, 0, "GPU 0's tenant failed: %s", r.first);
    cr_expect_eq(r.lost, 0);
    th_env_stop(&t);
}
