/* SPDX-License-Identifier: MIT */
/*
 * Replicas: a catalog generation loaded again in a serving unit's executor
 * (unit.h). The catalog's loader loaded the bytes first, and its kernel
 * table is what launches index by; a replica is the same bytes, with the
 * same JIT options and the globals' kept writes, loaded on first use in
 * the unit (the launch parks meanwhile, as on a lazy catalog load) and
 * checked to have given the same table.
 *
 * A replica holds its catalog generation (cumod__gen_replica_hold), so the
 * loader keeps those bytes loaded while any domain still runs them; the
 * generation may retire (a new file, an eviction) as if idle, and then
 * its replicas are unloaded as soon as no launch of theirs is in flight,
 * and the module's new generation is loaded in their place (a prefetch,
 * so the next launch finds it there).
 *
 * Loop thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumod/errors.h"
#include "front/units/direct.h"
#include "front/front.h"
#include "common/log.h"

struct cumod_rep {
    cumod_unit *u;
    cumod_gen *g;    /* the catalog's, held */
    cumod_gen *mine; /* from u's LOAD: handle, globals; NULL until loaded */
    int loading, unloading;
    int dead;         /* its executor is gone: freed at its last release */
    cumod_status err; /* a failed load: why (code not CUMOD_OK) */
    cumod_list waiters;
    uint32_t inflight;
    uint64_t last_use_ms;
};

static uint64_t
rep_key(const cumod_gen *g)
{
    return (uint64_t)(uintptr_t)g;
}

static void
rep_free(cumod_rep *r)
{
    cumod__idmap_remove(&r->u->reps, rep_key(r->g));
    cumod__gen_replica_release(r->g);
    cumod__gen_replica_free(r->mine);
    free(r);
}

static void
rep_answer(cumod_rep *r, const cumod_status *st)
{
    cumod_list all;
    cumod__list_init(&all);
    cumod__list_splice(&all, &r->waiters);
    for (cumod_list_node *n; (n = cumod__list_pop(&all)) != NULL;) {
        cumod_waiter *w = CUMOD_CONTAINER_OF(n, cumod_waiter, link);
        w->cb(w, NULL, st);
    }
}

static void rep_maybe_unload(cumod_rep *r);

static void
rep_on_loaded(void *arg, const cumod_chan_hdr *hdr, const void *payload,
              size_t len)
{
    cumod_rep *r = arg;
    cumod_unit *u = r->u;
    cumod_status st;

    r->loading = 0;
    r->mine =
        cumod__gen_replica_parse(r->g, hdr->status, payload, len, &r->err);
    if (r->mine == NULL) {
        char why[CUMOD_STATUS_MSG];
        snprintf(why, sizeof(why), "%s", r->err.msg);
        cumod__status_set(&r->err, r->err.code, "%.128s in domain %s: %.600s",
                          cumod__gen_module(r->g), u->domain, why);
        CUMOD_LOGW("CUMOD-REPLICA", "%s", r->err.msg);
        if (payload != NULL && len >= sizeof(cumod_chan_loaded) &&
            hdr->status == CUMOD_OK) {
            /* Loaded but not the same: not to be used. */
            cumod_chan_loaded res;
            memcpy(&res, payload, sizeof(res));
            cumod_chan_unload un = {.handle = res.handle};
            cumod__fdirect_unloading(u, un.handle);
            (void)cumod__xc_call(u->xc, CUMOD_CHAN_UNLOAD, &un, sizeof(un), -1,
                                 NULL, NULL);
        }
        st = r->err;
        /* The next use tries again (the executor may have been the
         * problem): only its waiters hear this failure. */
        rep_answer(r, &st);
        if (r->inflight == 0 && !r->loading)
            rep_free(r);
        return;
    }
    CUMOD_LOGI(
        "CUMOD-REPLICA", "%s: generation %llu loaded in domain %s (device %d)",
        cumod__gen_module(r->g), (unsigned long long)cumod__gen_number(r->g),
        u->domain, u->device);
    cumod__status_set(&st, CUMOD_OK, "loaded");
    rep_answer(r, &st);
    rep_maybe_unload(r);
}

