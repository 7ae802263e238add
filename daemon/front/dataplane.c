/*
 * Buffers, segments, streams, copies, memsets, inline reads and writes,
 * synchronize and wait: validated against the session, then one executor
 * call each (WORK for anything that runs on a stream).
 */
#include "dataplane.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog/catalog_internal.h"
#include "cumod/errors.h"
#include "front.h"
#include "log.h"

void
cumod__dp_msg_init(cumod_dp_msg *m, uint64_t stream_key)
{
    cumod_chan_work cw = {.stream = stream_key};
    memset(m, 0, sizeof(*m));
    m->cap = 4096;
    if ((m->buf = malloc(m->cap)) == NULL) {
        m->oom = 1;
        return;
    }
    memcpy(m->buf, &cw, sizeof(cw));
    m->len = sizeof(cw);
}

static void
dp_put(cumod_dp_msg *m, const void *p, size_t n, size_t pad)
{
    if (m->oom)
        return;
    if (m->len + n + pad > m->cap) {
        size_t cap = m->cap * 2;
        while (cap < m->len + n + pad)
            cap *= 2;
        char *b = realloc(m->buf, cap);
        if (b == NULL) {
            m->oom = 1;
            return;
        }
        m->buf = b;
        m->cap = cap;
    }
    memcpy(m->buf + m->len, p, n);
    memset(m->buf + m->len + n, 0, pad);
    m->len += n + pad;
}

void
cumod__dp_msg_item(cumod_dp_msg *m, const cumod_work_item *it,
                   const void *extra, size_t extra_len)
{
    cumod_work_item x = *it;
    x.extra = (uint32_t)extra_len;
    dp_put(m, &x, sizeof(x), 0);
    if (extra_len)
        dp_put(m, extra, extra_len, ((extra_len + 7) & ~(size_t)7) - extra_len);
    m->nitems++;
}

void
cumod__dp_msg_fini(cumod_dp_msg *m)
{
    free(m->buf);
    m->buf = NULL;
}

static void
dp_call_free(cumod_dp_call *c)
{
    for (uint32_t i = 0; i < c->ngens; i++) {
        cumod_gen *g = c->gens[i];
        if (--g->inflight == 0 && g->mod->current != g)
            cumod__res_reap(g->mod);
    }
    for (uint32_t i = 0; i < c->nsegs; i++)
        c->segs[i]->inflight--;
    free(c->segs);
    free(c->gens);
    cumod__session_call_done(c->s);
    free(c);
}

void
cumod__dp_reply_done(cumod_work *w, uint64_t ticket, uint64_t generation)
{
    Cumod__Reply reply = CUMOD__REPLY__INIT;
    Cumod__DoneReply done = CUMOD__DONE_REPLY__INIT;
    done.ticket = ticket;
    done.generation = generation;
    reply.body_case = CUMOD__REPLY__BODY_DONE;
    reply.done = &done;
    cumod__server_reply(w, &reply);
}

static void
dp_reply_batch(cumod_work *w, int status, const char *msg, uint32_t items,
               int failed, uint64_t ticket)
{
    Cumod__Reply reply = CUMOD__REPLY__INIT;
    Cumod__BatchReply br = CUMOD__BATCH_REPLY__INIT;
    Cumod__Status st = CUMOD__STATUS__INIT;
    br.items = items;
    br.failed_index = failed;
    br.ticket = ticket;
    reply.body_case = CUMOD__REPLY__BODY_BATCH;
    reply.batch = &br;
    if (status != CUMOD_OK) {
        st.code = status;
        st.message = (char *)msg;
        reply.status = &st;
    }
    cumod__server_reply(w, &reply);
}

