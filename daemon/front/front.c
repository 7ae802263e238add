/* SPDX-License-Identifier: MIT */
/*
 * The front's life: start the catalog and the executor, open the server
 * once the first executor holds its context (the first folder scan needs
 * the device's SM), and stop everything in order on SIGTERM or SIGINT.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sysexits.h>
#include <unistd.h>

#include "front/state/checks.h"
#include "front/units/direct.h"
#include "cumod/errors.h"
#include "front/transport/fdpass.h"
#include "cumod/version.h"
#include "front/front.h"
#include "common/log.h"

static void front_fdpass_open(cumod_front *f);

static void front_stop(cumod_front *f, int exit_code);

/* The catalog reaches the executor through these. */
static cumod_err
front_cat_call(void *arg, uint32_t op, const void *payload, size_t len, int fd,
               cumod_chan_reply_cb cb, void *cbarg)
{
    cumod_front *f = arg;
    if (f->loader == NULL || f->loader->xc == NULL)
        return CUMOD_ECTXLOST;
    if (op == CUMOD_CHAN_UNLOAD && len >= sizeof(cumod_chan_unload)) {
        cumod_chan_unload un;
        memcpy(&un, payload, sizeof(un));
        cumod__fdirect_unloading(f->loader, un.handle);
    }
    return cumod__xc_call(f->loader->xc, op, payload, len, fd, cb, cbarg);
}

static int
front_cat_ready(void *arg)
{
    cumod_front *f = arg;
    return f->loader != NULL && cumod__unit_ready(f->loader);
}

/* READY=1 once the executor holds its context, the socket listens and the
 * first scan is done, whichever comes last. */
static void
front_maybe_ready(cumod_front *f)
{
    uint32_t modules, resident;
    uint64_t bytes;
    int degraded;

    if (!f->exec_up || !f->listening || !f->scanned || f->stopping ||
        f->notify.ready)
        return;
    cumod__catalog_stats(f->cat, &modules, &resident, &bytes, &degraded);
    cumod__notify_ready(&f->notify, "serving %u modules from %s on %s", modules,
                        f->cfg->kernel_dir, f->cfg->url);
}

static void
front_cat_scanned(void *arg)
{
    cumod_front *f = arg;
    f->scanned = 1;
    front_maybe_ready(f);
}

static void
front_cat_timed(void *arg, int what, uint64_t ns)
{
    cumod__metrics_timed(arg, what, ns);
}

static void
front_cat_event(void *arg, const cumod_catalog_event *ev)
{
    cumod_front *f = arg;
    cumod__metrics_event(f, ev);
    cumod__events_add(&f->events, ev);
    /* Whatever happened to it, direct launches of it go through the front
     * until a launch served there publishes it again (direct.h). */
    cumod__fdirect_module_changed(f, ev->module);
    /* Domains' executors follow the catalog: a module's new generation
     * replaces the old one there too, an unloaded one goes. */
    if (f->replicas && ev->module != NULL)
        for (uint32_t i = 0; i < f->nunits; i++)
            if (f->units[i]->up)
                cumod__reps_sweep(f->units[i], ev->module);
}

static void
front_cat_unready(void *arg, char *msg, size_t len)
{
    cumod_front *f = arg;
    cumod_status st;
    if (f->loader == NULL)
        return;
    cumod__unit_refusal(f->loader, CUMOD_ECTXLOST, &st);
    snprintf(msg, len, "%s", st.msg);
}

/* Who a TCP listener lets in, when that is more than its operator may
 * think: plain tcp:// authenticates no one, and the uid and gid lists
 * cannot apply to a remote peer. */
