/*
 * The catalog's records and the folder: events and scans mark which image
 * files a module has; cumod__mod_refresh then starts what the module needs
 * (a read in the thread pool, a load, an unload), one operation at a time
 * per module. Anything that arrives during an operation marks the module
 * dirty, and the operation's end looks again.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog_internal.h"
#include "compile/compile.h"
#include "compile/deps.h"
#include "compile/sandbox.h"
#include "catalog/image/image_meta.h"
#include "cumod/errors.h"
#include "log.h"

static void cat_free_all(cumod_catalog *cat);
static void cat_read_pump(cumod_catalog *cat);
static void cat_compile_setup(cumod_catalog *cat, const cumod_config *cfg);

typedef struct cat_read {
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
} cat_read;

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

static cumod_module *
cat_module_get(cumod_catalog *cat, const char *name)
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

static int cat_drop_gens(cumod_module *m);

static void
cat_module_free(cumod_module *m)
{
    cat_drop_gens(m);
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
cat_read_sidecars(cat_read *r, const char *stem)
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
cat_read_arch(cat_read *r)
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
cat_read_compile(cat_read *r)
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
    cat_read *r = req->data;
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

/* The read's description becomes the module's (what show says before the
 * module is loaded, and the globals a load looks up). */
static void
cat_take_description(cumod_module *m, cat_read *r)
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

static void
cat_file_set_stat(cumod_file *f, const struct stat *st)
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

static int
cat_file_same_stat(const cumod_file *f, const struct stat *st)
{
    cumod_file tmp = *f;
    cat_file_set_stat(&tmp, st);
    return f->stat_valid && tmp.dev == f->dev && tmp.ino == f->ino &&
           tmp.size == f->size && tmp.mtime_ns == f->mtime_ns &&
           tmp.ctime_ns == f->ctime_ns;
}

