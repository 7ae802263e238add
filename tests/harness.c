/* SPDX-License-Identifier: MIT */
#include "harness.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cumod/cumod.h"

extern char **environ;

const char *const th_cumodd = CUMOD_TEST_CUMODD;
const char *const th_cumodctl = CUMOD_TEST_CUMODCTL;
const char *const th_fakecuda = CUMOD_TEST_FAKECUDA;
const char *const th_fakecublas = CUMOD_TEST_FAKECUBLAS;
const char *const th_kernel_dir = CUMOD_TEST_KERNEL_DIR;

int
th_real_gpu(void)
{
    return th_suite_real_gpu;
}

int
th_gpu_available(const char **why)
{
    static char msg[256];
    void *dl;
    int (*init)(unsigned);
    int r;

    if (!th_real_gpu())
        return 1;
    if ((dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) == NULL) {
        snprintf(msg, sizeof(msg),
                 "no NVIDIA driver on this machine (libcuda.so.1 not found): "
                 "GPU test skipped");
        *why = msg;
        return 0;
    }
    *(void **)&init = dlsym(dl, "cuInit");
    r = init ? init(0) : -1;
    /* Keep the library loaded: unloading an initialised driver is not
     * supported, and Criterion forks each test from this process. */
    if (r != 0) {
        snprintf(msg, sizeof(msg),
                 "the NVIDIA driver found no usable GPU (cuInit: %d): GPU test "
                 "skipped",
                 r);
        *why = msg;
        return 0;
    }
    return 1;
}

void
th_sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000,
                          .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

double
th_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int
th_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    int rc = fputs(text, f) < 0 ? -1 : 0;
    return fclose(f) != 0 ? -1 : rc;
}

void
th_tmpdir(char *out, size_t cap)
{
    const char *t = getenv("TMPDIR");
    snprintf(out, cap, "%s/cumod-test.XXXXXX", t && t[0] ? t : "/tmp");
    if (mkdtemp(out) == NULL) {
        perror("mkdtemp");
        abort();
    }
}

static int
th_rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    remove(path);
    return 0;
}

void
th_rmtree(const char *path)
{
    nftw(path, th_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* environ plus settings, for posix_spawn; the caller frees the array (not
 * the strings, which are borrowed). */
static char **
th_env(const char *const *add)
{
    size_t n = 0, k = 0;
    while (environ[n])
        n++;
    while (add && add[k])
        k++;
    char **e = calloc(n + k + 1, sizeof(char *));
    size_t j = 0;
    for (size_t i = 0; i < k; i++)
        e[j++] = (char *)add[i];
    for (size_t i = 0; i < n; i++) {
        /* Settings in add win over inherited ones of the same name. */
        const char *eq = strchr(environ[i], '=');
        size_t len = eq ? (size_t)(eq - environ[i]) + 1 : strlen(environ[i]);
        int dup = 0;
        for (size_t a = 0; a < k; a++)
            if (strncmp(add[a], environ[i], len) == 0)
                dup = 1;
        if (!dup)
            e[j++] = environ[i];
    }
    e[j] = NULL;
    return e;
}

char *
th_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0;
    if (f == NULL)
        return NULL;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = (cap + 4096) * 2;
            buf = realloc(buf, cap);
        }
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0)
            break;
    }
    fclose(f);
    buf[len] = '\0';
    return buf;
}

/* Daemons this test process started: a test that fails an assertion ends
 * without stopping its daemon, so the process kills what is left at exit
 * rather than leave it running (and polling held work) after the suite. */
static pid_t th_started[64];
static int th_nstarted;

static void
th_kill_started(void)
{
    for (int i = 0; i < th_nstarted; i++)
        if (th_started[i] > 0 && kill(th_started[i], 0) == 0) {
            kill(th_started[i], SIGKILL);
            (void)waitpid(th_started[i], NULL, 0);
        }
}

static void
th_remember(pid_t pid)
{
    if (th_nstarted == 0)
        atexit(th_kill_started);
    if (th_nstarted < 64)
        th_started[th_nstarted++] = pid;
}

static void
th_forget(pid_t pid)
{
    for (int i = 0; i < th_nstarted; i++)
        if (th_started[i] == pid)
            th_started[i] = 0;
}

int
th_daemon_start(th_daemon *d, const char *const *args, const char *const *env)
{
    memset(d, 0, sizeof(*d));
    th_tmpdir(d->dir, sizeof(d->dir));
    snprintf(d->url, sizeof(d->url), "ipc://%s/cumodd.sock", d->dir);
    snprintf(d->log, sizeof(d->log), "%s/cumodd.log", d->dir);
    return th_daemon_start_again(d, args, env);
}

