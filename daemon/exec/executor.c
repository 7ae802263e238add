/* SPDX-License-Identifier: MIT */
/*
 * The dispatcher of the executor (exec.h draws the star): brings the
 * context up, serves the channel and its ring, and routes every command
 * through one table by its op to its handler (handlers.h), run at once on
 * this, the submission thread, or posted to the lane the table names. It
 * starts the services and handlers, and stops them.
 */
#include "device.h"
#include "executor.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <unistd.h>

#include "common/chanring.h"
#include "common/config.h"
#include "common/channel.h"
#include "cumod/errors.h"
#include "driver.h"
#include "evpool.h"
#include "gemm.h"
#include "handlers.h"
#include "inflight.h"
#include "common/log.h"
#include "direct.h"
#include "modtab.h"
#include "orphan.h"
#include "pinned.h"
#include "reclaim.h"
#include "reply.h"
#include "streams.h"
#include "submit.h"
#include "executor_submit.h"

typedef cumod_exec executor;

/* Streams made at start: as many as sessions' streams usually in use at
 * once (each session's default stream, and those it creates). */
#define EXECUTOR_STREAMS 256
/* Empty looks at the channel (each a sched_yield) before sleeping. */
#define EXECUTOR_LOOKS 2000
/* A pool's executor (exec/executor.h: an MPS client) looks this many: a
 * pool shares the host with many executors and their clients, and its
 * launches come through the rings, not the channel (measured on the
 * H200, bench/notes.md: 16 pool executors' channel loops spinning after
 * each rare command took 6-9 of the 16 cores at 48 clients). */
#define EXECUTOR_POOL_LOOKS 64
/* Submission threads at most (--submit-threads). */

static int
executor_fail(executor *ex, int code, const char *msg)
{
    cumod_chan_hdr h = {.op = CUMOD_CHAN_FAILED, .status = code};
    cumod_chan_error e = {.code = code};

    /* Cut to the packet field on purpose. */
    snprintf(e.message, sizeof(e.message), "%.*s", (int)sizeof(e.message) - 1,
             msg);
    (void)cumod__chan_send(ex->chan, &h, &e, sizeof(e), -1);
    return code;
}

/* Brings up driver, device and context; reports FAILED itself. */
static int
executor_start(executor *ex)
{
    const cumod_driver *d = &ex->drv;
    char msg[1024];
    char what[128];
    int count = 0;
    int rv;
    CUresult r;

    /* A pool's executor: an MPS client of the pipe directory it was
     * given, whatever the environment said (the driver reads it at
     * cuInit). */
    if (ex->cfg->mps_pipe_dir != NULL &&
        setenv("CUDA_MPS_PIPE_DIRECTORY", ex->cfg->mps_pipe_dir, 1) != 0)
        return executor_fail(ex, CUMOD_ENOMEM, "setenv failed");
    rv = cumod__driver_open(&ex->drv,
                            cumod__driver_default_path(ex->cfg->cuda_library),
                            msg, sizeof(msg));
    if (rv != CUMOD_OK)
        return executor_fail(ex, rv, msg);

    r = d->init(0);
    if (r == CUDA_ERROR_NO_DEVICE) {
        snprintf(msg, sizeof(msg),
                 "the NVIDIA driver (%s) found no CUDA device on this "
                 "machine: cumodd needs an NVIDIA GPU",
                 d->path);
        return executor_fail(ex, CUMOD_ENODEVICE, msg);
    }
    if (r != CUDA_SUCCESS) {
        rv = cumod__cu_err(d, r, "cuInit failed", msg, sizeof(msg));
        return executor_fail(ex, rv, msg);
    }
    if ((r = d->device_get_count(&count)) != CUDA_SUCCESS) {
        rv = cumod__cu_err(d, r, "cuDeviceGetCount failed", msg, sizeof(msg));
        return executor_fail(ex, rv, msg);
    }
    if (ex->cfg->device < 0 || ex->cfg->device >= count) {
        snprintf(msg, sizeof(msg),
                 "CUDA device %d does not exist: this machine has %d CUDA "
                 "device%s (ordinals 0 to %d)",
                 ex->cfg->device, count, count == 1 ? "" : "s", count - 1);
        return executor_fail(ex, CUMOD_ENODEVICE, msg);
    }
    if ((r = d->device_get(&ex->dev, ex->cfg->device)) != CUDA_SUCCESS) {
        snprintf(what, sizeof(what), "cuDeviceGet(%d) failed", ex->cfg->device);
        rv = cumod__cu_err(d, r, what, msg, sizeof(msg));
        return executor_fail(ex, rv, msg);
    }
    /* The primary context, retained rather than created, so that libraries
     * built on the runtime API could share it in this process. */
    if ((r = d->primary_ctx_retain(&ex->ctx, ex->dev)) != CUDA_SUCCESS) {
        ex->ctx = NULL;
        snprintf(what, sizeof(what),
                 "cannot retain the primary context of device %d",
                 ex->cfg->device);
        rv = cumod__cu_err(d, r, what, msg, sizeof(msg));
        return executor_fail(ex, rv, msg);
    }
    if ((r = d->ctx_set_current(ex->ctx)) != CUDA_SUCCESS) {
        rv = cumod__cu_err(d, r, "cuCtxSetCurrent failed", msg, sizeof(msg));
        return executor_fail(ex, rv, msg);
    }
    int mps = 0;
    if (ex->cfg->mps_pipe_dir != NULL &&
        (d->device_get_attribute(&mps, CU_DEVICE_ATTRIBUTE_MPS_ENABLED,
                                 ex->dev) != CUDA_SUCCESS ||
         mps != 1)) {
        snprintf(msg, sizeof(msg),
                 "a pool's executor must be an MPS client, and its context "
                 "on device %d is not (CU_DEVICE_ATTRIBUTE_MPS_ENABLED %d): "
                 "no MPS control daemon answers in %.300s",
                 ex->cfg->device, mps, ex->cfg->mps_pipe_dir);
        return executor_fail(ex, CUMOD_ENODEVICE, msg);
    }
    return CUMOD_OK;
}

