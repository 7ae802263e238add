/* SPDX-License-Identifier: MIT */
/*
 * .nv.info records: the attributes ptxas leaves for the driver, one section
 * per kernel (.nv.info.<name>) and one for the module (.nv.info); the same
 * record format serves .nv.compat.
 *
 * Learnt from nvcc 13.0's output (hexdumps, checked against the H100):
 * each record is u8 format (1 none, 2 byte, 3 half-word, 4 sized), u8
 * attribute, u16 value or, for the sized format, the payload's length, then
 * the payload. Parameters are EIATTR_KPARAM_INFO (0x17) records, last
 * parameter first, 12 bytes each: u32 index (0), u16 ordinal, u16 offset in
 * the parameter buffer, u32 with the size in bits 18..31 (bits 12..17 the
 * constant bank, 0x1f). E.g. vadd: ordinal 3 offset 0x18 word 0x0011f000
 * (size 4); affine's 24-byte struct: ordinal 0 offset 0 word 0x0061f000.
 * A kernel whose parameters take more than 4 KiB has EIATTR_KPARAM_INFO_V2
 * (0x45) records instead, the same but for the size: the whole last word.
 * EIATTR_CBANK_PARAM_SIZE (0x19) is the buffer's size; EIATTR_MAX_THREADS
 * (0x05) the launch bounds (x, y, z) that cap MAX_THREADS_PER_BLOCK, and
 * EIATTR_REQNTID (0x10) the required block shape, which does not (the H100
 * says 1024 for .reqntid 64, 2, 1). EIATTR_CTA_PER_CLUSTER (0x3d, x, y, z)
 * is the cluster shape of __cluster_dims__ or .reqnctapercluster, and
 * EIATTR_EXPLICIT_CLUSTER (0x3e, no value) makes CLUSTER_SIZE_MUST_BE_SET
 * 1 (__cluster_dims__, .explicitcluster; a lone .reqnctapercluster has a
 * shape but leaves it 0). The module section keys EIATTR_REGCOUNT (0x2f)
 * and EIATTR_FRAME_SIZE (0x11) by symbol index: u32 symbol, u32 value.
 */
#include "fake.h"

#include <stdlib.h>

enum {
    EIFMT_NVAL = 1,
    EIFMT_BVAL = 2,
    EIFMT_HVAL = 3,
    EIFMT_SVAL = 4,
    EIATTR_MAX_THREADS = 0x05,
    EIATTR_FRAME_SIZE = 0x11,
    EIATTR_KPARAM_INFO = 0x17,
    EIATTR_CBANK_PARAM_SIZE = 0x19,
    EIATTR_REGCOUNT = 0x2f,
    EIATTR_CTA_PER_CLUSTER = 0x3d,
    EIATTR_EXPLICIT_CLUSTER = 0x3e,
    EIATTR_KPARAM_INFO_V2 = 0x45,
};

typedef struct nvinfo_attr {
    uint8_t fmt, attr;
    uint16_t value;
    const uint8_t *payload;
} nvinfo_attr;

static uint16_t
nvinfo_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t
nvinfo_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

/* The next .nv.info record at *off: 1, 0 at the end, -1 if malformed. */
static int
nvinfo_next(const uint8_t *d, size_t len, size_t *off, nvinfo_attr *a)
{
    if (*off == len)
        return 0;
    if (len - *off < 4)
        return -1;
    const uint8_t *r = d + *off;
    a->fmt = r[0];
    a->attr = r[1];
    a->value = nvinfo_le16(r + 2);
    a->payload = r + 4;
    if (a->fmt == EIFMT_SVAL) {
        if (a->value > len - *off - 4)
            return -1;
        *off += 4 + (size_t)a->value;
        return 1;
    }
    *off += 4;
    return a->fmt >= EIFMT_NVAL && a->fmt <= EIFMT_HVAL ? 1 : -1;
}