/* The executor answered a WORK call. */
static void
dp_on_work(cumod_daemon *d, void *arg, const cumod_chan_hdr *hdr,
           const void *payload, size_t len)
{
    cumod_dp_call *c = arg;
    cumod_chan_done dn = {.failed_index = -1};
    char msg[1024] = "";
    const char *data = NULL;

    (void)d;
    if (payload != NULL && len >= sizeof(dn)) {
        memcpy(&dn, payload, sizeof(dn));
        if (sizeof(dn) + dn.msg_len + dn.data_len <= len) {
            snprintf(msg, sizeof(msg), "%.*s", (int)dn.msg_len,
                     (const char *)payload + sizeof(dn));
            data = (const char *)payload + sizeof(dn) + dn.msg_len;
        } else {
            dn.data_len = 0;
        }
    } else if (hdr->status != CUMOD_OK) {
        snprintf(msg, sizeof(msg),
                 "the CUDA context was lost (the executor exited) before "
                 "this work completed");
    }
    int st = hdr->status;
    if (st != CUMOD_OK && c->batch_items > 0 && dn.failed_index >= 0) {
        char tmp[sizeof(msg)];
        snprintf(tmp, sizeof(tmp), "item %d: %.1000s", dn.failed_index, msg);
        memcpy(msg, tmp, sizeof(msg));
    }

    if (c->w != NULL) {
        /* Answered on completion (or the ticket's, if answered already). */
        if (c->ticket != 0)
            cumod__session_ticket_done(c->s, c->ticket, st, msg);
        if (c->batch_items > 0) {
            dp_reply_batch(
                c->w, st, msg,
                st ? (uint32_t)(dn.failed_index >= 0 ? dn.failed_index : 0)
                   : c->batch_items,
                dn.failed_index, 0);
        } else if (st != CUMOD_OK) {
            cumod__server_fail(c->w, st, "%s", msg);
        } else if (c->kind == CUMOD__REQUEST__BODY_READ_BUFFER) {
            Cumod__Reply reply = CUMOD__REPLY__INIT;
            Cumod__DataReply dr = CUMOD__DATA_REPLY__INIT;
            dr.data.data = (uint8_t *)data;
            dr.data.len = dn.data_len;
            reply.body_case = CUMOD__REPLY__BODY_DATA;
            reply.data = &dr;
            cumod__server_reply(c->w, &reply);
        } else {
            cumod__dp_reply_done(c->w, 0, c->generation);
        }
        c->w = NULL;
    } else if (c->ticket != 0) {
        cumod__session_ticket_done(c->s, c->ticket, st, msg);
    }
    dp_call_free(c);
}

void
cumod__dp_submit(cumod_daemon *d, cumod_dp_call *c, cumod_dp_msg *m)
{
    cumod_chan_work cw;
    int rv;

    if (m->oom) {
        cumod__server_fail(c->w, CUMOD_ENOMEM, "out of memory");
        cumod__dp_call_abort(c);
        return;
    }
    memcpy(&cw, m->buf, sizeof(cw));
    cw.nitems = m->nitems;
    memcpy(m->buf, &cw, sizeof(cw));
    if (c->ack) {
        cumod_ticket_rec *t = cumod__session_ticket_new(c->s);
        if (t == NULL) {
            cumod__server_fail(c->w, CUMOD_ENOMEM, "out of memory");
            cumod__dp_call_abort(c);
            return;
        }
        c->ticket = t->ticket;
    }
    c->s->inflight++;
    rv =
        cumod__exec_call(d, CUMOD_CHAN_WORK, m->buf, m->len, -1, dp_on_work, c);
    if (rv != CUMOD_OK) {
        if (c->ticket)
            cumod__session_ticket_done(c->s, c->ticket, rv, "not enqueued");
        cumod__server_fail(c->w, rv,
                           "the CUDA executor is restarting: retry shortly");
        c->w = NULL;
        dp_call_free(c);
        return;
    }
    /* "Enqueued" is answered here, once the work is in the channel, whose
     * order is the stream's: no executor round trip. */
    if (c->ack) {
        if (c->batch_items > 0)
            dp_reply_batch(c->w, CUMOD_OK, NULL, c->batch_items, -1, c->ticket);
        else
            cumod__dp_reply_done(c->w, c->ticket, c->generation);
        c->w = NULL;
    }
}