static int
executor_ready(executor *ex)
{
    const cumod_driver *d = &ex->drv;
    cumod_chan_hdr h = {.op = CUMOD_CHAN_READY};
    cumod_chan_device dev;
    size_t free_b = 0, total_b = 0;

    (void)cumod__exec_describe_device(d, ex->cfg->device, &dev);
    ex->multiprocessors = dev.multiprocessors;
    if (d->mem_get_info(&free_b, &total_b) != CUDA_SUCCESS)
        (void)d->device_total_mem(&total_b, ex->dev);
    dev.total_memory = total_b;
    dev.free_memory = free_b;
    CUMOD_LOGN("CUMOD-EXEC-READY",
               "device %d: %s, sm_%u%u, driver %d.%d, %zu MiB, context up",
               dev.ordinal, dev.name, dev.sm_major, dev.sm_minor,
               dev.driver_version / 1000, (dev.driver_version % 1000) / 10,
               total_b >> 20);
    return cumod__chan_send(ex->chan, &h, &dev, sizeof(dev), -1);
}

/* Where a command runs: at once on the submission thread (what waits
 * for nothing a session started), or on a lane (lane.h). */
enum executor_where {
    EXECUTOR_HERE,
    EXECUTOR_LOAD_LANE,
    EXECUTOR_HOST_LANE,
    EXECUTOR_RECLAIM_LANE,
};

typedef struct executor_route {
    cumod_lane_fn fn; /* NULL: not a command the front sends */
    enum executor_where where;
} executor_route;

/* The dispatch table: every command of the channel, by op, to its handler
 * and where it runs. The one place that knows the handlers. */
