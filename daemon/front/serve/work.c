/* SPDX-License-Identifier: MIT */
#include "front/serve/work.h"

#include "front/state/checks.h"
#include "front/front.h"
#include "front/transport/ring.h"
#include "front/state/seg_guard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumod/errors.h"
#include "common/log.h"

void
cumod__work_msg_init(cumod_work_msg *m, uint64_t stream_key)
{
    cumod_chan_work cw = {.stream = stream_key};
    memset(m, 0, sizeof(*m));
    m->cap = 512; /* a launch with a few arguments; doubles as needed */
    if ((m->buf = malloc(m->cap)) == NULL) {
        m->oom = 1;
        return;
    }
    memcpy(m->buf, &cw, sizeof(cw));
    m->len = sizeof(cw);
}

static void
work_put(cumod_work_msg *m, const void *p, size_t n, size_t pad)
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
cumod__work_msg_item(cumod_work_msg *m, const cumod_work_item *it,
                     const void *extra, size_t extra_len)
{
    cumod_work_item x = *it;
    x.extra = (uint32_t)extra_len;
    work_put(m, &x, sizeof(x), 0);
    if (extra_len)
        work_put(m, extra, extra_len,
                 ((extra_len + 7) & ~(size_t)7) - extra_len);
    m->nitems++;
}

void
cumod__work_msg_fini(cumod_work_msg *m)
{
    free(m->buf);
    m->buf = NULL;
}

cumod_work_call *
cumod__work_call_new(cumod_front *f, cumod_req *r, cumod_session *s, int ack,
                     uint64_t key)
{
    cumod_work_call *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->f = f;
    c->r = r;
    c->s = s;
    c->kind = (int)r->msg->body_case;
    c->ack = ack;
    c->stream = key;
    c->parked_item = -1;
    if (f->metrics != NULL)
        c->begin_ns = uv_hrtime();
    cumod__list_node_init(&c->waiter.link);
    cumod__list_node_init(&c->flight);
    cumod__list_node_init(&c->dl_link);
    cumod__list_node_init(&c->solo_link);
    cumod__work_msg_init(&c->msg, key);
    /* The session lives while a call of its is alive, parked included. */
    cumod__front_call_begin(f, s);
    return c;
}

cumod_work_call *
cumod__work_call_start(cumod_front *f, cumod_req *r, cumod_session *s,
                       uint64_t stream, int ack)
{
    cumod_work_call *c;
    cumod_status st;
    uint64_t key;

    if (cumod__check_stream(s, stream, &key, &st) != CUMOD_OK) {
        cumod__req_fail(r, &st);
        return NULL;
    }
    if ((c = cumod__work_call_new(f, r, s, ack, key)) == NULL)
        cumod__req_failf(r, CUMOD_ENOMEM, "out of memory");
    return c;
}

static cumod_err
work_grow(void **arr, uint32_t *cap, uint32_t n, size_t elem)
{
    if (n < *cap)
        return CUMOD_OK;
    uint32_t ncap = *cap ? *cap * 2 : 4;
    void *a = realloc(*arr, ncap * elem);
    if (a == NULL)
        return CUMOD_ENOMEM;
    *arr = a;
    *cap = ncap;
    return CUMOD_OK;
}

cumod_err
cumod__work_hold_launch(cumod_work_call *c, cumod_gen *g, const cumod_kernel *k,
                        cumod_rep *rep)
{
    uint32_t cap = c->capgens, cap2 = c->capgens;
    if (work_grow((void **)&c->gens, &cap, c->ngens, sizeof(*c->gens)) ||
        work_grow((void **)&c->reps, &cap2, c->ngens, sizeof(*c->reps)) ||
        work_grow((void **)&c->kerns, &c->capgens, c->ngens, sizeof(*c->kerns)))
        return CUMOD_ENOMEM;
    c->gens[c->ngens] = g;
    c->reps[c->ngens] = rep;
    c->kerns[c->ngens++] = k;
    cumod__gen_hold(g);
    cumod__rep_hold(rep);
    return CUMOD_OK;
}

cumod_err
cumod__work_hold_seg(cumod_work_call *c, cumod_seg *g)
{
    if (work_grow((void **)&c->segs, &c->capsegs, c->nsegs, sizeof(*c->segs)))
        return CUMOD_ENOMEM;
    c->segs[c->nsegs++] = g;
    g->inflight++;
    return CUMOD_OK;
}

void
cumod__work_hold_gen(cumod_work_call *c, cumod_gen *g, cumod_rep *rep)
{
    if (c->ghold != NULL)
        cumod__gen_release(c->ghold);
    cumod__rep_release(c->rhold);
    c->ghold = g;
    c->rhold = rep;
    cumod__gen_hold(g);
    cumod__rep_hold(rep);
}

