/* SPDX-License-Identifier: MIT */
/*
 * Residency: loading generations into the executor, retiring old ones once
 * their launches complete, and the budget (resident bytes and modules, the
 * idle timeout) with least-recently-used eviction.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "catalog_internal.h"
#include "cumod/errors.h"
#include "common/log.h"

typedef struct res_load {
    cumod_module *m;
    cumod_load_done_cb done; /* the starter's, at the end */
    uint64_t generation;
    cumod_image_kind kind;
    char sha256[65];
    uint64_t size;
    int first;    /* not resident before: counts against the budget now */
    int rollback; /* the image is the module's kept good one */
    cumod_kept_image kept; /* the image's bytes, kept if the load works */
    cumod_jit_opts jit;    /* the JIT options it is loaded with */
    char jit_from[256];
    uint64_t globals_version; /* of the kept writes the load carried */
    uint64_t load_ns;
    cumod_gen *gen; /* loaded, waiting for the kept writes made meanwhile */
} res_load;

/* The load worked: its image becomes the module's current one; the one
 * it replaces becomes the last good one when it never faulted. */
static void
res_keep_image(cumod_module *m, res_load *ld)
{
    if (ld->kept.fd < 0)
        return;
    if (!ld->rollback && m->cur_image.fd >= 0 &&
        strcmp(m->cur_image.sha256, ld->kept.sha256) != 0 &&
        strcmp(m->cur_image.sha256, m->quarantine_sha) != 0) {
        cumod__kept_fini(&m->good_image);
        m->good_image = m->cur_image;
        m->cur_image.fd = -1;
    }
    cumod__kept_fini(&m->cur_image);
    m->cur_image = ld->kept;
    ld->kept.fd = -1;
}

/* Parses the executor's kernel table (channel.h) into g. 0 or -1. */
static int
res_parse_table(cumod_gen *g, const uint8_t *p, size_t len, uint32_t n)
{
    const uint8_t *end = p + len;

    if ((g->kernels = calloc(n ? n : 1, sizeof(cumod_kernel))) == NULL)
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        cumod_kernel *k = &g->kernels[i];
        uint16_t nlen, np;
        if (end - p < 2)
            return -1;
        memcpy(&nlen, p, 2);
        p += 2;
        if (end - p < nlen + 2)
            return -1;
        if ((k->name = strndup((const char *)p, nlen)) == NULL)
            return -1;
        p += nlen;
        memcpy(&np, p, 2);
        p += 2;
        g->nkernels++;
        k->index = i;
        k->nparams = np;
        if ((size_t)(end - p) < (size_t)np * 8)
            return -1;
        k->offsets = calloc(np ? np : 1, sizeof(uint32_t));
        k->sizes = calloc(np ? np : 1, sizeof(uint32_t));
        if (k->offsets == NULL || k->sizes == NULL)
            return -1;
        for (uint16_t j = 0; j < np; j++) {
            memcpy(&k->offsets[j], p, 4);
            memcpy(&k->sizes[j], p + 4, 4);
            p += 8;
        }
        cumod_chan_kattr ka;
        if ((size_t)(end - p) < sizeof(ka))
            return -1;
        memcpy(&ka, p, sizeof(ka));
        p += sizeof(ka);
        k->static_shared = ka.static_shared;
        k->registers = ka.registers;
        k->max_threads = ka.max_threads;
        memcpy(k->cluster, ka.cluster, sizeof(k->cluster));
        k->max_dyn_shared = ka.max_dyn_shared;
        if (cumod__kernel_describe_types(k) != 0)
            return -1;
    }
    return cumod__globals_parse(g, p, (size_t)(end - p));
}

static void res_globals_catch_up(res_load *ld, cumod_gen *g);
static void res_install(res_load *ld, cumod_gen *g);
static void res_load_failed(res_load *ld, int status, const char *why);

/* The load failed (why says how): the generation before it, if any, goes
 * on serving, and the bytes are not tried again. */
