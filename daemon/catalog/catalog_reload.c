/* SPDX-License-Identifier: MIT */
/*
 * The reload decision: cumod__mod_refresh starts what a module needs (a
 * read, catalog_read.c; a load; an unload), one operation at a time per
 * module, reads waiting for one of a few slots; a read's end decides
 * whether the bytes read replace the working ones. Anything that arrives
 * during an operation marks the module dirty, and the operation's end looks
 * again. Loop thread only.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "catalog_read.h"
#include "cumod/errors.h"
#include "common/log.h"

static void cat_read_pump(cumod_catalog *cat);

/* A load's end (residency.c): what changed meanwhile is looked at again,
 * else the waiters hear the outcome. */
static void
cat_load_done(cumod_module *m)
{
    if (m->dirty)
        cumod__mod_refresh(m);
    else
        cumod__mod_answer_waiters(m);
}

/* The read's description becomes the module's (what show says before the
 * module is loaded, and the globals a load looks up). */
static void
cat_take_description(cumod_module *m, cumod_read *r)
{
    cumod__module_desc_fini(m);
    if (r->desc_rv != CUMOD_OK) {
        CUMOD_LOGD("CUMOD-DESCRIBE", "%s: %s", m->name, r->desc_msg);
        char from[600];
        snprintf(from, sizeof(from), "%s (not described: %s)", r->fname,
                 r->desc_msg);
        m->desc_from = strdup(from);
        return;
    }
    const cumod_imeta *d = &r->desc;
    char from[300];
    if (d->source == CUMOD_IMETA_FATBIN_CUBIN ||
        d->source == CUMOD_IMETA_FATBIN_PTX)
        snprintf(from, sizeof(from), "%s (its %s entry for sm_%u)", r->fname,
                 d->source == CUMOD_IMETA_FATBIN_CUBIN ? "cubin" : "PTX",
                 d->source_sm);
    else
        snprintf(from, sizeof(from), "%s", r->fname);
    m->desc_from = strdup(from);
    m->desc_kernels = calloc(d->nkernels + 1, sizeof(*m->desc_kernels));
    m->described = calloc(d->nglobals + 1, sizeof(*m->described));
    m->described_size = calloc(d->nglobals + 1, sizeof(*m->described_size));
    m->described_const = calloc(d->nglobals + 1, 1);
    if (m->desc_kernels == NULL || m->described == NULL ||
        m->described_size == NULL || m->described_const == NULL)
        goto nomem;
    for (size_t i = 0; i < d->nkernels; i++) {
        const cumod_kdesc *kd = &d->kernels[i];
        cumod_kernel *k = &m->desc_kernels[m->ndesc_kernels];
        k->index = (uint32_t)i;
        k->nparams = kd->nparams;
        k->static_shared = kd->static_shared;
        k->registers = kd->registers;
        k->max_threads = kd->max_threads > 0 ? (uint32_t)kd->max_threads : 0;
        memcpy(k->cluster, kd->cluster, sizeof(k->cluster));
        k->max_dyn_shared = -1;
        if ((k->name = strdup(kd->name)) == NULL ||
            (k->offsets = calloc(kd->nparams + 1, sizeof(uint32_t))) == NULL ||
            (k->sizes = calloc(kd->nparams + 1, sizeof(uint32_t))) == NULL) {
            cumod__kernel_fini(k);
            goto nomem;
        }
        for (uint32_t j = 0; j < kd->nparams; j++) {
            k->offsets[j] = kd->params[j].offset;
            k->sizes[j] = kd->params[j].size;
        }
        m->ndesc_kernels++;
        if (cumod__kernel_describe_types(k) != 0)
            goto nomem;
    }
    for (size_t i = 0; i < d->nglobals; i++) {
        if ((m->described[i] = strdup(d->globals[i].name)) == NULL)
            goto nomem;
        m->described_size[i] = d->globals[i].size;
        m->described_const[i] = (uint8_t)d->globals[i].constant;
        m->ndescribed++;
    }
    return;
nomem:
    CUMOD_LOGE("CUMOD-NOMEM", "%s: its description is incomplete", m->name);
}

/* The sidecars' stat as the read found them (a rescan compares). */
static void
cat_take_sidecar_stats(cumod_module *m, const cumod_read *r)
{
    for (int k = 0; k < CUMOD_OPTS_KINDS; k++) {
        cumod_file *f = &m->opts_files[k];
        if (k == CUMOD_OPTS_CU && r->kind != CUMOD_IMAGE_CU)
            continue;
        f->present = r->opts_present[k];
        f->stat_valid = 0;
        if (r->opts_present[k])
            cumod__file_set_stat(f, &r->opts_st[k]);
    }
}

