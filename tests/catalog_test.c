/* SPDX-License-Identifier: MIT */
/*
 * Residency and the module commands: pins, the budget, idle unloads,
 * failed loads, PTX logs, cumodctl's output, and a rescan after the event
 * queue overflows. cumodd runs as a real process on tests/fakecuda.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cumod/cumod.h"
#include "fixture.h"

TH_SUITE_DRIVER(0);

#define KDIR CUMOD_TEST_KERNEL_DIR

typedef th_env ct;

/* The folder most tests start from. */
static const char *const ct_kernels[] = {"vadd", "scale", "empty", NULL};

static char *
ct_state(ct *t, const char *name, char *buf, size_t cap)
{
    cumod_module_list *l;
    snprintf(buf, cap, "absent");
    cr_assert_eq(cumod_modules_list(t->c, &l), CUMOD_OK);
    for (size_t i = 0; i < l->count; i++)
        if (strcmp(l->modules[i].name, name) == 0)
            snprintf(buf, cap, "%s", l->modules[i].state);
    cumod_module_list_free(l);
    return buf;
}

static int
ct_wait_state(ct *t, const char *name, const char *state, int ms)
{
    char buf[32];
    for (int w = 0; w <= ms; w += 20) {
        if (strcmp(ct_state(t, name, buf, sizeof(buf)), state) == 0)
            return 1;
        th_sleep_ms(20);
    }
    return 0;
}

static int
ct_op(ct *t, int (*fn)(cumod_client *, const char *, cumod_module_result *),
      const char *name)
{
    cumod_module_result r;
    int rv = fn(t->c, name, &r);
    if (rv == CUMOD_OK)
        cumod_module_result_fini(&r);
    return rv;
}

Test(residency, pinned_at_start_and_unload_refused_until_unpinned,
     .timeout = 60)
{
    ct t;
    th_env_init(&t, ct_kernels);
    th_env_start(&t, (const char *[]){"--pin", "vadd", NULL}, NULL);
    cr_assert(ct_wait_state(&t, "vadd", "resident", 5000),
              "--pin loads at start");
    cr_expect_eq(ct_op(&t, cumod_module_unload, "vadd"), CUMOD_EPERM);
    cr_expect(strstr(cumod_last_detail(), "pinned"), "%s", cumod_last_detail());
    cr_expect_eq(ct_op(&t, cumod_module_unpin, "vadd"), CUMOD_OK);
    cr_expect_eq(ct_op(&t, cumod_module_unload, "vadd"), CUMOD_OK);
    char buf[32];
    cr_expect_str_eq(ct_state(&t, "vadd", buf, sizeof(buf)), "available");
    th_env_stop(&t);
}

Test(residency, the_least_recently_used_idle_module_is_evicted, .timeout = 60)
{
    ct t;
    char buf[32];
    th_env_init(&t, ct_kernels);
    th_env_start(&t, (const char *[]){"--max-resident-modules", "2", NULL},
                 NULL);
    cr_assert_eq(ct_op(&t, cumod_module_load, "vadd"), CUMOD_OK);
    th_sleep_ms(20);
    cr_assert_eq(ct_op(&t, cumod_module_load, "scale"), CUMOD_OK);
    th_sleep_ms(20);
    cr_assert_eq(ct_op(&t, cumod_module_load, "empty"), CUMOD_OK);
    cr_expect_str_eq(ct_state(&t, "vadd", buf, sizeof(buf)), "available",
                     "vadd was used least recently");
    cr_expect_str_eq(ct_state(&t, "scale", buf, sizeof(buf)), "resident");
    cr_expect_str_eq(ct_state(&t, "empty", buf, sizeof(buf)), "resident");
    cumod_device_info di;
    cr_assert_eq(cumod_device_info_get(t.c, &di), CUMOD_OK);
    cr_expect_eq(di.resident_modules, 2);
    char *log = th_daemon_log(&t.d);
    cr_expect(strstr(log, "CUMOD-EVICT: vadd") != NULL, "%s", log);
    free(log);
    th_env_stop(&t);
}

Test(residency, pinned_modules_are_never_evicted, .timeout = 60)
{
    ct t;
    th_env_init(&t, ct_kernels);
    th_env_start(&t, (const char *[]){"--max-resident-modules", "1", NULL},
                 NULL);
    cr_assert_eq(ct_op(&t, cumod_module_pin, "vadd"), CUMOD_OK);
    cr_expect_eq(ct_op(&t, cumod_module_load, "scale"), CUMOD_EBUSY);
    cr_expect(strstr(cumod_last_detail(), "none can be unloaded"), "%s",
              cumod_last_detail());
    char buf[32];
    cr_expect_str_eq(ct_state(&t, "vadd", buf, sizeof(buf)), "resident");
    th_env_stop(&t);
}

