/* SPDX-License-Identifier: MIT */
/*
 * The dispatch table: one row per request body, saying which handler
 * answers it, whether it needs the connection's session, and whether it
 * puts work on a stream (counted against --session-max-inflight).
 *
 * Before any handler: the connection's session (made at its first
 * request), duplicates (an nng resend of a request in progress is dropped,
 * its first reply answering both; one already answered is refused, never
 * run twice), who may send a control request (access.h; each is logged
 * with its sender), and the session's limit of requests in progress.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "front/transport/access.h"
#include "cumod/errors.h"
#include "cumod/version.h"
#include "front/units/direct.h"
#include "front/front.h"
#include "front/serve/handlers.h"

typedef struct dispatch_row {
    cumod_handler_fn fn;
    int session; /* the handler gets the session (else NULL) */
    int work;    /* it puts work on a stream */
    /* It needs the session but not its executor (the ring is the
     * front's): it neither starts nor waits for one. */
    int front_only;
    /* A control request (it changes the daemon for every session): only
     * peers cumod__access_controls allows may send it, and each one is
     * logged with who sent it. Its name in the log and the refusal. */
    const char *control;
} dispatch_row;

#define ROW(body, handler, needs_session)                                      \
    [CUMOD__REQUEST__BODY_##body] = {.fn = handler, .session = needs_session}
#define WORK(body, handler)                                                    \
    [CUMOD__REQUEST__BODY_##body] = {.fn = handler, .session = 1, .work = 1}
#define CONTROL(body, handler, name)                                           \
    [CUMOD__REQUEST__BODY_##body] = {.fn = handler, .control = name}

static const dispatch_row dispatch_table[] = {
    ROW(HELLO, cumod__h_hello, 0),
    ROW(LIST_MODULES, cumod__h_list, 0),
    ROW(SHOW_MODULE, cumod__h_show, 0),
    ROW(WATCH_EVENTS, cumod__h_watch, 0),
    CONTROL(LOAD_MODULE, cumod__h_load, "load"),
    CONTROL(UNLOAD_MODULE, cumod__h_unload, "unload"),
    CONTROL(PIN_MODULE, cumod__h_pin, "pin"),
    CONTROL(UNPIN_MODULE, cumod__h_unpin, "unpin"),
    CONTROL(RELOAD_MODULE, cumod__h_reload, "reload"),
    ROW(ALLOC_BUFFER, cumod__h_alloc, 1),
    ROW(FREE_BUFFER, cumod__h_free, 1),
    WORK(WRITE_BUFFER, cumod__h_write),
    WORK(READ_BUFFER, cumod__h_read),
    WORK(MEMSET, cumod__h_memset),
    ROW(MAP_SEGMENT, cumod__h_map, 1),
    ROW(UNMAP_SEGMENT, cumod__h_unmap, 1),
    WORK(COPY, cumod__h_copy),
    ROW(CREATE_STREAM, cumod__h_stream_create, 1),
    ROW(DESTROY_STREAM, cumod__h_stream_destroy, 1),
    ROW(SYNCHRONIZE, cumod__h_sync, 1),
    ROW(WAIT, cumod__h_wait, 1),
    WORK(LAUNCH, cumod__h_launch),
    WORK(BATCH, cumod__h_batch),
    CONTROL(UNQUARANTINE_MODULE, cumod__h_unquarantine, "unquarantine"),
    WORK(READ_GLOBAL, cumod__h_read_global),
    [CUMOD__REQUEST__BODY_WRITE_GLOBAL] = {.fn = cumod__h_write_global,
                                           .session = 1,
                                           .work = 1,
                                           .control = "write-global"},
    CONTROL(KERNEL_SETTINGS, cumod__h_kernel_settings, "kernel-settings"),
    [CUMOD__REQUEST__BODY_OPEN_RING] = {.fn = cumod__h_open_ring,
                                        .session = 1,
                                        .front_only = 1},
    WORK(GEMM, cumod__h_gemm),
    ROW(SET_DEVICE, cumod__h_set_device, 0),
};

/* What a control request acts on, for its log line. */
static void
dispatch_target(const Cumod__Request *q, char *buf, size_t len)
{
    const Cumod__ModuleRequest *m = NULL;
    switch (q->body_case) {
    case CUMOD__REQUEST__BODY_LOAD_MODULE:
        m = q->load_module;
        break;
    case CUMOD__REQUEST__BODY_UNLOAD_MODULE:
        m = q->unload_module;
        break;
    case CUMOD__REQUEST__BODY_PIN_MODULE:
        m = q->pin_module;
        break;
    case CUMOD__REQUEST__BODY_UNPIN_MODULE:
        m = q->unpin_module;
        break;
    case CUMOD__REQUEST__BODY_RELOAD_MODULE:
        m = q->reload_module;
        break;
    case CUMOD__REQUEST__BODY_UNQUARANTINE_MODULE:
        m = q->unquarantine_module;
        break;
    case CUMOD__REQUEST__BODY_KERNEL_SETTINGS:
        if (q->kernel_settings->carveout != NULL)
            snprintf(buf, len, "%.200s carveout %u", q->kernel_settings->kernel,
                     q->kernel_settings->carveout->percent);
        else
            snprintf(buf, len, "%.200s carveout default",
                     q->kernel_settings->kernel);
        return;
    case CUMOD__REQUEST__BODY_WRITE_GLOBAL:
        snprintf(buf, len, "%.200s:%.200s, %zu bytes at offset %llu",
                 q->write_global->module, q->write_global->name,
                 q->write_global->data.len,
                 (unsigned long long)q->write_global->offset);
        return;
    default:
        break;
    }
    snprintf(buf, len, "%.200s", m != NULL ? m->name : "");
}

/* A control request: refused (answered, 0 returned) unless its peer may
 * send control requests; logged either way, with who sent it. */
static int
dispatch_control(cumod_front *f, cumod_req *r, const cumod_session *s,
                 const char *what)
{
    cumod_peer peer = {.uid = s->uid, .gid = s->gid, .pid = s->pid};
    char target[480];

    dispatch_target(r->msg, target, sizeof(target));
    if (cumod__access_controls(f->cfg, &peer)) {
        CUMOD_LOGI("CUMOD-CONTROL", "session %u (pid %d uid %d gid %d): %s %s",
                   s->id, s->pid, s->uid, s->gid, what, target);
        return 1;
    }
    cumod__metrics_control_refused(f);
    CUMOD_LOGN("CUMOD-CONTROL",
               "refused: session %u (pid %d uid %d gid %d): %s %s: not "
               "allowed by --control-uid / --control-gid",
               s->id, s->pid, s->uid, s->gid, what, target);
    if (s->uid < 0)
        cumod__req_failf(r, CUMOD_EPERM,
                         "%s: control requests need a local (ipc://) "
                         "connection by uid 0, cumodd's uid (%u) or one in "
                         "--control-uid / --control-gid; remote peers have "
                         "no uid",
                         what, (unsigned)geteuid());
    else
        cumod__req_failf(r, CUMOD_EPERM,
                         "%s: control requests need uid 0 or cumodd's uid "
                         "(%u), or a uid or group in --control-uid / "
                         "--control-gid; this connection is uid %d",
                         what, (unsigned)geteuid(), s->uid);
    return 0;
}

/* The request is answered: its id leaves the session's requests in
 * progress (the session may be gone: it is looked up, not kept). */
static void
dispatch_answered(void *arg, cumod_req *r)
{
    cumod_front *f = arg;
    cumod_session *s = cumod__sessions_get(&f->sessions, r->pipe_id);
    if (s != NULL)
        cumod__session_id_end(s, r->msg->id);
}

/* --- Waiting through a start or restart (--restart-wait) ----------------- */

/* A request parked while its unit's executor starts or restarts. */
typedef struct dispatch_parked {
    cumod_list_node link;
    cumod_req *r;
    uint64_t until; /* uv time: answered CUMOD_ECTXLOST then */
} dispatch_parked;

static void dispatch_request(cumod_front *f, cumod_req *r);

/* How long a request waits for its unit's executor to come up the first
 * time (a domain's first session): a context takes a few hundred ms. */
#define DISPATCH_START_WAIT_MS 30000
#define DISPATCH_RETRY_MS 5000

/* Whether a request of this type waits for u's executor now, and how
 * long: one that needs it (the session's requests), while a new one is
 * coming after one that served, or the domain's first is starting. An
 * executor that keeps dying (crash-looping) is not waited for: its
 * requests are refused at once, as before. 0: no waiting. */
static uint64_t
dispatch_must_park(cumod_unit *u, int body)
{
    const cumod_config *cfg = u->f->cfg;
    cumod_xc_status xs;

    if (!dispatch_table[body].session || dispatch_table[body].front_only ||
        cumod__unit_ready(u))
        return 0;
    /* One that could not start (a device that does not exist) is tried
     * again at most every DISPATCH_RETRY_MS; meanwhile refused at once. */
    if (u->failed) {
        if (uv_now(&u->f->loop) - u->failed_ms < DISPATCH_RETRY_MS)
            return 0;
        u->failed = 0;
    }
    if (u->xc == NULL) { /* stopped, or never started: it starts now */
        cumod__unit_want(u);
        if (u->xc == NULL)
            return 0;
        return cfg->restart_wait_ms > DISPATCH_START_WAIT_MS
                   ? cfg->restart_wait_ms
                   : DISPATCH_START_WAIT_MS;
    }
    cumod__xc_status(u->xc, &xs);
    if (strcmp(xs.state, "starting") == 0 && u->replicas_on && u->restarts == 0)
        return cfg->restart_wait_ms > DISPATCH_START_WAIT_MS
                   ? cfg->restart_wait_ms
                   : DISPATCH_START_WAIT_MS;
    if (cfg->restart_wait_ms == 0)
        return 0;
    return strcmp(xs.state, "restarting") == 0 ||
                   (strcmp(xs.state, "starting") == 0 && u->restarts > 0)
               ? cfg->restart_wait_ms
               : 0;
}

static void
dispatch_on_park_timer(uv_timer_t *h)
{
    cumod_unit *u = h->data;
    uint64_t now = uv_now(&u->f->loop);
    cumod_list_node *n;
    cumod_status st;

    while ((n = cumod__list_first(&u->parked)) != NULL) {
        dispatch_parked *p = CUMOD_CONTAINER_OF(n, dispatch_parked, link);
        if (p->until > now) {
            uv_timer_start(&u->park_timer, dispatch_on_park_timer,
                           p->until - now, 0);
            return;
        }
        cumod__list_remove(n);
        cumod_req *r = p->r;
        free(p);
        cumod__unit_refusal(u, CUMOD_ECTXLOST, &st);
        cumod__req_failf(r, CUMOD_ECTXLOST, "%s (waited --restart-wait %u ms)",
                         st.msg, u->f->cfg->restart_wait_ms);
    }
}

/* Parks r on u for wait_ms, or until its executor serves; 0, or -1 when
 * it cannot (out of memory: the caller goes on as without waiting). */
static int
dispatch_park(cumod_unit *u, cumod_req *r, uint64_t wait_ms)
{
    dispatch_parked *p = malloc(sizeof(*p));
    if (p == NULL)
        return -1;
    p->r = r;
    p->until = uv_now(&u->f->loop) + wait_ms;
    /* Kept in order of their deadlines: the timer looks at the first. */
    cumod_list_node *at = NULL;
    CUMOD_LIST_FOREACH(&u->parked, n)
    {
        if (CUMOD_CONTAINER_OF(n, dispatch_parked, link)->until > p->until) {
            at = n;
            break;
        }
    }
    if (at != NULL)
        cumod__list_insert_before(at, &p->link);
    else
        cumod__list_append(&u->parked, &p->link);
    if (cumod__list_first(&u->parked) == &p->link)
        uv_timer_start(&u->park_timer, dispatch_on_park_timer, wait_ms, 0);
    return 0;
}

void
cumod__front_unpark(cumod_unit *u)
{
    cumod_list all;

    uv_timer_stop(&u->park_timer);
    /* Those parked now, in order; one that must wait again (the executor
     * went at once) parks again behind them. */
    cumod__list_init(&all);
    cumod__list_splice(&all, &u->parked);
    for (cumod_list_node *n; (n = cumod__list_pop(&all)) != NULL;) {
        dispatch_parked *p = CUMOD_CONTAINER_OF(n, dispatch_parked, link);
        cumod_req *r = p->r;
        free(p);
        dispatch_request(u->f, r);
    }
}

void
cumod__front_park_fail(cumod_unit *u, cumod_err code, const char *msg)
{
    for (cumod_list_node *n; (n = cumod__list_pop(&u->parked)) != NULL;) {
        dispatch_parked *p = CUMOD_CONTAINER_OF(n, dispatch_parked, link);
        cumod_req *r = p->r;
        free(p);
        cumod__req_answer(r, code, msg, NULL);
    }
    uv_timer_stop(&u->park_timer);
}

void
cumod__front_on_request(void *arg, cumod_req *r)
{
    cumod_front *f = arg;
    cumod__metrics_request(f, cumod__ring_req(r));
    dispatch_request(f, r);
}

static void
dispatch_request(cumod_front *f, cumod_req *r)
{
    int body = (int)r->msg->body_case;
    uint64_t id = r->msg->id;
    cumod_session *s = NULL;
    cumod_status st;

    if (f->stopping) {
        cumod__req_failf(r, CUMOD_ESHUTDOWN, "cumodd is shutting down");
        return;
    }
    if (body == CUMOD__REQUEST__BODY__NOT_SET) {
        cumod__req_failf(r, CUMOD_EINVAL, "the request has no body");
        return;
    }
    if (body < 0 ||
        (size_t)body >= sizeof(dispatch_table) / sizeof(dispatch_table[0]) ||
        dispatch_table[body].fn == NULL) {
        cumod__req_failf(r, CUMOD_ENOTSUP,
                         "request type %d is not supported by cumodd %s", body,
                         CUMOD_VERSION_STRING);
        return;
    }
    if (cumod__front_session(f, r, &s, &st) != CUMOD_OK) {
        cumod__req_fail(r, &st);
        return;
    }
    uint64_t wait_ms = dispatch_must_park(s->unit, body);
    if (wait_ms != 0 && dispatch_park(s->unit, r, wait_ms) == 0)
        return;
    switch (cumod__session_id_state(s, id)) {
    case CUMOD_SESSION_ID_LIVE:
        CUMOD_LOGD("CUMOD-DUPLICATE",
                   "session %u (pid %d): request id %llu arrived again while "
                   "in progress (an nng resend): dropped",
                   s->id, s->pid, (unsigned long long)id);
        cumod__req_drop(r);
        return;
    case CUMOD_SESSION_ID_DONE:
        cumod__req_failf(r, CUMOD_EPROTO,
                         "request id %llu of this connection was answered "
                         "already: a repeat (an nng resend?) is not run twice",
                         (unsigned long long)id);
        return;
    default:
        break;
    }
    if (dispatch_table[body].control != NULL &&
        !dispatch_control(f, r, s, dispatch_table[body].control))
        return;
    if (s->requests >= f->cfg->session_max_requests) {
        cumod__req_failf(r, CUMOD_ELIMIT,
                         "this connection has %u requests waiting for their "
                         "answer, its limit (--session-max-requests)",
                         s->requests);
        return;
    }
    /* Direct launches in flight count (front/units/direct.h). */
    uint32_t inflight = s->inflight + cumod__fdirect_session_inflight(s);
    if (dispatch_table[body].work && inflight >= f->cfg->session_max_inflight) {
        cumod__req_failf(r, CUMOD_ELIMIT,
                         "this connection has %u launches, copies and other "
                         "work not yet complete, its limit "
                         "(--session-max-inflight): wait for some first",
                         inflight);
        return;
    }
    if (cumod__session_id_begin(s, id) != CUMOD_OK) {
        cumod__req_failf(r, CUMOD_ENOMEM, "out of memory");
        return;
    }
    r->answered = dispatch_answered;
    r->answered_arg = f;
    dispatch_table[body].fn(f, r, dispatch_table[body].session ? s : NULL);
}
