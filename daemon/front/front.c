/*
 * The front's supervision of the executor: spawn it with one end of the
 * channel as fd 3, read its packets under uv_poll, restart it with backoff
 * when it dies after having come up, and give up with its message when the
 * very first start fails (no driver, no device: retrying cannot help).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sysexits.h>
#include <unistd.h>

#include "cumod/errors.h"
#include "cumod/version.h"
#include "front.h"
#include "log.h"
#include "session.h"

#define FRONT_NCTX 16

static void front_exec_start(cumod_daemon *d);
static void front_stop(cumod_daemon *d, int exit_code);

typedef struct cumod_exec_pending {
    uint64_t seq;
    cumod_exec_cb cb;
    void *arg;
    struct cumod_exec_pending *next;
} cumod_exec_pending;

/* A command waiting for room in the channel. */
typedef struct cumod_chan_out {
    struct cumod_chan_out *next;
    cumod_chan_hdr hdr;
    int fd; /* a dup of the descriptor to pass, or -1 */
    size_t len;
    char payload[];
} cumod_chan_out;

/* More than this queued for the executor means it is stuck or far behind:
 * new work is refused (CUMOD_EBUSY) rather than piled up. */
#define FRONT_OUTQ_MAX ((size_t)256 << 20)

static void front_on_chan(uv_poll_t *h, int status, int events);

static void
front_outq_free(cumod_daemon *d)
{
    while (d->outq != NULL) {
        cumod_chan_out *o = d->outq;
        d->outq = o->next;
        if (o->fd >= 0)
            close(o->fd);
        free(o);
    }
    d->outq_tail = NULL;
    d->outq_bytes = 0;
}

static int
front_chan_send(cumod_daemon *d, cumod_chan_hdr *h, const void *payload,
                size_t len, int fd)
{
    return fd >= 0 ? cumod__chan_send(d->chan_fd, h, payload, len, fd)
                   : cumod__chan_send_any(d->chan_fd, h, payload, len);
}

/* Sends what waits, in order, while the socket takes it. */
static void
front_outq_flush(cumod_daemon *d)
{
    while (d->outq != NULL && d->chan_fd >= 0) {
        cumod_chan_out *o = d->outq;
        int rv = front_chan_send(d, &o->hdr, o->payload, o->len, o->fd);
        if (rv == -EAGAIN)
            break;
        if (rv != 0)
            CUMOD_LOGE("CUMOD-EXEC-CHAN", "cannot send to the executor: %s",
                       strerror(-rv));
        d->outq = o->next;
        if (d->outq == NULL)
            d->outq_tail = NULL;
        d->outq_bytes -= o->len;
        if (o->fd >= 0)
            close(o->fd);
        free(o);
    }
    if (d->chan_polling)
        uv_poll_start(&d->chan_poll,
                      UV_READABLE | UV_DISCONNECT |
                          (d->outq != NULL ? UV_WRITABLE : 0),
                      front_on_chan);
}

/* Answers every pending executor call with code: the executor that would
 * have answered is gone. */
static void
front_fail_pending(cumod_daemon *d, int code)
{
    cumod_exec_pending *p = d->pending;
    d->pending = d->pending_tail = NULL;
    while (p != NULL) {
        cumod_exec_pending *next = p->next;
        cumod_chan_hdr h = {.seq = p->seq, .status = code};
        if (p->cb != NULL)
            p->cb(d, p->arg, &h, NULL, 0);
        free(p);
        p = next;
    }
}

int
cumod__exec_ready(const cumod_daemon *d)
{
    return d->exec == CUMOD_EXEC_READY && d->chan_fd >= 0 && !d->stopping;
}

static void
front_chan_close(cumod_daemon *d)
{
    front_outq_free(d);
    if (d->chan_polling) {
        uv_poll_stop(&d->chan_poll);
        uv_close((uv_handle_t *)&d->chan_poll, NULL);
        d->chan_polling = 0;
    }
    if (d->chan_fd >= 0) {
        close(d->chan_fd);
        d->chan_fd = -1;
    }
}

