/* SPDX-License-Identifier: MIT */
/*
 * Buffers, segments, streams, copies, memsets, inline reads and writes,
 * synchronize and wait: checked against the session (checks.h), then one
 * executor call each; anything that runs on a stream is WORK (work.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "front/state/checks.h"
#include "front/units/direct.h"
#include "cumod/errors.h"
#include "cumod_ring.h"
#include "front/transport/fdpass.h"
#include "front/serve/handlers.h"
#include "common/log.h"
#include "front/serve/work.h"

/* A plain executor call for a request: its session and one number. */
typedef struct xcall {
    cumod_front *f;
    cumod_req *r;
    cumod_session *s;
    uint64_t a;
} xcall;

/* Sends op for r; cb gets an xcall and must end with xcall_end. When the
 * call cannot be made, answers r itself and returns -1. */
static int
xcall_send(cumod_front *f, cumod_req *r, cumod_session *s, uint32_t op,
           const void *p, size_t len, int fd, cumod_chan_reply_cb cb,
           uint64_t a)
{
    xcall *x = calloc(1, sizeof(*x));
    cumod_err rv;

    if (x == NULL) {
        cumod__req_failf(r, CUMOD_ENOMEM, "out of memory");
        return -1;
    }
    x->f = f;
    x->r = r;
    x->s = s;
    x->a = a;
    if ((rv = cumod__xc_call(s->unit->xc, op, p, len, fd, cb, x)) != CUMOD_OK) {
        cumod_status st;
        free(x);
        cumod__unit_refusal(s->unit, rv, &st);
        cumod__req_fail(r, &st);
        return -1;
    }
    cumod__front_call_begin(f, s);
    return 0;
}

static void
xcall_end(xcall *x)
{
    cumod_front *f = x->f;
    cumod_session *s = x->s;
    free(x);
    cumod__front_call_end(f, s);
}

/* The reply for calls answered with a DoneReply or the executor's error. */
static void
xcall_on_done(void *arg, const cumod_chan_hdr *hdr, const void *payload,
              size_t len)
{
    xcall *x = arg;
    (void)payload;
    (void)len;
    if (hdr->status != CUMOD_OK)
        cumod__req_failf(x->r, (cumod_err)hdr->status,
                         "the executor refused (%s)",
                         cumod_strerror(hdr->status));
    else
        cumod__work_reply_done(x->r, 0, 0);
    xcall_end(x);
}

/* One item on one stream: write, read, memset, copy. */
static void
data_one(cumod_front *f, cumod_req *r, cumod_session *s, uint64_t stream,
         int ack, const cumod_work_item *it, const void *extra, size_t elen,
         cumod_seg *seg)
{
    cumod_work_call *c = cumod__work_call_start(f, r, s, stream, ack);
    cumod_status st;

    if (c == NULL)
        return;
    if (seg != NULL && cumod__work_hold_seg(c, seg) != CUMOD_OK) {
        cumod__status_set(&st, CUMOD_ENOMEM, "out of memory");
        cumod__work_refuse(c, &st, -1);
        return;
    }
    cumod__work_msg_item(&c->msg, it, extra, elen);
    cumod__work_submit(c);
}

static int
data_ack(Cumod__ReplyWhen when)
{
    return when == CUMOD__REPLY_WHEN__REPLY_WHEN_ENQUEUED;
}

/* --- buffers -------------------------------------------------------------- */

/* The tail of an allocation or a map the executor made and the session
 * recorded: answered reply, or CUMOD_ECLOSED when the session closed
 * meanwhile (recorded, its release frees or unmaps it with the rest). */
static void
data_made(xcall *x, Cumod__Reply *reply)
{
    if (x->s->closed)
        cumod__req_failf(x->r, CUMOD_ECLOSED, "the session closed");
    else
        cumod__req_answer(x->r, CUMOD_OK, NULL, reply);
}

