/* SPDX-License-Identifier: MIT */
/* Batches: many launches, copies, memsets, writes and GEMMs in one request.
 * Each item is one allocation that starts with its Cumod__BatchItem and holds
 * everything the item's message points to, so a batch packs as it is and
 * frees item by item. A batch of launches also keeps its items packed
 * (pack_fast.h), added to at each submit: submitted again, it is not
 * packed again. */
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"

struct cumod_batch {
    size_t count;
    size_t cap;
    unsigned deadline_ms;
    Cumod__BatchItem **items; /* count blocks, each freed with free() */
    /* The first npacked items packed (all launches so far: else
     * unpackable, and protobuf-c packs the batch at each submit). */
    uint8_t *packed;
    size_t plen, pcap, npacked;
    int unpackable;
};

typedef struct batch_launch {
    Cumod__BatchItem item; /* first: the block is freed through it */
    cumod__launch_msg m;
} batch_launch;

typedef struct batch_write {
    Cumod__BatchItem item;
    Cumod__WriteBuffer write;
} batch_write;

typedef struct batch_memset {
    Cumod__BatchItem item;
    Cumod__Memset memset;
} batch_memset;

typedef struct batch_copy {
    Cumod__BatchItem item;
    Cumod__Copy copy;
} batch_copy;

typedef struct batch_gemm {
    Cumod__BatchItem item;
    cumod__gemm_msg m;
} batch_gemm;

int
cumod_batch_alloc(cumod_batch **out)
{
    cumod_batch *b;

    if (out == NULL)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_batch_alloc: out is NULL");
    if ((b = calloc(1, sizeof(*b))) == NULL)
        return cumod__client_set_error(CUMOD_ENOMEM, "out of memory");
    *out = b;
    return CUMOD_OK;
}

void
cumod_batch_reset(cumod_batch *b)
{
    if (b == NULL)
        return;
    for (size_t i = 0; i < b->count; i++)
        free(b->items[i]);
    b->count = 0;
    b->plen = b->npacked = 0;
    b->unpackable = 0;
}

void
cumod_batch_set_deadline(cumod_batch *b, unsigned deadline_ms)
{
    if (b != NULL)
        b->deadline_ms = deadline_ms;
}

void
cumod_batch_free(cumod_batch *b)
{
    if (b == NULL)
        return;
    cumod_batch_reset(b);
    free(b->items);
    free(b->packed);
    free(b);
}

size_t
cumod_batch_count(const cumod_batch *b)
{
    return b != NULL ? b->count : 0;
}

/* Takes a new item block of size bytes (zeroed), already appended; the
 * caller fills it. NULL (with the detail set) when out of memory. */
static void *
batch_push(cumod_batch *b, size_t size, Cumod__BatchItem__ItemCase which)
{
    Cumod__BatchItem *item;

    if (b->count == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        Cumod__BatchItem **items = realloc(b->items, cap * sizeof(*items));
        if (items == NULL)
            goto nomem;
        b->items = items;
        b->cap = cap;
    }
    if ((item = calloc(1, size)) == NULL)
        goto nomem;
    cumod__batch_item__init(item);
    item->item_case = which;
    if (which != CUMOD__BATCH_ITEM__ITEM_LAUNCH)
        b->unpackable = 1;
    b->items[b->count++] = item;
    return item;

nomem:
    cumod__client_set_error(CUMOD_ENOMEM, "out of memory");
    return NULL;
}

static int
batch_null(const char *fn)
{
    return cumod__client_set_error(CUMOD_EINVAL, "%s: NULL argument", fn);
}

int
cumod_batch_launch(cumod_batch *b, const cumod_launch_params *p)
{
    return cumod_batch_launch_v2(b, p, NULL);
}

