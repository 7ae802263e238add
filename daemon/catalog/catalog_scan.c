/* SPDX-License-Identifier: MIT */
/*
 * The folder: the initial scan (and rescans) and inotify's events, made
 * into the records' files; each module touched is refreshed
 * (catalog_read.c). Loop thread only.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog_internal.h"
#include "cumod/errors.h"
#include "common/log.h"

/* 1 if fname is named like a C or C++ header (what a NAME.cu includes);
 * hidden files (an editor's) are not. */
static int
cat_header_name(const char *fname)
{
    static const char *const ext[] = {".h",   ".hh",  ".hpp", ".hxx", ".cuh",
                                      ".inl", ".inc", ".ipp", ".tcc"};
    const char *dot = strrchr(fname, '.');
    if (fname[0] == '.' || dot == NULL)
        return 0;
    for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++)
        if (strcmp(dot, ext[i]) == 0)
            return 1;
    return 0;
}

/* Every NAME.cu is read again: what it includes may have changed. A
 * source whose headers did not change takes its kept image (or the
 * cache's) back, the same bytes, and nothing happens. */
static void
cat_sources_stale(cumod_catalog *cat)
{
    for (size_t b = 0; b < cat->nbuckets; b++)
        for (cumod_module *m = cat->table[b]; m; m = m->hnext)
            m->files[CUMOD_IMAGE_CU].stat_valid = 0;
}

/* A file of the folder appeared, changed or went. */
static void
cat_file_event(cumod_catalog *cat, const char *fname, int present)
{
    char stem[129];
    cumod_image_kind kind;
    cumod_opts_kind which;
    cumod_module *m;

    if (cat_header_name(fname)) {
        /* A header: the sources that include it compile again. Collected
         * first, since a refresh may free a module. */
        cumod_module **all =
            malloc((cat->count ? cat->count : 1) * sizeof(*all));
        size_t n = 0;
        cat_sources_stale(cat);
        for (size_t b = 0; all && b < cat->nbuckets; b++)
            for (m = cat->table[b]; m; m = m->hnext)
                if (m->files[CUMOD_IMAGE_CU].present)
                    all[n++] = m;
        if (n > 0)
            CUMOD_LOGI("CUMOD-HEADER", "%s %s: %zu NAME.cu file%s read again",
                       fname, present ? "changed" : "went", n,
                       n == 1 ? "" : "s");
        for (size_t i = 0; i < n; i++)
            cumod__mod_refresh(all[i]);
        free(all);
        return;
    }
    if (cumod__opts_name(fname, stem, &which)) {
        /* A sidecar changed: its module's image is read again with it (a
         * module without an image yet reads it when one comes). */
        if ((m = cumod__mod_find(cat, stem)) == NULL)
            return;
        m->opts_files[which].present = present;
        m->opts_files[which].stat_valid = 0;
        for (int k = 0; k < CUMOD_IMAGE_KINDS; k++)
            m->files[k].stat_valid = 0;
        cumod__mod_refresh(m);
        return;
    }
    if (!cumod__image_name(fname, stem, &kind))
        return;
    if (present) {
        if ((m = cumod__mod_get(cat, stem)) == NULL)
            return;
    } else if ((m = cumod__mod_find(cat, stem)) == NULL) {
        return;
    }
    cumod_file *f = &m->files[kind];
    f->present = present;
    f->stat_valid = 0;
    snprintf(f->name, sizeof(f->name), "%s", fname);
    cumod__mod_refresh(m);
}

/* Reads the folder whole and makes the catalog equal to it. Files whose
 * stat did not change since their last read are not read again. */
