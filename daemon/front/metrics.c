/* SPDX-License-Identifier: MIT */
/*
 * The metrics' counters (metrics.h): what the loop counts as it goes
 * (launches, device time, refusals, latency, bytes, module events,
 * faults) and the store of their per-module and per-kernel series. The
 * rendering is metrics_render.c's, the serving metrics_http.c's.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "front/metrics_impl.h"

static uint64_t
m_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h ? h : 1;
}

static mod_counts *
m_mod(cumod_metrics *m, const char *name)
{
    uint64_t k = m_hash(name);
    mod_counts *c;
    for (;; k++) { /* linear probing on a collision of names */
        c = cumod__idmap_get(&m->mods, k);
        if (c == NULL)
            break;
        if (strcmp(c->name, name) == 0)
            return c;
    }
    if ((c = calloc(1, sizeof(*c))) == NULL ||
        (c->name = strdup(name)) == NULL ||
        cumod__idmap_set(&m->mods, k, c) != CUMOD_OK) {
        if (c != NULL)
            free(c->name);
        free(c);
        return NULL;
    }
    return c;
}

/* The device time series of (domain, module, kernel), made on first use;
 * NULL when out of memory. */
static gpu_counts *
m_gpu(cumod_metrics *m, int device, const char *domain, const char *module,
      const char *kernel)
{
    size_t ld = strlen(domain) + 1, lm = strlen(module) + 1;
    size_t lk = strlen(kernel) + 1;
    uint64_t h = (1469598103934665603ull ^ (uint64_t)(unsigned)device) *
                 1099511628211ull;
    const char *parts[3] = {domain, module, kernel};
    for (int i = 0; i < 3; i++)
        for (const char *c = parts[i];; c++) { /* the NULs count too */
            h = (h ^ (unsigned char)*c) * 1099511628211ull;
            if (*c == '\0')
                break;
        }
    gpu_counts *g;
    for (uint64_t k = h ? h : 1;; k++) { /* linear probing, as m_mod */
        g = cumod__idmap_get(&m->gpu, k);
        if (g == NULL) {
            h = k;
            break;
        }
        if (g->device == device && strcmp(g->domain, domain) == 0 &&
            strcmp(g->module, module) == 0 && strcmp(g->kernel, kernel) == 0)
            return g;
    }
    if ((g = calloc(1, sizeof(*g))) == NULL ||
        (g->key = malloc(ld + lm + lk)) == NULL ||
        cumod__idmap_set(&m->gpu, h, g) != CUMOD_OK) {
        if (g != NULL)
            free(g->key);
        free(g);
        return NULL;
    }
    memcpy(g->key, domain, ld);
    memcpy(g->key + ld, module, lm);
    memcpy(g->key + ld + lm, kernel, lk);
    g->device = device;
    g->domain = g->key;
    g->module = g->key + ld;
    g->kernel = g->key + ld + lm;
    return g;
}

/* Folds the per-kernel series of modules that are not resident into their
 * module's series (kernel ""): per-kernel cardinality stays bounded by
 * what is loaded, and every sum over the series still only grows. */
void
cumod__metrics_fold(cumod_metrics *m)
{
    cumod_front *f = m->f;
    size_t cur = 0;
    uint64_t id;
    gpu_counts *g;
    while ((g = cumod__idmap_next(&m->gpu, &cur, &id)) != NULL) {
        if (g->module[0] == '\0' || g->kernel[0] == '\0')
            continue;
        cumod_status st;
        cumod_module *mod =
            f->cat != NULL ? cumod__catalog_find(f->cat, g->module, &st) : NULL;
        if (mod != NULL && cumod__module_resident(mod))
            continue;
        gpu_counts *to = m_gpu(m, g->device, g->domain, g->module, "");
        if (to == NULL)
            continue; /* out of memory: kept as it is */
        to->ns += g->ns;
        (void)cumod__idmap_remove(&m->gpu, id);
        free(g->key);
        free(g);
        cur = 0; /* the map changed under the cursor: from the start */
    }
}

/* Forgets every series of module name: its files are gone, and a long
 * running daemon's series must not grow with every module it ever saw. */
static void
m_forget(cumod_metrics *m, const char *name)
{
    size_t cur = 0;
    uint64_t id;
    gpu_counts *g;
    while ((g = cumod__idmap_next(&m->gpu, &cur, &id)) != NULL) {
        if (strcmp(g->module, name) != 0)
            continue;
        (void)cumod__idmap_remove(&m->gpu, id);
        free(g->key);
        free(g);
        cur = 0; /* the map changed under the cursor: from the start */
    }
    /* Last: name may be the mod_counts' own. */
    mod_counts *c;
    cur = 0;
    while ((c = cumod__idmap_next(&m->mods, &cur, &id)) != NULL)
        if (strcmp(c->name, name) == 0) {
            (void)cumod__idmap_remove(&m->mods, id);
            free(c->name);
            free(c);
            break; /* one per name */
        }
}

