/* SPDX-License-Identifier: MIT */
/*
 * The catalog as a whole: its opening and stop, the executor's arrival and
 * loss, configuration changes (pins, options) and its counters. Records
 * are catalog_records.c's, reads catalog_read.c's, the folder
 * catalog_scan.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "catalog_internal.h"
#include "compile/compile.h"
#include "compile/sandbox.h"
#include "cumod/errors.h"
#include "common/log.h"

/* The NVRTC worker's program (this one) and the compile cache's folder. */
static void
cat_compile_setup(cumod_catalog *cat, const cumod_config *cfg)
{
    size_t len = sizeof(cat->exe);
    if (cfg->executor_path != NULL)
        snprintf(cat->exe, sizeof(cat->exe), "%s", cfg->executor_path);
    else if (uv_exepath(cat->exe, &len) != 0)
        snprintf(cat->exe, sizeof(cat->exe), "/proc/self/exe");
    const char *c = cfg->compile_cache, *env;
    char sandbox[512];
    cumod__sandbox_describe(cfg->compile_memory_max, sandbox, sizeof(sandbox));
    CUMOD_LOGI("CUMOD-COMPILE-SANDBOX", "NAME.cu compiles run confined: %s",
               sandbox);
    cat->cache_dir[0] = '\0';
    if (c != NULL && strcmp(c, "none") == 0)
        return;
    if (c != NULL)
        snprintf(cat->cache_dir, sizeof(cat->cache_dir), "%s", c);
    else if ((env = getenv("CACHE_DIRECTORY")) != NULL && env[0] == '/')
        snprintf(cat->cache_dir, sizeof(cat->cache_dir), "%.*s/nvrtc",
                 (int)strcspn(env, ":"), env); /* systemd's CacheDirectory= */
    else if ((env = getenv("XDG_CACHE_HOME")) != NULL && env[0] == '/')
        snprintf(cat->cache_dir, sizeof(cat->cache_dir), "%s/cumod/nvrtc", env);
    else if ((env = getenv("HOME")) != NULL && env[0] == '/')
        snprintf(cat->cache_dir, sizeof(cat->cache_dir),
                 "%s/.cache/cumod/nvrtc", env);
}

cumod_err
cumod__catalog_open(uv_loop_t *loop, const cumod_config *cfg,
                    const cumod_catalog_ops *ops, cumod_catalog **out,
                    cumod_status *st)
{
    cumod_catalog *cat = calloc(1, sizeof(*cat));
    cumod_err rv;

    if (cat == NULL || (cat->table = calloc(64, sizeof(*cat->table))) == NULL) {
        free(cat);
        return cumod__status_set(st, CUMOD_ENOMEM, "out of memory");
    }
    cat->nbuckets = 64;
    cumod__list_init(&cat->read_queue);
    cumod__list_init(&cat->compile_wait);
    cumod__compilers_init(&cat->compilers);
    cat_compile_setup(cat, cfg);
    cat->cfg = cfg;
    cat->ops = *ops;
    cat->loop = loop;
    snprintf(cat->dir, sizeof(cat->dir), "%s", cfg->kernel_dir);
    rv = cumod__watch_start(cat->loop, cat->dir, cumod__cat_on_watch, cat,
                            &cat->watch, st->msg, sizeof(st->msg));
    if (rv != CUMOD_OK) {
        cumod__compilers_fini(&cat->compilers);
        free(cat->table);
        free(cat);
        st->code = rv;
        return rv;
    }
    for (int i = 0; i < cfg->npins; i++) {
        cumod_module *m = cumod__mod_get(cat, cfg->pins[i]);
        if (m != NULL)
            m->pinned = m->want_load = 1;
    }
    uv_timer_init(cat->loop, &cat->idle_timer);
    cat->idle_timer.data = cat;
    cat->handles_open = 1;
    *out = cat;
    return CUMOD_OK;
}

void
cumod__catalog_exec_ready(cumod_catalog *cat, unsigned sm_major,
                          unsigned sm_minor)
{
    if (cat == NULL || cat->stopping)
        return;
    cat->sm_major = sm_major;
    cat->sm_minor = sm_minor;
    if (!cat->scanned) {
        /* The first scan waits for the device, so that every header check
         * knows the SM the images must run on. */
        cat->scanned = 1;
        cumod__cat_scan(cat);
        for (int i = 0; i < cat->cfg->npins; i++) {
            cumod_module *m = cumod__mod_find(cat, cat->cfg->pins[i]);
            if (m == NULL || cumod__mod_preferred(m) < 0)
                CUMOD_LOGW("CUMOD-PIN",
                           "--pin %s: no such module in %s yet; it loads when "
                           "its file appears",
                           cat->cfg->pins[i], cat->dir);
        }
        cumod__res_start_idle_timer(cat);
        cumod__cat_maybe_scanned(cat);
        return;
    }
    /* A new context: load again what must be resident, what was, and what
     * rolls back to its last good generation. */
    for (size_t b = 0; b < cat->nbuckets; b++)
        for (cumod_module *m = cat->table[b]; m; m = m->hnext)
            if (m->pinned || m->was_resident || m->rollback ||
                !cumod__list_empty(&m->waiters)) {
                m->was_resident = 0;
                m->want_load = 1;
                m->force_read = 1; /* the read decides: file, or rollback */
                cumod__mod_refresh(m);
            }
}