static void
alloc_on_reply(void *arg, const cumod_chan_hdr *hdr, const void *payload,
               size_t len)
{
    xcall *x = arg;
    cumod_chan_alloc a = {0};
    cumod_buf *b;

    if (payload != NULL && len >= sizeof(a))
        memcpy(&a, payload, sizeof(a));
    x->s->pending_allocs--;
    if (hdr->status != CUMOD_OK) {
        cumod__session_unreserve(x->s, x->a);
        cumod__req_failf(x->r, (cumod_err)hdr->status,
                         hdr->status == CUMOD_EDEVMEM
                             ? "cannot allocate %llu bytes: the device is out "
                               "of memory"
                             : "cannot allocate %llu bytes (see cumodd's log)",
                         (unsigned long long)x->a);
    } else if (cumod__session_buf_add(x->s, x->a, a.dptr, &b) != CUMOD_OK) {
        /* Not recorded: give the memory back behind nothing. */
        cumod__session_unreserve(x->s, x->a);
        cumod_chan_free fr = {.dptr = a.dptr,
                              .reclaim =
                                  cumod__session_key(x->s, CUMOD_CHAN_RECLAIM)};
        (void)cumod__xc_call(x->s->unit->xc, CUMOD_CHAN_FREE, &fr, sizeof(fr),
                             -1, NULL, NULL);
        cumod__req_failf(x->r, CUMOD_ENOMEM, "out of memory");
    } else {
        Cumod__Reply reply = CUMOD__REPLY__INIT;
        Cumod__BufferReply br = CUMOD__BUFFER_REPLY__INIT;
        cumod__fdirect_buf(x->s, b, 1); /* before the client can use it */
        br.handle = b->handle;
        br.size = x->a;
        reply.body_case = CUMOD__REPLY__BODY_BUFFER;
        reply.buffer = &br;
        data_made(x, &reply);
    }
    xcall_end(x);
}

void
cumod__h_alloc(cumod_front *f, cumod_req *r, cumod_session *s)
{
    uint64_t size = r->msg->alloc_buffer->size;
    cumod_chan_alloc a = {.size = size};
    cumod_status st;

    if (size == 0) {
        cumod__req_failf(r, CUMOD_EINVAL, "a buffer of 0 bytes");
        return;
    }
    if (cumod__idmap_count(&s->bufs) + s->pending_allocs >=
        f->cfg->session_max_buffers) {
        cumod__req_failf(r, CUMOD_ELIMIT,
                         "this connection holds %zu buffers, its limit "
                         "(--session-max-buffers): free some first",
                         cumod__idmap_count(&s->bufs) + s->pending_allocs);
        return;
    }
    /* Reserved until the executor answers, so concurrent allocations
     * cannot pass the limit together. */
    if (cumod__unit_reserve(s->unit, s, size, &st) != CUMOD_OK) {
        cumod__req_fail(r, &st);
        return;
    }
    if (xcall_send(f, r, s, CUMOD_CHAN_ALLOC, &a, sizeof(a), -1, alloc_on_reply,
                   size) != 0)
        cumod__session_unreserve(s, size);
    else
        s->pending_allocs++;
}

