/* SPDX-License-Identifier: MIT */
/*
 * The NVRTC worker (compile.h): `cumodd --nvrtc-worker ...`, one process
 * per compile. It alone loads libnvrtc; whatever NVRTC does to it (a crash,
 * a hang, memory) ends with it.
 */
#include <dlfcn.h>
#include <limits.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "compile.h"
#include "deps.h"
#include "common/dlsearch.h"
#include "common/parent.h"
#include "sandbox.h"
#include "common/sha256.h"

/* NVRTC's C API (nvrtc.h), as much of it as is used: a stable ABI since
 * CUDA 7, declared here so the worker builds without the header. */
typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;
typedef struct w_nvrtc {
    void *lib;
    char dir[PATH_MAX]; /* the folder it was loaded from (real path) */
    const char *(*error_string)(nvrtcResult);
    nvrtcResult (*version)(int *, int *);
    nvrtcResult (*create)(nvrtcProgram *, const char *, const char *, int,
                          const char *const *, const char *const *);
    nvrtcResult (*destroy)(nvrtcProgram *);
    nvrtcResult (*compile)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*log_size)(nvrtcProgram, size_t *);
    nvrtcResult (*log)(nvrtcProgram, char *);
    nvrtcResult (*cubin_size)(nvrtcProgram, size_t *);
    nvrtcResult (*cubin)(nvrtcProgram, char *);
    nvrtcResult (*ptx_size)(nvrtcProgram, size_t *);
    nvrtcResult (*ptx)(nvrtcProgram, char *);
} w_nvrtc;

static void w_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
w_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vdprintf(2, fmt, ap);
    va_end(ap);
}