cumod_buf *
cumod__dp_range(cumod_session *s, cumod_work *w, const char *what,
                uint64_t handle, uint64_t offset, uint64_t len)
{
    cumod_buf *b = cumod__session_buf(s, handle);
    if (b == NULL) {
        cumod__server_fail(w, CUMOD_ENOENT,
                           "%s: buffer %llu is not one of this connection's",
                           what, (unsigned long long)handle);
        return NULL;
    }
    if (offset > b->size || len > b->size - offset) {
        cumod__server_fail(w, CUMOD_EINVAL,
                           "%s: offset %llu + length %llu is past the end of "
                           "buffer %llu (%llu bytes)",
                           what, (unsigned long long)offset,
                           (unsigned long long)len, (unsigned long long)handle,
                           (unsigned long long)b->size);
        return NULL;
    }
    return b;
}

uint64_t
cumod__dp_stream(cumod_session *s, cumod_work *w, uint64_t handle)
{
    uint64_t key = cumod__session_stream_key(s, handle);
    if (key == 0)
        cumod__server_fail(w, CUMOD_ENOENT,
                           "stream %llu is not one of this connection's",
                           (unsigned long long)handle);
    return key;
}

int
cumod__dp_hold_gen(cumod_dp_call *c, cumod_gen *g)
{
    if ((c->ngens & (c->ngens - 1)) == 0) { /* 0, 1, 2, 4...: grow */
        cumod_gen **n =
            realloc(c->gens, (c->ngens ? c->ngens * 2 : 1) * sizeof(*n));
        if (n == NULL)
            return -1;
        c->gens = n;
    }
    c->gens[c->ngens++] = g;
    g->inflight++;
    return 0;
}

int
cumod__dp_hold_seg(cumod_dp_call *c, cumod_seg *g)
{
    if ((c->nsegs & (c->nsegs - 1)) == 0) {
        cumod_seg **n =
            realloc(c->segs, (c->nsegs ? c->nsegs * 2 : 1) * sizeof(*n));
        if (n == NULL)
            return -1;
        c->segs = n;
    }
    c->segs[c->nsegs++] = g;
    g->inflight++;
    return 0;
}

void
cumod__dp_call_abort(cumod_dp_call *c)
{
    c->w = NULL;
    c->s->inflight++; /* dp_call_free gives it back */
    dp_call_free(c);
}

cumod_dp_call *
cumod__dp_call_new(cumod_work *w, cumod_session *s, int ack)
{
    cumod_dp_call *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        cumod__server_fail(w, CUMOD_ENOMEM, "out of memory");
        return NULL;
    }
    c->w = w;
    c->s = s;
    c->kind = (int)w->req->body_case;
    c->ack = ack;
    return c;
}

/* One item on one stream: the common path of write, read, memset, copy. */
static void
dp_one(cumod_daemon *d, cumod_work *w, cumod_session *s, uint64_t stream,
       int ack, const cumod_work_item *it, const void *extra, size_t elen,
       cumod_seg *seg)
{
    uint64_t key = cumod__dp_stream(s, w, stream);
    cumod_dp_msg m;
    cumod_dp_call *c;

    if (key == 0 || (c = cumod__dp_call_new(w, s, ack)) == NULL)
        return;
    if (seg != NULL && cumod__dp_hold_seg(c, seg) != 0) {
        cumod__server_fail(w, CUMOD_ENOMEM, "out of memory");
        cumod__dp_call_abort(c);
        return;
    }
    cumod__dp_msg_init(&m, key);
    cumod__dp_msg_item(&m, it, extra, elen);
    cumod__dp_submit(d, c, &m);
    cumod__dp_msg_fini(&m);
}

