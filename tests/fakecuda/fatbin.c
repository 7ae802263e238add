/* SPDX-License-Identifier: MIT */
/*
 * Fatbins: nvcc -fatbin's container of cubins and PTX texts.
 *
 * Layout (read from nvcc 13.0 output, little-endian):
 *   header, 16 bytes: u32 magic 0xBA55ED50, u16 version (1), u16 header
 *     size (16), u64 size of the entries that follow;
 *   entries, back to back, each a header and a payload:
 *     +0  u16 kind (1 PTX, 2 ELF)      +2  u16 version (0x0101)
 *     +4  u32 header size (64 ELF, 80 PTX)
 *     +8  u64 payload size (padded)    +16 u32 compressed size (0 if not)
 *     +24 u16 minor, u16 major (the PTX ISA or ELF ABI version)
 *     +28 u32 SM (80, 90: sm_90 SASS or compute_90 PTX)
 *     +32 u32 name offset, +36 u32 name length
 *     +40 u64 flags: 0x1 64-bit, 0x10 Linux, 0x2000 compressed (LZ4),
 *         0x8000 compressed (zstd; nvcc's default for PTX)
 *     +56 u64 uncompressed size
 *
 * The driver picks SASS for the device: the same major SM, the highest minor
 * not above the device's; else PTX of the highest SM not above the device's,
 * compiled by the JIT; else CUDA_ERROR_NO_BINARY_FOR_GPU. Every entry header
 * is checked before any is used: driver 580 never returns from a fatbin
 * whose entry header reads as zeros (as in a truncated, zero-padded file);
 * the fake answers CUDA_ERROR_INVALID_IMAGE there. The fake cannot
 * decompress: a compressed entry is skipped as if absent (the build passes
 * --compress-mode=none).
 */
#include "fake.h"

#include <string.h>

enum {
    FATBIN_MAGIC = 0xba55ed50u,
    FATBIN_PTX = 1,
    FATBIN_ELF = 2,
    FATBIN_ENTRY_MIN = 48,
    FATBIN_COMPRESSED = 0x2000 | 0x8000,
    FATBIN_MAX_TRIES = 64,
};

typedef struct fatbin_entry {
    uint16_t kind;
    uint32_t sm;
    uint64_t flags;
    const uint8_t *payload;
    size_t size;
} fatbin_entry;

static uint32_t
fatbin_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static uint64_t
fatbin_le64(const uint8_t *p)
{
    return (uint64_t)fatbin_le32(p) | (uint64_t)fatbin_le32(p + 4) << 32;
}

/* The next entry at *off: 1, 0 at the end, -1 if malformed. */
static int
fatbin_next(const uint8_t *p, size_t end, size_t *off, fatbin_entry *e)
{
    if (*off == end)
        return 0;
    if (end - *off < FATBIN_ENTRY_MIN)
        return -1;
    const uint8_t *h = p + *off;
    uint32_t hsize = fatbin_le32(h + 4);
    uint64_t psize = fatbin_le64(h + 8);
    if (hsize < FATBIN_ENTRY_MIN || hsize > end - *off ||
        psize > end - *off - hsize)
        return -1;
    e->kind = (uint16_t)(h[0] | h[1] << 8);
    e->sm = fatbin_le32(h + 28);
    e->flags = fatbin_le64(h + 40);
    e->payload = h + hsize;
    e->size = (size_t)psize;
    *off += hsize + (size_t)psize;
    return 1;
}

/* The best usable entry of a kind better than `worse` (by SM), or NULL:
 * tries run from the best down, each skipping what was tried before. */
static int
fatbin_better(const fatbin_entry *e, int kind, int sm, uint32_t below)
{
    if (e->kind != kind || (e->flags & FATBIN_COMPRESSED) || e->sm >= below)
        return 0;
    if (kind == FATBIN_ELF)
        return (int)e->sm / 10 == sm / 10 && (int)e->sm % 10 <= sm % 10;
    return (int)e->sm <= sm;
}

static int
fatbin_pick(const uint8_t *p, size_t end, size_t first, int kind, int sm,
            uint32_t below, fatbin_entry *best)
{
    size_t off = first;
    fatbin_entry e;
    int found = 0, r;
    while ((r = fatbin_next(p, end, &off, &e)) == 1)
        if (fatbin_better(&e, kind, sm, below) && (!found || e.sm > best->sm)) {
            *best = e;
            found = 1;
        }
    return r < 0 ? -1 : found;
}

CUresult
fake_fatbin_parse(const uint8_t *p, size_t n, int sm, fake_image *img,
                  fake_jitlog *log)
{
    memset(img, 0, sizeof(*img));
    if (n < 16 || fatbin_le32(p) != FATBIN_MAGIC)
        return CUDA_ERROR_INVALID_IMAGE;
    size_t hsize = (size_t)(p[6] | p[7] << 8);
    uint64_t size = fatbin_le64(p + 8);
    if (hsize < 16 || hsize > n || size > n - hsize) {
        fake_jitlog_printf(log, 1, "fakecuda: fatbin: bad header");
        return CUDA_ERROR_INVALID_IMAGE;
    }
    size_t end = hsize + (size_t)size;

    /* Validate every entry header first: a broken container is invalid even
     * if a good entry comes before the break. */
    size_t off = hsize;
    fatbin_entry e;
    int r;
    while ((r = fatbin_next(p, end, &off, &e)) == 1)
        ;
    if (r < 0) {
        fake_jitlog_printf(log, 1, "fakecuda: fatbin: bad entry at offset %zu",
                           off);
        return CUDA_ERROR_INVALID_IMAGE;
    }

    /* SASS: best first; an image refused for its SM (say an arch-specific
     * one) lets the next try. Any other error is the answer. */
    uint32_t below = UINT32_MAX;
    for (int tries = 0; tries < FATBIN_MAX_TRIES; tries++) {
        if (fatbin_pick(p, end, hsize, FATBIN_ELF, sm, below, &e) != 1)
            break;
        CUresult rc = fake_cubin_parse(e.payload, e.size, sm, img, log);
        if (rc == CUDA_SUCCESS)
            img->kind = FAKE_IMAGE_FATBIN_CUBIN;
        if (rc != CUDA_ERROR_NO_BINARY_FOR_GPU)
            return rc;
        below = e.sm;
    }
    if (fatbin_pick(p, end, hsize, FATBIN_PTX, sm, UINT32_MAX, &e) == 1) {
        /* The payload is padded with NULs: the text ends at the first. */
        const uint8_t *nul = memchr(e.payload, '\0', e.size);
        size_t len = nul != NULL ? (size_t)(nul - e.payload) : e.size;
        CUresult rc =
            fake_ptx_parse((const char *)e.payload, len, sm, img, log);
        if (rc == CUDA_SUCCESS)
            img->kind = FAKE_IMAGE_FATBIN_PTX;
        return rc;
    }
    fake_jitlog_printf(
        log, 1, "fakecuda: fatbin: no SASS for sm_%d and no PTX to compile",
        sm);
    return CUDA_ERROR_NO_BINARY_FOR_GPU;
}
