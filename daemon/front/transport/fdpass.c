/* SPDX-License-Identifier: MIT */
/*
 * Descriptors handed over (fdpass.h). One datagram a handover: "CMFD", a
 * version byte, a 16-byte token, and SCM_RIGHTS with one or two
 * descriptors; the kernel adds the sender's credentials (SO_PASSCRED).
 * They wait in a small stash until OpenRing or MapSegment takes them by
 * token, for 10 s at most; one user holds a quarter of the places (256
 * of 1,024 at most; fewer under a low RLIMIT_NOFILE), so a user
 * who floods the socket evicts only its own. Anything else that arrives
 * is closed and counted.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cumod/errors.h"
#include "common/log.h"
#include "front/transport/fdpass.h"

#define FDPASS_MAGIC "CMFD"
#define FDPASS_VERSION 1
#define FDPASS_MSG (4 + 1 + CUMOD_FDPASS_TOKEN)
/* Places in the stash at most (an eighth of RLIMIT_NOFILE, at least 16),
 * and one user's at most (a quarter of them, at least 4). */
#define FDPASS_STASH 1024
#define FDPASS_PER_UID 256
#define FDPASS_TTL_NS (10ull * 1000000000ull)
/* Datagrams read per callback: the loop has others to serve. */
#define FDPASS_BURST 64
/* Descriptors one datagram may bring in: more are closed unread. */
#define FDPASS_CMSG_FDS 8

typedef struct fdpass_entry {
    int used;
    uint8_t token[CUMOD_FDPASS_TOKEN];
    int pid, uid;
    int fds[CUMOD_FDPASS_MAX_FDS];
    int nfds;
    uint64_t at_ns;
} fdpass_entry;

struct cumod_fdpass {
    uv_poll_t poll;
    int fd;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    fdpass_entry stash[FDPASS_STASH];
    int cap, per_uid; /* places used of stash, and one user's at most */
    uint64_t received, refused, dropped;
};

static void
close_fds(const int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

static void
entry_drop(cumod_fdpass *fp, fdpass_entry *e)
{
    close_fds(e->fds, e->nfds);
    memset(e, 0, sizeof(*e));
    fp->dropped++;
}

/* A free place for uid's handover: an expired one, else uid's oldest when
 * it holds FDPASS_PER_UID, else the oldest of all. */
static fdpass_entry *
stash_place(cumod_fdpass *fp, int uid, uint64_t now)
{
    fdpass_entry *free_e = NULL, *oldest = NULL, *oldest_uid = NULL;
    int mine = 0;

    for (int i = 0; i < fp->cap; i++) {
        fdpass_entry *e = &fp->stash[i];
        if (e->used && now - e->at_ns > FDPASS_TTL_NS)
            entry_drop(fp, e);
        if (!e->used) {
            if (free_e == NULL)
                free_e = e;
            continue;
        }
        if (oldest == NULL || e->at_ns < oldest->at_ns)
            oldest = e;
        if (e->uid == uid) {
            mine++;
            if (oldest_uid == NULL || e->at_ns < oldest_uid->at_ns)
                oldest_uid = e;
        }
    }
    if (mine >= fp->per_uid) {
        entry_drop(fp, oldest_uid);
        return oldest_uid;
    }
    if (free_e != NULL)
        return free_e;
    entry_drop(fp, oldest);
    return oldest;
}

/* Reads one datagram: 1 when one was read (kept or refused), 0 when none
 * is waiting. */
static int
fdpass_read_one(cumod_fdpass *fp)
{
    uint8_t buf[FDPASS_MSG + 1];
    union {
        char c[CMSG_SPACE(sizeof(int) * FDPASS_CMSG_FDS) +
               CMSG_SPACE(sizeof(struct ucred))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
    struct msghdr m = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = ctl.c,
                       .msg_controllen = sizeof(ctl.c)};
    int fds[FDPASS_CMSG_FDS], nfds = 0, have_cred = 0;
    struct ucred cred = {0, 0, 0};

    ssize_t n = recvmsg(fp->fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0)
        return errno == EINTR;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c != NULL;
         c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET)
            continue;
        if (c->cmsg_type == SCM_RIGHTS) {
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < k; i++) {
                int d;
                memcpy(&d, CMSG_DATA(c) + i * sizeof(int), sizeof(d));
                if (nfds < FDPASS_CMSG_FDS)
                    fds[nfds++] = d;
                else
                    close(d);
            }
        } else if (c->cmsg_type == SCM_CREDENTIALS &&
                   c->cmsg_len >= CMSG_LEN(sizeof(cred))) {
            memcpy(&cred, CMSG_DATA(c), sizeof(cred));
            have_cred = 1;
        }
    }
    if (n != FDPASS_MSG || memcmp(buf, FDPASS_MAGIC, 4) != 0 ||
        buf[4] != FDPASS_VERSION || !have_cred || nfds < 1 ||
        nfds > CUMOD_FDPASS_MAX_FDS || (m.msg_flags & MSG_CTRUNC)) {
        close_fds(fds, nfds);
        fp->refused++;
        CUMOD_LOGD("CUMOD-FDPASS",
                   "refused a handover of %d descriptors from pid %d uid %d "
                   "(%zd bytes): not one this cumodd reads",
                   nfds, (int)cred.pid, (int)cred.uid, n);
        return 1;
    }
    uint64_t now = cumod__mono_ns();
    fdpass_entry *e = stash_place(fp, (int)cred.uid, now);
    e->used = 1;
    memcpy(e->token, buf + 5, CUMOD_FDPASS_TOKEN);
    e->pid = (int)cred.pid;
    e->uid = (int)cred.uid;
    e->nfds = nfds;
    memcpy(e->fds, fds, (size_t)nfds * sizeof(int));
    e->at_ns = now;
    fp->received++;
    return 1;
}

