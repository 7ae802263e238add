/*
 * The dispatch table: one row per request body, saying which handler
 * answers it and whether it needs the connection's session (made, and
 * checked for a lost context, here, once).
 */
#include "cumod/errors.h"
#include "cumod/version.h"
#include "front.h"
#include "handlers.h"

typedef struct dispatch_row {
    cumod_handler_fn fn;
    int session;
} dispatch_row;

#define ROW(body, handler, needs_session)                                      \
    [CUMOD__REQUEST__BODY_##body] = {.fn = handler, .session = needs_session}

static const dispatch_row dispatch_table[] = {
    ROW(HELLO, cumod__h_hello, 0),
    ROW(LIST_MODULES, cumod__h_list, 0),
    ROW(SHOW_MODULE, cumod__h_show, 0),
    ROW(LOAD_MODULE, cumod__h_load, 0),
    ROW(UNLOAD_MODULE, cumod__h_unload, 0),
    ROW(PIN_MODULE, cumod__h_pin, 0),
    ROW(UNPIN_MODULE, cumod__h_unpin, 0),
    ROW(RELOAD_MODULE, cumod__h_reload, 0),
    ROW(ALLOC_BUFFER, cumod__h_alloc, 1),
    ROW(FREE_BUFFER, cumod__h_free, 1),
    ROW(WRITE_BUFFER, cumod__h_write, 1),
    ROW(READ_BUFFER, cumod__h_read, 1),
    ROW(MEMSET, cumod__h_memset, 1),
    ROW(MAP_SEGMENT, cumod__h_map, 1),
    ROW(UNMAP_SEGMENT, cumod__h_unmap, 1),
    ROW(COPY, cumod__h_copy, 1),
    ROW(CREATE_STREAM, cumod__h_stream_create, 1),
    ROW(DESTROY_STREAM, cumod__h_stream_destroy, 1),
    ROW(SYNCHRONIZE, cumod__h_sync, 1),
    ROW(WAIT, cumod__h_wait, 1),
    ROW(LAUNCH, cumod__h_launch, 1),
    ROW(BATCH, cumod__h_batch, 1),
    ROW(UNQUARANTINE_MODULE, cumod__h_unquarantine, 0),
};

void
cumod__front_on_request(void *arg, cumod_req *r)
{
    cumod_front *f = arg;
    int body = (int)r->msg->body_case;
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
    if (dispatch_table[body].session &&
        cumod__front_session(f, r, &s, &st) != CUMOD_OK) {
        cumod__req_fail(r, &st);
        return;
    }
    dispatch_table[body].fn(f, r, s);
}
