/* SPDX-License-Identifier: MIT */
/*
 * Change events (cumodctl watch) from cumodd on the fake driver: every
 * kind a kernel developer or operator sees, in order and numbered, a
 * watch that waits woken by the change it waits for, cumodctl watch's
 * JSON lines, and the limits of the call.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cumod/cumod.h"
#include "fixture.h"

TH_SUITE_DRIVER(0);

enum { EV_CAP = 64 };

/* Events after *after until one of kind for module ("": any) has come
 * (or 5 s); every event read is appended to log (n in *nlog). Returns the
 * index in log of the first such one, or -1. */
static int
ev_until(cumod_client *c, uint64_t *after, cumod_event *log, size_t *nlog,
         cumod_event_kind kind, const char *module)
{
    double until = th_now_ms() + 10000;
    while (th_now_ms() < until) {
        cumod_event evs[EV_CAP];
        size_t n = 0;
        int found = -1;
        cr_assert_eq(cumod_events_wait(c, after, 1000, evs, EV_CAP, &n, NULL),
                     CUMOD_OK, "%s", cumod_last_detail());
        for (size_t i = 0; i < n; i++) {
            cr_assert_lt(*nlog, 256);
            log[(*nlog)++] = evs[i];
            if (found < 0 && evs[i].kind == kind &&
                (!module[0] || strcmp(evs[i].module, module) == 0))
                found = (int)*nlog - 1;
        }
        if (found >= 0)
            return found;
    }
    return -1;
}

static void
ev_put(th_env *t, const char *src, const char *name)
{
    char tmp[400], to[400];
    snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", t->dir, name);
    snprintf(to, sizeof(to), "%s/%s", t->dir, name);
    char cmd[2000];
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s' && mv '%s' '%s'", src, tmp, tmp,
             to);
    cr_assert_eq(system(cmd), 0);
}

Test(events, every_change_comes_in_order_and_numbered, .timeout = 90)
{
    th_env t;
    static cumod_event log[256];
    size_t nlog = 0;
    uint64_t after = 0;
    int i;

    th_env_init(&t, (const char *const[]){"vadd", "empty", NULL});
    th_env_start(&t, NULL, NULL);

    /* What the first scan found, in the order it read the files. */
    double until = th_now_ms() + 5000;
    int seen_vadd = 0, seen_empty = 0;
    while (!(seen_vadd && seen_empty) && th_now_ms() < until) {
        (void)ev_until(t.c, &after, log, &nlog, CUMOD_EVENT_CATALOGUED, "");
        for (size_t e = 0; e < nlog; e++) {
            seen_vadd |= strcmp(log[e].module, "vadd") == 0;
            seen_empty |= strcmp(log[e].module, "empty") == 0;
        }
    }
    cr_assert(seen_vadd && seen_empty, "both modules catalogued (%zu events)",
              nlog);

    /* Loaded. */
    cumod_module_result r;
    cr_assert_eq(cumod_module_load(t.c, "vadd", &r), CUMOD_OK, "%s",
                 cumod_last_detail());
    char sha1[65];
    snprintf(sha1, sizeof(sha1), "%s", r.module.sha256);
    cumod_module_result_fini(&r);
    i = ev_until(t.c, &after, log, &nlog, CUMOD_EVENT_LOADED, "vadd");
    cr_assert_geq(i, 0);
    cr_expect_eq(log[i].generation, 1);
    cr_expect_str_eq(log[i].sha256, sha1);

    /* A new build lands: catalogued, then reloaded from 1 to 2 with both
     * hashes. */
    ev_put(&t, CUMOD_TEST_VARIANT_DIR "/vadd.cubin", "vadd.cubin");
    i = ev_until(t.c, &after, log, &nlog, CUMOD_EVENT_RELOADED, "vadd");
    cr_assert_geq(i, 0, "no reload event");
    cr_expect_eq(log[i].generation, 2);
    cr_expect_eq(log[i].old_generation, 1);
    cr_expect_str_eq(log[i].old_sha256, sha1);
    cr_expect(strlen(log[i].sha256) == 64 && strcmp(log[i].sha256, sha1),
              "the new hash: %s", log[i].sha256);
    cr_expect(i > 0 && log[i - 1].kind == CUMOD_EVENT_CATALOGUED &&
                  strcmp(log[i - 1].sha256, log[i].sha256) == 0,
              "the new bytes were catalogued first");

    /* A broken file: its load fails, with the error. */
    char bad[400];
    snprintf(bad, sizeof(bad), "%s/broken.cubin", t.dir);
    cr_assert_eq(th_write_file(bad, "not an ELF file at all\n"), 0);
    i = ev_until(t.c, &after, log, &nlog, CUMOD_EVENT_LOAD_FAILED, "broken");
    cr_assert_geq(i, 0, "no load-failed event");
    cr_expect(strstr(log[i].detail, "not a cubin") != NULL, "%s",
              log[i].detail);

    /* Removed; unloaded when asked. */
    char gone[400];
    snprintf(gone, sizeof(gone), "%s/empty.cubin", t.dir);
    cr_assert_eq(unlink(gone), 0);
    cr_assert_geq(
        ev_until(t.c, &after, log, &nlog, CUMOD_EVENT_REMOVED, "empty"), 0);
    cr_assert_eq(cumod_module_unload(t.c, "vadd", &r), CUMOD_OK);
    cumod_module_result_fini(&r);
    i = ev_until(t.c, &after, log, &nlog, CUMOD_EVENT_UNLOADED, "vadd");
    cr_assert_geq(i, 0);
    cr_expect_eq(log[i].generation, 2);

    /* One sequence: 1, 2, 3, ... with nothing skipped or repeated. */
    for (size_t k = 0; k < nlog; k++)
        cr_expect_eq(log[k].seq, k + 1, "event %zu is #%llu (%s)", k,
                     (unsigned long long)log[k].seq,
                     cumod_event_kind_name(log[k].kind));
    /* A number past the last (a previous cumodd's): all of these are
     * new to that watcher. */
    uint64_t stale = 1000000;
    cumod_event first;
    size_t got;
    cr_assert_eq(cumod_events_wait(t.c, &stale, 0, &first, 1, &got, NULL),
                 CUMOD_OK);
    cr_expect(got == 1 && first.seq == 1, "got %zu, #%llu", got,
              (unsigned long long)first.seq);
    /* Asked again from the start, the same events. */
    uint64_t again = 0;
    cumod_event evs[EV_CAP];
    size_t n;
    cr_assert_eq(cumod_events_wait(t.c, &again, 0, evs, EV_CAP, &n, NULL),
                 CUMOD_OK);
    cr_expect_geq(n, nlog);
    for (size_t k = 0; k < nlog && k < n; k++)
        cr_expect(evs[k].seq == log[k].seq && evs[k].kind == log[k].kind);
    th_env_stop(&t);
}

