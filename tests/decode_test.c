/* SPDX-License-Identifier: MIT */
/*
 * The launch decoder (daemon/data/decode_fast.c) against protobuf-c: for
 * launches and batches made at random, and for the same bytes mutated,
 * whatever the fast decoder accepts must be what protobuf-c makes of the
 * bytes (compared by packing both results again: packing is
 * deterministic), and every launch and batch of launches that protobuf-c
 * itself packs must take the fast path.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumod.pb-c.h"
#include "cumod/errors.h"
#include "data/decode.h"
#include "pack_fast.h"

/* Values no client of ours sends but protobuf-c packs all the same: a
 * negative or unknown enum, a bool other than 1, an empty argument. */
static int odd_values;

/* A small deterministic generator (xorshift64*), so a failure repeats. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t
rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

/* 0, small, or any width: the values encoders really send, and edges. */
static uint64_t
rnd_u64(void)
{
    switch (rnd() % 4) {
    case 0:
        return 0;
    case 1:
        return rnd() % 300;
    case 2:
        return rnd() >> (rnd() % 64);
    default:
        return UINT64_MAX - rnd() % 3;
    }
}

static uint32_t
rnd_u32(void)
{
    return (uint32_t)rnd_u64();
}

typedef struct arena {
    void *p[4096];
    int n;
} arena;

static void *
keep(arena *a, void *p)
{
    cr_assert(a->n < 4096);
    return a->p[a->n++] = p;
}

static Cumod__Dim3 *
make_dim3(arena *a)
{
    if (rnd() % 4 == 0)
        return NULL;
    Cumod__Dim3 *d = keep(a, malloc(sizeof(*d)));
    cumod__dim3__init(d);
    d->x = rnd_u32();
    d->y = rnd() % 2 ? rnd_u32() : 0;
    d->z = rnd() % 2 ? rnd_u32() : 0;
    return d;
}

static Cumod__Launch *
make_launch(arena *a)
{
    static const char *const names[] = {"vadd:vadd", "", "m:_Z3fooPfi", "a:b:c",
                                        "\xc3\xa9:k"};
    Cumod__Launch *l = keep(a, malloc(sizeof(*l)));
    cumod__launch__init(l);
    if (rnd() % 8)
        l->kernel = (char *)names[rnd() % 5];
    l->generation = rnd_u64();
    l->grid = make_dim3(a);
    l->block = make_dim3(a);
    l->shared_mem = rnd_u32();
    l->stream = rnd_u64();
    l->n_args = rnd() % 7;
    l->args = keep(a, calloc(l->n_args + 1, sizeof(*l->args)));
    for (size_t i = 0; i < l->n_args; i++) {
        Cumod__Arg *g = keep(a, malloc(sizeof(*g)));
        cumod__arg__init(g);
        if (rnd() % 2) {
            size_t n = rnd() % 24;
            uint8_t *v = keep(a, malloc(n + 1));
            for (size_t k = 0; k < n; k++)
                v[k] = (uint8_t)rnd();
            g->kind_case = CUMOD__ARG__KIND_VALUE;
            g->value.data = v;
            g->value.len = n;
            /* Untyped (an older client) or one of the types. */
            g->type = (Cumod__ArgType)(rnd() % 2 ? 0 : rnd() % 11);
        } else {
            Cumod__BufferRef *b = keep(a, malloc(sizeof(*b)));
            cumod__buffer_ref__init(b);
            b->handle = rnd_u64();
            b->offset = rnd_u64();
            g->kind_case = CUMOD__ARG__KIND_BUFFER;
            g->buffer = b;
        }
        l->args[i] = g;
    }
    l->when = (Cumod__ReplyWhen)(rnd() % 2);
    l->deadline_ms = rnd_u32();
    l->cluster = rnd() % 3 ? NULL : make_dim3(a);
    l->cooperative = (protobuf_c_boolean)(rnd() % 2);
    if (odd_values) {
        static const int whens[] = {-1, 7, INT32_MIN, 2};
        if (rnd() % 3 == 0)
            l->when = (Cumod__ReplyWhen)whens[rnd() % 4];
        if (rnd() % 3 == 0)
            l->cooperative = (protobuf_c_boolean)(rnd() % 5);
        if (l->n_args > 0 && rnd() % 3 == 0) {
            Cumod__Arg *g = l->args[rnd() % l->n_args];
            g->kind_case =
                rnd() % 2 ? CUMOD__ARG__KIND__NOT_SET : CUMOD__ARG__KIND_VALUE;
            g->value.len = 0;
            g->value.data = NULL;
        }
        if (l->n_args > 0 && rnd() % 3 == 0) {
            /* A type from a newer client, or nonsense; on a buffer too. */
            static const int types[] = {11, -1, INT32_MAX, 1000};
            l->args[rnd() % l->n_args]->type = (Cumod__ArgType)types[rnd() % 4];
        }
    }
    if (rnd() % 3 == 0) {
        Cumod__Carveout *c = keep(a, malloc(sizeof(*c)));
        cumod__carveout__init(c);
        c->percent = rnd_u32();
        l->carveout = c;
    }
    return l;
}

