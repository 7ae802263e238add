/* SPDX-License-Identifier: MIT */
/*
 * The reader: a module's image file read in the thread pool, with its
 * sidecars (NAME.ptx.opts, NAME.cu.opts) and, for NAME.cu, the compile
 * (compile.h) or the image a compile of the same source and options made
 * before. What the read found is judged in the loop thread
 * (catalog_reload.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog_read.h"
#include "compile/compile.h"
#include "compile/deps.h"
#include "cumod/errors.h"
#include "common/log.h"

/* mkdir -p of path (mode 0700 for what it makes); 0 or -1. */
static int
cat_mkdirs(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(buf, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

/* Reads the sidecar file name of the folder (safely, as an image is
 * opened) into a malloc'd NUL-terminated buffer. 0 with *buf NULL when it
 * is not there; -1 with a sentence in msg when it cannot be read. */
static int
cat_read_sidecar(int dirfd, const char *dir, const char *name, char **buf,
                 size_t *len, struct stat *st, char *msg, size_t msglen)
{
    int fd = -1;
    uint64_t size = 0;
    cumod_err rc = cumod__image_open(dirfd, dir, name, CUMOD_IMAGE_RESOLVE_AUTO,
                                     &fd, &size, msg, msglen);
    *buf = NULL;
    if (rc == CUMOD_ENOENT)
        return 0;
    if (rc != CUMOD_OK)
        return -1;
    if (size > CUMOD_OPTS_FILE_BYTES) {
        snprintf(msg, msglen, "%s/%s is %llu bytes: over %d", dir, name,
                 (unsigned long long)size, CUMOD_OPTS_FILE_BYTES);
        close(fd);
        return -1;
    }
    (void)fstat(fd, st);
    char *b = malloc(size + 1);
    ssize_t n = b ? pread(fd, b, size, 0) : -1;
    close(fd);
    if (n < 0) {
        snprintf(msg, msglen, "%s/%s: cannot read it: %s", dir, name,
                 strerror(errno));
        free(b);
        return -1;
    }
    b[n] = '\0';
    *buf = b;
    *len = (size_t)n;
    return 0;
}

/* NAME.ptx.opts and NAME.cu.opts beside the image: parses the first into
 * r->sidecar_jit, and for a .cu appends the second's lines to r->cu_opts.
 * 0, or -1 with r->rv and r->msg set. */
static int
cat_read_sidecars(cumod_read *r, const char *stem)
{
    static const char *const ext[CUMOD_OPTS_KINDS] = {".ptx.opts", ".cu.opts"};
    for (int k = 0; k < CUMOD_OPTS_KINDS; k++) {
        char name[300], *buf = NULL;
        size_t len = 0;
        if (k == CUMOD_OPTS_CU && r->kind != CUMOD_IMAGE_CU)
            continue;
        snprintf(name, sizeof(name), "%s%s", stem, ext[k]);
        if (cat_read_sidecar(r->dirfd, r->dir, name, &buf, &len, &r->opts_st[k],
                             r->msg, sizeof(r->msg)) != 0) {
            r->rv = CUMOD_EIMAGE;
            return -1;
        }
        if (buf == NULL)
            continue;
        r->opts_present[k] = 1;
        char path[4400];
        snprintf(path, sizeof(path), "%s/%s", r->dir, name);
        int bad;
        if (k == CUMOD_OPTS_PTX) {
            bad = cumod__opts_parse_jit(buf, len, path, &r->sidecar_jit, r->msg,
                                        sizeof(r->msg));
        } else {
            char *lines[CUMOD_OPTS_FILE_MAX];
            size_t n = 0;
            bad = cumod__opts_parse_lines(buf, len, path, lines, &n, r->msg,
                                          sizeof(r->msg));
            char **grown = bad ? NULL
                               : realloc(r->cu_opts, (r->ncu_opts + n + 1) *
                                                         sizeof(*grown));
            if (!bad && grown == NULL) {
                snprintf(r->msg, sizeof(r->msg), "%.900s: out of memory", path);
                bad = -1;
            }
            for (size_t i = 0; i < n; i++) {
                if (grown != NULL)
                    grown[r->ncu_opts++] = lines[i];
                else
                    free(lines[i]);
            }
            if (grown != NULL)
                r->cu_opts = grown;
        }
        free(buf);
        if (bad) {
            r->rv = CUMOD_EIMAGE;
            return -1;
        }
    }
    return 0;
}

/* The device's arch first, unless an option (the configuration's, the
 * module's, the sidecar's) names one. 0, or -1 when out of memory. */
static int
cat_read_arch(cumod_read *r)
{
    for (size_t i = 0; i < r->ncu_opts; i++)
        if (cumod__compile_names_arch(r->cu_opts[i]))
            return 0;
    char buf[64];
    snprintf(buf, sizeof(buf), "--gpu-architecture=sm_%u%u", r->dev_major,
             r->dev_minor);
    char **grown = realloc(r->cu_opts, (r->ncu_opts + 2) * sizeof(*grown));
    if (grown == NULL)
        return -1;
    r->cu_opts = grown;
    char *arch = strdup(buf);
    if (arch == NULL)
        return -1;
    memmove(grown + 1, grown, r->ncu_opts * sizeof(*grown));
    grown[0] = arch;
    r->ncu_opts++;
    return 0;
}

/* NAME.cu: compiles r->img (the source) in the NVRTC worker; on success
 * r->img is the compiled image. */
static void
cat_read_compile(cumod_read *r)
{
    char path[4400];
    snprintf(path, sizeof(path), "%s/%s", r->dir, r->fname);
    if (cat_read_arch(r) != 0) {
        r->rv = CUMOD_ENOMEM;
        snprintf(r->msg, sizeof(r->msg), "%s: out of memory", r->fname);
        return;
    }
    /* What the image is made from: the source's hash, the headers it
     * includes (deps.h) and every option. */
    char deps[65];
    size_t ndeps = cumod__compile_deps(
        path, (const char *)r->img.bytes, r->img.len,
        (const char *const *)r->cu_opts, r->ncu_opts,
        (const char *const *)r->roots, r->nroots, deps, NULL, 0);
    size_t wcap = sizeof(r->img.sha256_hex) + sizeof(deps) + 8;
    for (size_t i = 0; i < r->ncu_opts; i++)
        wcap += strlen(r->cu_opts[i]) + 1;
    if ((r->made_with = malloc(wcap)) != NULL) {
        size_t at = (size_t)snprintf(r->made_with, wcap, "%s\ndeps %s",
                                     r->img.sha256_hex, deps);
        for (size_t i = 0; i < r->ncu_opts && at < wcap; i++)
            at += (size_t)snprintf(r->made_with + at, wcap - at, "\n%s",
                                   r->cu_opts[i]);
    }
    if (r->reuse.fd >= 0 && r->made_with != NULL && r->reuse_with != NULL &&
        strcmp(r->made_with, r->reuse_with) == 0) {
        cumod_image img;
        int fd = r->reuse.fd;
        r->reuse.fd = -1; /* taken by cumod__image_from_memfd */
        if (cumod__image_from_memfd(fd, r->reuse.len, r->reuse.kind, path,
                                    r->dev_major, r->dev_minor, &img, r->msg,
                                    sizeof(r->msg)) == CUMOD_OK) {
            cumod__image_fini(&r->img);
            r->img = img;
            r->compiled = 3; /* no worker, nothing to count or report */
            return;
        }
    }
    cumod_compile_req req = {
        .workers = r->workers,
        .program = r->exe,
        .library = r->library,
        .cache_dir = r->cache_dir,
        .name = r->fname,
        .path = path,
        .sm_major = r->dev_major,
        .sm_minor = r->dev_minor,
        .opts = (const char *const *)r->cu_opts,
        .nopts = r->ncu_opts,
        .deps = deps,
        .src_fd = r->img.fd,
        .src_len = r->img.len,
        .timeout_ms = r->timeout_ms,
        .roots = (const char *const *)r->roots,
        .nroots = r->nroots,
        .memory_max = r->memory_max,
    };
    cumod_compile_res res;
    uint64_t t0 = uv_hrtime();
    r->rv = cumod__compile(&req, &res, r->msg, sizeof(r->msg));
    r->compile_ns = uv_hrtime() - t0;
    if (r->compile_ns == 0)
        r->compile_ns = 1;
    r->compile_log = res.log;
    res.log = NULL;
    if (r->rv != CUMOD_OK) {
        r->compiled = 0;
        return;
    }
    r->compiled = res.cached ? 2 : 1;
    size_t cap = 512;
    for (size_t i = 0; i < r->ncu_opts; i++)
        cap += strlen(r->cu_opts[i]) + 1;
    if ((r->compile_note = malloc(cap)) != NULL) {
        size_t at = (size_t)snprintf(
            r->compile_note, cap,
            "NVRTC %s, %s (%llu ms; cache key %.12s, with %zu included "
            "header%s) to %s:",
            res.nvrtc, res.cached ? "from the cache" : "compiled",
            (unsigned long long)res.ms, res.key, ndeps, ndeps == 1 ? "" : "s",
            res.img.kind == CUMOD_IMAGE_PTX ? "PTX" : "a cubin");
        for (size_t i = 0; i < r->ncu_opts && at < cap; i++)
            at += (size_t)snprintf(r->compile_note + at, cap - at, " %s",
                                   r->cu_opts[i]);
    }
    cumod__image_fini(&r->img);
    r->img = res.img;
}

/* Thread pool: everything that blocks on the file. */
static void
cat_read_work(uv_work_t *req)
{
    cumod_read *r = req->data;
    char stem[CUMOD_IMAGE_NAME_MAX + 1];
    cumod_image_kind k;
    r->stat_ok = fstatat(r->dirfd, r->fname, &r->st, 0) == 0;
    r->rv =
        cumod__image_read(r->dirfd, r->dir, r->fname, r->max_size, r->dev_major,
                          r->dev_minor, &r->img, r->msg, sizeof(r->msg));
    if (r->rv == CUMOD_OK && cumod__image_name(r->fname, stem, &k) &&
        r->kind != CUMOD_IMAGE_CUBIN && cat_read_sidecars(r, stem) != 0)
        cumod__image_fini(&r->img);
    close(r->dirfd);
    r->dirfd = -1;
    if (r->rv == CUMOD_OK && r->kind == CUMOD_IMAGE_CU)
        cat_read_compile(r);
    r->desc_rv = CUMOD_EINVAL;
    if (r->rv == CUMOD_OK)
        r->desc_rv = cumod__imeta_describe(
            r->img.bytes, r->img.len, r->img.kind, r->fname, r->dev_major,
            r->dev_minor, &r->desc, r->desc_msg, sizeof(r->desc_msg));
}

void
cumod__read_free(cumod_read *r)
{
    cumod__imeta_fini(&r->desc);
    for (size_t i = 0; i < r->ncu_opts; i++)
        free(r->cu_opts[i]);
    free(r->cu_opts);
    for (size_t i = 0; i < r->nroots; i++)
        free(r->roots[i]);
    free(r->roots);
    free(r->compile_log);
    free(r->compile_note);
    cumod__kept_fini(&r->reuse);
    free(r->reuse_with);
    free(r->made_with);
    free(r);
}

/* A NAME.cu read's options before its sidecar's: the device's arch (unless
 * an option names one), the folder as include path, the configuration's
 * (or the defaults), the module's. 0, or -1 when out of memory. */
static int
cat_cu_opts(cumod_module *m, cumod_read *r)
{
    const cumod_config *cfg = m->cat->cfg;
    static const char *const defaults[] = {"-std=c++17", "-default-device"};
    const char *mod[CUMOD_CONFIG_MAX_OPTS];
    size_t nmod = 0;
    const char *const *base = cfg->nvrtc_opts_set ? cfg->nvrtc_opts : defaults;
    size_t nbase = cfg->nvrtc_opts_set ? (size_t)cfg->nnvrtc_opts : 2;

    cumod__modopt_for(cfg->mod_opts, cfg->nmod_opts, m->name, NULL, mod,
                      CUMOD_CONFIG_MAX_OPTS, &nmod);
    if ((r->cu_opts = calloc(nbase + nmod + 3, sizeof(char *))) == NULL)
        return -1;
    char buf[4200], abs[PATH_MAX];
    /* (The arch is added after the sidecar is read: cat_read_arch.) */
    snprintf(buf, sizeof(buf), "--include-path=%s",
             realpath(m->cat->dir, abs) ? abs : m->cat->dir);
    if ((r->cu_opts[r->ncu_opts++] = strdup(buf)) == NULL)
        return -1;
    for (size_t i = 0; i < nbase; i++)
        if ((r->cu_opts[r->ncu_opts++] = strdup(base[i])) == NULL)
            return -1;
    for (size_t i = 0; i < nmod; i++)
        if ((r->cu_opts[r->ncu_opts++] = strdup(mod[i])) == NULL)
            return -1;
    /* The roots: the folder (first: the source's own) and the include
     * folders named so far, all the configuration's. */
    const char *dirs[CUMOD_DEPS_MAX_DIRS];
    size_t nd =
        cumod__compile_include_dirs((const char *const *)r->cu_opts,
                                    r->ncu_opts, dirs, CUMOD_DEPS_MAX_DIRS);
    if ((r->roots = calloc(nd + 1, sizeof(char *))) == NULL)
        return -1;
    for (size_t i = 0; i < nd; i++)
        if ((r->roots[r->nroots++] = strdup(dirs[i])) == NULL)
            return -1;
    return 0;
}

/* Starts the read of m (its op is READING, its kind read_kind) in a free
 * slot; 0, or -1 when it could not start (m goes back to idle). */
int
cumod__read_begin(cumod_module *m, uv_after_work_cb after)
{
    cumod_catalog *cat = m->cat;
    int dirfd = cumod__watch_dirfd(cat->watch);
    cumod_image_kind kind = m->read_kind;
    cumod_read *r;

    if (dirfd < 0) {
        m->op = CUMOD_OP_IDLE; /* degraded: the rescan when it is back */
        return -1;
    }
    if ((r = calloc(1, sizeof(*r))) == NULL ||
        (r->dirfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0)) < 0) {
        CUMOD_LOGE("CUMOD-READ", "%s: cannot start a read: %s", m->name,
                   r ? strerror(errno) : "out of memory");
        free(r);
        m->op = CUMOD_OP_IDLE;
        return -1;
    }
    r->m = m;
    r->kind = kind;
    r->img = (cumod_image)CUMOD_IMAGE_INIT;
    snprintf(r->fname, sizeof(r->fname), "%s", m->files[kind].name);
    r->max_size = cat->cfg->max_image_size;
    r->dev_major = cat->sm_major;
    r->dev_minor = cat->sm_minor;
    r->sidecar_jit = (cumod_jit_opts)CUMOD_JIT_OPTS_UNSET;
    r->dir = cat->dir;
    r->reuse.fd = -1;
    if (kind == CUMOD_IMAGE_CU && m->compiled.fd >= 0 &&
        m->compiled_with != NULL &&
        (r->reuse_with = strdup(m->compiled_with)) != NULL &&
        (r->reuse.fd = fcntl(m->compiled.fd, F_DUPFD_CLOEXEC, 0)) >= 0) {
        r->reuse.len = m->compiled.len;
        r->reuse.kind = m->compiled.kind;
    }
    if (kind == CUMOD_IMAGE_CU) {
        r->exe = cat->exe;
        r->workers = &cat->compilers;
        r->cache_dir = cat->cache_dir[0] ? cat->cache_dir : NULL;
        r->library = (char *)cat->cfg->nvrtc_library;
        r->timeout_ms = cat->cfg->compile_timeout_s * 1000u;
        r->memory_max = cat->cfg->compile_memory_max;
        if (cat_cu_opts(m, r) != 0) {
            CUMOD_LOGE("CUMOD-READ", "%s: out of memory", m->name);
            close(r->dirfd);
            cumod__read_free(r);
            m->op = CUMOD_OP_IDLE;
            return -1;
        }
        cat->compiles_running++;
        if (r->cache_dir != NULL && !cat->cache_made) {
            /* Made at the first compile, not at start: a folder without
             * sources leaves no trace. */
            cat->cache_made = 1;
            if (cat_mkdirs(cat->cache_dir) != 0) {
                CUMOD_LOGW("CUMOD-COMPILE",
                           "the compile cache %s cannot be made (%s): "
                           "NAME.cu files compile at every start",
                           cat->cache_dir, strerror(errno));
                cat->cache_dir[0] = '\0';
                r->cache_dir = NULL;
            }
        }
    }
    r->req.data = r;
    cat->reads_in_flight++;
    uv_queue_work(cat->loop, &r->req, cat_read_work, after);
    return 0;
}