/* The sidecars' stat as the read found them (a rescan compares). */
static void
cat_take_sidecar_stats(cumod_module *m, const cat_read *r)
{
    for (int k = 0; k < CUMOD_OPTS_KINDS; k++) {
        cumod_file *f = &m->opts_files[k];
        if (k == CUMOD_OPTS_CU && r->kind != CUMOD_IMAGE_CU)
            continue;
        f->present = r->opts_present[k];
        f->stat_valid = 0;
        if (r->opts_present[k])
            cat_file_set_stat(f, &r->opts_st[k]);
    }
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

/* The read failed: the bytes on disk are unusable (or gone). A resident
 * generation goes on serving; the record says why the file was refused. */
static void
cat_read_failed(cumod_module *m, cat_read *r)
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
        cat_file_set_stat(f, &r->st);
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
static void
cat_maybe_scanned(cumod_catalog *cat)
{
    if (!cat->scanned || cat->scan_reported || cat->stopping ||
        cat->reads_in_flight > 0 || !cumod__list_empty(&cat->read_queue) ||
        !cumod__list_empty(&cat->compile_wait))
        return;
    cat->scan_reported = 1;
    if (cat->ops.scanned != NULL)
        cat->ops.scanned(cat->ops.arg);
}

static void cat_read_done(uv_work_t *req, int status);

static void
cat_read_after(uv_work_t *req, int status)
{
    cumod_catalog *cat = ((cat_read *)req->data)->m->cat;
    int stopping = cat->stopping;
    cat_read_done(req, status);
    if (!stopping) /* else cat may be freed */
        cat_maybe_scanned(cat);
}

static void cat_read_free(cat_read *r);

static void
cat_read_done(uv_work_t *req, int status)
{
    cat_read *r = req->data;
    cumod_module *m = r->m;
    cumod_catalog *cat = m->cat;

    m->op = CUMOD_OP_IDLE;
    cat->reads_in_flight--;
    if (r->kind == CUMOD_IMAGE_CU) {
        cat->compiles_running--;
        if (!cumod__list_empty(&cat->compile_wait))
            cumod__list_append(&cat->read_queue,
                               cumod__list_pop(&cat->compile_wait));
    }
    cat_read_pump(cat);
    if (status == UV_ECANCELED && r->rv == 0)
        r->rv = CUMOD_ESHUTDOWN;
    if (cat->stopping) {
        cumod__image_fini(&r->img);
        cat_read_free(r);
        if (cat->reads_in_flight == 0 && !cat->handles_open)
            cat_free_all(cat);
        return;
    }
    /* What a compile made is recorded even when the result is dropped
     * below (a change came during the read): the work was done, and the
     * read that follows (or a load) takes the image kept here instead of
     * running the worker again for the same source and options. */
    if ((r->compiled == 1 || r->compiled == 2) && r->rv == CUMOD_OK) {
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
    if (m->dirty) {
        cumod__image_fini(&r->img);
        cat_read_free(r);
        m->dirty = 0;
        cumod__mod_refresh(m);
        return;
    }
    if (r->rv != CUMOD_OK) {
        cat_read_failed(m, r);
        cumod__image_fini(&r->img);
        cat_read_free(r);
        return;
    }
    if (r->stat_ok)
        cat_file_set_stat(&m->files[r->kind], &r->st);
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
        m->read_valid = 1;
        m->kind = r->kind;
        memcpy(m->sha256, r->img.sha256_hex, sizeof(m->sha256));
        m->size = r->img.len;
        cumod__mod_set_error(m, NULL);
        m->want_load = 0;
        cumod__image_fini(&r->img);
        cat_read_free(r);
        cumod__mod_answer_waiters(m);
        return;
    }
    int new_bytes = strcmp(m->sha256, r->img.sha256_hex) != 0;
    m->read_valid = 1;
    m->kind = r->kind;
    memcpy(m->sha256, r->img.sha256_hex, sizeof(m->sha256));
    m->size = r->img.len;
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
        cat_read_free(r);
        if ((m->current == NULL || m->rollback) &&
            (m->want_load || m->pinned) && m->good_image.fd >= 0 &&
            strcmp(m->good_image.sha256, m->quarantine_sha) != 0) {
            m->rollback = 0;
            cumod__res_load_kept(m, &m->good_image);
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
        cumod__image_fini(&r->img);
        cat_read_free(r);
        cumod__mod_answer_waiters(m);
        return;
    }
    if (m->current != NULL || m->pinned || m->want_load) {
        cumod__res_load(m, &r->img); /* takes the image */
        cat_read_free(r);
        return;
    }
    cumod__mod_set_error(m, NULL);
    m->failed_sha[0] = '\0';
    m->state = CUMOD_MOD_AVAILABLE;
    cumod__image_fini(&r->img);
    cat_read_free(r);
    cumod__mod_answer_waiters(m);
}

static void
cat_read_free(cat_read *r)
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
cat_cu_opts(cumod_module *m, cat_read *r)
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
static int
cat_read_begin(cumod_module *m)
{
    cumod_catalog *cat = m->cat;
    int dirfd = cumod__watch_dirfd(cat->watch);
    cumod_image_kind kind = m->read_kind;
    cat_read *r;

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
        r->cache_dir = cat->cache_dir[0] ? cat->cache_dir : NULL;
        r->library = (char *)cat->cfg->nvrtc_library;
        r->timeout_ms = cat->cfg->compile_timeout_s * 1000u;
        r->memory_max = cat->cfg->compile_memory_max;
        if (cat_cu_opts(m, r) != 0) {
            CUMOD_LOGE("CUMOD-READ", "%s: out of memory", m->name);
            close(r->dirfd);
            cat_read_free(r);
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
    uv_queue_work(cat->loop, &r->req, cat_read_work, cat_read_after);
    return 0;
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
        if (cat_read_begin(m) != 0 && m->dirty) {
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
        if ((m = cat_module_get(cat, stem)) == NULL)
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
static void
cat_scan(cumod_catalog *cat)
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
                !cat_file_same_stat(f, &st))
                for (int k = 0; k < CUMOD_IMAGE_KINDS; k++)
                    m->files[k].stat_valid = 0; /* read again with it */
            f->present = 1;
            continue;
        }
        if (!cumod__image_name(e->d_name, stem, &kind))
            continue;
        cumod_module *m = cat_module_get(cat, stem);
        if (m == NULL)
            continue;
        cumod_file *f = &m->files[kind];
        snprintf(f->name, sizeof(f->name), "%s", e->d_name);
        if (fstatat(dirfd, e->d_name, &st, 0) != 0 ||
            !cat_file_same_stat(f, &st))
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

static void
cat_on_watch(void *arg, cumod_watch_event ev, const char *name)
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
            cat_scan(cat);
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
    cat_compile_setup(cat, cfg);
    cat->cfg = cfg;
    cat->ops = *ops;
    cat->loop = loop;
    snprintf(cat->dir, sizeof(cat->dir), "%s", cfg->kernel_dir);
    rv = cumod__watch_start(cat->loop, cat->dir, cat_on_watch, cat, &cat->watch,
                            st->msg, sizeof(st->msg));
    if (rv != CUMOD_OK) {
        free(cat->table);
        free(cat);
        st->code = rv;
        return rv;
    }
    for (int i = 0; i < cfg->npins; i++) {
        cumod_module *m = cat_module_get(cat, cfg->pins[i]);
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
        cat_scan(cat);
        for (int i = 0; i < cat->cfg->npins; i++) {
            cumod_module *m = cumod__mod_find(cat, cat->cfg->pins[i]);
            if (m == NULL || cumod__mod_preferred(m) < 0)
                CUMOD_LOGW("CUMOD-PIN",
                           "--pin %s: no such module in %s yet; it loads when "
                           "its file appears",
                           cat->cfg->pins[i], cat->dir);
        }
        cumod__res_start_idle_timer(cat);
        cat_maybe_scanned(cat);
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
cumod__catalog_rescan(cumod_catalog *cat)
{
    if (cat == NULL || cat->stopping || !cat->scanned)
        return;
    CUMOD_LOGI("CUMOD-RESCAN", "rescanning %s (SIGHUP)", cat->dir);
    cat_scan(cat);
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
        cumod_module *m = cat_module_get(cat, cat->cfg->pins[k]);
        if (m == NULL)
            continue;
        CUMOD_LOGN("CUMOD-PIN", "%s: pinned by the configuration", m->name);
        m->pinned = m->want_load = 1;
        if (cat->scanned)
            cumod__mod_refresh(m);
    }
    cumod__res_start_idle_timer(cat);
}

/* Forgets every loaded generation of m, without unloading: the context
 * that held them is gone (or going). Returns whether one was current. */
static int
cat_drop_gens(cumod_module *m)
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
            if (cat_drop_gens(m) && m->state == CUMOD_MOD_RESIDENT)
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
cat_free_all(cumod_catalog *cat)
{
    for (size_t b = 0; b < cat->nbuckets; b++) {
        cumod_module *m = cat->table[b];
        while (m != NULL) {
            cumod_module *next = m->hnext;
            cat_module_free(m);
            m = next;
        }
    }
    free(cat->table);
    free(cat);
}

static void
cat_on_idle_timer_close(uv_handle_t *h)
{
    cumod_catalog *cat = h->data;
    cat->handles_open = 0;
    if (cat->reads_in_flight == 0)
        cat_free_all(cat);
}

void
cumod__catalog_stop(cumod_catalog *cat)
{
    if (cat == NULL || cat->stopping)
        return;
    cat->stopping = 1;
    if (cat->compiles_running > 0)   /* their reads end now, not at the */
        cumod__compile_cancel_all(); /* time limit */
    for (size_t b = 0; b < cat->nbuckets; b++)
        for (cumod_module *m = cat->table[b]; m; m = m->hnext)
            cumod__mod_fail_waiters(m, CUMOD_ESHUTDOWN,
                                    "cumodd is shutting down");
    cumod__watch_stop(cat->watch);
    cat->watch = NULL;
    uv_timer_stop(&cat->idle_timer);
    uv_close((uv_handle_t *)&cat->idle_timer, cat_on_idle_timer_close);
}