static void
res_load_failed(res_load *ld, int status, const char *why)
{
    cumod_module *m = ld->m;
    cumod_catalog *cat = m->cat;

    (void)status;
    cumod__mod_set_error(m, "%s", why);
    memcpy(m->failed_sha, ld->sha256, sizeof(m->failed_sha));
    m->failed_jit = ld->jit;
    cumod__kept_fini(&ld->kept);
    if (ld->first) {
        cat->resident--;
        cat->resident_bytes -= ld->size;
    }
    cumod__mod_event(m, CUMOD__EVENT_KIND__EVENT_LOAD_FAILED, ld->generation,
                     m->current ? m->current->generation : 0, ld->sha256,
                     m->current ? m->current->sha256 : NULL, why);
    if (m->current != NULL) {
        CUMOD_LOGE("CUMOD-RELOAD-FAIL",
                   "%s: generation %llu keeps serving; generation %llu "
                   "(%s, sha256 %.12s) failed to load: %s",
                   m->name, (unsigned long long)m->current->generation,
                   (unsigned long long)ld->generation,
                   cumod__image_kind_name(ld->kind), ld->sha256, why);
    } else {
        m->state = CUMOD_MOD_FAILED;
        CUMOD_LOGE("CUMOD-LOAD-FAIL", "%s (%s, sha256 %.12s): %s", m->name,
                   cumod__image_kind_name(ld->kind), ld->sha256, why);
    }
    cumod_load_done_cb done = ld->done;
    free(ld);
    done(m);
}

/* The executor was lost while loading (status: ECTXLOST, or ESHUTDOWN
 * when stopping), before it answered or answering that its context is
 * lost (met: what it met, or ""): not the image's fault. Its bytes are
 * not recorded as failed; its waiters hear why and retry, and the next
 * use loads them in the new executor. */
static void
res_load_lost(res_load *ld, int status, const char *met)
{
    cumod_module *m = ld->m;
    cumod_catalog *cat = m->cat;
    char why[900];

    cumod__kept_fini(&ld->kept);
    if (ld->first) {
        cat->resident--;
        cat->resident_bytes -= ld->size;
    }
    m->want_load = m->pinned || !cumod__list_empty(&m->waiters);
    if (met[0] != '\0')
        snprintf(why, sizeof(why),
                 "the CUDA executor was lost while loading (%.600s); retry",
                 met);
    else
        snprintf(why, sizeof(why),
                 "the CUDA executor was lost while loading; retry");
    cumod__mod_fail_waiters(m, status, why);
    free(ld);
}