static void
work_release_holds(cumod_work_call *c)
{
    if (c->ghold != NULL) {
        cumod__gen_release(c->ghold);
        c->ghold = NULL;
    }
    cumod__rep_release(c->rhold);
    c->rhold = NULL;
    for (uint32_t i = 0; i < c->ngens; i++) {
        cumod__rep_release(c->reps[i]);
        cumod__gen_release(c->gens[i]);
    }
    for (uint32_t i = 0; i < c->nsegs; i++)
        c->segs[i]->inflight--;
    c->ngens = c->nsegs = 0;
}

void
cumod__work_reset(cumod_work_call *c)
{
    work_release_holds(c);
    cumod__work_msg_fini(&c->msg);
    cumod__work_msg_init(&c->msg, c->stream);
    c->generation = 0;
    c->memo_k = NULL;
}

static void
work_call_free(cumod_work_call *c)
{
    cumod_front *f = c->f;
    cumod_session *s = c->s;
    work_release_holds(c);
    free(c->gens);
    free(c->reps);
    free(c->kerns);
    free(c->segs);
    cumod__work_msg_fini(&c->msg);
    free(c);
    cumod__front_call_end(f, s);
}

void
cumod__work_reply_done(cumod_req *r, uint64_t ticket, uint64_t generation)
{
    Cumod__Reply reply = CUMOD__REPLY__INIT;
    Cumod__DoneReply done = CUMOD__DONE_REPLY__INIT;
    done.ticket = ticket;
    done.generation = generation;
    reply.body_case = CUMOD__REPLY__BODY_DONE;
    reply.done = &done;
    cumod__req_answer(r, CUMOD_OK, NULL, &reply);
}

static void
work_reply_batch(cumod_req *r, cumod_err status, const char *msg,
                 uint32_t items, int failed, uint64_t ticket)
{
    Cumod__Reply reply = CUMOD__REPLY__INIT;
    Cumod__BatchReply br = CUMOD__BATCH_REPLY__INIT;
    br.items = items;
    br.failed_index = failed;
    br.ticket = ticket;
    reply.body_case = CUMOD__REPLY__BODY_BATCH;
    reply.batch = &br;
    cumod__req_answer(r, status, msg, &reply);
}

/* The ticket's work is done: answers the Waits that waited for it. */
static void
work_ticket_done(cumod_session *s, uint64_t ticket, cumod_err st,
                 const char *msg)
{
    cumod_list waiters;
    char text[CUMOD_STATUS_MSG];

    cumod__list_init(&waiters);
    cumod__session_ticket_done(s, ticket, st, msg, &waiters);
    if (st != CUMOD_OK && !cumod__list_empty(&waiters))
        snprintf(text, sizeof(text), "ticket %llu: %s",
                 (unsigned long long)ticket,
                 msg && msg[0] ? msg : cumod_strerror(st));
    for (cumod_list_node *n; (n = cumod__list_pop(&waiters)) != NULL;) {
        cumod_req *w = CUMOD_CONTAINER_OF(n, cumod_req, link);
        if (st == CUMOD_OK)
            cumod__work_reply_done(w, 0, 0);
        else
            cumod__req_answer(w, st, text, NULL);
    }
}

/* The answer to a call that completed (or failed, or never ran). */
static void
work_answer(cumod_work_call *c, cumod_err st, const char *msg, int failed,
            const void *data, uint64_t dlen)
{
    if (c->ticket != 0)
        work_ticket_done(c->s, c->ticket, st, msg);
    if (c->r == NULL)
        return; /* answered when enqueued */
    if (c->batch_items > 0) {
        uint32_t done = st == CUMOD_OK ? c->batch_items
                                       : (uint32_t)(failed >= 0 ? failed : 0);
        work_reply_batch(c->r, st, msg, done, failed, 0);
    } else if (st != CUMOD_OK) {
        cumod__req_answer(c->r, st, msg, NULL);
    } else if (c->kind == CUMOD__REQUEST__BODY_READ_BUFFER ||
               c->kind == CUMOD__REQUEST__BODY_READ_GLOBAL) {
        Cumod__Reply reply = CUMOD__REPLY__INIT;
        Cumod__DataReply dr = CUMOD__DATA_REPLY__INIT;
        dr.data.data = (uint8_t *)data;
        dr.data.len = dlen;
        reply.body_case = CUMOD__REPLY__BODY_DATA;
        reply.data = &dr;
        cumod__req_answer(c->r, CUMOD_OK, NULL, &reply);
    } else {
        cumod__work_reply_done(c->r, 0, c->generation);
    }
    c->r = NULL;
}

/* Batches of this many items say at debug level how long the executor
 * took from their send to their completion. */
#define WORK_TIMED_ITEMS 64

/* Counts a finished call for the metrics: its launches by module and
 * outcome, its time, its bytes. */