void
cumod__catalog_compile_stats(const cumod_catalog *cat, uint64_t *compiled,
                             uint64_t *cached, uint64_t *failed)
{
    *compiled = cat->compiles;
    *cached = cat->compile_hits;
    *failed = cat->compile_failures;
}

void
cumod__catalog_options_changed(cumod_catalog *cat)
{
    if (cat == NULL || cat->stopping)
        return;
    for (size_t b = 0; b < cat->nbuckets; b++)
        for (cumod_module *m = cat->table[b]; m; m = m->hnext)
            for (int k = 0; k < CUMOD_IMAGE_KINDS; k++)
                m->files[k].stat_valid = 0;
}

void
cumod__catalog_pins_changed(cumod_catalog *cat, const char *const *old,
                            int nold)
{
    if (cat == NULL || cat->stopping)
        return;
    for (int i = 0; i < nold; i++) {
        int still = 0;
        for (int k = 0; k < cat->cfg->npins; k++)
            still |= strcmp(old[i], cat->cfg->pins[k]) == 0;
        cumod_module *m = still ? NULL : cumod__mod_find(cat, old[i]);
        if (m != NULL) {
            CUMOD_LOGN("CUMOD-PIN",
                       "%s: no longer pinned by the "
                       "configuration",
                       m->name);
            cumod__catalog_unpin(m);
        }
    }
    for (int k = 0; k < cat->cfg->npins; k++) {
        int was = 0;
        for (int i = 0; i < nold; i++)
            was |= strcmp(old[i], cat->cfg->pins[k]) == 0;
        if (was)
            continue;
        cumod_module *m = cumod__mod_get(cat, cat->cfg->pins[k]);
        if (m == NULL)
            continue;
        CUMOD_LOGN("CUMOD-PIN", "%s: pinned by the configuration", m->name);
        m->pinned = m->want_load = 1;
        if (cat->scanned)
            cumod__mod_refresh(m);
    }
    cumod__res_start_idle_timer(cat);
}

void
cumod__catalog_exec_lost(cumod_catalog *cat, int explained)
{
    if (cat == NULL)
        return;
    /* The context and every module in it are gone; launches in flight were
     * answered already (their executor calls failed first). */
    for (size_t b = 0; b < cat->nbuckets; b++)
        for (cumod_module *m = cat->table[b]; m; m = m->hnext) {
            if (m->load_died && !explained) {
                if (++m->load_deaths >= 2 &&
                    strcmp(m->quarantine_sha, m->load_died_sha) != 0) {
                    char why[160];
                    snprintf(why, sizeof(why),
                             "the executor died %u times while loading it, "
                             "with nothing else to blame",
                             m->load_deaths);
                    cumod__mod_quarantine(m, m->load_died_sha, why);
                }
            }
            m->load_died = 0;
            /* What was resident loads again on the new executor. */
            m->was_resident = m->current != NULL || m->rollback;
            if (cumod__mod_drop_gens(m) && m->state == CUMOD_MOD_RESIDENT)
                m->state = CUMOD_MOD_AVAILABLE;
        }
    cat->resident = 0;
    cat->resident_bytes = 0;
}

void
cumod__catalog_stats(const cumod_catalog *cat, uint32_t *modules,
                     uint32_t *resident, uint64_t *resident_bytes,
                     int *degraded)
{
    *modules = (uint32_t)cat->count;
    *resident = cat->resident;
    *resident_bytes = cat->resident_bytes;
    *degraded = cumod__watch_degraded(cat->watch);
}

static void
cat_on_idle_timer_close(uv_handle_t *h)
{
    cumod_catalog *cat = h->data;
    cat->handles_open = 0;
    if (cat->reads_in_flight == 0)
        cumod__cat_free_all(cat);
}

void
cumod__catalog_stop(cumod_catalog *cat)
{
    if (cat == NULL || cat->stopping)
        return;
    cat->stopping = 1;
    if (cat->compiles_running > 0) /* their reads end now, not at the */
        cumod__compile_cancel_all(&cat->compilers); /* time limit */
    for (size_t b = 0; b < cat->nbuckets; b++)
        for (cumod_module *m = cat->table[b]; m; m = m->hnext)
            cumod__mod_fail_waiters(m, CUMOD_ESHUTDOWN,
                                    "cumodd is shutting down");
    cumod__watch_stop(cat->watch);
    cat->watch = NULL;
    uv_timer_stop(&cat->idle_timer);
    uv_close((uv_handle_t *)&cat->idle_timer, cat_on_idle_timer_close);
}
