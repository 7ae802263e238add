/* SPDX-License-Identifier: MIT */
/*
 * fuzz_seeds DIR: writes the seed corpus of the request harness
 * (fuzz_request.c) into DIR, one file per seed: real cumod.Request
 * messages packed with protobuf-c, one of each kind, and sequences of
 * several joined by FUZZ_REQUEST_SEP (fuzz_request.h) that reach the
 * handlers with state behind them (alloc, write, launch, read).
 *
 * The committed corpus, tests/fuzz/corpus/request, is this program's
 * output. After changing it (or cumod.proto), regenerate with:
 *
 *   cmake --build build-fuzz --target fuzz_seeds
 *   rm -f tests/fuzz/corpus/request/seed-*
 *   build-fuzz/tests/fuzz/fuzz_seeds tests/fuzz/corpus/request
 *
 * (any build with CUMOD_FUZZ=ON). Files not named seed-* in that folder
 * are reproducers of bugs found and fixed: keep them.
 *
 * Handles are the session's, from 1 in the order things are made (buffers,
 * segments and streams share one count); tickets count from 1 as well. The
 * harness runs each sequence on a connection of its own, so the numbers
 * below are the ones the daemon gives.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumod.pb-c.h"
#include "fuzz_request.h"

typedef struct seed {
    uint8_t buf[16384];
    size_t len;
    int msgs;
    uint64_t id; /* the last request id used */
} seed;

/* Appends one request (version 1, the next id) to s. */
static void
seed_put(seed *s, Cumod__Request *r)
{
    r->version = CUMOD__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    r->id = ++s->id;
    size_t n = cumod__request__get_packed_size(r);
    if (s->len + FUZZ_REQUEST_SEP_LEN + n > sizeof(s->buf)) {
        fprintf(stderr, "fuzz_seeds: a seed outgrew its buffer\n");
        exit(1);
    }
    if (s->msgs++ > 0) {
        memcpy(s->buf + s->len, FUZZ_REQUEST_SEP, FUZZ_REQUEST_SEP_LEN);
        s->len += FUZZ_REQUEST_SEP_LEN;
    }
    s->len += cumod__request__pack(r, s->buf + s->len);
}

static void
seed_body(seed *s, Cumod__Request__BodyCase body, void *msg)
{
    Cumod__Request r = CUMOD__REQUEST__INIT;
    r.body_case = body;
    r.hello = msg; /* every body is a pointer in one union */
    seed_put(s, &r);
}

