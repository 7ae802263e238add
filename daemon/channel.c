#include "channel.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

int
cumod__chan_pair(int fds[2])
{
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
        return -errno;
    return 0;
}

int
cumod__chan_send(int sock, const cumod_chan_hdr *hdr, const void *payload,
                 size_t len, int fd)
{
    struct iovec iov[2] = {
        {.iov_base = (void *)hdr, .iov_len = sizeof(*hdr)},
        {.iov_base = (void *)payload, .iov_len = len},
    };
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = len ? 2 : 1};

    if (fd >= 0) {
        memset(&ctl, 0, sizeof(ctl));
        mh.msg_control = ctl.buf;
        mh.msg_controllen = sizeof(ctl.buf);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    for (;;) {
        /* MSG_NOSIGNAL: a dead executor is an error to handle, not SIGPIPE. */
        ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL);
        if (n >= 0)
            return 0;
        if (errno != EINTR)
            return -errno;
    }
}

long
cumod__chan_recv(int sock, void *buf, size_t cap, int *fdp)
{
    struct iovec iov = {.iov_base = buf, .iov_len = cap};
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = ctl.buf,
                        .msg_controllen = sizeof(ctl.buf)};
    ssize_t n;

    *fdp = -1;
    do {
        n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL;
         c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
            memcpy(fdp, CMSG_DATA(c), sizeof(int));
    }
    if (n == 0)
        return 0;
    if ((size_t)n < sizeof(cumod_chan_hdr) ||
        (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
        if (*fdp >= 0)
            close(*fdp);
        *fdp = -1;
        return -EPROTO;
    }
    return (long)n;
}
