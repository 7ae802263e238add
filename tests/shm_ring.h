/* SPDX-License-Identifier: MIT */
/*
 * A client's ring, made by hand for the suites that speak the ring
 * protocol themselves (ring_test, answer_test, req_test): a POSIX shm
 * object under a fresh name, mapped, with a valid header when sq is not 0,
 * and its doorbell beside it in /dev/shm. Header-only: req_test links the
 * daemon's ring and cannot link the harness (libcumod has a ring too).
 */
#ifndef CUMOD_TEST_SHM_RING_H
#define CUMOD_TEST_SHM_RING_H

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cumod_ring.h"

typedef struct tr_ring {
    char name[96], bell[128];
    uint8_t *map;
    size_t len;
    cumod_ring_hdr *h;
    uint8_t *sq, *cq; /* NULL without a header */
    int bell_fd;      /* -1 without a FIFO */
} tr_ring;

/* Makes r: an shm object "/PREFIX-PID-N" of len bytes (a header with rings
 * of sq and cq bytes when sq is not 0) and its doorbell: fifo 0 none, 1 a
 * FIFO opened O_RDWR|O_NONBLOCK, 2 a regular file in its place. */
static inline void
tr_make(tr_ring *r, const char *prefix, size_t len, uint64_t sq, uint64_t cq,
        int fifo)
{
    static int counter;
    memset(r, 0, sizeof(*r));
    r->bell_fd = -1;
    snprintf(r->name, sizeof(r->name), "/%s-%d-%d", prefix, (int)getpid(),
             counter++);
    snprintf(r->bell, sizeof(r->bell), "/dev/shm%s.bell", r->name);
    shm_unlink(r->name);
    unlink(r->bell);
    int fd = shm_open(r->name, O_CREAT | O_EXCL | O_RDWR, 0600);
    cr_assert_geq(fd, 0, "shm_open: %s", strerror(errno));
    cr_assert_eq(ftruncate(fd, (off_t)len), 0);
    r->len = len;
    r->map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    cr_assert_neq(r->map, MAP_FAILED);
    r->h = (cumod_ring_hdr *)r->map;
    if (sq != 0) {
        r->h->magic = CUMOD_RING_MAGIC;
        r->h->version = CUMOD_RING_VERSION;
        r->h->hdr_size = CUMOD_RING_HDR_SIZE;
        r->h->sq_size = sq;
        r->h->cq_size = cq;
        r->sq = r->map + CUMOD_RING_HDR_SIZE;
        r->cq = r->sq + sq;
    }
    if (fifo == 1) {
        cr_assert_eq(mkfifo(r->bell, 0600), 0);
        r->bell_fd = open(r->bell, O_RDWR | O_NONBLOCK);
        cr_assert_geq(r->bell_fd, 0);
    } else if (fifo == 2) {
        FILE *f = fopen(r->bell, "w");
        cr_assert_not_null(f);
        fputs("not a fifo", f);
        fclose(f);
    }
}

/* Makes r as libcumod makes the ring it hands over: a memfd of len bytes
 * sealed against shrinking and growing (the only kind the front hands to
 * an executor to read), a header with rings of sq and cq bytes, and a
 * pipe for its doorbell (r->bell_fd its writing end, *bell_rd the end
 * handed over). r->name stays empty: tr_hand_over gives it to cumodd. */
static inline void
tr_make_sealed(tr_ring *r, size_t len, uint64_t sq, uint64_t cq, int *mem,
               int *bell_rd)
{
    int p[2];
    memset(r, 0, sizeof(*r));
    *mem = memfd_create("cumod-ringtest", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    cr_assert_geq(*mem, 0, "memfd_create: %s", strerror(errno));
    cr_assert_eq(ftruncate(*mem, (off_t)len), 0);
    cr_assert_eq(fcntl(*mem, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
    r->len = len;
    r->map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, *mem, 0);
    cr_assert_neq(r->map, MAP_FAILED);
    r->h = (cumod_ring_hdr *)r->map;
    r->h->magic = CUMOD_RING_MAGIC;
    r->h->version = CUMOD_RING_VERSION;
    r->h->hdr_size = CUMOD_RING_HDR_SIZE;
    r->h->sq_size = sq;
    r->h->cq_size = cq;
    r->sq = r->map + CUMOD_RING_HDR_SIZE;
    r->cq = r->sq + sq;
    cr_assert_eq(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
    r->bell_fd = p[1];
    *bell_rd = p[0];
}

/* Hands mem and bell_rd to cumodd's descriptor socket (path, from its
 * Hello) under token, as libcumod does ("CMFD", version 1, the token):
 * 0 or errno. */
static inline int
tr_hand_over(const char *path, const uint8_t token[16], int mem, int bell_rd)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    uint8_t msg[21];
    int fds[2] = {mem, bell_rd};
    union {
        char c[CMSG_SPACE(sizeof(fds))];
        struct cmsghdr align;
    } ctl;
    memcpy(msg, "CMFD", 4);
    msg[4] = 1;
    memcpy(msg + 5, token, 16);
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
    memset(&ctl, 0, sizeof(ctl));
    struct iovec iov = {.iov_base = msg, .iov_len = sizeof(msg)};
    struct msghdr m = {.msg_name = &a,
                       .msg_namelen = sizeof(a),
                       .msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = ctl.c,
                       .msg_controllen = sizeof(ctl.c)};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(fds));
    memcpy(CMSG_DATA(cm), fds, sizeof(fds));
    int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int rv = sendmsg(s, &m, 0) == (ssize_t)sizeof(msg) ? 0 : errno;
    close(s);
    return rv;
}

/* Copies r's fields into a suite's own struct that has the same fields
 * (name, bell, map, len, h, sq, cq, bell_fd). */
#define TR_ADOPT(d, r)                                                         \
    do {                                                                       \
        _Static_assert(sizeof((d)->name) == sizeof((r).name) &&                \
                           sizeof((d)->bell) == sizeof((r).bell),              \
                       "the ring's names fit");                                \
        memcpy((d)->name, (r).name, sizeof((r).name));                         \
        memcpy((d)->bell, (r).bell, sizeof((r).bell));                         \
        (d)->map = (r).map;                                                    \
        (d)->len = (r).len;                                                    \
        (d)->h = (r).h;                                                        \
        (d)->sq = (r).sq;                                                      \
        (d)->cq = (r).cq;                                                      \
        (d)->bell_fd = (r).bell_fd;                                            \
    } while (0)

#endif