/* The read failed: the bytes on disk are unusable (or gone). A resident
 * generation goes on serving; the record says why the file was refused. */
static void
cat_read_failed(cumod_module *m, cumod_read *r)
{
    cumod_file *f = &m->files[r->kind];

    if (r->rv == CUMOD_ENOENT) {
        /* Gone between the event and the read: its removal event follows
         * (or a rescan finds it missing); nothing to report. */
        f->present = 0;
        f->stat_valid = 0;
        cumod__mod_refresh(m);
        return;
    }
    if (r->stat_ok)
        cumod__file_set_stat(f, &r->st);
    cat_take_sidecar_stats(m, r);
    if (r->kind == CUMOD_IMAGE_CU) {
        /* What NVRTC said stays on show, beside the generation serving. */
        free(m->compile_log);
        m->compile_log = r->compile_log;
        r->compile_log = NULL;
        free(m->compile_note);
        m->compile_note = strdup("the last compile failed: see the error");
        m->cat->compile_failures++;
        if (r->compile_ns > 0 && m->cat->ops.timed != NULL)
            m->cat->ops.timed(m->cat->ops.arg, 1, r->compile_ns);
    }
    int again = m->error == NULL || strcmp(m->error, r->msg) != 0;
    cumod__mod_set_error(m, "%s", r->msg);
    m->read_valid = 0;
    m->kind = r->kind;
    m->sha256[0] = '\0';
    m->size = r->stat_ok ? (uint64_t)r->st.st_size : 0;
    if (m->current == NULL)
        m->state = CUMOD_MOD_FAILED;
    if (again) {
        if (m->current != NULL)
            CUMOD_LOGE("CUMOD-RELOAD-FAIL",
                       "%s: generation %llu keeps serving; the new file is "
                       "refused: %s",
                       m->name, (unsigned long long)m->current->generation,
                       r->msg);
        else
            CUMOD_LOGW("CUMOD-IMAGE-BAD", "%s: %s", m->name, r->msg);
        cumod__mod_event(m, CUMOD__EVENT_KIND__EVENT_LOAD_FAILED,
                         m->current ? m->current->generation : 0, 0, NULL, NULL,
                         r->msg);
    }
    m->want_load = m->pinned;
    m->force_read = 0;
    cumod__mod_answer_waiters(m);
}

/* The first scan is done once every read it started has returned: the
 * catalog then knows every module of the folder (ops.scanned, once). */
void
cumod__cat_maybe_scanned(cumod_catalog *cat)
{
    if (!cat->scanned || cat->scan_reported || cat->stopping ||
        cat->reads_in_flight > 0 || !cumod__list_empty(&cat->read_queue) ||
        !cumod__list_empty(&cat->compile_wait))
        return;
    cat->scan_reported = 1;
    if (cat->ops.scanned != NULL)
        cat->ops.scanned(cat->ops.arg);
}

/* The read's slot is free again: a waiting compile may take it. */
static void
cat_read_slot_free(cumod_catalog *cat, cumod_read *r)
{
    r->m->op = CUMOD_OP_IDLE;
    cat->reads_in_flight--;
    if (r->kind == CUMOD_IMAGE_CU) {
        cat->compiles_running--;
        if (!cumod__list_empty(&cat->compile_wait))
            cumod__list_append(&cat->read_queue,
                               cumod__list_pop(&cat->compile_wait));
    }
    cat_read_pump(cat);
}

/* What a compile made is recorded even when the result is dropped (a
 * change came during the read): the work was done, and the read that
 * follows (or a load) takes the image kept here instead of running the
 * worker again for the same source and options. */
