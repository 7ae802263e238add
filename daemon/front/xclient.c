/*
 * The executor client (xclient.h): supervision of the executor process and
 * the calls the front makes to it. The very first start failing (no driver,
 * no device) is final: retrying cannot help, and the daemon stops with the
 * executor's message. An executor that dies after having served is
 * restarted with backoff: 100 ms, doubling to 5 s.
 */
#include "xclient.h"

#include "chanring.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include "cumod/errors.h"
#include "idmap.h"
#include "list.h"
#include "log.h"
#include "ring.h"

/* More than this queued for the executor means it is stuck or far behind:
 * new work is refused (CUMOD_EBUSY) rather than piled up. */
#define XC_OUTQ_MAX ((size_t)256 << 20)

/* The heartbeat: a MEMINFO this often; unanswered this long, "stuck". */
#define XC_BEAT_MS 1000
#define XC_STUCK_SHOW_MS 2000
/* After the channel closes at shutdown, how long the executor may take to
 * exit before it is killed. */
#define XC_EXIT_GRACE_MS 2000
/* An executor that served this long before dying starts the backoff
 * again: its death was not a crash loop. */
#define XC_STABLE_MS 10000

typedef enum xc_state {
    XC_DOWN = 0, /* not running; a restart may be scheduled */
    XC_STARTING, /* spawned, waiting for READY or FAILED */
    XC_READY,    /* context up, serving commands */
} xc_state;

/* A call waiting for its reply. */
typedef struct xc_pending {
    uint64_t seq;
    cumod_chan_reply_cb cb;
    void *arg;
} xc_pending;

/* A command waiting for room in the channel. */
typedef struct xc_out {
    cumod_list_node link;
    cumod_chan_hdr hdr;
    int fd; /* a dup of the descriptor to pass, or -1 */
    size_t len;
    char payload[];
} xc_out;

struct cumod_xc {
    uv_loop_t *loop;
    const cumod_config *cfg;
    cumod_xc_hooks hooks;
    int device;     /* the CUDA device it runs on */
    char label[96]; /* for the log: "domain uid-1000", "the loader" */
    char exe[4096];
    uv_process_t proc;
    int proc_alive; /* proc is an open handle whose exit has not come */
    uv_poll_t chan_poll;
    int chan_polling;
    int chan_fd; /* -1 when closed */
    uv_timer_t restart_timer;
    uv_timer_t beat_timer; /* the heartbeat; also the kill at shutdown */
    int handles; /* open handles; the client is freed at 0 once closing */
    xc_state state;
    int ever_ready; /* has any executor come up? */
    int closing;
    /* For status. */
    uint64_t state_unix_ms;
    uint32_t started_again; /* executors started after the first */
    int start_failures;     /* consecutive deaths before READY */
    char last_fault[512];
    uint64_t last_fault_unix_ms;
    uint64_t mem_free, mem_total, mem_uv_ms; /* the last MEMINFO, uv_now */
    int ping_out;                            /* a heartbeat is unanswered */
    uint64_t ping_uv_ms;                     /* since when */
    uint64_t ping_unix_ms;
    int killed;   /* we killed it (a hang, stuck) */
    int reported; /* it reported a fault that ends its context */
    /* It reported that fault: it is exiting (exec/reply.c _exits right
     * after), so its calls were answered and the front told at once, not
     * once the driver has torn its context down (80-100 ms on an H100
     * after a fault): a standby takes over that much sooner. */
    int dying;
    uint64_t dying_ms; /* since when (uv time) */
    char error[1024];  /* the executor's FAILED message */
    int error_code;
    cumod_chan_device dev;
    char *buf;           /* CUMOD_CHAN_MAX bytes */
    cumod_idmap pending; /* seq -> xc_pending */
    uint64_t next_seq;
    /* The channel's ring (chanring.h): commands without descriptors go
     * there while nothing waits in the out queue. */
    cumod_chanring ring;
    int ring_on;
    /* The completion ring (the executor's answers without descriptors),
     * read first whenever the loop spins (rs's poller) or its eventfd
     * rings, and before anything read from the socket. */
    cumod_chanring back;
    cumod_rings *rs;
    cumod_rings_poller poller;
    uv_poll_t back_poll;
    int back_polling;
    cumod_list outq; /* xc_out, in order */
    size_t outq_bytes;
    /* The gate (a solo run): while closed, calls from gate_seq on wait in
     * the out queue; gate_seq itself goes once gate_pass is set. */
    int gated, gate_pass;
    uint64_t gate_seq;
    /* Deaths in a row of executors that served less than XC_STABLE_MS
     * (or never came up): the restart backoff. */
    int quick_deaths;
    uint64_t restart_ms; /* the next start's delay */
    uint64_t ready_uv_ms;
};