void
cumod__h_free(cumod_front *f, cumod_req *r, cumod_session *s)
{
    const Cumod__FreeBuffer *q = r->msg->free_buffer;
    uint64_t *keys = NULL;
    size_t nkeys = 0;
    cumod_status st;
    cumod_buf *b = cumod__session_buf(s, q->handle);

    if (b != NULL && b->lost) {
        /* Gone with an earlier executor: only the handle is left. */
        cumod__session_buf_remove(s, b);
        cumod__work_reply_done(r, 0, 0);
        return;
    }
    if (cumod__check_range(s, "free", q->handle, 0, 0, &b, &st) != CUMOD_OK) {
        cumod__req_fail(r, &st);
        return;
    }
    if (cumod__session_stream_keys(s, &keys, &nkeys) != CUMOD_OK) {
        cumod__req_failf(r, CUMOD_ENOMEM, "out of memory");
        return;
    }
    /* Stream-ordered: freed on the session's reclaim stream once every
     * stream of the session has done the work it has now. Nothing waits
     * for that on the executor's submission thread. */
    size_t len = sizeof(cumod_chan_free) + nkeys * sizeof(uint64_t);
    char *msg = malloc(len);
    if (msg == NULL) {
        free(keys);
        cumod__req_failf(r, CUMOD_ENOMEM, "out of memory");
        return;
    }
    cumod_chan_free fr = {.dptr = b->dptr,
                          .reclaim = cumod__session_key(s, CUMOD_CHAN_RECLAIM),
                          .count = nkeys};
    memcpy(msg, &fr, sizeof(fr));
    memcpy(msg + sizeof(fr), keys, nkeys * sizeof(uint64_t));
    free(keys);
    /* Out of direct launches' reach before its FREE (in channel order) */
    cumod__fdirect_buf(s, b, 0);
    cumod__session_buf_remove(s, b);
    (void)xcall_send(f, r, s, CUMOD_CHAN_FREE, msg, len, -1, xcall_on_done, 0);
    free(msg);
}

void
cumod__h_write(cumod_front *f, cumod_req *r, cumod_session *s)
{
    const Cumod__WriteBuffer *q = r->msg->write_buffer;
    cumod_work_item it;
    cumod_status st;

    if (cumod__check_write(s, q, &it, &st) != CUMOD_OK) {
        cumod__req_fail(r, &st);
        return;
    }
    data_one(f, r, s, q->stream, data_ack(q->when), &it, q->data.data,
             q->data.len, NULL);
}

void
cumod__h_read(cumod_front *f, cumod_req *r, cumod_session *s)
{
    const Cumod__ReadBuffer *q = r->msg->read_buffer;
    cumod_work_item it;
    cumod_status st;

    if (cumod__check_read(s, q, f->cfg->max_msg - 64, &it, &st) != CUMOD_OK) {
        cumod__req_fail(r, &st);
        return;
    }
    data_one(f, r, s, q->stream, 0, &it, NULL, 0, NULL);
}

void
cumod__h_memset(cumod_front *f, cumod_req *r, cumod_session *s)
{
    const Cumod__Memset *q = r->msg->memset;
    cumod_work_item it;
    cumod_status st;

    if (cumod__check_memset(s, q, &it, &st) != CUMOD_OK) {
        cumod__req_fail(r, &st);
        return;
    }
    data_one(f, r, s, q->stream, data_ack(q->when), &it, NULL, 0, NULL);
}

void
cumod__h_copy(cumod_front *f, cumod_req *r, cumod_session *s)
{
    const Cumod__Copy *q = r->msg->copy;
    cumod_work_item it;
    cumod_status st;
    cumod_seg *g;

    if (cumod__check_copy(s, q, &it, &g, &st) != CUMOD_OK) {
        cumod__req_fail(r, &st);
        return;
    }
    data_one(f, r, s, q->stream, data_ack(q->when), &it, NULL, 0, g);
}

/* --- segments ------------------------------------------------------------- */

/* What a map keeps of the object while the executor maps it: its own
 * descriptor (seg_guard.h) and the name, for the sentences. */
typedef struct map_keep {
    int fd;
    char name[208];
} map_keep;