static int
w_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The whole of descriptor fd (a file), malloc'd and NUL-terminated. */
static char *
w_read_fd(int fd, size_t *lenp)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < 0)
        return NULL;
    size_t len = (size_t)st.st_size;
    char *buf = malloc(len + 1);
    size_t got = 0;
    if (buf == NULL)
        return NULL;
    while (got < len) {
        ssize_t n = pread(fd, buf + got, len - got, (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    *lenp = got;
    return buf;
}

/* Where NVRTC is looked for when nobody names it: as the loader finds it,
 * then the toolkit's own folder, where the loader is often not told of it. */
static const char *const w_nvrtc_names[] = {
    "libnvrtc.so",
    "libnvrtc.so.13",
    "libnvrtc.so.12",
    "/usr/local/cuda/lib64/libnvrtc.so",
    "/usr/local/cuda/lib64/libnvrtc.so.13",
    "/usr/local/cuda/lib64/libnvrtc.so.12",
};

static int
w_load(w_nvrtc *n, const char *library)
{
    char loaded[512], tried[2048];

    n->lib = cumod__dl_search(cumod__dl_named(library, "CUMOD_NVRTC_LIBRARY"),
                              w_nvrtc_names,
                              sizeof(w_nvrtc_names) / sizeof(w_nvrtc_names[0]),
                              loaded, sizeof(loaded), tried, sizeof(tried));
    if (n->lib == NULL) {
        w_log("cannot load NVRTC (set --nvrtc-library or "
              "CUMOD_NVRTC_LIBRARY; the CUDA toolkit's libnvrtc) [tried %s]\n",
              tried);
        return -1;
    }
#define W_SYM(field, name)                                                     \
    do {                                                                       \
        *(void **)&n->field = dlsym(n->lib, name);                             \
        if (n->field == NULL) {                                                \
            w_log("NVRTC has no %s: not a usable libnvrtc\n", name);           \
            return -1;                                                         \
        }                                                                      \
    } while (0)
    W_SYM(error_string, "nvrtcGetErrorString");
    W_SYM(version, "nvrtcVersion");
    W_SYM(create, "nvrtcCreateProgram");
    W_SYM(destroy, "nvrtcDestroyProgram");
    W_SYM(compile, "nvrtcCompileProgram");
    W_SYM(log_size, "nvrtcGetProgramLogSize");
    W_SYM(log, "nvrtcGetProgramLog");
    W_SYM(ptx_size, "nvrtcGetPTXSize");
    W_SYM(ptx, "nvrtcGetPTX");
#undef W_SYM
    /* nvrtcGetCUBIN came with CUDA 11.1; without it, PTX. */
    *(void **)&n->cubin_size = dlsym(n->lib, "nvrtcGetCUBINSize");
    *(void **)&n->cubin = dlsym(n->lib, "nvrtcGetCUBIN");
    /* Its folder stays readable once confined (NVRTC's builtins live
     * there: w_preload_builtins). */
    Dl_info info;
    char real[PATH_MAX];
    n->dir[0] = '\0';
    if (dladdr(*(void **)&n->version, &info) != 0 && info.dli_fname != NULL &&
        realpath(info.dli_fname, real) != NULL) {
        char *slash = strrchr(real, '/');
        if (slash != NULL && slash != real) {
            *slash = '\0';
            snprintf(n->dir, sizeof(n->dir), "%s", real);
        }
    }
    return 0;
}

/* The CUDA toolkit's headers (cuda_fp16.h, cuda_bf16.h,
 * cooperative_groups.h), which NVRTC does not carry: beside the libnvrtc
 * loaded, else $CUDA_PATH, $CUDA_HOME, /usr/local/cuda. Writes the folder
 * into dir; 0 if found. */
static int
w_toolkit_include(const w_nvrtc *n, char *dir, size_t len)
{
    char cand[6][PATH_MAX + 32];
    int nc = 0;
    Dl_info info;
    char real[PATH_MAX];
    if (dladdr(*(void **)&n->version, &info) != 0 && info.dli_fname != NULL &&
        realpath(info.dli_fname, real) != NULL) {
        char *slash = strrchr(real, '/');
        if (slash != NULL) {
            *slash = '\0';
            snprintf(cand[nc++], sizeof(cand[0]), "%s/../include", real);
            snprintf(cand[nc++], sizeof(cand[0]), "%s/../../include", real);
        }
    }
    const char *envs[] = {"CUDA_PATH", "CUDA_HOME"};
    for (int i = 0; i < 2; i++) {
        const char *e = getenv(envs[i]);
        if (e != NULL && e[0] == '/')
            snprintf(cand[nc++], sizeof(cand[0]), "%s/include", e);
    }
    snprintf(cand[nc++], sizeof(cand[0]), "/usr/local/cuda/include");
    for (int i = 0; i < nc; i++) {
        char probe[PATH_MAX + 64];
        snprintf(probe, sizeof(probe), "%.4096s/cuda_fp16.h", cand[i]);
        if (access(probe, R_OK) == 0 && realpath(cand[i], real) != NULL) {
            snprintf(dir, len, "%s", real);
            return 0;
        }
    }
    return -1;
}

/* The cache key: SHA-256 over a version tag, NVRTC's version, the SM, the
 * digest of the headers the source includes (deps.h; "" for none), each
 * option and the source, each followed by a NUL. */
static void
w_key(const char *nvrtc, const char *sm, const char *deps, char *const *opts,
      int nopts, const char *src, size_t len, char hex[65])
{
    cumod_sha256 c;
    unsigned char out[32];

    cumod__sha256_init(&c);
    cumod__sha256_update(&c, "cumod-nvrtc-2", 14);
    cumod__sha256_update(&c, nvrtc, strlen(nvrtc) + 1);
    cumod__sha256_update(&c, sm, strlen(sm) + 1);
    cumod__sha256_update(&c, deps, strlen(deps) + 1);
    for (int i = 0; i < nopts; i++)
        cumod__sha256_update(&c, opts[i], strlen(opts[i]) + 1);
    cumod__sha256_update(&c, src, len);
    cumod__sha256_final(&c, out);
    cumod__sha256_hex(out, hex);
}

/* A cached image: DIR/KEY.cubin or DIR/KEY.ptx, its log beside it. */
static int
w_cache_get(const char *dir, const char *key, int out, int info)
{
    static const char *const kinds[] = {"cubin", "ptx"};
    char path[4200];

    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof(path), "%s/%s.%s", dir, key, kinds[k]);
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
            continue;
        size_t len = 0;
        char *bytes = w_read_fd(fd, &len);
        close(fd);
        if (bytes == NULL || len == 0) {
            free(bytes);
            continue;
        }
        int rc = w_write_all(out, bytes, len);
        free(bytes);
        if (rc != 0)
            return -1;
        snprintf(path, sizeof(path), "%s/%s.log", dir, key);
        if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) >= 0) {
            char *log = w_read_fd(fd, &len);
            close(fd);
            if (log != NULL)
                (void)w_write_all(2, log, len);
            free(log);
        }
        dprintf(info, "kind %s\ncached 1\n", kinds[k]);
        return 0;
    }
    return -1;
}