static void xc_start(cumod_xc *xc);
static void xc_chan_drain(cumod_xc *xc);
static void xc_on_packet(cumod_xc *xc, size_t n, int fd);

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
            cumod__xc_kill(xc, "its completion ring was corrupt");
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
static void xc_on_chan(uv_poll_t *h, int status, int events);

static void
xc_set_state(cumod_xc *xc, xc_state st)
{
    if (xc->state != st)
        xc->state_unix_ms = cumod__wall_ms();
    xc->state = st;
}

static void
xc_maybe_free(cumod_xc *xc)
{
    if (!xc->closing || xc->handles > 0)
        return;
    cumod__idmap_fini(&xc->pending);
    free(xc->buf);
    free(xc);
}

static void
xc_on_handle_close(uv_handle_t *h)
{
    cumod_xc *xc = h->data;
    xc->handles--;
    xc_maybe_free(xc);
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
static void
xc_fail_pending(cumod_xc *xc, int code)
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

static void
xc_chan_close(cumod_xc *xc)
{
    xc_outq_free(xc);
    xc->gated = xc->gate_pass = 0;
    if (xc->chan_polling) {
        uv_poll_stop(&xc->chan_poll);
        uv_close((uv_handle_t *)&xc->chan_poll, xc_on_handle_close);
        xc->chan_polling = 0;
    }
    if (xc->chan_fd >= 0) {
        close(xc->chan_fd);
        xc->chan_fd = -1;
    }
    if (xc->back_polling) {
        uv_poll_stop(&xc->back_poll);
        uv_close((uv_handle_t *)&xc->back_poll, xc_on_handle_close);
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
    return xc->proc_alive ? xc->proc.pid : 0;
}

static void
xc_on_ready(cumod_xc *xc, const cumod_chan_device *dev)
{
    int first = !xc->ever_ready;

    xc->dev = *dev;
    xc->dev.name[sizeof(xc->dev.name) - 1] = '\0';
    xc_set_state(xc, XC_READY);
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
                   xc->proc.pid);
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
                xc_fail_pending(xc, CUMOD_ECTXLOST);
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
        xc_chan_drain(xc); /* its last replies first */
        xc_chan_close(xc);
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
            xc_chan_close(xc);
            return;
        }
        xc_on_packet(xc, (size_t)n, fd);
    }
}

/* How long to wait before the next start: at once after the first death
 * of an executor that had served (a fault, a hang: the clients are
 * waiting), then 100 ms doubling to 5 s while executors keep dying within
 * XC_STABLE_MS of coming up, so that a broken driver or a module that
 * kills every executor does not make the daemon spin. */
static uint64_t
xc_backoff_ms(const cumod_xc *xc, int explained)
{
    int q = xc->quick_deaths;
    if (q <= 1 || explained)
        return 0;
    return q - 2 >= 6 ? 5000 : 100u << (q - 2);
}

/* Reads what the executor sent before it went: its last replies (the
 * fault it reported among them) must be heard before the calls it leaves
 * are failed. */
static void
xc_chan_drain(cumod_xc *xc)
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

static void
xc_on_restart_timer(uv_timer_t *h)
{
    xc_start(h->data);
}

