/* SPDX-License-Identifier: MIT */
/*
 * The launch decoder: Requests whose body is a Launch, or a Batch of
 * Launches, decoded straight into the same protobuf-c structs, in the same
 * arena, without protobuf-c's descriptor walk. Measured with callgrind on
 * a batch of 256 empty launches: protobuf_c_message_unpack took 3,000
 * instructions an item, 71% of the front's work for the batch, against
 * 1,060 for every check and the work message together; a batch is decoded
 * before any of it reaches the executor, so that cost is in every batch's
 * round trip.
 *
 * It takes only what it is sure of: each field of the messages it knows
 * at most once (repeated ones aside), with its declared wire type, values
 * in range (a uint32 below 2^32, an enum or bool 0 or 1), no unknown
 * fields, no other body or item kind (an argument's type is one of the
 * ArgTypes this build knows). Anything else, valid or not, is
 * left to protobuf-c (return 0), which decides as before; so what this
 * decodes is what protobuf-c would have made of the same bytes, field by
 * field (tests/decode_test.c and the request fuzzer compare the two).
 */
#include "decode.h"

#include <stdint.h>
#include <string.h>

typedef struct rd {
    const uint8_t *p, *end;
} rd;

/* A varint of at most max bytes (protobuf-c reads keys and lengths from
 * at most 5, values from at most 10); 0 past that or past 64 bits. */
static inline int
rd_varint_max(rd *r, uint64_t *v, unsigned max)
{
    uint64_t x = 0;
    if (r->p < r->end && *r->p < 0x80) { /* most keys and values */
        *v = *r->p++;
        return 1;
    }
    for (unsigned i = 0; i < max && r->p < r->end; i++) {
        uint8_t b = *r->p++;
        if (i == 9 && b > 1)
            return 0;
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = x;
            return 1;
        }
    }
    return 0;
}

static inline int
rd_varint(rd *r, uint64_t *v)
{
    return rd_varint_max(r, v, 10);
}

static inline int
rd_u32(rd *r, uint32_t *v)
{
    uint64_t x;
    if (!rd_varint(r, &x) || x > UINT32_MAX)
        return 0;
    *v = (uint32_t)x;
    return 1;
}

/* An enum or bool: only 0 and 1. */
static inline int
rd_bit(rd *r, uint32_t *v)
{
    return rd_u32(r, v) && *v <= 1;
}

/* A field's key: its number (never 0) and wire type. */
static inline int
rd_key(rd *r, uint32_t *field, uint32_t *wt)
{
    uint64_t k;
    if (!rd_varint_max(r, &k, 5) || k > UINT32_MAX || (k >> 3) == 0)
        return 0;
    *field = (uint32_t)(k >> 3);
    *wt = (uint32_t)(k & 7);
    return 1;
}

/* A length-delimited field's bytes, as a reader of their own. */
static inline int
rd_len(rd *r, rd *in)
{
    uint64_t n;
    if (!rd_varint_max(r, &n, 5) || n > (uint64_t)(r->end - r->p))
        return 0;
    in->p = r->p;
    in->end = r->p + n;
    r->p += n;
    return 1;
}

enum { WT_VARINT = 0, WT_LEN = 2 };

/* Arguments a launch may carry on the fast path: as many as the checks
 * take (CUMOD_MAX_ARGS); more go to protobuf-c, and are refused there. */
#define LAUNCH_ARGS_MAX 1024

/* Marks field f of a message seen; 0 if it was already (protobuf-c would
 * keep the last scalar, or merge messages: left to it). */
#define ONCE(seen, f)                                                          \
    do {                                                                       \
        if ((seen) & (1u << (f)))                                              \
            return 0;                                                          \
        (seen) |= 1u << (f);                                                   \
    } while (0)

/* How many times field want occurs in m (all LEN or VARINT fields). */
static int
rd_count(rd m, uint32_t want, size_t *n)
{
    *n = 0;
    while (m.p < m.end) {
        uint32_t f, wt;
        uint64_t v;
        rd skip;
        if (!rd_key(&m, &f, &wt))
            return 0;
        if (wt == WT_LEN ? !rd_len(&m, &skip)
                         : wt != WT_VARINT || !rd_varint(&m, &v))
            return 0;
        *n += f == want;
    }
    return 1;
}

