/* SPDX-License-Identifier: MIT */
/*
 * What requests ask of the catalog (find, load, pin, unload, reload,
 * unquarantine, a fault's blame, and a launch's resolve); a request that
 * must wait for a module parks a waiter (catalog_waiters.c tells it).
 * Nothing here answers a request; the front does, with what these return.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog_internal.h"
#include "cumod/errors.h"
#include "common/log.h"

static void
req_park(cumod_module *m, cumod_waiter *w, cumod_wait_op op)
{
    w->op = op;
    cumod__list_node_init(&w->link);
    cumod__list_append(&m->waiters, &w->link);
}

cumod_module *
cumod__catalog_find(cumod_catalog *cat, const char *name, cumod_status *st)
{
    char stem[129];
    size_t n = name ? strlen(name) : 0;
    cumod_module *m;

    if (n == 0 || n > 128 ||
        strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     "abcdefghijklmnopqrstuvwxyz"
                     "0123456789_.-") != n) {
        cumod__status_set(st, CUMOD_EINVAL,
                          "'%.200s' is not a module name (1 to 128 of "
                          "A-Z a-z 0-9 _ . -)",
                          name ? name : "");
        return NULL;
    }
    snprintf(stem, sizeof(stem), "%s", name);
    m = cumod__mod_find(cat, stem);
    if (m == NULL ||
        (m->state == CUMOD_MOD_REMOVED && m->current == NULL && !m->pinned)) {
        cumod__status_set(st, CUMOD_ENOENT,
                          "no module named '%s' in %s (cumodctl ls lists "
                          "them)",
                          stem, cat->dir);
        return NULL;
    }
    return m;
}

int
cumod__catalog_load(cumod_catalog *cat, cumod_module *m, cumod_waiter *w)
{
    m->last_use_ms = uv_now(cat->loop);
    if (m->current != NULL && m->op == CUMOD_OP_IDLE && !m->dirty)
        return 0;
    m->want_load = 1;
    req_park(m, w, CUMOD_WAIT_LOAD);
    cumod__mod_refresh(m);
    return 1;
}

int
cumod__catalog_load_jit(cumod_catalog *cat, cumod_module *m,
                        const cumod_jit_opts *jit, cumod_waiter *w)
{
#define REQ_JIT_TAKE(field)                                                    \
    do {                                                                       \
        if (jit->field == -2)                                                  \
            m->load_jit.field = -1;                                            \
        else if (jit->field >= 0)                                              \
            m->load_jit.field = jit->field;                                    \
    } while (0)
    REQ_JIT_TAKE(opt_level);
    REQ_JIT_TAKE(max_registers);
    REQ_JIT_TAKE(line_info);
    REQ_JIT_TAKE(fast_compile);
#undef REQ_JIT_TAKE
    if (m->current != NULL) {
        cumod_jit_opts eff;
        char from[256];
        cumod__mod_jit_for(m, m->current->kind, &m->sidecar_jit, &eff, from,
                           sizeof(from));
        if (!cumod__jit_equal(&eff, &m->current->jit)) {
            /* New options for the same bytes: a new generation. */
            m->force_read = 1;
            m->want_load = 1;
            m->last_use_ms = uv_now(cat->loop);
            req_park(m, w, CUMOD_WAIT_RELOAD);
            cumod__mod_refresh(m);
            return 1;
        }
    }
    return cumod__catalog_load(cat, m, w);
}

int
cumod__catalog_pin(cumod_catalog *cat, cumod_module *m, cumod_waiter *w)
{
    if (!m->pinned)
        CUMOD_LOGI("CUMOD-PIN", "%s: pinned", m->name);
    m->pinned = 1;
    return cumod__catalog_load(cat, m, w);
}

void
cumod__catalog_unpin(cumod_module *m)
{
    m->pinned = 0;
}

