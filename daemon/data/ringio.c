/* SPDX-License-Identifier: MIT */
/*
 * A ring's records in and out (ringio.h).
 */
#include "ringio.h"

#include <string.h>

int
cumod__ring_next(const uint8_t *sq, uint64_t size, uint64_t head, uint64_t tail,
                 cumod_ring_rec *rec, uint64_t *step, const char **why)
{
    if (tail == head)
        return 0;
    if (tail - head > size || (tail & 7) != 0) {
        *why = "its submission index is out of bounds";
        return -1;
    }
    uint64_t off = head & (size - 1), to_end = size - off;
    memcpy(rec, sq + off, sizeof(*rec)); /* read once */
    if (rec->kind == CUMOD_RING_REC_PAD) {
        *step = to_end;
    } else if (rec->kind == CUMOD_RING_REC_MSG && rec->len <= size / 2) {
        *step = cumod_ring_rec_space(rec->len);
    } else {
        *why = "a record has an unknown kind or length";
        return -1;
    }
    if (*step > to_end || *step > tail - head) {
        *why = "a record runs past what was written";
        return -1;
    }
    return 1;
}

/* Room for a record of len bytes from *tail on: its offset (a PAD record
 * written before it where it would run past the end), or -1. */
static int64_t
ring_room(uint8_t *cq, uint64_t size, uint64_t head, uint64_t *tail, size_t len)
{
    uint64_t t = *tail;
    if (t - head > size || (head & 7) != 0)
        return -1; /* a head the client made up */
    uint64_t free_b = size - (t - head);
    uint64_t off = t & (size - 1), need = cumod_ring_rec_space(len);
    uint64_t pad = size - off < need ? size - off : 0;
    if (need > size / 2 || pad + need > free_b)
        return -1;
    if (pad) {
        cumod_ring_rec pr = {.len = 0, .kind = CUMOD_RING_REC_PAD};
        memcpy(cq + off, &pr, sizeof(pr));
        t += pad;
        off = 0;
    }
    cumod_ring_rec rec = {.len = (uint32_t)len, .kind = CUMOD_RING_REC_MSG};
    memcpy(cq + off, &rec, sizeof(rec));
    *tail = t + need;
    return (int64_t)off;
}

int
cumod__ring_put(uint8_t *cq, uint64_t size, uint64_t head, uint64_t *tail,
                const Cumod__Reply *reply, size_t len)
{
    int64_t off = ring_room(cq, size, head, tail, len);
    if (off < 0)
        return -1;
    cumod__reply__pack(reply, cq + off + sizeof(cumod_ring_rec));
    return 0;
}

int
cumod__ring_put_bytes(uint8_t *cq, uint64_t size, uint64_t head, uint64_t *tail,
                      const uint8_t *bytes, size_t len)
{
    int64_t off = ring_room(cq, size, head, tail, len);
    if (off < 0)
        return -1;
    memcpy(cq + off + sizeof(cumod_ring_rec), bytes, len);
    return 0;
}
