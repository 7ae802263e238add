/* SPDX-License-Identifier: MIT */
/*
 * The headers a NAME.cu includes (deps.h): found by a scan of #include
 * lines, as NVRTC's preprocessor would find them, and hashed.
 */
#include "deps.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/sha256.h"

typedef struct deps {
    const char *const *dirs; /* the -I folders, in order */
    size_t ndirs;
    char *roots[CUMOD_DEPS_MAX_ROOTS]; /* real paths: what may be read */
    size_t nroots;
    const char *top; /* the source's path, named by its file name */
    char *refused;   /* the first refusal's sentence; NULL: not wanted */
    size_t refusedlen;
    int stop;                          /* a refusal: nothing more is read */
    char *paths[CUMOD_DEPS_MAX_FILES]; /* met, in order */
    size_t npaths;
    size_t bytes; /* read so far */
    cumod_sha256 sha;
} deps;

/* The folder part of path, "." when it has none. */
static void
deps_dirname(const char *path, char *out, size_t len)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        snprintf(out, len, ".");
    else if (slash == path)
        snprintf(out, len, "/");
    else
        snprintf(out, len, "%.*s", (int)(slash - path), path);
}

static int
deps_seen(const deps *d, const char *path)
{
    for (size_t i = 0; i < d->npaths; i++)
        if (strcmp(d->paths[i], path) == 0)
            return 1;
    return 0;
}

/* Reads path whole if it is a regular file within the limits; NULL
 * otherwise (a missing header is the toolkit's, or an error NVRTC will
 * report). A FIFO or device does not block: O_NONBLOCK, then S_ISREG. */
static char *
deps_read(deps *d, const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    char *buf = NULL;
    size_t at = 0;

    if (fd < 0)
        return NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        (uint64_t)st.st_size > CUMOD_DEPS_MAX_FILE_BYTES ||
        d->bytes + (size_t)st.st_size > CUMOD_DEPS_MAX_BYTES ||
        (buf = malloc((size_t)st.st_size + 1)) == NULL) {
        close(fd);
        return NULL;
    }
    while (at < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + at, (size_t)st.st_size - at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* shrank while read: what was there */
        at += (size_t)n;
    }
    close(fd);
    buf[at] = '\0';
    d->bytes += at;
    *len = at;
    return buf;
}

/* 1 if real (a resolved path) is a root or lies beneath one. */
static int
deps_allowed(const deps *d, const char *real)
{
    for (size_t i = 0; i < d->nroots; i++) {
        size_t n = strlen(d->roots[i]);
        if (strncmp(real, d->roots[i], n) == 0 &&
            (real[n] == '\0' || real[n] == '/' || d->roots[i][n - 1] == '/'))
            return 1;
    }
    return 0;
}

/* Where `#include "name"` (quoted) or `<name>` resolves: the including
 * file's folder first for the quoted form, then each -I folder; the first
 * that names something other than a folder is what the preprocessor opens.
 * 0 with the path in out, -1 when none holds it. Only stat(2): nothing is
 * opened before it is known to be allowed. */
static int
deps_resolve(const deps *d, const char *from_dir, const char *name, int quoted,
             char *out, size_t len)
{
    struct stat st;
    if (name[0] == '/') {
        snprintf(out, len, "%s", name);
        return stat(out, &st) == 0 && !S_ISDIR(st.st_mode) ? 0 : -1;
    }
    for (size_t i = quoted ? 0 : 1; i <= d->ndirs; i++) {
        const char *dir = i == 0 ? from_dir : d->dirs[i - 1];
        if ((size_t)snprintf(out, len, "%s/%s", dir, name) >= len)
            continue;
        if (stat(out, &st) == 0 && !S_ISDIR(st.st_mode))
            return 0;
    }
    return -1;
}

/* How a file is named in a refusal: the source by its file name, a header
 * by its path. */
static const char *
deps_shown(const deps *d, const char *path)
{
    if (path == d->top) {
        const char *slash = strrchr(path, '/');
        return slash != NULL ? slash + 1 : path;
    }
    return path;
}

/* Notes the first refusal: "FILE:LINE: #include "NAME": why". */
static void
deps_refuse(deps *d, const char *from, unsigned line, int quoted,
            const char *name, const char *why)
{
    d->stop = 1;
    if (d->refused != NULL && d->refused[0] == '\0')
        snprintf(d->refused, d->refusedlen, "%s:%u: #include %c%s%c: %s",
                 deps_shown(d, from), line, quoted ? '"' : '<', name,
                 quoted ? '"' : '>', why);
}

static void deps_file(deps *d, const char *path, const char *text, size_t len);

/* One #include line at p (after the '#') of from, line line; follows what
 * it names if that lies within the roots and is a regular file. */