cumod_err
cumod__catalog_unload(cumod_catalog *cat, cumod_module *m, char *note,
                      size_t notelen, cumod_status *st)
{
    (void)cat;
    if (m->pinned)
        return cumod__status_set(
            st, CUMOD_EPERM, "%s is pinned: unpin it first (cumodctl unpin %s)",
            m->name, m->name);
    if (m->op == CUMOD_OP_LOADING)
        return cumod__status_set(
            st, CUMOD_EBUSY, "%s is being loaded right now: retry", m->name);
    if (m->current == NULL) {
        cumod__msgf(note, notelen, "not resident");
        return CUMOD_OK;
    }
    uint32_t inflight = m->current->inflight;
    m->want_load = 0;
    cumod__mod_event(m, CUMOD__EVENT_KIND__EVENT_UNLOADED,
                     m->current->generation, 0, m->current->sha256, NULL,
                     "asked");
    cumod__res_retire_current(m);
    if (inflight > 0)
        cumod__msgf(note, notelen,
                    "unloads when its %u launches in flight complete",
                    inflight);
    else
        cumod__msgf(note, notelen, "unloaded");
    CUMOD_LOGI("CUMOD-UNLOAD", "%s: %s (asked)", m->name, note);
    return CUMOD_OK;
}

void
cumod__catalog_reload(cumod_catalog *cat, cumod_module *m, cumod_waiter *w)
{
    (void)cat;
    m->force_read = 1;
    /* A module whose load failed is retried with the same bytes: that is
     * what an operator asks for after fixing the cause elsewhere. */
    if (m->failed_sha[0] != '\0' && m->current == NULL)
        m->want_load = 1;
    m->failed_sha[0] = '\0';
    req_park(m, w, CUMOD_WAIT_RELOAD);
    cumod__mod_refresh(m);
}

cumod_resolve
cumod__catalog_resolve(cumod_catalog *cat, const char *module,
                       uint64_t generation, cumod_waiter *w, cumod_gen **out,
                       cumod_status *st)
{
    cumod_module *m = cumod__mod_find(cat, module);
    cumod_gen *g;

    if (m == NULL || m->state == CUMOD_MOD_REMOVED) {
        cumod__status_set(st, CUMOD_ENOENT, "no module named '%s' in %s",
                          module, cat->dir);
        return CUMOD_RESOLVE_REFUSED;
    }
    m->last_use_ms = uv_now(cat->loop);
    if (cumod__mod_quarantined(m)) {
        cumod__mod_quarantine_status(m, st);
        return CUMOD_RESOLVE_REFUSED;
    }
    if (m->current == NULL) {
        if (generation != 0 && cumod__list_empty(&m->retiring)) {
            cumod__status_set(st, CUMOD_ENOENT,
                              "generation %llu of %s is not loaded",
                              (unsigned long long)generation, module);
            return CUMOD_RESOLVE_REFUSED;
        }
        /* Lazy residency: load it; the waiter resolves again after. */
        m->want_load = 1;
        req_park(m, w, CUMOD_WAIT_LAUNCH);
        cumod__mod_refresh(m);
        return CUMOD_RESOLVE_PARKED;
    }
    g = m->current;
    if (generation != 0 && generation != g->generation) {
        g = NULL;
        CUMOD_LIST_FOREACH(&m->retiring, n)
        {
            cumod_gen *r = CUMOD_CONTAINER_OF(n, cumod_gen, link);
            if (r->generation == generation && !r->lost) {
                g = r;
                break;
            }
        }
        if (g == NULL) {
            cumod__status_set(st, CUMOD_ENOENT,
                              "generation %llu of %s is not loaded (the "
                              "current one is %llu)",
                              (unsigned long long)generation, module,
                              (unsigned long long)m->current->generation);
            return CUMOD_RESOLVE_REFUSED;
        }
    }
    *out = g;
    return CUMOD_RESOLVE_READY;
}

cumod_gen *
cumod__catalog_current(cumod_catalog *cat, const char *module)
{
    cumod_module *m = cumod__mod_find(cat, module);
    return m != NULL && !cumod__mod_quarantined(m) ? m->current : NULL;
}

