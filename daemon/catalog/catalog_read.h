/* SPDX-License-Identifier: MIT */
/*
 * A read of a module's image file (catalog_read.c), shared with the reload
 * decision (catalog_reload.c) that takes its outcome in the loop thread.
 * Private to the catalog.
 */
#ifndef CUMOD_CATALOG_READ_H
#define CUMOD_CATALOG_READ_H

#include "catalog_internal.h"
#include "catalog/image/image_meta.h"

typedef struct cumod_read {
    uv_work_t req;
    cumod_module *m;
    cumod_image_kind kind;
    int dirfd; /* a dup, owned by the read */
    char fname[256];
    size_t max_size;
    unsigned dev_major, dev_minor;
    cumod_image img;
    int rv;
    int stat_ok;
    struct stat st;
    char msg[1024];
    /* What the image holds, read beside it (no driver): kernels, their
     * layouts and attributes, globals. desc_rv is its outcome; a failure
     * here costs only the description, never the read. */
    cumod_imeta desc;
    int desc_rv;
    char desc_msg[256];
    /* The sidecar files, read beside the image: NAME.ptx.opts's JIT
     * options, and whether each was there (with its stat). */
    cumod_jit_opts sidecar_jit;
    int opts_present[CUMOD_OPTS_KINDS];
    struct stat opts_st[CUMOD_OPTS_KINDS];
    /* NAME.cu: the compile's inputs (copied in the loop thread, since a
     * SIGHUP may change the configuration meanwhile) and outcome. */
    char **cu_opts; /* the configuration's and the module's, malloc'd */
    size_t ncu_opts;
    /* What the compile may read: the folder and the configuration's -I
     * folders (not a sidecar's: the folder's writer does not widen what
     * is readable), malloc'd. */
    char **roots;
    size_t nroots;
    uint64_t memory_max;
    char *exe, *cache_dir, *library, *dir;
    cumod_compilers *workers; /* the catalog's */
    uint32_t timeout_ms;
    uint64_t compile_ns; /* the worker's time, 0: it did not run */
    int compiled;        /* the worker ran: 1 compiled, 2 from the cache; 3: the
                            module's last compiled image served again */
    char *compile_log;
    char *compile_note;
    /* The module's last compiled image (a dup of its sealed memfd, -1: none)
     * and what it was made from: taken instead of running the worker when
     * the source and the options are the same (a load after the read that
     * catalogued the module). made_with: what this read's image is made
     * from, for the module to keep. */
    cumod_kept_image reuse;
    char *reuse_with, *made_with;
} cumod_read;

/* Starts the read of m (its op is READING, its kind read_kind): the
 * thread pool reads, then after(req) runs in the loop thread, req->data the
 * read. 0, or -1 when it could not start (m goes back to idle). */
int cumod__read_begin(cumod_module *m, uv_after_work_cb after);
/* Frees a read (not its image, which a load may have taken). */
void cumod__read_free(cumod_read *r);

#endif