/* Sends r's LOAD; 0, or -1 with st. */
static int
rep_load(cumod_rep *r, cumod_status *st)
{
    char *payload;
    size_t len;
    int fd;
    cumod_err rv;

    if ((rv = cumod__gen_load_msg(r->g, &payload, &len, &fd)) != CUMOD_OK) {
        cumod__status_set(st, rv == CUMOD_ENOENT ? CUMOD_EIO : rv,
                          "%.128s: generation %llu kept no image to load in "
                          "domain %s",
                          cumod__gen_module(r->g),
                          (unsigned long long)cumod__gen_number(r->g),
                          r->u->domain);
        return -1;
    }
    rv = cumod__xc_call(r->u->xc, CUMOD_CHAN_LOAD, payload, len, fd,
                        rep_on_loaded, r);
    free(payload);
    if (rv != CUMOD_OK) {
        cumod__unit_refusal(r->u, rv, st);
        return -1;
    }
    r->loading = 1;
    return 0;
}

cumod_resolve
cumod__rep_get(cumod_unit *u, cumod_gen *g, cumod_waiter *w, uint64_t *handle,
               cumod_rep **out, cumod_status *st)
{
    cumod_rep *r;

    *out = NULL;
    if (!u->replicas_on) {
        *handle = cumod__gen_handle(g);
        return CUMOD_RESOLVE_READY;
    }
    r = cumod__idmap_get(&u->reps, rep_key(g));
    if (r != NULL && r->mine != NULL) {
        r->last_use_ms = uv_now(&u->f->loop);
        *handle = cumod__gen_handle(r->mine);
        *out = r;
        return CUMOD_RESOLVE_READY;
    }
    if (r == NULL) {
        if ((r = calloc(1, sizeof(*r))) == NULL ||
            cumod__idmap_set(&u->reps, rep_key(g), r) != CUMOD_OK) {
            free(r);
            cumod__status_set(st, CUMOD_ENOMEM, "out of memory");
            return CUMOD_RESOLVE_REFUSED;
        }
        r->u = u;
        r->g = g;
        cumod__list_init(&r->waiters);
        cumod__gen_replica_hold(g);
        r->last_use_ms = uv_now(&u->f->loop);
        if (rep_load(r, st) != 0) {
            rep_free(r);
            return CUMOD_RESOLVE_REFUSED;
        }
    }
    if (w == NULL)
        return CUMOD_RESOLVE_PARKED;
    cumod__list_append(&r->waiters, &w->link);
    return CUMOD_RESOLVE_PARKED;
}

void
cumod__rep_hold(cumod_rep *r)
{
    if (r != NULL)
        r->inflight++;
}

static void
rep_on_unloaded(void *arg, const cumod_chan_hdr *hdr, const void *payload,
                size_t len)
{
    (void)hdr;
    (void)payload;
    (void)len;
    rep_free(arg);
}

/* Whether r still serves: its generation is the module's current one,
 * and it was used within --idle-unload (pinned modules always serve). */
static int
rep_serves(const cumod_rep *r)
{
    const cumod_unit *u = r->u;
    uint32_t idle_s = u->f->cfg->idle_unload_s;
    if (!cumod__gen_is_current(r->g))
        return 0;
    if (idle_s == 0 || cumod__gen_pinned(r->g))
        return 1;
    return uv_now(&u->f->loop) - r->last_use_ms < (uint64_t)idle_s * 1000;
}

static void
rep_maybe_unload(cumod_rep *r)
{
    if (r->inflight > 0 || r->loading || r->unloading || rep_serves(r))
        return;
    if (r->mine == NULL) {
        rep_free(r);
        return;
    }
    cumod_chan_unload un = {.handle = cumod__gen_handle(r->mine)};
    r->unloading = 1;
    cumod__fdirect_unloading(r->u, un.handle);
    if (cumod__xc_call(r->u->xc, CUMOD_CHAN_UNLOAD, &un, sizeof(un), -1,
                       rep_on_unloaded, r) != CUMOD_OK)
        rep_free(r); /* no executor: nothing is loaded any more */
}

void
cumod__rep_release(cumod_rep *r)
{
    if (r == NULL || --r->inflight > 0)
        return;
    if (r->dead)
        free(r);
    else
        rep_maybe_unload(r);
}

const cumod_gen_global *
cumod__rep_global(const cumod_rep *r, const char *name)
{
    return r->mine != NULL ? cumod__gen_global(r->mine, name) : NULL;
}

