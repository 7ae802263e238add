/* SPDX-License-Identifier: MIT */
/*
 * Starting the NVRTC worker and reading what it made (compile.h). Runs on
 * a thread of libuv's pool: it blocks while the worker compiles.
 */
#include "compile.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/status.h"

extern char **environ;

#define COMPILE_LOG_MAX (64 * 1024)

void
cumod__compilers_init(cumod_compilers *c)
{
    memset(c, 0, sizeof(*c));
    pthread_mutex_init(&c->mu, NULL);
}

void
cumod__compilers_fini(cumod_compilers *c)
{
    pthread_mutex_destroy(&c->mu);
}

static int
compile_track(cumod_compilers *c, pid_t pid)
{
    int slot = -1;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < CUMOD_COMPILE_MAX_RUNNING && slot < 0; i++)
        if (c->running[i] == 0) {
            c->running[i] = pid;
            slot = i;
        }
    if (c->cancelled)
        kill(pid, SIGKILL);
    pthread_mutex_unlock(&c->mu);
    return slot;
}

static void
compile_untrack(cumod_compilers *c, int slot)
{
    if (slot < 0)
        return;
    pthread_mutex_lock(&c->mu);
    c->running[slot] = 0;
    pthread_mutex_unlock(&c->mu);
}

void
cumod__compile_cancel_all(cumod_compilers *c)
{
    pthread_mutex_lock(&c->mu);
    c->cancelled = 1;
    for (int i = 0; i < CUMOD_COMPILE_MAX_RUNNING; i++)
        if (c->running[i] > 0)
            kill(c->running[i], SIGKILL);
    pthread_mutex_unlock(&c->mu);
}

int
cumod__compile_names_arch(const char *o)
{
    static const char *const names[] = {"-arch", "--gpu-architecture",
                                        "--gpu-name", "-code"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        size_t n = strlen(names[i]);
        if (strncmp(o, names[i], n) == 0 && (o[n] == '\0' || o[n] == '='))
            return 1;
    }
    return 0;
}

/* Up to max bytes of a memfd, NUL-terminated (malloc'd). */
static char *
compile_slurp(int fd, size_t max)
{
    struct stat st;
    size_t len = 0;
    if (fstat(fd, &st) == 0 && st.st_size > 0)
        len = (size_t)st.st_size < max ? (size_t)st.st_size : max;
    char *buf = malloc(len + 1);
    if (buf == NULL)
        return NULL;
    ssize_t n = len ? pread(fd, buf, len, 0) : 0;
    buf[n > 0 ? n : 0] = '\0';
    /* Keep the log printable: NULs would cut it short. */
    for (ssize_t i = 0; i < n; i++)
        if (buf[i] == '\0')
            buf[i] = ' ';
    return buf;
}

/* Waits for pid at most timeout_ms; kills it after. Returns the status
 * from waitpid, or -1 with *timed_out set. */
static int
compile_wait(pid_t pid, uint32_t timeout_ms, int *timed_out)
{
    int status = 0;
    uint64_t end = (cumod__mono_ns() / 1000000) + timeout_ms;
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);

    *timed_out = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR) {
            status = -1;
            break;
        }
        uint64_t now = (cumod__mono_ns() / 1000000);
        if (now >= end) {
            *timed_out = 1;
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
            break;
        }
        uint64_t left = end - now;
        if (pfd >= 0) {
            struct pollfd p = {.fd = pfd, .events = POLLIN};
            (void)poll(&p, 1, left > 1000 ? 1000 : (int)left);
        } else {
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    if (pfd >= 0)
        close(pfd);
    return status;
}

/* The worker's "key value" lines. */
static void
compile_info(const char *info, cumod_compile_res *res, int *ptx)
{
    const char *l = info;
    while (l != NULL && *l) {
        char k[16], v[80];
        if (sscanf(l, "%15s %79s", k, v) == 2) {
            if (strcmp(k, "kind") == 0)
                *ptx = strcmp(v, "ptx") == 0;
            else if (strcmp(k, "cached") == 0)
                res->cached = strcmp(v, "1") == 0;
            else if (strcmp(k, "nvrtc") == 0)
                snprintf(res->nvrtc, sizeof(res->nvrtc), "%.31s", v);
            else if (strcmp(k, "key") == 0)
                snprintf(res->key, sizeof(res->key), "%.64s", v);
        }
        l = strchr(l, '\n');
        if (l != NULL)
            l++;
    }
}

