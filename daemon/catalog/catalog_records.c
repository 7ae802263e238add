/* SPDX-License-Identifier: MIT */
/*
 * The catalog's records: the table of modules by name, a module's record
 * from its first file to its end (made, found, reported, freed), the stat
 * kept of each of its files, and the JIT options a load of it takes.
 * Calls nothing that starts work: reads are catalog_read.c's, loads and
 * unloads residency.c's. Loop thread only.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog_internal.h"
#include "cumod/errors.h"
#include "common/log.h"

static const char *const cat_state_names[] = {
    [CUMOD_MOD_AVAILABLE] = "available",
    [CUMOD_MOD_RESIDENT] = "resident",
    [CUMOD_MOD_FAILED] = "failed",
    [CUMOD_MOD_REMOVED] = "removed",
};

const char *
cumod__mod_state_name(cumod_mod_state s)
{
    return cat_state_names[s];
}

static size_t
cat_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (size_t)h;
}

cumod_module *
cumod__mod_find(cumod_catalog *cat, const char *name)
{
    cumod_module *m = cat->table[cat_hash(name) % cat->nbuckets];
    while (m != NULL && strcmp(m->name, name) != 0)
        m = m->hnext;
    return m;
}

static void
cat_grow(cumod_catalog *cat)
{
    size_t n = cat->nbuckets * 4;
    cumod_module **t = calloc(n, sizeof(*t));
    if (t == NULL)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < cat->nbuckets; i++) {
        cumod_module *m = cat->table[i];
        while (m != NULL) {
            cumod_module *next = m->hnext;
            size_t b = cat_hash(m->name) % n;
            m->hnext = t[b];
            t[b] = m;
            m = next;
        }
    }
    free(cat->table);
    cat->table = t;
    cat->nbuckets = n;
}

cumod_module *
cumod__mod_get(cumod_catalog *cat, const char *name)
{
    cumod_module *m = cumod__mod_find(cat, name);
    if (m != NULL)
        return m;
    if ((m = calloc(1, sizeof(*m))) == NULL) {
        CUMOD_LOGE("CUMOD-NOMEM", "out of memory adding module %s", name);
        return NULL;
    }
    m->cat = cat;
    m->cur_image.fd = m->good_image.fd = m->compiled.fd = -1;
    m->sidecar_jit = m->load_jit = m->failed_jit =
        (cumod_jit_opts)CUMOD_JIT_OPTS_UNSET;
    cumod__list_init(&m->waiters);
    cumod__list_init(&m->retiring);
    cumod__list_node_init(&m->read_link);
    snprintf(m->name, sizeof(m->name), "%s", name);
    m->state = CUMOD_MOD_AVAILABLE;
    if (cat->count + 1 > cat->nbuckets)
        cat_grow(cat);
    size_t b = cat_hash(name) % cat->nbuckets;
    m->hnext = cat->table[b];
    cat->table[b] = m;
    cat->count++;
    return m;
}

static void
cat_module_free(cumod_module *m)
{
    cumod__mod_drop_gens(m);
    cumod__kept_fini(&m->cur_image);
    cumod__kept_fini(&m->good_image);
    free(m->quarantine_reason);
    free(m->error);
    free(m->jit_log);
    free(m->compile_log);
    free(m->compile_note);
    cumod__kept_fini(&m->compiled);
    free(m->compiled_with);
    cumod__globals_fini(m);
    cumod__module_desc_fini(m);
    for (uint32_t i = 0; i < m->nksets; i++)
        free(m->ksets[i].fn);
    free(m->ksets);
    free(m);
}

static void
cat_module_unlink_free(cumod_module *m)
{
    cumod_catalog *cat = m->cat;
    cumod_module **pp = &cat->table[cat_hash(m->name) % cat->nbuckets];
    while (*pp != NULL && *pp != m)
        pp = &(*pp)->hnext;
    if (*pp == m) {
        *pp = m->hnext;
        cat->count--;
    }
    cat_module_free(m);
}

void
cumod__mod_maybe_free(cumod_module *m)
{
    if (cumod__mod_preferred(m) >= 0 || m->current != NULL ||
        !cumod__list_empty(&m->retiring) || m->op != CUMOD_OP_IDLE ||
        !cumod__list_empty(&m->waiters) || m->pinned)
        return;
    CUMOD_LOGI("CUMOD-MODULE-GONE", "%s: removed from the catalog", m->name);
    cat_module_unlink_free(m);
}

void
cumod__mod_event(cumod_module *m, Cumod__EventKind kind, uint64_t gen,
                 uint64_t old_gen, const char *sha, const char *old_sha,
                 const char *detail)
{
    cumod_catalog *cat = m->cat;
    if (cat->ops.event == NULL)
        return;
    cumod_catalog_event ev = {.kind = kind,
                              .module = m->name,
                              .generation = gen,
                              .old_generation = old_gen,
                              .sha256 = sha && sha[0] ? sha : NULL,
                              .old_sha256 =
                                  old_sha && old_sha[0] ? old_sha : NULL,
                              .detail = detail};
    cat->ops.event(cat->ops.arg, &ev);
}

void
cumod__mod_set_error(cumod_module *m, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    free(m->error);
    m->error = NULL;
    if (fmt == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    m->error = strdup(buf);
}

int
cumod__mod_preferred(const cumod_module *m)
{
    for (int k = 0; k < CUMOD_IMAGE_KINDS; k++)
        if (m->files[k].present)
            return k;
    return -1;
}

void
cumod__file_set_stat(cumod_file *f, const struct stat *st)
{
    f->stat_valid = 1;
    f->dev = st->st_dev;
    f->ino = st->st_ino;
    f->size = st->st_size;
    f->mtime_ns =
        (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
    f->ctime_ns =
        (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
}

int
cumod__file_same_stat(const cumod_file *f, const struct stat *st)
{
    cumod_file tmp = *f;
    cumod__file_set_stat(&tmp, st);
    return f->stat_valid && tmp.dev == f->dev && tmp.ino == f->ino &&
           tmp.size == f->size && tmp.mtime_ns == f->mtime_ns &&
           tmp.ctime_ns == f->ctime_ns;
}

void
cumod__mod_jit_for(const cumod_module *m, cumod_image_kind kind,
                   const cumod_jit_opts *sidecar, cumod_jit_opts *out,
                   char *from, size_t fromlen)
{
    const cumod_config *cfg = m->cat->cfg;
    cumod_jit_opts layer[4], mod = CUMOD_JIT_OPTS_UNSET;
    static const char *const names[4] = {"configuration", "[module]",
                                         "NAME.ptx.opts", "cumodctl load"};
    char labels[4][160];

    *out = (cumod_jit_opts)CUMOD_JIT_OPTS_UNSET;
    if (from != NULL && fromlen > 0)
        from[0] = '\0';
    if (kind == CUMOD_IMAGE_CUBIN)
        return; /* no JIT: the options would change nothing */
    cumod__modopt_for(cfg->mod_opts, cfg->nmod_opts, m->name, &mod, NULL, 0,
                      NULL);
    layer[0] = cfg->jit;
    layer[1] = mod;
    layer[2] = *sidecar;
    layer[3] = m->load_jit;
    snprintf(labels[0], sizeof(labels[0]), "%s", names[0]);
    snprintf(labels[1], sizeof(labels[1]), "[module %s]", m->name);
    snprintf(labels[2], sizeof(labels[2]), "%s.ptx.opts", m->name);
    snprintf(labels[3], sizeof(labels[3]), "%s", names[3]);
    const char *src[4] = {NULL, NULL, NULL, NULL}; /* per field */
    for (int l = 0; l < 4; l++) {
        const cumod_jit_opts *j = &layer[l];
        if (j->opt_level >= 0)
            out->opt_level = j->opt_level, src[0] = labels[l];
        if (j->max_registers >= 0)
            out->max_registers = j->max_registers, src[1] = labels[l];
        if (j->line_info >= 0)
            out->line_info = j->line_info, src[2] = labels[l];
        if (j->fast_compile >= 0)
            out->fast_compile = j->fast_compile, src[3] = labels[l];
    }
    if (from == NULL || fromlen == 0)
        return;
    static const char *const fields[4] = {"opt-level", "max-registers",
                                          "line-info", "fast-compile"};
    const int32_t vals[4] = {out->opt_level, out->max_registers, out->line_info,
                             out->fast_compile};
    size_t at = 0;
    for (int i = 0; i < 4 && at < fromlen; i++)
        if (vals[i] >= 0)
            at += (size_t)snprintf(from + at, fromlen - at, "%s%s %d (%s)",
                                   at ? ", " : "", fields[i], vals[i], src[i]);
    if (at == 0)
        snprintf(from, fromlen, "none (the driver's defaults)");
}