/* A request: a launch, or a batch of launches. */
static void
make_request_msg(arena *a, Cumod__Request *out)
{
    Cumod__Request q = CUMOD__REQUEST__INIT;
    q.version = rnd() % 4 ? 1 : rnd_u32();
    q.id = rnd_u64();
    if (rnd() % 2) {
        q.body_case = CUMOD__REQUEST__BODY_LAUNCH;
        q.launch = make_launch(a);
    } else {
        Cumod__Batch *b = keep(a, malloc(sizeof(*b)));
        cumod__batch__init(b);
        b->stream = rnd_u64();
        b->when = (Cumod__ReplyWhen)(rnd() % 2);
        b->deadline_ms = rnd_u32();
        b->n_items = rnd() % 9;
        b->items = keep(a, calloc(b->n_items + 1, sizeof(*b->items)));
        for (size_t i = 0; i < b->n_items; i++) {
            Cumod__BatchItem *it = keep(a, malloc(sizeof(*it)));
            cumod__batch_item__init(it);
            it->item_case = CUMOD__BATCH_ITEM__ITEM_LAUNCH;
            it->launch = make_launch(a);
            b->items[i] = it;
        }
        q.body_case = CUMOD__REQUEST__BODY_BATCH;
        q.batch = b;
    }
    *out = q;
}

/* The same, packed by protobuf-c. */
static uint8_t *
make_request(arena *a, size_t *len)
{
    Cumod__Request q;
    make_request_msg(a, &q);
    *len = cumod__request__get_packed_size(&q);
    uint8_t *buf = malloc(*len + 1);
    cr_assert_not_null(buf);
    cumod__request__pack(&q, buf);
    return buf;
}

static void
arena_free(arena *a)
{
    while (a->n > 0)
        free(a->p[--a->n]);
}

/* q packed, in a new buffer. */
static uint8_t *
repack(const Cumod__Request *q, size_t *len)
{
    *len = cumod__request__get_packed_size(q);
    uint8_t *b = malloc(*len + 1);
    cr_assert_not_null(b);
    cumod__request__pack(q, b);
    return b;
}

/* Decodes bytes both ways. Returns 1 when the fast decoder took them (and
 * then protobuf-c must have decoded them to the same message). */
static int
compare(const uint8_t *bytes, size_t len)
{
    cumod_decoder d;
    Cumod__Request *fast = NULL;
    cumod__decoder_init(&d);
    d.decoded = 0;
    d.budget = SIZE_MAX / 2;
    int took = cumod__decode_fast(&d, bytes, len, &fast);
    Cumod__Request *ref = cumod__request__unpack(NULL, len, bytes);
    if (took) {
        cr_assert_not_null(
            ref, "the fast decoder took %zu bytes protobuf-c refuses", len);
        size_t la, lb;
        uint8_t *a = repack(fast, &la), *b = repack(ref, &lb);
        cr_assert(la == lb && memcmp(a, b, la) == 0,
                  "the fast decoder and protobuf-c disagree on %zu bytes", len);
        cr_assert_eq(ref->base.n_unknown_fields, 0);
        free(a);
        free(b);
    }
    if (ref != NULL)
        cumod__request__free_unpacked(ref, NULL);
    cumod__decoder_fini(&d);
    return took;
}