static void
front_warn_open(const cumod_config *cfg, const cumod_access *a)
{
    int lists = a->nuid > 0 || a->ngid > 0;

    if (strncmp(cfg->url, "tcp://", 6) == 0 && !lists)
        CUMOD_LOGW("CUMOD-ACCESS",
                   "listening on %s without TLS: plain tcp:// is "
                   "unauthenticated and unencrypted, anyone who can reach "
                   "the port may connect (use tls+tcp:// with --tls-cert, "
                   "--tls-key and --tls-ca)",
                   cfg->url);
    else if (strncmp(cfg->url, "tcp://", 6) == 0)
        CUMOD_LOGW("CUMOD-ACCESS",
                   "listening on %s: remote peers have no uid, so "
                   "--allow-uid / --allow-gid refuse every one of them (use "
                   "tls+tcp:// with --tls-ca and --allow-cert-subject)",
                   cfg->url);
    else if (strncmp(cfg->url, "tls+", 4) == 0 && cfg->tls_ca == NULL && !lists)
        CUMOD_LOGW("CUMOD-ACCESS",
                   "listening on %s without --tls-ca: the traffic is "
                   "encrypted, but clients are not authenticated, anyone "
                   "who can reach the port may connect",
                   cfg->url);
}

/* What the TLS set is loaded from: the configuration's. */
static cumod_tls_opts
front_tls_opts(const cumod_front *f)
{
    return (cumod_tls_opts){.cert = f->cfg->tls_cert,
                            .key = f->cfg->tls_key,
                            .ca = f->cfg->tls_ca,
                            .subjects = f->cfg->allow_subjects,
                            .nsubjects = f->cfg->nallow_subjects};
}

/* The listeners of [domain] sections with a socket of their own. */
static cumod_err
front_listen_domains(cumod_front *f, char *msg, size_t msglen)
{
    const cumod_config *cfg = f->cfg;
    for (int i = 0; i < cfg->ndomains; i++) {
        if (cfg->domains[i].listen == NULL)
            continue;
        int id;
        cumod_err e = cumod__server_listen(f->srv, cfg->domains[i].listen, &id,
                                           msg, msglen);
        if (e != CUMOD_OK)
            return e;
        if (id > 0 && id <= CUMOD_CONFIG_MAX_DOMAINS) {
            f->listener_dcfg[id - 1] = i;
            if (id > f->nlisteners)
                f->nlisteners = id;
        }
        CUMOD_LOGN("CUMOD-READY", "domain %s listens on %s",
                   cfg->domains[i].name, cfg->domains[i].listen);
    }
    return CUMOD_OK;
}

void
cumod__front_loader_ready(cumod_front *f, const cumod_chan_device *dev,
                          int first)
{
    cumod_status st;

    f->exec_up = 1;
    f->last_serving_ms = uv_now(&f->loop);
    cumod__catalog_exec_ready(f->cat, dev->sm_major, dev->sm_minor);
    if (!first) {
        cumod_xc_status xs;
        cumod__xc_status(f->loader->xc, &xs);
        char why[600];
        snprintf(why, sizeof(why), "restart %u, after: %.500s", xs.restarts,
                 xs.last_fault[0] ? xs.last_fault : "its exit");
        cumod_catalog_event ev = {
            .kind = CUMOD__EVENT_KIND__EVENT_EXECUTOR_RESTARTED, .detail = why};
        cumod__events_add(&f->events, &ev);
        cumod__notify_status(&f->notify,
                             "serving again after %u executor restarts "
                             "(the last: %.300s)",
                             xs.restarts, xs.last_fault);
        return;
    }
    cumod_server_cfg sc = {
        .url = f->cfg->url,
        .max_msg = f->cfg->max_msg,
        .ipc_mode = f->cfg->socket_mode,
        .ipc_group = f->cfg->socket_group,
        .tls = front_tls_opts(f),
        .cb = cumod__front_on_request,
        .pipe_cb = cumod__front_conn_closed,
        .arg = f,
    };
    cumod__access_from_config(&sc.access, f->cfg);
    cumod_err e =
        cumod__server_open(&f->loop, &sc, &f->srv, st.msg, sizeof(st.msg));
    if (e == CUMOD_OK)
        e = front_listen_domains(f, st.msg, sizeof(st.msg));
    if (e != CUMOD_OK) {
        CUMOD_LOGE("CUMOD-LISTEN", "%s", st.msg);
        /* A certificate or key that does not load is the configuration's
         * fault, as a missing one is (config.c). */
        front_stop(f, e == CUMOD_EINVAL ? EX_CONFIG : EX_UNAVAILABLE);
        return;
    }
    front_warn_open(f->cfg, &sc.access);
    front_fdpass_open(f);
    f->listening = 1;
    CUMOD_LOGN("CUMOD-READY",
               "cumodd %s serving %s on device %d (%s), kernels in %s",
               CUMOD_VERSION_STRING, f->cfg->url, dev->ordinal, dev->name,
               f->cfg->kernel_dir);
    front_maybe_ready(f);
}