typedef struct ev_bg {
    const char *url;
    int rv;
    size_t n;
    cumod_event ev;
    double ms;
} ev_bg;

static void *
ev_wait_bg(void *arg)
{
    ev_bg *b = arg;
    cumod_client *c;
    if ((b->rv = cumod_open(b->url, 10000, &c)) != CUMOD_OK)
        return NULL;
    uint64_t after = CUMOD_EVENTS_NOW;
    double t0 = th_now_ms();
    b->rv = cumod_events_wait(c, &after, 20000, &b->ev, 1, &b->n, NULL);
    b->ms = th_now_ms() - t0;
    cumod_close(c);
    return NULL;
}

Test(events, a_waiting_watch_wakes_when_its_event_comes, .timeout = 60)
{
    th_env t;
    pthread_t th;
    ev_bg b = {0};

    th_env_init(&t, (const char *const[]){"vadd", NULL});
    th_env_start(&t, (const char *const[]){"--max-watch-wait", "30000", NULL},
                 NULL);
    b.url = t.d.url;
    cr_assert_eq(pthread_create(&th, NULL, ev_wait_bg, &b), 0);
    th_sleep_ms(300); /* it waits: "from now", for up to 20 s */
    cumod_module_result r;
    cr_assert_eq(cumod_module_load(t.c, "vadd", &r), CUMOD_OK);
    cumod_module_result_fini(&r);
    pthread_join(th, NULL);
    cr_assert_eq(b.rv, CUMOD_OK, "%s", cumod_last_detail());
    cr_assert_eq(b.n, 1);
    cr_expect_eq(b.ev.kind, CUMOD_EVENT_LOADED, "%s",
                 cumod_event_kind_name(b.ev.kind));
    cr_expect_str_eq(b.ev.module, "vadd");
    cr_expect_lt(b.ms, 10000,
                 "woken by the load, not by its 20 s wait (%.0f "
                 "ms)",
                 b.ms);
    /* Nothing comes: the wait ends empty at its time. */
    uint64_t after = CUMOD_EVENTS_NOW;
    size_t n = 99;
    double t0 = th_now_ms();
    cr_assert_eq(cumod_events_wait(t.c, &after, 300, &b.ev, 1, &n, NULL),
                 CUMOD_OK);
    cr_expect_eq(n, 0);
    cr_expect_geq(th_now_ms() - t0, 250);
    /* Longer than a minute is refused, with the reason. */
    cr_expect_eq(cumod_events_wait(t.c, &after, 70000, &b.ev, 1, &n, NULL),
                 CUMOD_EINVAL);
    cr_expect(strstr(cumod_last_detail(), "60000"), "%s", cumod_last_detail());
    th_env_stop(&t);
}