/* Forgets every loaded generation of m, without unloading: the context
 * that held them is gone (or going). Returns whether one was current. */
int
cumod__mod_drop_gens(cumod_module *m)
{
    int had = m->current != NULL;
    if (m->current != NULL) {
        cumod__list_prepend(&m->retiring, &m->current->link);
        m->current = NULL;
    }
    /* One still held (by work or replicas of other executors, which the
     * death of this one did not answer) stays, lost, until released. */
    CUMOD_LIST_FOREACH_SAFE(&m->retiring, n)
    {
        cumod_gen *g = CUMOD_CONTAINER_OF(n, cumod_gen, link);
        g->lost = 1;
        if (g->inflight > 0 || g->replicas > 0)
            continue;
        cumod__list_remove(&g->link);
        cumod__gen_free(g);
    }
    return had;
}

void
cumod__cat_free_all(cumod_catalog *cat)
{
    for (size_t b = 0; b < cat->nbuckets; b++) {
        cumod_module *m = cat->table[b];
        while (m != NULL) {
            cumod_module *next = m->hnext;
            cat_module_free(m);
            m = next;
        }
    }
    cumod__compilers_fini(&cat->compilers);
    free(cat->table);
    free(cat);
}

void
cumod__kept_fini(cumod_kept_image *k)
{
    if (k->fd >= 0)
        close(k->fd);
    k->fd = -1;
}

void
cumod__gen_free(cumod_gen *g)
{
    if (g == NULL)
        return;
    for (uint32_t i = 0; i < g->nkernels; i++)
        cumod__kernel_fini(&g->kernels[i]);
    free(g->kernels);
    cumod__gen_globals_free(g);
    cumod__kept_fini(&g->image);
    free(g);
}