Test(decode_fast, takes_every_packed_launch_and_batch_as_protobuf_c_does)
{
    arena a = {.n = 0};
    for (int i = 0; i < 5000; i++) {
        size_t len;
        uint8_t *b = make_request(&a, &len);
        cr_assert(compare(b, len), "request %d (%zu bytes) left to protobuf-c",
                  i, len);
        free(b);
        arena_free(&a);
    }
}

Test(decode_fast, mutated_bytes_are_decoded_as_protobuf_c_does_or_left_to_it)
{
    arena a = {.n = 0};
    int took = 0, total = 0;
    for (int i = 0; i < 3000; i++) {
        size_t len;
        uint8_t *b = make_request(&a, &len);
        arena_free(&a);
        for (int m = 0; m < 20; m++) {
            uint8_t *x = malloc(len + 16);
            size_t n = len;
            memcpy(x, b, len);
            switch (rnd() % 5) {
            case 0: /* a byte changed */
                if (n)
                    x[rnd() % n] = (uint8_t)rnd();
                break;
            case 1: /* a bit flipped */
                if (n)
                    x[rnd() % n] ^= (uint8_t)(1u << (rnd() % 8));
                break;
            case 2: /* cut short */
                n = n ? rnd() % n : 0;
                break;
            case 3: { /* bytes inserted */
                size_t at = n ? rnd() % n : 0, k = 1 + rnd() % 8;
                memmove(x + at + k, x + at, n - at);
                for (size_t j = 0; j < k; j++)
                    x[at + j] = (uint8_t)rnd();
                n += k;
                break;
            }
            default: /* a field repeated: the tail appended again */
                if (n) {
                    size_t from = rnd() % n, k = n - from;
                    if (k > 16)
                        k = 16;
                    memcpy(x + n, x + from, k);
                    n += k;
                }
                break;
            }
            took += compare(x, n);
            total++;
            free(x);
        }
        free(b);
    }
    /* Most mutations break the message; some are still plain launches. */
    fprintf(stderr, "decode_fast: %d of %d mutated inputs taken\n", took,
            total);
    cr_expect(took > 0 && took < total, "%d of %d taken", took, total);
}

Test(decode_fast, an_argument_type_it_does_not_know_is_left_to_protobuf_c)
{
    int32_t n = 4;
    Cumod__Arg arg = CUMOD__ARG__INIT;
    Cumod__Arg *argp = &arg;
    Cumod__Launch l = CUMOD__LAUNCH__INIT;
    Cumod__Request q = CUMOD__REQUEST__INIT;
    arg.kind_case = CUMOD__ARG__KIND_VALUE;
    arg.value.data = (uint8_t *)&n;
    arg.value.len = sizeof(n);
    l.kernel = "axpy:axpy<float>";
    l.n_args = 1;
    l.args = &argp;
    q.body_case = CUMOD__REQUEST__BODY_LAUNCH;
    q.launch = &l;
    for (int t = 0; t <= 12; t++) {
        arg.type = (Cumod__ArgType)t;
        size_t len;
        uint8_t *b = repack(&q, &len);
        int took = compare(b, len);
        cr_expect_eq(took, t <= CUMOD__ARG_TYPE__ARG_TYPE_U8,
                     "type %d: taken %d", t, took);
        /* What protobuf-c makes of it keeps the type for the checks
         * (which take an unknown one by its size). */
        Cumod__Request *ref = cumod__request__unpack(NULL, len, b);
        cr_assert_not_null(ref);
        cr_expect_eq((int)ref->launch->args[0]->type, t);
        cumod__request__free_unpacked(ref, NULL);
        free(b);
    }
}

