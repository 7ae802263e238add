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
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
