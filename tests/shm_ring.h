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
#include <sys/stat.h>
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