static void
map_on_reply(void *arg, const cumod_chan_hdr *hdr, const void *payload,
             size_t len)
{
    xcall *x = arg;
    map_keep *k = (map_keep *)(uintptr_t)x->a;
    cumod_chan_segment sg = {0};
    cumod_seg *g = NULL;

    if (payload != NULL && len >= sizeof(sg))
        memcpy(&sg, payload, sizeof(sg));
    x->s->pending_maps--;
    if (hdr->status != CUMOD_OK || sg.host == 0) {
        cumod_err code = hdr->status ? (cumod_err)hdr->status : CUMOD_EIO;
        cumod__req_failf(x->r, code,
                         "the executor could not map and register the "
                         "segment (%s)",
                         cumod_strerror(code));
    } else if (cumod__session_seg_add(x->s, sg.size, sg.host, k->name, &g) !=
               CUMOD_OK) {
        g = NULL;
        cumod_chan_segment un = {.size = sg.size, .host = sg.host};
        (void)cumod__xc_call(x->s->unit->xc, CUMOD_CHAN_SEG_UNMAP, &un,
                             sizeof(un), -1, NULL, NULL);
        cumod__req_failf(x->r, CUMOD_ENOMEM, "out of memory");
    } else {
        Cumod__Reply reply = CUMOD__REPLY__INIT;
        Cumod__SegmentReply sr = CUMOD__SEGMENT_REPLY__INIT;
        sr.handle = g->handle;
        sr.size = g->size;
        reply.body_case = CUMOD__REPLY__BODY_SEGMENT;
        reply.segment = &sr;
        data_made(x, &reply);
    }
    if (g != NULL) {
        g->fd = k->fd;
    } else if (k->fd >= 0) {
        close(k->fd);
    }
    free(k);
    xcall_end(x);
}

/* The segment MapSegment names: opened by name, as the client (a plain
 * shm name, a regular file owned by the peer's uid), or the memfd the
 * connection's process handed over with its token (sealed against
 * shrinking, the peer's); *label is what messages call it. */
static cumod_err
map_open(cumod_front *f, const Cumod__MapSegment *q, cumod_session *s, int *out,
         const char **label, cumod_status *st)
{
    int fd, handed = q->fd_token.len > 0;

    *out = -1;
    *label = handed ? "(a memfd handed over)" : q->name;
    if (handed) {
        if (q->size == 0)
            return cumod__status_set(st, CUMOD_EINVAL, "map: the size is 0");
        if (cumod__fdpass_take(f->fdpass, q->fd_token.data, q->fd_token.len,
                               s->pid, s->uid, &fd, 1, st) != CUMOD_OK) {
            char why[sizeof(st->msg)];
            snprintf(why, sizeof(why), "%s", st->msg);
            return cumod__status_set(st, st->code, "map: %s", why);
        }
    } else {
        fd = shm_open(q->name, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0);
        if (fd < 0) {
            int e = errno;
            cumod_err code = cumod__errno_err(e);
            return cumod__status_set(
                st, code == CUMOD_ENOENT ? CUMOD_ENOENT : CUMOD_EPERM,
                "map: cannot open shared memory %s: %s", q->name, strerror(e));
        }
    }
    *out = fd;
    return cumod__fdpass_check_memory(fd, s->uid, q->size, handed, "map",
                                      *label, CUMOD_EINVAL, st);
}

/* Maps a client's segment (map_open) in the session's executor. */
void
cumod__h_map(cumod_front *f, cumod_req *r, cumod_session *s)
{
    const Cumod__MapSegment *q = r->msg->map_segment;
    const char *label;
    cumod_status st;
    int fd;

    if (q->fd_token.len == 0 && cumod__check_segment_name(q, &st) != CUMOD_OK) {
        cumod__req_fail(r, &st);
        return;
    }
    if (cumod__idmap_count(&s->segs) + s->pending_maps >=
        f->cfg->session_max_segments) {
        cumod__req_failf(r, CUMOD_ELIMIT,
                         "map: this connection has %zu segments mapped, its "
                         "limit (--session-max-segments)",
                         cumod__idmap_count(&s->segs) + s->pending_maps);
        return;
    }
    if (s->uid < 0) {
        /* Only a local peer's credentials say who owns a segment. */
        cumod__req_failf(r, CUMOD_EPERM,
                         "map: shared memory needs a local (ipc://) "
                         "connection, whose owner cumodd can check");
        return;
    }
    if (map_open(f, q, s, &fd, &label, &st) != CUMOD_OK) {
        if (fd >= 0)
            close(fd);
        cumod__req_fail(r, &st);
        return;
    }
    map_keep *k = malloc(sizeof(*k));
    if (k == NULL) {
        close(fd);
        cumod__req_failf(r, CUMOD_ENOMEM, "out of memory");
        return;
    }
    k->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    snprintf(k->name, sizeof(k->name), "%s", label);
    cumod_chan_segment sg = {.size = q->size};
    if (xcall_send(f, r, s, CUMOD_CHAN_SEG_MAP, &sg, sizeof(sg), fd,
                   map_on_reply, (uint64_t)(uintptr_t)k) == 0) {
        s->pending_maps++;
    } else {
        if (k->fd >= 0)
            close(k->fd);
        free(k);
    }
    close(fd); /* the executor has its own now */
}