Test(events, a_fault_shows_as_quarantine_and_executor_restart, .timeout = 90)
{
    th_env t;
    static cumod_event log[256];
    size_t nlog = 0;
    uint64_t after = CUMOD_EVENTS_NOW;
    cumod_event none;
    size_t n;

    th_env_init(&t, (const char *const[]){"scale", NULL});
    th_env_start(&t, (const char *const[]){"--quarantine-after", "1", NULL},
                 (const char *const[]){"CUMOD_FAKE_FAULT=launch:scale", NULL});
    cr_assert_eq(cumod_events_wait(t.c, &after, 0, &none, 0, &n, NULL),
                 CUMOD_OK); /* from here */
    cumod_buffer x;
    cr_assert_eq(cumod_buffer_alloc(t.c, 1024, &x), CUMOD_OK);
    cumod_arg args[] = {cumod_arg_buffer(x, 0), cumod_arg_f32(2.0f),
                        cumod_arg_i32(256)};
    cumod_launch_params p = {.kernel = "scale:scale",
                             .grid = {1, 1, 1},
                             .block = {256, 1, 1},
                             .nargs = 3,
                             .args = args};
    cr_assert_eq(cumod_launch(t.c, &p, NULL, NULL), CUMOD_ECTXLOST);
    int q = ev_until(t.c, &after, log, &nlog, CUMOD_EVENT_QUARANTINED, "scale");
    cr_assert_geq(q, 0, "no quarantine event");
    cr_expect(strstr(log[q].detail, "CUDA_ERROR_ILLEGAL_ADDRESS"), "%s",
              log[q].detail);
    cr_expect_eq(strlen(log[q].sha256), 64);
    /* The restart may have come first (it was read with the rest). */
    int r = -1;
    for (size_t k = 0; k < nlog && r < 0; k++)
        if (log[k].kind == CUMOD_EVENT_EXECUTOR_RESTARTED)
            r = (int)k;
    if (r < 0)
        r = ev_until(t.c, &after, log, &nlog, CUMOD_EVENT_EXECUTOR_RESTARTED,
                     "");
    cr_assert_geq(r, 0, "no executor-restarted event");
    cr_expect(strstr(log[r].detail, "restart 1"), "%s", log[r].detail);
    cumod_module_result mr;
    cr_assert_eq(cumod_module_unquarantine(t.c, "scale", &mr), CUMOD_OK);
    cumod_module_result_fini(&mr);
    cr_assert_geq(
        ev_until(t.c, &after, log, &nlog, CUMOD_EVENT_UNQUARANTINED, "scale"),
        0);
    th_env_stop(&t);
}

