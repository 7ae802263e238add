/* SPDX-License-Identifier: MIT */
/*
 * The catalog (daemon/catalog) against a fake executor: its ops answer
 * LOAD and UNLOAD on the next turn of the loop, as the real executor's
 * replies arrive, with kernel tables made here. Real folder, real inotify,
 * real image reads; no daemon, no driver. What holds: a launch's resolve
 * parks on a lazy load and hears the outcome; a generation held by work in
 * flight is unloaded only after its last release; a failed load leaves
 * the module failed with the executor's message; waiters hear
 * CUMOD_ESHUTDOWN when the catalog stops; a blamed generation is
 * quarantined by its bytes (after --quarantine-after faults), its launches
 * refused with CUMOD_EQUARANTINED, the last good bytes loaded again in its
 * place, unquarantine and new bytes lift it; a module that was the only
 * one loading when executors died twice is quarantined.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/catalog.h"
#include "common/config.h"
#include "harness.h"
#include "common/list.h"

TH_SUITE_DRIVER(0);

#define KDIR CUMOD_TEST_KERNEL_DIR

/* A reply the fake executor delivers on the next turn. */
typedef struct fx_reply {
    cumod_list_node link;
    cumod_chan_reply_cb cb;
    void *arg;
    cumod_chan_hdr hdr;
    size_t len;
    char payload[512];
} fx_reply;

typedef struct fx {
    uv_loop_t loop;
    uv_timer_t tick;
    cumod_config cfg;
    cumod_catalog *cat;
    char dir[256];
    cumod_list replies;
    int ready;
    int nloads, nunloads;
    uint64_t next_handle;
    uint64_t unloaded[16];
    int fail_next_load;
    int die_next_load; /* the executor dies before answering */
} fx;

static void
fx_on_tick(uv_timer_t *h)
{
    fx *x = h->data;
    cumod_list now;
    cumod__list_init(&now);
    cumod__list_splice(&now, &x->replies);
    for (cumod_list_node *n; (n = cumod__list_pop(&now)) != NULL;) {
        fx_reply *r = CUMOD_CONTAINER_OF(n, fx_reply, link);
        if (r->cb != NULL)
            r->cb(r->arg, &r->hdr, r->len ? r->payload : NULL, r->len);
        free(r);
    }
}

static void
fx_put(char *buf, size_t *at, const void *p, size_t n)
{
    memcpy(buf + *at, p, n);
    *at += n;
}

static cumod_err
fx_call(void *arg, uint32_t op, const void *payload, size_t len, int fd,
        cumod_chan_reply_cb cb, void *cbarg)
{
    fx *x = arg;
    fx_reply *r = calloc(1, sizeof(*r));
    (void)fd;
    cr_assert_not_null(r);
    r->cb = cb;
    r->arg = cbarg;
    r->hdr.op = op;
    if (op == CUMOD_CHAN_LOAD) {
        cumod_chan_load req;
        cumod_chan_loaded res = {0};
        cr_assert_geq(len, sizeof(req));
        memcpy(&req, payload, sizeof(req));
        x->nloads++;
        if (x->die_next_load) {
            x->die_next_load = 0;
            r->hdr.status = CUMOD_ECTXLOST; /* no payload: it went */
        } else if (x->fail_next_load) {
            const char *m = "cuModuleLoadData: CUDA_ERROR_INVALID_IMAGE "
                            "(fake executor)";
            x->fail_next_load = 0;
            r->hdr.status = CUMOD_EIMAGE;
            res.msg_len = (uint32_t)strlen(m);
            fx_put(r->payload, &r->len, &res, sizeof(res));
            fx_put(r->payload, &r->len, m, res.msg_len);
        } else {
            /* One kernel named like the module, with one 8-byte
             * parameter at offset 0. */
            uint16_t nlen = (uint16_t)strlen(req.name), np = 1;
            uint32_t pair[2] = {0, 8}, nglobals = 0;
            cumod_chan_kattr ka = {.static_shared = 0,
                                   .registers = 16,
                                   .max_threads = 1024,
                                   .max_dyn_shared = 48 * 1024};
            res.handle = ++x->next_handle;
            res.nkernels = 1;
            res.table_len = 2 + nlen + 2 + 8 + sizeof(ka) + 4;
            fx_put(r->payload, &r->len, &res, sizeof(res));
            fx_put(r->payload, &r->len, &nlen, 2);
            fx_put(r->payload, &r->len, req.name, nlen);
            fx_put(r->payload, &r->len, &np, 2);
            fx_put(r->payload, &r->len, pair, 8);
            fx_put(r->payload, &r->len, &ka, sizeof(ka));
            fx_put(r->payload, &r->len, &nglobals, 4);
        }
    } else if (op == CUMOD_CHAN_UNLOAD) {
        cumod_chan_unload u;
        memcpy(&u, payload, sizeof(u));
        if (x->nunloads < 16)
            x->unloaded[x->nunloads] = u.handle;
        x->nunloads++;
    } else {
        cr_assert_fail("the catalog sent op %u", op);
    }
    cumod__list_node_init(&r->link);
    cumod__list_append(&x->replies, &r->link);
    return CUMOD_OK;
}