static const executor_route executor_routes[] = {
    [CUMOD_CHAN_WORK] = {cumod__exec_on_work, EXECUTOR_HERE},
    [CUMOD_CHAN_MEMINFO] = {cumod__exec_on_meminfo, EXECUTOR_HERE},
    [CUMOD_CHAN_DEVICES] = {cumod__exec_on_devices, EXECUTOR_HERE},
    [CUMOD_CHAN_ALLOC] = {cumod__exec_on_alloc, EXECUTOR_HERE},
    [CUMOD_CHAN_FREE] = {cumod__exec_on_free, EXECUTOR_HERE},
    [CUMOD_CHAN_STREAMS_CLOSE] = {cumod__exec_on_streams_close, EXECUTOR_HERE},
    [CUMOD_CHAN_SEG_UNMAP] = {cumod__exec_on_seg_unmap, EXECUTOR_HERE},
    /* cuMemHostRegister of 256 MiB takes 14-50 ms */
    [CUMOD_CHAN_SEG_MAP] = {cumod__exec_on_seg_map, EXECUTOR_HOST_LANE},
    [CUMOD_CHAN_LOAD] = {cumod__exec_on_load, EXECUTOR_LOAD_LANE},
    /* after the load it follows */
    [CUMOD_CHAN_GLOBALS] = {cumod__exec_on_globals, EXECUTOR_LOAD_LANE},
    /* a large dlopen: never here */
    [CUMOD_CHAN_BLAS] = {cumod__exec_on_blas, EXECUTOR_LOAD_LANE},
    /* cuModuleUnload waits for the device */
    [CUMOD_CHAN_UNLOAD] = {cumod__exec_on_unload, EXECUTOR_RECLAIM_LANE},
    [CUMOD_CHAN_FORGET] = {cumod__exec_on_forget, EXECUTOR_RECLAIM_LANE},
    /* direct launches (direct.h): here, before any quiesce */
    [CUMOD_CHAN_CROWD] = {cumod__exec_on_direct, EXECUTOR_HERE},
    [CUMOD_CHAN_DIRECT_PAGE] = {cumod__exec_on_direct, EXECUTOR_HERE},
    [CUMOD_CHAN_RING_STATE] = {cumod__exec_on_direct, EXECUTOR_HERE},
    [CUMOD_CHAN_RING_ATTACH] = {cumod__exec_on_direct, EXECUTOR_HERE},
    [CUMOD_CHAN_RING_BELL] = {cumod__exec_on_direct, EXECUTOR_HERE},
    [CUMOD_CHAN_RING_DETACH] = {cumod__exec_on_direct, EXECUTOR_HERE},
    [CUMOD_CHAN_RING_RESUME] = {cumod__exec_on_direct, EXECUTOR_HERE},
    [CUMOD_CHAN_SNAP] = {cumod__exec_on_direct, EXECUTOR_HERE},
};

/* Whether op is one of the direct launches' commands: they go to their
 * handler at once, in channel order; what concerns a session is posted
 * to its ring's thread behind its work, so no quiesce. */
static int
executor_direct_op(uint32_t op)
{
    return op == CUMOD_CHAN_CROWD || op == CUMOD_CHAN_DIRECT_PAGE ||
           op == CUMOD_CHAN_RING_STATE || op == CUMOD_CHAN_RING_ATTACH ||
           op == CUMOD_CHAN_RING_BELL || op == CUMOD_CHAN_RING_DETACH ||
           op == CUMOD_CHAN_RING_RESUME || op == CUMOD_CHAN_SNAP;
}

static cumod_lane *
executor_lane(executor *ex, enum executor_where where)
{
    switch (where) {
    case EXECUTOR_LOAD_LANE:
        return ex->load_lane;
    case EXECUTOR_HOST_LANE:
        return ex->host_lane;
    case EXECUTOR_RECLAIM_LANE:
        return ex->reclaim_lane;
    case EXECUTOR_HERE:
        break;
    }
    return NULL;
}

/* Whether a WORK may go to a submission thread: launches, memsets,
 * writes and device copies only. GEMMs (one cuBLAS handle), reads (the
 * pinned pool) and copies through segments (their guards) stay here; a
 * malformed one too, to be answered here. */
static int
executor_submittable(const void *p, size_t len)
{
    cumod_chan_work cw;
    size_t at = sizeof(cw);
    if (len < sizeof(cw))
        return 0;
    memcpy(&cw, p, sizeof(cw));
    for (uint32_t i = 0; i < cw.nitems; i++) {
        cumod_work_item it;
        if (len - at < sizeof(it))
            return 0;
        memcpy(&it, (const char *)p + at, sizeof(it));
        at += sizeof(it);
        size_t pad = ((size_t)it.extra + 7) & ~(size_t)7;
        if (len - at < pad)
            return 0;
        at += pad;
        if (it.op != CUMOD_WORK_LAUNCH && it.op != CUMOD_WORK_MEMSET &&
            it.op != CUMOD_WORK_WRITE && it.op != CUMOD_WORK_DTOD)
            return 0;
    }
    return 1;
}

