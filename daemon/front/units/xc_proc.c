/* SPDX-License-Identifier: MIT */
/*
 * The executor client's process (xclient.h): it spawns the executor (this
 * binary, --executor) with its end of the channel, watches it with a
 * heartbeat (a MEMINFO every second; a silent one is killed after
 * --stuck-timeout), and restarts it when it dies after having served,
 * with backoff: at once after a death with a known cause, else 100 ms
 * doubling to 5 s. The very first start failing (no driver, no device) is
 * final: retrying cannot help, and the daemon stops with the executor's
 * message. The calls themselves are the channel's (xclient.c), which this
 * side opens, drains and closes.
 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sysexits.h>
#include <unistd.h>

#include "cumod/errors.h"
#include "common/log.h"
#include "front/units/xclient_impl.h"

/* The heartbeat: a MEMINFO this often; unanswered this long, "stuck". */
#define XC_BEAT_MS 1000
#define XC_STUCK_SHOW_MS 2000
/* After the channel closes at shutdown, how long the executor may take to
 * exit before it is killed. */
#define XC_EXIT_GRACE_MS 2000
/* An executor that served this long before dying starts the backoff
 * again: its death was not a crash loop. */
#define XC_STABLE_MS 10000

static void xc_start(cumod_xc *xc);

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

static void
xc_on_restart_timer(uv_timer_t *h)
{
    xc_start(h->data);
}

/* The executor's pid: our child's, or an adopted one's. */
static int
xc_pid_of(const cumod_xc *xc)
{
    return xc->adopted ? xc->apid : xc->proc.pid;
}

static void
xc_sigkill(cumod_xc *xc)
{
    if (xc->adopted)
        (void)kill(xc->apid, SIGKILL);
    else
        uv_process_kill(&xc->proc, SIGKILL);
}

static void
xc_on_proc_close(uv_handle_t *h)
{
    cumod_xc *xc = h->data;
    xc->proc_alive = 0;
    xc->handles--;
    if (xc->adopted) { /* the next one is a child of ours */
        int fd;
        if (uv_fileno(h, &fd) == 0)
            close(fd);
        xc->adopted = 0;
    }
    if (xc->closing && uv_is_active((uv_handle_t *)&xc->beat_timer)) {
        uv_timer_stop(&xc->beat_timer);
        uv_close((uv_handle_t *)&xc->beat_timer, cumod__xc_on_handle_close);
    }
    if (!xc->closing && xc->state == XC_DOWN && xc->ever_ready) {
        uv_timer_start(&xc->restart_timer, xc_on_restart_timer, xc->restart_ms,
                       0);
    }
    cumod__xc_maybe_free(xc);
}

static void xc_exited(cumod_xc *xc, int pid, int64_t status, int sig,
                      uv_handle_t *h);

static void
xc_on_exit(uv_process_t *p, int64_t status, int sig)
{
    xc_exited(p->data, p->pid, status, sig, (uv_handle_t *)p);
}

/* An adopted executor's pidfd is readable: it exited (its status is its
 * parent's, init's, to reap; unknown here). */
static void
xc_on_pidfd(uv_poll_t *h, int status, int events)
{
    cumod_xc *xc = h->data;
    int fd;
    (void)events;
    /* libuv may say readable when it is not (its documentation says so):
     * the pidfd itself is asked. */
    if (status == 0 && uv_fileno((uv_handle_t *)h, &fd) == 0) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, 0) == 0)
            return;
    }
    uv_poll_stop(h);
    xc_exited(xc, xc->apid, -1, 0, (uv_handle_t *)h);
}

/* The executor (pid) exited; h is the handle that watched it, closed
 * here. */
