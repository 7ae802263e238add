/* SPDX-License-Identifier: MIT */
/*
 * cumod__imeta_describe: which image to read (a fatbin's entry picked as
 * the driver picks it), then the cubin or PTX reader (image_meta_cubin.c,
 * image_meta_ptx.c); the description's own memory is image_meta_desc.c's.
 *
 * Fatbins. The container is the one cumod__image_check walks (see
 * tests/fakecuda/fatbin.c for the layout read from nvcc 13.0's output): a
 * 16-byte header, then entries, each a header and a payload. Of an entry's
 * header this reads: +0 u16 kind (1 PTX, 2 ELF), +4 u32 header size, +8
 * u64 payload size, +16 u32 compressed size (0 if not), +28 u32 SM (90 for
 * sm_90 SASS or compute_90 PTX), +40 u64 flags (0x2000 LZ4 and 0x8000
 * zstd compression). The driver runs a cubin of the device's major SM with
 * the highest minor not above the device's (an arch-specific one only on
 * exactly its SM), and only where there is none compiles the PTX of the
 * highest SM not above the device's; the same pick is made here, trying
 * the next candidate where a cubin or PTX text refuses the device (an 'a'
 * build). Nothing here decompresses: where the entry the driver would pick
 * is compressed, the image is not described (nvcc compresses by default;
 * the build's fatbins pass --compress-mode=none), rather than describing
 * an entry the driver would not use.
 */
#include "image_meta.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumod/errors.h"
#include "image_meta_internal.h"
#include "common/status.h"

enum {
    META_FATBIN_HDR = 16,
    META_ENTRY_MIN = 48, /* an entry header up to its flags */
    META_ENTRY_PTX = 1,
    META_ENTRY_ELF = 2,
    META_COMPRESSED = 0x2000 | 0x8000,
    META_MAX_TRIES = 64, /* candidates refused for their SM before giving up */
};

typedef struct meta_entry {
    uint64_t off; /* of its header */
    unsigned kind;
    uint32_t sm;
    int compressed;
    const uint8_t *payload;
    uint64_t size;
} meta_entry;

/* The entry at *off of the entries ending at end: 1, 0 past the last, -1
 * if malformed (cumod__image_check walked them, but trusts no more than
 * their sizes). */
static int
meta_entry_next(const uint8_t *b, uint64_t end, uint64_t *off, meta_entry *e)
{
    const uint8_t *h;
    uint32_t hsize;
    uint64_t psize;

    if (*off >= end)
        return 0;
    if (end - *off < META_ENTRY_MIN)
        return -1;
    h = b + *off;
    hsize = cumod__imeta_le32(h + 4);
    psize = cumod__imeta_le64(h + 8);
    if (hsize < META_ENTRY_MIN || hsize > end - *off ||
        psize > end - *off - hsize)
        return -1;
    e->off = *off;
    e->kind = cumod__imeta_le16(h);
    e->sm = cumod__imeta_le32(h + 28);
    e->compressed = (cumod__imeta_le64(h + 40) & META_COMPRESSED) != 0 ||
                    cumod__imeta_le32(h + 16) != 0;
    e->payload = h + hsize;
    e->size = psize;
    *off += hsize + psize;
    return 1;
}

/* Orders candidates as the driver tries them: the highest SM first, then
 * the first in the file. 1 if a comes before b. */
static int
meta_entry_before(const meta_entry *a, const meta_entry *b)
{
    return a->sm > b->sm || (a->sm == b->sm && a->off < b->off);
}

/* The next candidate of the kind for the device's SM (dev, major * 10 +
 * minor) after *prev (NULL: the first): 1 with *e, 0 if none, -1 if the
 * entries are malformed. */
static int
meta_entry_pick(const uint8_t *b, uint64_t first, uint64_t end, unsigned kind,
                unsigned dev, const meta_entry *prev, meta_entry *e)
{
    uint64_t off = first;
    meta_entry c;
    int r, found = 0;

    while ((r = meta_entry_next(b, end, &off, &c)) == 1) {
        if (c.kind != kind)
            continue;
        if (kind == META_ENTRY_ELF
                ? c.sm / 10 != dev / 10 || c.sm % 10 > dev % 10
                : c.sm > dev)
            continue;
        if (prev != NULL && !meta_entry_before(prev, &c))
            continue;
        if (!found || meta_entry_before(&c, e)) {
            *e = c;
            found = 1;
        }
    }
    return r < 0 ? -1 : found;
}

/* Describes the entry e of a fatbin: 1 if described (or failed: *rc), 0 if
 * its image refuses the device and the next candidate should be tried. */