void
cumod__h_unmap(cumod_front *f, cumod_req *r, cumod_session *s)
{
    uint64_t h = r->msg->unmap_segment->handle;
    cumod_seg *g = cumod__session_seg(s, h);
    cumod_err rv;

    if (g == NULL) {
        cumod__req_failf(r, CUMOD_ENOENT,
                         "unmap: segment %llu is not one of this connection's",
                         (unsigned long long)h);
        return;
    }
    if (g->lost) {
        cumod__session_seg_remove(s, g);
        cumod__work_reply_done(r, 0, 0);
        return;
    }
    if (g->inflight > 0) {
        cumod__req_failf(r, CUMOD_EBUSY,
                         "unmap: segment %llu has %u copies in flight",
                         (unsigned long long)h, g->inflight);
        return;
    }
    /* Nothing of the session uses it any more: the executor unregisters it
     * when the device is idle (channel.h). The client may unmap and unlink
     * its side at once: the executor holds its own mapping. */
    cumod_chan_segment sg = {.size = g->size, .host = g->host};
    cumod__session_seg_remove(s, g);
    rv = cumod__xc_call(s->unit->xc, CUMOD_CHAN_SEG_UNMAP, &sg, sizeof(sg), -1,
                        NULL, NULL);
    if (rv != CUMOD_OK && rv != CUMOD_ECTXLOST) /* lost: nothing to undo */
        CUMOD_LOGW("CUMOD-UNMAP", "segment %llu of session %u: %s",
                   (unsigned long long)h, s->id, cumod_strerror(rv));
    cumod__work_reply_done(r, 0, 0);
}

/* --- streams, synchronize, wait ------------------------------------------ */

void
cumod__h_stream_create(cumod_front *f, cumod_req *r, cumod_session *s)
{
    Cumod__Reply reply = CUMOD__REPLY__INIT;
    Cumod__StreamReply sr = CUMOD__STREAM_REPLY__INIT;
    cumod_sstream *t;
    cumod_err rv;

    if (cumod__idmap_count(&s->streams) >= f->cfg->session_max_streams) {
        cumod__req_failf(r, CUMOD_ELIMIT,
                         "this connection has %zu streams, its limit "
                         "(--session-max-streams): destroy some first",
                         cumod__idmap_count(&s->streams));
        return;
    }
    /* The executor creates it on first use. */
    if ((rv = cumod__session_stream_add(s, &t)) != CUMOD_OK) {
        cumod__req_failf(r, rv == CUMOD_EBUSY ? CUMOD_EBUSY : CUMOD_ENOMEM,
                         "no more streams for this connection");
        return;
    }
    sr.handle = t->handle;
    cumod__fdirect_stream(s, t->handle, t->key, 1);
    reply.body_case = CUMOD__REPLY__BODY_STREAM;
    reply.stream = &sr;
    cumod__req_answer(r, CUMOD_OK, NULL, &reply);
}

