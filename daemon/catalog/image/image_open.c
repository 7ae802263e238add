/* SPDX-License-Identifier: MIT */
/*
 * Opening a file of the kernel folder safely (cumod__image_open): beneath the
 * folder, symlinks followed only where they resolve inside it, and nothing
 * but a regular file ever opened for reading. Also where errno becomes a
 * cumod error for all the image files (cumod__image_errno).
 */
#include "image.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifdef SYS_openat2
#include <linux/openat2.h>
#endif

#include "cumod/errors.h"
#include "common/status.h"

/* Room for "<dirpath>/<name>" in messages; a longer one is cut short. */
#define IMAGE_PATH_CAP (PATH_MAX + 256)

/* errno enters here, once: the cumod error (cumod__errno_err), and a
 * sentence naming path. */
cumod_err
cumod__image_errno(int e, const char *path, const char *what, char *msg,
                   size_t msglen)
{
    switch (e) {
    case ENOENT:
    case ENOTDIR:
        cumod__msgf(msg, msglen,
                    "%s: no such file (it was removed, or it is a symlink to "
                    "nothing)",
                    path);
        break;
    case EXDEV:
        cumod__msgf(msg, msglen,
                    "%s is a symlink that leads outside the kernel folder (or "
                    "an absolute one); refused: a symlink is followed only "
                    "where its relative path resolves inside the folder",
                    path);
        break;
    case ELOOP:
        cumod__msgf(msg, msglen,
                    "%s: refused: a symlink loop, or a symlink through a /proc "
                    "magic link",
                    path);
        break;
    case EACCES:
    case EPERM:
        cumod__msgf(msg, msglen, "%s: %s: permission denied", path, what);
        break;
    case ENAMETOOLONG:
        cumod__msgf(msg, msglen, "%s: the path is too long", path);
        break;
    default:
        cumod__msgf(msg, msglen, "%s: %s: %s", path, what, strerror(e));
        break;
    }
    return cumod__errno_err(e);
}

static const char *
image_type_name(mode_t m)
{
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISFIFO(m))
        return "a FIFO (named pipe)";
    if (S_ISSOCK(m))
        return "a socket";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    if (S_ISLNK(m))
        return "a symlink";
    return "not a regular file";
}

/* openat2 beneath dirfd; 0 or an errno value. */
static int
image_openat2(int dirfd, const char *name, int flags, int *fdp)
{
#ifdef SYS_openat2
    struct open_how how;
    int tries = 0;
    long fd;

    memset(&how, 0, sizeof(how));
    how.flags = (uint64_t)flags;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    for (;;) {
        fd = syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
        if (fd >= 0) {
            *fdp = (int)fd;
            return 0;
        }
        /* EAGAIN: a rename or mount raced with the lookup and the kernel
         * asks for another try. */
        if (errno == EINTR || (errno == EAGAIN && ++tries < 16))
            continue;
        return errno;
    }
#else
    (void)dirfd;
    (void)name;
    (void)flags;
    (void)fdp;
    return ENOSYS;
#endif
}

/* Where fd points, through /proc; 0 or an errno value. */
static int
image_fd_path(int fd, char *buf, size_t cap)
{
    char link[64];
    ssize_t n;

    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    n = readlink(link, buf, cap - 1);
    if (n < 0)
        return errno;
    if ((size_t)n >= cap - 1)
        return ENAMETOOLONG;
    buf[n] = '\0';
    return 0;
}

static int
image_inside(const char *dir, const char *p)
{
    size_t n = strlen(dir);

    if (n == 1 && dir[0] == '/')
        return p[0] == '/';
    return strncmp(p, dir, n) == 0 && p[n] == '/';
}

/* The fallback where openat2 is missing: resolve in user space and check
 * that the result lies inside the folder, open what was resolved without
 * following a symlink, then check what the descriptor names, which also
 * covers a symlink swapped in between. 0 or an errno value. */