static void
xc_exited(cumod_xc *xc, int pid, int64_t status, int sig, uv_handle_t *h)
{
    xc_state was = xc->state;
    uint64_t served = was == XC_READY ? uv_now(xc->loop) - xc->ready_uv_ms : 0;

    cumod__xc_set_state(xc, XC_DOWN);
    xc->ping_out = 0;
    if (!xc->closing)
        cumod__xc_chan_drain(xc);
    /* Told to exit (its channel closed), it exits 0, or is killed once
     * its grace is over; one that reported its context lost exits 70 of
     * itself. A signal else is a crash on its way out, and another status
     * an error (or, in a sanitizer build, the sanitizer's report: a leak),
     * which no client sees but an operator should. */
    if (xc->closing && sig != 0 && !xc->grace_killed && !xc->killed)
        CUMOD_LOGW("CUMOD-EXEC-LOST",
                   "executor pid %d ended by signal %d while stopping", pid,
                   sig);
    else if (xc->closing && sig == 0 && status != 0 && !xc->reported &&
             !xc->dying)
        CUMOD_LOGW("CUMOD-EXEC-LOST",
                   "executor pid %d exited with status %lld while stopping "
                   "(0 expected: its log above says why; a sanitizer's "
                   "report under a sanitizer build)",
                   pid, (long long)status);
    cumod__xc_chan_close(xc);
    uv_close(h, xc_on_proc_close);
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
    cumod__xc_fail_pending(xc, CUMOD_ECTXLOST);
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

/* The executor's command line: args (32 slots) pointing into dev and subm
 * (16 bytes each). */
static void
xc_args(cumod_xc *xc, char **args, char *dev, char *subm)
{
    int n = 0;

    snprintf(dev, 16, "%d", xc->device);
    snprintf(subm, 16, "%u",
             xc->submit_threads ? xc->submit_threads : xc->cfg->submit_threads);
    args[n++] = xc->exe;
    args[n++] = "--executor";
    args[n++] = "3";
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
    if (xc->adopt_dir[0]) { /* it may outlive this front (orphan.h) */
        snprintf(xc->grace, sizeof(xc->grace), "%u", xc->cfg->orphan_grace_s);
        args[n++] = "--orphan-grace";
        args[n++] = xc->grace;
        args[n++] = "--adopt-dir";
        args[n++] = xc->adopt_dir;
    }
    if (xc->mps_dir[0]) { /* a pool's: an MPS client, checked (mps.h) */
        args[n++] = "--mps";
        args[n++] = "join";
        args[n++] = "--mps-pipe-dir";
        args[n++] = xc->mps_dir;
    }
    args[n] = NULL;
}

/* Its descriptors: stdout and stderr shared, the channel's end as 3, the
 * rings' memory and eventfds as 4 to 7 (when there are rings); how many. */
static int
xc_stdio(const cumod_xc *xc, uv_stdio_container_t *stdio, int chan_fd)
{
    int fds[8] = {-1,
                  1,
                  2,
                  chan_fd,
                  xc->ring.mem_fd,
                  xc->ring.bell_fd,
                  xc->back.mem_fd,
                  xc->back.bell_fd};

    stdio[0].flags = UV_IGNORE;
    for (int i = 1; i < 8; i++) {
        stdio[i].flags = UV_INHERIT_FD;
        stdio[i].data.fd = fds[i];
    }
    return xc->ring_on ? 8 : 4;
}

/* Where executors that outlive this front wait to be adopted: the
 * directory of an ipc:// --listen socket, else systemd's
 * RuntimeDirectory=; "" (they die with the front) without either. */
static void
xc_adopt_dir(const cumod_config *cfg, char *out, size_t cap)
{
    const char *rt = getenv("RUNTIME_DIRECTORY"); /* ':'-split */
    out[0] = '\0';
    if (cfg->orphan_grace_s == 0)
        return;
    if (cfg->url != NULL && strncmp(cfg->url, "ipc://", 6) == 0) {
        const char *path = cfg->url + 6, *slash = strrchr(path, '/');
        if (slash != NULL && slash > path && (size_t)(slash - path) < cap)
            snprintf(out, cap, "%.*s", (int)(slash - path), path);
        else if (slash == path)
            snprintf(out, cap, "/");
    } else if (rt != NULL && rt[0] == '/') {
        size_t n = strcspn(rt, ":");
        if (n < cap)
            snprintf(out, cap, "%.*s", (int)n, rt);
    }
    if (out[0] == '\0')
        CUMOD_LOGW("CUMOD-EXEC-ORPHAN",
                   "--orphan-grace %u needs a runtime directory (an ipc:// "
                   "--listen, or systemd's RuntimeDirectory=): executors die "
                   "with the front",
                   cfg->orphan_grace_s);
}

/* One adoption request to the orphan at path (exec/orphan.h): our end
 * of its new channel, or -1; *r its answer, *ledger what it handed over
 * (-1: nothing). A socket nobody listens at any more is removed. */
static int
xc_adopt_one(const char *path, cumod_adopt_reply *r, int *ledger)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), fds[2];
    *ledger = -1;
    if (s < 0 || (size_t)snprintf(a.sun_path, sizeof(a.sun_path), "%s", path) >=
                     sizeof(a.sun_path)) {
        if (s >= 0)
            close(s);
        return -1;
    }
    if (connect(s, (struct sockaddr *)&a, sizeof(a)) != 0) {
        if (errno == ECONNREFUSED) /* its executor is gone */
            (void)unlink(path);
        close(s);
        return -1;
    }
    if (cumod__chan_pair(fds) != 0) {
        close(s);
        return -1;
    }
    cumod_adopt_req req = {.magic = CUMOD_ADOPT_MAGIC,
                           .version = CUMOD_ADOPT_VERSION,
                           .front_pid = (int32_t)getpid()};
    struct pollfd pf = {.fd = s, .events = POLLIN};
    long n = -1;
    int got[2] = {-1, -1}, trunc = 0;
    if (cumod__fd_send(s, &req, sizeof(req), fds[1], 0) == 0 &&
        poll(&pf, 1, 1000) == 1)
        n = cumod__fd_recv(s, r, sizeof(*r), got, MSG_DONTWAIT, &trunc);
    close(fds[1]);
    close(s);
    *ledger = got[0];
    if (got[1] >= 0)
        close(got[1]);
    if (n != (long)sizeof(*r) || trunc || r->magic != CUMOD_ADOPT_MAGIC ||
        r->status != 0) {
        if (*ledger >= 0)
            close(*ledger);
        *ledger = -1;
        close(fds[0]);
        return -1;
    }
    return fds[0];
}