/* The socket beside an ipc:// --listen where clients hand over their
 * rings and segments (fdpass.h). Without it they are opened by name,
 * which a cumodd of another user than the client's cannot: a warning,
 * not a failure (those clients go over the socket instead). */
static void
front_fdpass_open(cumod_front *f)
{
    char path[512];
    cumod_status st;

    if (strncmp(f->cfg->url, "ipc://", 6) != 0)
        return;
    snprintf(path, sizeof(path), "%s.fds", f->cfg->url + 6);
    if (cumod__fdpass_open(&f->loop, path, &f->fdpass, &st) != CUMOD_OK)
        CUMOD_LOGW("CUMOD-FDPASS",
                   "%s; clients' rings and segments will be opened by name, "
                   "so only those of cumodd's own user (or all, as root) get "
                   "the fast path",
                   st.msg);
}

void
cumod__front_loader_lost(cumod_front *f, int explained, const char *why)
{
    /* The executor client does not call this once closed; a stopped front
     * has no executor, catalog or fault tracker left to tell. */
    if (f->stopped)
        return;
    cumod__catalog_exec_lost(f->cat, explained);
    cumod__notify_status(&f->notify, "the executor is restarting after: %.400s",
                         why[0] ? why : "its exit");
}

void
cumod__front_start_failed(cumod_front *f, const char *message, int code)
{
    CUMOD_LOGE("CUMOD-START-FAIL", "cannot start: %s", message);
    front_stop(f, code);
}

static void
front_on_drain_timer(uv_timer_t *h)
{
    cumod_front *f = h->data;
    CUMOD_LOGW("CUMOD-STOP",
               "%u requests still in flight after --drain-timeout %u ms: "
               "they are answered CUMOD_ESHUTDOWN",
               f->inflight, f->cfg->drain_ms);
    cumod__front_drained(f);
}

void
cumod__front_drained(cumod_front *f)
{
    if (!f->draining)
        return;
    f->draining = 0;
    uv_timer_stop(&f->drain_timer);
    front_stop(f, f->exit_code);
}

/* SIGTERM or SIGINT: new requests are refused at once (CUMOD_ESHUTDOWN);
 * work in flight may finish for --drain-timeout; then the rest is
 * answered and everything stops, an executor that does not stop killed.
 * A second signal stops at once. */
static void
front_on_signal(uv_signal_t *h, int signum)
{
    cumod_front *f = h->data;
    const char *name = signum == SIGTERM ? "SIGTERM" : "SIGINT";
    if (f->draining) {
        CUMOD_LOGN("CUMOD-STOP", "%s again: stopping now", name);
        cumod__front_drained(f);
        return;
    }
    if (f->stopping)
        return;
    f->exit_code = 0;
    f->stopping = 1; /* refuses new requests, attaches no ring */
    if (f->cfg->drain_ms != 0)
        cumod__fdirect_drain(f); /* their launches are work in flight */
    if (f->inflight == 0 || f->cfg->drain_ms == 0) {
        CUMOD_LOGN("CUMOD-STOP", "%s received: shutting down", name);
        front_stop(f, 0);
        return;
    }
    CUMOD_LOGN("CUMOD-STOP",
               "%s received: shutting down once %u requests in flight are "
               "done (at most %u ms)",
               name, f->inflight, f->cfg->drain_ms);
    f->draining = 1;
    f->stopping = 1; /* refuses new requests */
    cumod__notify_stopping(&f->notify, "draining the work in flight");
    uv_timer_start(&f->drain_timer, front_on_drain_timer, f->cfg->drain_ms, 0);
}