Test(residency, idle_modules_are_unloaded_after_the_timeout, .timeout = 60)
{
    ct t;
    th_env_init(&t, ct_kernels);
    th_env_start(&t, (const char *[]){"--idle-unload", "1", NULL}, NULL);
    cr_assert_eq(ct_op(&t, cumod_module_load, "vadd"), CUMOD_OK);
    cr_expect(ct_wait_state(&t, "vadd", "available", 5000),
              "vadd should be unloaded after 1 s idle");
    char *log = th_daemon_log(&t.d);
    cr_expect(strstr(log, "CUMOD-IDLE-UNLOAD: vadd") != NULL, "%s", log);
    free(log);
    th_env_stop(&t);
}

Test(residency, a_failed_load_is_recorded_and_not_retried_until_asked,
     .timeout = 60)
{
    ct t;
    th_env_init(&t, ct_kernels);
    th_env_start(&t, NULL, (const char *[]){"CUMOD_FAKE_FAULT=load:1", NULL});
    cr_expect_eq(ct_op(&t, cumod_module_load, "vadd"), CUMOD_EIMAGE);
    cr_expect(strstr(cumod_last_detail(), "CUDA_ERROR_INVALID_IMAGE"), "%s",
              cumod_last_detail());
    char buf[32];
    cr_expect_str_eq(ct_state(&t, "vadd", buf, sizeof(buf)), "failed");
    /* Asked again with the same bytes: refused from the record. */
    cr_expect_eq(ct_op(&t, cumod_module_load, "vadd"), CUMOD_EIMAGE);
    char *log = th_daemon_log(&t.d);
    int fails = th_count(log, "CUMOD-LOAD-FAIL");
    cr_expect_eq(fails, 1, "the same bytes are not loaded twice:\n%s", log);
    free(log);
    /* reload retries; the fake fails only the first load. */
    cr_expect_eq(ct_op(&t, cumod_module_reload, "vadd"), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect(ct_wait_state(&t, "vadd", "resident", 5000));
    th_env_stop(&t);
}

/* A load that meets a context already lost (another module's kernel
 * faulted; every CUDA call fails after that) is not the image's fault:
 * the caller hears the context was lost and why, the bytes are not
 * recorded as failed, and the next use loads them in the new executor.
 * Found by fault_test's faulting loop among busy clients: the busy
 * kernel's reload met the second fault, and its module was refused as a
 * bad image until the file changed. */
Test(residency, a_load_that_meets_a_lost_context_is_retried_not_recorded,
     .timeout = 60)
{
    ct t;
    th_env_init(&t, ct_kernels);
    /* the executor's second load meets the lost context, once: the new
     * executor (which loads empty first again) does not */
    char once[320], env_once[360];
    snprintf(once, sizeof(once), "%s/.fault-once", t.dir);
    snprintf(env_once, sizeof(env_once), "CUMOD_FAKE_FAULT_ONCE=%s", once);
    th_env_start(
        &t, NULL,
        (const char *[]){"CUMOD_FAKE_FAULT=load:2:CUDA_ERROR_ILLEGAL_ADDRESS",
                         env_once, NULL});
    cr_assert_eq(ct_op(&t, cumod_module_load, "empty"), CUMOD_OK, "%s",
                 cumod_last_detail());
    int rv = ct_op(&t, cumod_module_load, "vadd");
    cr_expect_eq(rv, CUMOD_ECTXLOST, "%s: %s", cumod_errname(rv),
                 cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(), "CUDA_ERROR_ILLEGAL_ADDRESS"),
              "the caller hears what was met: %s", cumod_last_detail());
    char buf[32];
    cr_expect_str_neq(ct_state(&t, "vadd", buf, sizeof(buf)), "failed");
    /* The new executor (once up: a module command during the restart is
     * told to retry shortly, and one that reached the old executor as it
     * went hears it was lost) loads the same bytes. */
    for (int i = 0; i < 200; i++) {
        if ((rv = ct_op(&t, cumod_module_load, "vadd")) == CUMOD_OK ||
            (rv != CUMOD_ECTXLOST &&
             strstr(cumod_last_detail(), "retry shortly") == NULL))
            break;
        th_sleep_ms(25);
    }
    cr_expect_eq(rv, CUMOD_OK, "the same bytes load in the new executor: %s",
                 cumod_last_detail());
    cr_expect(ct_wait_state(&t, "vadd", "resident", 5000));
    char *log = th_daemon_log(&t.d);
    cr_expect_eq(th_count(log, "CUMOD-LOAD-FAIL"), 0,
                 "not recorded as a failed image:\n%s", log);
    free(log);
    th_env_stop(&t);
}