static void
dp_on_alloc(cumod_daemon *d, void *arg, const cumod_chan_hdr *hdr,
            const void *payload, size_t len)
{
    cumod_dp_simple *x = arg;
    cumod_chan_alloc a = {0};
    (void)d;
    if (payload != NULL && len >= sizeof(a))
        memcpy(&a, payload, sizeof(a));
    if (hdr->status != CUMOD_OK) {
        cumod__server_fail(x->w, hdr->status,
                           hdr->status == CUMOD_EDEVMEM
                               ? "cannot allocate %llu bytes: the device is "
                                 "out of memory"
                               : "cannot allocate %llu bytes (see cumodd's "
                                 "log)",
                           (unsigned long long)x->a);
    } else if (x->s->closed || x->s->lost) {
        /* Nobody to give it to: free it again. */
        cumod_chan_free f = {.dptr = a.dptr};
        (void)cumod__exec_call(x->s->d, CUMOD_CHAN_FREE, &f, sizeof(f), -1,
                               NULL, NULL);
        x->s->mem_used -= x->a;
        cumod__server_fail(x->w, CUMOD_ECLOSED, "the session closed");
        x->a = 0;
    } else {
        x->s->mem_used -= x->a; /* reserved; the record counts it now */
        cumod_buf *b = cumod__session_add_buf(x->s, x->a, a.dptr);
        Cumod__Reply reply = CUMOD__REPLY__INIT;
        Cumod__BufferReply br = CUMOD__BUFFER_REPLY__INIT;
        br.handle = b ? b->handle : 0;
        br.size = x->a;
        reply.body_case = CUMOD__REPLY__BODY_BUFFER;
        reply.buffer = &br;
        cumod__server_reply(x->w, &reply);
        x->a = 0;
    }
    if (x->a)
        x->s->mem_used -= x->a;
    cumod__session_call_done(x->s);
    free(x);
}

void
cumod__dp_on_simple(cumod_daemon *d, void *arg, const cumod_chan_hdr *hdr,
                    const void *payload, size_t len)
{
    cumod_dp_simple *x = arg;
    (void)d;
    (void)payload;
    (void)len;
    if (hdr->status != CUMOD_OK)
        cumod__server_fail(x->w, hdr->status, "the executor refused (%s)",
                           cumod_strerror(hdr->status));
    else
        cumod__dp_reply_done(x->w, 0, 0);
    cumod__session_call_done(x->s);
    free(x);
}

int
cumod__dp_call_simple(cumod_daemon *d, cumod_work *w, cumod_session *s,
                      uint32_t op, const void *p, size_t len, int fd,
                      cumod_exec_cb cb, uint64_t a)
{
    cumod_dp_simple *x = calloc(1, sizeof(*x));
    if (x == NULL) {
        cumod__server_fail(w, CUMOD_ENOMEM, "out of memory");
        return -1;
    }
    x->w = w;
    x->s = s;
    x->a = a;
    s->inflight++;
    int rv = cumod__exec_call(d, op, p, len, fd, cb, x);
    if (rv != CUMOD_OK) {
        s->inflight--;
        free(x);
        cumod__server_fail(w, rv,
                           "the CUDA executor is restarting: retry shortly");
        return -1;
    }
    return 0;
}

static void
dp_alloc(cumod_daemon *d, cumod_work *w, cumod_session *s)
{
    uint64_t size = w->req->alloc_buffer->size;
    uint64_t limit = d->cfg->session_mem_limit;

    if (size == 0) {
        cumod__server_fail(w, CUMOD_EINVAL, "a buffer of 0 bytes");
        return;
    }
    if (limit && (size > limit || s->mem_used > limit - size)) {
        cumod__server_fail(w, CUMOD_EDEVMEM,
                           "cannot allocate %llu bytes: this connection "
                           "holds %llu bytes and its limit "
                           "(--session-memory-limit) is %llu",
                           (unsigned long long)size,
                           (unsigned long long)s->mem_used,
                           (unsigned long long)limit);
        return;
    }
    cumod_chan_alloc a = {.size = size};
    s->mem_used += size; /* reserved until the executor answers */
    if (cumod__dp_call_simple(d, w, s, CUMOD_CHAN_ALLOC, &a, sizeof(a), -1,
                              dp_on_alloc, size) != 0)
        s->mem_used -= size;
}

static void
dp_free(cumod_daemon *d, cumod_work *w, cumod_session *s)
{
    cumod_buf *b =
        cumod__dp_range(s, w, "free", w->req->free_buffer->handle, 0, 0);
    if (b == NULL)
        return;
    /* In stream order after the session's work: drain its streams first
     * (the executor frees only after STREAMS_CLOSE has synchronised). */
    cumod_chan_free f = {.dptr = b->dptr};
    cumod__session_remove_buf(s, b);
    (void)cumod__session_drain_streams(d, s);
    cumod__dp_call_simple(d, w, s, CUMOD_CHAN_FREE, &f, sizeof(f), -1,
                          cumod__dp_on_simple, 0);
}