static void *
fast_alloc(cumod_decoder *d, size_t n)
{
    return d->pa.alloc(d->pa.allocator_data, n);
}

static int
dec_dim3(cumod_decoder *d, rd m, Cumod__Dim3 **out)
{
    static const Cumod__Dim3 init = CUMOD__DIM3__INIT;
    Cumod__Dim3 *x = fast_alloc(d, sizeof(*x));
    unsigned seen = 0;
    if (x == NULL)
        return 0;
    *x = init;
    /* What libcumod sends: x, y and z, each under 128. */
    if (m.end - m.p == 6 && m.p[0] == 0x08 && m.p[1] < 0x80 && m.p[2] == 0x10 &&
        m.p[3] < 0x80 && m.p[4] == 0x18 && m.p[5] < 0x80) {
        x->x = m.p[1];
        x->y = m.p[3];
        x->z = m.p[5];
        *out = x;
        return 1;
    }
    while (m.p < m.end) {
        uint32_t f, wt, *dst;
        if (!rd_key(&m, &f, &wt) || wt != WT_VARINT)
            return 0;
        switch (f) {
        case 1:
            dst = &x->x;
            break;
        case 2:
            dst = &x->y;
            break;
        case 3:
            dst = &x->z;
            break;
        default:
            return 0;
        }
        ONCE(seen, f);
        if (!rd_u32(&m, dst))
            return 0;
    }
    *out = x;
    return 1;
}

static int
dec_arg(cumod_decoder *d, rd m, Cumod__Arg **out)
{
    static const Cumod__Arg init = CUMOD__ARG__INIT;
    static const Cumod__BufferRef binit = CUMOD__BUFFER_REF__INIT;
    Cumod__Arg *a = fast_alloc(d, sizeof(*a));
    if (a == NULL)
        return 0;
    *a = init;
    unsigned seen_type = 0;
    while (m.p < m.end) {
        uint32_t f, wt, t;
        rd in;
        if (!rd_key(&m, &f, &wt))
            return 0;
        if (f == 3) { /* type: one this daemon knows */
            ONCE(seen_type, f);
            if (wt != WT_VARINT || !rd_u32(&m, &t) ||
                t > CUMOD__ARG_TYPE__ARG_TYPE_U8)
                return 0;
            a->type = (Cumod__ArgType)t;
            continue;
        }
        if (wt != WT_LEN || !rd_len(&m, &in) ||
            a->kind_case != CUMOD__ARG__KIND__NOT_SET)
            return 0; /* a second member of the oneof: protobuf-c's */
        if (f == 1) {
            size_t n = (size_t)(in.end - in.p);
            a->kind_case = CUMOD__ARG__KIND_VALUE;
            a->value.len = n;
            a->value.data = NULL; /* protobuf-c's for empty bytes */
            if (n > 0) {
                if ((a->value.data = fast_alloc(d, n)) == NULL)
                    return 0;
                memcpy(a->value.data, in.p, n);
            }
        } else if (f == 2) {
            Cumod__BufferRef *b = fast_alloc(d, sizeof(*b));
            unsigned seen = 0;
            if (b == NULL)
                return 0;
            *b = binit;
            while (in.p < in.end) {
                uint32_t g, gwt;
                uint64_t *dst;
                if (!rd_key(&in, &g, &gwt) || gwt != WT_VARINT ||
                    (g != 1 && g != 2))
                    return 0;
                ONCE(seen, g);
                dst = g == 1 ? &b->handle : &b->offset;
                if (!rd_varint(&in, dst))
                    return 0;
            }
            a->kind_case = CUMOD__ARG__KIND_BUFFER;
            a->buffer = b;
        } else {
            return 0;
        }
    }
    *out = a;
    return 1;
}

