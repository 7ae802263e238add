/*
 * The dispatch table: one row per request body, saying which handler
 * answers it, whether it needs the connection's session, and whether it
 * puts work on a stream (counted against --session-max-inflight).
 *
 * Before any handler: the connection's session (made at its first
 * request), duplicates (an nng resend of a request in progress is dropped,
 * its first reply answering both; one already answered is refused, never
 * run twice), and the session's limit of requests in progress.
 */
#include "cumod/errors.h"
#include "cumod/version.h"
#include "front.h"
#include "handlers.h"

typedef struct dispatch_row {
    cumod_handler_fn fn;
    int session; /* the handler gets the session (else NULL) */
    int work;    /* it puts work on a stream */
} dispatch_row;

#define ROW(body, handler, needs_session)                                      \
    [CUMOD__REQUEST__BODY_##body] = {.fn = handler, .session = needs_session}
#define WORK(body, handler)                                                    \
    [CUMOD__REQUEST__BODY_##body] = {.fn = handler, .session = 1, .work = 1}

static const dispatch_row dispatch_table[] = {
    ROW(HELLO, cumod__h_hello, 0),
    ROW(LIST_MODULES, cumod__h_list, 0),
    ROW(SHOW_MODULE, cumod__h_show, 0),
    ROW(WATCH_EVENTS, cumod__h_watch, 0),
    ROW(LOAD_MODULE, cumod__h_load, 0),
    ROW(UNLOAD_MODULE, cumod__h_unload, 0),
    ROW(PIN_MODULE, cumod__h_pin, 0),
    ROW(UNPIN_MODULE, cumod__h_unpin, 0),
    ROW(RELOAD_MODULE, cumod__h_reload, 0),
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
    ROW(UNQUARANTINE_MODULE, cumod__h_unquarantine, 0),
    WORK(READ_GLOBAL, cumod__h_read_global),
    WORK(WRITE_GLOBAL, cumod__h_write_global),
    ROW(KERNEL_SETTINGS, cumod__h_kernel_settings, 0),
    ROW(OPEN_RING, cumod__h_open_ring, 1),
    WORK(GEMM, cumod__h_gemm),
};

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

void
cumod__front_on_request(void *arg, cumod_req *r)
{
    cumod_front *f = arg;
    int body = (int)r->msg->body_case;
    uint64_t id = r->msg->id;
    cumod_session *s = NULL;
    cumod_status st;

    cumod__metrics_request(f, cumod__ring_req(r));
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
    if (s->requests >= f->cfg->session_max_requests) {
        cumod__req_failf(r, CUMOD_ELIMIT,
                         "this connection has %u requests waiting for their "
                         "answer, its limit (--session-max-requests)",
                         s->requests);
        return;
    }
    if (dispatch_table[body].work &&
        s->inflight >= f->cfg->session_max_inflight) {
        cumod__req_failf(r, CUMOD_ELIMIT,
                         "this connection has %u launches, copies and other "
                         "work not yet complete, its limit "
                         "(--session-max-inflight): wait for some first",
                         s->inflight);
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