/* Writes DIR/KEY.EXT atomically (a temporary name, then rename). Failure to
 * cache is not a failure to compile. */
static void
w_cache_put(const char *dir, const char *key, const char *ext,
            const void *bytes, size_t len)
{
    char tmp[4200], path[4200];

    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return;
    snprintf(tmp, sizeof(tmp), "%s/.%s.%s.XXXXXX", dir, key, ext);
    snprintf(path, sizeof(path), "%s/%s.%s", dir, key, ext);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return;
    int ok = w_write_all(fd, bytes, len) == 0 && fsync(fd) == 0;
    close(fd);
    if (!ok || rename(tmp, path) != 0)
        unlink(tmp);
}

/* NVRTC dlopens libnvrtc-builtins.so.MAJOR.MINOR by name when it
 * compiles, which the loader finds through ld.so.cache, unreadable once
 * confined. Loaded now from NVRTC's folder, it is found by its soname. */
static void
w_preload_builtins(const w_nvrtc *n, int major, int minor)
{
    char path[PATH_MAX + 64];
    if (n->dir[0] == '\0')
        return;
    snprintf(path, sizeof(path), "%.4096s/libnvrtc-builtins.so.%d.%d", n->dir,
             major, minor);
    (void)dlopen(path, RTLD_NOW | RTLD_GLOBAL);
}

/* The include check (deps.h) over the roots; -1 with the refusal in the
 * log. */
static int
w_check(const char *name, const char *src, size_t len, char *const *opts,
        int nopts, const cumod_sandbox *sb)
{
    char path[PATH_MAX + 512], refused[1024], hex[65];
    snprintf(path, sizeof(path), "%s/%s", sb->read[0], name);
    (void)cumod__compile_deps(path, src, len, (const char *const *)opts,
                              (size_t)nopts, sb->read, sb->nread, hex, refused,
                              sizeof(refused));
    if (refused[0] == '\0')
        return 0;
    w_log("%s\n", refused);
    return -1;
}

/* One compile: the command line, the source and what the worker makes of
 * them. */
typedef struct w_job {
    const char *library, *name, *sm, *cache, *deps;
    char *const *opts; /* the caller's NVRTC options */
    int nopts;
    cumod_sandbox sb;
    char *src;
    size_t len;
    w_nvrtc n;
    char key[65];
    /* The options NVRTC gets: the caller's, then the toolkit's headers. */
    char **all;
    int nall;
    char tk[PATH_MAX], inc[PATH_MAX + 32], cccl[PATH_MAX + 40];
    char *log; /* NVRTC's program log */
    size_t loglen;
    int confined;
} w_job;

/* argv: cumodd --nvrtc-worker LIBRARY NAME SM CACHE DEPS [--root DIR]...
 * [--memory-max BYTES] [--cpu-max SECONDS] -- OPTIONS. 0, or -1 with the
 * usage in the log. */
static int
w_args(w_job *j, int argc, char **argv)
{
    int at = 7;
    while (argc >= 8 && at + 1 < argc && strcmp(argv[at], "--") != 0) {
        if (strcmp(argv[at], "--root") == 0 &&
            j->sb.nread < CUMOD_SANDBOX_MAX_ROOTS - 3)
            j->sb.read[j->sb.nread++] = argv[at + 1];
        else if (strcmp(argv[at], "--memory-max") == 0)
            j->sb.memory_max = strtoull(argv[at + 1], NULL, 10);
        else if (strcmp(argv[at], "--cpu-max") == 0)
            j->sb.cpu_s = (uint32_t)strtoul(argv[at + 1], NULL, 10);
        else
            break;
        at += 2;
    }
    if (argc < 8 || at >= argc || strcmp(argv[at], "--") != 0 ||
        j->sb.nread == 0) {
        w_log("usage: cumodd --nvrtc-worker LIBRARY NAME SM CACHE DEPS "
              "--root DIR [--root DIR]... [--memory-max BYTES] [--cpu-max "
              "SECONDS] -- OPTIONS...\n");
        return -1;
    }
    j->library = argv[2];
    j->name = argv[3];
    j->sm = argv[4];
    j->cache = argv[5][0] ? argv[5] : NULL;
    j->deps = argv[6];
    j->opts = argv + at + 1;
    j->nopts = argc - at - 1;
    return 0;
}

