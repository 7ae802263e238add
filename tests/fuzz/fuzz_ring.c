/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness: bytes -> a submission ring in shared memory that its
 * "client" writes and truncates between records, taken as the front takes
 * it (front/transport/ring.c ring_take): the SIGBUS guard (shmguard.c) around
 * every read of the memory, the record checks (cumod__ring_next), then each
 * record's bytes copied out and decoded with the front's decoder, and read
 * as the executor reads a ring it serves (exec/direct_record.c): its
 * launch decoder, the body's field number, and a GEMM's checks
 * (data/gemm_check.c) against three buffers of a snapshot.
 *
 * An input is a list of operations on one fresh ring (a memfd, the same
 * tmpfs object shm_open makes, registered with the guard):
 *   'r' kind:u8 len:u16le bytes[len]  write a record at the tail, move it
 *                                     by what the record needs
 *   's' step:u32le                    move the tail by step instead
 *   't'                               take, as ring_take does
 *   'z' size:u32le                    ftruncate the ring to size % 2*RSIZE
 * A SIGBUS outside the ring, a crash, or a sanitizer report is a finding;
 * a truncated ring must end with the guard marked bad, never with a signal.
 * Seeds: tests/fuzz/corpus/ring (hand-made: records, a wrap, a truncation
 * between records, a truncation and regrowth, two GEMM records).
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cumod.pb-c.h"
#include "cumod_ring.h"
#include "data/decode.h"
#include "data/gemm_check.h"
#include "data/ringio.h"
#include "common/shmguard.h"
#include "common/status.h"

#define SQ CUMOD_RING_MIN
#define RSIZE (CUMOD_RING_HDR_SIZE + SQ)

typedef struct fz {
    const uint8_t *p;
    size_t n;
} fz;

static int
fz_take(fz *f, void *out, size_t len)
{
    if (f->n < len)
        return -1;
    memcpy(out, f->p, len);
    f->p += len;
    f->n -= len;
    return 0;
}

/* The snapshot's buffers: handles 1-3, small and large. */
static cumod_err
fuzz_buf(const void *arg, const char *what, uint64_t handle, uint64_t *dptr,
         uint64_t *size, cumod_status *st)
{
    static const uint64_t sizes[] = {4096, (uint64_t)1 << 20, UINT64_MAX / 2};
    (void)arg;
    if (handle == 0 || handle > 3)
        return cumod__status_set(st, CUMOD_ENOENT, "%s: buffer %llu", what,
                                 (unsigned long long)handle);
    *dptr = handle << 40;
    *size = sizes[handle - 1];
    return CUMOD_OK;
}

/* What the executor makes of a record's bytes (direct_record.c's
 * dring_record): its launch decoder, else the body's field number and, for
 * a GEMM, the whole decoder and the GEMM's checks. */
static void
fuzz_exec_read(cumod_decoder *dec, const uint8_t *buf, size_t len)
{
    Cumod__Request *req = NULL;
    cumod_status st;
    if (cumod__decode_launch(dec, buf, len, &req)) {
        (void)req->id;
        cumod__decoder_release(dec);
        return;
    }
    if (cumod__decode_body_field(buf, len) != CUMOD__REQUEST__BODY_GEMM)
        return;
    if (cumod__decode_request(dec, buf, len, &req, &st) == CUMOD_OK &&
        req->body_case == CUMOD__REQUEST__BODY_GEMM) {
        cumod_chan_gemm g;
        if (cumod__gemm_check(req->gemm, fuzz_buf, NULL, &g, &st) == CUMOD_OK &&
            (g.m <= 0 || g.n <= 0 || g.k <= 0))
            abort(); /* checked, yet not what cuBLAS can take */
    }
    cumod__decoder_release(dec);
}