/* Notes a change of a setting that decides how modules are built. */
static void
front_on_setting(void *arg, const char *name, int live)
{
    int *build = arg;
    if (live &&
        (strncmp(name, "jit-", 4) == 0 || strcmp(name, "nvrtc-option") == 0 ||
         strcmp(name, "module-option") == 0))
        *build = 1;
}

/* SIGHUP: the certificate files again, changed or not (a renewal writes
 * new contents under the same names), for new connections. */
static void
front_reload_tls(cumod_front *f)
{
    char msg[CUMOD_STATUS_MSG];

    if (f->cfg->tls_cert == NULL)
        return;
    cumod_tls_opts o = front_tls_opts(f);
    if (cumod__server_set_tls(f->srv, &o, msg, sizeof(msg)) != CUMOD_OK) {
        CUMOD_LOGE("CUMOD-TLS",
                   "%s; connections keep getting the certificate loaded "
                   "before",
                   msg);
        return;
    }
    CUMOD_LOGN("CUMOD-TLS",
               "new connections get the certificate %s, key %s%s%s",
               f->cfg->tls_cert, f->cfg->tls_key,
               f->cfg->tls_ca ? ", clients verified against " : "",
               f->cfg->tls_ca ? f->cfg->tls_ca : "");
}

/* SIGHUP: reread the configuration file (the flags still win), apply what
 * may change at run time, and rescan the kernel folder. A file with
 * errors changes nothing (the errors are logged); the rescan happens
 * anyway. */
static void
front_on_sighup(uv_signal_t *h, int signum)
{
    cumod_front *f = h->data;
    cumod_config next;
    const char *old_pins[CUMOD_CONFIG_MAX_PINS];
    int nold = f->cfg->npins;
    (void)signum;

    if (f->stopping)
        return;
    cumod__notify_reloading(&f->notify);
    CUMOD_LOGN("CUMOD-RELOAD-CONFIG", "SIGHUP: rereading %s and rescanning %s",
               f->cfg->config_file ? f->cfg->config_file
                                   : "the command line (no configuration file)",
               f->cfg->kernel_dir);
    memcpy(old_pins, f->cfg->pins, sizeof(old_pins[0]) * (size_t)nold);
    if (cumod__config_reread(f->cfg, &next) == 0) {
        int build = 0;
        cumod__config_apply(f->cfg, &next, front_on_setting, &build);
        if (build) /* the rescan below reads them again */
            cumod__catalog_options_changed(f->cat);
        cumod__config_fini(&next);
        if (f->srv != NULL) {
            cumod_access a;
            cumod__access_from_config(&a, f->cfg);
            cumod__server_set_access(f->srv, &a);
            front_reload_tls(f);
        }
        /* old_pins point into strings the configuration still owns: apply
         * adds new copies and frees nothing before fini. */
        cumod__catalog_pins_changed(f->cat, old_pins, nold);
        cumod__units_config_changed(f);
    }
    cumod__catalog_rescan(f->cat);
    cumod__notify_reloaded(&f->notify);
    cumod__notify_status(&f->notify, "serving from %s on %s (reloaded)",
                         f->cfg->kernel_dir, f->cfg->url);
}

/* The watchdog's question: the loop runs (it is asking), and the executor
 * serves or has been out of service for less than CUMOD_UNHEALTHY_MS (a
 * restart, its backoff, a stuck one being replaced). */
#define CUMOD_UNHEALTHY_MS 60000

static int
front_healthy(void *arg)
{
    cumod_front *f = arg;
    uint64_t now = uv_now(&f->loop);
    if (f->loader != NULL && cumod__unit_ready(f->loader)) {
        f->last_serving_ms = now;
        return 1;
    }
    return now - f->last_serving_ms < CUMOD_UNHEALTHY_MS;
}

/* Stops everything, in order, answering every request still waiting;
 * handles close and the loop then ends. */