int
fake_nvinfo_module(const uint8_t *d, size_t len, uint32_t nsyms, int *regs,
                   int *frame)
{
    size_t off = 0;
    nvinfo_attr a;
    int r;
    while ((r = nvinfo_next(d, len, &off, &a)) == 1) {
        if (a.fmt != EIFMT_SVAL || a.value < 8 ||
            (a.attr != EIATTR_REGCOUNT && a.attr != EIATTR_FRAME_SIZE))
            continue;
        uint32_t sym = nvinfo_le32(a.payload), v = nvinfo_le32(a.payload + 4);
        if (sym < nsyms)
            (a.attr == EIATTR_REGCOUNT ? regs : frame)[sym] =
                v > 0xffff ? 0xffff : (int)v;
    }
    return r;
}

/* A parameter record, of either version. */
static int
nvinfo_is_param(const nvinfo_attr *a)
{
    return (a->attr == EIATTR_KPARAM_INFO ||
            a->attr == EIATTR_KPARAM_INFO_V2) &&
           a->fmt == EIFMT_SVAL && a->value >= 12;
}

int
fake_nvinfo_kernel(const uint8_t *d, size_t len, fake_kernel *k)
{
    size_t off = 0;
    nvinfo_attr a;
    int r;
    uint32_t nparams = 0, cbank = UINT32_MAX;
    while ((r = nvinfo_next(d, len, &off, &a)) == 1) {
        if (nvinfo_is_param(&a)) {
            uint32_t ord = nvinfo_le16(a.payload + 4);
            if (ord >= FAKE_MAX_PARAMS)
                return -1;
            if (ord + 1 > nparams)
                nparams = ord + 1;
        } else if (a.attr == EIATTR_CBANK_PARAM_SIZE && a.fmt == EIFMT_HVAL) {
            cbank = a.value;
        } else if (a.attr == EIATTR_MAX_THREADS && a.fmt == EIFMT_SVAL &&
                   a.value >= 12) {
            uint64_t t = 1;
            for (int dim = 0; dim < 3; dim++) {
                uint32_t v = nvinfo_le32(a.payload + 4 * dim);
                t *= v > 1024 ? 1025 : v;
            }
            if (t > 0 && t < (uint64_t)k->max_threads)
                k->max_threads = (int)t;
        } else if (a.attr == EIATTR_CTA_PER_CLUSTER && a.fmt == EIFMT_SVAL &&
                   a.value >= 12) {
            for (int dim = 0; dim < 3; dim++) {
                uint32_t v = nvinfo_le32(a.payload + 4 * dim);
                k->cluster[dim] = v > 0xffff ? 0xffff : (int)v;
            }
        } else if (a.attr == EIATTR_EXPLICIT_CLUSTER) {
            k->cluster_explicit = 1;
        }
    }
    if (r < 0)
        return -1;
    if (nparams == 0) {
        k->param_bytes = cbank == UINT32_MAX ? 0 : cbank;
        return 0;
    }
    uint8_t *seen = calloc(nparams, 1);
    k->params = calloc(nparams, sizeof(*k->params));
    if (seen == NULL || k->params == NULL) {
        free(seen);
        return -1;
    }
    k->nparams = nparams;
    uint32_t end = 0;
    off = 0;
    while (nvinfo_next(d, len, &off, &a) == 1) {
        if (!nvinfo_is_param(&a))
            continue;
        uint32_t ord = nvinfo_le16(a.payload + 4),
                 at = nvinfo_le16(a.payload + 6);
        uint32_t size = nvinfo_le32(a.payload + 8);
        if (a.attr == EIATTR_KPARAM_INFO) {
            size >>= 18;
        } else if (size > 1u << 20) { /* no parameter buffer is that large */
            size = 1u << 20;
            r = -1;
        }
        if (seen[ord]++)
            r = -1; /* a parameter described twice */
        k->params[ord] = (fake_param){at, size};
        if (at + size > end)
            end = at + size;
    }
    for (uint32_t i = 0; i < nparams; i++)
        if (!seen[i])
            r = -1; /* a parameter never described */
    free(seen);
    if (cbank != UINT32_MAX && cbank < end)
        r = -1;
    k->param_bytes = cbank != UINT32_MAX ? cbank : end;
    return r;
}

int
fake_nvinfo_has(const uint8_t *d, size_t len, uint8_t attr, uint8_t value)
{
    size_t off = 0;
    nvinfo_attr a;
    while (nvinfo_next(d, len, &off, &a) == 1)
        if (a.attr == attr && a.fmt == EIFMT_BVAL && (a.value & 0xff) == value)
            return 1;
    return 0;
}