/* Dies with cumodd (a compile nobody will read is not left running), and
 * by the signal of a crash (which the daemon reports as such; a
 * sanitizer's handler would turn it into an exit status). -1 when cumodd
 * is gone already. */
static int
w_tie_to_daemon(void)
{
    static const int deadly[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

    if (cumod__parent_tie() != 0)
        return -1;
    for (size_t i = 0; i < sizeof(deadly) / sizeof(deadly[0]); i++)
        signal(deadly[i], SIG_DFL);
    return 0;
}

/* The options NVRTC gets: the caller's, then the toolkit's headers last
 * (the folder and the user's -I come first: they are part of the key;
 * these go with NVRTC's version), which the sandbox lets it read. */
static int
w_options(w_job *j)
{
    if ((j->all = calloc((size_t)j->nopts + 3, sizeof(*j->all))) == NULL) {
        w_log("out of memory\n");
        return -1;
    }
    memcpy(j->all, j->opts, (size_t)j->nopts * sizeof(*j->all));
    j->nall = j->nopts;
    j->tk[0] = '\0';
    if (w_toolkit_include(&j->n, j->tk, sizeof(j->tk)) == 0) {
        snprintf(j->inc, sizeof(j->inc), "--include-path=%s", j->tk);
        j->all[j->nall++] = j->inc;
        dprintf(3, "toolkit-include %s\n", j->tk);
        /* CUDA 13 moved libcu++ (cuda/std/...), CUB and Thrust here. */
        char probe[PATH_MAX + 32];
        snprintf(probe, sizeof(probe), "%s/cccl/cuda", j->tk);
        if (access(probe, R_OK) == 0) {
            snprintf(j->cccl, sizeof(j->cccl), "--include-path=%s/cccl", j->tk);
            j->all[j->nall++] = j->cccl;
        }
    }
    if (j->tk[0] != '\0')
        j->sb.read[j->sb.nread++] = j->tk;
    return 0;
}

/* Everything before NVRTC runs: the source, libnvrtc, the cache key, the
 * options and the include check, then the cache. Returns -1 to go on and
 * compile, else the exit status (a cache hit: CUMOD_COMPILE_OK). */
static int
w_prepare(w_job *j)
{
    if ((j->src = w_read_fd(0, &j->len)) == NULL) {
        w_log("%s: cannot read the source: %s\n", j->name, strerror(errno));
        return CUMOD_COMPILE_INTERNAL;
    }
    if (w_load(&j->n, j->library) != 0)
        return CUMOD_COMPILE_NO_NVRTC;
    int major = 0, minor = 0;
    if (j->n.version(&major, &minor) != 0) {
        w_log("nvrtcVersion failed\n");
        return CUMOD_COMPILE_NO_NVRTC;
    }
    char ver[32];
    snprintf(ver, sizeof(ver), "%d.%d", major, minor);
    w_preload_builtins(&j->n, major, minor);
    dprintf(3, "nvrtc %s\n", ver);
    w_key(ver, j->sm, j->deps, j->opts, j->nopts, j->src, j->len, j->key);
    dprintf(3, "key %s\n", j->key);
    if (w_options(j) != 0)
        return CUMOD_COMPILE_INTERNAL;
    /* Before the cache or NVRTC see it: an include that reaches outside
     * the roots fails here, naming its line, and is never opened. */
    if (w_check(j->name, j->src, j->len, j->opts, j->nopts, &j->sb) != 0)
        return CUMOD_COMPILE_FAILED;
    if (j->cache != NULL && w_cache_get(j->cache, j->key, 1, 3) == 0)
        return CUMOD_COMPILE_OK;
    return -1;
}

/* Confines the process in the source's folder (as a compiler given a
 * path runs: a quoted include names a file there first). 0 or -1. */
static int
w_confine(w_job *j)
{
    char msg[512];
    if (chdir(j->sb.read[0]) != 0) {
        w_log("%s: cannot enter %s: %s\n", j->name, j->sb.read[0],
              strerror(errno));
        return -1;
    }
    if (j->n.dir[0] != '\0')
        j->sb.read[j->sb.nread++] = j->n.dir;
    j->sb.cache = j->cache;
    if (cumod__sandbox_enter(&j->sb, msg, sizeof(msg)) != 0) {
        w_log("%s: cannot confine the compile: %s\n", j->name, msg);
        return -1;
    }
    j->confined = 1;
    return 0;
}

/* NVRTC's program log, copied to the log descriptor (and kept in j). */
static void
w_program_log(w_job *j, nvrtcProgram prog)
{
    if (j->n.log_size(prog, &j->loglen) == 0 && j->loglen > 1 &&
        (j->log = malloc(j->loglen)) != NULL && j->n.log(prog, j->log) == 0) {
        size_t l = strnlen(j->log, j->loglen);
        (void)w_write_all(2, j->log, l);
        if (l > 0 && j->log[l - 1] != '\n')
            (void)w_write_all(2, "\n", 1);
    }
}

/* What NVRTC made, written to descriptor 1 and to the cache. A real
 * architecture gives a cubin; a virtual one (compute_NN) only PTX, which
 * the driver's JIT then compiles with the module's JIT options. */
static int
w_output(w_job *j, nvrtcProgram prog)
{
    const char *ext = "cubin";
    size_t size = 0;
    char *img = NULL;
    int rc = CUMOD_COMPILE_INTERNAL;

    if (j->n.cubin_size == NULL || j->n.cubin_size(prog, &size) != 0 ||
        size == 0) {
        ext = "ptx";
        if (j->n.ptx_size(prog, &size) != 0 || size == 0) {
            w_log("NVRTC made neither a cubin nor PTX\n");
            return rc;
        }
    }
    if ((img = malloc(size)) == NULL ||
        (strcmp(ext, "cubin") == 0 ? j->n.cubin(prog, img)
                                   : j->n.ptx(prog, img)) != 0) {
        w_log("cannot get NVRTC's %s\n", ext);
        goto done;
    }
    if (strcmp(ext, "ptx") == 0)
        size = strnlen(img, size); /* without its NUL */
    if (w_write_all(1, img, size) != 0) {
        w_log("cannot hand the %s back: %s\n", ext, strerror(errno));
        goto done;
    }
    if (j->cache != NULL) {
        w_cache_put(j->cache, j->key, ext, img, size);
        if (j->log != NULL)
            w_cache_put(j->cache, j->key, "log", j->log,
                        strnlen(j->log, j->loglen));
    }
    dprintf(3, "kind %s\ncached 0\n", ext);
    rc = CUMOD_COMPILE_OK;
done:
    free(img);
    return rc;
}

/* Confined, NVRTC compiles the source; the exit status. */
static int
w_compile(w_job *j)
{
    nvrtcProgram prog = NULL;
    int rc = CUMOD_COMPILE_INTERNAL;

    if (w_confine(j) != 0)
        return rc;
    nvrtcResult r = j->n.create(&prog, j->src, j->name, 0, NULL, NULL);
    if (r != 0) {
        w_log("nvrtcCreateProgram: %s\n", j->n.error_string(r));
        return rc;
    }
    nvrtcResult cr = j->n.compile(prog, j->nall, (const char *const *)j->all);
    w_program_log(j, prog);
    if (cr != 0) {
        w_log("nvrtcCompileProgram: %s\n", j->n.error_string(cr));
        rc = CUMOD_COMPILE_FAILED;
    } else {
        rc = w_output(j, prog);
    }
    (void)j->n.destroy(&prog);
    return rc;
}

int
cumod__nvrtc_worker_main(int argc, char **argv)
{
    w_job j = {0};

    if (w_args(&j, argc, argv) != 0 || w_tie_to_daemon() != 0)
        return CUMOD_COMPILE_INTERNAL;
    int rc = w_prepare(&j);
    if (rc < 0)
        rc = w_compile(&j);
    free(j.all);
    free(j.log);
    free(j.src);
    /* libnvrtc stays mapped: unloading it at exit buys nothing. Confined,
     * the process skips the at-exit work: what runs there (a sanitizer's
     * leak check, which reads /proc and traces threads) cannot, and
     * everything was written unbuffered already. */
    if (j.confined)
        _exit(rc);
    return rc;
}