static void
front_on_pipe_closed(void *arg, uint32_t pipe_id)
{
    cumod__session_closed(arg, pipe_id);
}

static void
front_on_ready(cumod_daemon *d, const cumod_chan_device *dev)
{
    char msg[1024];

    d->dev = *dev;
    d->dev.name[sizeof(d->dev.name) - 1] = '\0';
    d->exec = CUMOD_EXEC_READY;
    d->exec_restarts = 0;
    if (d->ever_ready) {
        CUMOD_LOGN("CUMOD-EXEC-RESTARTED", "executor pid %d is serving again",
                   d->proc.pid);
        cumod__catalog_exec_ready(d->cat);
        return;
    }
    d->ever_ready = 1;
    cumod__catalog_exec_ready(d->cat);
    cumod_server_cfg sc = {
        .url = d->cfg->url,
        .max_msg = d->cfg->max_msg,
        .ipc_mode = d->cfg->socket_mode,
        .nctx = FRONT_NCTX,
        .cb = cumod__daemon_on_request,
        .pipe_cb = front_on_pipe_closed,
        .arg = d,
    };
    if (cumod__server_open(&d->loop, &sc, &d->srv, msg, sizeof(msg)) !=
        CUMOD_OK) {
        CUMOD_LOGE("CUMOD-LISTEN", "%s", msg);
        front_stop(d, EX_UNAVAILABLE);
        return;
    }
    CUMOD_LOGN("CUMOD-READY",
               "cumodd %s serving %s on device %d (%s), kernels in %s",
               CUMOD_VERSION_STRING, d->cfg->url, dev->ordinal, d->dev.name,
               d->cfg->kernel_dir);
}

static void
front_on_packet(cumod_daemon *d, size_t n, int fd)
{
    cumod_chan_hdr hdr;
    cumod_chan_payload pl;
    const char *payload;
    size_t len;
    int rv;

    memcpy(&hdr, d->chan_buf, sizeof(hdr));
    if ((rv = cumod__chan_payload(d->chan_buf, n, fd, &pl)) != 0) {
        CUMOD_LOGE("CUMOD-EXEC-CHAN", "unreadable payload (op %u): %s", hdr.op,
                   strerror(-rv));
        return;
    }
    payload = pl.data;
    len = pl.len;
    switch (hdr.op) {
    case CUMOD_CHAN_READY:
        if (len >= sizeof(cumod_chan_device)) {
            cumod_chan_device dev;
            memcpy(&dev, payload, sizeof(dev));
            cumod__chan_payload_fini(&pl);
            front_on_ready(d, &dev);
            return;
        }
        break;
    case CUMOD_CHAN_FAILED:
        if (len >= sizeof(cumod_chan_error)) {
            cumod_chan_error e;
            memcpy(&e, payload, sizeof(e));
            e.message[sizeof(e.message) - 1] = '\0';
            d->exec_error_code = e.code;
            snprintf(d->exec_error, sizeof(d->exec_error), "%s", e.message);
            cumod__chan_payload_fini(&pl);
            return; /* the exit callback decides what follows */
        }
        break;
    default: {
        /* A reply to a pending call. */
        cumod_exec_pending **pp = &d->pending;
        while (*pp != NULL && (*pp)->seq != hdr.seq)
            pp = &(*pp)->next;
        if (*pp == NULL) {
            CUMOD_LOGW("CUMOD-EXEC-CHAN", "reply %llu matches no request",
                       (unsigned long long)hdr.seq);
            cumod__chan_payload_fini(&pl);
            return;
        }
        cumod_exec_pending *p = *pp;
        *pp = p->next;
        if (d->pending_tail == p) {
            d->pending_tail = NULL;
            for (cumod_exec_pending *x = d->pending; x; x = x->next)
                d->pending_tail = x;
        }
        if (p->cb != NULL)
            p->cb(d, p->arg, &hdr, payload, len);
        free(p);
        cumod__chan_payload_fini(&pl);
        return;
    }
    }
    cumod__chan_payload_fini(&pl);
    CUMOD_LOGE("CUMOD-EXEC-CHAN", "malformed packet (op %u, %zu bytes)", hdr.op,
               n);
}