static int
dec_launch(cumod_decoder *d, rd m, Cumod__Launch **out)
{
    /* Long: a decoder's switch over the fields of Launch, one case a field. */
    static const Cumod__Launch init = CUMOD__LAUNCH__INIT;
    static const Cumod__Carveout cinit = CUMOD__CARVEOUT__INIT;
    Cumod__Launch *l = fast_alloc(d, sizeof(*l));
    Cumod__Arg *args[LAUNCH_ARGS_MAX];
    unsigned seen = 0;

    if (l == NULL)
        return 0;
    *l = init;
    while (m.p < m.end) {
        uint32_t f, wt, v;
        rd in;
        if (!rd_key(&m, &f, &wt))
            return 0;
        switch (f) {
        case 1:  /* kernel */
        case 3:  /* grid */
        case 4:  /* block */
        case 7:  /* args */
        case 10: /* cluster */
        case 12: /* carveout */
            if (wt != WT_LEN || !rd_len(&m, &in))
                return 0;
            break;
        case 2:
        case 5:
        case 6:
        case 8:
        case 9:
        case 11:
            if (wt != WT_VARINT)
                return 0;
            break;
        default:
            return 0;
        }
        if (f != 7)
            ONCE(seen, f);
        switch (f) {
        case 1: {
            size_t n = (size_t)(in.end - in.p);
            if ((l->kernel = fast_alloc(d, n + 1)) == NULL)
                return 0;
            memcpy(l->kernel, in.p, n);
            l->kernel[n] = '\0';
            break;
        }
        case 2:
            if (!rd_varint(&m, &l->generation))
                return 0;
            break;
        case 3:
            if (!dec_dim3(d, in, &l->grid))
                return 0;
            break;
        case 4:
            if (!dec_dim3(d, in, &l->block))
                return 0;
            break;
        case 5:
            if (!rd_u32(&m, &l->shared_mem))
                return 0;
            break;
        case 6:
            if (!rd_varint(&m, &l->stream))
                return 0;
            break;
        case 7: /* past LAUNCH_ARGS_MAX: protobuf-c's (checks refuse it) */
            if (l->n_args == LAUNCH_ARGS_MAX ||
                !dec_arg(d, in, &args[l->n_args]))
                return 0;
            l->n_args++;
            break;
        case 8:
            if (!rd_u32(&m, &v) || v > CUMOD__REPLY_WHEN__REPLY_WHEN_POSTED)
                return 0;
            l->when = (Cumod__ReplyWhen)v;
            break;
        case 9:
            if (!rd_u32(&m, &l->deadline_ms))
                return 0;
            break;
        case 10:
            if (!dec_dim3(d, in, &l->cluster))
                return 0;
            break;
        case 11:
            if (!rd_bit(&m, &v))
                return 0;
            l->cooperative = (protobuf_c_boolean)v;
            break;
        case 12: {
            Cumod__Carveout *c = fast_alloc(d, sizeof(*c));
            unsigned cseen = 0;
            if (c == NULL)
                return 0;
            *c = cinit;
            while (in.p < in.end) {
                uint32_t g, gwt;
                if (!rd_key(&in, &g, &gwt) || gwt != WT_VARINT || g != 1)
                    return 0;
                ONCE(cseen, g);
                if (!rd_u32(&in, &c->percent))
                    return 0;
            }
            l->carveout = c;
            break;
        }
        }
    }
    if (l->n_args > 0) {
        if ((l->args = fast_alloc(d, l->n_args * sizeof(*l->args))) == NULL)
            return 0;
        memcpy(l->args, args, l->n_args * sizeof(*l->args));
    }
    *out = l;
    return 1;
}

