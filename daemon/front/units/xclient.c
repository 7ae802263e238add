/* SPDX-License-Identifier: MIT */
/*
 * The executor client's channel (xclient.h): the calls the front makes to
 * the executor and their answers. Commands go through the ring beside the
 * socket, the socket, or the out queue when neither takes them now (and
 * behind the gate of a solo run); the executor's packets (replies, its
 * READY, FAULT and FAILED, batched completions) are read from the socket
 * and the completion ring and matched to calls by sequence number. The
 * process behind it (start, exit, restart, heartbeats) is xc_proc.c's:
 * this side tells it only through xc->hooks and xc->broken.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cumod/errors.h"
#include "common/log.h"
#include "front/units/xclient_impl.h"

/* More than this queued for the executor means it is stuck or far behind:
 * new work is refused (CUMOD_EBUSY) rather than piled up. */
#define XC_OUTQ_MAX ((size_t)256 << 20)

static void xc_on_packet(cumod_xc *xc, size_t n, int fd);
static void xc_on_chan(uv_poll_t *h, int status, int events);

/* Runs what the completion ring holds, in order; how many. */
static int
xc_back_drain(cumod_xc *xc)
{
    int n = 0;
    while (xc->ring_on && !xc->closing) {
        const uint8_t *pkt;
        long len = cumod__chanring_peek(&xc->back, &pkt);
        if (len == 0)
            break;
        if (len < 0 || len > CUMOD_CHAN_MAX) {
            /* Only cumodd's own executor writes there: it is broken. */
            CUMOD_LOGE("CUMOD-EXEC-CHAN",
                       "the executor's completion ring is corrupt: it is "
                       "stopped");
            xc->broken(xc, "its completion ring was corrupt");
            return n;
        }
        /* Copied out first: running it may close the ring. */
        memcpy(xc->buf, pkt, (size_t)len);
        cumod__chanring_pop(&xc->back);
        xc_on_packet(xc, (size_t)len, -1);
        n++;
    }
    return n;
}

static int
xc_back_poll(void *arg)
{
    return xc_back_drain(arg);
}

/* The loop is about to sleep in epoll (1): the executor rings the
 * eventfd from now on; look once more (it may have put an answer just
 * before it saw the flag). Or the loop spins again (0). */
static int
xc_back_sleep(void *arg, int sleeping)
{
    cumod_xc *xc = arg;
    if (!xc->ring_on)
        return 0;
    atomic_store_explicit(&xc->back.h->sleeping, (uint32_t)sleeping,
                          memory_order_seq_cst);
    return sleeping ? xc_back_drain(xc) : 0;
}

static void
xc_on_back_bell(uv_poll_t *h, int status, int events)
{
    cumod_xc *xc = h->data;
    uint64_t v;
    (void)status;
    (void)events;
    while (read(xc->back.bell_fd, &v, sizeof(v)) > 0)
        ;
    (void)xc_back_drain(xc);
}

void
cumod__xc_set_state(cumod_xc *xc, xc_state st)
{
    if (xc->state != st)
        xc->state_unix_ms = cumod__wall_ms();
    xc->state = st;
}

void
cumod__xc_maybe_free(cumod_xc *xc)
{
    if (!xc->closing || xc->handles > 0)
        return;
    cumod__idmap_fini(&xc->pending);
    free(xc->buf);
    free(xc);
}

void
cumod__xc_on_handle_close(uv_handle_t *h)
{
    cumod_xc *xc = h->data;
    xc->handles--;
    cumod__xc_maybe_free(xc);
}

static void
xc_outq_free(cumod_xc *xc)
{
    for (cumod_list_node *n; (n = cumod__list_pop(&xc->outq)) != NULL;) {
        xc_out *o = CUMOD_CONTAINER_OF(n, xc_out, link);
        if (o->fd >= 0)
            close(o->fd);
        free(o);
    }
    xc->outq_bytes = 0;
}

static int
xc_send(cumod_xc *xc, cumod_chan_hdr *h, const void *payload, size_t len,
        int fd)
{
    return cumod__chan_send_any_fd(xc->chan_fd, h, payload, len, fd);
}