static void
res_on_loaded(void *arg, const cumod_chan_hdr *hdr, const void *payload,
              size_t len)
{
    res_load *ld = arg;
    cumod_module *m = ld->m;
    cumod_catalog *cat = m->cat;
    cumod_chan_loaded res;
    const char *p = payload;

    int alone = cat->loads == 1; /* the only load in the executor */
    int answered = payload != NULL && len >= sizeof(res);
    m->op = CUMOD_OP_IDLE;
    cat->loads--;
    /* The executor died (or we are stopping) before answering, or it
     * answered that its context is lost: a kernel of another module
     * faulted meanwhile, and every CUDA call fails after that (a load
     * that met it first says so before the executor exits). Neither is
     * the image's fault: its bytes are not recorded as failed, and the
     * next use loads them in the new executor. */
    if (!answered || hdr->status == CUMOD_ECTXLOST) {
        /* Died unanswered while it was the only load: weighed when the
         * death is known (catalog_exec_lost), against these bytes. */
        if (!answered && hdr->status == CUMOD_ECTXLOST && alone) {
            m->load_died = 1;
            memcpy(m->load_died_sha, ld->sha256, sizeof(m->load_died_sha));
        }
        /* what the executor met, where it said (the fault's code) */
        char why[768] = "";
        if (answered) {
            memcpy(&res, p, sizeof(res));
            if (res.msg_len > 0 && sizeof(res) + (uint64_t)res.msg_len <= len)
                snprintf(why, sizeof(why), "%.*s",
                         (int)(res.msg_len < 600 ? res.msg_len : 600),
                         p + sizeof(res));
        }
        res_load_lost(ld, hdr->status, why);
        return;
    }
    memcpy(&res, p, sizeof(res));
    if ((uint64_t)sizeof(res) + res.msg_len + res.log_len + res.table_len >
        len) {
        res.msg_len = res.log_len = res.table_len = 0;
        if (hdr->status == CUMOD_OK)
            ((cumod_chan_hdr *)hdr)->status = CUMOD_EPROTO;
    }
    const char *msg = p + sizeof(res);
    const char *log = msg + res.msg_len;
    const uint8_t *table = (const uint8_t *)log + res.log_len;
    free(m->jit_log);
    m->jit_log = res.log_len ? strndup(log, res.log_len) : NULL;
    m->want_load = 0;

    cumod_gen *g = NULL;
    if (hdr->status == CUMOD_OK) {
        if ((g = calloc(1, sizeof(*g))) != NULL) {
            cumod__list_node_init(&g->link);
            g->image.fd = -1;
        }
        if (g == NULL ||
            res_parse_table(g, table, res.table_len, res.nkernels) != 0) {
            CUMOD_LOGE("CUMOD-INTERNAL", "%s: unreadable kernel table",
                       m->name);
            cumod__gen_free(g);
            g = NULL;
            /* Loaded but unusable: unload it again. */
            cumod_chan_unload u = {.handle = res.handle};
            (void)cat->ops.call(cat->ops.arg, CUMOD_CHAN_UNLOAD, &u, sizeof(u),
                                -1, NULL, NULL);
        }
    }
    if (g == NULL) {
        char buf[1024];
        snprintf(buf, sizeof(buf), "%.*s", (int)res.msg_len, msg);
        if (buf[0] == '\0')
            snprintf(buf, sizeof(buf), "load failed: %s",
                     hdr->status == CUMOD_OK
                         ? "the executor's kernel table is unreadable"
                         : cumod_strerror(hdr->status));
        res_load_failed(ld, hdr->status, buf);
        return;
    }

    ld->load_ns = res.load_ns;
    if (cat->ops.timed != NULL)
        cat->ops.timed(cat->ops.arg, 0, res.load_ns);
    g->mod = m;
    g->generation = ld->generation;
    g->handle = res.handle;
    g->kind = ld->kind;
    g->size = ld->size;
    g->jit = ld->jit;
    memcpy(g->jit_from, ld->jit_from, sizeof(g->jit_from));
    memcpy(g->sha256, ld->sha256, sizeof(g->sha256));
    /* For the domains' executors that load it too (front/units/replica.c). */
    g->image = ld->kept;
    g->image.fd =
        ld->kept.fd >= 0 ? fcntl(ld->kept.fd, F_DUPFD_CLOEXEC, 0) : -1;
    if (ld->globals_version != m->globals_version) {
        /* Clients wrote to globals while it loaded: those writes go to it
         * too before it serves. */
        res_globals_catch_up(ld, g);
        return;
    }
    res_install(ld, g);
}

/* The generation is loaded and has every kept write: it takes new work
 * from now on. */