Test(commands, unknown_and_invalid_names_are_clear_errors, .timeout = 60)
{
    ct t;
    th_env_init(&t, ct_kernels);
    th_env_start(&t, NULL, NULL);
    cr_expect_eq(ct_op(&t, cumod_module_load, "nosuch"), CUMOD_ENOENT);
    cr_expect(strstr(cumod_last_detail(), "no module named 'nosuch'"), "%s",
              cumod_last_detail());
    cr_expect_eq(ct_op(&t, cumod_module_reload, "../etc/passwd"), CUMOD_EINVAL);
    cr_expect(strstr(cumod_last_detail(), "is not a module name"), "%s",
              cumod_last_detail());

    char *out, *err;
    int rc = th_ctl(&t.d, (const char *[]){"show", "nosuch", NULL}, &out, &err);
    cr_expect_eq(rc, 1);
    cr_expect(strstr(err, "cumodctl: show: no module named 'nosuch'"), "%s",
              err);
    free(out);
    free(err);
    rc = th_ctl(&t.d, (const char *[]){"load", NULL}, &out, &err);
    cr_expect_eq(rc, 2);
    cr_expect(strstr(err, "load needs one MODULE"), "%s", err);
    free(out);
    free(err);
    th_env_stop(&t);
}

Test(commands, cumodctl_json_has_the_documented_fields, .timeout = 60)
{
    ct t;
    char *out, *err;
    th_env_init(&t, ct_kernels);
    th_env_start(&t, NULL, NULL);
    cr_assert_eq(th_ctl(&t.d, (const char *[]){"load", "vadd", "--json", NULL},
                        &out, &err),
                 0, "%s", err);
    cr_expect(strstr(out, "\"state\": \"resident\""), "%s", out);
    cr_expect(strstr(out, "\"note\": "), "%s", out);
    free(out);
    free(err);
    cr_assert_eq(
        th_ctl(&t.d, (const char *[]){"ls", "--json", NULL}, &out, &err), 0);
    const char *fields[] = {
        "\"name\": \"vadd\"",  "\"state\": \"resident\"", "\"generation\": 1",
        "\"sha256\": \"",      "\"kind\": \"cubin\"",     "\"size\": ",
        "\"kernels\": [",      "\"pinned\": false",       "\"error\": null",
        "\"name\": \"scale\"", "\"state\": \"available\""};
    cr_expect_eq(out[0], '[', "an array");
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        cr_expect(strstr(out, fields[i]) != NULL, "no %s in:\n%s", fields[i],
                  out);
    free(out);
    free(err);
    cr_assert_eq(
        th_ctl(&t.d, (const char *[]){"show", "vadd", NULL}, &out, &err), 0);
    cr_expect(strstr(out, "kernel:     vadd\n"), "%s", out);
    cr_expect(strstr(out, "  params:   8@0, 8@8, 8@16, 4@24  [size@offset]"),
              "%s", out);
    free(out);
    free(err);
    th_env_stop(&t);
}

Test(commands, ptx_jit_errors_keep_the_log, .timeout = 60)
{
    ct t;
    th_env_init(&t, ct_kernels);
    /* A valid header (.version, .target) with an entry the JIT rejects. */
    static const char bad[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                              ".visible .entry broken(\n  .param .q99 p\n)\n"
                              "{\n  ret;\n}\n";
    char p[512];
    snprintf(p, sizeof(p), "%s/broken.ptx", t.dir);
    FILE *f = fopen(p, "w");
    fputs(bad, f);
    fclose(f);
    th_env_start(&t, NULL, NULL);
    cr_expect_eq(ct_op(&t, cumod_module_load, "broken"), CUMOD_EIMAGE);
    cumod_module_detail *d;
    cr_assert_eq(cumod_module_show(t.c, "broken", &d), CUMOD_OK);
    cr_expect_str_eq(d->module.state, "failed");
    cr_expect(d->module.error &&
                  strstr(d->module.error, "CUDA_ERROR_INVALID_PTX"),
              "%s", d->module.error ? d->module.error : "(none)");
    cr_expect(d->jit_log != NULL && d->jit_log[0] != '\0',
              "the JIT's error log is kept");
    cumod_module_detail_free(d);
    th_env_stop(&t);
}

/* A tiny PTX image whose header passes the checks. */
static void
ct_write_ptx(const char *dir, int i)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/k%05d.ptx", dir, i);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    char body[128];
    int n =
        snprintf(body, sizeof(body),
                 ".version 8.0\n.target sm_90\n.address_size 64\n// %d\n", i);
    cr_assert_eq(write(fd, body, (size_t)n), n);
    close(fd);
}