/* Forgets the series of modules the catalog does not know any more (a
 * launch that completed after its module's removal made them again). */
void
cumod__metrics_prune(cumod_metrics *m)
{
    cumod_front *f = m->f;
    size_t cur = 0;
    mod_counts *c;
    if (f->cat == NULL || !f->scanned)
        return;
    while ((c = cumod__idmap_next(&m->mods, &cur, NULL)) != NULL) {
        cumod_status st;
        if (cumod__catalog_find(f->cat, c->name, &st) != NULL)
            continue;
        m_forget(m, c->name);
        cur = 0;
    }
}

/* --- Counting (loop thread) ---------------------------------------------- */

void
cumod__metrics_gpu(cumod_front *f, int device, const char *domain,
                   const char *module, const char *kernel, uint64_t ns)
{
    gpu_counts *g;
    if (f->metrics == NULL || ns == 0 ||
        (g = m_gpu(f->metrics, device, domain, module, kernel)) == NULL)
        return;
    g->ns += ns;
}

void
cumod__metrics_event(cumod_front *f, const cumod_catalog_event *ev)
{
    mod_counts *c;
    if (f->metrics != NULL && ev->module != NULL &&
        ev->kind == CUMOD__EVENT_KIND__EVENT_REMOVED) {
        m_forget(f->metrics, ev->module);
        return;
    }
    if (f->metrics == NULL || ev->module == NULL ||
        (c = m_mod(f->metrics, ev->module)) == NULL)
        return;
    switch (ev->kind) {
    case CUMOD__EVENT_KIND__EVENT_LOADED:
        c->loads++;
        break;
    case CUMOD__EVENT_KIND__EVENT_RELOADED:
        c->reloads++;
        break;
    case CUMOD__EVENT_KIND__EVENT_LOAD_FAILED:
        c->load_failures++;
        break;
    case CUMOD__EVENT_KIND__EVENT_QUARANTINED:
        c->quarantines++;
        break;
    case CUMOD__EVENT_KIND__EVENT_EVICTED:
        c->evictions++;
        break;
    default:
        break;
    }
}

void
cumod__metrics_launches(cumod_front *f, const char *module, int ok, uint32_t n)
{
    mod_counts *c;
    if (f->metrics == NULL || (c = m_mod(f->metrics, module)) == NULL)
        return;
    if (ok)
        c->launches_ok += n;
    else
        c->launches_failed += n;
}

void
cumod__metrics_refused(cumod_front *f, cumod_err code, uint32_t n)
{
    cumod_metrics *m = f->metrics;
    size_t i = 0;
    if (m == NULL)
        return;
    m->refused += n;
    while (i + 1 < NREASONS && refusal_reasons[i].code != code)
        i++;
    m->refused_by[i] += n;
}

void
cumod__metrics_control_refused(cumod_front *f)
{
    if (f->metrics != NULL)
        f->metrics->control_refused++;
}

static void
hist_add(hist *h, const double *le, double s)
{
    h->count++;
    h->sum += s;
    for (size_t i = 0; i < NHIST; i++)
        if (s <= le[i])
            h->bucket[i]++;
}

void
cumod__metrics_timed(cumod_front *f, int what, uint64_t ns)
{
    cumod_metrics *m = f->metrics;
    if (m == NULL)
        return;
    if (what == 0)
        hist_add(&m->load, load_le, (double)ns / 1e9);
    else
        hist_add(&m->compile, compile_le, (double)ns / 1e9);
}

void
cumod__metrics_latency(cumod_front *f, uint64_t ns)
{
    cumod_metrics *m = f->metrics;
    if (m == NULL)
        return;
    double s = (double)ns / 1e9;
    m->lat_count++;
    m->lat_sum += s;
    for (size_t i = 0; i < NLAT; i++)
        if (s <= lat_le[i])
            m->lat_bucket[i]++;
}

void
cumod__metrics_direct(cumod_front *f, uint64_t requests, uint64_t count,
                      uint64_t sum_ns, const uint64_t bucket[CUMOD_LAT_BUCKETS])
{
    cumod_metrics *m = f->metrics;
    if (m == NULL)
        return;
    m->requests[1] += requests;
    m->direct_launches += count;
    m->lat_count += count;
    m->lat_sum += (double)sum_ns / 1e9;
    for (size_t i = 0; i < NLAT; i++)
        m->lat_bucket[i] += bucket[i];
}

void
cumod__metrics_bytes(cumod_front *f, int direction, uint64_t n)
{
    if (f->metrics != NULL && direction >= 0 && direction < 3)
        f->metrics->bytes[direction] += n;
}

void
cumod__metrics_request(cumod_front *f, int ring)
{
    if (f->metrics != NULL)
        f->metrics->requests[ring ? 1 : 0]++;
}

void
cumod__metrics_fault(cumod_front *f, int hang)
{
    if (f->metrics == NULL)
        return;
    if (hang)
        f->metrics->hangs++;
    else
        f->metrics->faults++;
}