int
th_daemon_start_again(th_daemon *d, const char *const *args,
                      const char *const *env)
{
    const char *argv[64];
    char **e;
    int n = 0, fd;
    posix_spawn_file_actions_t fa;

    d->pid = 0;
    d->exited = 0;
    d->status = 0;

    argv[n++] = th_cumodd;
    argv[n++] = "--listen";
    argv[n++] = d->url;
    if (!th_real_gpu()) {
        argv[n++] = "--cuda-library";
        argv[n++] = th_fakecuda;
        /* Never the machine's cuBLAS on the fake driver. */
        argv[n++] = "--cublas-library";
        argv[n++] = th_fakecublas;
    }
    for (int i = 0; args && args[i] && n < 62; i++)
        argv[n++] = args[i];
    argv[n] = NULL;

    fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fd, 1);
    posix_spawn_file_actions_adddup2(&fa, fd, 2);
    e = th_env(env);
    if (posix_spawn(&d->pid, th_cumodd, &fa, NULL, (char *const *)argv, e) !=
        0) {
        perror("posix_spawn cumodd");
        abort();
    }
    th_remember(d->pid);
    free(e);
    posix_spawn_file_actions_destroy(&fa);
    close(fd);

    /* Ready when a client gets an answer; 20 s covers a cold real driver
     * and a sanitizer build on a loaded machine. */
    double deadline = th_now_ms() + 20000;
    while (th_now_ms() < deadline) {
        cumod_client *c;
        if (th_daemon_wait(d, 0) >= 0)
            return -1;
        if (cumod_open(d->url, 2000, &c) == CUMOD_OK) {
            cumod_device_info di;
            int rv = cumod_device_info_get(c, &di);
            cumod_close(c);
            if (rv == CUMOD_OK)
                return 0;
        }
        th_sleep_ms(20);
    }
    return -1;
}

int
th_daemon_wait(th_daemon *d, int ms)
{
    double deadline = th_now_ms() + ms;
    if (d->exited)
        return WIFEXITED(d->status) ? WEXITSTATUS(d->status)
                                    : 128 + WTERMSIG(d->status);
    do {
        pid_t p = waitpid(d->pid, &d->status, WNOHANG);
        if (p == d->pid) {
            d->exited = 1;
            th_forget(d->pid);
            return WIFEXITED(d->status) ? WEXITSTATUS(d->status)
                                        : 128 + WTERMSIG(d->status);
        }
        if (ms > 0)
            th_sleep_ms(5);
    } while (th_now_ms() < deadline);
    return -1;
}

int
th_daemon_stop(th_daemon *d)
{
    int rc;
    if (d->pid <= 0)
        return -1;
    if (!d->exited)
        kill(d->pid, SIGTERM);
    if ((rc = th_daemon_wait(d, 10000)) < 0) {
        kill(d->pid, SIGKILL);
        rc = th_daemon_wait(d, 5000);
        if (rc >= 0)
            rc = 128 + SIGKILL;
    }
    th_rmtree(d->dir);
    return rc;
}

char *
th_daemon_log(const th_daemon *d)
{
    char *s = th_read_file(d->log);
    return s ? s : strdup("");
}

static void
th_drain(int fd, char **buf, size_t *len, size_t *cap)
{
    char tmp[4096];
    ssize_t n = read(fd, tmp, sizeof(tmp));
    if (n <= 0)
        return;
    if (*len + (size_t)n + 1 > *cap) {
        *cap = (*cap + (size_t)n + 1) * 2;
        *buf = realloc(*buf, *cap);
    }
    memcpy(*buf + *len, tmp, (size_t)n);
    *len += (size_t)n;
    (*buf)[*len] = '\0';
}

