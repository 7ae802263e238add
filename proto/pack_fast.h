/* SPDX-License-Identifier: MIT */
/*
 * A Request whose body is a Launch, or a Batch whose items are all
 * Launches, packed to the bytes protobuf-c would write, faster
 * (pack_fast.c). For libcumod, which sends these most.
 */
#ifndef CUMOD_PACK_FAST_H
#define CUMOD_PACK_FAST_H

#include <stddef.h>
#include <stdint.h>

#include "cumod.pb-c.h"

/* A batch's items already packed, as its field 2 entries one after the
 * other (cumod__pack_fast_items): a batch submitted again is not packed
 * again. */
typedef struct cumod__pack_items {
    const uint8_t *bytes;
    size_t len;
} cumod__pack_items;

/* The bytes q packs to, or 0 when q is not of that form (pack it with
 * protobuf-c). With pre (not NULL), q is a Batch whose items are pre's
 * bytes, whatever its items array says. */
size_t cumod__pack_fast_size(const Cumod__Request *q,
                             const cumod__pack_items *pre);

/* Writes q (for which cumod__pack_fast_size gave n > 0) into out, n
 * bytes; returns n. */
size_t cumod__pack_fast(const Cumod__Request *q, const cumod__pack_items *pre,
                        uint8_t *out);

/* The bytes of a Batch's items field for launch l (one entry), at most
 * cumod__pack_fast_item_max(l): appended to out, returns how many. */
size_t cumod__pack_fast_item_max(const Cumod__Launch *l);
size_t cumod__pack_fast_item(const Cumod__Launch *l, uint8_t *out);

#endif