static int
fx_ready(void *arg)
{
    return ((fx *)arg)->ready;
}

static void
fx_start(fx *x, const char *const *kernels)
{
    char src[512], name[160];
    cumod_status st;

    memset(x, 0, sizeof(*x));
    cumod__list_init(&x->replies);
    th_tmpdir(x->dir, sizeof(x->dir));
    for (int i = 0; kernels && kernels[i]; i++) {
        snprintf(src, sizeof(src), "%s/%s.cubin", KDIR, kernels[i]);
        snprintf(name, sizeof(name), "%s.cubin", kernels[i]);
        cr_assert_eq(th_copy(src, x->dir, name), 0);
    }
    x->cfg.kernel_dir = x->dir;
    x->cfg.jit = (cumod_jit_opts)CUMOD_JIT_OPTS_UNSET;
    x->cfg.compile_cache = "none";
    x->cfg.compile_timeout_s = 60;
    x->cfg.quarantine_after = 1;
    x->ready = 1;
    cr_assert_eq(uv_loop_init(&x->loop), 0);
    uv_timer_init(&x->loop, &x->tick);
    x->tick.data = x;
    uv_timer_start(&x->tick, fx_on_tick, 5, 5);
    cumod_catalog_ops ops = {.call = fx_call, .ready = fx_ready, .arg = x};
    cr_assert_eq(cumod__catalog_open(&x->loop, &x->cfg, &ops, &x->cat, &st),
                 CUMOD_OK, "%s", st.msg);
    cumod__catalog_exec_ready(x->cat, 9, 0); /* an H100: the first scan */
}

/* Turns the loop until *flag is set or ms pass. */
static int
fx_until(fx *x, const int *flag, int ms)
{
    uint64_t end = uv_now(&x->loop) + (uint64_t)ms;
    while (!*flag && uv_now(&x->loop) < end)
        uv_run(&x->loop, UV_RUN_ONCE);
    return *flag;
}

static void
fx_stop(fx *x)
{
    cumod__catalog_stop(x->cat);
    uv_timer_stop(&x->tick);
    fx_on_tick(&x->tick); /* what is still queued hears its answer */
    uv_close((uv_handle_t *)&x->tick, NULL);
    uv_run(&x->loop, UV_RUN_DEFAULT);
    cr_expect_eq(uv_loop_close(&x->loop), 0, "no handle left open");
    th_rmtree(x->dir);
}

typedef struct fw {
    cumod_waiter w;
    int heard;
    cumod_status st;
} fw;

static void
fw_cb(cumod_waiter *w, cumod_module *m, const cumod_status *st)
{
    fw *f = CUMOD_CONTAINER_OF(w, fw, w);
    (void)m;
    f->heard++;
    f->st = *st;
}