static void
xc_on_proc_close(uv_handle_t *h)
{
    cumod_xc *xc = h->data;
    xc->proc_alive = 0;
    xc->handles--;
    if (xc->closing && uv_is_active((uv_handle_t *)&xc->beat_timer)) {
        uv_timer_stop(&xc->beat_timer);
        uv_close((uv_handle_t *)&xc->beat_timer, xc_on_handle_close);
    }
    if (!xc->closing && xc->state == XC_DOWN && xc->ever_ready) {
        uv_timer_start(&xc->restart_timer, xc_on_restart_timer, xc->restart_ms,
                       0);
    }
    xc_maybe_free(xc);
}

static void
xc_on_exit(uv_process_t *p, int64_t status, int sig)
{
    cumod_xc *xc = p->data;
    xc_state was = xc->state;
    uint64_t served = was == XC_READY ? uv_now(xc->loop) - xc->ready_uv_ms : 0;

    xc_set_state(xc, XC_DOWN);
    xc->ping_out = 0;
    if (!xc->closing)
        xc_chan_drain(xc);
    xc_chan_close(xc);
    uv_close((uv_handle_t *)p, xc_on_proc_close);
    if (xc->closing)
        return;
    if (!xc->ever_ready) {
        /* The first start failed: no point retrying a missing driver. */
        char msg[1200];
        if (xc->error[0] != '\0')
            snprintf(msg, sizeof(msg), "%s", xc->error);
        else
            snprintf(msg, sizeof(msg),
                     "the executor exited (status %lld, signal %d) before the "
                     "CUDA context came up",
                     (long long)status, sig);
        xc->hooks.failed(xc->hooks.arg, msg, EX_UNAVAILABLE);
        return;
    }
    /* A death with a known cause (a fault a kernel made, a kill for a
     * hang) after serving restarts at once: the clients wait, and the
     * cause is dealt with (quarantine). Others count toward the backoff. */
    int explained = was == XC_READY && (xc->reported || xc->killed);
    if (served >= XC_STABLE_MS)
        xc->quick_deaths = 0;
    if (!explained)
        xc->quick_deaths++;
    xc->restart_ms = xc_backoff_ms(xc, explained);
    CUMOD_LOGE("CUMOD-EXEC-LOST",
               "executor exited (status %lld, signal %d) %s; restarting it "
               "in %llu ms",
               (long long)status, sig,
               was == XC_READY ? "while serving" : "while starting",
               (unsigned long long)xc->restart_ms);
    if (xc->error[0] != '\0')
        CUMOD_LOGE("CUMOD-EXEC-LOST", "its last word: %s", xc->error);
    if (was != XC_READY) {
        /* Dead again before serving: a crash loop (a broken driver, a
         * module that kills it while being loaded). The backoff grows. */
        xc->start_failures++;
        CUMOD_LOGE("CUMOD-EXEC-CRASHLOOP",
                   "the executor died %d times in a row before serving; next "
                   "start in %llu ms",
                   xc->start_failures, (unsigned long long)xc->restart_ms);
    } else if (!xc->killed) {
        char what[600];
        snprintf(what, sizeof(what),
                 "the executor exited (status %lld, signal %d)%s%.400s",
                 (long long)status, sig, xc->error[0] ? ": " : "", xc->error);
        if (xc->last_fault_unix_ms + 2000 < cumod__wall_ms())
            cumod__xc_note_fault(xc, what);
    }
    xc_fail_pending(xc, CUMOD_ECTXLOST);
    /* An answer above may have ended the front's drain at SIGTERM, and the
     * front closed this client and stopped: nothing restarts, and the
     * front hears no more. */
    if (xc->closing)
        return;
    if (xc->dying) { /* told when it reported its fault */
        xc->dying = 0;
        return;
    }
    xc->hooks.lost(xc->hooks.arg, xc->killed);
}

/* Starts an executor process; failures are logged and end in the failed
 * hook or a later retry. */