static void
dp_write(cumod_daemon *d, cumod_work *w, cumod_session *s)
{
    const Cumod__WriteBuffer *r = w->req->write_buffer;
    cumod_buf *b =
        cumod__dp_range(s, w, "write", r->handle, r->offset, r->data.len);
    if (b == NULL)
        return;
    cumod_work_item it = {
        .op = CUMOD_WORK_WRITE, .a = b->dptr + r->offset, .c = r->data.len};
    dp_one(d, w, s, r->stream,
           r->when == CUMOD__REPLY_WHEN__REPLY_WHEN_ENQUEUED, &it, r->data.data,
           r->data.len, NULL);
}

static void
dp_read(cumod_daemon *d, cumod_work *w, cumod_session *s)
{
    const Cumod__ReadBuffer *r = w->req->read_buffer;
    cumod_buf *b =
        cumod__dp_range(s, w, "read", r->handle, r->offset, r->length);
    if (b == NULL)
        return;
    if (r->length > d->cfg->max_msg - 64) {
        cumod__server_fail(w, CUMOD_ETOOBIG,
                           "read: %llu bytes do not fit a reply (at most "
                           "%zu): use a shared segment",
                           (unsigned long long)r->length, d->cfg->max_msg - 64);
        return;
    }
    cumod_work_item it = {
        .op = CUMOD_WORK_READ, .b = b->dptr + r->offset, .c = r->length};
    dp_one(d, w, s, r->stream, 0, &it, NULL, 0, NULL);
}

static void
dp_memset(cumod_daemon *d, cumod_work *w, cumod_session *s)
{
    const Cumod__Memset *r = w->req->memset;
    cumod_buf *b =
        cumod__dp_range(s, w, "memset", r->handle, r->offset, r->length);
    if (b == NULL)
        return;
    if (r->value > 255) {
        cumod__server_fail(w, CUMOD_EINVAL,
                           "memset: value %u is not a byte (0-255)", r->value);
        return;
    }
    cumod_work_item it = {.op = CUMOD_WORK_MEMSET,
                          .a = b->dptr + r->offset,
                          .b = r->value,
                          .c = r->length};
    dp_one(d, w, s, r->stream,
           r->when == CUMOD__REPLY_WHEN__REPLY_WHEN_ENQUEUED, &it, NULL, 0,
           NULL);
}

int
cumod__dp_copy_item(cumod_session *s, cumod_work *w, const Cumod__Copy *r,
                    cumod_work_item *it, cumod_seg **segp)
{
    cumod_buf *b =
        cumod__dp_range(s, w, "copy", r->buffer, r->buffer_offset, r->length);
    if (b == NULL)
        return -1;
    memset(it, 0, sizeof(*it));
    *segp = NULL;
    if (r->kind == CUMOD__COPY_KIND__COPY_DEVICE) {
        cumod_buf *src = cumod__dp_range(s, w, "copy (source)", r->src_buffer,
                                         r->src_offset, r->length);
        if (src == NULL)
            return -1;
        it->op = CUMOD_WORK_DTOD;
        it->a = b->dptr + r->buffer_offset;
        it->b = src->dptr + r->src_offset;
        it->c = r->length;
        return 0;
    }
    cumod_seg *g = cumod__session_seg(s, r->segment);
    if (g == NULL) {
        cumod__server_fail(w, CUMOD_ENOENT,
                           "copy: segment %llu is not one of this "
                           "connection's",
                           (unsigned long long)r->segment);
        return -1;
    }
    if (r->segment_offset > g->size ||
        r->length > g->size - r->segment_offset) {
        cumod__server_fail(w, CUMOD_EINVAL,
                           "copy: offset %llu + length %llu is past the end "
                           "of segment %llu (%llu bytes)",
                           (unsigned long long)r->segment_offset,
                           (unsigned long long)r->length,
                           (unsigned long long)r->segment,
                           (unsigned long long)g->size);
        return -1;
    }
    uint64_t host = g->host + r->segment_offset;
    uint64_t dev = b->dptr + r->buffer_offset;
    if (r->kind == CUMOD__COPY_KIND__COPY_TO_DEVICE) {
        it->op = CUMOD_WORK_HTOD;
        it->a = dev;
        it->b = host;
    } else if (r->kind == CUMOD__COPY_KIND__COPY_TO_HOST) {
        it->op = CUMOD_WORK_DTOH;
        it->a = host;
        it->b = dev;
    } else {
        cumod__server_fail(w, CUMOD_EINVAL, "copy: unknown kind %d",
                           (int)r->kind);
        return -1;
    }
    it->c = r->length;
    *segp = g;
    return 0;
}