Test(decode_fast, leaves_other_requests_and_forms_to_protobuf_c)
{
    cumod_decoder d;
    Cumod__Request *q;
    cumod__decoder_init(&d);
    d.budget = SIZE_MAX / 2;

    /* A Hello. */
    Cumod__Request h = CUMOD__REQUEST__INIT;
    Cumod__Hello hello = CUMOD__HELLO__INIT;
    h.version = 1;
    h.body_case = CUMOD__REQUEST__BODY_HELLO;
    h.hello = &hello;
    size_t len;
    uint8_t *b = repack(&h, &len);
    cr_expect_eq(cumod__decode_fast(&d, b, len, &q), 0);
    free(b);
    cumod__decoder_release(&d);

    /* A launch with a field protobuf-c would keep as unknown (field 15). */
    static const uint8_t unknown[] = {0x08, 0x01, 0xa2, 0x02, 0x02, 0x78, 0x01};
    cr_expect_eq(cumod__decode_fast(&d, unknown, sizeof(unknown), &q), 0);
    cumod__decoder_release(&d);

    /* A launch whose generation appears twice (protobuf-c keeps the last). */
    static const uint8_t twice[] = {0x08, 0x01, 0xa2, 0x02, 0x04,
                                    0x10, 0x01, 0x10, 0x02};
    cr_expect_eq(cumod__decode_fast(&d, twice, sizeof(twice), &q), 0);
    cumod__decoder_release(&d);

    /* The same launch once: taken, generation 2. */
    static const uint8_t once[] = {0x08, 0x01, 0xa2, 0x02, 0x02, 0x10, 0x02};
    cr_assert_eq(cumod__decode_fast(&d, once, sizeof(once), &q), 1);
    cr_expect_eq(q->body_case, CUMOD__REQUEST__BODY_LAUNCH);
    cr_expect_eq(q->launch->generation, 2);
    cr_expect_str_eq(q->launch->kernel, "");
    cumod__decoder_fini(&d);
}

/* The executor's look at a record before it decodes it: the body's field
 * number, from what libcumod packs and from bytes that are no Request. */
Test(decode_fast, the_body_field_is_seen_without_decoding)
{
    Cumod__Request r = CUMOD__REQUEST__INIT;
    Cumod__Gemm g = CUMOD__GEMM__INIT;
    Cumod__GemmOperand a = CUMOD__GEMM_OPERAND__INIT;
    r.version = 1;
    r.id = 1234567;
    r.body_case = CUMOD__REQUEST__BODY_GEMM;
    r.gemm = &g;
    g.m = g.n = g.k = 4;
    a.buffer = 9;
    g.a = g.b = g.c = &a;
    size_t len;
    uint8_t *b = repack(&r, &len);
    cr_expect_eq(cumod__decode_body_field(b, len), CUMOD__REQUEST__BODY_GEMM);
    /* Cut anywhere: never past the bytes (the body's length is checked). */
    for (size_t cut = 0; cut < len; cut++) {
        uint32_t f = cumod__decode_body_field(b, cut);
        cr_expect(f == 0 || f == CUMOD__REQUEST__BODY_GEMM, "cut %zu: %u", cut,
                  f);
    }
    free(b);
    /* A body of no fields is still a body. */
    Cumod__Wait w = CUMOD__WAIT__INIT;
    r.body_case = CUMOD__REQUEST__BODY_WAIT;
    r.wait = &w;
    b = repack(&r, &len);
    cr_expect_eq(cumod__decode_body_field(b, len), CUMOD__REQUEST__BODY_WAIT);
    free(b);
    /* No body, a body field of the wrong wire type, junk. */
    static const uint8_t none[] = {0x08, 0x01, 0x10, 0x05};
    static const uint8_t varint_body[] = {0x08, 0x01, 0x80, 0x03, 0x01};
    static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    static const uint8_t fixed[] = {0x09, 1, 2, 3, 4, 5, 6, 7, 8};
    cr_expect_eq(cumod__decode_body_field(none, sizeof(none)), 0);
    cr_expect_eq(cumod__decode_body_field(varint_body, sizeof(varint_body)), 0);
    cr_expect_eq(cumod__decode_body_field(junk, sizeof(junk)), 0);
    cr_expect_eq(cumod__decode_body_field(fixed, sizeof(fixed)), 0);
    cr_expect_eq(cumod__decode_body_field(NULL, 0), 0);
}