/* The last lines of log (what a message can carry). */
static const char *
compile_log_tail(const char *log, size_t max)
{
    size_t n = strlen(log);
    while (n > 0 && (log[n - 1] == '\n' || log[n - 1] == ' '))
        n--;
    if (n <= max)
        return log;
    const char *t = log + n - max;
    const char *nl = strchr(t, '\n');
    return nl != NULL && nl < log + n ? nl + 1 : t;
}

/* The worker's command line (compile.h, cumod__nvrtc_worker_main) for req,
 * in argv (room for nopts + 2 * nroots + 13); sm, mem and cpu hold its
 * numbers. */
static void
compile_argv(const cumod_compile_req *req, char **argv, char sm[16],
             char mem[32], char cpu[16])
{
    size_t a = 0;

    snprintf(sm, 16, "%u%u", req->sm_major, req->sm_minor);
    argv[a++] = (char *)req->program;
    argv[a++] = (char *)"--nvrtc-worker";
    argv[a++] = (char *)(req->library ? req->library : "");
    argv[a++] = (char *)req->name;
    argv[a++] = sm;
    argv[a++] = (char *)(req->cache_dir ? req->cache_dir : "");
    argv[a++] = (char *)(req->deps ? req->deps : "");
    for (size_t i = 0; i < req->nroots; i++) {
        argv[a++] = (char *)"--root";
        argv[a++] = (char *)req->roots[i];
    }
    snprintf(mem, 32, "%llu", (unsigned long long)req->memory_max);
    argv[a++] = (char *)"--memory-max";
    argv[a++] = mem;
    /* CPU seconds: the wall-clock limit, rounded up. */
    snprintf(cpu, 16, "%u", (req->timeout_ms + 999) / 1000);
    argv[a++] = (char *)"--cpu-max";
    argv[a++] = cpu;
    argv[a++] = (char *)"--";
    for (size_t i = 0; i < req->nopts; i++)
        argv[a++] = (char *)req->opts[i];
    argv[a] = NULL;
}

/* Runs the worker with the source on 0, out on 1, log on 2 and info on
 * 3, and waits for it (registered in req->workers meanwhile). The status
 * from waitpid, -1 when lost; -2 when it could not start (msg says why). */