static void
res_install(res_load *ld, cumod_gen *g)
{
    cumod_module *m = ld->m;
    cumod_catalog *cat = m->cat;

    cumod_gen *old = m->current;
    if (old != NULL) {
        /* The swap: new work takes g from here on; old finishes what it
         * has and is unloaded after its last launch. */
        m->current = NULL;
        cumod__list_prepend(&m->retiring, &old->link);
        cat->resident_bytes += g->size;
        cat->resident_bytes -= old->size;
        cumod__res_reap(m);
    }
    m->current = g;
    m->generation = g->generation;
    m->state = CUMOD_MOD_RESIDENT;
    m->load_deaths = 0;
    res_keep_image(m, ld);
    m->load_us = ld->load_ns / 1000;
    m->failed_sha[0] = '\0';
    cumod__mod_set_error(m, NULL);
    m->last_use_ms = uv_now(cat->loop);
    m->last_use_unix_ms = cumod__wall_ms();
    if (ld->rollback)
        CUMOD_LOGN("CUMOD-ROLLBACK",
                   "%s: generation %llu serves the last good bytes (sha256 "
                   "%.12s) in place of the quarantined ones (sha256 %.12s)",
                   m->name, (unsigned long long)g->generation, g->sha256,
                   m->quarantine_sha);
    else if (old != NULL)
        CUMOD_LOGN("CUMOD-RELOAD",
                   "%s: generation %llu (%s, sha256 %.12s, %u kernels, "
                   "loaded in %llu us) replaces generation %llu",
                   m->name, (unsigned long long)g->generation,
                   cumod__image_kind_name(g->kind), g->sha256, g->nkernels,
                   (unsigned long long)m->load_us,
                   (unsigned long long)(old ? old->generation : 0));
    else
        CUMOD_LOGI("CUMOD-LOAD",
                   "%s: generation %llu loaded (%s, sha256 %.12s, %u "
                   "kernels, %llu us)",
                   m->name, (unsigned long long)g->generation,
                   cumod__image_kind_name(g->kind), g->sha256, g->nkernels,
                   (unsigned long long)m->load_us);
    cumod__mod_event(m,
                     old != NULL ? CUMOD__EVENT_KIND__EVENT_RELOADED
                                 : CUMOD__EVENT_KIND__EVENT_LOADED,
                     g->generation, old ? old->generation : 0, g->sha256,
                     old ? old->sha256 : NULL,
                     ld->rollback ? "the last good bytes, in place of "
                                    "quarantined ones"
                                  : NULL);
    cumod_load_done_cb done = ld->done;
    free(ld);
    done(m);
}

static void res_on_loaded(void *arg, const cumod_chan_hdr *hdr,
                          const void *payload, size_t len);

static void
res_on_globals(void *arg, const cumod_chan_hdr *hdr, const void *payload,
               size_t len)
{
    res_load *ld = arg;
    cumod_gen *g = ld->gen;
    cumod_module *m = ld->m;

    ld->gen = NULL;
    if (hdr->status == CUMOD_OK && ld->globals_version != m->globals_version) {
        res_globals_catch_up(ld, g); /* more writes meanwhile */
        return;
    }
    if (hdr->status == CUMOD_OK) {
        m->op = CUMOD_OP_IDLE;
        res_install(ld, g);
        return;
    }
    if (hdr->status == CUMOD_ECTXLOST || hdr->status == CUMOD_ESHUTDOWN) {
        /* The executor went (or its context did) while it applied them:
         * nothing to unload there, and not the bytes' fault. */
        cumod__gen_free(g);
        m->op = CUMOD_OP_IDLE;
        char met[700] = "";
        if (payload != NULL)
            snprintf(met, sizeof(met), "%.*s", (int)(len < 600 ? len : 600),
                     (const char *)payload);
        res_load_lost(ld, hdr->status, met);
        return;
    }
    /* The writes could not be applied: it does not serve. */
    cumod_chan_unload u = {.handle = g->handle};
    if (payload != NULL)
        (void)m->cat->ops.call(m->cat->ops.arg, CUMOD_CHAN_UNLOAD, &u,
                               sizeof(u), -1, NULL, NULL);
    cumod__gen_free(g);
    m->op = CUMOD_OP_IDLE;
    char buf[1100];
    snprintf(buf, sizeof(buf), "%.*s", (int)len,
             payload ? (const char *)payload : "");
    res_load_failed(ld, hdr->status,
                    buf[0] ? buf
                           : "the writes kept for its globals could not be "
                             "applied");
}