/* Sends what waits, in order, while the socket takes it and the gate
 * lets it. */
static void
xc_outq_flush(cumod_xc *xc)
{
    cumod_list_node *n;
    int want_write = 0;
    while ((n = cumod__list_first(&xc->outq)) != NULL && xc->chan_fd >= 0) {
        xc_out *o = CUMOD_CONTAINER_OF(n, xc_out, link);
        if (xc->gated && (o->hdr.seq > xc->gate_seq ||
                          (o->hdr.seq == xc->gate_seq && !xc->gate_pass)))
            break; /* behind the gate */
        int rv = xc_send(xc, &o->hdr, o->payload, o->len, o->fd);
        if (rv == -EAGAIN) {
            want_write = 1;
            break;
        }
        if (rv == 0 && xc->ring_on)
            atomic_fetch_add_explicit(&xc->ring.h->sock_sent, 1,
                                      memory_order_release);
        if (rv != 0)
            CUMOD_LOGE("CUMOD-EXEC-CHAN", "cannot send to the executor: %s",
                       strerror(-rv));
        cumod__list_remove(n);
        xc->outq_bytes -= o->len;
        if (o->fd >= 0)
            close(o->fd);
        free(o);
    }
    if (xc->chan_polling)
        uv_poll_start(&xc->chan_poll,
                      UV_READABLE | UV_DISCONNECT |
                          (want_write ? UV_WRITABLE : 0),
                      xc_on_chan);
}

static int
xc_by_seq(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Answers every call in flight with code: the executor that would have
 * answered is gone. Oldest first, so that the answers keep the order in
 * which the calls were made.
 *
 * Each call leaves the map just before its callback, not all at once: a
 * callback may end the front's drain at SIGTERM, and the front then closes
 * this client (cumod__xc_close), which fails what is left, itself, before
 * the front stops what those calls' callbacks use (the catalog, the fault
 * tracker). Calls it answered are no longer in the map here. No call is
 * added meanwhile: the client is not ready. */
void
cumod__xc_fail_pending(cumod_xc *xc, int code)
{
    size_t n = cumod__idmap_count(&xc->pending), i = 0, cur = 0;
    uint64_t *seqs = calloc(n ? n : 1, sizeof(*seqs)), seq;

    if (seqs == NULL) {
        CUMOD_LOGE("CUMOD-NOMEM",
                   "%zu calls to the executor are left "
                   "unanswered",
                   n);
        return;
    }
    while (i < n && cumod__idmap_next(&xc->pending, &cur, &seq) != NULL)
        seqs[i++] = seq;
    qsort(seqs, i, sizeof(*seqs), xc_by_seq);
    for (size_t k = 0; k < i; k++) {
        xc_pending *p = cumod__idmap_remove(&xc->pending, seqs[k]);
        if (p == NULL)
            continue; /* answered by a close that a callback made */
        cumod_chan_hdr h = {.seq = p->seq, .status = code};
        if (p->cb != NULL)
            p->cb(p->arg, &h, NULL, 0);
        free(p);
    }
    free(seqs);
}

void
cumod__xc_chan_close(cumod_xc *xc)
{
    xc_outq_free(xc);
    xc->gated = xc->gate_pass = 0;
    if (xc->chan_polling) {
        uv_poll_stop(&xc->chan_poll);
        uv_close((uv_handle_t *)&xc->chan_poll, cumod__xc_on_handle_close);
        xc->chan_polling = 0;
    }
    if (xc->chan_fd >= 0) {
        close(xc->chan_fd);
        xc->chan_fd = -1;
    }
    if (xc->back_polling) {
        uv_poll_stop(&xc->back_poll);
        uv_close((uv_handle_t *)&xc->back_poll, cumod__xc_on_handle_close);
        xc->back_polling = 0;
    }
    cumod__rings_poller_remove(&xc->poller);
    if (xc->ring_on) {
        cumod__chanring_close(&xc->ring);
        cumod__chanring_close(&xc->back);
        xc->ring_on = 0;
    }
}