/* The streams a STREAMS_CLOSE names leave their submission threads
 * (quiet: nothing of theirs is queued). A payload the handler will refuse
 * forgets nothing. */
static void
executor_forget_streams(executor *ex, const void *p, size_t len)
{
    cumod_chan_streams sc;
    if (len < sizeof(sc))
        return;
    memcpy(&sc, p, sizeof(sc));
    if (sc.count > (len - sizeof(sc)) / sizeof(uint64_t))
        return;
    for (uint64_t i = 0; i < sc.count; i++) {
        uint64_t key;
        memcpy(&key, (const char *)p + sizeof(sc) + i * sizeof(key),
               sizeof(key));
        cumod__submit_forget(ex->submit, key);
    }
}

/* Routes one command by the table. fd is the packet's descriptor (an
 * image, a segment) and is the handler's to close. 0 or -errno of the
 * channel. */
static int
executor_dispatch(executor *ex, const cumod_chan_hdr *hdr, const void *p,
                  size_t len, int fd)
{
    const executor_route *rt =
        hdr->op < sizeof(executor_routes) / sizeof(executor_routes[0])
            ? &executor_routes[hdr->op]
            : NULL;
    int err;

    if (executor_direct_op(hdr->op))
        return cumod__exec_on_direct(ex, hdr, p, len, fd, NULL);
    /* Sessions' work to the submission thread of its stream; everything
     * else once what they were given is enqueued (submit.h). */
    if (ex->submit != NULL) {
        if (hdr->op == CUMOD_CHAN_WORK && executor_submittable(p, len)) {
            cumod_chan_work cw;
            memcpy(&cw, p, sizeof(cw));
            unsigned i = cumod__submit_thread_of(ex->submit, cw.stream);
            if (cumod__submit_post(ex->submit, i, hdr, p, len) == CUMOD_OK)
                return 0;
            return cumod__exec_send_done(ex, hdr->seq, CUMOD_ENOMEM, -1,
                                         "out of memory", NULL, 0);
        }
        cumod__submit_quiesce(ex->submit);
        if (hdr->op == CUMOD_CHAN_STREAMS_CLOSE)
            executor_forget_streams(ex, p, len);
    }
    /* Work held back for one event goes first: what follows may wait for
     * it (cumod__exec_wait_quiet) or free what it uses. */
    if (hdr->op != CUMOD_CHAN_WORK && (err = cumod__exec_work_flush(ex)) != 0) {
        if (fd >= 0)
            close(fd);
        return err;
    }
    if (rt == NULL || rt->fn == NULL) {
        if (fd >= 0)
            close(fd);
        CUMOD_LOGE("CUMOD-EXEC-CHAN", "unknown command %u from the front",
                   hdr->op);
        return -EPROTO;
    }
    if (rt->where == EXECUTOR_HERE)
        return rt->fn(ex, hdr, p, len, fd, NULL);
    if (cumod__lane_post(executor_lane(ex, rt->where), rt->fn, hdr, p, len, fd,
                         NULL) != CUMOD_OK)
        return cumod__exec_reply(ex, hdr, CUMOD_ENOMEM, NULL, 0);
    return 0;
}

/* One command (n bytes at buf, with descriptor fd): 0, 1 when the front
 * is gone (stop quietly), or an exit status. */