static void
seed_save(const char *dir, const char *name, seed *s)
{
    char path[1024];
    FILE *f;

    snprintf(path, sizeof(path), "%s/seed-%s", dir, name);
    if ((f = fopen(path, "wb")) == NULL ||
        fwrite(s->buf, 1, s->len, f) != s->len || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
    memset(s, 0, sizeof(*s));
}

/* --- One request of each kind ---------------------------------------- */

static void
put_hello(seed *s)
{
    Cumod__Hello m = CUMOD__HELLO__INIT;
    m.client = "fuzz_seeds";
    seed_body(s, CUMOD__REQUEST__BODY_HELLO, &m);
}

static void
put_list(seed *s)
{
    Cumod__ListModules m = CUMOD__LIST_MODULES__INIT;
    seed_body(s, CUMOD__REQUEST__BODY_LIST_MODULES, &m);
}

/* Show, load, unload, pin, unpin, reload, unquarantine. */
static void
put_module(seed *s, Cumod__Request__BodyCase body, const char *name)
{
    Cumod__ModuleRequest m = CUMOD__MODULE_REQUEST__INIT;
    m.name = (char *)name;
    seed_body(s, body, &m);
}

static void
put_set_device(seed *s, int32_t device)
{
    Cumod__SetDevice m = CUMOD__SET_DEVICE__INIT;
    m.device = device;
    seed_body(s, CUMOD__REQUEST__BODY_SET_DEVICE, &m);
}

static void
put_alloc(seed *s, uint64_t size)
{
    Cumod__AllocBuffer m = CUMOD__ALLOC_BUFFER__INIT;
    m.size = size;
    seed_body(s, CUMOD__REQUEST__BODY_ALLOC_BUFFER, &m);
}

static void
put_free(seed *s, uint64_t handle)
{
    Cumod__FreeBuffer m = CUMOD__FREE_BUFFER__INIT;
    m.handle = handle;
    seed_body(s, CUMOD__REQUEST__BODY_FREE_BUFFER, &m);
}

static void
put_write(seed *s, uint64_t handle, uint64_t off, const void *data, size_t len,
          uint64_t stream, Cumod__ReplyWhen when)
{
    Cumod__WriteBuffer m = CUMOD__WRITE_BUFFER__INIT;
    m.handle = handle;
    m.offset = off;
    m.data.data = (uint8_t *)data;
    m.data.len = len;
    m.stream = stream;
    m.when = when;
    seed_body(s, CUMOD__REQUEST__BODY_WRITE_BUFFER, &m);
}

static void
put_read(seed *s, uint64_t handle, uint64_t off, uint64_t len, uint64_t stream)
{
    Cumod__ReadBuffer m = CUMOD__READ_BUFFER__INIT;
    m.handle = handle;
    m.offset = off;
    m.length = len;
    m.stream = stream;
    seed_body(s, CUMOD__REQUEST__BODY_READ_BUFFER, &m);
}

static void
put_memset(seed *s, uint64_t handle, uint64_t off, uint64_t len, uint32_t value,
           uint64_t stream, Cumod__ReplyWhen when)
{
    Cumod__Memset m = CUMOD__MEMSET__INIT;
    m.handle = handle;
    m.offset = off;
    m.length = len;
    m.value = value;
    m.stream = stream;
    m.when = when;
    seed_body(s, CUMOD__REQUEST__BODY_MEMSET, &m);
}

static void
put_map(seed *s, const char *name, uint64_t size)
{
    Cumod__MapSegment m = CUMOD__MAP_SEGMENT__INIT;
    m.name = (char *)name;
    m.size = size;
    seed_body(s, CUMOD__REQUEST__BODY_MAP_SEGMENT, &m);
}

static void
put_unmap(seed *s, uint64_t handle)
{
    Cumod__UnmapSegment m = CUMOD__UNMAP_SEGMENT__INIT;
    m.handle = handle;
    seed_body(s, CUMOD__REQUEST__BODY_UNMAP_SEGMENT, &m);
}

/* A copy: kind, then segment and offset, buffer and offset, length, the
 * source buffer and offset (device to device), stream. */
static void
copy_fill(Cumod__Copy *m, Cumod__CopyKind kind, uint64_t seg, uint64_t segoff,
          uint64_t buf, uint64_t bufoff, uint64_t len, uint64_t src,
          uint64_t srcoff)
{
    Cumod__Copy init = CUMOD__COPY__INIT;
    *m = init;
    m->kind = kind;
    m->segment = seg;
    m->segment_offset = segoff;
    m->buffer = buf;
    m->buffer_offset = bufoff;
    m->length = len;
    m->src_buffer = src;
    m->src_offset = srcoff;
}

static void
put_copy(seed *s, Cumod__Copy *m)
{
    seed_body(s, CUMOD__REQUEST__BODY_COPY, m);
}

static void
put_stream_create(seed *s)
{
    Cumod__CreateStream m = CUMOD__CREATE_STREAM__INIT;
    seed_body(s, CUMOD__REQUEST__BODY_CREATE_STREAM, &m);
}

static void
put_stream_destroy(seed *s, uint64_t handle)
{
    Cumod__DestroyStream m = CUMOD__DESTROY_STREAM__INIT;
    m.handle = handle;
    seed_body(s, CUMOD__REQUEST__BODY_DESTROY_STREAM, &m);
}

static void
put_sync(seed *s, uint64_t stream)
{
    Cumod__Synchronize m = CUMOD__SYNCHRONIZE__INIT;
    m.stream = stream;
    seed_body(s, CUMOD__REQUEST__BODY_SYNCHRONIZE, &m);
}

static void
put_wait(seed *s, uint64_t ticket)
{
    Cumod__Wait m = CUMOD__WAIT__INIT;
    m.ticket = ticket;
    seed_body(s, CUMOD__REQUEST__BODY_WAIT, &m);
}

/* --- Launches ---------------------------------------------------------- */

#define SEED_ARGS 8

/* A launch and the storage its arguments point into. */
typedef struct seed_launch {
    Cumod__Launch l;
    Cumod__Dim3 grid, block;
    Cumod__Arg arg[SEED_ARGS];
    Cumod__Arg *argp[SEED_ARGS];
    Cumod__BufferRef ref[SEED_ARGS];
    uint8_t val[SEED_ARGS][32];
} seed_launch;

static void
launch_init(seed_launch *x, const char *kernel, uint32_t grid, uint32_t block)
{
    Cumod__Launch l = CUMOD__LAUNCH__INIT;
    Cumod__Dim3 d = CUMOD__DIM3__INIT;

    memset(x, 0, sizeof(*x));
    x->l = l;
    x->grid = d;
    x->block = d;
    x->grid.x = grid;
    x->block.x = block;
    x->l.kernel = (char *)kernel;
    x->l.grid = &x->grid;
    x->l.block = &x->block;
    x->l.args = x->argp;
}

static void
launch_buf(seed_launch *x, uint64_t handle, uint64_t off)
{
    Cumod__Arg a = CUMOD__ARG__INIT;
    Cumod__BufferRef r = CUMOD__BUFFER_REF__INIT;
    size_t i = x->l.n_args++;

    x->ref[i] = r;
    x->ref[i].handle = handle;
    x->ref[i].offset = off;
    x->arg[i] = a;
    x->arg[i].kind_case = CUMOD__ARG__KIND_BUFFER;
    x->arg[i].buffer = &x->ref[i];
    x->argp[i] = &x->arg[i];
}

static void
launch_val(seed_launch *x, const void *v, size_t n)
{
    Cumod__Arg a = CUMOD__ARG__INIT;
    size_t i = x->l.n_args++;

    memcpy(x->val[i], v, n);
    x->arg[i] = a;
    x->arg[i].kind_case = CUMOD__ARG__KIND_VALUE;
    x->arg[i].value.data = x->val[i];
    x->arg[i].value.len = n;
    x->argp[i] = &x->arg[i];
}

/* vadd(a, b, c, n) on buffers 1, 2, 3, as kernel (vadd:vadd or
 * vadd_fat:vadd). */
static void
launch_vadd(seed_launch *x, const char *kernel, int32_t n)
{
    launch_init(x, kernel, 1, 64);
    launch_buf(x, 1, 0);
    launch_buf(x, 2, 0);
    launch_buf(x, 3, 0);
    launch_val(x, &n, sizeof(n));
}

static void
put_launch(seed *s, seed_launch *x)
{
    seed_body(s, CUMOD__REQUEST__BODY_LAUNCH, &x->l);
}

/* affine(struct affine_params p, const double *x, double *y): the struct
 * as the ABI lays it out (float, pad, double, int, char, pad: 24 bytes). */
static void
launch_affine(seed_launch *x, uint64_t in, uint64_t out, int32_t n)
{
    uint8_t p[24] = {0};
    float a = 2.0f;
    double b = 0.5;
    memcpy(p, &a, 4);
    memcpy(p + 8, &b, 8);
    memcpy(p + 16, &n, 4);
    p[20] = 'f';
    launch_init(x, "affine:affine", 1, 128);
    launch_val(x, p, sizeof(p));
    launch_buf(x, in, 0);
    launch_buf(x, out, 0);
}

/* axpy<T>(T a, const T *x, T *y, int n). */
static void
launch_axpy(seed_launch *x, int dbl, uint64_t in, uint64_t io, int32_t n)
{
    float af = 3.0f;
    double ad = 3.0;
    launch_init(x,
                dbl ? "axpy:_Z4axpyIdEvT_PKS0_PS0_i"
                    : "axpy:_Z4axpyIfEvT_PKS0_PS0_i",
                1, 64);
    if (dbl)
        launch_val(x, &ad, sizeof(ad));
    else
        launch_val(x, &af, sizeof(af));
    launch_buf(x, in, 0);
    launch_buf(x, io, 0);
    launch_val(x, &n, sizeof(n));
}

/* scale(float *x, float s, int n), from the cubin or the PTX module. */
static void
launch_scale(seed_launch *x, const char *kernel, uint64_t buf, int32_t n)
{
    float f = 2.0f;
    launch_init(x, kernel, 4, 256);
    launch_buf(x, buf, 0);
    launch_val(x, &f, sizeof(f));
    launch_val(x, &n, sizeof(n));
}

/* --- Batches ----------------------------------------------------------- */

typedef struct seed_batch {
    Cumod__Batch b;
    Cumod__BatchItem item[8];
    Cumod__BatchItem *itemp[8];
} seed_batch;

static void
batch_init(seed_batch *x, uint64_t stream, Cumod__ReplyWhen when)
{
    Cumod__Batch b = CUMOD__BATCH__INIT;
    x->b = b;
    x->b.stream = stream;
    x->b.when = when;
    x->b.items = x->itemp;
}

static void
batch_add(seed_batch *x, Cumod__BatchItem__ItemCase kind, void *msg)
{
    Cumod__BatchItem it = CUMOD__BATCH_ITEM__INIT;
    size_t i = x->b.n_items++;
    x->item[i] = it;
    x->item[i].item_case = kind;
    x->item[i].launch = msg; /* one union of pointers */
    x->itemp[i] = &x->item[i];
}

/* A 4 x 4 x 4 GEMM on buffers a, b, c (packed, row-major). */
typedef struct seed_gemm {
    Cumod__Gemm g;
    Cumod__GemmOperand a, b, c;
} seed_gemm;

static void
gemm_init(seed_gemm *x, Cumod__GemmType type, uint64_t a, uint64_t b,
          uint64_t c)
{
    Cumod__Gemm g = CUMOD__GEMM__INIT;
    Cumod__GemmOperand o = CUMOD__GEMM_OPERAND__INIT;
    x->g = g;
    x->a = x->b = x->c = o;
    x->a.buffer = a;
    x->b.buffer = b;
    x->c.buffer = c;
    x->g.type = type;
    x->g.m = x->g.n = x->g.k = 4;
    x->g.alpha = 1;
    x->g.a = &x->a;
    x->g.b = &x->b;
    x->g.c = &x->c;
}

/* --- The seeds ---------------------------------------------------------- */

static void
seeds_single(const char *dir)
{
    static const float ones[16] = {1, 1, 1, 1, 1, 1, 1, 1,
                                   1, 1, 1, 1, 1, 1, 1, 1};
    seed s = {0};
    seed_launch l;
    Cumod__Copy c;

    put_hello(&s);
    seed_save(dir, "hello", &s);
    put_list(&s);
    seed_save(dir, "list-modules", &s);
    put_module(&s, CUMOD__REQUEST__BODY_SHOW_MODULE, "vadd");
    seed_save(dir, "show-module", &s);
    put_module(&s, CUMOD__REQUEST__BODY_LOAD_MODULE, "vadd");
    seed_save(dir, "load-module", &s);
    put_module(&s, CUMOD__REQUEST__BODY_UNLOAD_MODULE, "scale");
    seed_save(dir, "unload-module", &s);
    put_module(&s, CUMOD__REQUEST__BODY_PIN_MODULE, "empty");
    seed_save(dir, "pin-module", &s);
    put_module(&s, CUMOD__REQUEST__BODY_UNPIN_MODULE, "empty");
    seed_save(dir, "unpin-module", &s);
    put_module(&s, CUMOD__REQUEST__BODY_RELOAD_MODULE, "vadd_fat");
    seed_save(dir, "reload-module", &s);
    put_module(&s, CUMOD__REQUEST__BODY_UNQUARANTINE_MODULE, "vadd");
    seed_save(dir, "unquarantine-module", &s);
    put_module(&s, CUMOD__REQUEST__BODY_SHOW_MODULE, "../etc/passwd");
    seed_save(dir, "show-bad-name", &s);
    put_set_device(&s, 0);
    seed_save(dir, "set-device", &s);
    put_alloc(&s, 4096);
    seed_save(dir, "alloc-buffer", &s);
    put_free(&s, 1);
    seed_save(dir, "free-buffer", &s);
    put_write(&s, 1, 0, ones, sizeof(ones), 0,
              CUMOD__REPLY_WHEN__REPLY_WHEN_COMPLETE);
    seed_save(dir, "write-buffer", &s);
    put_read(&s, 1, 0, 64, 0);
    seed_save(dir, "read-buffer", &s);
    put_memset(&s, 1, 0, 64, 7, 0, CUMOD__REPLY_WHEN__REPLY_WHEN_ENQUEUED);
    seed_save(dir, "memset", &s);
    put_map(&s, FUZZ_REQUEST_SEGMENT, 65536);
    seed_save(dir, "map-segment", &s);
    put_unmap(&s, 1);
    seed_save(dir, "unmap-segment", &s);
    copy_fill(&c, CUMOD__COPY_KIND__COPY_TO_DEVICE, 2, 0, 1, 0, 4096, 0, 0);
    put_copy(&s, &c);
    seed_save(dir, "copy", &s);
    put_stream_create(&s);
    seed_save(dir, "create-stream", &s);
    put_stream_destroy(&s, 1);
    seed_save(dir, "destroy-stream", &s);
    put_sync(&s, 0);
    seed_save(dir, "synchronize", &s);
    put_wait(&s, 1);
    seed_save(dir, "wait", &s);
    launch_vadd(&l, "vadd:vadd", 16);
    put_launch(&s, &l);
    seed_save(dir, "launch-vadd", &s);
    launch_vadd(&l, "vadd_fat:vadd", 16);
    l.l.when = CUMOD__REPLY_WHEN__REPLY_WHEN_ENQUEUED;
    l.l.deadline_ms = 5000;
    put_launch(&s, &l);
    seed_save(dir, "launch-vadd-fat", &s);
    launch_init(&l, "empty:empty", 1, 1);
    put_launch(&s, &l);
    seed_save(dir, "launch-empty", &s);

    seed_batch b;
    seed_launch bl;
    Cumod__Memset m = CUMOD__MEMSET__INIT;
    m.handle = 3;
    m.length = 64;
    batch_init(&b, 0, CUMOD__REPLY_WHEN__REPLY_WHEN_COMPLETE);
    batch_add(&b, CUMOD__BATCH_ITEM__ITEM_MEMSET, &m);
    launch_vadd(&bl, "vadd:vadd", 16);
    batch_add(&b, CUMOD__BATCH_ITEM__ITEM_LAUNCH, &bl.l);
    seed_body(&s, CUMOD__REQUEST__BODY_BATCH, &b.b);
    seed_save(dir, "batch", &s);

    /* What is not a request the daemon serves. */
    Cumod__Request r = CUMOD__REQUEST__INIT;
    Cumod__Hello h = CUMOD__HELLO__INIT;
    r.body_case = CUMOD__REQUEST__BODY_HELLO;
    r.hello = &h;
    seed_put(&s, &r);
    s.buf[1] = 2; /* version 2: the field's varint follows its tag */
    seed_save(dir, "version-2", &s);
    r.body_case = CUMOD__REQUEST__BODY__NOT_SET;
    seed_put(&s, &r);
    seed_save(dir, "no-body", &s);
    memcpy(s.buf, "\xff\xff\xff garbage", 12);
    s.len = 12;
    seed_save(dir, "not-a-request", &s);
}

static void
seeds_sequences(const char *dir)
{
    static const float ones[16] = {1, 1, 1, 1, 1, 1, 1, 1,
                                   1, 1, 1, 1, 1, 1, 1, 1};
    const Cumod__ReplyWhen now = CUMOD__REPLY_WHEN__REPLY_WHEN_COMPLETE;
    const Cumod__ReplyWhen later = CUMOD__REPLY_WHEN__REPLY_WHEN_ENQUEUED;
    seed s = {0};
    seed_launch l;
    Cumod__Copy c;

    /* Buffers 1, 2, 3; c = a + b; read c; free a. */
    put_alloc(&s, 4096);
    put_alloc(&s, 4096);
    put_alloc(&s, 4096);
    put_write(&s, 1, 0, ones, sizeof(ones), 0, now);
    put_write(&s, 2, 0, ones, sizeof(ones), 0, now);
    launch_vadd(&l, "vadd:vadd", 16);
    put_launch(&s, &l);
    put_read(&s, 3, 0, 64, 0);
    put_free(&s, 1);
    seed_save(dir, "seq-vadd", &s);

    /* Buffer 1, stream 2; work enqueued (tickets 1, 2), waited for. */
    put_alloc(&s, 4096);
    put_stream_create(&s);
    put_memset(&s, 1, 0, 4096, 0, 2, later);
    launch_scale(&l, "scale:scale", 1, 1024);
    l.l.stream = 2;
    l.l.when = later;
    put_launch(&s, &l);
    put_wait(&s, 1);
    put_wait(&s, 2);
    put_sync(&s, 2);
    put_read(&s, 1, 0, 16, 2);
    put_stream_destroy(&s, 2);
    seed_save(dir, "seq-stream", &s);

    /* Buffers 1, 2, segment 3: in, across, out. */
    put_alloc(&s, 65536);
    put_alloc(&s, 65536);
    put_map(&s, FUZZ_REQUEST_SEGMENT, 65536);
    copy_fill(&c, CUMOD__COPY_KIND__COPY_TO_DEVICE, 3, 0, 1, 0, 4096, 0, 0);
    put_copy(&s, &c);
    copy_fill(&c, CUMOD__COPY_KIND__COPY_DEVICE, 0, 0, 2, 0, 4096, 1, 0);
    put_copy(&s, &c);
    copy_fill(&c, CUMOD__COPY_KIND__COPY_TO_HOST, 3, 8192, 2, 0, 4096, 0, 0);
    c.when = later;
    put_copy(&s, &c);
    put_wait(&s, 1);
    put_unmap(&s, 3);
    put_free(&s, 1);
    put_free(&s, 2);
    seed_save(dir, "seq-segment", &s);

    /* Buffers 1, 2, 3; one batch writes, adds and copies; waited for. */
    {
        seed_batch b;
        seed_launch bl;
        Cumod__WriteBuffer w1 = CUMOD__WRITE_BUFFER__INIT;
        Cumod__WriteBuffer w2 = CUMOD__WRITE_BUFFER__INIT;
        Cumod__Memset m = CUMOD__MEMSET__INIT;
        Cumod__Copy bc;

        put_alloc(&s, 4096);
        put_alloc(&s, 4096);
        put_alloc(&s, 4096);
        w1.handle = 1;
        w1.data.data = (uint8_t *)ones;
        w1.data.len = sizeof(ones);
        w2 = w1;
        w2.handle = 2;
        m.handle = 3;
        m.length = 4096;
        m.value = 0xff;
        copy_fill(&bc, CUMOD__COPY_KIND__COPY_DEVICE, 0, 0, 1, 0, 64, 3, 0);
        batch_init(&b, 0, later);
        batch_add(&b, CUMOD__BATCH_ITEM__ITEM_WRITE, &w1);
        batch_add(&b, CUMOD__BATCH_ITEM__ITEM_WRITE, &w2);
        batch_add(&b, CUMOD__BATCH_ITEM__ITEM_MEMSET, &m);
        launch_vadd(&bl, "vadd:vadd", 16);
        batch_add(&b, CUMOD__BATCH_ITEM__ITEM_LAUNCH, &bl.l);
        batch_add(&b, CUMOD__BATCH_ITEM__ITEM_COPY, &bc);
        seed_body(&s, CUMOD__REQUEST__BODY_BATCH, &b.b);
        put_wait(&s, 1);
        put_read(&s, 1, 0, 64, 0);
        seed_save(dir, "seq-batch", &s);
    }

    /* The module commands on a cubin, then a PTX module. */
    put_module(&s, CUMOD__REQUEST__BODY_LOAD_MODULE, "vadd");
    put_module(&s, CUMOD__REQUEST__BODY_PIN_MODULE, "vadd");
    put_module(&s, CUMOD__REQUEST__BODY_SHOW_MODULE, "vadd");
    put_module(&s, CUMOD__REQUEST__BODY_UNPIN_MODULE, "vadd");
    put_module(&s, CUMOD__REQUEST__BODY_UNLOAD_MODULE, "vadd");
    put_module(&s, CUMOD__REQUEST__BODY_RELOAD_MODULE, "vadd");
    put_module(&s, CUMOD__REQUEST__BODY_LOAD_MODULE, "scale_ptx");
    put_module(&s, CUMOD__REQUEST__BODY_SHOW_MODULE, "scale_ptx");
    put_list(&s);
    seed_save(dir, "seq-modules", &s);

    /* Kernels with other arguments: a struct by value, doubles, PTX. */
    put_alloc(&s, 2048);
    put_alloc(&s, 2048);
    launch_affine(&l, 1, 2, 256);
    put_launch(&s, &l);
    launch_axpy(&l, 1, 1, 2, 256);
    put_launch(&s, &l);
    launch_axpy(&l, 0, 1, 2, 512);
    put_launch(&s, &l);
    launch_scale(&l, "scale_ptx:scale", 2, 512);
    put_launch(&s, &l);
    put_read(&s, 2, 0, 2048, 0);
    seed_save(dir, "seq-kernels", &s);

    /* What the checks refuse, with a buffer to refuse it about (the
     * refused alloc takes no handle: the buffer is 1). */
    put_alloc(&s, 0);
    put_alloc(&s, 256);
    put_free(&s, 99);
    put_read(&s, 1, 200, 100, 0);
    put_write(&s, 1, 250, ones, sizeof(ones), 0, now);
    launch_vadd(&l, "vadd:vadd", 16);
    l.l.n_args = 3;
    put_launch(&s, &l);
    launch_vadd(&l, "vadd:vadd", 16);
    l.block.x = 4096;
    put_launch(&s, &l);
    launch_vadd(&l, "vadd:nope", 16);
    put_launch(&s, &l);
    put_wait(&s, 7);
    put_stream_destroy(&s, 0);
    seed_save(dir, "seq-refused", &s);

    /* GEMMs on buffers 1, 2, 3 (the fake cuBLAS computes them): one of
     * each type, a strided batch, one in a batch between a memset and a
     * launch, then refused ones. */
    {
        static const Cumod__GemmType types[] = {
            CUMOD__GEMM_TYPE__GEMM_FP32, CUMOD__GEMM_TYPE__GEMM_FP64,
            CUMOD__GEMM_TYPE__GEMM_FP16, CUMOD__GEMM_TYPE__GEMM_BF16};
        seed_gemm g;
        seed_batch b;
        seed_launch bl;
        Cumod__Memset m = CUMOD__MEMSET__INIT;

        put_alloc(&s, 4096);
        put_alloc(&s, 4096);
        put_alloc(&s, 4096);
        put_write(&s, 1, 0, ones, sizeof(ones), 0, now);
        put_write(&s, 2, 0, ones, sizeof(ones), 0, now);
        for (int i = 0; i < 4; i++) {
            gemm_init(&g, types[i], 1, 2, 3);
            g.g.order = (Cumod__GemmOrder)(i % 2);
            g.g.transa = i == 1;
            g.g.beta = i == 2 ? 0.5 : 0;
            seed_body(&s, CUMOD__REQUEST__BODY_GEMM, &g.g);
        }
        gemm_init(&g, CUMOD__GEMM_TYPE__GEMM_FP16, 1, 2, 3);
        g.g.c_type = CUMOD__GEMM_TYPE__GEMM_FP32;
        g.g.batch = 3;
        g.a.stride = g.c.stride = 16;
        g.g.when = later;
        seed_body(&s, CUMOD__REQUEST__BODY_GEMM, &g.g);
        put_wait(&s, 1);
        m.handle = 3;
        m.length = 64;
        gemm_init(&g, CUMOD__GEMM_TYPE__GEMM_FP32, 1, 2, 3);
        batch_init(&b, 0, now);
        batch_add(&b, CUMOD__BATCH_ITEM__ITEM_MEMSET, &m);
        batch_add(&b, CUMOD__BATCH_ITEM__ITEM_GEMM, &g.g);
        launch_vadd(&bl, "vadd:vadd", 16);
        batch_add(&b, CUMOD__BATCH_ITEM__ITEM_LAUNCH, &bl.l);
        seed_body(&s, CUMOD__REQUEST__BODY_BATCH, &b.b);
        put_read(&s, 3, 0, 64, 0);
        gemm_init(&g, CUMOD__GEMM_TYPE__GEMM_FP32, 1, 2, 3);
        g.b.ld = 2; /* < 4 columns */
        seed_body(&s, CUMOD__REQUEST__BODY_GEMM, &g.g);
        gemm_init(&g, CUMOD__GEMM_TYPE__GEMM_FP64, 1, 2, 3);
        g.g.c_type = CUMOD__GEMM_TYPE__GEMM_FP16;
        seed_body(&s, CUMOD__REQUEST__BODY_GEMM, &g.g);
        gemm_init(&g, CUMOD__GEMM_TYPE__GEMM_BF16, 1, 2, 1);
        seed_body(&s, CUMOD__REQUEST__BODY_GEMM, &g.g);
        seed_save(dir, "seq-gemm", &s);
    }
}

int
main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_seeds DIR\n");
        return 2;
    }
    seeds_single(argv[1]);
    seeds_sequences(argv[1]);
    return 0;
}