static void
fdpass_drain(cumod_fdpass *fp)
{
    for (int i = 0; i < FDPASS_BURST && fdpass_read_one(fp); i++)
        ;
}

static void
fdpass_on_readable(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    fdpass_drain(h->data);
}

cumod_err
cumod__fdpass_open(uv_loop_t *loop, const char *path, cumod_fdpass **out,
                   cumod_status *st)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    struct stat sb;
    int one = 1;

    *out = NULL;
    if (strlen(path) >= sizeof(a.sun_path))
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "%s: too long for a socket's path", path);
    if (lstat(path, &sb) == 0 && !S_ISSOCK(sb.st_mode))
        return cumod__status_set(st, CUMOD_EEXIST,
                                 "%s is there and is not a socket: cumodd "
                                 "does not remove it",
                                 path);
    cumod_fdpass *fp = calloc(1, sizeof(*fp));
    if (fp == NULL)
        return cumod__status_set(st, CUMOD_ENOMEM, "out of memory");
    snprintf(fp->path, sizeof(fp->path), "%s", path);
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
    /* What the stash may hold (two descriptors a place) stays well under
     * the descriptors cumodd may open, so a flood never starves it. */
    struct rlimit rl;
    rlim_t lim = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
    fp->cap = lim / 8 > FDPASS_STASH ? FDPASS_STASH
              : lim / 8 < 16         ? 16
                                     : (int)(lim / 8);
    fp->per_uid = fp->cap / 4 > FDPASS_PER_UID ? FDPASS_PER_UID
                  : fp->cap / 4 < 4            ? 4
                                               : fp->cap / 4;
    fp->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    (void)unlink(path);
    if (fp->fd < 0 ||
        setsockopt(fp->fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) != 0 ||
        bind(fp->fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        chmod(path, 0666) != 0) {
        int e = errno;
        if (fp->fd >= 0)
            close(fp->fd);
        free(fp);
        return cumod__status_set(st, CUMOD_EIO, "cannot make %s: %s", path,
                                 strerror(e));
    }
    if (uv_poll_init(loop, &fp->poll, fp->fd) != 0) {
        close(fp->fd);
        (void)unlink(path);
        free(fp);
        return cumod__status_set(st, CUMOD_EIO, "cannot poll %s", path);
    }
    fp->poll.data = fp;
    uv_poll_start(&fp->poll, UV_READABLE, fdpass_on_readable);
    *out = fp;
    return CUMOD_OK;
}