static cumod_gen *
fx_resolve(fx *x, const char *module)
{
    fw w = {.w.cb = fw_cb};
    cumod_gen *g = NULL;
    cumod_status st;
    cumod_resolve r = cumod__catalog_resolve(x->cat, module, 0, &w.w, &g, &st);
    if (r == CUMOD_RESOLVE_PARKED) {
        cr_assert(fx_until(x, &w.heard, 5000), "the waiter heard back");
        cr_assert_eq(w.st.code, CUMOD_OK, "%s", w.st.msg);
        r = cumod__catalog_resolve(x->cat, module, 0, &w.w, &g, &st);
    }
    cr_assert_eq(r, CUMOD_RESOLVE_READY, "%s", st.msg);
    return g;
}

Test(catalog_unit, a_lazy_load_parks_the_launch_until_it_settles, .timeout = 30)
{
    static const char *const k[] = {"vadd", NULL};
    fx x;
    fw w = {.w.cb = fw_cb};
    cumod_gen *g = NULL;
    cumod_status st;

    fx_start(&x, k);
    cr_assert_eq(cumod__catalog_resolve(x.cat, "vadd", 0, &w.w, &g, &st),
                 CUMOD_RESOLVE_PARKED, "not resident yet: parked");
    cr_expect_eq(x.nloads, 0, "the file is read before anything loads");
    cr_assert(fx_until(&x, &w.heard, 5000));
    cr_expect_eq(w.heard, 1, "heard once");
    cr_expect_eq(w.st.code, CUMOD_OK, "%s", w.st.msg);
    cr_expect_eq(x.nloads, 1, "one LOAD reached the executor");
    cr_assert_eq(cumod__catalog_resolve(x.cat, "vadd", 0, &w.w, &g, &st),
                 CUMOD_RESOLVE_READY);
    cr_expect_eq(cumod__gen_number(g), 1);
    cr_expect_eq(cumod__gen_handle(g), 1, "the executor's handle");
    const cumod_kernel *kern = cumod__gen_kernel(g, "vadd", &st);
    cr_assert_not_null(kern);
    cr_expect_eq(kern->nparams, 1);
    cr_expect_null(cumod__gen_kernel(g, "nope", &st));
    cr_expect_str_eq(st.msg, "module vadd (generation 1) has no kernel "
                             "'nope'; it has: vadd");
    cr_expect_eq(cumod__catalog_resolve(x.cat, "absent", 0, &w.w, &g, &st),
                 CUMOD_RESOLVE_REFUSED);
    cr_expect_eq(st.code, CUMOD_ENOENT);
    cr_expect_eq(w.heard, 1, "refusals never call the waiter");
    fx_stop(&x);
}

Test(catalog_unit, a_held_generation_unloads_after_its_last_release,
     .timeout = 30)
{
    static const char *const k[] = {"vadd", NULL};
    char src[512];
    fx x;

    fx_start(&x, k);
    cumod_gen *g1 = fx_resolve(&x, "vadd");
    cumod__gen_hold(g1); /* a launch in flight */
    snprintf(src, sizeof(src), "%s/vadd.cubin", CUMOD_TEST_VARIANT_DIR);
    cr_assert_eq(th_copy(src, x.dir, "vadd.cubin"), 0);
    cumod_status st;
    cumod_module *m = cumod__catalog_find(x.cat, "vadd", &st);
    cr_assert_not_null(m);
    for (int i = 0; i < 500 && cumod__module_generation(m) < 2; i++)
        uv_run(&x.loop, UV_RUN_ONCE);
    cr_assert_eq(cumod__module_generation(m), 2,
                 "the new bytes loaded as a new generation");
    cr_expect_eq(x.nloads, 2);
    cumod_gen *g2 = fx_resolve(&x, "vadd");
    cr_expect_eq(cumod__gen_number(g2), 2, "new launches get generation 2");
    for (int i = 0; i < 10; i++)
        uv_run(&x.loop, UV_RUN_NOWAIT);
    cr_expect_eq(x.nunloads, 0, "generation 1 stays while a launch holds it");
    cumod__gen_release(g1);
    int one = 0;
    for (int i = 0; i < 200 && !one; i++) {
        uv_run(&x.loop, UV_RUN_ONCE);
        one = x.nunloads == 1;
    }
    cr_assert(one, "unloaded after its last release");
    cr_expect_eq(x.unloaded[0], 1, "generation 1's executor handle");
    fx_stop(&x);
}