static void
res_globals_catch_up(res_load *ld, cumod_gen *g)
{
    cumod_module *m = ld->m;
    cumod_catalog *cat = m->cat;
    uint8_t *spec = NULL;
    size_t slen = 0;
    cumod_chan_unload h = {.handle = g->handle};

    ld->gen = g;
    ld->globals_version = m->globals_version;
    m->op = CUMOD_OP_LOADING;
    char *buf = NULL;
    if (cumod__globals_spec(m, &spec, &slen) != CUMOD_OK ||
        (buf = malloc(sizeof(h) + slen)) == NULL) {
        free(spec);
        cumod_chan_hdr fail = {.status = CUMOD_ENOMEM};
        res_on_globals(ld, &fail, NULL, 0);
        return;
    }
    memcpy(buf, &h, sizeof(h));
    memcpy(buf + sizeof(h), spec, slen);
    free(spec);
    cumod_err rv = cat->ops.call(cat->ops.arg, CUMOD_CHAN_GLOBALS, buf,
                                 sizeof(h) + slen, -1, res_on_globals, ld);
    free(buf);
    if (rv != CUMOD_OK) {
        cumod_chan_hdr fail = {.status = rv};
        res_on_globals(ld, &fail, NULL, 0);
    }
}

/* Sends the image in memfd fd (len bytes, kind, sha) to the executor as
 * generation N+1. fd stays the caller's. */
static void
res_load_fd(cumod_module *m, int fd, uint64_t len, cumod_image_kind kind,
            const char *sha, int rollback, const cumod_jit_opts *jit,
            const char *jit_from, cumod_load_done_cb done)
{
    cumod_catalog *cat = m->cat;
    cumod_chan_load req = {0};
    char msg[512];
    res_load *ld;
    cumod_err rv;

    if (!cat->ops.ready(cat->ops.arg)) {
        /* Loaded when the executor is back (catalog_exec_ready). */
        m->want_load = 1;
        m->rollback |= rollback;
        snprintf(msg, sizeof(msg), "the CUDA executor is restarting: retry");
        if (cat->ops.unready != NULL) /* why, where the owner knows */
            cat->ops.unready(cat->ops.arg, msg, sizeof(msg));
        cumod__mod_fail_waiters(m, CUMOD_ECTXLOST, msg);
        return;
    }
    if ((ld = calloc(1, sizeof(*ld))) == NULL) {
        cumod__mod_fail_waiters(m, CUMOD_ENOMEM, "out of memory");
        return;
    }
    ld->m = m;
    ld->done = done;
    ld->generation = m->generation + 1;
    ld->kind = kind;
    ld->size = len;
    ld->rollback = rollback;
    memcpy(ld->sha256, sha, sizeof(ld->sha256));
    ld->jit = *jit;
    snprintf(ld->jit_from, sizeof(ld->jit_from), "%s", jit_from);
    /* Kept, should these bytes have to be loaded again without the file. */
    ld->kept.fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    ld->kept.len = len;
    ld->kept.kind = kind;
    memcpy(ld->kept.sha256, sha, sizeof(ld->kept.sha256));
    ld->kept.jit = *jit;
    snprintf(ld->kept.jit_from, sizeof(ld->kept.jit_from), "%s", jit_from);
    if (m->current == NULL) {
        if (cumod__res_make_room(cat, m, len, msg, sizeof(msg)) != CUMOD_OK) {
            cumod__mod_set_error(m, "%s", msg);
            CUMOD_LOGW("CUMOD-BUDGET", "%s", msg);
            m->want_load = 0;
            cumod__kept_fini(&ld->kept);
            free(ld);
            cumod__mod_fail_waiters(m, CUMOD_EBUSY, msg);
            return;
        }
        /* Counted now, so concurrent loads cannot overshoot the budget. */
        ld->first = 1;
        cat->resident++;
        cat->resident_bytes += len;
    }
    req.generation = ld->generation;
    req.kind = (uint32_t)kind;
    req.jit = *jit;
    req.len = len;
    snprintf(req.name, sizeof(req.name), "%s", m->name);
    /* The globals to look up, and the writes kept for them. */
    uint8_t *spec = NULL;
    size_t slen = 0;
    char *payload = NULL;
    rv = cumod__globals_spec(m, &spec, &slen);
    if (rv == CUMOD_OK && (payload = malloc(sizeof(req) + slen)) == NULL)
        rv = CUMOD_ENOMEM;
    if (rv == CUMOD_OK) {
        req.spec_len = (uint32_t)slen;
        memcpy(payload, &req, sizeof(req));
        memcpy(payload + sizeof(req), spec, slen);
        ld->globals_version = m->globals_version;
        rv = cat->ops.call(cat->ops.arg, CUMOD_CHAN_LOAD, payload,
                           sizeof(req) + slen, fd, res_on_loaded, ld);
    }
    free(spec);
    free(payload);
    if (rv != CUMOD_OK) {
        if (ld->first) {
            cat->resident--;
            cat->resident_bytes -= ld->size;
        }
        cumod__kept_fini(&ld->kept);
        free(ld);
        m->want_load = 1;
        cumod__mod_fail_waiters(m, rv, "cannot reach the CUDA executor");
        return;
    }
    m->op = CUMOD_OP_LOADING;
    cat->loads++;
}