static int
meta_fatbin_entry(const meta_entry *e, const char *name, unsigned smj,
                  unsigned smn, cumod_imeta *m, cumod_err *rc, char *msg,
                  size_t msglen)
{
    const char *what = e->kind == META_ENTRY_ELF ? "cubin" : "PTX";
    const char *arch = e->kind == META_ENTRY_ELF ? "sm" : "compute";
    cumod_image_kind kind =
        e->kind == META_ENTRY_ELF ? CUMOD_IMAGE_CUBIN : CUMOD_IMAGE_PTX;
    char sub[200];
    unsigned sm_major, sm_minor;
    size_t n;

    if (e->compressed) {
        *rc = cumod__errf(msg, msglen, CUMOD_ENOTSUP,
                          "%s: not described: compressed: the driver would "
                          "use its %s_%u %s (the entry at byte %llu), which "
                          "is compressed",
                          name, arch, e->sm, what, (unsigned long long)e->off);
        return 1;
    }
    snprintf(sub, sizeof(sub), "%s (its %s_%u %s entry at byte %llu)", name,
             arch, e->sm, what, (unsigned long long)e->off);
    /* First the image on its own, so that a malformed entry is an error
     * while one built for another SM lets the next candidate try. */
    *rc = cumod__image_check(e->payload, (size_t)e->size, kind, sub, 0, 0, NULL,
                             NULL, NULL, msg, msglen);
    if (*rc != CUMOD_OK)
        return 1;
    if (cumod__image_check(e->payload, (size_t)e->size, kind, sub, smj, smn,
                           &sm_major, &sm_minor, NULL, msg, msglen) != CUMOD_OK)
        return 0;
    m->source_sm = sm_major * 10 + sm_minor;
    m->source_offset = (size_t)e->off;
    if (kind == CUMOD_IMAGE_CUBIN) {
        m->source = CUMOD_IMETA_FATBIN_CUBIN;
        *rc = cumod__imeta_cubin(e->payload, (size_t)e->size, sub, m, msg,
                                 msglen);
    } else {
        /* The payload is padded with NULs: the text ends at the first. */
        for (n = 0; n < e->size && e->payload[n] != 0; n++)
            ;
        m->source = CUMOD_IMETA_FATBIN_PTX;
        *rc =
            cumod__imeta_ptx((const char *)e->payload, n, sub, m, msg, msglen);
    }
    return 1;
}

static cumod_err
meta_fatbin(const uint8_t *b, size_t len, const char *name, unsigned smj,
            unsigned smn, cumod_imeta *m, char *msg, size_t msglen)
{
    static const unsigned kinds[2] = {META_ENTRY_ELF, META_ENTRY_PTX};
    unsigned dev = smj * 10 + smn, hdr = cumod__imeta_le16(b + 6);
    uint64_t end = hdr + cumod__imeta_le64(b + 8);
    meta_entry e, prev;
    cumod_err rc = CUMOD_OK;
    int k, tries, r;

    if (smj == 0 && smn == 0)
        return cumod__errf(msg, msglen, CUMOD_EINVAL,
                           "%s: a fatbin is described for a device: which "
                           "entry the driver uses depends on its SM",
                           name);
    if (hdr < META_FATBIN_HDR || !cumod__imeta_within(hdr, end - hdr, len))
        return cumod__errf(msg, msglen, CUMOD_EIMAGE,
                           "%s: its fatbin header is malformed", name);
    for (k = 0; k < 2; k++) {
        for (tries = 0; tries < META_MAX_TRIES; tries++) {
            r = meta_entry_pick(b, hdr, end, kinds[k], dev,
                                tries > 0 ? &prev : NULL, &e);
            if (r < 0)
                return cumod__errf(msg, msglen, CUMOD_EIMAGE,
                                   "%s: a fatbin entry header is malformed "
                                   "(shorter than %d bytes, or running past "
                                   "the container)",
                                   name, META_ENTRY_MIN);
            if (r == 0)
                break;
            if (meta_fatbin_entry(&e, name, smj, smn, m, &rc, msg, msglen))
                return rc;
            prev = e;
        }
    }
    return cumod__errf(msg, msglen, CUMOD_EIMAGE,
                       "%s: the fatbin holds no cubin for sm_%u%u and no PTX "
                       "the driver could compile for it",
                       name, smj, smn);
}

cumod_err
cumod__imeta_describe(const uint8_t *bytes, size_t len, cumod_image_kind kind,
                      const char *name, unsigned sm_major, unsigned sm_minor,
                      cumod_imeta *out, char *msg, size_t msglen)
{
    cumod_imeta m;
    unsigned smj = 0, smn = 0;
    cumod_err rc;
    size_t n;

    if (name == NULL)
        name = "the image";
    if (out == NULL || bytes == NULL)
        return cumod__errf(msg, msglen, CUMOD_EINVAL,
                           "%s: nothing to describe, or nowhere to put it",
                           name);
    if (kind == CUMOD_IMAGE_CU)
        return cumod__errf(msg, msglen, CUMOD_ENOTSUP,
                           "%s: CUDA C++ source is described once compiled",
                           name);
    rc = cumod__image_check(bytes, len, kind, name, sm_major, sm_minor, &smj,
                            &smn, NULL, msg, msglen);
    if (rc != CUMOD_OK)
        return rc;
    memset(&m, 0, sizeof(m));
    switch (kind) {
    case CUMOD_IMAGE_CUBIN:
        m.source = CUMOD_IMETA_CUBIN;
        m.source_sm = smj * 10 + smn;
        rc = cumod__imeta_cubin(bytes, len, name, &m, msg, msglen);
        break;
    case CUMOD_IMAGE_PTX:
        for (n = 0; n < len && bytes[n] != 0; n++)
            ;
        m.source = CUMOD_IMETA_PTX;
        m.source_sm = smj * 10 + smn;
        rc = cumod__imeta_ptx((const char *)bytes, n, name, &m, msg, msglen);
        break;
    default:
        rc = meta_fatbin(bytes, len, name, sm_major, sm_minor, &m, msg, msglen);
        break;
    }
    if (rc != CUMOD_OK) {
        cumod__imeta_fini(&m);
        return rc;
    }
    *out = m;
    return CUMOD_OK;
}