Test(catalog_unit, a_failed_load_fails_its_waiters_and_the_module,
     .timeout = 30)
{
    static const char *const k[] = {"scale", NULL};
    fx x;
    fw w = {.w.cb = fw_cb};
    cumod_gen *g;
    cumod_status st;

    fx_start(&x, k);
    x.fail_next_load = 1;
    cr_assert_eq(cumod__catalog_resolve(x.cat, "scale", 0, &w.w, &g, &st),
                 CUMOD_RESOLVE_PARKED);
    cr_assert(fx_until(&x, &w.heard, 5000));
    cr_expect_eq(w.st.code, CUMOD_EIMAGE, "%s", w.st.msg);
    cr_expect(strstr(w.st.msg, "scale could not be loaded") != NULL &&
                  strstr(w.st.msg, "fake executor") != NULL,
              "the executor's message: %s", w.st.msg);
    cumod_module *m = cumod__catalog_find(x.cat, "scale", &st);
    cr_assert_not_null(m);
    cumod_module_view v;
    cumod__module_view(m, &v);
    cr_expect_str_eq(v.mi.state, "failed");
    cumod__module_view_fini(&v);
    /* The same bytes are not tried again until asked. */
    w.heard = 0;
    cr_assert_eq(cumod__catalog_resolve(x.cat, "scale", 0, &w.w, &g, &st),
                 CUMOD_RESOLVE_PARKED);
    cr_assert(fx_until(&x, &w.heard, 5000));
    cr_expect_eq(w.st.code, CUMOD_EIMAGE);
    cr_expect_eq(x.nloads, 1, "no second load of the same bytes");
    fx_stop(&x);
}

Test(catalog_unit, without_an_executor_a_load_fails_retryably, .timeout = 30)
{
    static const char *const k[] = {"vadd", NULL};
    fx x;
    fw w = {.w.cb = fw_cb};
    cumod_gen *g;
    cumod_status st;

    fx_start(&x, k);
    x.ready = 0; /* the executor is restarting */
    cr_assert_eq(cumod__catalog_resolve(x.cat, "vadd", 0, &w.w, &g, &st),
                 CUMOD_RESOLVE_PARKED);
    cr_assert(fx_until(&x, &w.heard, 5000));
    cr_expect_eq(w.st.code, CUMOD_ECTXLOST, "%s", w.st.msg);
    cr_expect(strstr(w.st.msg, "retry") != NULL, "%s", w.st.msg);
    cr_expect_eq(x.nloads, 0);
    fx_stop(&x);
}

Test(catalog_unit, waiters_hear_shutdown_when_the_catalog_stops, .timeout = 30)
{
    static const char *const k[] = {"vadd", NULL};
    fx x;
    fw w = {.w.cb = fw_cb};
    cumod_gen *g;
    cumod_status st;

    fx_start(&x, k);
    cr_assert_eq(cumod__catalog_resolve(x.cat, "vadd", 0, &w.w, &g, &st),
                 CUMOD_RESOLVE_PARKED);
    fx_stop(&x); /* while its file is still being read */
    cr_expect_eq(w.heard, 1, "heard exactly once");
    cr_expect_eq(w.st.code, CUMOD_ESHUTDOWN, "%s", w.st.msg);
}

/* The module named name. */
static cumod_module *
fx_module(fx *x, const char *name)
{
    cumod_status st;
    cumod_module *m = cumod__catalog_find(x->cat, name, &st);
    cr_assert_not_null(m, "%s", st.msg);
    return m;
}

/* The executor dies (explained: a fault, a hang) and a new one comes up;
 * turns the loop until m is resident again or ms pass. */