void
cumod__res_load(cumod_module *m, cumod_image *img, cumod_load_done_cb done)
{
    res_load_fd(m, img->fd, img->len, img->kind, img->sha256_hex, 0,
                &m->next_jit, m->next_jit_from, done);
    cumod__image_fini(img); /* the executor has its own descriptor now */
}

void
cumod__res_load_kept(cumod_module *m, const cumod_kept_image *k,
                     cumod_load_done_cb done)
{
    res_load_fd(m, k->fd, k->len, k->kind, k->sha256, 1, &k->jit, k->jit_from,
                done);
}

static void
res_on_unloaded(void *arg, const cumod_chan_hdr *hdr, const void *payload,
                size_t len)
{
    cumod_gen *g = arg;
    cumod_module *m = g->mod;

    (void)payload;
    (void)len;
    if (hdr->status != CUMOD_OK && hdr->status != CUMOD_ECTXLOST &&
        hdr->status != CUMOD_ESHUTDOWN)
        CUMOD_LOGW("CUMOD-UNLOAD", "%s generation %llu: unload failed: %s",
                   m->name, (unsigned long long)g->generation,
                   cumod_strerror(hdr->status));
    cumod__list_remove(&g->link);
    CUMOD_LOGD("CUMOD-UNLOAD", "%s: generation %llu unloaded", m->name,
               (unsigned long long)g->generation);
    cumod__gen_free(g);
    cumod__mod_maybe_free(m);
}

void
cumod__res_reap(cumod_module *m)
{
    cumod_catalog *cat = m->cat;

    CUMOD_LIST_FOREACH_SAFE(&m->retiring, n)
    {
        cumod_gen *g = CUMOD_CONTAINER_OF(n, cumod_gen, link);
        if (g->inflight > 0 || g->replicas > 0 || g->unloading)
            continue;
        if (g->lost) { /* its executor is gone: nothing to unload */
            cumod__list_remove(&g->link);
            cumod__gen_free(g);
            continue;
        }
        cumod_chan_unload u = {.handle = g->handle};
        g->unloading = 1;
        if (cat->ops.call(cat->ops.arg, CUMOD_CHAN_UNLOAD, &u, sizeof(u), -1,
                          res_on_unloaded, g) != CUMOD_OK) {
            /* No executor: nothing is loaded anywhere any more. */
            cumod__list_remove(&g->link);
            cumod__gen_free(g);
        }
    }
}

void
cumod__res_retire_current(cumod_module *m)
{
    cumod_catalog *cat = m->cat;
    cumod_gen *g = m->current;

    if (g == NULL)
        return;
    m->current = NULL;
    cat->resident--;
    cat->resident_bytes -= g->size;
    cumod__list_prepend(&m->retiring, &g->link);
    if (m->state == CUMOD_MOD_RESIDENT)
        m->state = cumod__mod_preferred(m) >= 0 ? CUMOD_MOD_AVAILABLE
                                                : CUMOD_MOD_REMOVED;
    /* Out of service: its kept bytes go too (the file has them), unless a
     * quarantine needs the good ones to roll back to at the next load. */
    cumod__kept_fini(&m->cur_image);
    if (m->quarantine_sha[0] == '\0')
        cumod__kept_fini(&m->good_image);
    cumod__res_reap(m);
}