int
cumod__xc_ready(const cumod_xc *xc)
{
    return xc != NULL && xc->state == XC_READY && xc->chan_fd >= 0 &&
           !xc->closing && !xc->dying;
}

const cumod_chan_device *
cumod__xc_device(const cumod_xc *xc)
{
    return &xc->dev;
}

int
cumod__xc_pid(const cumod_xc *xc)
{
    return xc->proc_alive ? (xc->adopted ? xc->apid : xc->proc.pid) : 0;
}

static void
xc_on_ready(cumod_xc *xc, const cumod_chan_device *dev)
{
    int first = !xc->ever_ready;

    xc->dev = *dev;
    xc->dev.name[sizeof(xc->dev.name) - 1] = '\0';
    cumod__xc_set_state(xc, XC_READY);
    xc->ready_uv_ms = uv_now(xc->loop);
    xc->start_failures = 0;
    xc->ever_ready = 1;
    xc->killed = 0;
    xc->reported = 0;
    xc->ping_out = 0;
    xc->mem_free = dev->free_memory;
    xc->mem_total = dev->total_memory;
    xc->mem_uv_ms = uv_now(xc->loop);
    if (!first)
        CUMOD_LOGN("CUMOD-EXEC-RESTARTED", "executor pid %d is serving again",
                   cumod__xc_pid(xc));
    xc->hooks.ready(xc->hooks.arg, &xc->dev, first);
}

static void
xc_on_reply(cumod_xc *xc, const cumod_chan_hdr *hdr, const void *payload,
            size_t len)
{
    xc_pending *p = cumod__idmap_remove(&xc->pending, hdr->seq);
    if (p == NULL) {
        CUMOD_LOGW("CUMOD-EXEC-CHAN", "reply %llu matches no request",
                   (unsigned long long)hdr->seq);
        return;
    }
    if (p->cb != NULL)
        p->cb(p->arg, hdr, payload, len);
    free(p);
}

static void
xc_on_packet(cumod_xc *xc, size_t n, int fd)
{
    cumod_chan_hdr hdr;
    cumod_chan_payload pl;
    int rv;

    memcpy(&hdr, xc->buf, sizeof(hdr));
    if ((rv = cumod__chan_payload(xc->buf, n, fd, &pl)) != 0) {
        CUMOD_LOGE("CUMOD-EXEC-CHAN", "unreadable payload (op %u): %s", hdr.op,
                   strerror(-rv));
        return;
    }
    switch (hdr.op) {
    case CUMOD_CHAN_READY:
        if (pl.len >= sizeof(cumod_chan_device)) {
            cumod_chan_device dev;
            memcpy(&dev, pl.data, sizeof(dev));
            cumod__chan_payload_fini(&pl);
            xc_on_ready(xc, &dev);
            return;
        }
        break;
    case CUMOD_CHAN_FAULT:
        if (pl.len >= sizeof(cumod_chan_error)) {
            cumod_chan_error e;
            memcpy(&e, pl.data, sizeof(e));
            e.message[sizeof(e.message) - 1] = '\0';
            cumod__chan_payload_fini(&pl);
            if (!xc->reported && xc->hooks.fault != NULL)
                xc->hooks.fault(xc->hooks.arg, e.message);
            xc->reported = 1;
            if (xc->state == XC_READY && !xc->dying && !xc->closing) {
                xc->dying = 1;
                xc->dying_ms = uv_now(xc->loop);
                cumod__xc_fail_pending(xc, CUMOD_ECTXLOST);
                if (!xc->closing)
                    xc->hooks.lost(xc->hooks.arg, 0);
            }
            return;
        }
        break;
    case CUMOD_CHAN_FAILED:
        if (pl.len >= sizeof(cumod_chan_error)) {
            cumod_chan_error e;
            memcpy(&e, pl.data, sizeof(e));
            e.message[sizeof(e.message) - 1] = '\0';
            xc->error_code = e.code;
            snprintf(xc->error, sizeof(xc->error), "%s", e.message);
            cumod__chan_payload_fini(&pl);
            return; /* the exit callback decides what follows */
        }
        break;
    case CUMOD_CHAN_DONE_MANY: {
        /* Copied out: the answers may send, and a send may read. */
        size_t k = pl.len / sizeof(cumod_chan_done_one);
        cumod_chan_done_one *seqs = k ? malloc(k * sizeof(*seqs)) : NULL;
        if (k && seqs == NULL) {
            CUMOD_LOGE("CUMOD-NOMEM", "%zu completions left unanswered", k);
            cumod__chan_payload_fini(&pl);
            return;
        }
        if (k)
            memcpy(seqs, pl.data, k * sizeof(*seqs));
        cumod__chan_payload_fini(&pl);
        /* An answer may end the drain at SIGTERM and close this client,
         * which answered the rest already (ESHUTDOWN). */
        for (size_t i = 0; i < k && !xc->closing; i++) {
            cumod_chan_hdr h = {.op = CUMOD_CHAN_DONE, .seq = seqs[i].seq};
            cumod_chan_done dn = {.failed_index = -1, .gpu_ns = seqs[i].gpu_ns};
            h.len = sizeof(dn);
            xc_on_reply(xc, &h, &dn, sizeof(dn));
        }
        free(seqs);
        return;
    }
    case CUMOD_CHAN_RING_FWD:
    case CUMOD_CHAN_RING_BAD:
    case CUMOD_CHAN_DIRECT_STATS:
        /* The direct launches' (front/units/direct.c), unasked. */
        if (xc->hooks.direct != NULL && !xc->closing)
            xc->hooks.direct(xc->hooks.arg, hdr.op, pl.data, pl.len);
        cumod__chan_payload_fini(&pl);
        return;
    default:
        xc_on_reply(xc, &hdr, pl.data, pl.len);
        cumod__chan_payload_fini(&pl);
        return;
    }
    cumod__chan_payload_fini(&pl);
    CUMOD_LOGE("CUMOD-EXEC-CHAN", "malformed packet (op %u, %zu bytes)", hdr.op,
               n);
}

