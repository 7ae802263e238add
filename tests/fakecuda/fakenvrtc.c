/* SPDX-License-Identifier: MIT */
/*
 * libfakenvrtc.so: an NVRTC that misbehaves on request, for the tests of
 * the compile worker's isolation (compile_test). It compiles nothing: a
 * source holding FAKE_NVRTC_CRASH crashes the process (SIGSEGV),
 * FAKE_NVRTC_HANG never returns, FAKE_NVRTC_EXIT exits; a source holding
 * FAKE_NVRTC_LOG fails with the text after it as its log (what a #line
 * or an #error would put there); any other source fails with a log that
 * says so. The real NVRTC does the real compiles.
 *
 * Includes are opened as NVRTC opens them, with open(2) (so the worker's
 * Landlock rules apply): `#include "x"` in the current folder, then each
 * --include-path; `<x>` in the include paths; `// FAKE_NVRTC_OPEN PATH`
 * stands for an include named by a macro, which no text check sees. One
 * that cannot be opened is NVRTC's "catastrophic error: cannot open source
 * file"; one that is opened and does not start like C++ gets NVRTC's
 * complaint quoting its first line, as the real one quotes a bad line.
 *
 * Probes of its own confinement (sandbox_test), each a `// MARKER ARG`
 * line, reported in the log as "probe ...: RESULT": FAKE_NVRTC_PROBE_SOCKET
 * PORT opens TCP sockets (IPv4, IPv6) and connects to 127.0.0.1:PORT;
 * FAKE_NVRTC_PROBE_PRIVS reads no_new_privs and the seccomp mode;
 * FAKE_NVRTC_PROBE_ALLOC SIZE maps and touches SIZE bytes (K, M, G);
 * FAKE_NVRTC_PROBE_WRITE PATH creates a file; FAKE_NVRTC_PROBE_CPU writes
 * its CPU limit to the log (fd 2) at once, then spins on two threads until
 * it is killed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

typedef int nvrtcResult;
typedef struct fake_prog {
    char *src;
    char *name;
    char *log; /* malloc'd */
    size_t loglen;
    int errors;
} fake_prog;

/* NVRTC's entry points (nvrtc.h's, with the program as fake_prog). */
const char *nvrtcGetErrorString(nvrtcResult r);
nvrtcResult nvrtcVersion(int *major, int *minor);
nvrtcResult nvrtcCreateProgram(fake_prog **prog, const char *src,
                               const char *name, int nheaders,
                               const char *const *headers,
                               const char *const *include_names);
nvrtcResult nvrtcDestroyProgram(fake_prog **prog);
nvrtcResult nvrtcCompileProgram(fake_prog *p, int n, const char *const *opts);
nvrtcResult nvrtcGetProgramLogSize(fake_prog *p, size_t *size);
nvrtcResult nvrtcGetProgramLog(fake_prog *p, char *log);
nvrtcResult nvrtcGetPTXSize(fake_prog *p, size_t *size);
nvrtcResult nvrtcGetPTX(fake_prog *p, char *ptx);

const char *
nvrtcGetErrorString(nvrtcResult r)
{
    return r == 0 ? "NVRTC_SUCCESS" : "NVRTC_ERROR_COMPILATION";
}

nvrtcResult
nvrtcVersion(int *major, int *minor)
{
    *major = 99;
    *minor = 0;
    return 0;
}

nvrtcResult
nvrtcCreateProgram(fake_prog **prog, const char *src, const char *name,
                   int nheaders, const char *const *headers,
                   const char *const *include_names)
{
    (void)nheaders, (void)headers, (void)include_names;
    fake_prog *p = calloc(1, sizeof(*p));
    if (p == NULL || (p->src = strdup(src)) == NULL ||
        (p->name = strdup(name ? name : "default_program")) == NULL) {
        if (p != NULL)
            free(p->src);
        free(p);
        return 1;
    }
    *prog = p;
    return 0;
}

nvrtcResult
nvrtcDestroyProgram(fake_prog **prog)
{
    if (prog && *prog) {
        free((*prog)->src);
        free((*prog)->name);
        free((*prog)->log);
        free(*prog);
        *prog = NULL;
    }
    return 0;
}

