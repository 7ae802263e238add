/* SPDX-License-Identifier: MIT */
/*
 * Launches and batches of launches packed without protobuf-c's descriptor
 * walk: protobuf-c sizes each nested message again at every level above
 * it (a batch item's Dim3 is sized four times), which callgrind measured
 * at 6,200 instructions a batch item in libcumod, more than the daemon's
 * whole work for it. This writes the same bytes protobuf-c writes (fields
 * in number order, proto3 zero values left out, oneof members whenever
 * set), sizing each message once on the way down; tests/decode_test.c
 * compares the two on random messages.
 */
#include "pack_fast.h"

#include <string.h>

static inline size_t
vsize(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline uint8_t *
vput(uint8_t *o, uint64_t v)
{
    while (v >= 0x80) {
        *o++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *o++ = (uint8_t)v;
    return o;
}

/* An int32 (an enum) goes as its 64-bit sign extension: 10 bytes when
 * negative. */
static inline uint64_t
i32wire(int32_t v)
{
    return (uint64_t)(int64_t)v;
}

enum { WT_VARINT = 0, WT_LEN = 2 };

#define KEY(f, wt) ((uint64_t)(f) << 3 | (wt))

/* A varint field, left out when zero. */
static inline size_t
sz_varint(uint32_t f, uint64_t v)
{
    return v ? vsize(KEY(f, WT_VARINT)) + vsize(v) : 0;
}

static inline uint8_t *
put_varint(uint8_t *o, uint32_t f, uint64_t v)
{
    if (v) {
        o = vput(o, KEY(f, WT_VARINT));
        o = vput(o, v);
    }
    return o;
}

/* A length-delimited field of n bytes (always written). */
static inline size_t
sz_len(uint32_t f, size_t n)
{
    return vsize(KEY(f, WT_LEN)) + vsize(n) + n;
}

static inline uint8_t *
put_len(uint8_t *o, uint32_t f, size_t n)
{
    o = vput(o, KEY(f, WT_LEN));
    return vput(o, n);
}

static size_t
dim3_size(const Cumod__Dim3 *d)
{
    return sz_varint(1, d->x) + sz_varint(2, d->y) + sz_varint(3, d->z);
}

static uint8_t *
dim3_put(uint8_t *o, uint32_t f, const Cumod__Dim3 *d)
{
    if (d == NULL)
        return o;
    o = put_len(o, f, dim3_size(d));
    o = put_varint(o, 1, d->x);
    o = put_varint(o, 2, d->y);
    return put_varint(o, 3, d->z);
}

static size_t
dim3_field(uint32_t f, const Cumod__Dim3 *d)
{
    return d ? sz_len(f, dim3_size(d)) : 0;
}

static size_t
bufref_size(const Cumod__BufferRef *b)
{
    return sz_varint(1, b->handle) + sz_varint(2, b->offset);
}

static size_t
arg_size(const Cumod__Arg *a)
{
    if (a == NULL)
        return 0;
    size_t t = sz_varint(3, i32wire((int32_t)a->type));
    switch (a->kind_case) {
    case CUMOD__ARG__KIND_VALUE:
        return sz_len(1, a->value.len) + t;
    case CUMOD__ARG__KIND_BUFFER:
        return (a->buffer ? sz_len(2, bufref_size(a->buffer)) : 0) + t;
    default:
        return t;
    }
}

static uint8_t *
arg_put(uint8_t *o, const Cumod__Arg *a)
{
    o = put_len(o, 7, arg_size(a));
    if (a == NULL)
        return o;
    if (a->kind_case == CUMOD__ARG__KIND_VALUE) {
        o = put_len(o, 1, a->value.len);
        if (a->value.len)
            memcpy(o, a->value.data, a->value.len);
        o += a->value.len;
    } else if (a->kind_case == CUMOD__ARG__KIND_BUFFER && a->buffer) {
        o = put_len(o, 2, bufref_size(a->buffer));
        o = put_varint(o, 1, a->buffer->handle);
        o = put_varint(o, 2, a->buffer->offset);
    }
    return put_varint(o, 3, i32wire((int32_t)a->type));
}

static size_t
launch_size(const Cumod__Launch *l)
{
    size_t n = 0;
    size_t klen = l->kernel ? strlen(l->kernel) : 0;
    if (klen)
        n += sz_len(1, klen);
    n += sz_varint(2, l->generation) + dim3_field(3, l->grid) +
         dim3_field(4, l->block) + sz_varint(5, l->shared_mem) +
         sz_varint(6, l->stream);
    for (size_t i = 0; i < l->n_args; i++)
        n += sz_len(7, arg_size(l->args[i]));
    n += sz_varint(8, i32wire((int32_t)l->when)) +
         sz_varint(9, l->deadline_ms) + dim3_field(10, l->cluster) +
         sz_varint(11, l->cooperative != 0);
    if (l->carveout)
        n += sz_len(12, sz_varint(1, l->carveout->percent));
    return n;
}

/* l as field f, its size (launch_size) known. */
static uint8_t *
launch_put(uint8_t *o, uint32_t f, const Cumod__Launch *l, size_t size)
{
    size_t klen = l->kernel ? strlen(l->kernel) : 0;
    o = put_len(o, f, size);
    if (klen) {
        o = put_len(o, 1, klen);
        memcpy(o, l->kernel, klen);
        o += klen;
    }
    o = put_varint(o, 2, l->generation);
    o = dim3_put(o, 3, l->grid);
    o = dim3_put(o, 4, l->block);
    o = put_varint(o, 5, l->shared_mem);
    o = put_varint(o, 6, l->stream);
    for (size_t i = 0; i < l->n_args; i++)
        o = arg_put(o, l->args[i]);
    o = put_varint(o, 8, i32wire((int32_t)l->when));
    o = put_varint(o, 9, l->deadline_ms);
    o = dim3_put(o, 10, l->cluster);
    o = put_varint(o, 11, l->cooperative != 0);
    if (l->carveout) {
        o = put_len(o, 12, sz_varint(1, l->carveout->percent));
        o = put_varint(o, 1, l->carveout->percent);
    }
    return o;
}

/* Whether the fast packer knows every part of q (no unknown fields kept,
 * every batch item a launch). */
static int
pack_fast_known(const Cumod__Request *q)
{
    if (q->base.n_unknown_fields)
        return 0;
    if (q->body_case == CUMOD__REQUEST__BODY_LAUNCH)
        return q->launch != NULL && !q->launch->base.n_unknown_fields;
    if (q->body_case != CUMOD__REQUEST__BODY_BATCH || q->batch == NULL ||
        q->batch->base.n_unknown_fields)
        return 0;
    for (size_t i = 0; i < q->batch->n_items; i++) {
        const Cumod__BatchItem *it = q->batch->items[i];
        if (it == NULL || it->item_case != CUMOD__BATCH_ITEM__ITEM_LAUNCH ||
            it->launch == NULL || it->base.n_unknown_fields ||
            it->launch->base.n_unknown_fields)
            return 0;
    }
    return 1;
}

static size_t
batch_size(const Cumod__Batch *b, const cumod__pack_items *pre)
{
    size_t n = sz_varint(1, b->stream);
    if (pre != NULL)
        n += pre->len;
    else
        for (size_t i = 0; i < b->n_items; i++)
            n += sz_len(2, sz_len(1, launch_size(b->items[i]->launch)));
    return n + sz_varint(3, i32wire((int32_t)b->when)) +
           sz_varint(4, b->deadline_ms);
}

size_t
cumod__pack_fast_size(const Cumod__Request *q, const cumod__pack_items *pre)
{
    if (pre != NULL
            ? q->body_case != CUMOD__REQUEST__BODY_BATCH || q->batch == NULL ||
                  q->base.n_unknown_fields || q->batch->base.n_unknown_fields
            : !pack_fast_known(q))
        return 0;
    size_t n = sz_varint(1, q->version) + sz_varint(2, q->id);
    if (q->body_case == CUMOD__REQUEST__BODY_LAUNCH)
        return n + sz_len(36, launch_size(q->launch));
    return n + sz_len(37, batch_size(q->batch, pre));
}

static uint8_t *
item_put(uint8_t *o, const Cumod__Launch *l)
{
    size_t ls = launch_size(l);
    o = put_len(o, 2, sz_len(1, ls));
    return launch_put(o, 1, l, ls);
}

size_t
cumod__pack_fast_item_max(const Cumod__Launch *l)
{
    return sz_len(2, sz_len(1, launch_size(l)));
}

size_t
cumod__pack_fast_item(const Cumod__Launch *l, uint8_t *out)
{
    return (size_t)(item_put(out, l) - out);
}

size_t
cumod__pack_fast(const Cumod__Request *q, const cumod__pack_items *pre,
                 uint8_t *out)
{
    uint8_t *o = out;
    o = put_varint(o, 1, q->version);
    o = put_varint(o, 2, q->id);
    if (q->body_case == CUMOD__REQUEST__BODY_LAUNCH) {
        o = launch_put(o, 36, q->launch, launch_size(q->launch));
    } else {
        const Cumod__Batch *b = q->batch;
        o = put_len(o, 37, batch_size(b, pre));
        o = put_varint(o, 1, b->stream);
        if (pre != NULL) {
            memcpy(o, pre->bytes, pre->len);
            o += pre->len;
        } else {
            for (size_t i = 0; i < b->n_items; i++)
                o = item_put(o, b->items[i]->launch);
        }
        o = put_varint(o, 3, i32wire((int32_t)b->when));
        o = put_varint(o, 4, b->deadline_ms);
    }
    return (size_t)(o - out);
}