static int
executor_packet(executor *ex, const char *buf, long n, int fd, int fd2)
{
    cumod_chan_hdr hdr;
    cumod_chan_payload pl;
    int err;

    memcpy(&hdr, buf, sizeof(hdr));
    if (hdr.seq > ex->seq_max)
        ex->seq_max = hdr.seq;
    if (hdr.op == CUMOD_CHAN_LEDGER) { /* held for whoever adopts us */
        if (fd >= 0) {
            if (ex->ledger_fd >= 0)
                close(ex->ledger_fd);
            ex->ledger_fd = fd;
        }
        if (fd2 >= 0)
            close(fd2);
        return 0;
    }
    if (hdr.op == CUMOD_CHAN_STOP) { /* the close that follows is a stop */
        ex->stop_told = 1;
        if (fd >= 0)
            close(fd);
        if (fd2 >= 0)
            close(fd2);
        return 0;
    }
    /* A payload too big for a packet comes in a memfd, which is then the
     * packet's descriptor; otherwise the descriptor is the command's own
     * (an image, a segment). */
    int memfd = (hdr.flags & CUMOD_CHAN_F_MEMFD) ? fd : -1;
    /* A command's own descriptor beside a memfd payload comes second. */
    int cmd_fd = memfd >= 0 ? ((hdr.flags & CUMOD_CHAN_F_FD2) ? fd2 : -1) : fd;
    if (cmd_fd != fd2 && fd2 >= 0)
        close(fd2);
    if ((err = cumod__chan_payload(buf, (size_t)n, memfd, &pl)) != 0) {
        if (fd >= 0 && memfd < 0)
            close(fd);
        if (cmd_fd >= 0 && cmd_fd != fd)
            close(cmd_fd);
        CUMOD_LOGE("CUMOD-EXEC-CHAN", "unreadable command %u: %s", hdr.op,
                   strerror(-err));
        return EX_SOFTWARE;
    }
    err = executor_dispatch(ex, &hdr, pl.data, pl.len, cmd_fd);
    cumod__chan_payload_fini(&pl);
    if (err == -EPIPE || err == -ECONNRESET) {
        /* The front closed its end (a stop, or it died) while this
         * command's answer was on its way: nobody is left to hear it, and
         * that is no error of ours. */
        CUMOD_LOGD("CUMOD-EXEC-CHAN", "the front is gone: %s", strerror(-err));
        return 1;
    }
    if (err != 0) {
        CUMOD_LOGE("CUMOD-EXEC-CHAN", "channel send failed: %s",
                   strerror(-err));
        return EX_SOFTWARE;
    }
    return 0;
}

static uint64_t
executor_seq(const void *pkt)
{
    cumod_chan_hdr h;
    memcpy(&h, pkt, sizeof(h));
    return h.seq;
}

/* The front's heartbeat (a MEMINFO each second, xclient.c) is no sign that
 * more commands follow: it does not start the polling below, which would
 * otherwise cost an idle executor ~0.3% of a core (2000 looks a second). */
static int
executor_quiet(const void *pkt)
{
    cumod_chan_hdr h;
    memcpy(&h, pkt, sizeof(h));
    return h.op == CUMOD_CHAN_MEMINFO;
}

/* executor_serve's state: the ring, and a packet read from the socket
 * and not yet run. */
typedef struct serve_state {
    char *buf;
    cumod_chanring ring;
    int have_ring, idle;
    int looks;           /* EXECUTOR_LOOKS, or a pool's */
    long stash;          /* a socket packet in buf, not yet run */
    uint64_t sock_taken; /* packets read from the socket */
    int stash_fd, stash_fd2, closed;
} serve_state;

/* Maps the channel's ring, when the front gave one. */
static void
serve_ring(executor *ex, serve_state *st)
{
    if (ex->cfg->ring_fd < 0)
        return;
    int err = cumod__chanring_attach(&st->ring, ex->cfg->ring_fd,
                                     ex->cfg->ring_fd + 1);
    if (err != 0)
        CUMOD_LOGW("CUMOD-EXEC-CHAN",
                   "cannot map the channel's ring (%s): commands come "
                   "over the socket only",
                   strerror(-err));
    st->have_ring = err == 0;
}

/* The socket only when the front says a packet went there (or without a
 * ring), every 64th idle look, and after poll() woke (its end is heard
 * there: a closed socket polls readable with no packet counted). Reads
 * one packet into st->buf (stash) without waiting: 0, or an exit status. */
static int
serve_socket(executor *ex, serve_state *st)
{
    if (st->stash != 0 || st->closed ||
        (st->have_ring &&
         st->sock_taken == atomic_load_explicit(&st->ring.h->sock_sent,
                                                memory_order_acquire) &&
         (st->idle <= 0 || (st->idle < st->looks && (st->idle & 63) != 0))))
        return 0;
    int fds[2];
    long n =
        cumod__chan_recv2(ex->chan, st->buf, CUMOD_CHAN_MAX, fds, MSG_DONTWAIT);
    st->stash_fd = fds[0];
    st->stash_fd2 = fds[1];
    if (n > 0) {
        st->stash = n;
        st->sock_taken++;
    } else if (n == 0 || n == -ECONNRESET) {
        /* the front closed the channel (the packets it sent before, a
         * STOP among them, were read first: channel.h) */
        st->closed = 1;
    } else if (n != -EAGAIN) {
        CUMOD_LOGE("CUMOD-EXEC-CHAN", "channel receive failed: %s",
                   strerror((int)-n));
        return EX_SOFTWARE;
    }
    return 0;
}