void
cumod__reps_sweep(cumod_unit *u, const char *module)
{
    cumod_rep **all;
    size_t n = cumod__idmap_count(&u->reps), cur = 0, k = 0;

    /* A pinned module is resident in every serving executor. */
    if (module != NULL && u->replicas_on && cumod__unit_ready(u)) {
        cumod_gen *g = cumod__catalog_current(u->f->cat, module);
        if (g != NULL && cumod__gen_pinned(g)) {
            cumod_status st;
            uint64_t h;
            cumod_rep *r;
            (void)cumod__rep_get(u, g, NULL, &h, &r, &st);
        }
    }
    if (n == 0 || (all = malloc(n * sizeof(*all))) == NULL)
        return;
    for (cumod_rep *r; (r = cumod__idmap_next(&u->reps, &cur, NULL));)
        all[k++] = r;
    for (size_t i = 0; i < k; i++) {
        cumod_rep *r = all[i];
        int stale = !cumod__gen_is_current(r->g);
        const char *name = cumod__gen_module(r->g);
        char mod[129];
        cumod_status st;
        cumod_gen *g;

        snprintf(mod, sizeof(mod), "%s", name);
        rep_maybe_unload(r); /* may free r */
        /* Where a module's generation changed, its new one is loaded here
         * too before a launch needs it. */
        if (stale && cumod__unit_ready(u) &&
            (module == NULL || strcmp(module, mod) == 0) &&
            (g = cumod__catalog_current(u->f->cat, mod)) != NULL) {
            uint64_t h;
            cumod_rep *nr;
            (void)cumod__rep_get(u, g, NULL, &h, &nr, &st);
        }
    }
    free(all);
}

void
cumod__reps_pinned(cumod_unit *u)
{
    const cumod_config *cfg = u->f->cfg;
    for (int i = 0; i < cfg->npins; i++) {
        cumod_status st;
        cumod_gen *g = cumod__catalog_current(u->f->cat, cfg->pins[i]);
        uint64_t h;
        cumod_rep *r;
        if (g != NULL)
            (void)cumod__rep_get(u, g, NULL, &h, &r, &st);
    }
}

void
cumod__reps_lost(cumod_unit *u, cumod_err code, const char *msg)
{
    size_t n = cumod__idmap_count(&u->reps), cur = 0, k = 0;
    cumod_rep **all;
    cumod_status st;

    if (n == 0)
        return;
    if ((all = malloc(n * sizeof(*all))) == NULL) {
        CUMOD_LOGE("CUMOD-NOMEM", "replicas of domain %s leak", u->domain);
        cumod__idmap_fini(&u->reps);
        cumod__idmap_init(&u->reps);
        return;
    }
    cumod__status_set(&st, code, "%s", msg);
    /* Out of the table first: a waiter's answer may release another. */
    for (cumod_rep *r; (r = cumod__idmap_next(&u->reps, &cur, NULL));)
        all[k++] = r;
    cumod__idmap_fini(&u->reps);
    cumod__idmap_init(&u->reps);
    for (size_t i = 0; i < k; i++)
        all[i]->dead = 1;
    for (size_t i = 0; i < k; i++)
        rep_answer(all[i], &st);
    for (size_t i = 0; i < k; i++) {
        cumod_rep *r = all[i];
        cumod__gen_replica_release(r->g);
        cumod__gen_replica_free(r->mine);
        r->mine = NULL;
        if (r->inflight == 0)
            free(r);
    }
    free(all);
}

uint32_t
cumod__reps_count(const cumod_unit *u)
{
    return (uint32_t)cumod__idmap_count(&u->reps);
}

void
cumod__reps_swap(cumod_unit *a, cumod_unit *b)
{
    cumod_idmap t = a->reps;
    a->reps = b->reps;
    b->reps = t;
    size_t cur = 0;
    for (cumod_rep *r; (r = cumod__idmap_next(&a->reps, &cur, NULL));)
        r->u = a;
    cur = 0;
    for (cumod_rep *r; (r = cumod__idmap_next(&b->reps, &cur, NULL));)
        r->u = b;
}

void
cumod__reps_touch(cumod_unit *u, uint64_t handle)
{
    size_t cur = 0;
    for (cumod_rep *r; (r = cumod__idmap_next(&u->reps, &cur, NULL)) != NULL;)
        if (r->mine != NULL && cumod__gen_handle(r->mine) == handle) {
            r->last_use_ms = uv_now(&u->f->loop);
            return;
        }
}