static void
work_metrics(cumod_work_call *c, int ok)
{
    cumod_front *f = c->f;
    for (uint32_t i = 0; i < c->ngens; i++)
        cumod__metrics_launches(f, cumod__gen_module(c->gens[i]), ok, 1);
    if (c->ngens > 0 && c->begin_ns != 0)
        cumod__metrics_latency(f, uv_hrtime() - c->begin_ns);
    if (ok)
        for (int d = 0; d < 3; d++)
            if (c->bytes[d])
                cumod__metrics_bytes(f, d, c->bytes[d]);
}

/* c completed in ns of device time: its session's, and each item's share
 * by what it ran (the executor measures a WORK, not its items). */
static void
work_gpu_time(cumod_work_call *c, uint64_t ns)
{
    cumod_front *f = c->f;
    if (ns == 0 || c->s == NULL)
        return;
    c->s->gpu_ns += ns;
    if (f->metrics == NULL)
        return;
    uint32_t n = c->msg.nitems > c->ngens + c->ngemms ? c->msg.nitems
                                                      : c->ngens + c->ngemms;
    uint64_t each = ns / (n ? n : 1);
    const char *dom = cumod__session_domain(c->s);
    for (uint32_t i = 0; i < c->ngens; i++)
        if (c->kerns[i] != NULL)
            cumod__metrics_gpu(f, c->s->device, dom,
                               cumod__gen_module(c->gens[i]), c->kerns[i]->name,
                               each);
    if (c->ngemms > 0)
        cumod__metrics_gpu(f, c->s->device, dom, "", "gemm", each * c->ngemms);
    if (n > c->ngens + c->ngemms)
        cumod__metrics_gpu(f, c->s->device, dom, "", "copy",
                           each * (n - c->ngens - c->ngemms));
}

/* The bytes c's items copy, by direction (for the metrics). */
static void
work_count_bytes(cumod_work_call *c)
{
    size_t at = sizeof(cumod_chan_work);
    while (at + sizeof(cumod_work_item) <= c->msg.len) {
        cumod_work_item it;
        memcpy(&it, c->msg.buf + at, sizeof(it));
        at += sizeof(it) + (((size_t)it.extra + 7) & ~(size_t)7);
        switch (it.op) {
        case CUMOD_WORK_HTOD:
            c->bytes[0] += it.c;
            break;
        case CUMOD_WORK_WRITE:
            c->bytes[0] += it.extra;
            break;
        case CUMOD_WORK_DTOH:
        case CUMOD_WORK_READ:
            c->bytes[1] += it.c;
            break;
        case CUMOD_WORK_DTOD:
            c->bytes[2] += it.c;
            break;
        default:
            break;
        }
    }
}

/* The executor answered a WORK call (or went away first). */
static void
work_on_done(void *arg, const cumod_chan_hdr *hdr, const void *payload,
             size_t len)
{
    cumod_work_call *c = arg;
    cumod_chan_done dn = {.failed_index = -1};
    char msg[CUMOD_STATUS_MSG] = "";
    const char *data = NULL;

    if (payload != NULL && len >= sizeof(dn)) {
        memcpy(&dn, payload, sizeof(dn));
        if (sizeof(dn) + dn.msg_len + dn.data_len <= len) {
            if (dn.msg_len > 0) /* most completions say nothing */
                snprintf(msg, sizeof(msg), "%.*s", (int)dn.msg_len,
                         (const char *)payload + sizeof(dn));
            data = (const char *)payload + sizeof(dn) + dn.msg_len;
        } else {
            dn.data_len = 0;
        }
    } else if (hdr->status != CUMOD_OK) {
        snprintf(msg, sizeof(msg),
                 hdr->status == CUMOD_ESHUTDOWN
                     ? "cumodd is shutting down"
                     : "the CUDA context was lost (the executor exited) "
                       "before this work completed");
    }
    cumod_err st = (cumod_err)hdr->status;
    if (st == CUMOD_OK && payload != NULL)
        work_gpu_time(c, dn.gpu_ns);
    if (c->f->metrics != NULL)
        work_metrics(c, st == CUMOD_OK && payload != NULL);
    if (c->sent_ns != 0)
        CUMOD_LOGD("CUMOD-WORK-TIMING",
                   "a batch of %u items completed %.1f us after it was sent",
                   c->batch_items, (double)(uv_hrtime() - c->sent_ns) / 1e3);
    /* A fault or a hang rewrites the answer: the culprit, the cause. */
    cumod__faults_done(&c->s->unit->faults, c, &st, payload != NULL, msg,
                       sizeof(msg));
    /* A segment its client cut short while the copy ran: the copy read
     * zeros or wrote nowhere (seg_guard.h), whatever the executor said. */
    for (uint32_t i = 0; i < c->nsegs && st == CUMOD_OK; i++) {
        cumod_status sst;
        if (cumod__seg_intact(c->s, c->segs[i], &sst) != CUMOD_OK) {
            st = sst.code;
            snprintf(msg, sizeof(msg), "%.1000s", sst.msg);
        }
    }
    if (st != CUMOD_OK && c->batch_items > 0 && dn.failed_index >= 0) {
        char tmp[sizeof(msg)];
        snprintf(tmp, sizeof(tmp), "item %d: %.1000s", dn.failed_index, msg);
        memcpy(msg, tmp, sizeof(msg));
    }
    work_answer(c, st, msg, dn.failed_index, data, dn.data_len);
    work_call_free(c);
}