static int
compile_run(const cumod_compile_req *req, char **argv, int out, int log,
            int info, int *timed_out, char *msg, size_t msglen)
{
    posix_spawn_file_actions_t fa;
    pid_t pid;
    int e;

    if (posix_spawn_file_actions_init(&fa) != 0)
        return -2;
    /* dup2 clears close-on-exec on the copies; everything else the daemon
     * holds is close-on-exec and stays behind. */
    if (posix_spawn_file_actions_adddup2(&fa, req->src_fd, 0) != 0 ||
        posix_spawn_file_actions_adddup2(&fa, out, 1) != 0 ||
        posix_spawn_file_actions_adddup2(&fa, log, 2) != 0 ||
        posix_spawn_file_actions_adddup2(&fa, info, 3) != 0) {
        posix_spawn_file_actions_destroy(&fa);
        return -2;
    }
    (void)lseek(req->src_fd, 0, SEEK_SET);
    e = posix_spawn(&pid, req->program, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (e != 0) {
        cumod__msgf(msg, msglen, "%s: cannot start the NVRTC worker %s: %s",
                    req->path, req->program, strerror(e));
        return -2;
    }
    int slot = compile_track(req->workers, pid);
    int status = compile_wait(pid, req->timeout_ms, timed_out);
    compile_untrack(req->workers, slot);
    return status;
}

/* What the worker's end means: CUMOD_OK when it made an image, else the
 * error with a sentence in msg (tail: the last lines of its log). */
static cumod_err
compile_outcome(const cumod_compile_req *req, const cumod_compile_res *res,
                int status, int timed_out, const char *tail, char *msg,
                size_t msglen)
{
    if (timed_out) {
        cumod__msgf(msg, msglen,
                    "%s: the compile ran past its limit of %u ms and was "
                    "killed (--compile-timeout)",
                    req->path, req->timeout_ms);
        return CUMOD_ETIMEDOUT;
    }
    if (status == -1 || WIFSIGNALED(status)) {
        int sig = status == -1 ? 0 : WTERMSIG(status);
        cumod__msgf(msg, msglen,
                    "%s: the NVRTC worker died (%s) while compiling it%s%s",
                    req->path, sig ? strsignal(sig) : "lost",
                    tail[0] ? ": " : "", tail);
        return CUMOD_EINTERNAL;
    }
    switch (WEXITSTATUS(status)) {
    case CUMOD_COMPILE_OK:
        return CUMOD_OK;
    case CUMOD_COMPILE_FAILED:
        cumod__msgf(msg, msglen, "%s does not compile (NVRTC %s): %s",
                    req->path, res->nvrtc[0] ? res->nvrtc : "?", tail);
        return CUMOD_EIMAGE;
    case CUMOD_COMPILE_NO_NVRTC:
        cumod__msgf(msg, msglen, "%s cannot be compiled: %s", req->path, tail);
        return CUMOD_ENOTSUP;
    default:
        cumod__msgf(msg, msglen, "%s: the NVRTC worker failed (status %d): %s",
                    req->path, WEXITSTATUS(status), tail);
        return CUMOD_EINTERNAL;
    }
}

cumod_err
cumod__compile(const cumod_compile_req *req, cumod_compile_res *res, char *msg,
               size_t msglen)
{
    int out = -1, log = -1, info = -1;
    char sm[16], mem[32], cpu[16];
    char **argv = NULL;
    cumod_err rc = CUMOD_EINTERNAL;

    memset(res, 0, sizeof(*res));
    res->img = (cumod_image)CUMOD_IMAGE_INIT;
    out = memfd_create("cumod:nvrtc-out", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    log = memfd_create("cumod:nvrtc-log", MFD_CLOEXEC);
    info = memfd_create("cumod:nvrtc-info", MFD_CLOEXEC);
    argv = calloc(req->nopts + 2 * req->nroots + 13, sizeof(*argv));
    if (out < 0 || log < 0 || info < 0 || argv == NULL) {
        cumod__msgf(msg, msglen, "%s: cannot start the compile: %s", req->path,
                    argv ? strerror(errno) : "out of memory");
        goto done;
    }
    compile_argv(req, argv, sm, mem, cpu);
    uint64_t t0 = (cumod__mono_ns() / 1000000);
    int timed_out = 0;
    int status =
        compile_run(req, argv, out, log, info, &timed_out, msg, msglen);
    if (status == -2)
        goto done;
    res->ms = (cumod__mono_ns() / 1000000) - t0;
    res->log = compile_slurp(log, COMPILE_LOG_MAX);
    char *inf = compile_slurp(info, 4096);
    int ptx = 0;
    compile_info(inf, res, &ptx);
    free(inf);
    const char *tail = compile_log_tail(res->log ? res->log : "", 1500);
    rc = compile_outcome(req, res, status, timed_out, tail, msg, msglen);
    if (rc != CUMOD_OK)
        goto done;
    struct stat st;
    if (fstat(out, &st) != 0 || st.st_size <= 0) {
        cumod__msgf(msg, msglen, "%s: the NVRTC worker made no image",
                    req->path);
        rc = CUMOD_EINTERNAL;
        goto done;
    }
    char what[600];
    snprintf(what, sizeof(what), "%s (compiled to %s)", req->path,
             ptx ? "PTX" : "a cubin");
    rc = cumod__image_from_memfd(
        out, (size_t)st.st_size, ptx ? CUMOD_IMAGE_PTX : CUMOD_IMAGE_CUBIN,
        what, req->sm_major, req->sm_minor, &res->img, msg, msglen);
    out = -1; /* taken */
done:
    free(argv);
    if (out >= 0)
        close(out);
    if (log >= 0)
        close(log);
    if (info >= 0)
        close(info);
    if (rc != CUMOD_OK)
        cumod__image_fini(&res->img);
    return rc;
}

void
cumod__compile_res_fini(cumod_compile_res *res)
{
    cumod__image_fini(&res->img);
    free(res->log);
    res->log = NULL;
}