int
cumod_batch_launch_v2(cumod_batch *b, const cumod_launch_params *p,
                      const cumod_launch_attrs *attrs)
{
    batch_launch *bl;
    size_t n, klen, vbytes = 0, size;
    char *tail;
    int rv;

    if (b == NULL)
        return batch_null("cumod_batch_launch");
    if ((rv = cumod__launch_check("cumod_batch_launch", p)) != CUMOD_OK)
        return rv;
    if (attrs != NULL && (attrs->carveout > 100 || attrs->carveout < -1))
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_batch_launch: carveout %d is not "
                                       "a percentage (0-100, or -1 for none)",
                                       attrs->carveout);
    n = p->nargs;
    klen = strlen(p->kernel) + 1;
    for (size_t i = 0; i < n; i++)
        if (p->args[i].kind != CUMOD_ARG_BUFFER)
            vbytes += p->args[i].len;
    /* The block: the struct, the three arrays (all 8-byte aligned), then
     * the kernel name and the value bytes. */
    size = sizeof(*bl) +
           n * (sizeof(Cumod__Arg) + sizeof(Cumod__BufferRef) +
                sizeof(Cumod__Arg *)) +
           klen + vbytes;
    if ((bl = batch_push(b, size, CUMOD__BATCH_ITEM__ITEM_LAUNCH)) == NULL)
        return CUMOD_ENOMEM;
    bl->m.args = (Cumod__Arg *)(bl + 1);
    bl->m.refs = (Cumod__BufferRef *)(bl->m.args + n);
    bl->m.argv = (Cumod__Arg **)(bl->m.refs + n);
    tail = (char *)(bl->m.argv + n);
    cumod__launch_fill(&bl->m, p);
    (void)cumod__launch_attrs(&bl->m, attrs,
                              "cumod_batch_launch"); /* checked */
    /* Own copies of what the message borrowed from the caller. */
    memcpy(tail, p->kernel, klen);
    bl->m.launch.kernel = tail;
    tail += klen;
    for (size_t i = 0; i < n; i++) {
        Cumod__Arg *a = &bl->m.args[i];
        if (a->kind_case != CUMOD__ARG__KIND_VALUE)
            continue;
        memcpy(tail, a->value.data, a->value.len);
        a->value.data = (uint8_t *)tail;
        tail += a->value.len;
    }
    bl->m.launch.stream = 0; /* the batch's own */
    bl->item.launch = &bl->m.launch;
    return CUMOD_OK;
}

int
cumod_batch_write(cumod_batch *b, cumod_buffer buf, size_t offset,
                  const void *data, size_t len)
{
    batch_write *bw;

    if (b == NULL || data == NULL)
        return batch_null("cumod_batch_write");
    if (len == 0)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_batch_write: length is 0");
    if (len > SIZE_MAX - sizeof(*bw))
        return cumod__client_set_error(CUMOD_ETOOBIG,
                                       "cumod_batch_write: %zu bytes is too "
                                       "large",
                                       len);
    if ((bw = batch_push(b, sizeof(*bw) + len,
                         CUMOD__BATCH_ITEM__ITEM_WRITE)) == NULL)
        return CUMOD_ENOMEM;
    cumod__write_buffer__init(&bw->write);
    bw->write.handle = buf;
    bw->write.offset = offset;
    bw->write.data.data = (uint8_t *)(bw + 1);
    bw->write.data.len = len;
    memcpy(bw + 1, data, len);
    bw->item.write = &bw->write;
    return CUMOD_OK;
}

int
cumod_batch_memset(cumod_batch *b, cumod_buffer buf, size_t offset, size_t len,
                   uint8_t value)
{
    batch_memset *bm;

    if (b == NULL)
        return batch_null("cumod_batch_memset");
    if (len == 0)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_batch_memset: length is 0");
    if ((bm = batch_push(b, sizeof(*bm), CUMOD__BATCH_ITEM__ITEM_MEMSET)) ==
        NULL)
        return CUMOD_ENOMEM;
    cumod__memset__init(&bm->memset);
    bm->memset.handle = buf;
    bm->memset.offset = offset;
    bm->memset.length = len;
    bm->memset.value = value;
    bm->item.memset = &bm->memset;
    return CUMOD_OK;
}

static int
batch_copy_item(cumod_batch *b, const char *fn, Cumod__CopyKind kind,
                const cumod_segment *seg, size_t seg_offset, cumod_buffer buf,
                size_t buf_offset, size_t len)
{
    batch_copy *bc;
    int rv;

    if (b == NULL || seg == NULL)
        return batch_null(fn);
    if (len == 0)
        return cumod__client_set_error(CUMOD_EINVAL, "%s: length is 0", fn);
    if ((rv = cumod__client_check_range(fn, "segment ", seg_offset, len,
                                        seg->size, "the segment")) != CUMOD_OK)
        return rv;
    if ((bc = batch_push(b, sizeof(*bc), CUMOD__BATCH_ITEM__ITEM_COPY)) == NULL)
        return CUMOD_ENOMEM;
    cumod__copy__init(&bc->copy);
    bc->copy.kind = kind;
    bc->copy.segment = seg->handle;
    bc->copy.segment_offset = seg_offset;
    bc->copy.buffer = buf;
    bc->copy.buffer_offset = buf_offset;
    bc->copy.length = len;
    bc->item.copy = &bc->copy;
    return CUMOD_OK;
}