static int
image_open_realpath(int dirfd, const char *dirpath, const char *name, int flags,
                    int *fdp)
{
    char dir[PATH_MAX], full[PATH_MAX], got[PATH_MAX];
    char *real = NULL;
    int fd = -1, e;

    if (image_fd_path(dirfd, dir, sizeof(dir)) != 0 &&
        realpath(dirpath, dir) == NULL)
        return errno;
    if ((size_t)snprintf(full, sizeof(full), "%s/%s", dir, name) >=
        sizeof(full))
        return ENAMETOOLONG;
    real = realpath(full, NULL);
    if (real == NULL)
        return errno;
    e = EXDEV;
    if (!image_inside(dir, real))
        goto fail;
    fd = open(real, flags | O_NOFOLLOW);
    if (fd < 0) {
        e = errno;
        goto fail;
    }
    /* Without /proc there is nothing more to check. */
    e = image_fd_path(fd, got, sizeof(got));
    if (e == 0 && !image_inside(dir, got)) {
        e = EXDEV;
        goto fail;
    }
    free(real);
    *fdp = fd;
    return 0;
fail:
    if (fd >= 0)
        close(fd);
    free(real);
    return e;
}

/* Opens name beneath dirfd with flags; a cumod error. */
static int
image_open_beneath(int dirfd, const char *dirpath, const char *name, int flags,
                   cumod_image_resolve resolve, const char *path, int *fdp,
                   char *msg, size_t msglen)
{
    int e = ENOSYS, probe = -1;

    if (resolve == CUMOD_IMAGE_RESOLVE_AUTO) {
        e = image_openat2(dirfd, name, flags, fdp);
        /* Older container seccomp profiles answer EPERM to any syscall
         * they do not know: tell that apart from a real EPERM by trying
         * the folder itself. */
        if (e == EPERM &&
            image_openat2(dirfd, ".", O_PATH | O_CLOEXEC, &probe) == 0)
            close(probe);
        else if (e == EPERM)
            e = ENOSYS;
    }
    if (e == ENOSYS)
        e = image_open_realpath(dirfd, dirpath, name, flags, fdp);
    if (e != 0)
        return cumod__image_errno(e, path, "open", msg, msglen);
    return CUMOD_OK;
}

/* Opens name (flags) and checks that what it opened is a regular file,
 * *st its stat. *fdp is the descriptor even when the check fails (-1 when
 * nothing opened), for the caller to close. */
static int
image_open_regular(int dirfd, const char *dirpath, const char *name, int flags,
                   cumod_image_resolve resolve, const char *path, int *fdp,
                   struct stat *st, char *msg, size_t msglen)
{
    int rc = image_open_beneath(dirfd, dirpath, name, flags, resolve, path, fdp,
                                msg, msglen);
    if (rc != CUMOD_OK)
        return rc;
    if (fstat(*fdp, st) != 0)
        return cumod__image_errno(errno, path, "fstat", msg, msglen);
    if (!S_ISREG(st->st_mode)) {
        cumod__msgf(msg, msglen, "%s is %s, not a regular file", path,
                    image_type_name(st->st_mode));
        return CUMOD_EINVAL;
    }
    return CUMOD_OK;
}

cumod_err
cumod__image_open(int dirfd, const char *dirpath, const char *name,
                  cumod_image_resolve resolve, int *fdp, uint64_t *sizep,
                  char *msg, size_t msglen)
{
    char path[IMAGE_PATH_CAP];
    struct stat st;
    int pfd = -1, fd = -1, rc;

    if (dirpath == NULL || name == NULL || fdp == NULL || sizep == NULL) {
        cumod__msgf(msg, msglen, "cumod__image_open: a NULL argument");
        return CUMOD_EINVAL;
    }
    snprintf(path, sizeof(path), "%s/%s", dirpath, name);
    if (dirfd < 0 || name[0] == '\0' || strchr(name, '/') != NULL ||
        strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        cumod__msgf(msg, msglen, "%s: not a file name inside the folder", path);
        return CUMOD_EINVAL;
    }

    /* O_PATH first: it opens nothing, so a FIFO or a device is looked at
     * but never opened. */
    rc = image_open_regular(dirfd, dirpath, name, O_PATH | O_CLOEXEC, resolve,
                            path, &pfd, &st, msg, msglen);
    if (rc != CUMOD_OK)
        goto fail;
    /* The name may have been swapped for something else since: O_NONBLOCK
     * keeps a FIFO from blocking us, and the second fstat decides. */
    rc = image_open_regular(dirfd, dirpath, name,
                            O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY,
                            resolve, path, &fd, &st, msg, msglen);
    if (rc != CUMOD_OK)
        goto fail;
    close(pfd);
    *sizep = (uint64_t)st.st_size;
    *fdp = fd;
    return CUMOD_OK;
fail:
    if (fd >= 0)
        close(fd);
    if (pfd >= 0)
        close(pfd);
    return rc;
}