/* Nothing to run: the work held back for one event is recorded now, then
 * the channel is looked at again for a while and slept on after. -1 to
 * go on, else the exit status. */
static int
serve_idle(executor *ex, serve_state *st)
{
    const uint8_t *rp;
    int r;

    /* Nothing more to read: the work held back for one event is recorded
     * now. */
    if (st->idle == 0 && (r = cumod__exec_work_flush(ex)) != 0)
        return r == -EPIPE || r == -ECONNRESET ? 0 : EX_SOFTWARE;
    /* Nothing: commands come back to back under load, so look again for a
     * while before sleeping, as a wake-up costs microseconds that every
     * launch's round trip pays. A look is a pause, not a system call: a
     * yield every 8th, the socket read every 64th (the counter says when
     * a packet went there; this is for its end). Measured on the H100
     * (issue 21): a yield and a recvmsg at every look made each command
     * wait about a look (1-2 us) to be seen. */
    if (++st->idle < st->looks) {
        if ((st->idle & 7) == 0) {
            sched_yield();
            return -1;
        }
        /* pausing until the ring or the socket's counter has something */
        for (int i = 0; i < 32; i++) {
            if (st->have_ring &&
                (cumod__chanring_ready(&st->ring) ||
                 atomic_load_explicit(&st->ring.h->sock_sent,
                                      memory_order_relaxed) != st->sock_taken))
                break;
            cumod__cpu_relax();
        }
        return -1;
    }
    if (st->have_ring)
        cumod__chanring_sleeping(&st->ring, 1);
    /* Look once more after saying so (the front looks at the flag after it
     * writes), then sleep on both. */
    if (!st->have_ring || cumod__chanring_peek(&st->ring, &rp) == 0) {
        struct pollfd pf[2] = {
            {.fd = ex->chan, .events = POLLIN},
            {.fd = st->have_ring ? st->ring.bell_fd : -1, .events = POLLIN},
        };
        while (poll(pf, 2, -1) < 0 && errno == EINTR)
            ;
    }
    if (st->have_ring)
        cumod__chanring_sleeping(&st->ring, 0);
    st->idle = st->looks; /* polls again after a command, not now */
    return -1;
}

/* The front is gone without a stop (its channel closed): with
 * --orphan-grace, wait for a new front to adopt this executor (orphan.h).
 * Adopted: the channel's descriptor now names the new front's socket
 * (dup2, so every thread's next send goes there), the old front's rings
 * are let go (commands and answers take the socket), READY is said again
 * as after a start, and 1 is returned to serve on. 0: exit. */
static int
executor_orphan(executor *ex, serve_state *st)
{
    if (ex->cfg->orphan_grace_s == 0 || ex->cfg->adopt_dir == NULL)
        return 0;
    int fd =
        cumod__exec_orphan_wait(ex->cfg->adopt_dir, ex->cfg->orphan_grace_s,
                                ex->cfg->device, ex->ledger_fd, ex->seq_max);
    if (fd < 0)
        return 0;
    if (st->have_ring) {
        cumod__chanring_close(&st->ring);
        st->have_ring = 0;
    }
    pthread_mutex_lock(&ex->back_mtx);
    atomic_store_explicit(&ex->back, NULL, memory_order_release);
    pthread_mutex_unlock(&ex->back_mtx);
    if (dup2(fd, ex->chan) < 0) {
        CUMOD_LOGE("CUMOD-EXEC-ORPHAN", "cannot take the new channel: %s",
                   strerror(errno));
        close(fd);
        return 0;
    }
    close(fd);
    /* What was loaded so far is the old front's (CUMOD_CHAN_FORGET), and
     * so are the names its direct launches were published by. */
    pthread_mutex_lock(&ex->mods_mtx);
    ex->adopt_tag = ex->next_tag;
    pthread_mutex_unlock(&ex->mods_mtx);
    cumod__direct_forget_modules(ex);
    st->closed = 0;
    st->idle = 0;
    int rv = executor_ready(ex);
    if (rv != 0) /* its close (after a STOP, perhaps) is read next */
        CUMOD_LOGW("CUMOD-EXEC-ORPHAN",
                   "the adopting front is gone already (%s)", strerror(-rv));
    return 1;
}