static void
front_on_chan(uv_poll_t *h, int status, int events)
{
    cumod_daemon *d = h->data;

    if (status < 0) {
        /* libuv reports POLLERR as UV_EBADF: the executor's end went away
         * (it died or is exiting); its exit callback says what happened. */
        CUMOD_LOGD("CUMOD-EXEC-CHAN", "channel closed: %s",
                   uv_strerror(status));
        front_chan_close(d);
        return;
    }
    if ((events & UV_WRITABLE) && d->outq != NULL)
        front_outq_flush(d);
    /* Drain what is there; the socket is non-blocking. */
    while (d->chan_fd >= 0 && (events & (UV_READABLE | UV_DISCONNECT))) {
        int fd;
        long n = cumod__chan_recv(d->chan_fd, d->chan_buf, CUMOD_CHAN_MAX, &fd);
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
            front_chan_close(d);
            return;
        }
        front_on_packet(d, (size_t)n, fd);
    }
}

static void
front_on_restart_timer(uv_timer_t *h)
{
    front_exec_start(h->data);
}

static void
front_on_proc_close(uv_handle_t *h)
{
    cumod_daemon *d = h->data;
    d->proc_alive = 0;
    if (!d->stopping && d->exec == CUMOD_EXEC_DOWN && d->ever_ready) {
        /* Back off: 100 ms, doubling to 5 s, so a driver that fails every
         * start does not spin. */
        uint64_t ms = 100u << (d->exec_restarts < 6 ? d->exec_restarts : 6);
        if (ms > 5000)
            ms = 5000;
        d->exec_restarts++;
        uv_timer_start(&d->restart_timer, front_on_restart_timer, ms, 0);
    }
}

static void
front_on_exit(uv_process_t *p, int64_t status, int sig)
{
    cumod_daemon *d = p->data;
    cumod_exec_state was = d->exec;

    d->exec = CUMOD_EXEC_DOWN;
    front_chan_close(d);
    uv_close((uv_handle_t *)p, front_on_proc_close);
    if (d->stopping)
        return;
    if (!d->ever_ready) {
        /* The first start failed: no point retrying a missing driver. */
        if (d->exec_error[0] != '\0')
            CUMOD_LOGE("CUMOD-START-FAIL", "cannot start: %s", d->exec_error);
        else
            CUMOD_LOGE("CUMOD-START-FAIL",
                       "cannot start: the executor exited (status %lld, "
                       "signal %d) before the CUDA context came up",
                       (long long)status, sig);
        front_stop(d, EX_UNAVAILABLE);
        return;
    }
    CUMOD_LOGE("CUMOD-EXEC-LOST",
               "executor exited (status %lld, signal %d) %s; restarting it",
               (long long)status, sig,
               was == CUMOD_EXEC_READY ? "while serving" : "while starting");
    if (d->exec_error[0] != '\0')
        CUMOD_LOGE("CUMOD-EXEC-LOST", "its last word: %s", d->exec_error);
    front_fail_pending(d, CUMOD_ECTXLOST);
    cumod__sessions_lost(d);
    cumod__catalog_exec_lost(d->cat);
}

/* Starts an executor process; failures are logged and end in front_stop or
 * a later retry. */