void
cumod__cat_scan(cumod_catalog *cat)
{
    int dirfd = cumod__watch_dirfd(cat->watch), fd;
    struct dirent *e;
    DIR *dir;

    if (dirfd < 0 || (fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0)) < 0)
        return;
    if ((dir = fdopendir(fd)) == NULL) {
        close(fd);
        CUMOD_LOGE("CUMOD-SCAN", "cannot read the folder %s: %s", cat->dir,
                   strerror(errno));
        return;
    }
    rewinddir(dir);
    cat_sources_stale(cat); /* a header may have changed unseen */
    /* Mark, then sweep: everything not seen in this pass is gone. */
    for (size_t b = 0; b < cat->nbuckets; b++)
        for (cumod_module *m = cat->table[b]; m; m = m->hnext)
            for (int k = 0; k < CUMOD_IMAGE_KINDS; k++)
                m->files[k].present = -m->files[k].present; /* 1 -> -1 */
    size_t seen = 0;
    for (size_t b = 0; b < cat->nbuckets; b++)
        for (cumod_module *m = cat->table[b]; m; m = m->hnext)
            for (int k = 0; k < CUMOD_OPTS_KINDS; k++)
                m->opts_files[k].present = -m->opts_files[k].present;
    while ((e = readdir(dir)) != NULL) {
        char stem[129];
        cumod_image_kind kind;
        cumod_opts_kind which;
        struct stat st;
        if (cumod__opts_name(e->d_name, stem, &which)) {
            cumod_module *m = cumod__mod_find(cat, stem);
            if (m == NULL)
                continue;
            cumod_file *f = &m->opts_files[which];
            int was = f->present != 0;
            if (!was || fstatat(dirfd, e->d_name, &st, 0) != 0 ||
                !cumod__file_same_stat(f, &st))
                for (int k = 0; k < CUMOD_IMAGE_KINDS; k++)
                    m->files[k].stat_valid = 0; /* read again with it */
            f->present = 1;
            continue;
        }
        if (!cumod__image_name(e->d_name, stem, &kind))
            continue;
        cumod_module *m = cumod__mod_get(cat, stem);
        if (m == NULL)
            continue;
        cumod_file *f = &m->files[kind];
        snprintf(f->name, sizeof(f->name), "%s", e->d_name);
        if (fstatat(dirfd, e->d_name, &st, 0) != 0 ||
            !cumod__file_same_stat(f, &st))
            f->stat_valid = 0;
        f->present = 1;
        seen++;
    }
    closedir(dir);
    /* Refresh every module; collect first, since a refresh may free. */
    cumod_module **all = malloc((cat->count ? cat->count : 1) * sizeof(*all));
    size_t n = 0;
    for (size_t b = 0; all && b < cat->nbuckets; b++)
        for (cumod_module *m = cat->table[b]; m; m = m->hnext) {
            for (int k = 0; k < CUMOD_IMAGE_KINDS; k++)
                if (m->files[k].present < 0) {
                    m->files[k].present = 0;
                    m->files[k].stat_valid = 0;
                }
            for (int k = 0; k < CUMOD_OPTS_KINDS; k++)
                if (m->opts_files[k].present < 0) { /* a sidecar went */
                    m->opts_files[k].present = 0;
                    for (int i = 0; i < CUMOD_IMAGE_KINDS; i++)
                        m->files[i].stat_valid = 0;
                }
            all[n++] = m;
        }
    for (size_t i = 0; i < n; i++)
        cumod__mod_refresh(all[i]);
    free(all);
    CUMOD_LOGI("CUMOD-SCAN", "%s: %zu image files, %zu modules", cat->dir, seen,
               cat->count);
}

void
cumod__cat_on_watch(void *arg, cumod_watch_event ev, const char *name)
{
    cumod_catalog *cat = arg;

    if (cat->stopping)
        return;
    switch (ev) {
    case CUMOD_WATCH_CHANGED:
        cat_file_event(cat, name, 1);
        break;
    case CUMOD_WATCH_REMOVED:
        cat_file_event(cat, name, 0);
        break;
    case CUMOD_WATCH_RESCAN: {
        unsigned long ov = cumod__watch_overflows(cat->watch);
        if (ov != cat->overflows)
            CUMOD_LOGW("CUMOD-RESCAN",
                       "the inotify event queue overflowed (raise "
                       "fs.inotify.max_queued_events if this recurs); "
                       "rescanning %s",
                       cat->dir);
        else
            CUMOD_LOGI("CUMOD-RESCAN", "rescanning %s", cat->dir);
        cat->overflows = ov;
        if (cat->scanned)
            cumod__cat_scan(cat);
        break;
    }
    case CUMOD_WATCH_DEGRADED:
        CUMOD_LOGE("CUMOD-DIR-GONE",
                   "the kernel folder %s is gone (deleted, moved or "
                   "unmounted); resident modules keep serving, and cumodd "
                   "watches for the folder to come back",
                   cat->dir);
        break;
    }
}

void
cumod__catalog_rescan(cumod_catalog *cat)
{
    if (cat == NULL || cat->stopping || !cat->scanned)
        return;
    CUMOD_LOGI("CUMOD-RESCAN", "rescanning %s (SIGHUP)", cat->dir);
    cumod__cat_scan(cat);
}