Test(decode_fast, a_batch_of_two_thousand_bare_launches_decodes)
{
    /* 2,000 launches with no fields, 4 bytes each on the wire, through
     * cumod__decode_request (the fast path, within its budget). */
    size_t n = 2000, len = 0;
    uint8_t *buf = malloc(n * 4 + 16);
    buf[len++] = 0x08;
    buf[len++] = 0x01;
    buf[len++] = 0xaa; /* field 37, LEN */
    buf[len++] = 0x02;
    size_t body = n * 4;
    buf[len++] = (uint8_t)(0x80 | (body & 0x7f));
    buf[len++] = (uint8_t)(body >> 7);
    for (size_t i = 0; i < n; i++) {
        buf[len++] = 0x12; /* items */
        buf[len++] = 0x02;
        buf[len++] = 0x0a; /* launch */
        buf[len++] = 0x00;
    }
    cumod_decoder d;
    Cumod__Request *q;
    cumod_status st;
    cumod__decoder_init(&d);
    cr_assert_eq(cumod__decode_request(&d, buf, len, &q, &st), CUMOD_OK, "%s",
                 st.msg);
    cr_expect_eq(q->batch->n_items, n);
    cr_expect_eq(q->batch->items[n - 1]->launch->grid, NULL);
    cumod__decoder_fini(&d);
    free(buf);
}

Test(pack_fast, writes_what_protobuf_c_writes)
{
    arena a = {.n = 0};
    for (int round = 0; round < 2; round++) {
        odd_values = round;
        for (int i = 0; i < 5000; i++) {
            Cumod__Request q;
            make_request_msg(&a, &q);
            size_t ref_len = cumod__request__get_packed_size(&q);
            size_t len = cumod__pack_fast_size(&q, NULL);
            cr_assert_eq(len, ref_len, "request %d: %zu bytes, protobuf-c %zu",
                         i, len, ref_len);
            uint8_t *ref = malloc(ref_len + 1), *fast = malloc(len + 1);
            cumod__request__pack(&q, ref);
            cr_assert_eq(cumod__pack_fast(&q, NULL, fast), len);
            cr_assert(memcmp(ref, fast, len) == 0,
                      "request %d: the bytes differ from protobuf-c's", i);
            /* A batch's items packed one by one beforehand (a batch
             * submitted again) make the same bytes. */
            if (q.body_case == CUMOD__REQUEST__BODY_BATCH) {
                size_t cap = 16;
                for (size_t k = 0; k < q.batch->n_items; k++)
                    cap += cumod__pack_fast_item_max(q.batch->items[k]->launch);
                uint8_t *items = malloc(cap), *again = malloc(len + 1);
                cumod__pack_items pre = {items, 0};
                for (size_t k = 0; k < q.batch->n_items; k++)
                    pre.len += cumod__pack_fast_item(q.batch->items[k]->launch,
                                                     items + pre.len);
                cr_assert_eq(cumod__pack_fast_size(&q, &pre), len);
                cr_assert_eq(cumod__pack_fast(&q, &pre, again), len);
                cr_assert(memcmp(ref, again, len) == 0,
                          "request %d: prepacked items differ", i);
                free(items);
                free(again);
            }
            free(ref);
            free(fast);
            arena_free(&a);
        }
    }
    odd_values = 0;
}

Test(pack_fast, leaves_other_requests_to_protobuf_c)
{
    Cumod__Request q = CUMOD__REQUEST__INIT;
    Cumod__Wait w = CUMOD__WAIT__INIT;
    q.body_case = CUMOD__REQUEST__BODY_WAIT;
    q.wait = &w;
    cr_expect_eq(cumod__pack_fast_size(&q, NULL), 0);

    /* A batch with a write among its launches. */
    Cumod__Batch b = CUMOD__BATCH__INIT;
    Cumod__BatchItem i1 = CUMOD__BATCH_ITEM__INIT, i2 = CUMOD__BATCH_ITEM__INIT;
    Cumod__Launch l = CUMOD__LAUNCH__INIT;
    Cumod__WriteBuffer wb = CUMOD__WRITE_BUFFER__INIT;
    Cumod__BatchItem *items[] = {&i1, &i2};
    i1.item_case = CUMOD__BATCH_ITEM__ITEM_LAUNCH;
    i1.launch = &l;
    i2.item_case = CUMOD__BATCH_ITEM__ITEM_WRITE;
    i2.write = &wb;
    b.n_items = 2;
    b.items = items;
    q.body_case = CUMOD__REQUEST__BODY_BATCH;
    q.batch = &b;
    cr_expect_eq(cumod__pack_fast_size(&q, NULL), 0);
    b.n_items = 1;
    cr_expect_gt(cumod__pack_fast_size(&q, NULL), 0);
}