/* An orphaned executor of xc's device, left by a front of this
 * configuration that died (--orphan-grace), taken instead of a new one:
 * its context, memory and modules are up already. 1 when adopted. */
static int
xc_adopt(cumod_xc *xc)
{
    DIR *d = opendir(xc->adopt_dir);
    struct dirent *e;
    int adopted = 0;
    while (d != NULL && !adopted && (e = readdir(d)) != NULL) {
        int pid;
        char tail[8], path[PATH_MAX + 64];
        if (sscanf(e->d_name, "exec-%d.soc%1s", &pid, tail) != 2 ||
            strcmp(tail, "k") != 0 || pid <= 0 || strlen(e->d_name) > 60)
            continue;
        snprintf(path, sizeof(path), "%s/%.60s", xc->adopt_dir, e->d_name);
        cumod_adopt_reply r;
        int ledger, chan = xc_adopt_one(path, &r, &ledger);
        if (chan < 0)
            continue;
        int pidfd = r.device == xc->device
                        ? (int)syscall(SYS_pidfd_open, (pid_t)r.pid, 0)
                        : -1;
        if (pidfd < 0 || uv_poll_init(xc->loop, &xc->pid_poll, pidfd) != 0) {
            /* Another device's, or not watchable: it waits out its grace
             * again, ours closed without a STOP. */
            if (pidfd >= 0)
                close(pidfd);
            if (ledger >= 0)
                close(ledger);
            close(chan);
            continue;
        }
        xc->pid_poll.data = xc;
        uv_poll_start(&xc->pid_poll, UV_READABLE, xc_on_pidfd);
        xc->adopted = 1;
        xc->adoptions++;
        xc->apid = r.pid;
        /* Late answers to the old front's commands carry its numbers:
         * ours start well past them, and those go unmatched. */
        if (xc->next_seq < r.last_seq + ((uint64_t)1 << 32))
            xc->next_seq = r.last_seq + ((uint64_t)1 << 32);
        xc->adopt_ledger = ledger;
        xc->proc_alive = 1;
        xc->handles++;
        xc->error[0] = '\0';
        xc->error_code = 0;
        cumod__xc_set_state(xc, XC_STARTING);
        cumod__xc_chan_open(xc, chan);
        CUMOD_LOGN("CUMOD-EXEC-ADOPT",
                   "adopted executor pid %d of a front that died (device "
                   "%d%s%s): its context, memory and modules are kept",
                   r.pid, xc->device, xc->label[0] ? ", " : "", xc->label);
        adopted = 1;
    }
    if (d != NULL)
        closedir(d);
    return adopted;
}

int
cumod__xc_take_adopted_ledger(cumod_xc *xc)
{
    int fd = xc->adopt_ledger;
    xc->adopt_ledger = -1;
    return fd;
}

/* Starts an executor process; failures are logged and end in the failed
 * hook or a later retry. */