static void
xc_start(cumod_xc *xc)
{
    uv_process_options_t o = {0};
    uv_stdio_container_t stdio[8];
    char dev[16], fdnum[8], subm[16];
    char *args[18];
    int n = 0, fds[2], rv;

    if (xc->closing)
        return;
    if ((rv = cumod__chan_pair(fds)) != 0) {
        char msg[256];
        snprintf(msg, sizeof(msg), "socketpair: %s", strerror(-rv));
        xc->hooks.failed(xc->hooks.arg, msg, EX_OSERR);
        return;
    }
    /* The ring beside the socket: without one (no memfd), the socket
     * carries everything, as it always can. */
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
    snprintf(dev, sizeof(dev), "%d", xc->device);
    snprintf(subm, sizeof(subm), "%u", xc->cfg->submit_threads);
    snprintf(fdnum, sizeof(fdnum), "3");
    args[n++] = xc->exe;
    args[n++] = "--executor";
    args[n++] = fdnum;
    if (xc->ring_on) {
        args[n++] = "--executor-ring";
        args[n++] = "4"; /* its eventfd 5; the completion ring's 6, 7 */
    }
    args[n++] = "--device";
    args[n++] = dev;
    args[n++] = "--submit-threads";
    args[n++] = subm;
    args[n++] = "--log-level";
    args[n++] = (char *)cumod__log_level_name(xc->cfg->log_level);
    if (xc->cfg->cuda_library != NULL) {
        args[n++] = "--cuda-library";
        args[n++] = (char *)xc->cfg->cuda_library;
    }
    if (xc->cfg->cublas_library != NULL) {
        args[n++] = "--cublas-library";
        args[n++] = (char *)xc->cfg->cublas_library;
    }
    args[n] = NULL;

    stdio[0].flags = UV_IGNORE;
    stdio[1].flags = UV_INHERIT_FD;
    stdio[1].data.fd = 1;
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = 2;
    stdio[3].flags = UV_INHERIT_FD;
    stdio[3].data.fd = fds[1];
    stdio[4].flags = UV_INHERIT_FD;
    stdio[4].data.fd = xc->ring.mem_fd;
    stdio[5].flags = UV_INHERIT_FD;
    stdio[5].data.fd = xc->ring.bell_fd;
    stdio[6].flags = UV_INHERIT_FD;
    stdio[6].data.fd = xc->back.mem_fd;
    stdio[7].flags = UV_INHERIT_FD;
    stdio[7].data.fd = xc->back.bell_fd;
    o.file = xc->exe;
    o.args = args;
    o.stdio = stdio;
    o.stdio_count = xc->ring_on ? 8 : 4;
    o.exit_cb = xc_on_exit;

    xc->error[0] = '\0';
    xc->error_code = 0;
    xc->proc.data = xc;
    if ((rv = uv_spawn(xc->loop, &xc->proc, &o)) != 0) {
        char msg[4200];
        close(fds[0]);
        close(fds[1]);
        snprintf(msg, sizeof(msg), "cannot start the executor (%s): %s",
                 xc->exe, uv_strerror(rv));
        /* uv_spawn failures still need the handle closed. */
        xc->handles++;
        uv_close((uv_handle_t *)&xc->proc, xc_on_handle_close);
        xc->hooks.failed(xc->hooks.arg, msg, EX_OSERR);
        return;
    }
    close(fds[1]);
    xc->proc_alive = 1;
    xc->handles++;
    if (xc->ever_ready)
        xc->started_again++;
    xc_set_state(xc, XC_STARTING);
    xc->chan_fd = fds[0];
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
    CUMOD_LOGI("CUMOD-EXEC-SPAWN", "executor started, pid %d, device %d%s%s",
               xc->proc.pid, xc->device, xc->label[0] ? ", " : "", xc->label);
}

void
cumod__xc_meminfo(cumod_xc *xc, uint64_t free_b, uint64_t total_b)
{
    xc->mem_free = free_b;
    xc->mem_total = total_b;
    xc->mem_uv_ms = uv_now(xc->loop);
}

void
cumod__xc_note_fault(cumod_xc *xc, const char *what)
{
    snprintf(xc->last_fault, sizeof(xc->last_fault), "%s", what);
    xc->last_fault_unix_ms = cumod__wall_ms();
}