static void
fx_restart(fx *x, int explained)
{
    /* As the executor client does: the calls it leaves hear that it went
     * (oldest first), then the catalog hears it. */
    x->ready = 0;
    for (cumod_list_node *n; (n = cumod__list_pop(&x->replies)) != NULL;) {
        fx_reply *r = CUMOD_CONTAINER_OF(n, fx_reply, link);
        cumod_chan_hdr h = r->hdr;
        h.status = CUMOD_ECTXLOST;
        if (r->cb != NULL)
            r->cb(r->arg, &h, NULL, 0);
        free(r);
    }
    cumod__catalog_exec_lost(x->cat, explained);
    x->ready = 1;
    cumod__catalog_exec_ready(x->cat, 9, 0);
}

static void
fx_turn(fx *x, int n)
{
    for (int i = 0; i < n; i++)
        uv_run(&x->loop, UV_RUN_NOWAIT);
}

static void
fx_until_resident(fx *x, cumod_module *m, uint64_t gen)
{
    for (int i = 0; i < 2000 && !(cumod__module_resident(m) &&
                                  cumod__module_generation(m) >= gen);
         i++)
        uv_run(&x->loop, UV_RUN_ONCE);
    cr_assert(cumod__module_resident(m), "resident again");
    cr_assert_geq(cumod__module_generation(m), gen);
}

Test(catalog_unit, a_blamed_generation_is_quarantined_and_rolled_back,
     .timeout = 30)
{
    static const char *const k[] = {"vadd", NULL};
    char src[512], good[65];
    fx x;
    cumod_status st;
    cumod_module_view v;

    fx_start(&x, k);
    cumod_gen *g1 = fx_resolve(&x, "vadd");
    snprintf(good, sizeof(good), "%s", cumod__gen_sha256(g1));
    cumod_module *m = fx_module(&x, "vadd");
    snprintf(src, sizeof(src), "%s/vadd.cubin", CUMOD_TEST_VARIANT_DIR);
    cr_assert_eq(th_copy(src, x.dir, "vadd.cubin"), 0);
    fx_until_resident(&x, m, 2);
    cumod_gen *g2 = fx_resolve(&x, "vadd");
    cr_assert_eq(cumod__gen_number(g2), 2);
    char bad[65];
    snprintf(bad, sizeof(bad), "%s", cumod__gen_sha256(g2));
    cr_assert_str_neq(bad, good);

    /* Generation 2 faults the context, alone. */
    cr_expect_eq(cumod__catalog_blame(x.cat, g2, "CUDA_ERROR_X in vadd", 0), 1,
                 "quarantined at the first fault");
    fx_restart(&x, 1);
    fx_until_resident(&x, m, 3);
    cumod_gen *g3 = fx_resolve(&x, "vadd");
    cr_expect_eq(cumod__gen_number(g3), 3, "the rollback is a new generation");
    cr_expect_str_eq(cumod__gen_sha256(g3), good, "generation 1's bytes");
    cumod__module_view(m, &v);
    cr_expect_str_eq(v.mi.state, "resident");
    cr_expect(!v.mi.quarantined, "launches are served");
    cr_expect_str_eq(v.mi.quarantined_sha256, bad);
    cr_expect(strstr(v.mi.quarantine_reason, "CUDA_ERROR_X in vadd") &&
                  strstr(v.mi.quarantine_reason, ", at 20"),
              "the fault and when: %s", v.mi.quarantine_reason);
    cumod__module_view_fini(&v);

    /* Unquarantine: the file's (bad) bytes load again. */
    char note[128];
    cr_expect_eq(cumod__catalog_unquarantine(x.cat, m, note, sizeof(note)),
                 CUMOD_OK);
    cr_expect_str_eq(note, "quarantine lifted");
    fx_until_resident(&x, m, 4);
    cumod_gen *g4 = fx_resolve(&x, "vadd");
    cr_expect_str_eq(cumod__gen_sha256(g4), bad);
    cr_expect_eq(cumod__catalog_unquarantine(x.cat, m, note, sizeof(note)),
                 CUMOD_OK);
    cr_expect_str_eq(note, "not quarantined");
    (void)st;
    fx_stop(&x);
}