static void
fdpass_on_closed(uv_handle_t *h)
{
    cumod_fdpass *fp = h->data;
    close(fp->fd);
    free(fp);
}

void
cumod__fdpass_close(cumod_fdpass *fp)
{
    if (fp == NULL)
        return;
    for (int i = 0; i < fp->cap; i++)
        if (fp->stash[i].used)
            entry_drop(fp, &fp->stash[i]);
    (void)unlink(fp->path);
    uv_close((uv_handle_t *)&fp->poll, fdpass_on_closed);
}

const char *
cumod__fdpass_path(const cumod_fdpass *fp)
{
    return fp != NULL ? fp->path : "";
}

cumod_err
cumod__fdpass_take(cumod_fdpass *fp, const uint8_t *token, size_t len, int pid,
                   int uid, int *fds, int want, cumod_status *st)
{
    if (fp == NULL)
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "descriptors handed over: this cumodd has "
                                 "no socket for them (its --listen is not "
                                 "ipc://)");
    if (len != CUMOD_FDPASS_TOKEN)
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "a handover's token has %d bytes, not %zu",
                                 CUMOD_FDPASS_TOKEN, len);
    /* What the client sent before this request is in the socket now. */
    fdpass_drain(fp);
    uint64_t now = cumod__mono_ns();
    for (int i = 0; i < fp->cap; i++) {
        fdpass_entry *e = &fp->stash[i];
        if (!e->used || memcmp(e->token, token, CUMOD_FDPASS_TOKEN) != 0)
            continue;
        if (now - e->at_ns > FDPASS_TTL_NS) {
            entry_drop(fp, e);
            break;
        }
        if (e->pid != pid || e->uid != uid)
            return cumod__status_set(
                st, CUMOD_EPERM,
                "the descriptors of this token were handed over by pid %d "
                "uid %d, not by this connection's process (pid %d uid %d)",
                e->pid, e->uid, pid, uid);
        if (e->nfds != want) {
            int got = e->nfds;
            entry_drop(fp, e);
            return cumod__status_set(st, CUMOD_EINVAL,
                                     "%d descriptors were handed over with "
                                     "this token, not %d",
                                     got, want);
        }
        memcpy(fds, e->fds, (size_t)want * sizeof(int));
        memset(e, 0, sizeof(*e));
        return CUMOD_OK;
    }
    return cumod__status_set(st, CUMOD_ENOENT,
                             "no descriptors were handed over with this "
                             "token at %s (by this process, in the last "
                             "10 s)",
                             fp->path);
}

cumod_err
cumod__fdpass_check_memory(int fd, int uid, uint64_t size, int handed,
                           const char *what, const char *label,
                           cumod_err short_code, cumod_status *st)
{
    struct stat sb;

    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != (uid_t)uid)
        return cumod__status_set(st, CUMOD_EPERM,
                                 "%s: shared memory %s is not owned by the "
                                 "connecting user (uid %d), or not a file",
                                 what, label, uid);
    if (handed && (fcntl(fd, F_GET_SEALS) & F_SEAL_SHRINK) == 0)
        return cumod__status_set(st, CUMOD_EPERM,
                                 "%s: the memory handed over is not a memfd "
                                 "sealed against shrinking (F_SEAL_SHRINK)",
                                 what);
    if ((uint64_t)sb.st_size < size)
        return cumod__status_set(st, short_code,
                                 "%s: shared memory %s has %lld bytes, fewer "
                                 "than the %llu asked",
                                 what, label, (long long)sb.st_size,
                                 (unsigned long long)size);
    return CUMOD_OK;
}

void
cumod__fdpass_stats(const cumod_fdpass *fp, uint64_t *received,
                    uint64_t *refused, uint64_t *dropped)
{
    *received = fp != NULL ? fp->received : 0;
    *refused = fp != NULL ? fp->refused : 0;
    *dropped = fp != NULL ? fp->dropped : 0;
}