static int
res_evictable(const cumod_module *m, const cumod_module *except)
{
    return m != except && m->current != NULL && !m->pinned &&
           m->current->inflight == 0 && m->op == CUMOD_OP_IDLE &&
           cumod__list_empty(&m->waiters);
}

cumod_err
cumod__res_make_room(cumod_catalog *cat, cumod_module *except, uint64_t bytes,
                     char *msg, size_t msglen)
{
    const cumod_config *cfg = cat->cfg;

    if (cfg->max_resident_bytes && bytes > cfg->max_resident_bytes) {
        snprintf(msg, msglen,
                 "%s: its image (%llu bytes) is larger than "
                 "--max-resident-bytes (%llu)",
                 except->name, (unsigned long long)bytes,
                 (unsigned long long)cfg->max_resident_bytes);
        return CUMOD_EBUSY;
    }
    while ((cfg->max_resident_modules &&
            cat->resident + 1 > cfg->max_resident_modules) ||
           (cfg->max_resident_bytes &&
            cat->resident_bytes + bytes > cfg->max_resident_bytes)) {
        cumod_module *lru = NULL;
        for (size_t b = 0; b < cat->nbuckets; b++)
            for (cumod_module *m = cat->table[b]; m; m = m->hnext)
                if (res_evictable(m, except) &&
                    (lru == NULL || m->last_use_ms < lru->last_use_ms))
                    lru = m;
        if (lru == NULL) {
            snprintf(msg, msglen,
                     "cannot load %s: %u modules (%llu bytes) are resident, "
                     "the limit is %u modules / %llu bytes, and none can be "
                     "unloaded (pinned, busy or in use)",
                     except->name, cat->resident,
                     (unsigned long long)cat->resident_bytes,
                     cfg->max_resident_modules,
                     (unsigned long long)cfg->max_resident_bytes);
            return CUMOD_EBUSY;
        }
        CUMOD_LOGI("CUMOD-EVICT",
                   "%s: unloaded (least recently used) to make room for %s",
                   lru->name, except->name);
        char why[300];
        snprintf(why, sizeof(why), "to make room for %s", except->name);
        cumod__mod_event(lru, CUMOD__EVENT_KIND__EVENT_EVICTED,
                         lru->current->generation, 0, lru->current->sha256,
                         NULL, why);
        cumod__res_retire_current(lru);
    }
    return CUMOD_OK;
}

static void
res_on_idle_timer(uv_timer_t *h)
{
    cumod_catalog *cat = h->data;
    uint64_t now = uv_now(cat->loop);
    uint64_t idle_ms = (uint64_t)cat->cfg->idle_unload_s * 1000;

    for (size_t b = 0; b < cat->nbuckets; b++)
        for (cumod_module *m = cat->table[b]; m; m = m->hnext)
            if (res_evictable(m, NULL) && now - m->last_use_ms >= idle_ms) {
                CUMOD_LOGI("CUMOD-IDLE-UNLOAD", "%s: unused for %u s, unloaded",
                           m->name, cat->cfg->idle_unload_s);
                cumod__mod_event(m, CUMOD__EVENT_KIND__EVENT_EVICTED,
                                 m->current->generation, 0, m->current->sha256,
                                 NULL, "idle");
                cumod__res_retire_current(m);
            }
}

void
cumod__res_start_idle_timer(cumod_catalog *cat)
{
    uint64_t idle_ms = (uint64_t)cat->cfg->idle_unload_s * 1000;
    if (idle_ms == 0) {
        uv_timer_stop(&cat->idle_timer); /* a reload may turn it off */
        return;
    }
    /* Checked four times per period: an idle module goes within 1.25x. */
    uint64_t every = idle_ms / 4 < 250 ? 250 : idle_ms / 4;
    uv_timer_start(&cat->idle_timer, res_on_idle_timer, every, every);
}