static void
front_exec_start(cumod_daemon *d)
{
    uv_process_options_t o = {0};
    uv_stdio_container_t stdio[4];
    char dev[16], fdnum[8];
    char *args[12];
    int n = 0, fds[2], rv;

    if (d->stopping)
        return;
    if ((rv = cumod__chan_pair(fds)) != 0) {
        CUMOD_LOGE("CUMOD-EXEC-SPAWN", "socketpair: %s", strerror(-rv));
        front_stop(d, EX_OSERR);
        return;
    }
    snprintf(dev, sizeof(dev), "%d", d->cfg->device);
    snprintf(fdnum, sizeof(fdnum), "3");
    args[n++] = d->exe;
    args[n++] = "--executor";
    args[n++] = fdnum;
    args[n++] = "--device";
    args[n++] = dev;
    args[n++] = "--log-level";
    args[n++] = (char *)cumod__log_level_name(d->cfg->log_level);
    if (d->cfg->cuda_library != NULL) {
        args[n++] = "--cuda-library";
        args[n++] = (char *)d->cfg->cuda_library;
    }
    args[n] = NULL;

    stdio[0].flags = UV_IGNORE;
    stdio[1].flags = UV_INHERIT_FD;
    stdio[1].data.fd = 1;
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = 2;
    stdio[3].flags = UV_INHERIT_FD;
    stdio[3].data.fd = fds[1];
    o.file = d->exe;
    o.args = args;
    o.stdio = stdio;
    o.stdio_count = 4;
    o.exit_cb = front_on_exit;

    d->exec_error[0] = '\0';
    d->exec_error_code = 0;
    d->proc.data = d;
    if ((rv = uv_spawn(&d->loop, &d->proc, &o)) != 0) {
        close(fds[0]);
        close(fds[1]);
        CUMOD_LOGE("CUMOD-EXEC-SPAWN", "cannot start the executor (%s): %s",
                   d->exe, uv_strerror(rv));
        /* uv_spawn failures still need the handle closed. */
        uv_close((uv_handle_t *)&d->proc, NULL);
        front_stop(d, EX_OSERR);
        return;
    }
    close(fds[1]);
    d->proc_alive = 1;
    d->exec = CUMOD_EXEC_STARTING;
    d->chan_fd = fds[0];
    uv_poll_init(&d->loop, &d->chan_poll, d->chan_fd); /* sets O_NONBLOCK */
    d->chan_poll.data = d;
    uv_poll_start(&d->chan_poll, UV_READABLE | UV_DISCONNECT, front_on_chan);
    d->chan_polling = 1;
    CUMOD_LOGI("CUMOD-EXEC-SPAWN", "executor started, pid %d, device %d",
               d->proc.pid, d->cfg->device);
}