static void
xc_on_chan(uv_poll_t *h, int status, int events)
{
    cumod_xc *xc = h->data;

    if (status < 0) {
        /* libuv reports POLLERR as UV_EBADF: the executor's end went away
         * (it died or is exiting); its exit callback says what happened. */
        CUMOD_LOGD("CUMOD-EXEC-CHAN", "channel closed: %s",
                   uv_strerror(status));
        cumod__xc_chan_drain(xc); /* its last replies first */
        cumod__xc_chan_close(xc);
        return;
    }
    if ((events & UV_WRITABLE) && !cumod__list_empty(&xc->outq))
        xc_outq_flush(xc);
    /* The completion ring first: what the executor put there came before
     * what it sent on the socket after. */
    (void)xc_back_drain(xc);
    /* Drain what is there; the socket is non-blocking. */
    while (xc->chan_fd >= 0 && (events & (UV_READABLE | UV_DISCONNECT))) {
        int fd;
        long n = cumod__chan_recv(xc->chan_fd, xc->buf, CUMOD_CHAN_MAX, &fd);
        if (n == -EAGAIN)
            return;
        if (n <= 0) {
            if (fd >= 0)
                close(fd);
            /* The executor closed its end (it is exiting) or the channel
             * broke; the process exit callback does the rest. */
            if (n < 0)
                CUMOD_LOGE("CUMOD-EXEC-CHAN", "channel receive failed: %s",
                           strerror((int)-n));
            cumod__xc_chan_close(xc);
            return;
        }
        xc_on_packet(xc, (size_t)n, fd);
    }
}

/* Reads what the executor sent before it went: its last replies (the
 * fault it reported among them) must be heard before the calls it leaves
 * are failed. */
void
cumod__xc_chan_drain(cumod_xc *xc)
{
    (void)xc_back_drain(xc);
    while (xc->chan_fd >= 0) {
        int fd;
        long n = cumod__chan_recv(xc->chan_fd, xc->buf, CUMOD_CHAN_MAX, &fd);
        if (n <= 0) {
            if (fd >= 0)
                close(fd);
            return;
        }
        xc_on_packet(xc, (size_t)n, fd);
    }
}