/* Serves commands until the front closes the channel. They come over the
 * socket and, without descriptors, through the channel's ring
 * (chanring.h), in one sequence: the ring is looked at first, then the
 * socket, and the lower sequence number runs first. */
static int
executor_serve(executor *ex)
{
    serve_state st = {.buf = malloc(CUMOD_CHAN_MAX),
                      .stash_fd = -1,
                      .stash_fd2 = -1,
                      .looks = ex->cfg->mps_pipe_dir != NULL
                                   ? EXECUTOR_POOL_LOOKS
                                   : EXECUTOR_LOOKS};
    int rc = 0;

    if (st.buf == NULL)
        return EX_OSERR;
    serve_ring(ex, &st);
    for (;;) {
        const uint8_t *rp = NULL;
        long rn = st.have_ring ? cumod__chanring_peek(&st.ring, &rp) : 0;
        if (rn < 0) {
            CUMOD_LOGE("CUMOD-EXEC-CHAN", "the channel's ring is corrupt");
            rc = EX_SOFTWARE;
            break;
        }
        if ((rc = serve_socket(ex, &st)) != 0)
            break;
        int r, quiet;
        if (rn > 0 &&
            (st.stash == 0 || executor_seq(rp) < executor_seq(st.buf))) {
            quiet = executor_quiet(rp);
            r = executor_packet(ex, (const char *)rp, rn, -1, -1);
            cumod__chanring_pop(&st.ring);
        } else if (st.stash > 0) {
            quiet = executor_quiet(st.buf);
            r = executor_packet(ex, st.buf, st.stash, st.stash_fd,
                                st.stash_fd2);
            st.stash = 0;
            st.stash_fd = st.stash_fd2 = -1;
        } else if (st.closed) {
            if (ex->stop_told || !executor_orphan(ex, &st))
                break;
            continue;
        } else {
            if ((rc = serve_idle(ex, &st)) >= 0)
                break;
            rc = 0;
            continue;
        }
        /* A heartbeat neither starts the polling nor cuts it short; any
         * other command starts it again (and a flush once it is read). */
        if (!quiet)
            st.idle = 0;
        if (r == 0 && (r = cumod__exec_work_age(ex)) != 0)
            r = r == -EPIPE || r == -ECONNRESET ? 1 : EX_SOFTWARE;
        if (r == 1) /* the front is gone: its close is read next, after
                       what it sent last (a STOP, perhaps) */
            continue;
        if (r != 0) {
            rc = r;
            break;
        }
    }
    if (st.stash_fd >= 0)
        close(st.stash_fd);
    if (st.have_ring)
        cumod__chanring_close(&st.ring);
    free(st.buf);
    return rc;
}

static cumod_err
executor_lanes_start(executor *ex)
{
    if (cumod__lane_start(ex, "load", &ex->load_lane) != CUMOD_OK ||
        cumod__lane_start(ex, "host", &ex->host_lane) != CUMOD_OK ||
        cumod__lane_start(ex, "reclaim", &ex->reclaim_lane) != CUMOD_OK)
        return CUMOD_ENOMEM;
    return CUMOD_OK;
}

/* The one running finishes; queued commands are dropped, later posts
 * refused (the completion thread may still post unmaps until it stops). */
static void
executor_lanes_stop(executor *ex)
{
    cumod__lane_stop(ex->load_lane);
    cumod__lane_stop(ex->host_lane);
    cumod__lane_stop(ex->reclaim_lane);
}

/* Once no thread posts any more. */
static void
executor_lanes_free(executor *ex)
{
    cumod__lane_free(ex->load_lane);
    cumod__lane_free(ex->host_lane);
    cumod__lane_free(ex->reclaim_lane);
    ex->load_lane = ex->host_lane = ex->reclaim_lane = NULL;
}