static int
dec_batch(cumod_decoder *d, rd m, Cumod__Batch **out)
{
    static const Cumod__Batch init = CUMOD__BATCH__INIT;
    static const Cumod__BatchItem iinit = CUMOD__BATCH_ITEM__INIT;
    Cumod__Batch *b = fast_alloc(d, sizeof(*b));
    unsigned seen = 0;
    size_t nitems;

    if (b == NULL || !rd_count(m, 2, &nitems))
        return 0;
    *b = init;
    if (nitems > 0 &&
        (b->items = fast_alloc(d, nitems * sizeof(*b->items))) == NULL)
        return 0;
    while (m.p < m.end) {
        uint32_t f, wt, v;
        rd in;
        if (!rd_key(&m, &f, &wt))
            return 0;
        if (f == 2) {
            Cumod__BatchItem *it;
            uint32_t g, gwt;
            rd l;
            /* An item that is one Launch, and nothing else. */
            if (wt != WT_LEN || !rd_len(&m, &in) ||
                (it = fast_alloc(d, sizeof(*it))) == NULL ||
                !rd_key(&in, &g, &gwt) || g != 1 || gwt != WT_LEN ||
                !rd_len(&in, &l) || in.p != in.end)
                return 0;
            *it = iinit;
            it->item_case = CUMOD__BATCH_ITEM__ITEM_LAUNCH;
            if (!dec_launch(d, l, &it->launch))
                return 0;
            b->items[b->n_items++] = it;
            continue;
        }
        if (wt != WT_VARINT || f < 1 || f > 4)
            return 0;
        ONCE(seen, f);
        switch (f) {
        case 1:
            if (!rd_varint(&m, &b->stream))
                return 0;
            break;
        case 3:
            if (!rd_bit(&m, &v))
                return 0;
            b->when = (Cumod__ReplyWhen)v;
            break;
        case 4:
            if (!rd_u32(&m, &b->deadline_ms))
                return 0;
            break;
        }
    }
    *out = b;
    return 1;
}

/* A Wait: its ticket (the executor answers those of its own tickets). */
static int
dec_wait(cumod_decoder *d, rd m, Cumod__Wait **out)
{
    static const Cumod__Wait init = CUMOD__WAIT__INIT;
    Cumod__Wait *w = fast_alloc(d, sizeof(*w));
    unsigned seen = 0;

    if (w == NULL)
        return 0;
    *w = init;
    while (m.p < m.end) {
        uint32_t f, wt;
        if (!rd_key(&m, &f, &wt) || f != 1 || wt != WT_VARINT)
            return 0;
        ONCE(seen, f);
        if (!rd_varint(&m, &w->ticket))
            return 0;
    }
    *out = w;
    return 1;
}

int
cumod__decode_fast(cumod_decoder *d, const void *bytes, size_t len,
                   Cumod__Request **out)
{
    static const Cumod__Request init = CUMOD__REQUEST__INIT;
    rd m = {bytes, (const uint8_t *)bytes + len};
    Cumod__Request *q = fast_alloc(d, sizeof(*q));
    unsigned seen = 0;

    if (q == NULL)
        return 0;
    *q = init;
    while (m.p < m.end) {
        uint32_t f, wt;
        rd in;
        if (!rd_key(&m, &f, &wt))
            return 0;
        if (f == 1 || f == 2) {
            if (wt != WT_VARINT)
                return 0;
            ONCE(seen, f);
            if (f == 1 ? !rd_u32(&m, &q->version) : !rd_varint(&m, &q->id))
                return 0;
            continue;
        }
        /* The body: one Launch, Batch or Wait, nothing else. */
        if ((f != 35 && f != 36 && f != 37) || wt != WT_LEN ||
            q->body_case != CUMOD__REQUEST__BODY__NOT_SET || !rd_len(&m, &in))
            return 0;
        if (f == 35) {
            if (!dec_wait(d, in, &q->wait))
                return 0;
            q->body_case = CUMOD__REQUEST__BODY_WAIT;
        } else if (f == 36) {
            if (!dec_launch(d, in, &q->launch))
                return 0;
            q->body_case = CUMOD__REQUEST__BODY_LAUNCH;
        } else {
            if (!dec_batch(d, in, &q->batch))
                return 0;
            q->body_case = CUMOD__REQUEST__BODY_BATCH;
        }
    }
    if (q->body_case == CUMOD__REQUEST__BODY__NOT_SET)
        return 0;
    *out = q;
    return 1;
}

uint32_t
cumod__decode_body_field(const void *bytes, size_t len)
{
    if (bytes == NULL)
        return 0;
    rd m = {bytes, (const uint8_t *)bytes + len};
    while (m.p < m.end) {
        uint32_t f, wt;
        uint64_t v;
        rd in;
        if (!rd_key(&m, &f, &wt))
            return 0;
        if (f >= 16)
            return wt == WT_LEN ? f : 0;
        if (wt == WT_VARINT) {
            if (!rd_varint(&m, &v))
                return 0;
        } else if (wt != WT_LEN || !rd_len(&m, &in)) {
            return 0; /* a Request's fields below 16 are varints */
        }
    }
    return 0;
}