static void
cat_take_compiled(cumod_module *m, cumod_read *r)
{
    cumod_catalog *cat = m->cat;

    if ((r->compiled != 1 && r->compiled != 2) || r->rv != CUMOD_OK)
        return;
    if (r->made_with != NULL) {
        cumod__kept_fini(&m->compiled);
        free(m->compiled_with);
        m->compiled_with = r->made_with;
        r->made_with = NULL;
        m->compiled.fd = fcntl(r->img.fd, F_DUPFD_CLOEXEC, 0);
        m->compiled.len = r->img.len;
        m->compiled.kind = r->img.kind;
    }
    free(m->compile_log);
    m->compile_log = r->compile_log;
    r->compile_log = NULL;
    free(m->compile_note);
    m->compile_note = r->compile_note;
    r->compile_note = NULL;
    CUMOD_LOGI("CUMOD-COMPILE", "%s: %s", r->fname,
               m->compile_note ? m->compile_note : "compiled");
    if (cat->ops.timed != NULL)
        cat->ops.timed(cat->ops.arg, 1, r->compile_ns);
    if (r->compiled == 2) {
        m->compile_hits++;
        cat->compile_hits++;
    } else {
        m->compiles++;
        cat->compiles++;
    }
}

/* m's record now says it holds the bytes r read. */
static void
cat_take_identity(cumod_module *m, const cumod_read *r)
{
    m->read_valid = 1;
    m->kind = r->kind;
    memcpy(m->sha256, r->img.sha256_hex, sizeof(m->sha256));
    m->size = r->img.len;
}

/* The reload decision: a read that succeeded either replaces the working
 * bytes (a load, which takes r->img), or changes nothing (the same bytes;
 * quarantined bytes, which may roll back to the last good ones; bytes that
 * failed to load before), or only catalogues them (no load is wanted). */
static void
cat_read_decide(cumod_module *m, cumod_read *r)
{
    if (r->stat_ok)
        cumod__file_set_stat(&m->files[r->kind], &r->st);
    cat_take_sidecar_stats(m, r);
    cat_take_description(m, r);
    int force = m->force_read;
    m->force_read = 0;
    m->sidecar_jit = r->sidecar_jit;
    cumod__mod_jit_for(m, r->img.kind, &r->sidecar_jit, &m->next_jit,
                       m->next_jit_from, sizeof(m->next_jit_from));

    /* Identity is the content hash (and, for what the JIT compiles, its
     * options): the same bytes do nothing. */
    if (m->current != NULL && m->current->kind == r->img.kind &&
        strcmp(m->current->sha256, r->img.sha256_hex) == 0 &&
        cumod__jit_equal(&m->current->jit, &m->next_jit)) {
        cat_take_identity(m, r);
        cumod__mod_set_error(m, NULL);
        m->want_load = 0;
        cumod__mod_answer_waiters(m);
        return;
    }
    int new_bytes = strcmp(m->sha256, r->img.sha256_hex) != 0;
    cat_take_identity(m, r);
    if (new_bytes) /* not a generation yet: beside the one serving */
        cumod__mod_event(m, CUMOD__EVENT_KIND__EVENT_CATALOGUED, 0,
                         m->current ? m->current->generation : 0, m->sha256,
                         m->current ? m->current->sha256 : NULL,
                         cumod__image_kind_name(r->kind));
    if (m->quarantine_sha[0] != '\0' &&
        strcmp(m->quarantine_sha, r->img.sha256_hex) != 0) {
        /* New bytes start clean. */
        CUMOD_LOGN("CUMOD-QUARANTINE",
                   "%s: new bytes (sha256 %.12s) replace the quarantined "
                   "ones: quarantine lifted",
                   m->name, r->img.sha256_hex);
        cumod__mod_unquarantine(m);
    }
    if (m->quarantine_sha[0] != '\0') {
        /* The file holds quarantined bytes: they are not loaded again. The
         * last good generation serves instead, when there is one. */
        cumod__image_fini(&r->img);
        if ((m->current == NULL || m->rollback) &&
            (m->want_load || m->pinned) && m->good_image.fd >= 0 &&
            strcmp(m->good_image.sha256, m->quarantine_sha) != 0) {
            m->rollback = 0;
            cumod__res_load_kept(m, &m->good_image, cat_load_done);
            return;
        }
        m->want_load = 0;
        cumod__mod_answer_waiters(m);
        return;
    }
    if (!force && strcmp(m->failed_sha, r->img.sha256_hex) == 0 &&
        cumod__jit_equal(&m->failed_jit, &m->next_jit)) {
        /* These bytes failed to load before: not retried until they
         * change (or `reload` asks). The error stays on record. */
        m->want_load = m->pinned;
        cumod__mod_answer_waiters(m);
        return;
    }
    if (m->current != NULL || m->pinned || m->want_load) {
        cumod__res_load(m, &r->img, cat_load_done); /* takes the image */
        return;
    }
    cumod__mod_set_error(m, NULL);
    m->failed_sha[0] = '\0';
    m->state = CUMOD_MOD_AVAILABLE;
    cumod__mod_answer_waiters(m);
}