void
cumod__work_refuse(cumod_work_call *c, const cumod_status *st, int failed_index)
{
    if (c->kind == CUMOD__REQUEST__BODY_LAUNCH ||
        c->kind == CUMOD__REQUEST__BODY_BATCH)
        cumod__metrics_refused(c->f, st->code, 1);
    if (c->posted && c->ticket != 0) {
        /* Nobody hears the refusal but the Wait for its ticket. */
        work_ticket_done(c->s, c->ticket, st->code, st->msg);
        c->ticket = 0;
    }
    if (c->r != NULL) {
        if (c->batch_items > 0) /* refused: none of it ran */
            work_reply_batch(c->r, st->code, st->msg, 0, failed_index, 0);
        else
            cumod__req_fail(c->r, st);
        c->r = NULL;
    }
    work_call_free(c);
}

void
cumod__work_submit(cumod_work_call *c)
{
    cumod_status st;
    cumod_chan_work cw;
    cumod_ticket *t;
    cumod_err rv;

    if (c->msg.oom) {
        cumod__status_set(&st, CUMOD_ENOMEM, "out of memory");
        cumod__work_refuse(c, &st, -1);
        return;
    }
    memcpy(&cw, c->msg.buf, sizeof(cw));
    cw.nitems = c->msg.nitems;
    memcpy(c->msg.buf, &cw, sizeof(cw));
    if (c->f->metrics != NULL)
        work_count_bytes(c);
    if (c->ack && c->ticket == 0) {
        if (cumod__session_ticket_new(c->s, &t) != CUMOD_OK) {
            cumod__status_set(&st, CUMOD_ENOMEM, "out of memory");
            cumod__work_refuse(c, &st, -1);
            return;
        }
        c->ticket = t->ticket;
    }
    /* A suspect of a fault runs alone (fault.h). */
    (void)cumod__faults_before_send(&c->s->unit->faults, c);
    /* Nobody waits for this one's completion on its own: the executor may
     * answer it with the work after it (exec_work.c). */
    if (c->ack && c->deadline_ms == 0 && !c->solo) {
        cw.flags |= CUMOD_CHAN_WORK_F_GROUP;
        memcpy(c->msg.buf, &cw, sizeof(cw));
    }
    if (c->batch_items >= WORK_TIMED_ITEMS)
        c->sent_ns = uv_hrtime();
    rv = cumod__xc_call(c->s->unit->xc, CUMOD_CHAN_WORK, c->msg.buf, c->msg.len,
                        -1, work_on_done, c);
    if (rv != CUMOD_OK) {
        cumod__faults_not_sent(&c->s->unit->faults, c);
        cumod__unit_refusal(c->s->unit, rv, &st);
        if (c->ticket != 0)
            work_ticket_done(c->s, c->ticket, rv, "not enqueued");
        c->ticket = 0;
        cumod__work_refuse(c, &st, -1);
        return;
    }
    /* The message is in the channel (or its queue): not needed any more. */
    cumod__work_msg_fini(&c->msg);
    /* Short work completes within microseconds: poll for its answer
     * rather than sleep in epoll and pay the wake-up (measured on the H100:
     * an nng launch answered when complete was 22 us slower than the same
     * launch from a ring, whose polling kept the loop awake). */
    /* A client waits for this one's completion: poll until it comes, up
     * to ten times as long (2 ms by default), as a batch of short kernels
     * takes about a millisecond and a wake-up from epoll cost 50-100 us of
     * it on the H100's host. */
    unsigned poll_us = c->f->cfg->busy_poll_us;
    cumod__rings_spin(&c->f->rings, c->ack ? poll_us : poll_us * 10);
    cumod__faults_sent(&c->s->unit->faults, c);
    /* "Enqueued" is answered here, once the work is in the channel, whose
     * order is the stream's: no executor round trip. */
    if (c->ack) {
        if (c->batch_items > 0)
            work_reply_batch(c->r, CUMOD_OK, NULL, c->batch_items, -1,
                             c->ticket);
        else
            cumod__work_reply_done(c->r, c->ticket, c->generation);
        c->r = NULL;
    }
}