const cumod_kernel *
cumod__gen_kernel(const cumod_gen *g, const char *fn, cumod_status *st)
{
    char names[512] = "";
    size_t n = 0;

    const cumod_kernel *by_display = NULL;
    int displays = 0;
    for (uint32_t i = 0; i < g->nkernels; i++) {
        if (strcmp(g->kernels[i].name, fn) == 0)
            return &g->kernels[i];
        /* A C++ kernel may be named as people read it: "axpy<float>". */
        if (g->kernels[i].display != NULL &&
            strcmp(g->kernels[i].display, fn) == 0) {
            by_display = &g->kernels[i];
            displays++;
        }
    }
    if (displays == 1)
        return by_display;
    if (displays > 1) {
        cumod__status_set(
            st, CUMOD_EINVAL,
            "module %s has %d kernels named '%.200s' (overloads): "
            "name one by its symbol (cumodctl show %s)",
            g->mod->name, displays, fn, g->mod->name);
        return NULL;
    }
    for (uint32_t i = 0; i < g->nkernels && n < sizeof(names) - 1; i++)
        n += (size_t)snprintf(names + n, sizeof(names) - n, "%s%s",
                              i ? ", " : "", g->kernels[i].name);
    cumod__status_set(st, CUMOD_ENOENT,
                      "module %s (generation %llu) has no kernel '%.200s'; "
                      "it has: %s",
                      g->mod->name, (unsigned long long)g->generation, fn,
                      names);
    return NULL;
}

const char *
cumod__gen_module(const cumod_gen *g)
{
    return g->mod->name;
}

const char *
cumod__gen_sha256(const cumod_gen *g)
{
    return g->sha256;
}

uint64_t
cumod__gen_number(const cumod_gen *g)
{
    return g->generation;
}

uint64_t
cumod__gen_handle(const cumod_gen *g)
{
    return g->handle;
}

void
cumod__gen_hold(cumod_gen *g)
{
    g->inflight++;
}

void
cumod__gen_release(cumod_gen *g)
{
    if (--g->inflight == 0 && g->mod->current != g)
        cumod__res_reap(g->mod);
}

int
cumod__catalog_blame(cumod_catalog *cat, cumod_gen *g, const char *reason,
                     int hang)
{
    cumod_module *m = g->mod;

    if (strcmp(m->fault_sha, g->sha256) != 0) {
        /* Faults count per bytes: other bytes start again from 0. */
        memcpy(m->fault_sha, g->sha256, sizeof(m->fault_sha));
        m->faults = 0;
    }
    m->faults++;
    if (strcmp(m->quarantine_sha, g->sha256) == 0)
        return 1;
    if (!hang && m->faults < cat->cfg->quarantine_after) {
        CUMOD_LOGW("CUMOD-QUARANTINE",
                   "%s: generation %llu caused fault %u of the %u that "
                   "quarantine it (%s)",
                   m->name, (unsigned long long)g->generation, m->faults,
                   cat->cfg->quarantine_after, reason);
        return 0;
    }
    cumod__mod_quarantine(m, g->sha256, reason);
    return 1;
}

cumod_err
cumod__catalog_unquarantine(cumod_catalog *cat, cumod_module *m, char *note,
                            size_t notelen)
{
    (void)cat;
    if (m->quarantine_sha[0] == '\0') {
        cumod__msgf(note, notelen, "not quarantined");
        return CUMOD_OK;
    }
    CUMOD_LOGN("CUMOD-QUARANTINE",
               "%s: quarantine of sha256 %.12s lifted (asked)", m->name,
               m->quarantine_sha);
    cumod__mod_unquarantine(m);
    m->fault_sha[0] = '\0';
    /* The file's bytes serve again: read it, and load it where the module
     * is resident (it may be the rolled-back generation) or pinned. */
    m->force_read = 1;
    m->failed_sha[0] = '\0';
    if (m->current != NULL || m->pinned)
        m->want_load = 1;
    cumod__mod_refresh(m);
    cumod__msgf(note, notelen, "quarantine lifted");
    return CUMOD_OK;
}

uint32_t
cumod__gen_kernel_count(const cumod_gen *g)
{
    return g != NULL ? g->nkernels : 0;
}

const cumod_kernel *
cumod__gen_kernel_at(const cumod_gen *g, uint32_t i)
{
    return g != NULL && i < g->nkernels ? &g->kernels[i] : NULL;
}

void
cumod__catalog_touch(cumod_catalog *cat, const char *name)
{
    cumod_module *m = cat != NULL ? cumod__mod_find(cat, name) : NULL;
    if (m != NULL)
        m->last_use_ms = uv_now(cat->loop);
}