/* name, state and hash of every module, once every file has been read
 * (none left without a hash or an error), or after 120 s. */
static char *
ct_ls_summary(ct *t)
{
    cumod_module_list *l;
    for (int w = 0;; w += 100) {
        cr_assert_eq(cumod_modules_list(t->c, &l), CUMOD_OK, "%s",
                     cumod_last_detail());
        size_t unread = 0;
        for (size_t i = 0; i < l->count; i++)
            if (l->modules[i].sha256[0] == '\0' && !l->modules[i].error)
                unread++;
        if (unread == 0 || w > 120000)
            break;
        cumod_module_list_free(l);
        th_sleep_ms(100);
    }
    size_t cap = l->count * 160 + 1, len = 0;
    char *s = malloc(cap);
    s[0] = '\0';
    for (size_t i = 0; i < l->count; i++)
        len += (size_t)snprintf(s + len, cap - len, "%s %s %s\n",
                                l->modules[i].name, l->modules[i].state,
                                l->modules[i].sha256);
    cumod_module_list_free(l);
    return s;
}

Test(rescan, fifty_thousand_files_overflow_and_end_equal_to_a_fresh_scan,
     .timeout = 300)
{
    ct t;
    th_env_init(&t, ct_kernels);
    th_env_start(&t, NULL, NULL);
    /* "At once": the daemon is stopped while the files appear, so the
     * kernel's queue (16384 events by default) must overflow. */
    kill(t.d.pid, SIGSTOP);
    for (int i = 0; i < 50000; i++)
        ct_write_ptx(t.dir, i);
    char p[512];
    snprintf(p, sizeof(p), "%s/scale.cubin", t.dir);
    unlink(p);
    kill(t.d.pid, SIGCONT);
    /* Wait until the catalog holds them all and scale is gone. */
    cumod_device_info di = {0};
    for (int w = 0; w < 120000; w += 200) {
        cr_assert_eq(cumod_device_info_get(t.c, &di), CUMOD_OK);
        if (di.modules == 50002)
            break;
        th_sleep_ms(200);
    }
    cr_expect_eq(di.modules, 50002, "50,000 + vadd + empty");
    char *log = th_daemon_log(&t.d);
    cr_expect(strstr(log, "overflow") != NULL,
              "the event queue should have overflowed:\n%.2000s", log);
    free(log);
    char *a = ct_ls_summary(&t);

    ct fresh = t; /* the same folder, a new daemon */
    th_env_start(&fresh, NULL, NULL);
    for (int w = 0; w < 120000; w += 200) {
        cr_assert_eq(cumod_device_info_get(fresh.c, &di), CUMOD_OK);
        if (di.modules == 50002)
            break;
        th_sleep_ms(200);
    }
    char *b = ct_ls_summary(&fresh);
    cr_expect(strcmp(a, b) == 0, "the rescan differs from a fresh scan");
    cr_expect(strstr(a, "k49999 available ") != NULL, "the last file is there");
    cr_expect(strstr(a, "scale ") == NULL, "the deleted module is not");
    free(a);
    free(b);
    cumod_close(fresh.c);
    cr_expect_eq(th_daemon_stop(&fresh.d), 0);
    th_env_stop(&t);
}

Test(commands, a_zero_padded_fatbin_never_reaches_the_driver, .timeout = 60)
{
    ct t;
    th_env_init(&t, ct_kernels);
    /* A truncated copy padded with zeros (driver 580 hangs on these). */
    char *img = th_read_file(KDIR "/vadd_fat.fatbin");
    struct stat st;
    stat(KDIR "/vadd_fat.fatbin", &st);
    memset(img + st.st_size / 2, 0, (size_t)st.st_size - st.st_size / 2);
    char p[512];
    snprintf(p, sizeof(p), "%s/padded.fatbin", t.dir);
    FILE *f = fopen(p, "w");
    fwrite(img, 1, (size_t)st.st_size, f);
    fclose(f);
    free(img);
    th_env_start(&t, NULL, NULL);
    cr_expect_eq(ct_op(&t, cumod_module_load, "padded"), CUMOD_EIMAGE);
    cr_expect(strstr(cumod_last_detail(), "is malformed") ||
                  strstr(cumod_last_detail(), "cut short"),
              "%s", cumod_last_detail());
    th_env_stop(&t);
}
