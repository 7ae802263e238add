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

#include "log.h"
#include "status.h"

extern char **environ;

#define COMPILE_LOG_MAX (64 * 1024)

/* The workers running now, so that a stopping daemon need not wait out
 * their time limits (cumod__compile_cancel_all). Any thread. */
#define COMPILE_MAX_RUNNING 64
static pthread_mutex_t compile_mu = PTHREAD_MUTEX_INITIALIZER;
static pid_t compile_running[COMPILE_MAX_RUNNING];
static int compile_cancelled;

static int
compile_track(pid_t pid)
{
    int slot = -1;
    pthread_mutex_lock(&compile_mu);
    for (int i = 0; i < COMPILE_MAX_RUNNING && slot < 0; i++)
        if (compile_running[i] == 0) {
            compile_running[i] = pid;
            slot = i;
        }
    if (compile_cancelled)
        kill(pid, SIGKILL);
    pthread_mutex_unlock(&compile_mu);
    return slot;
}

static void
compile_untrack(int slot)
{
    if (slot < 0)
        return;
    pthread_mutex_lock(&compile_mu);
    compile_running[slot] = 0;
    pthread_mutex_unlock(&compile_mu);
}

void
cumod__compile_cancel_all(void)
{
    pthread_mutex_lock(&compile_mu);
    compile_cancelled = 1;
    for (int i = 0; i < COMPILE_MAX_RUNNING; i++)
        if (compile_running[i] > 0)
            kill(compile_running[i], SIGKILL);
    pthread_mutex_unlock(&compile_mu);
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

cumod_err
cumod__compile(const cumod_compile_req *req, cumod_compile_res *res, char *msg,
               size_t msglen)
{
    int out = -1, log = -1, info = -1;
    char sm[16], mem[32], cpu[16];
    char **argv = NULL;
    cumod_err rc = CUMOD_EINTERNAL;
    posix_spawn_file_actions_t fa;
    int fa_ok = 0;
    pid_t pid;

    memset(res, 0, sizeof(*res));
    res->img = (cumod_image)CUMOD_IMAGE_INIT;
    snprintf(sm, sizeof(sm), "%u%u", req->sm_major, req->sm_minor);
    out = memfd_create("cumod:nvrtc-out", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    log = memfd_create("cumod:nvrtc-log", MFD_CLOEXEC);
    info = memfd_create("cumod:nvrtc-info", MFD_CLOEXEC);
    argv = calloc(req->nopts + 2 * req->nroots + 13, sizeof(*argv));
    if (out < 0 || log < 0 || info < 0 || argv == NULL) {
        cumod__msgf(msg, msglen, "%s: cannot start the compile: %s", req->path,
                    argv ? strerror(errno) : "out of memory");
        goto done;
    }
    size_t a = 0;
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
    snprintf(mem, sizeof(mem), "%llu", (unsigned long long)req->memory_max);
    argv[a++] = (char *)"--memory-max";
    argv[a++] = mem;
    /* CPU seconds: the wall-clock limit, rounded up. */
    snprintf(cpu, sizeof(cpu), "%u", (req->timeout_ms + 999) / 1000);
    argv[a++] = (char *)"--cpu-max";
    argv[a++] = cpu;
    argv[a++] = (char *)"--";
    for (size_t i = 0; i < req->nopts; i++)
        argv[a++] = (char *)req->opts[i];
    argv[a] = NULL;
    if (posix_spawn_file_actions_init(&fa) != 0)
        goto done;
    fa_ok = 1;
    /* dup2 clears close-on-exec on the copies; everything else the daemon
     * holds is close-on-exec and stays behind. */
    if (posix_spawn_file_actions_adddup2(&fa, req->src_fd, 0) != 0 ||
        posix_spawn_file_actions_adddup2(&fa, out, 1) != 0 ||
        posix_spawn_file_actions_adddup2(&fa, log, 2) != 0 ||
        posix_spawn_file_actions_adddup2(&fa, info, 3) != 0)
        goto done;
    (void)lseek(req->src_fd, 0, SEEK_SET);
    uint64_t t0 = (cumod__mono_ns() / 1000000);
    int e = posix_spawn(&pid, req->program, &fa, NULL, argv, environ);
    if (e != 0) {
        cumod__msgf(msg, msglen, "%s: cannot start the NVRTC worker %s: %s",
                    req->path, req->program, strerror(e));
        goto done;
    }
    int slot = compile_track(pid);
    int timed_out = 0;
    int status = compile_wait(pid, req->timeout_ms, &timed_out);
    compile_untrack(slot);
    res->ms = (cumod__mono_ns() / 1000000) - t0;
    res->log = compile_slurp(log, COMPILE_LOG_MAX);
    char *inf = compile_slurp(info, 4096);
    int ptx = 0;
    compile_info(inf, res, &ptx);
    free(inf);
    const char *tail = compile_log_tail(res->log ? res->log : "", 1500);
    if (timed_out) {
        rc = CUMOD_ETIMEDOUT;
        cumod__msgf(msg, msglen,
                    "%s: the compile ran past its limit of %u ms and was "
                    "killed (--compile-timeout)",
                    req->path, req->timeout_ms);
        goto done;
    }
    if (status == -1 || WIFSIGNALED(status)) {
        int sig = status == -1 ? 0 : WTERMSIG(status);
        cumod__msgf(msg, msglen,
                    "%s: the NVRTC worker died (%s) while compiling it%s%s",
                    req->path, sig ? strsignal(sig) : "lost",
                    tail[0] ? ": " : "", tail);
        goto done;
    }
    switch (WEXITSTATUS(status)) {
    case CUMOD_COMPILE_OK:
        break;
    case CUMOD_COMPILE_FAILED:
        rc = CUMOD_EIMAGE;
        cumod__msgf(msg, msglen, "%s does not compile (NVRTC %s): %s",
                    req->path, res->nvrtc[0] ? res->nvrtc : "?", tail);
        goto done;
    case CUMOD_COMPILE_NO_NVRTC:
        rc = CUMOD_ENOTSUP;
        cumod__msgf(msg, msglen, "%s cannot be compiled: %s", req->path, tail);
        goto done;
    default:
        cumod__msgf(msg, msglen, "%s: the NVRTC worker failed (status %d): %s",
                    req->path, WEXITSTATUS(status), tail);
        goto done;
    }
    struct stat st;
    if (fstat(out, &st) != 0 || st.st_size <= 0) {
        cumod__msgf(msg, msglen, "%s: the NVRTC worker made no image",
                    req->path);
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
    if (fa_ok)
        posix_spawn_file_actions_destroy(&fa);
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