void
cumod__xc_chan_init(cumod_xc *xc, cumod_rings *rs)
{
    xc->rs = rs;
    cumod__list_node_init(&xc->poller.link);
    xc->poller.poll = xc_back_poll;
    xc->poller.sleep = xc_back_sleep;
    xc->poller.arg = xc;
    xc->chan_fd = -1;
    cumod__idmap_init(&xc->pending);
    cumod__list_init(&xc->outq);
}

void
cumod__xc_chan_rings(cumod_xc *xc)
{
    int rv;

    if (xc->ring_on) {
        cumod__chanring_close(&xc->ring);
        cumod__chanring_close(&xc->back);
        xc->ring_on = 0;
    }
    if ((rv = cumod__chanring_create(&xc->ring)) == 0 &&
        (rv = cumod__chanring_create(&xc->back)) != 0)
        cumod__chanring_close(&xc->ring);
    if (rv == 0) {
        xc->ring_on = 1;
        /* Asleep until the loop spins (xc_back_sleep). */
        atomic_store(&xc->back.h->sleeping, 1);
    } else
        CUMOD_LOGW("CUMOD-EXEC-CHAN",
                   "no ring for the executor's channel (%s): commands go "
                   "over its socket",
                   strerror(-rv));
}

void
cumod__xc_chan_open(cumod_xc *xc, int chan_fd)
{
    xc->chan_fd = chan_fd;
    uv_poll_init(xc->loop, &xc->chan_poll, xc->chan_fd); /* O_NONBLOCK */
    xc->chan_poll.data = xc;
    xc->handles++;
    uv_poll_start(&xc->chan_poll, UV_READABLE | UV_DISCONNECT, xc_on_chan);
    xc->chan_polling = 1;
    if (xc->ring_on) {
        uv_poll_init(xc->loop, &xc->back_poll, xc->back.bell_fd);
        xc->back_poll.data = xc;
        xc->handles++;
        uv_poll_start(&xc->back_poll, UV_READABLE, xc_on_back_bell);
        xc->back_polling = 1;
        if (xc->rs != NULL)
            cumod__rings_poller_add(xc->rs, &xc->poller);
    }
}