Test(events, cumodctl_watch_prints_json_lines, .timeout = 60)
{
    th_env t;
    char *out = NULL, *err = NULL;

    th_env_init(&t, (const char *const[]){"vadd", "empty", NULL});
    th_env_start(&t, NULL, NULL);
    int rv = th_ctl(
        &t.d,
        (const char *const[]){"watch", "--all", "--json", "--count", "2", NULL},
        &out, &err);
    cr_assert_eq(rv, 0, "%s", err);
    cr_expect_eq(th_count(out, "\n"), 2, "two lines:\n%s", out);
    cr_expect(
        strncmp(out, "{\"seq\":1,\"kind\":\"catalogued\",\"module\":", 38) == 0,
        "%s", out);
    cr_expect(strstr(out, "\n{\"seq\":2,") != NULL, "%s", out);
    free(out);
    free(err);
    /* Text: one line an event, its number and kind. */
    rv = th_ctl(&t.d,
                (const char *const[]){"watch", "--all", "--count", "1", NULL},
                &out, &err);
    cr_assert_eq(rv, 0, "%s", err);
    cr_expect(strstr(out, " #1 catalogued ") != NULL, "%s", out);
    free(out);
    free(err);
    th_env_stop(&t);
    /* A cumodd that allows only short waits: cumodd refuses longer ones,
     * and cumodctl watch asks shorter ones instead of failing. */
    th_env_init(&t, (const char *const[]){"vadd", NULL});
    th_env_start(&t, (const char *const[]){"--max-watch-wait", "1000", NULL},
                 NULL);
    rv = th_ctl(&t.d,
                (const char *const[]){"watch", "--all", "--count", "1", NULL},
                &out, &err);
    cr_expect_eq(rv, 0, "%s", err);
    cr_expect(strstr(out, " #1 catalogued ") != NULL, "%s", out);
    free(out);
    free(err);
    rv = th_ctl(&t.d, (const char *const[]){"watch", "--count", "x", NULL},
                &out, &err);
    cr_expect_eq(rv, 2);
    cr_expect(strstr(err, "--count") != NULL, "%s", err);
    free(out);
    free(err);
    th_env_stop(&t);
}

Test(events, an_eviction_says_what_needed_room, .timeout = 60)
{
    th_env t;
    static cumod_event log[256];
    size_t nlog = 0;
    uint64_t after = CUMOD_EVENTS_NOW;
    cumod_event none;
    size_t n;
    cumod_module_result r;

    th_env_init(&t, (const char *const[]){"vadd", "empty", NULL});
    th_env_start(&t, (const char *const[]){"--max-resident-modules", "1", NULL},
                 NULL);
    cr_assert_eq(cumod_events_wait(t.c, &after, 0, &none, 0, &n, NULL),
                 CUMOD_OK);
    cr_assert_eq(cumod_module_load(t.c, "vadd", &r), CUMOD_OK);
    cumod_module_result_fini(&r);
    cr_assert_eq(cumod_module_load(t.c, "empty", &r), CUMOD_OK, "%s",
                 cumod_last_detail());
    cumod_module_result_fini(&r);
    int i = ev_until(t.c, &after, log, &nlog, CUMOD_EVENT_EVICTED, "vadd");
    cr_assert_geq(i, 0, "no eviction event");
    cr_expect_eq(log[i].generation, 1);
    cr_expect(strstr(log[i].detail, "empty") != NULL, "%s", log[i].detail);
    th_env_stop(&t);
}

Test(events, a_watcher_killed_while_it_waits_costs_the_others_nothing,
     .timeout = 60)
{
    th_env t;
    pthread_t th;
    ev_bg b = {0};
    char *out = NULL, *err = NULL;

    /* One client waits in the background; another client's watch, a
     * cumodctl watch, is killed while it waits (its request parked in
     * cumodd); then a module loads. The first still hears it, and cumodd
     * answers everyone after. */
    th_env_init(&t, (const char *const[]){"vadd", NULL});
    th_env_start(&t, (const char *const[]){"--max-watch-wait", "30000", NULL},
                 NULL);
    b.url = t.d.url;
    cr_assert_eq(pthread_create(&th, NULL, ev_wait_bg, &b), 0);
    const char *argv[] = {th_cumodctl, "--url", t.d.url, "watch", NULL};
    /* th_run kills it after 800 ms: a parked watch whose client is gone. */
    cr_expect_eq(th_run(argv, NULL, &out, &err, 800), -1,
                 "cumodctl watch waits until killed: %s", err);
    free(out);
    free(err);
    cumod_module_result r;
    cr_assert_eq(cumod_module_load(t.c, "vadd", &r), CUMOD_OK, "%s",
                 cumod_last_detail());
    cumod_module_result_fini(&r);
    pthread_join(th, NULL);
    cr_assert_eq(b.rv, CUMOD_OK);
    cr_expect_eq(b.n, 1);
    cr_expect_eq(b.ev.kind, CUMOD_EVENT_LOADED);
    cumod_device_info di;
    cr_expect_eq(cumod_device_info_get(t.c, &di), CUMOD_OK);
    char *log = th_daemon_log(&t.d);
    cr_expect(strstr(log, " error ") == NULL, "%s", log);
    free(log);
    th_env_stop(&t);
}