void
cumod__xc_kill(cumod_xc *xc, const char *what)
{
    if (!xc->proc_alive || xc->killed || xc->closing)
        return;
    cumod__xc_note_fault(xc, what);
    xc->killed = 1;
    CUMOD_LOGE("CUMOD-EXEC-KILL", "killing executor pid %d: %s", xc->proc.pid,
               what);
    uv_process_kill(&xc->proc, SIGKILL);
}

void
cumod__xc_status(const cumod_xc *xc, cumod_xc_status *out)
{
    uint64_t now = uv_now(xc->loop);
    out->since_unix_ms = xc->state_unix_ms;
    if (xc->closing) {
        out->state = "stopping";
    } else if (xc->state == XC_READY && xc->dying) {
        out->state = "restarting"; /* it reported its fault and exits */
    } else if (xc->state == XC_READY) {
        out->state = "serving";
        if (xc->ping_out && now - xc->ping_uv_ms >= XC_STUCK_SHOW_MS) {
            out->state = "stuck";
            out->since_unix_ms = xc->ping_unix_ms;
        }
    } else if (!xc->ever_ready) {
        out->state = "starting";
    } else {
        out->state = xc->start_failures >= 2 || xc->quick_deaths >= 3
                         ? "crash-looping"
                         : "restarting";
    }
    out->restarts = xc->started_again;
    out->last_fault = xc->last_fault;
    out->last_fault_unix_ms = xc->last_fault_unix_ms;
    out->free_memory = xc->mem_free;
    out->total_memory = xc->mem_total;
    out->memory_age_ms = now - xc->mem_uv_ms;
}

static void
xc_on_pong(void *arg, const cumod_chan_hdr *hdr, const void *payload,
           size_t len)
{
    cumod_xc *xc = arg;
    cumod_chan_meminfo mi;
    xc->ping_out = 0;
    if (hdr->status == CUMOD_OK && payload != NULL && len >= sizeof(mi)) {
        memcpy(&mi, payload, sizeof(mi));
        xc->mem_free = mi.free_memory;
        xc->mem_total = mi.total_memory;
        xc->mem_uv_ms = uv_now(xc->loop);
    }
}

static void
xc_on_beat(uv_timer_t *h)
{
    cumod_xc *xc = h->data;
    uint64_t now = uv_now(xc->loop);

    /* One that reported its fault but does not exit is made to. */
    if (xc->dying && xc->proc_alive && !xc->closing &&
        now - xc->dying_ms >= xc->cfg->stuck_ms) {
        CUMOD_LOGE("CUMOD-EXEC-KILL",
                   "executor pid %d reported its fault %llu ms ago and has "
                   "not exited: killing it",
                   xc->proc.pid, (unsigned long long)(now - xc->dying_ms));
        uv_process_kill(&xc->proc, SIGKILL);
        xc->dying_ms = now;
        return;
    }
    if (!cumod__xc_ready(xc))
        return;
    if (!xc->ping_out) {
        if (cumod__xc_call(xc, CUMOD_CHAN_MEMINFO, NULL, 0, -1, xc_on_pong,
                           xc) == CUMOD_OK) {
            xc->ping_out = 1;
            xc->ping_uv_ms = now;
            xc->ping_unix_ms = cumod__wall_ms();
        }
        return;
    }
    if (now - xc->ping_uv_ms >= xc->cfg->stuck_ms) {
        char what[200];
        snprintf(what, sizeof(what),
                 "the executor stopped answering: no reply for %llu ms "
                 "(--stuck-timeout %u)",
                 (unsigned long long)(now - xc->ping_uv_ms), xc->cfg->stuck_ms);
        cumod__xc_kill(xc, what);
    }
}

/* At shutdown: the executor had its chance to exit after EOF. */
static void
xc_on_grace(uv_timer_t *h)
{
    cumod_xc *xc = h->data;
    if (xc->proc_alive) {
        CUMOD_LOGW("CUMOD-EXEC-KILL",
                   "executor pid %d did not exit %d ms after the channel "
                   "closed: killing it",
                   xc->proc.pid, XC_EXIT_GRACE_MS);
        uv_process_kill(&xc->proc, SIGKILL);
    }
    uv_close((uv_handle_t *)h, xc_on_handle_close);
}