int
cumod__executor_main(const cumod_executor_cfg *cfg)
{
    executor ex = {.cfg = cfg, .chan = cfg->chan_fd, .ledger_fd = -1};
    cumod_chanring back;
    void *submit_aux[CUMOD_EXEC_SUBMIT_MAX];
    unsigned nsubmit = 0;
    int rc, have_back = 0;

    pthread_mutex_init(&ex.mods_mtx, NULL);
    pthread_mutex_init(&ex.back_mtx, NULL);
    pthread_mutex_init(&ex.attr_mtx, NULL);
    /* The completion ring: the two descriptors after the command ring's. */
    if (cfg->ring_fd >= 0) {
        int err = cumod__chanring_attach_producer(&back, cfg->ring_fd + 2,
                                                  cfg->ring_fd + 3);
        if (err == 0) {
            ex.back = &back;
            have_back = 1;
        } else
            CUMOD_LOGW("CUMOD-EXEC-CHAN",
                       "cannot map the completion ring (%s): answers go "
                       "over the socket",
                       strerror(-err));
    }
    if (executor_start(&ex) != CUMOD_OK) {
        rc = EX_UNAVAILABLE;
        goto done;
    }
    /* Named after the driver made its threads (which took "cumodd"), so
     * that per-thread figures tell this loop from libcuda's threads. */
    pthread_setname_np(pthread_self(), "cumodd-exec");
    /* Named after the driver made its threads (which took "cumodd"), so
     * that per-thread figures tell this loop from libcuda's threads. */
    pthread_setname_np(pthread_self(), "cumodd-exec");
    /* Streams, events and pinned buffers are made now, while the device is
     * idle: made later they can hold every launch (streams.c, pinned.c). */
    if (cumod__exec_evpool_start(&ex) != CUMOD_OK ||
        cumod__exec_streams_start(&ex, EXECUTOR_STREAMS) != CUMOD_OK ||
        cumod__exec_reclaim_start(&ex) != CUMOD_OK ||
        cumod__exec_pinned_start(&ex) != CUMOD_OK ||
        cumod__exec_inflight_start(&ex) != CUMOD_OK ||
        cumod__exec_work_start(&ex) != CUMOD_OK ||
        cumod__exec_mem_start(&ex) != CUMOD_OK ||
        cumod__executor_submit_start(&ex, submit_aux, &nsubmit) != CUMOD_OK ||
        executor_lanes_start(&ex) != CUMOD_OK) {
        rc = EX_SOFTWARE;
        goto done;
    }
    /* A front that stopped while this executor started (SIGTERM beside a
     * standby's start) closed the channel: nothing went wrong. */
    if ((rc = executor_ready(&ex)) != 0) {
        rc = rc == -EPIPE || rc == -ECONNRESET ? 0 : EX_SOFTWARE;
        goto done;
    }
    rc = executor_serve(&ex);

done:
    /* Lanes first (the one running finishes; queued commands are dropped:
     * the front is gone), then the work in flight, whose completion
     * thread still runs the reclaim queues (it may free memory on the
     * allocation stream and post unmaps to the stopped reclaim lane,
     * which refuses them): the lanes are freed and the allocation stream
     * destroyed after it. */
    executor_lanes_stop(&ex);
    cumod__executor_submit_stop(&ex, submit_aux, nsubmit);
    cumod__exec_work_stop(&ex);
    cumod__exec_inflight_stop(&ex);
    cumod__direct_stop(&ex); /* its launches were answered just now */
    executor_lanes_free(&ex);
    cumod__exec_mem_stop(&ex);
    cumod__exec_blas_stop(&ex);
    cumod__exec_reclaim_stop(&ex);
    cumod__exec_pinned_stop(&ex);
    cumod__exec_streams_stop(&ex);
    cumod__exec_evpool_stop(&ex); /* last: the others give events back */
    cumod__exec_modules_fini(&ex);
    if (ex.ctx != NULL)
        (void)ex.drv.primary_ctx_release(ex.dev);
    cumod__driver_close(&ex.drv);
    close(ex.chan);
    if (ex.ledger_fd >= 0)
        close(ex.ledger_fd);
    if (have_back) /* let go at an adoption, mapped till now */
        cumod__chanring_close(&back);
    pthread_mutex_destroy(&ex.back_mtx);
    pthread_mutex_destroy(&ex.attr_mtx);
    pthread_mutex_destroy(&ex.mods_mtx);
    return rc;
}