static void fake_logf(fake_prog *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
fake_logf(fake_prog *p, const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (k < 0)
        return;
    size_t add = strlen(line);
    char *grown = realloc(p->log, p->loglen + add + 1);
    if (grown == NULL)
        return;
    memcpy(grown + p->loglen, line, add + 1);
    p->log = grown;
    p->loglen += add;
}

/* Opens what an include names (the current folder first for a quoted
 * one, then the include paths), as the preprocessor does: the first that
 * is there is taken. -1 with errno from the first that was there. */
static int
fake_open(const char *file, int quoted, int n, const char *const *opts)
{
    char path[4096];
    if (file[0] == '/' || quoted) {
        int fd = open(file, O_RDONLY | O_CLOEXEC);
        if (fd >= 0 || errno != ENOENT || file[0] == '/')
            return fd;
    }
    for (int i = 0; i < n; i++) {
        if (strncmp(opts[i], "--include-path=", 15) != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", opts[i] + 15, file);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0 || errno != ENOENT)
            return fd;
    }
    errno = ENOENT;
    return -1;
}

/* One include at line: opened, and its first line judged. */
static void
fake_include(fake_prog *p, int line, const char *file, int quoted, int n,
             const char *const *opts)
{
    int fd = fake_open(file, quoted, n, opts);
    if (fd < 0) {
        fake_logf(p,
                  "%s(%d): catastrophic error: cannot open source file "
                  "\"%s\": %s\n",
                  p->name, line, file, strerror(errno));
        p->errors++;
        return;
    }
    char head[256];
    ssize_t got = read(fd, head, sizeof(head) - 1);
    close(fd);
    head[got > 0 ? got : 0] = '\0';
    head[strcspn(head, "\n")] = '\0';
    if (head[0] != '\0' && head[0] != '#' && head[0] != '/') {
        fake_logf(p,
                  "%s(1): error: this declaration has no storage class or "
                  "type specifier\n  %s\n  ^\n\n",
                  file, head);
        p->errors++;
    }
}

/* Every include of the source, in order (not those of its headers). */
static void
fake_includes(fake_prog *p, int n, const char *const *opts)
{
    int line = 0;
    for (const char *l = p->src; l != NULL && *l; line++) {
        const char *eol = strchr(l, '\n');
        size_t len = eol ? (size_t)(eol - l) : strlen(l);
        char buf[1024], file[1024];
        snprintf(buf, sizeof(buf), "%.*s", (int)len, l);
        if (sscanf(buf, " # include \"%1023[^\"]\"", file) == 1)
            fake_include(p, line + 1, file, 1, n, opts);
        else if (sscanf(buf, " # include <%1023[^>]>", file) == 1)
            fake_include(p, line + 1, file, 0, n, opts);
        else if (sscanf(buf, " // FAKE_NVRTC_OPEN %1023s", file) == 1)
            fake_include(p, line + 1, file, 1, n, opts);
        l = eol ? eol + 1 : NULL;
    }
}

/* A TCP socket of family af (and, given a port, a connect to 127.0.0.1
 * there): what it met, as "ok" or the error. */
static void
fake_probe_socket(fake_prog *p, const char *arg)
{
    static const struct {
        int af;
        const char *name;
    } fams[] = {{AF_INET, "AF_INET"}, {AF_INET6, "AF_INET6"}};
    for (size_t i = 0; i < sizeof(fams) / sizeof(fams[0]); i++) {
        int s = socket(fams[i].af, SOCK_STREAM | SOCK_CLOEXEC, 0);
        fake_logf(p, "probe socket %s: %s\n", fams[i].name,
                  s >= 0 ? "ok" : strerror(errno));
        if (s >= 0)
            close(s);
    }
    int port = atoi(arg);
    if (port <= 0)
        return;
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) {
        fake_logf(p, "probe connect 127.0.0.1:%d: no socket (%s)\n", port,
                  strerror(errno));
        return;
    }
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int rc = connect(s, (struct sockaddr *)&a, sizeof(a));
    fake_logf(p, "probe connect 127.0.0.1:%d: %s\n", port,
              rc == 0 ? "ok" : strerror(errno));
    close(s);
}

/* NoNewPrivs as /proc says it (where it may be read), else as prctl says,
 * and the seccomp mode (2: a filter). */
static void
fake_probe_privs(fake_prog *p)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    int nnp = -1;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "NoNewPrivs: %d", &nnp) == 1)
            break;
    if (f != NULL)
        fclose(f);
    if (nnp >= 0)
        fake_logf(p, "probe privs: NoNewPrivs %d (/proc/self/status)\n", nnp);
    else
        fake_logf(p, "probe privs: NoNewPrivs %d (prctl)\n",
                  prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
    fake_logf(p, "probe privs: seccomp %d\n",
              prctl(PR_GET_SECCOMP, 0, 0, 0, 0));
}

/* SIZE bytes mapped and written (mmap, not malloc: a sanitizer's allocator
 * would end the process rather than fail). */