/* A read's end, in the loop thread: a stopping catalog drops it, a module
 * that changed meanwhile reads again, a failure is put on record, else the
 * reload decision. One cleanup for all: the image (unless a load took it)
 * and the read are freed here. */
static void
cat_read_done(uv_work_t *req, int status)
{
    cumod_read *r = req->data;
    cumod_module *m = r->m;
    cumod_catalog *cat = m->cat;
    int dirty = 0;

    cat_read_slot_free(cat, r);
    if (status == UV_ECANCELED && r->rv == 0)
        r->rv = CUMOD_ESHUTDOWN;
    if (!cat->stopping) {
        cat_take_compiled(m, r);
        dirty = m->dirty;
        if (dirty)
            m->dirty = 0;
        else if (r->rv != CUMOD_OK)
            cat_read_failed(m, r);
        else
            cat_read_decide(m, r);
    }
    cumod__image_fini(&r->img);
    cumod__read_free(r);
    if (dirty)
        cumod__mod_refresh(m);
    else if (cat->stopping && cat->reads_in_flight == 0 && !cat->handles_open)
        cumod__cat_free_all(cat);
}

static void
cat_read_after(uv_work_t *req, int status)
{
    cumod_catalog *cat = ((cumod_read *)req->data)->m->cat;
    int stopping = cat->stopping;
    cat_read_done(req, status);
    if (!stopping) /* else cat may be freed */
        cumod__cat_maybe_scanned(cat);
}

/* Starts queued reads while slots are free. */
static void
cat_read_pump(cumod_catalog *cat)
{
    while (!cumod__list_empty(&cat->read_queue) &&
           cat->reads_in_flight < CUMOD_CAT_READS && !cat->stopping) {
        cumod_module *m = CUMOD_CONTAINER_OF(cumod__list_pop(&cat->read_queue),
                                             cumod_module, read_link);
        if (m->read_kind == CUMOD_IMAGE_CU &&
            cat->compiles_running >= CUMOD_CAT_COMPILES) {
            /* Waits for a compile to end (cat_read_done moves it back). */
            cumod__list_append(&cat->compile_wait, &m->read_link);
            continue;
        }
        if (cumod__read_begin(m, cat_read_after) != 0 && m->dirty) {
            m->dirty = 0;
            cumod__mod_refresh(m);
        }
    }
}

static void
cat_read_start(cumod_module *m, cumod_image_kind kind)
{
    cumod_catalog *cat = m->cat;

    m->op = CUMOD_OP_READING;
    m->read_kind = kind;
    cumod__list_append(&cat->read_queue, &m->read_link);
    cat_read_pump(cat);
}

void
cumod__mod_refresh(cumod_module *m)
{
    cumod_catalog *cat = m->cat;
    int k;

    if (cat->stopping)
        return;
    if (m->op != CUMOD_OP_IDLE) {
        m->dirty = 1;
        return;
    }
    m->dirty = 0;
    if ((k = cumod__mod_preferred(m)) < 0) {
        /* No file left: new work is refused; unloaded once idle. */
        m->read_valid = 0;
        m->want_load = 0;
        if (m->state != CUMOD_MOD_REMOVED) {
            CUMOD_LOGN("CUMOD-MODULE-REMOVED", "%s: its files are gone",
                       m->name);
            cumod__mod_event(m, CUMOD__EVENT_KIND__EVENT_REMOVED,
                             m->current ? m->current->generation : 0, 0,
                             m->sha256, NULL, "its files are gone");
        }
        m->state = CUMOD_MOD_REMOVED;
        if (m->current != NULL)
            cumod__res_retire_current(m);
        cumod__mod_fail_waiters(m, CUMOD_ENOENT, "the module's files are gone");
        cumod__mod_maybe_free(m);
        return;
    }
    if (m->state == CUMOD_MOD_REMOVED)
        m->state = m->current ? CUMOD_MOD_RESIDENT : CUMOD_MOD_AVAILABLE;
    if (!cat->scanned)
        return; /* the device's SM is not known yet: the first scan reads */
    if (!m->files[k].stat_valid || !m->read_valid ||
        m->kind != (cumod_image_kind)k || m->force_read ||
        (m->want_load && m->current == NULL)) {
        cat_read_start(m, (cumod_image_kind)k);
        return;
    }
    cumod__mod_answer_waiters(m);
}