static void
dp_copy(cumod_daemon *d, cumod_work *w, cumod_session *s)
{
    const Cumod__Copy *r = w->req->copy;
    cumod_work_item it;
    cumod_seg *g;
    if (cumod__dp_copy_item(s, w, r, &it, &g) != 0)
        return;
    dp_one(d, w, s, r->stream,
           r->when == CUMOD__REPLY_WHEN__REPLY_WHEN_ENQUEUED, &it, NULL, 0, g);
}

int
cumod__dp_on_request(cumod_daemon *d, cumod_work *w)
{
    cumod_session *s;

    switch (w->req->body_case) {
    case CUMOD__REQUEST__BODY_ALLOC_BUFFER:
    case CUMOD__REQUEST__BODY_FREE_BUFFER:
    case CUMOD__REQUEST__BODY_WRITE_BUFFER:
    case CUMOD__REQUEST__BODY_READ_BUFFER:
    case CUMOD__REQUEST__BODY_MEMSET:
    case CUMOD__REQUEST__BODY_MAP_SEGMENT:
    case CUMOD__REQUEST__BODY_UNMAP_SEGMENT:
    case CUMOD__REQUEST__BODY_COPY:
    case CUMOD__REQUEST__BODY_CREATE_STREAM:
    case CUMOD__REQUEST__BODY_DESTROY_STREAM:
    case CUMOD__REQUEST__BODY_SYNCHRONIZE:
    case CUMOD__REQUEST__BODY_WAIT:
    case CUMOD__REQUEST__BODY_LAUNCH:
    case CUMOD__REQUEST__BODY_BATCH:
        break;
    default:
        return 0;
    }
    if ((s = cumod__session_of(d, w)) == NULL)
        return 1;
    switch (w->req->body_case) {
    case CUMOD__REQUEST__BODY_ALLOC_BUFFER:
        dp_alloc(d, w, s);
        break;
    case CUMOD__REQUEST__BODY_FREE_BUFFER:
        dp_free(d, w, s);
        break;
    case CUMOD__REQUEST__BODY_WRITE_BUFFER:
        dp_write(d, w, s);
        break;
    case CUMOD__REQUEST__BODY_READ_BUFFER:
        dp_read(d, w, s);
        break;
    case CUMOD__REQUEST__BODY_MEMSET:
        dp_memset(d, w, s);
        break;
    case CUMOD__REQUEST__BODY_MAP_SEGMENT:
        cumod__dp_map(d, w, s);
        break;
    case CUMOD__REQUEST__BODY_UNMAP_SEGMENT:
        cumod__dp_unmap(d, w, s);
        break;
    case CUMOD__REQUEST__BODY_COPY:
        dp_copy(d, w, s);
        break;
    case CUMOD__REQUEST__BODY_CREATE_STREAM:
        cumod__dp_stream_create(d, w, s);
        break;
    case CUMOD__REQUEST__BODY_DESTROY_STREAM:
        cumod__dp_stream_destroy(d, w, s);
        break;
    case CUMOD__REQUEST__BODY_SYNCHRONIZE:
        cumod__dp_sync(d, w, s);
        break;
    case CUMOD__REQUEST__BODY_WAIT:
        cumod__dp_wait(d, w, s);
        break;
    default:
        cumod__launch_request(d, w, s);
        break;
    }
    return 1;
}