/* --- Replicas: the same generation loaded in another executor ------------ */

void
cumod__gen_replica_hold(cumod_gen *g)
{
    g->replicas++;
}

void
cumod__gen_replica_release(cumod_gen *g)
{
    if (--g->replicas == 0 && g->mod->current != g)
        cumod__res_reap(g->mod);
}

int
cumod__gen_is_current(const cumod_gen *g)
{
    return !g->lost && g->mod->current == g;
}

int
cumod__gen_pinned(const cumod_gen *g)
{
    return g->mod->pinned;
}

cumod_err
cumod__gen_load_msg(const cumod_gen *g, char **payload, size_t *len, int *fd)
{
    const cumod_module *m = g->mod;
    cumod_chan_load req = {0};
    uint8_t *spec = NULL;
    size_t slen = 0;
    cumod_err rv;

    *payload = NULL;
    if (g->image.fd < 0)
        return CUMOD_ENOENT;
    req.generation = g->generation;
    req.kind = (uint32_t)g->kind;
    req.jit = g->jit;
    req.len = g->image.len;
    snprintf(req.name, sizeof(req.name), "%s", m->name);
    if ((rv = cumod__globals_spec(m, &spec, &slen)) != CUMOD_OK)
        return rv;
    if ((*payload = malloc(sizeof(req) + slen)) == NULL) {
        free(spec);
        return CUMOD_ENOMEM;
    }
    req.spec_len = (uint32_t)slen;
    memcpy(*payload, &req, sizeof(req));
    memcpy(*payload + sizeof(req), spec, slen);
    free(spec);
    *len = sizeof(req) + slen;
    *fd = g->image.fd;
    return CUMOD_OK;
}

cumod_gen *
cumod__gen_replica_parse(const cumod_gen *like, int status, const void *payload,
                         size_t len, cumod_status *st)
{
    cumod_chan_loaded res;
    const char *p = payload;
    cumod_gen *g;

    if (payload == NULL || len < sizeof(res)) {
        cumod__status_set(st, status != CUMOD_OK ? status : CUMOD_EPROTO,
                          "the executor was lost while loading it");
        return NULL;
    }
    memcpy(&res, p, sizeof(res));
    if ((uint64_t)sizeof(res) + res.msg_len + res.log_len + res.table_len >
        len) {
        cumod__status_set(st, CUMOD_EPROTO, "an unreadable LOAD reply");
        return NULL;
    }
    if (status != CUMOD_OK) {
        cumod__status_set(st, status, "%.*s", (int)res.msg_len,
                          p + sizeof(res));
        return NULL;
    }
    const uint8_t *table =
        (const uint8_t *)p + sizeof(res) + res.msg_len + res.log_len;
    if ((g = calloc(1, sizeof(*g))) == NULL) {
        cumod__status_set(st, CUMOD_ENOMEM, "out of memory");
        return NULL;
    }
    cumod__list_node_init(&g->link);
    g->image.fd = -1;
    g->handle = res.handle;
    g->generation = like->generation;
    if (res_parse_table(g, table, res.table_len, res.nkernels) != 0 ||
        g->nkernels != like->nkernels) {
        cumod__gen_free(g);
        cumod__status_set(st, CUMOD_EPROTO,
                          "its kernel table differs from the catalog's");
        return NULL;
    }
    /* Launches index kernels by the catalog's table: the same bytes must
     * have given the same one. */
    for (uint32_t i = 0; i < g->nkernels; i++)
        if (strcmp(g->kernels[i].name, like->kernels[i].name) != 0 ||
            g->kernels[i].nparams != like->kernels[i].nparams) {
            cumod__gen_free(g);
            cumod__status_set(st, CUMOD_EPROTO,
                              "its kernel table differs from the catalog's");
            return NULL;
        }
    return g;
}

void
cumod__gen_replica_free(cumod_gen *g)
{
    cumod__gen_free(g);
}