static void
fake_probe_alloc(fake_prog *p, const char *arg)
{
    char *end;
    unsigned long long n = strtoull(arg, &end, 10);
    n <<= *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
    void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (m == MAP_FAILED) {
        fake_logf(p, "probe alloc %s: failed (%s)\n", arg, strerror(errno));
        return;
    }
    memset(m, 0xa5, n);
    munmap(m, n);
    fake_logf(p, "probe alloc %s: ok\n", arg);
}

static void
fake_probe_write(fake_prog *p, const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        fake_logf(p, "probe write %s: %s\n", path, strerror(errno));
        return;
    }
    int ok = write(fd, "written\n", 8) == 8;
    close(fd);
    fake_logf(p, "probe write %s: %s\n", path,
              ok ? "ok" : "created, unwritten");
}

static void *
fake_spin(void *arg)
{
    volatile unsigned long *n = arg;
    for (;;)
        (*n)++;
    return NULL;
}

/* Never returns: the log so far goes to fd 2 (the worker's log) now. Two
 * threads spend CPU time faster than the wall clock runs, where there are
 * two cores free. */
static void
fake_probe_cpu(void)
{
    struct rlimit cpu;
    if (getrlimit(RLIMIT_CPU, &cpu) == 0 && cpu.rlim_cur != RLIM_INFINITY)
        dprintf(2, "probe cpu: RLIMIT_CPU %llu s\n",
                (unsigned long long)cpu.rlim_cur);
    else
        dprintf(2, "probe cpu: RLIMIT_CPU none\n");
    static volatile unsigned long n[2];
    pthread_t t;
    (void)pthread_create(&t, NULL, fake_spin, (void *)&n[0]);
    fake_spin((void *)&n[1]);
}

/* Every probe line of the source, in order. */
static void
fake_probes(fake_prog *p)
{
    for (const char *l = p->src; l != NULL && *l;) {
        const char *eol = strchr(l, '\n');
        size_t len = eol ? (size_t)(eol - l) : strlen(l);
        char buf[1024], arg[1024];
        snprintf(buf, sizeof(buf), "%.*s", (int)len, l);
        arg[0] = '\0';
        if (strstr(buf, "FAKE_NVRTC_PROBE_SOCKET") != NULL) {
            (void)sscanf(buf, " // FAKE_NVRTC_PROBE_SOCKET %1023s", arg);
            fake_probe_socket(p, arg);
        } else if (strstr(buf, "FAKE_NVRTC_PROBE_PRIVS") != NULL)
            fake_probe_privs(p);
        else if (sscanf(buf, " // FAKE_NVRTC_PROBE_ALLOC %1023s", arg) == 1)
            fake_probe_alloc(p, arg);
        else if (sscanf(buf, " // FAKE_NVRTC_PROBE_WRITE %1023s", arg) == 1)
            fake_probe_write(p, arg);
        else if (strstr(buf, "FAKE_NVRTC_PROBE_CPU") != NULL) {
            if (p->log != NULL)
                dprintf(2, "%s", p->log);
            fake_probe_cpu();
        }
        l = eol ? eol + 1 : NULL;
    }
}

nvrtcResult
nvrtcCompileProgram(fake_prog *p, int n, const char *const *opts)
{
    if (strstr(p->src, "FAKE_NVRTC_CRASH") != NULL)
        raise(SIGSEGV);
    if (strstr(p->src, "FAKE_NVRTC_HANG") != NULL)
        for (;;)
            pause();
    if (strstr(p->src, "FAKE_NVRTC_EXIT") != NULL)
        _exit(42);
    fake_probes(p);
    fake_includes(p, n, opts);
    if (p->errors > 0)
        fake_logf(p, "%d error%s detected in the compilation of \"%s\".\n",
                  p->errors, p->errors == 1 ? "" : "s", p->name);
    const char *text = strstr(p->src, "FAKE_NVRTC_LOG");
    if (text != NULL)
        fake_logf(p, "%s", text + strlen("FAKE_NVRTC_LOG"));
    else
        fake_logf(p, "fakenvrtc: compiles nothing\n");
    return 6; /* NVRTC_ERROR_COMPILATION */
}

nvrtcResult
nvrtcGetProgramLogSize(fake_prog *p, size_t *size)
{
    *size = p->log ? strlen(p->log) + 1 : 1;
    return 0;
}

nvrtcResult
nvrtcGetProgramLog(fake_prog *p, char *log)
{
    strcpy(log, p->log ? p->log : "");
    return 0;
}

nvrtcResult
nvrtcGetPTXSize(fake_prog *p, size_t *size)
{
    (void)p;
    *size = 0;
    return 1;
}

nvrtcResult
nvrtcGetPTX(fake_prog *p, char *ptx)
{
    (void)p, (void)ptx;
    return 1;
}
