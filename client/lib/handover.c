/* SPDX-License-Identifier: MIT */
/*
 * Handing descriptors to cumodd (client_internal.h): the ring's and the
 * segments' memory as sealed memfds, sent with SCM_RIGHTS on the
 * datagram socket cumodd named in its Hello, with a random token that
 * the OpenRing or MapSegment request then names. cumodd learns from the
 * kernel which process sent them and gives them only to that process's
 * connection; a cumodd of another user maps them though it could not open
 * a 0600 file of the client's by name.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "client_internal.h"

int
cumod__memfd_make(const char *what, size_t size, void **data)
{
    int fd = memfd_create(what, MFD_CLOEXEC | MFD_ALLOW_SEALING), err;

    if (fd < 0)
        return -1;
    if (ftruncate(fd, (off_t)size) != 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) !=
            0) {
        err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    *data = p;
    return fd;
}

/* How long a handover may wait for room in cumodd's queue. */
#define HANDOVER_SEND_S 2

int
cumod__handover(cumod_client *c, const int *fds, int n, uint8_t *token)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    uint8_t msg[4 + 1 + CUMOD_HANDOVER_TOKEN];
    union {
        char c[CMSG_SPACE(sizeof(int) * 2)];
        struct cmsghdr align;
    } ctl;
    int err;

    if (n < 1 || n > 2)
        return cumod__client_set_error(CUMOD_EINVAL, "handover: %d fds", n);
    /* $CUMOD_NO_HANDOVER: by name, as before cumodd took descriptors. */
    const char *off = getenv("CUMOD_NO_HANDOVER");
    if (off != NULL && off[0] != '\0' && strcmp(off, "0") != 0)
        return CUMOD_ENOTSUP;
    nng_mtx_lock(c->mtx);
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", c->fd_socket);
    nng_mtx_unlock(c->mtx);
    if (a.sun_path[0] == '\0')
        return CUMOD_ENOTSUP;
    if (getrandom(token, CUMOD_HANDOVER_TOKEN, 0) != CUMOD_HANDOVER_TOKEN)
        return cumod__client_set_error(
            CUMOD_EIO, "handover: no random bytes: %s", strerror(errno));
    memcpy(msg, "CMFD", 4);
    msg[4] = 1;
    memcpy(msg + 5, token, CUMOD_HANDOVER_TOKEN);
    memset(&ctl, 0, sizeof(ctl));
    struct iovec iov = {.iov_base = msg, .iov_len = sizeof(msg)};
    struct msghdr m = {.msg_name = &a,
                       .msg_namelen = sizeof(a),
                       .msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = ctl.c,
                       .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n)};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
    memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)n);
    /* Blocking, for a while: cumodd's queue of datagrams is short (10 on
     * Linux: net.unix.max_dgram_qlen), and many clients starting at once
     * fill it while cumodd is busy (a pool's executors starting); a client
     * that gave up there went by name, unsealed, and never on the direct
     * path (seen with 48 clients on a pool of 16: a third of them). */
    int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {.tv_sec = HANDOVER_SEND_S};
    if (s >= 0)
        (void)setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    ssize_t sent = -1;
    while (s >= 0 && (sent = sendmsg(s, &m, MSG_NOSIGNAL)) < 0 &&
           errno == EINTR)
        ;
    if (s < 0 || sent != (ssize_t)sizeof(msg)) {
        err = errno;
        if (s >= 0)
            close(s);
        return cumod__client_set_error(CUMOD_EIO,
                                       "handover: cannot send to %s: %s",
                                       a.sun_path, strerror(err));
    }
    close(s);
    return CUMOD_OK;
}