int
cumod_batch_copy_to_device(cumod_batch *b, cumod_buffer dst, size_t dst_offset,
                           const cumod_segment *src, size_t src_offset,
                           size_t len)
{
    return batch_copy_item(b, "cumod_batch_copy_to_device",
                           CUMOD__COPY_KIND__COPY_TO_DEVICE, src, src_offset,
                           dst, dst_offset, len);
}

int
cumod_batch_copy_to_host(cumod_batch *b, const cumod_segment *dst,
                         size_t dst_offset, cumod_buffer src, size_t src_offset,
                         size_t len)
{
    return batch_copy_item(b, "cumod_batch_copy_to_host",
                           CUMOD__COPY_KIND__COPY_TO_HOST, dst, dst_offset, src,
                           src_offset, len);
}

int
cumod_batch_gemm(cumod_batch *b, const cumod_gemm_desc *d)
{
    cumod__gemm_msg m;
    batch_gemm *bg;
    int rv;

    if (b == NULL)
        return batch_null("cumod_batch_gemm");
    if ((rv = cumod__gemm_fill("cumod_batch_gemm", d, &m)) != CUMOD_OK)
        return rv;
    if ((bg = batch_push(b, sizeof(*bg), CUMOD__BATCH_ITEM__ITEM_GEMM)) == NULL)
        return CUMOD_ENOMEM;
    bg->m = m;
    /* The copy's operands are its own. */
    bg->m.gemm.a = &bg->m.a;
    bg->m.gemm.b = &bg->m.b;
    bg->m.gemm.c = &bg->m.c;
    bg->item.gemm = &bg->m.gemm;
    return CUMOD_OK;
}

/* Packs the launches added since the last submit; 0, or -1 when out of
 * memory (the batch is then packed whole, as before). */
static int
batch_pack_new(cumod_batch *b)
{
    for (; b->npacked < b->count; b->npacked++) {
        const Cumod__Launch *l = b->items[b->npacked]->launch;
        size_t need = b->plen + cumod__pack_fast_item_max(l);
        if (need > b->pcap) {
            size_t cap = b->pcap ? b->pcap * 2 : 4096;
            while (cap < need)
                cap *= 2;
            uint8_t *p = realloc(b->packed, cap);
            if (p == NULL)
                return -1;
            b->packed = p;
            b->pcap = cap;
        }
        b->plen += cumod__pack_fast_item(l, b->packed + b->plen);
    }
    return 0;
}

int
cumod_batch_submit(cumod_client *c, cumod_batch *b, cumod_stream stream,
                   cumod_ticket *ticket, int *failed_index)
{
    cumod__pack_items pre;
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__Batch batch = CUMOD__BATCH__INIT;
    Cumod__Reply *reply;
    int rv, failed = -1;

    if (failed_index != NULL)
        *failed_index = -1;
    if (c == NULL || b == NULL)
        return batch_null("cumod_batch_submit");
    if (b->count == 0)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_batch_submit: the batch is "
                                       "empty");
    batch.stream = stream;
    batch.n_items = b->count;
    batch.items = b->items;
    batch.when = CUMOD__WHEN(ticket);
    batch.deadline_ms = b->deadline_ms;
    req.body_case = CUMOD__REQUEST__BODY_BATCH;
    req.batch = &batch;
    int packed = !b->unpackable && batch_pack_new(b) == 0;
    pre.bytes = b->packed;
    pre.len = b->plen;
    rv = cumod__client_call_timed(c, &req, packed ? &pre : NULL, &reply, 1, 0);
    if (reply == NULL)
        return rv;
    if (reply->body_case != CUMOD__REPLY__BODY_BATCH) {
        if (rv == CUMOD_OK)
            rv = cumod__client_set_error(CUMOD_EPROTO,
                                         "cumod_batch_submit: cumodd answered "
                                         "with another kind of reply");
    } else if (rv != CUMOD_OK) {
        failed = reply->batch->failed_index;
        /* An index outside the batch is not one item's failure. */
        if (failed < 0 || (size_t)failed >= b->count)
            failed = -1;
    } else if (ticket != NULL) {
        *ticket = reply->batch->ticket;
    }
    cumod__reply__free_unpacked(reply, NULL);
    if (rv != CUMOD_OK && failed_index != NULL)
        *failed_index = failed;
    return rv;
}
