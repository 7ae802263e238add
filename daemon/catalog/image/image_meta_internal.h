/* SPDX-License-Identifier: MIT */
/*
 * The parts of cumod__imeta_describe, shared by image_meta.c (the entry
 * point, fatbins), image_meta_desc.c (building the description),
 * image_meta_cubin.c and image_meta_ptx.c. Each reader gets the bytes of one
 * image already checked by cumod__image_check, and bounds-checks every read of
 * them again all the same. Pure; any thread.
 */
#ifndef CUMOD_IMAGE_META_INTERNAL_H
#define CUMOD_IMAGE_META_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "image_meta.h"

/* image_meta_desc.c */
/* Appends a kernel named name[0, len) with nothing known yet (static_shared
 * 0, registers -1, no bounds, no cluster); *k points at it until the next
 * append. CUMOD_OK or CUMOD_ENOMEM (msg written). */
cumod_err cumod__imeta_add_kernel(cumod_imeta *m, const char *name, size_t len,
                                  cumod_kdesc **k, char *msg, size_t msglen);

/* Appends a global. CUMOD_OK or CUMOD_ENOMEM (msg written). */
cumod_err cumod__imeta_add_global(cumod_imeta *m, const char *name, size_t len,
                                  uint64_t size, int constant, char *msg,
                                  size_t msglen);

/* Describes a cubin (len bytes that cumod__image_check accepted as one)
 * into m, which starts zeroed; on error m may hold part of a description
 * (the caller releases it). what names the image in messages. */
cumod_err cumod__imeta_cubin(const uint8_t *b, size_t len, const char *what,
                             cumod_imeta *m, char *msg, size_t msglen);

/* Describes PTX text (n bytes, no NUL among them, already checked by
 * cumod__image_check_ptx) into m, as cumod__imeta_cubin does. */
cumod_err cumod__imeta_ptx(const char *s, size_t n, const char *what,
                           cumod_imeta *m, char *msg, size_t msglen);

/* Little-endian reads; p must have the bytes. */
static inline uint16_t
cumod__imeta_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t
cumod__imeta_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static inline uint64_t
cumod__imeta_le64(const uint8_t *p)
{
    return (uint64_t)cumod__imeta_le32(p) | (uint64_t)cumod__imeta_le32(p + 4)
                                                << 32;
}

/* 1 if [off, off + size) lies within len bytes, without overflowing. */
static inline int
cumod__imeta_within(uint64_t off, uint64_t size, size_t len)
{
    return off <= len && size <= len - off;
}

#endif