int
cumod__exec_call(cumod_daemon *d, uint32_t op, const void *payload, size_t len,
                 int fd, cumod_exec_cb cb, void *arg)
{
    cumod_chan_hdr h = {.op = op, .seq = ++d->next_seq, .len = len};
    cumod_exec_pending *p;
    int rv;

    if (!cumod__exec_ready(d))
        return CUMOD_ECTXLOST;
    if (d->outq_bytes + len > FRONT_OUTQ_MAX)
        return CUMOD_EBUSY;
    if ((p = malloc(sizeof(*p))) == NULL)
        return CUMOD_ENOMEM;
    /* The channel is non-blocking, so the loop never waits on the
     * executor: what its socket buffer cannot take now waits in order in
     * the out queue, flushed when the socket is writable again. */
    rv = d->outq != NULL ? -EAGAIN : front_chan_send(d, &h, payload, len, fd);
    if (rv == -EAGAIN) {
        cumod_chan_out *o = malloc(sizeof(*o) + len);
        if (o == NULL ||
            (fd >= 0 && (o->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0)) {
            free(o);
            free(p);
            return CUMOD_ENOMEM;
        }
        if (fd < 0)
            o->fd = -1;
        o->next = NULL;
        o->hdr = h;
        o->len = len;
        if (len)
            memcpy(o->payload, payload, len);
        if (d->outq_tail) {
            d->outq_tail->next = o;
        } else {
            d->outq = o;
            CUMOD_LOGD("CUMOD-EXEC-CHAN",
                       "the channel is full: queueing commands in order");
        }
        d->outq_tail = o;
        d->outq_bytes += len;
        front_outq_flush(d); /* arms UV_WRITABLE */
    } else if (rv != 0) {
        free(p);
        CUMOD_LOGE("CUMOD-EXEC-CHAN", "cannot send to the executor: %s",
                   strerror(-rv));
        return CUMOD_ECTXLOST;
    }
    p->seq = h.seq;
    p->cb = cb;
    p->arg = arg;
    p->next = NULL;
    if (d->pending_tail)
        d->pending_tail->next = p;
    else
        d->pending = p;
    d->pending_tail = p;
    return CUMOD_OK;
}

static void
front_on_signal(uv_signal_t *h, int signum)
{
    cumod_daemon *d = h->data;
    CUMOD_LOGN("CUMOD-STOP", "%s received: shutting down",
               signum == SIGTERM ? "SIGTERM" : "SIGINT");
    front_stop(d, 0);
}

/* Stop everything, in order; handles close and the loop then ends. */
static void
front_stop(cumod_daemon *d, int exit_code)
{
    if (d->stopping)
        return;
    d->stopping = 1;
    d->exit_code = exit_code;
    front_fail_pending(d, CUMOD_ESHUTDOWN);
    cumod__catalog_stop(d->cat); /* frees itself once its reads return */
    d->cat = NULL;
    if (d->srv != NULL) {
        cumod__server_close(d->srv);
        d->srv = NULL;
    }
    /* Closing our end makes the executor see EOF, release the context and
     * exit; its exit callback closes the process handle. */
    front_chan_close(d);
    uv_timer_stop(&d->restart_timer);
    uv_close((uv_handle_t *)&d->restart_timer, NULL);
    uv_close((uv_handle_t *)&d->sigterm, NULL);
    uv_close((uv_handle_t *)&d->sigint, NULL);
}

static int
front_check_dir(const cumod_config *cfg)
{
    struct stat st;
    if (stat(cfg->kernel_dir, &st) != 0) {
        CUMOD_LOGE("CUMOD-CONFIG", "kernel folder %s: %s", cfg->kernel_dir,
                   strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        CUMOD_LOGE("CUMOD-CONFIG", "kernel folder %s is not a directory",
                   cfg->kernel_dir);
        return -1;
    }
    return 0;
}

int
cumod__daemon_run(const cumod_config *cfg)
{
    cumod_daemon *d;
    size_t len;
    int rc;

    if (front_check_dir(cfg) != 0)
        return EX_CONFIG;
    if ((d = calloc(1, sizeof(*d))) == NULL ||
        (d->chan_buf = malloc(CUMOD_CHAN_MAX)) == NULL) {
        free(d);
        CUMOD_LOGE("CUMOD-NOMEM", "out of memory at start");
        return EX_OSERR;
    }
    d->cfg = cfg;
    d->chan_fd = -1;
    len = sizeof(d->exe);
    if (uv_exepath(d->exe, &len) != 0) {
        CUMOD_LOGE("CUMOD-EXEC-SPAWN", "cannot find this program's own path");
        free(d->chan_buf);
        free(d);
        return EX_OSERR;
    }
    uv_loop_init(&d->loop);
    uv_timer_init(&d->loop, &d->restart_timer);
    d->restart_timer.data = d;
    uv_signal_init(&d->loop, &d->sigterm);
    uv_signal_init(&d->loop, &d->sigint);
    d->sigterm.data = d->sigint.data = d;
    uv_signal_start(&d->sigterm, front_on_signal, SIGTERM);
    uv_signal_start(&d->sigint, front_on_signal, SIGINT);

    char msg[1024];
    if (cumod__catalog_open(d, &d->cat, msg, sizeof(msg)) != CUMOD_OK) {
        CUMOD_LOGE("CUMOD-CONFIG", "%s", msg);
        front_stop(d, EX_CONFIG);
    } else {
        front_exec_start(d);
    }
    uv_run(&d->loop, UV_RUN_DEFAULT);

    rc = d->exit_code;
    cumod__sessions_fini(d);
    if (uv_loop_close(&d->loop) != 0) {
        CUMOD_LOGE("CUMOD-INTERNAL", "handles left open at exit");
        rc = rc ? rc : EX_SOFTWARE;
    }
    CUMOD_LOGI("CUMOD-EXIT", "exiting with status %d", rc);
    free(d->chan_buf);
    free(d);
    return rc;
}