/* A call (reply 1: one is awaited, cb told) or a post (no reply). */
static cumod_err
xc_call(cumod_xc *xc, uint32_t op, const void *payload, size_t len, int fd,
        cumod_chan_reply_cb cb, void *arg, int reply)
{
    cumod_chan_hdr h = {.op = op, .len = len};
    xc_pending *p;
    int rv;

    if (xc == NULL || !cumod__xc_ready(xc))
        return CUMOD_ECTXLOST;
    h.seq = ++xc->next_seq;
    if (xc->outq_bytes + len > XC_OUTQ_MAX)
        return CUMOD_EBUSY;
    if (reply) {
        if ((p = malloc(sizeof(*p))) == NULL)
            return CUMOD_ENOMEM;
        p->seq = h.seq;
        p->cb = cb;
        p->arg = arg;
        if (cumod__idmap_set(&xc->pending, h.seq, p) != CUMOD_OK) {
            free(p);
            return CUMOD_ENOMEM;
        }
    }
    /* The channel is non-blocking, so the loop never waits on the
     * executor: what its socket buffer cannot take now waits in order in
     * the out queue, flushed when the socket is writable again. */
    if (cumod__list_empty(&xc->outq) && !xc->gated) {
        rv = -EAGAIN;
        /* The ring first (no syscall); the socket when it does not fit. */
        if (xc->ring_on && fd < 0 &&
            cumod__chanring_put(&xc->ring, &h, payload, len) == 0)
            rv = 0;
        if (rv != 0 && (rv = xc_send(xc, &h, payload, len, fd)) == 0 &&
            xc->ring_on)
            atomic_fetch_add_explicit(&xc->ring.h->sock_sent, 1,
                                      memory_order_release);
    } else {
        rv = -EAGAIN;
    }
    if (rv == -EAGAIN) {
        xc_out *o = malloc(sizeof(*o) + len);
        if (o == NULL ||
            (fd >= 0 && (o->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0)) {
            free(o);
            if (reply)
                free(cumod__idmap_remove(&xc->pending, h.seq));
            return CUMOD_ENOMEM;
        }
        if (fd < 0)
            o->fd = -1;
        cumod__list_node_init(&o->link);
        o->hdr = h;
        o->len = len;
        if (len)
            memcpy(o->payload, payload, len);
        if (cumod__list_empty(&xc->outq) && !xc->gated)
            CUMOD_LOGD("CUMOD-EXEC-CHAN",
                       "the channel is full: queueing commands in order");
        cumod__list_append(&xc->outq, &o->link);
        xc->outq_bytes += len;
        xc_outq_flush(xc); /* arms UV_WRITABLE */
    } else if (rv == -EPIPE || rv == -ECONNRESET) {
        /* The executor is going away (it closed its end) and its exit has
         * not been heard yet: the call stays pending and is failed with
         * the others at the exit, once its last words (a fault) are read,
         * as the out queue's are. */
        CUMOD_LOGD("CUMOD-EXEC-CHAN",
                   "the executor is exiting: call %llu "
                   "fails with the others",
                   (unsigned long long)h.seq);
    } else if (rv != 0) {
        if (reply)
            free(cumod__idmap_remove(&xc->pending, h.seq));
        CUMOD_LOGE("CUMOD-EXEC-CHAN", "cannot send to the executor: %s",
                   strerror(-rv));
        return CUMOD_ECTXLOST;
    }
    return CUMOD_OK;
}

cumod_err
cumod__xc_call(cumod_xc *xc, uint32_t op, const void *payload, size_t len,
               int fd, cumod_chan_reply_cb cb, void *arg)
{
    return xc_call(xc, op, payload, len, fd, cb, arg, 1);
}

cumod_err
cumod__xc_post(cumod_xc *xc, uint32_t op, const void *payload, size_t len,
               int fd)
{
    return xc_call(xc, op, payload, len, fd, NULL, NULL, 0);
}

uint64_t
cumod__xc_next_seq(const cumod_xc *xc)
{
    return xc->next_seq + 1;
}

void
cumod__xc_gate_at(cumod_xc *xc, uint64_t seq)
{
    if (!cumod__xc_ready(xc))
        return;
    xc->gated = 1;
    xc->gate_pass = 0;
    xc->gate_seq = seq;
    xc_outq_flush(xc); /* what waits before seq goes */
}

void
cumod__xc_gate_pass(cumod_xc *xc)
{
    if (!xc->gated)
        return;
    xc->gate_pass = 1;
    xc_outq_flush(xc);
}

void
cumod__xc_gate_open(cumod_xc *xc)
{
    if (!xc->gated)
        return;
    xc->gated = xc->gate_pass = 0;
    xc_outq_flush(xc);
}

void
cumod__xc_refusal(const cumod_xc *xc, cumod_err rv, cumod_status *st)
{
    if (rv == CUMOD_EBUSY) {
        cumod__status_set(st, rv,
                          "the CUDA executor is far behind: retry "
                          "later");
    } else if (rv != CUMOD_ECTXLOST) {
        cumod__status_set(st, rv, "cannot reach the CUDA executor: %s",
                          cumod_strerror(rv));
    } else if (xc->error[0] != '\0' && !cumod__xc_ready(xc) && !xc->closing) {
        /* Its last start failed, saying why (a pool's executor outside
         * MPS, a device gone): that is the news, not the fault before. */
        cumod__status_set(st, rv,
                          "the CUDA executor cannot start again: %.700s "
                          "(it is tried again)",
                          xc->error);
    } else if (xc->last_fault[0] != '\0' && !cumod__xc_ready(xc) &&
               !xc->closing &&
               xc->last_fault_unix_ms + 30000 >= cumod__wall_ms()) {
        /* Down since that fault, most likely: say so. */
        cumod__status_set(st, rv,
                          "the CUDA executor is restarting after %.600s: "
                          "retry shortly",
                          xc->last_fault);
    } else {
        cumod__status_set(st, rv, "the CUDA executor is %s: retry shortly",
                          xc->closing ? "stopping" : "restarting");
    }
}
