/* SPDX-License-Identifier: MIT */
/* An executor waiting for a new front (orphan.h). */
#include "orphan.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/channel.h"
#include "common/log.h"
#include "cumod/errors.h"

/* The request of conn, with its descriptor: the new channel's end (a
 * socket), or -1 with why in detail. */
static int
orphan_take(int conn, char *detail, size_t dlen)
{
    cumod_adopt_req req;
    struct pollfd pf = {.fd = conn, .events = POLLIN};
    int fds[2] = {-1, -1}, trunc = 0;

    /* A peer that connects and says nothing does not hold the wait. */
    if (poll(&pf, 1, 1000) != 1) {
        snprintf(detail, dlen, "no request within a second");
        return -1;
    }
    long n = cumod__fd_recv(conn, &req, sizeof(req), fds, MSG_DONTWAIT, &trunc);
    int fd = fds[0];
    if (fds[1] >= 0)
        close(fds[1]);
    struct stat st;
    if (n != (long)sizeof(req) || trunc)
        snprintf(detail, dlen,
                 "a request of %ld bytes (%zu expected), unreadable", n,
                 sizeof(req));
    else if (req.magic != CUMOD_ADOPT_MAGIC)
        snprintf(detail, dlen, "not an adoption request (magic 0x%08x)",
                 req.magic);
    else if (req.version != CUMOD_ADOPT_VERSION)
        snprintf(detail, dlen,
                 "adoption protocol version %u; this executor speaks %u",
                 req.version, CUMOD_ADOPT_VERSION);
    else if (fd < 0)
        snprintf(detail, dlen, "no channel passed with the request");
    else if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode))
        snprintf(detail, dlen, "the descriptor passed is not a socket");
    else
        return fd;
    if (fd >= 0)
        close(fd);
    return -1;
}

/* The answer; with the ledger (fd >= 0) when status is 0. */
static void
orphan_answer(int conn, int status, int device, const char *detail, int fd,
              uint64_t last_seq)
{
    cumod_adopt_reply r = {.magic = CUMOD_ADOPT_MAGIC,
                           .version = CUMOD_ADOPT_VERSION,
                           .status = status,
                           .pid = (int32_t)getpid(),
                           .device = device,
                           .has_ledger = status == 0 && fd >= 0,
                           .last_seq = last_seq};
    snprintf(r.detail, sizeof(r.detail), "%s", detail);
    (void)cumod__fd_send(conn, &r, sizeof(r), r.has_ledger ? fd : -1,
                         MSG_DONTWAIT);
}

/* One connection: the new channel's descriptor, or -1 (answered). */
static int
orphan_conn(int conn, int device, int ledger_fd, uint64_t last_seq)
{
    struct ucred cr;
    socklen_t cl = sizeof(cr);
    char detail[200], who[64];

    if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0) {
        CUMOD_LOGW("CUMOD-EXEC-ORPHAN",
                   "an adoption attempt whose peer is unknown (%s): refused",
                   strerror(errno));
        return -1;
    }
    snprintf(who, sizeof(who), "pid %d uid %u", (int)cr.pid, (unsigned)cr.uid);
    /* The request is read first in every case: closing a connection
     * with it unread would reset the peer before it reads the answer. */
    int fd = orphan_take(conn, detail, sizeof(detail));
    if (cr.uid != geteuid()) {
        if (fd >= 0)
            close(fd);
        CUMOD_LOGW("CUMOD-EXEC-ORPHAN",
                   "adoption refused to %s: only uid %u may adopt this "
                   "executor",
                   who, (unsigned)geteuid());
        orphan_answer(conn, CUMOD_EPERM, device,
                      "refused: not the executor's uid", -1, 0);
        return -1;
    }
    if (fd < 0) {
        CUMOD_LOGW("CUMOD-EXEC-ORPHAN", "adoption refused to %s: %s", who,
                   detail);
        orphan_answer(conn, CUMOD_EPROTO, device, detail, -1, 0);
        return -1;
    }
    orphan_answer(conn, 0, device, "adopted", ledger_fd, last_seq);
    CUMOD_LOGN("CUMOD-EXEC-ORPHAN", "adopted by the front %s", who);
    return fd;
}

int
cumod__exec_orphan_wait(const char *dir, unsigned grace_s, int device,
                        int ledger_fd, uint64_t last_seq)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    int ls = -1, chan = -1;

    if ((size_t)snprintf(a.sun_path, sizeof(a.sun_path), "%s/exec-%d.sock", dir,
                         (int)getpid()) >= sizeof(a.sun_path)) {
        CUMOD_LOGW("CUMOD-EXEC-ORPHAN",
                   "the front is gone, and the adoption socket's path in %s "
                   "is too long: exiting",
                   dir);
        return -1;
    }
    /* Listening only once its mode is 0600: nobody else connects first. */
    (void)unlink(a.sun_path);
    if ((ls = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) < 0 ||
        bind(ls, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        chmod(a.sun_path, 0600) != 0 || listen(ls, 4) != 0) {
        CUMOD_LOGW("CUMOD-EXEC-ORPHAN",
                   "the front is gone, and the adoption socket %s cannot be "
                   "made (%s): exiting",
                   a.sun_path, strerror(errno));
        if (ls >= 0) {
            close(ls);
            (void)unlink(a.sun_path);
        }
        return -1;
    }
    CUMOD_LOGN("CUMOD-EXEC-ORPHAN",
               "the front is gone without a stop: keeping the context of "
               "device %d for a new front at %s for %u s",
               device, a.sun_path, grace_s);
    uint64_t end = cumod__mono_ns() + (uint64_t)grace_s * 1000000000ull;
    while (chan < 0) {
        uint64_t now = cumod__mono_ns();
        if (now >= end)
            break;
        uint64_t left_ms = (end - now + 999999) / 1000000;
        struct pollfd pf = {.fd = ls, .events = POLLIN};
        int r = poll(&pf, 1, left_ms > 60000 ? 60000 : (int)left_ms);
        if (r < 0 && errno != EINTR)
            break;
        if (r <= 0)
            continue;
        int conn = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
        if (conn < 0)
            continue;
        chan = orphan_conn(conn, device, ledger_fd, last_seq);
        close(conn);
    }
    close(ls);
    (void)unlink(a.sun_path);
    if (chan < 0)
        CUMOD_LOGN("CUMOD-EXEC-ORPHAN",
                   "no front adopted this executor within %u s "
                   "(--orphan-grace): releasing the context and exiting",
                   grace_s);
    return chan;
}
