/* SPDX-License-Identifier: MIT */
/*
 * The request object (req.h): the exactly-once guard and the one place a
 * reply is built, for every transport.
 */
#include "front/transport/req.h"

#include <stdarg.h>
#include <stdlib.h>

#include "cumod/errors.h"
#include "common/log.h"
#include "common/text.h"

void
cumod__req_begin(cumod_req *r, const cumod_req_ops *ops)
{
    r->ops = ops;
    r->msg = NULL;
    r->id = 0;
    r->answered = NULL;
    r->answered_arg = NULL;
    r->done = 0;
    cumod__list_node_init(&r->link);
}

void
cumod__reply_build(Cumod__Reply *reply, Cumod__Status *st, uint64_t id,
                   cumod_err code, const char *text, const Cumod__Reply *body)
{
    Cumod__Reply empty = CUMOD__REPLY__INIT;
    Cumod__Status none = CUMOD__STATUS__INIT;

    *reply = body != NULL ? *body : empty;
    *st = none;
    reply->version = CUMOD__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    reply->id = id;
    if (code != CUMOD_OK) {
        st->code = code;
        st->message = (char *)(text ? text : cumod_strerror(code));
        reply->status = st;
    } else {
        reply->status = NULL;
    }
}

/* r was answered or dropped already: what is asked now (what) is a bug in
 * cumodd. Said once, with what would have been sent; a debug build stops
 * here, where the bug is, rather than later, where a client would notice
 * a reply that was not its own (a transport may have reused r for a new
 * request by now). */
static void
req_refuse(const cumod_req *r, const char *what, const char *said,
           const char *text)
{
    CUMOD_LOGE("CUMOD-BUG",
               "%s request %llu of connection %u (%s) was refused: it was "
               "answered already%s%s%s%s%s; this is a bug in cumodd",
               what, (unsigned long long)r->id, r->pipe_id,
               r->ops != NULL && r->ops->name ? r->ops->name : "?",
               said ? " (it said " : "", said ? said : "", text ? ": " : "",
               text ? text : "", said ? ")" : "");
#ifndef NDEBUG
    abort();
#endif
}

/* Marks r done and tells whoever counts it (once, before its reply
 * leaves). */
static void
req_finish(cumod_req *r)
{
    r->done = 1;
    if (r->answered != NULL) {
        void (*hook)(void *, cumod_req *) = r->answered;
        r->answered = NULL;
        hook(r->answered_arg, r);
    }
}

cumod_err
cumod__req_answer(cumod_req *r, cumod_err code, const char *msg,
                  Cumod__Reply *body)
{
    Cumod__Reply reply;
    Cumod__Status st;

    if (r->done) {
        req_refuse(r, "a second answer to", cumod_errname(code), msg);
        return CUMOD_EINTERNAL;
    }
    req_finish(r);
    cumod__reply_build(&reply, &st, r->id, code, msg, body);
    /* Valid UTF-8 in every string, whatever the transport (text.h): the
     * reply is fixed here, once, and put back after it is packed. */
    cumod_text_fix fix;
    cumod__text_fix_reply(&reply, &fix);
    cumod_err rv = r->ops->send(r, &reply);
    cumod__text_fix_undo(&fix);
    return rv;
}

void
cumod__req_drop(cumod_req *r)
{
    if (r->done) {
        req_refuse(r, "a drop of", NULL, NULL);
        return;
    }
    req_finish(r);
    r->ops->drop(r);
}

cumod_err
cumod__req_fail(cumod_req *r, const cumod_status *st)
{
    return cumod__req_answer(r, st->code, st->msg, NULL);
}

cumod_err
cumod__req_failf(cumod_req *r, cumod_err code, const char *fmt, ...)
{
    char msg[CUMOD_STATUS_MSG];
    va_list ap;
    va_start(ap, fmt);
    cumod__verrf(msg, sizeof(msg), code, fmt, ap);
    va_end(ap);
    return cumod__req_answer(r, code, msg, NULL);
}

cumod_err
cumod__req_peer(const cumod_req *r, int *uid, int *gid, int *pid)
{
    return r->ops->peer(r, uid, gid, pid);
}