void
cumod__h_stream_destroy(cumod_front *f, cumod_req *r, cumod_session *s)
{
    uint64_t h = r->msg->destroy_stream->handle;
    cumod_sstream *t;

    if (h == 0) {
        cumod__req_failf(r, CUMOD_EINVAL,
                         "the default stream cannot be destroyed");
        return;
    }
    if ((t = cumod__session_stream(s, h)) == NULL) {
        cumod__req_failf(r, CUMOD_ENOENT,
                         "stream %llu is not one of this connection's",
                         (unsigned long long)h);
        return;
    }
    /* Destroyed behind its work; the session's reclaim stream waits for
     * that work, so that later frees come after it. */
    struct {
        cumod_chan_streams head;
        uint64_t key;
    } msg = {.head = {.reclaim = cumod__session_key(s, CUMOD_CHAN_RECLAIM),
                      .count = 1},
             .key = t->key};
    cumod__fdirect_stream(s, t->handle, t->key, 0);
    cumod__session_stream_remove(s, t);
    (void)xcall_send(f, r, s, CUMOD_CHAN_STREAMS_CLOSE, &msg, sizeof(msg), -1,
                     xcall_on_done, 0);
}

void
cumod__h_sync(cumod_front *f, cumod_req *r, cumod_session *s)
{
    cumod_work_call *c;
    cumod_status st;
    uint64_t key;

    if (cumod__check_stream(s, r->msg->synchronize->stream, &key, &st) !=
        CUMOD_OK) {
        cumod__req_fail(r, &st);
        return;
    }
    if ((c = cumod__work_call_new(f, r, s, 0, key)) == NULL) {
        cumod__req_failf(r, CUMOD_ENOMEM, "out of memory");
        return;
    }
    /* An empty WORK: its event completes after everything before it. */
    cumod__work_submit(c);
}

void
cumod__h_wait(cumod_front *f, cumod_req *r, cumod_session *s)
{
    uint64_t ticket = r->msg->wait->ticket;
    cumod_ticket *t = cumod__session_ticket(s, ticket);

    if (t == NULL &&
        (ticket & (CUMOD_DRING_TICKET_BIT | CUMOD_TICKET_POSTED))) {
        /* The executor's (or a posted launch's, which the front holds
         * while it serves it): done unless it failed (then it is held here,
         * taken over with the ring), or never given. Over the connection
         * while the executor still reads the ring (it gave the client's
         * ring up): a launch in flight is waited for as a Synchronize of
         * its stream waits, a kept failure reported. */
        uint32_t index = 0;
        cumod_err code = CUMOD_OK;
        char msg[256];
        int live = cumod__fdirect_ticket_live(s, ticket, &index, &code, msg,
                                              sizeof(msg));
        cumod_work_call *c;
        if (live == 2) {
            cumod__req_failf(r, code, "ticket %llu: %s",
                             (unsigned long long)ticket, msg);
        } else if (live == 1 &&
                   (c = cumod__work_call_new(
                        f, r, s, 0, cumod__session_key(s, index))) != NULL) {
            cumod__work_submit(c);
        } else if ((ticket & CUMOD_DRING_TICKET_BIT) &&
                   ticket >= cumod__fdirect_ticket_next(s)) {
            cumod__req_failf(r, CUMOD_ENOENT,
                             "ticket %llu was never given to this connection",
                             (unsigned long long)ticket);
        } else {
            cumod__work_reply_done(r, 0, 0);
        }
        return;
    }
    if (t == NULL) {
        if (ticket == 0 || ticket >= s->next_ticket)
            cumod__req_failf(r, CUMOD_ENOENT,
                             "ticket %llu was never given to this connection",
                             (unsigned long long)ticket);
        else
            cumod__work_reply_done(r, 0, 0); /* completed and forgotten */
        return;
    }
    if (!t->done) {
        cumod__list_append(&t->waiters, &r->link); /* the ticket answers */
        return;
    }
    cumod__req_failf(r, t->status, "ticket %llu: %s",
                     (unsigned long long)ticket,
                     t->error ? t->error : cumod_strerror(t->status));
    /* Reported: a later wait finds nothing (done), and neither does the
     * limit on kept failures. */
    cumod__session_ticket_forget(s, t);
}