static void
xc_start(cumod_xc *xc)
{
    uv_process_options_t o = {0};
    uv_stdio_container_t stdio[8];
    char dev[16], subm[16];
    char *args[32];
    int fds[2], rv;

    if (xc->closing)
        return;
    if (xc->adopt_try) {
        xc->adopt_try = 0;
        if (xc_adopt(xc))
            return;
    }
    if ((rv = cumod__chan_pair(fds)) != 0) {
        char msg[256];
        snprintf(msg, sizeof(msg), "socketpair: %s", strerror(-rv));
        xc->hooks.failed(xc->hooks.arg, msg, EX_OSERR);
        return;
    }
    cumod__xc_chan_rings(xc);
    xc_args(xc, args, dev, subm);
    o.file = xc->exe;
    o.args = args;
    o.stdio = stdio;
    o.stdio_count = xc_stdio(xc, stdio, fds[1]);
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
        uv_close((uv_handle_t *)&xc->proc, cumod__xc_on_handle_close);
        xc->hooks.failed(xc->hooks.arg, msg, EX_OSERR);
        return;
    }
    close(fds[1]);
    xc->proc_alive = 1;
    xc->handles++;
    if (xc->ever_ready)
        xc->started_again++;
    cumod__xc_set_state(xc, XC_STARTING);
    cumod__xc_chan_open(xc, fds[0]);
    CUMOD_LOGI("CUMOD-EXEC-SPAWN", "executor started, pid %d, device %d%s%s",
               xc_pid_of(xc), xc->device, xc->label[0] ? ", " : "", xc->label);
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
    CUMOD_LOGE("CUMOD-EXEC-KILL", "killing executor pid %d: %s", xc_pid_of(xc),
               what);
    xc_sigkill(xc);
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
    out->adoptions = xc->adoptions;
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
                   xc_pid_of(xc), (unsigned long long)(now - xc->dying_ms));
        xc_sigkill(xc);
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
                   xc_pid_of(xc), XC_EXIT_GRACE_MS);
        xc->grace_killed = 1;
        xc_sigkill(xc);
    }
    uv_close((uv_handle_t *)h, cumod__xc_on_handle_close);
}

cumod_err
cumod__xc_open(uv_loop_t *loop, cumod_rings *rs, const cumod_config *cfg,
               const char *exe, const cumod_xc_spawn *sp, const char *label,
               const cumod_xc_hooks *hooks, cumod_xc **out, cumod_status *st)
{
    cumod_xc *xc = calloc(1, sizeof(*xc));
    if (xc == NULL || (xc->buf = malloc(CUMOD_CHAN_MAX)) == NULL) {
        free(xc);
        return cumod__status_set(st, CUMOD_ENOMEM, "out of memory");
    }
    xc->loop = loop;
    xc->cfg = cfg;
    xc->broken = cumod__xc_kill;
    cumod__xc_chan_init(xc, rs);
    xc->hooks = *hooks;
    xc->device = sp->device;
    snprintf(xc->mps_dir, sizeof(xc->mps_dir), "%s",
             sp->mps_dir ? sp->mps_dir : "");
    xc->submit_threads = sp->submit_threads;
    snprintf(xc->label, sizeof(xc->label), "%s", label ? label : "");
    snprintf(xc->exe, sizeof(xc->exe), "%s", exe);
    xc_adopt_dir(cfg, xc->adopt_dir, sizeof(xc->adopt_dir));
    xc->adopt_try = sp->adopt && xc->adopt_dir[0] != '\0';
    xc->adopt_ledger = -1;
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

void
cumod__xc_close(cumod_xc *xc)
{
    if (xc == NULL || xc->closing)
        return;
    xc->closing = 1;
    cumod__xc_fail_pending(xc, CUMOD_ESHUTDOWN);
    /* STOP, then closing our end, makes the executor see EOF, release the
     * context and exit (without the STOP it would take the close for this
     * front's death: orphan.h); its exit callback closes the process
     * handle. One that does not exit (a kernel that never ends) is killed
     * after a grace period. */
    if (xc->chan_fd >= 0) {
        cumod_chan_hdr stop = {.op = CUMOD_CHAN_STOP};
        (void)cumod__chan_send(xc->chan_fd, &stop, NULL, 0, -1);
    }
    cumod__xc_chan_close(xc);
    uv_timer_stop(&xc->restart_timer);
    uv_close((uv_handle_t *)&xc->restart_timer, cumod__xc_on_handle_close);
    uv_timer_stop(&xc->beat_timer);
    if (xc->proc_alive)
        uv_timer_start(&xc->beat_timer, xc_on_grace, XC_EXIT_GRACE_MS, 0);
    else
        uv_close((uv_handle_t *)&xc->beat_timer, cumod__xc_on_handle_close);
}