static void
front_stop(cumod_front *f, int exit_code)
{
    cumod_list orphans;

    if (f->stopped)
        return;
    f->stopped = 1;
    f->stopping = 1;
    f->draining = 0;
    f->exit_code = exit_code;
    /* Calls in flight first (their requests are answered ESHUTDOWN), then
     * requests parked on modules, then Waits on tickets. */
    cumod__units_stop(f, CUMOD_ESHUTDOWN, "cumodd is shutting down");
    cumod__catalog_stop(f->cat); /* frees itself once its reads return */
    f->cat = NULL;
    cumod__list_init(&orphans);
    /* The rings first: their clients hear it now. */
    size_t cur = 0;
    for (cumod_session *s; (s = cumod__sessions_next(&f->sessions, &cur));) {
        cumod__ring_close(s->ring);
        s->ring = NULL;
    }
    cumod__rings_close(&f->rings);
    cumod__events_close(&f->events, CUMOD_ESHUTDOWN, "cumodd is shutting down");
    cumod__metrics_stop(f);
    cumod__sessions_fini(&f->sessions, &orphans);
    if (f->lg_on) { /* after the sessions, which write their close */
        cumod__sledger_close(&f->lg);
        f->lg_on = 0;
    }
    cumod__front_fail_all(&orphans, CUMOD_ESHUTDOWN, "cumodd is shutting down");
    if (f->srv != NULL) {
        cumod__server_close(f->srv);
        f->srv = NULL;
    }
    cumod__fdpass_close(f->fdpass);
    f->fdpass = NULL;
    uv_close((uv_handle_t *)&f->sigterm, NULL);
    uv_close((uv_handle_t *)&f->sigint, NULL);
    uv_close((uv_handle_t *)&f->sighup, NULL);
    cumod__notify_stopping(
        &f->notify, exit_code == 0 ? "stopping" : "stopping after an error");
    cumod__notify_close(&f->notify);
    uv_timer_stop(&f->drain_timer);
    uv_close((uv_handle_t *)&f->drain_timer, NULL);
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

/* The executors of every unit whose executor serves now get the new
 * ledger (a compaction made it). */
static void
front_ledger_new(void *arg, int fd)
{
    cumod_front *f = arg;
    (void)fd;
    for (uint32_t i = 0; i < f->nunits; i++)
        if (f->units[i]->xc != NULL && cumod__unit_ready(f->units[i]))
            cumod__front_ledger_give(f, f->units[i]->xc);
}

void
cumod__front_ledger_give(cumod_front *f, cumod_xc *xc)
{
    if (!f->lg_on || xc == NULL)
        return;
    /* sent now or queued with a copy: the descriptor stays ours */
    if (cumod__xc_post(xc, CUMOD_CHAN_LEDGER, NULL, 0, f->lg.l.fd) != CUMOD_OK)
        CUMOD_LOGW("CUMOD-LEDGER",
                   "the sessions' ledger could not be handed to an executor: "
                   "a front after this one could not take its sessions over");
}

/* With --orphan-grace, the sessions' ledger (sledger.h): what a front
 * adopting the executors would take the sessions over from. */
static void
front_ledger_open(cumod_front *f)
{
    cumod_status st;
    if (f->cfg->orphan_grace_s == 0)
        return;
    if (cumod__sledger_open(&f->lg, &f->sessions, &st) != CUMOD_OK) {
        CUMOD_LOGW("CUMOD-LEDGER",
                   "no sessions' ledger (%s): sessions end with this front",
                   st.msg);
        return;
    }
    f->lg.on_new = front_ledger_new;
    f->lg.arg = f;
    f->lg_on = 1;
}

int
cumod__front_run(cumod_config *cfg)
{
    cumod_front *f;
    cumod_status st;
    size_t len;
    int rc;

    if (front_check_dir(cfg) != 0)
        return EX_CONFIG;
    if ((f = calloc(1, sizeof(*f))) == NULL ||
        (f->packed = malloc(sizeof(*f->packed))) == NULL) {
        free(f);
        CUMOD_LOGE("CUMOD-NOMEM", "out of memory at start");
        return EX_OSERR;
    }
    f->cfg = cfg;
    cumod__sessions_init(&f->sessions);
    front_ledger_open(f);
    len = sizeof(f->exe);
    if (cfg->executor_path != NULL)
        snprintf(f->exe, sizeof(f->exe), "%s", cfg->executor_path);
    else if (uv_exepath(f->exe, &len) != 0) {
        CUMOD_LOGE("CUMOD-EXEC-SPAWN", "cannot find this program's own path");
        free(f->packed);
        free(f);
        return EX_OSERR;
    }
    uv_loop_init(&f->loop);
    uv_timer_init(&f->loop, &f->drain_timer);
    f->drain_timer.data = f;
    f->drained = cumod__front_drained;
    f->unit_ops = (cumod_unit_ops){.loader_ready = cumod__front_loader_ready,
                                   .loader_lost = cumod__front_loader_lost,
                                   .start_failed = cumod__front_start_failed,
                                   .sessions_lost = cumod__front_sessions_lost,
                                   .unpark = cumod__front_unpark,
                                   .park_fail = cumod__front_park_fail,
                                   .adopted = cumod__front_adopted};
    cumod__rings_init(&f->rings, &f->loop, f->cfg, cumod__front_on_request, f);
    f->rings.ring_closing = cumod__fdirect_ring_closing;
    f->rings.ring_answer = cumod__fdirect_answer;
    f->rings.posted_failed = cumod__fdirect_posted_failed;
    cumod__events_init(&f->events, &f->loop);
    uv_signal_init(&f->loop, &f->sigterm);
    uv_signal_init(&f->loop, &f->sigint);
    uv_signal_init(&f->loop, &f->sighup);
    f->sigterm.data = f->sigint.data = f->sighup.data = f;
    uv_signal_start(&f->sigterm, front_on_signal, SIGTERM);
    uv_signal_start(&f->sigint, front_on_signal, SIGINT);
    uv_signal_start(&f->sighup, front_on_sighup, SIGHUP);
    f->last_serving_ms = uv_now(&f->loop);
    cumod__notify_init(&f->notify, &f->loop, front_healthy, f);

    cumod_catalog_ops ops = {.call = front_cat_call,
                             .ready = front_cat_ready,
                             .scanned = front_cat_scanned,
                             .event = front_cat_event,
                             .unready = front_cat_unready,
                             .timed = front_cat_timed,
                             .arg = f};
    if (cumod__catalog_open(&f->loop, cfg, &ops, &f->cat, &st) != CUMOD_OK) {
        CUMOD_LOGE("CUMOD-CONFIG", "%s", st.msg);
        front_stop(f, EX_CONFIG);
    } else if (cumod__mps_start(cfg, &f->mps, &st) != CUMOD_OK) {
        CUMOD_LOGE("CUMOD-MPS", "%s", st.msg);
        front_stop(f, EX_UNAVAILABLE);
    } else if (cumod__units_start(f, &st) != CUMOD_OK) {
        CUMOD_LOGE("CUMOD-EXEC-SPAWN", "%s", st.msg);
        front_stop(f, EX_OSERR);
    } else if (cumod__metrics_start(f, cfg->metrics_listen, st.msg,
                                    sizeof(st.msg)) != CUMOD_OK) {
        CUMOD_LOGE("CUMOD-LISTEN", "%s", st.msg);
        front_stop(f, EX_UNAVAILABLE);
    }
    uv_run(&f->loop, UV_RUN_DEFAULT);

    rc = f->exit_code;
    if (uv_loop_close(&f->loop) != 0) {
        CUMOD_LOGE("CUMOD-INTERNAL", "handles left open at exit");
        rc = rc ? rc : EX_SOFTWARE;
    }
    /* The executors are gone (their handles closed with the loop): the
     * pools' MPS control daemon goes after them. */
    cumod__mps_stop(&f->mps);
    CUMOD_LOGI("CUMOD-EXIT", "exiting with status %d", rc);
    cumod__units_free(f);
    free(f->packed);
    free(f);
    return rc;
}