Test(catalog_unit, without_a_good_generation_launches_are_refused,
     .timeout = 30)
{
    static const char *const k[] = {"vadd", NULL};
    char src[512];
    fx x;
    fw w = {.w.cb = fw_cb};
    cumod_gen *g;
    cumod_status st;

    fx_start(&x, k);
    x.cfg.quarantine_after = 2;
    g = fx_resolve(&x, "vadd");
    cumod_module *m = fx_module(&x, "vadd");
    cr_expect_eq(cumod__catalog_blame(x.cat, g, "fault one", 0), 0,
                 "one fault of the two --quarantine-after allows");
    fx_restart(&x, 1);
    fx_until_resident(&x, m, 2);
    g = fx_resolve(&x, "vadd");
    cr_expect_eq(cumod__catalog_blame(x.cat, g, "fault two", 0), 1);
    fx_restart(&x, 1);
    fx_turn(&x, 50);
    cr_expect(!cumod__module_resident(m), "its bytes are not loaded again");
    cr_assert_eq(cumod__catalog_resolve(x.cat, "vadd", 0, &w.w, &g, &st),
                 CUMOD_RESOLVE_REFUSED);
    cr_expect_eq(st.code, CUMOD_EQUARANTINED);
    cr_expect(strstr(st.msg, "module vadd is quarantined: fault two, at ") &&
                  strstr(st.msg, "cumodctl unquarantine vadd"),
              "%s", st.msg);
    cumod_module_view v;
    cumod__module_view(m, &v);
    cr_expect_str_eq(v.mi.state, "quarantined");
    cr_expect(v.mi.quarantined);
    cr_expect_eq(v.mi.faults, 2);
    cumod__module_view_fini(&v);

    /* New bytes start clean. */
    snprintf(src, sizeof(src), "%s/vadd.cubin", CUMOD_TEST_VARIANT_DIR);
    cr_assert_eq(th_copy(src, x.dir, "vadd.cubin"), 0);
    for (int i = 0; i < 500; i++) {
        cumod__module_view(m, &v);
        int clean = v.mi.quarantined_sha256[0] == '\0';
        cumod__module_view_fini(&v);
        if (clean)
            break;
        uv_run(&x.loop, UV_RUN_ONCE);
    }
    g = fx_resolve(&x, "vadd");
    cr_expect_eq(cumod__gen_number(g), 3);
    fx_stop(&x);
}

Test(catalog_unit, a_module_whose_load_kills_executors_is_quarantined,
     .timeout = 30)
{
    static const char *const k[] = {"vadd", NULL};
    fx x;
    fw w = {.w.cb = fw_cb};
    cumod_gen *g;
    cumod_status st;

    fx_start(&x, k);
    for (int death = 1; death <= 2; death++) {
        x.die_next_load = 1;
        w.heard = 0;
        cr_assert_eq(cumod__catalog_resolve(x.cat, "vadd", 0, &w.w, &g, &st),
                     CUMOD_RESOLVE_PARKED);
        /* The read, then the load, whose executor dies. */
        int loads = x.nloads;
        for (int i = 0; i < 2000 && x.nloads == loads; i++)
            uv_run(&x.loop, UV_RUN_ONCE);
        fx_turn(&x, 20);
        fx_restart(&x, 0); /* nothing else explains it */
        cr_assert(fx_until(&x, &w.heard, 5000));
        cr_expect_eq(w.st.code, CUMOD_ECTXLOST,
                     "the launch hears the executor went: %s", w.st.msg);
    }
    fx_turn(&x, 50);
    cumod_module *m = fx_module(&x, "vadd");
    cumod_module_view v;
    cumod__module_view(m, &v);
    cr_expect_str_eq(v.mi.state, "quarantined");
    cr_expect(strstr(v.mi.quarantine_reason, "died 2 times while loading"),
              "%s", v.mi.quarantine_reason);
    cumod__module_view_fini(&v);
    /* No third load: its launches are refused at once. */
    cr_expect_eq(cumod__catalog_resolve(x.cat, "vadd", 0, &w.w, &g, &st),
                 CUMOD_RESOLVE_REFUSED);
    cr_expect_eq(st.code, CUMOD_EQUARANTINED);
    cr_expect_eq(x.nloads, 2);
    fx_stop(&x);
}