int
th_run(const char *const *argv, const char *const *env, char **out, char **err,
       int timeout_ms)
{
    int po[2], pe[2], status = 0;
    char *bo = calloc(1, 1), *be = calloc(1, 1);
    size_t lo = 0, co = 1, le = 0, ce = 1;
    posix_spawn_file_actions_t fa;
    pid_t pid;
    char **e;
    double deadline = th_now_ms() + timeout_ms;
    int killed = 0;

    if (pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0)
        abort();
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, po[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
    e = th_env(env);
    if (posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, e) != 0)
        abort();
    free(e);
    posix_spawn_file_actions_destroy(&fa);
    close(po[1]);
    close(pe[1]);

    struct pollfd pfd[2] = {{.fd = po[0], .events = POLLIN},
                            {.fd = pe[0], .events = POLLIN}};
    int open_fds = 2;
    while (open_fds > 0) {
        long left = (long)(deadline - th_now_ms());
        if (left <= 0) {
            kill(pid, SIGKILL);
            killed = 1;
            break;
        }
        if (poll(pfd, 2, (int)left) <= 0)
            continue;
        for (int i = 0; i < 2; i++) {
            if (pfd[i].fd < 0 || !(pfd[i].revents & (POLLIN | POLLHUP)))
                continue;
            size_t before = i ? le : lo;
            if (i)
                th_drain(pe[0], &be, &le, &ce);
            else
                th_drain(po[0], &bo, &lo, &co);
            if ((i ? le : lo) == before) { /* EOF */
                pfd[i].fd = -1;
                open_fds--;
            }
        }
    }
    close(po[0]);
    close(pe[0]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (out)
        *out = bo;
    else
        free(bo);
    if (err)
        *err = be;
    else
        free(be);
    if (killed)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int
th_ctl(const th_daemon *d, const char *const *args, char **out, char **err)
{
    const char *argv[32];
    int n = 0;
    argv[n++] = th_cumodctl;
    argv[n++] = "--url";
    argv[n++] = d->url;
    for (int i = 0; args && args[i] && n < 31; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    return th_run(argv, NULL, out, err, 15000);
}

int
th_daemon_start_in(th_daemon *d, const char *dir, const char *const *extra,
                   const char *const *env)
{
    const char *args[48] = {"--kernels", dir};
    int n = 2;
    for (int i = 0; extra && extra[i] && n < 47; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    return th_daemon_start(d, args, env);
}

int
th_copy(const char *src, const char *dir, const char *name)
{
    char dst[1024];
    snprintf(dst, sizeof(dst), "%s/%s", dir, name);
    const char *argv[] = {"/bin/cp", src, dst, NULL};
    return th_run(argv, NULL, NULL, NULL, 10000) == 0 ? 0 : -1;
}

int
th_free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int s = socket(AF_INET, SOCK_STREAM, 0), port = -1;
    if (s < 0)
        return -1;
    if (bind(s, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(s, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(s);
    return port;
}

char *
th_metrics_get(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    const char req[] = "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n";
    size_t cap = 1 << 16, len = 0;
    char *buf = NULL;
    ssize_t n;
    int s = socket(AF_INET, SOCK_STREAM, 0);

    if (s < 0)
        return NULL;
    if (connect(s, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        write(s, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1 ||
        (buf = malloc(cap)) == NULL)
        goto done;
    while ((n = read(s, buf + len, cap - len - 1)) > 0) {
        len += (size_t)n;
        if (len + 1 == cap) {
            char *g = realloc(buf, cap *= 2);
            if (g == NULL) {
                free(buf);
                buf = NULL;
                goto done;
            }
            buf = g;
        }
    }
    buf[len] = '\0';
done:
    close(s);
    return buf;
}

double
th_metric_sum(int port, const char *name, const char *label)
{
    char *m = th_metrics_get(port);
    double sum = -1;
    size_t nl = strlen(name);
    for (char *l = m; l != NULL && *l != '\0';) {
        char *end = strchr(l, '\n');
        if (end != NULL)
            *end = '\0';
        if (strncmp(l, name, nl) == 0 && (l[nl] == ' ' || l[nl] == '{')) {
            char *sp = strrchr(l, ' ');
            char *lab = strchr(l, '{');
            if (sp != NULL &&
                (label[0] == '\0' || (lab != NULL && lab < sp &&
                                      memmem(lab, (size_t)(sp - lab), label,
                                             strlen(label)) != NULL)))
                sum = (sum < 0 ? 0 : sum) + atof(sp + 1);
        }
        l = end ? end + 1 : NULL;
    }
    free(m);
    return sum;
}

double
th_metric(int port, const char *series)
{
    char *m = th_metrics_get(port);
    double v = -1;
    size_t n = strlen(series);
    for (const char *l = m; l != NULL && *l != '\0';) {
        if (strncmp(l, series, n) == 0) {
            v = strtod(l + n, NULL);
            break;
        }
        const char *e = strchr(l, '\n');
        l = e != NULL ? e + 1 : NULL;
    }
    free(m);
    return v;
}
