/* SPDX-License-Identifier: MIT */
#include "channel.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

int
cumod__chan_pair(int fds[2])
{
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
        return -errno;
    return 0;
}

/* Sends one packet of the iovecs with nfds (0-2) descriptors. */
static int
chan_sendv(int sock, struct iovec *iov, int niov, const int *fds, int nfds,
           int flags)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(2 * sizeof(int))];
    } ctl;
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)niov};

    if (nfds > 0) {
        memset(&ctl, 0, sizeof(ctl));
        mh.msg_control = ctl.buf;
        mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
    }
    for (;;) {
        /* MSG_NOSIGNAL: a dead peer is an error to handle, not SIGPIPE. */
        ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL | flags);
        if (n >= 0)
            return 0;
        if (errno != EINTR)
            return -errno;
    }
}

/* Sends one packet with nfds (0-2) descriptors. */
static int
chan_send_fds(int sock, const cumod_chan_hdr *hdr, const void *payload,
              size_t len, const int *fds, int nfds)
{
    struct iovec iov[2] = {
        {.iov_base = (void *)hdr, .iov_len = sizeof(*hdr)},
        {.iov_base = (void *)payload, .iov_len = len},
    };
    return chan_sendv(sock, iov, len ? 2 : 1, fds, nfds, 0);
}

int
cumod__fd_send(int sock, const void *p, size_t len, int fd, int flags)
{
    struct iovec iov = {.iov_base = (void *)p, .iov_len = len};
    return chan_sendv(sock, &iov, 1, &fd, fd >= 0 ? 1 : 0, flags);
}

int
cumod__chan_send(int sock, const cumod_chan_hdr *hdr, const void *payload,
                 size_t len, int fd)
{
    return chan_send_fds(sock, hdr, payload, len, &fd, fd >= 0 ? 1 : 0);
}

long
cumod__chan_recv(int sock, void *buf, size_t cap, int *fdp)
{
    return cumod__chan_recv_flags(sock, buf, cap, fdp, 0);
}

long
cumod__chan_recv_flags(int sock, void *buf, size_t cap, int *fdp, int flags)
{
    int fds[2];
    long n = cumod__chan_recv2(sock, buf, cap, fds, flags);
    *fdp = fds[0];
    if (fds[1] >= 0) /* a second descriptor only recv2's callers take */
        close(fds[1]);
    return n;
}

long
cumod__fd_recv(int sock, void *buf, size_t cap, int fds[2], int flags,
               int *trunc)
{
    struct iovec iov = {.iov_base = buf, .iov_len = cap};
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(2 * sizeof(int))];
    } ctl;
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = ctl.buf,
                        .msg_controllen = sizeof(ctl.buf)};
    ssize_t n;
    int resets = 0;

    fds[0] = fds[1] = -1;
    /* Linux says ECONNRESET (once) before the packets a peer sent last
     * when it closed with ours unread: they are read next (a STOP, the
     * last replies of an executor, a fault it reported), then the end. */
    do {
        n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | flags);
    } while (n < 0 &&
             (errno == EINTR || (errno == ECONNRESET && resets++ == 0)));
    if (n < 0)
        return -errno;
    *trunc = (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL;
         c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (i < 2 && fds[i] < 0)
                fds[i] = fd;
            else
                close(fd);
        }
    }
    return (long)n;
}

long
cumod__chan_recv2(int sock, void *buf, size_t cap, int fds[2], int flags)
{
    int trunc = 0;
    long n = cumod__fd_recv(sock, buf, cap, fds, flags, &trunc);
    if (n < 0)
        return n;
    if (n == 0)
        return 0;
    if ((size_t)n < sizeof(cumod_chan_hdr) || trunc) {
        for (int i = 0; i < 2; i++)
            if (fds[i] >= 0)
                close(fds[i]);
        fds[0] = fds[1] = -1;
        return -EPROTO;
    }
    return (long)n;
}

int
cumod__chan_send_any(int sock, cumod_chan_hdr *hdr, const void *payload,
                     size_t len)
{
    return cumod__chan_send_any_fd(sock, hdr, payload, len, -1);
}

int
cumod__chan_send_any_fd(int sock, cumod_chan_hdr *hdr, const void *payload,
                        size_t len, int cmd_fd)
{
    int fd, rv;
    size_t off = 0;

    hdr->len = len;
    hdr->flags &= ~(CUMOD_CHAN_F_MEMFD | CUMOD_CHAN_F_FD2);
    if (sizeof(*hdr) + len <= CUMOD_CHAN_MAX)
        return cumod__chan_send(sock, hdr, payload, len, cmd_fd);
    /* Rare (a module with thousands of kernels): one memfd, sealed so the
     * reader may trust its size. */
    fd = memfd_create("cumod-chan", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -errno;
    while (off < len) {
        ssize_t w = write(fd, (const char *)payload + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            rv = w < 0 ? -errno : -EIO;
            close(fd);
            return rv;
        }
        off += (size_t)w;
    }
    (void)fcntl(fd, F_ADD_SEALS,
                F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL);
    hdr->flags |= CUMOD_CHAN_F_MEMFD;
    if (cmd_fd >= 0) {
        /* The payload's memfd first, then the command's own. */
        int fds[2] = {fd, cmd_fd};
        hdr->flags |= CUMOD_CHAN_F_FD2;
        rv = chan_send_fds(sock, hdr, NULL, 0, fds, 2);
    } else {
        rv = cumod__chan_send(sock, hdr, NULL, 0, fd);
    }
    close(fd);
    return rv;
}

int
cumod__chan_payload(const void *buf, size_t n, int fd, cumod_chan_payload *out)
{
    cumod_chan_hdr hdr;

    memset(out, 0, sizeof(*out));
    memcpy(&hdr, buf, sizeof(hdr));
    if (!(hdr.flags & CUMOD_CHAN_F_MEMFD)) {
        out->data = (const char *)buf + sizeof(hdr);
        out->len = n - sizeof(hdr);
        return 0;
    }
    struct stat st;
    if (fd < 0 || hdr.len == 0 || fstat(fd, &st) != 0 ||
        (uint64_t)st.st_size < hdr.len) {
        if (fd >= 0)
            close(fd);
        return -EPROTO; /* mapping past the end would be SIGBUS */
    }
    void *m = mmap(NULL, hdr.len, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return -errno;
    out->data = m;
    out->len = hdr.len;
    out->map = m;
    out->map_len = hdr.len;
    return 0;
}

void
cumod__chan_payload_fini(cumod_chan_payload *p)
{
    if (p->map != NULL)
        munmap(p->map, p->map_len);
    memset(p, 0, sizeof(*p));
}