cumod_err
cumod__xc_open(uv_loop_t *loop, cumod_rings *rs, const cumod_config *cfg,
               const char *exe, int device, const char *label,
               const cumod_xc_hooks *hooks, cumod_xc **out, cumod_status *st)
{
    cumod_xc *xc = calloc(1, sizeof(*xc));
    if (xc == NULL || (xc->buf = malloc(CUMOD_CHAN_MAX)) == NULL) {
        free(xc);
        return cumod__status_set(st, CUMOD_ENOMEM, "out of memory");
    }
    xc->loop = loop;
    xc->rs = rs;
    cumod__list_node_init(&xc->poller.link);
    xc->poller.poll = xc_back_poll;
    xc->poller.sleep = xc_back_sleep;
    xc->poller.arg = xc;
    xc->cfg = cfg;
    xc->hooks = *hooks;
    xc->device = device;
    snprintf(xc->label, sizeof(xc->label), "%s", label ? label : "");
    xc->chan_fd = -1;
    snprintf(xc->exe, sizeof(xc->exe), "%s", exe);
    cumod__idmap_init(&xc->pending);
    cumod__list_init(&xc->outq);
    uv_timer_init(loop, &xc->restart_timer);
    xc->restart_timer.data = xc;
    uv_timer_init(loop, &xc->beat_timer);
    xc->beat_timer.data = xc;
    uv_timer_start(&xc->beat_timer, xc_on_beat, XC_BEAT_MS, XC_BEAT_MS);
    xc->handles = 2;
    xc->state_unix_ms = cumod__wall_ms();
    *out = xc;
    xc_start(xc);
    return CUMOD_OK;
}

void
cumod__xc_set_hooks(cumod_xc *xc, const cumod_xc_hooks *hooks,
                    const char *label)
{
    xc->hooks = *hooks;
    snprintf(xc->label, sizeof(xc->label), "%s", label ? label : "");
}

cumod_err
cumod__xc_call(cumod_xc *xc, uint32_t op, const void *payload, size_t len,
               int fd, cumod_chan_reply_cb cb, void *arg)
{
    cumod_chan_hdr h = {.op = op, .len = len};
    xc_pending *p;
    int rv;

    if (xc == NULL || !cumod__xc_ready(xc))
        return CUMOD_ECTXLOST;
    h.seq = ++xc->next_seq;
    if (xc->outq_bytes + len > XC_OUTQ_MAX)
        return CUMOD_EBUSY;
    if ((p = malloc(sizeof(*p))) == NULL)
        return CUMOD_ENOMEM;
    p->seq = h.seq;
    p->cb = cb;
    p->arg = arg;
    if (cumod__idmap_set(&xc->pending, h.seq, p) != CUMOD_OK) {
        free(p);
        return CUMOD_ENOMEM;
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
        free(cumod__idmap_remove(&xc->pending, h.seq));
        CUMOD_LOGE("CUMOD-EXEC-CHAN", "cannot send to the executor: %s",
                   strerror(-rv));
        return CUMOD_ECTXLOST;
    }
    return CUMOD_OK;
}

void
cumod__xc_close(cumod_xc *xc)
{
    if (xc == NULL || xc->closing)
        return;
    xc->closing = 1;
    xc_fail_pending(xc, CUMOD_ESHUTDOWN);
    /* Closing our end makes the executor see EOF, release the context and
     * exit; its exit callback closes the process handle. One that does not
     * exit (a kernel that never ends) is killed after a grace period. */
    xc_chan_close(xc);
    uv_timer_stop(&xc->restart_timer);
    uv_close((uv_handle_t *)&xc->restart_timer, xc_on_handle_close);
    uv_timer_stop(&xc->beat_timer);
    if (xc->proc_alive)
        uv_timer_start(&xc->beat_timer, xc_on_grace, XC_EXIT_GRACE_MS, 0);
    else
        uv_close((uv_handle_t *)&xc->beat_timer, xc_on_handle_close);
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