/* ring_take's loop: -1 once the ring is given up. */
static int
fuzz_take(cumod_shm_range *guard, cumod_ring_hdr *h, uint8_t *sq,
          uint64_t *head, cumod_decoder *dec)
{
    static uint8_t buf[SQ];
    for (int n = 0; n < 64; n++) {
        uint64_t tail = atomic_load(&h->sq_tail), step = 0;
        cumod_ring_rec rec;
        const char *why = NULL;
        if (cumod__shmguard_bad(guard))
            return -1;
        int got = cumod__ring_next(sq, SQ, *head, tail, &rec, &step, &why);
        if (cumod__shmguard_bad(guard))
            return -1;
        if (got <= 0)
            return got;
        if (rec.kind == CUMOD_RING_REC_MSG) {
            uint64_t off = *head & (SQ - 1);
            memcpy(buf, sq + off + sizeof(rec), rec.len);
            if (cumod__shmguard_bad(guard))
                return -1;
            Cumod__Request *req = NULL;
            cumod_status st;
            if (cumod__decode_request(dec, buf, rec.len, &req, &st) == CUMOD_OK)
                (void)req->id;
            cumod__decoder_release(dec);
            fuzz_exec_read(dec, buf, rec.len);
        }
        *head += step;
        atomic_store(&h->sq_head, *head);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz f = {data, size};
    cumod_shm_range *guard = NULL;
    cumod_decoder dec;
    uint64_t head = 0;
    int fd = memfd_create("cumod-fuzz-ring", MFD_CLOEXEC);

    if (fd < 0 || ftruncate(fd, RSIZE) != 0)
        abort();
    uint8_t *map = mmap(NULL, RSIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED ||
        cumod__shmguard_add(map, RSIZE, &guard) != CUMOD_OK)
        abort();
    cumod__decoder_init(&dec);
    cumod_ring_hdr *h = (cumod_ring_hdr *)map;
    uint8_t *sq = map + CUMOD_RING_HDR_SIZE;
    h->magic = CUMOD_RING_MAGIC;
    h->sq_size = SQ;

    uint8_t op;
    while (fz_take(&f, &op, 1) == 0) {
        /* The "client" writes through the guarded mapping too: its own
         * writes to pages cut off end the ring as the daemon's reads do. */
        if (cumod__shmguard_bad(guard))
            break;
        uint64_t tail = atomic_load(&h->sq_tail);
        uint32_t v = 0;
        if (op == 'r') {
            uint8_t kind;
            uint16_t len;
            if (fz_take(&f, &kind, 1) || fz_take(&f, &len, 2))
                break;
            if (len > f.n)
                len = (uint16_t)f.n;
            uint64_t off = tail & (SQ - 1);
            cumod_ring_rec rec = {.len = len,
                                  .kind = kind == 0   ? CUMOD_RING_REC_MSG
                                          : kind == 1 ? CUMOD_RING_REC_PAD
                                                      : kind};
            if (off + sizeof(rec) + len <= SQ) {
                memcpy(sq + off, &rec, sizeof(rec));
                memcpy(sq + off + sizeof(rec), f.p, len);
            }
            f.p += len;
            f.n -= len;
            atomic_store(&h->sq_tail, tail + cumod_ring_rec_space(len));
        } else if (op == 's') {
            if (fz_take(&f, &v, 4))
                break;
            atomic_store(&h->sq_tail, tail + v);
        } else if (op == 't') {
            if (fuzz_take(guard, h, sq, &head, &dec) < 0)
                break;
        } else if (op == 'z') {
            if (fz_take(&f, &v, 4))
                break;
            if (ftruncate(fd, (off_t)(v % (2 * RSIZE))) != 0)
                abort();
        }
    }
    /* A ring its client cut short is read as zeros since, never a signal;
     * and one left whole is never marked. */
    (void)fuzz_take(guard, h, sq, &head, &dec);
    cumod__decoder_fini(&dec);
    cumod__shmguard_remove(guard);
    munmap(map, RSIZE);
    close(fd);
    return 0;
}
