/* SPDX-License-Identifier: MIT */
#include "chanring.h"

#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct cumod_chanring_rec {
    uint32_t len; /* packet bytes; CHANRING_PAD: skip to the end */
    uint32_t pad;
} cumod_chanring_rec;

#define CHANRING_PAD 0xffffffffu

static uint64_t
chanring_space(uint64_t len)
{
    return sizeof(cumod_chanring_rec) + ((len + 7) & ~(uint64_t)7);
}

static int
chanring_map(cumod_chanring *r)
{
    r->map_len = CUMOD_CHANRING_HDR + CUMOD_CHANRING_SIZE;
    r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED,
                  r->mem_fd, 0);
    if (r->map == MAP_FAILED) {
        r->map = NULL;
        return -errno;
    }
    r->h = (cumod_chanring_hdr *)r->map;
    r->data = r->map + CUMOD_CHANRING_HDR;
    r->size = CUMOD_CHANRING_SIZE;
    return 0;
}

int
cumod__chanring_create(cumod_chanring *r)
{
    int rv;

    memset(r, 0, sizeof(*r));
    r->bell_fd = -1;
    if ((r->mem_fd = memfd_create("cumod-chanring", MFD_CLOEXEC)) < 0)
        return -errno;
    if (ftruncate(r->mem_fd, CUMOD_CHANRING_HDR + CUMOD_CHANRING_SIZE) != 0 ||
        (r->bell_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        rv = -errno;
        cumod__chanring_close(r);
        return rv;
    }
    if ((rv = chanring_map(r)) != 0) {
        cumod__chanring_close(r);
        return rv;
    }
    return 0;
}

int
cumod__chanring_attach(cumod_chanring *r, int mem_fd, int bell_fd)
{
    memset(r, 0, sizeof(*r));
    r->mem_fd = mem_fd;
    r->bell_fd = bell_fd;
    int rv = chanring_map(r);
    if (rv == 0)
        r->pos = atomic_load(&r->h->head);
    return rv;
}

int
cumod__chanring_attach_producer(cumod_chanring *r, int mem_fd, int bell_fd)
{
    memset(r, 0, sizeof(*r));
    r->mem_fd = mem_fd;
    r->bell_fd = bell_fd;
    int rv = chanring_map(r);
    if (rv == 0)
        r->pos = atomic_load(&r->h->tail);
    return rv;
}

void
cumod__chanring_close(cumod_chanring *r)
{
    if (r->map != NULL)
        munmap(r->map, r->map_len);
    if (r->mem_fd >= 0)
        close(r->mem_fd);
    if (r->bell_fd >= 0)
        close(r->bell_fd);
    memset(r, 0, sizeof(*r));
    r->mem_fd = r->bell_fd = -1;
}

int
cumod__chanring_put(cumod_chanring *r, const cumod_chan_hdr *hdr,
                    const void *payload, size_t len)
{
    uint64_t n = sizeof(*hdr) + len, need = chanring_space(n);
    uint64_t head = atomic_load_explicit(&r->h->head, memory_order_acquire);
    uint64_t tail = r->pos, off = tail & (r->size - 1);
    uint64_t pad = r->size - off < need ? r->size - off : 0;

    if (need > r->size / 4 || pad + need > r->size - (tail - head))
        return -EAGAIN;
    if (pad) {
        cumod_chanring_rec p = {.len = CHANRING_PAD};
        memcpy(r->data + off, &p, sizeof(p));
        tail += pad;
        off = 0;
    }
    cumod_chanring_rec rec = {.len = (uint32_t)n};
    cumod_chan_hdr h = *hdr;
    h.len = len;
    memcpy(r->data + off, &rec, sizeof(rec));
    memcpy(r->data + off + sizeof(rec), &h, sizeof(h));
    if (len)
        memcpy(r->data + off + sizeof(rec) + sizeof(h), payload, len);
    r->pos = tail + need;
    atomic_store_explicit(&r->h->tail, r->pos, memory_order_release);
    r->puts++;
    /* Dekker with the executor's sleeping flag: it sets the flag, then
     * looks at tail; we set tail, then look at the flag. */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&r->h->sleeping, memory_order_relaxed)) {
        uint64_t one = 1;
        r->bells++;
        if (write(r->bell_fd, &one, sizeof(one)) < 0) {
            /* EAGAIN: the counter is full of wake-ups already */
        }
    }
    return 0;
}

long
cumod__chanring_peek(cumod_chanring *r, const uint8_t **pkt)
{
    for (;;) {
        uint64_t tail = atomic_load_explicit(&r->h->tail, memory_order_acquire);
        uint64_t head = r->pos;
        if (tail == head)
            return 0;
        uint64_t off = head & (r->size - 1), to_end = r->size - off;
        cumod_chanring_rec rec;
        if (tail - head > r->size || to_end < sizeof(rec))
            return -EPROTO;
        memcpy(&rec, r->data + off, sizeof(rec));
        if (rec.len == CHANRING_PAD) {
            r->pos = head + to_end;
            atomic_store_explicit(&r->h->head, r->pos, memory_order_release);
            continue;
        }
        if (rec.len < sizeof(cumod_chan_hdr) ||
            chanring_space(rec.len) > to_end ||
            chanring_space(rec.len) > tail - head)
            return -EPROTO;
        *pkt = r->data + off + sizeof(rec);
        return (long)rec.len;
    }
}

int
cumod__chanring_ready(const cumod_chanring *r)
{
    return atomic_load_explicit(&r->h->tail, memory_order_relaxed) != r->pos;
}

void
cumod__chanring_pop(cumod_chanring *r)
{
    cumod_chanring_rec rec;
    memcpy(&rec, r->data + (r->pos & (r->size - 1)), sizeof(rec));
    r->pos += chanring_space(rec.len);
    atomic_store_explicit(&r->h->head, r->pos, memory_order_release);
}

void
cumod__chanring_sleeping(cumod_chanring *r, int sleeping)
{
    atomic_store_explicit(&r->h->sleeping, (uint32_t)sleeping,
                          memory_order_seq_cst);
    if (!sleeping) {
        uint64_t v;
        while (read(r->bell_fd, &v, sizeof(v)) > 0)
            ;
    }
}