static void
deps_include(deps *d, const char *from, unsigned line, const char *from_dir,
             const char *p, const char *end)
{
    char name[1024], path[4096 + 1024];
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if ((size_t)(end - p) < 7 || memcmp(p, "include", 7) != 0)
        return;
    p += 7;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p >= end || (*p != '"' && *p != '<'))
        return; /* #include_next, a macro: not followed */
    int quoted = *p == '"';
    char close = quoted ? '"' : '>';
    const char *s = ++p;
    while (p < end && *p != close && *p != '\n')
        p++;
    if (p >= end || *p != close || p == s || (size_t)(p - s) >= sizeof(name))
        return;
    memcpy(name, s, (size_t)(p - s));
    name[p - s] = '\0';
    if (memchr(name, '\0', (size_t)(p - s)) != NULL)
        return;
    char real[PATH_MAX];
    struct stat st;
    if (deps_resolve(d, from_dir, name, quoted, path, sizeof(path)) != 0) {
        /* An absolute name outside is refused whether or not it is there,
         * so that the answer says nothing of what exists outside. */
        if (name[0] == '/' && !deps_allowed(d, name))
            deps_refuse(d, from, line, quoted, name,
                        "outside the kernel folder, the include folders and "
                        "the toolkit's headers");
        return; /* the toolkit's, or missing: NVRTC says which */
    }
    if (realpath(path, real) == NULL || !deps_allowed(d, real)) {
        deps_refuse(d, from, line, quoted, name,
                    "outside the kernel folder, the include folders and the "
                    "toolkit's headers");
        return;
    }
    if (stat(real, &st) != 0 || !S_ISREG(st.st_mode)) {
        deps_refuse(d, from, line, quoted, name,
                    "not a regular file (a FIFO or a device would hang or "
                    "flood the compiler)");
        return;
    }
    /* One file, one entry, however it is reached (a/../b, a link): a
     * cycle ends at the second visit. */
    snprintf(path, sizeof(path), "%s", real);
    if (deps_seen(d, path) || d->npaths >= CUMOD_DEPS_MAX_FILES)
        return;
    size_t len = 0;
    char *text = deps_read(d, path, &len);
    if (text == NULL)
        return;
    if ((d->paths[d->npaths] = strdup(path)) == NULL) {
        free(text);
        return;
    }
    d->npaths++;
    /* Its name and its bytes, each ended so that no two files' sums
     * collide by moving bytes between them. */
    cumod__sha256_update(&d->sha, path, strlen(path) + 1);
    char lenbuf[32];
    int n = snprintf(lenbuf, sizeof(lenbuf), "%zu", len);
    cumod__sha256_update(&d->sha, lenbuf, (size_t)n + 1);
    cumod__sha256_update(&d->sha, text, len);
    deps_file(d, d->paths[d->npaths - 1], text, len);
    free(text);
}

/* Every #include line of text (a file at path), in order. Comments are
 * not parsed: an include in a comment is followed too, which only makes
 * the key cover more than it needs. */
static void
deps_file(deps *d, const char *path, const char *text, size_t len)
{
    char dir[4096];
    const char *p = text, *end = text + len;
    unsigned line = 0;
    deps_dirname(path, dir, sizeof(dir));
    while (p < end && !d->stop) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (eol == NULL)
            eol = end;
        const char *q = p;
        line++;
        while (q < eol && (*q == ' ' || *q == '\t'))
            q++;
        if (q < eol && *q == '#')
            deps_include(d, path, line, dir, q + 1, eol);
        p = eol + 1;
    }
}

/* The -I folders among NVRTC's options: --include-path=D, -ID, and -I D
 * or --include-path D as two options. */
size_t
cumod__compile_include_dirs(const char *const *opts, size_t nopts,
                            const char **dirs, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < nopts && n < max; i++) {
        const char *o = opts[i];
        if (strncmp(o, "--include-path=", 15) == 0 && o[15] != '\0')
            dirs[n++] = o + 15;
        else if (strncmp(o, "-I", 2) == 0 && o[2] != '\0')
            dirs[n++] = o + 2;
        else if ((strcmp(o, "-I") == 0 || strcmp(o, "--include-path") == 0) &&
                 i + 1 < nopts)
            dirs[n++] = opts[++i];
    }
    return n;
}

size_t
cumod__compile_deps(const char *path, const char *src, size_t len,
                    const char *const *opts, size_t nopts,
                    const char *const *roots, size_t nroots, char hex[65],
                    char *refused, size_t refusedlen)
{
    const char *dirs[CUMOD_DEPS_MAX_DIRS];
    deps d = {.dirs = dirs,
              .ndirs = cumod__compile_include_dirs(opts, nopts, dirs,
                                                   CUMOD_DEPS_MAX_DIRS),
              .top = path,
              .refused = refusedlen > 0 ? refused : NULL,
              .refusedlen = refusedlen};
    unsigned char sum[32];

    if (d.refused != NULL)
        d.refused[0] = '\0';
    /* The roots as the kernel resolves them, so that a link or a ..
     * cannot step out between the check and the comparison. */
    for (size_t i = 0; i < nroots && d.nroots < CUMOD_DEPS_MAX_ROOTS; i++) {
        char real[PATH_MAX];
        if (roots[i] != NULL && realpath(roots[i], real) != NULL &&
            (d.roots[d.nroots] = strdup(real)) != NULL)
            d.nroots++;
    }
    cumod__sha256_init(&d.sha);
    deps_file(&d, path, src, len);
    cumod__sha256_final(&d.sha, sum);
    size_t n = d.npaths;
    for (size_t i = 0; i < d.npaths; i++)
        free(d.paths[i]);
    for (size_t i = 0; i < d.nroots; i++)
        free(d.roots[i]);
    hex[0] = '\0';
    if (n > 0)
        cumod__sha256_hex(sum, hex);
    return n;
}
