/* SPDX-License-Identifier: MIT */
/*
 * One request, one reply (client_internal.h): over the client's ring when
 * it takes the call, else packed into a message on a context of its own,
 * sent once a connection is up, and its reply checked.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>

#include "client_internal.h"
#include "cumod.pb-c.h"

int
cumod__client_call(cumod_client *c, Cumod__Request *req, Cumod__Reply **out)
{
    return cumod__client_call_ex(c, req, out, 0);
}

/* The reply r (decoded, ours to free) to req: checked, and handed on. */
static int
client_reply(Cumod__Request *req, Cumod__Reply *reply, Cumod__Reply **out,
             int keep_on_error)
{
    int code;

    if (reply == NULL)
        return cumod__client_set_error(CUMOD_EPROTO,
                                       "cumodd's reply is not a valid "
                                       "cumod.Reply message");
    if (reply->id != req->id) {
        cumod__reply__free_unpacked(reply, NULL);
        return cumod__client_set_error(CUMOD_EPROTO,
                                       "cumodd answered request %llu with the "
                                       "reply to another",
                                       (unsigned long long)req->id);
    }
    if (reply->status != NULL && reply->status->code != CUMOD_OK) {
        code = cumod__client_set_error(reply->status->code, "%s",
                                       reply->status->message);
        if (keep_on_error)
            *out = reply;
        else
            cumod__reply__free_unpacked(reply, NULL);
        return code;
    }
    *out = reply;
    return cumod__client_ok();
}

/* Through ring g (req is one it takes): CUMOD__RING_NOT_TAKEN when it is
 * not for this call now (go over nng), else what came of it. */
static int
client_call_ring(cumod_client *c, cumod__ring *g, Cumod__Request *req,
                 const cumod__pack_items *pre, Cumod__Reply **out,
                 int keep_on_error)
{
    Cumod__Reply *reply = NULL;
    int connected;

    nng_mtx_lock(c->mtx);
    connected = c->connected && !c->refused;
    nng_mtx_unlock(c->mtx);
    if (!connected)
        return CUMOD__RING_NOT_TAKEN; /* nng knows what to do */
    switch (cumod__ring_call(g, req, pre, c->timeout_ms, &reply)) {
    case CUMOD_OK:
        nng_mtx_lock(c->mtx);
        c->replies++;
        nng_mtx_unlock(c->mtx);
        return client_reply(req, reply, out, keep_on_error);
    case CUMOD__RING_NOT_TAKEN:
        return CUMOD__RING_NOT_TAKEN;
    case CUMOD__RING_TIMEDOUT:
        return cumod__client_set_error(
            CUMOD_ETIMEDOUT,
            "no reply from cumodd at %s within %d ms (is it overloaded or "
            "stuck?)",
            c->url, c->timeout_ms);
    case CUMOD__RING_BROKEN:
        cumod__client_ring_off(c, "cumodd's reply ring held bytes that are "
                                  "not a reply");
        return cumod__client_set_error(
            CUMOD_EPROTO,
            "cumodd's reply ring holds bytes that are not a reply: the call "
            "may or may not have run; later calls go over the connection");
    default:
        nng_mtx_lock(c->mtx);
        connected = c->connected;
        nng_mtx_unlock(c->mtx);
        if (!connected)
            return cumod__client_conn_ended(c);
        cumod__client_ring_off(c, "cumodd closed this client's ring (its "
                                  "log says why, CUMOD-RING)");
        return cumod__client_set_error(
            CUMOD_ECLOSED,
            "cumodd closed this client's ring while the call was in "
            "progress (its log says why, CUMOD-RING): the call may or may "
            "not have run; later calls go over the connection");
    }
}

int
cumod__client_call_ex(cumod_client *c, Cumod__Request *req, Cumod__Reply **out,
                      int keep_on_error)
{
    return cumod__client_call_timed(c, req, NULL, out, keep_on_error, 0);
}

/* req packed into a new message of its size (*out): CUMOD_OK, or the
 * error (set). */
static int
client_pack(cumod_client *c, Cumod__Request *req, const cumod__pack_items *pre,
            nng_msg **out)
{
    size_t fast;
    int rv;
    size_t len = (fast = cumod__pack_fast_size(req, pre)) > 0
                     ? fast
                     : cumod__request__get_packed_size(req);
    uint32_t max = atomic_load(&c->max_message);

    if (max > 0 && len > max)
        return cumod__client_set_error(
            CUMOD_ETOOBIG,
            "the request is %zu bytes, over cumodd's --max-message (%u "
            "bytes): it was not sent (cumodd would drop it and close the "
            "connection); send less at a time",
            len, (unsigned)max);
    if ((rv = nng_msg_alloc(out, len)) != 0)
        return cumod__client_set_error(cumod__client_nng_err(rv),
                                       "out of memory");
    if (fast > 0)
        (void)cumod__pack_fast(req, pre, nng_msg_body(*out));
    else
        cumod__request__pack(req, nng_msg_body(*out));
    return CUMOD_OK;
}

/* Sends msg (then nng's) on ctx through k's aio, before until. The send
 * leaves once a connection is up; while none comes, a new one is tried
 * every CLIENT_STALL_MS (cumod__client_redial). On failure msg is freed and k
 * removed. */
static int
client_send(cumod_client *c, nng_ctx ctx, cumod__call *k, nng_msg *msg,
            nng_time until)
{
    nng_aio *aio = k->aio;
    int rv;

    for (;;) {
        nng_time now = nng_clock();
        unsigned gen;
        nng_duration left = now < until ? (nng_duration)(until - now) : 0;
        nng_mtx_lock(c->mtx);
        gen = c->dial_gen;
        if (c->refused) {
            nng_mtx_unlock(c->mtx);
            cumod__client_call_remove(c, k, 0);
            nng_msg_free(msg);
            return cumod__client_refused(c);
        }
        nng_mtx_unlock(c->mtx);
        nng_aio_set_timeout(aio,
                            left < CLIENT_STALL_MS ? left : CLIENT_STALL_MS);
        nng_aio_set_msg(aio, msg);
        nng_ctx_send(ctx, aio);
        nng_aio_wait(aio);
        rv = nng_aio_result(aio);
        if (rv != NNG_ETIMEDOUT || nng_clock() >= until)
            break;
        cumod__client_redial(c, gen, 0);
    }
    nng_aio_set_timeout(
        aio, until > nng_clock() ? (nng_duration)(until - nng_clock()) : 1);
    if (rv != 0) {
        cumod__client_call_remove(c, k, 0);
        /* A failed send leaves the message with us. */
        nng_msg_free(msg);
        return rv == NNG_ECONNRESET
                   ? cumod__client_conn_ended(c)
                   : cumod__client_set_error(cumod__client_nng_err(rv),
                                             "cannot send to cumodd at %s: %s",
                                             c->url, nng_strerror(rv));
    }
    return CUMOD_OK;
}

/* The reply on ctx through k's aio (k removed): *reply decoded (NULL when
 * it is not a reply) and *pipe_id the connection it came over. */
static int
client_recv(cumod_client *c, nng_ctx ctx, cumod__call *k, Cumod__Reply **reply,
            int *pipe_id)
{
    nng_aio *aio = k->aio;
    nng_msg *msg;
    int rv;

    nng_ctx_recv(ctx, aio);
    nng_aio_wait(aio);
    cumod__client_call_remove(c, k, nng_aio_result(aio) == 0);
    if ((rv = nng_aio_result(aio)) != 0) {
        if (rv == NNG_ECONNRESET)
            return cumod__client_conn_ended(c);
        return cumod__client_set_error(
            cumod__client_nng_err(rv), "no reply from cumodd at %s: %s%s",
            c->url, nng_strerror(rv),
            rv == NNG_ETIMEDOUT ? " (is it overloaded or stuck?)" : "");
    }
    msg = nng_aio_get_msg(aio);
    *reply = cumod__reply__unpack(NULL, nng_msg_len(msg), nng_msg_body(msg));
    *pipe_id = nng_pipe_id(nng_msg_get_pipe(msg));
    nng_msg_free(msg);
    return CUMOD_OK;
}

/* The reply to req that came over the connection pipe_id: checked, and
 * handed on in *out. */
static int
client_answered(cumod_client *c, Cumod__Request *req, Cumod__Reply *reply,
                int pipe_id, Cumod__Reply **out, int keep_on_error)
{
    int rv;

    if ((rv = client_reply(req, reply, out, keep_on_error)) != CUMOD_OK)
        return rv;
    /* Which session answered: one that has not heard the device chosen is
     * an error (device.c). */
    if ((rv = cumod__device_replied(
             c, req, pipe_id > 0 ? (uint32_t)pipe_id : 0)) != CUMOD_OK) {
        cumod__reply__free_unpacked(*out, NULL);
        *out = NULL;
        return rv;
    }
    /* A call the ring would have taken came back over a new connection
     * (it waited for it): the next finds the new ring, opened now. Not
     * for control calls (SetDevice is answered before its connection is
     * marked as having heard it). */
    if (c->ring_want && cumod__ring_eligible(req))
        (void)cumod__client_ring_now(c);
    return CUMOD_OK;
}

int
cumod__client_call_timed(cumod_client *c, Cumod__Request *req,
                         const cumod__pack_items *pre, Cumod__Reply **out,
                         int keep_on_error, int timeout_ms)
{
    nng_ctx ctx;
    nng_aio *aio = NULL;
    nng_msg *msg = NULL;
    Cumod__Reply *reply = NULL;
    cumod__call k = {0};
    int rv, code, pipe_id = 0;

    if (keep_on_error)
        *out = NULL;
    if ((rv = cumod__device_again(c, req)) != CUMOD_OK)
        return rv;
    req->version = CUMOD__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    req->id = atomic_fetch_add(&c->next_id, 1) + 1;
    cumod__ring *g = c->ring_want && cumod__ring_eligible(req)
                         ? cumod__client_ring_now(c)
                         : NULL;
    if (g != NULL &&
        (rv = client_call_ring(c, g, req, pre, out, keep_on_error)) !=
            CUMOD__RING_NOT_TAKEN)
        return rv;
    /* A context per call: concurrent callers each get their own reply. */
    if ((rv = nng_ctx_open(&ctx, c->sock)) != 0)
        return cumod__client_set_error(cumod__client_nng_err(rv),
                                       "cannot open a request context: %s",
                                       nng_strerror(rv));
    if ((code = client_pack(c, req, pre, &msg)) != CUMOD_OK) {
        nng_ctx_close(ctx);
        return code;
    }
    if ((rv = nng_aio_alloc(&aio, NULL, NULL)) != 0) {
        nng_msg_free(msg);
        nng_ctx_close(ctx);
        return cumod__client_set_error(cumod__client_nng_err(rv),
                                       "out of memory");
    }
    k.aio = aio;
    cumod__client_call_add(c, &k);
    nng_time until =
        nng_clock() + (nng_time)(timeout_ms > 0 ? timeout_ms : c->timeout_ms);
    if ((code = client_send(c, ctx, &k, msg, until)) == CUMOD_OK)
        code = client_recv(c, ctx, &k, &reply, &pipe_id);
    nng_aio_free(aio);
    nng_ctx_close(ctx);
    if (code != CUMOD_OK)
        return code;
    return client_answered(c, req, reply, pipe_id, out, keep_on_error);
}

int
cumod__client_call_for(cumod_client *c, Cumod__Request *req,
                       Cumod__Reply__BodyCase want, const char *fn,
                       Cumod__Reply **out)
{
    Cumod__Reply *reply;
    int rv;

    if ((rv = cumod__client_call(c, req, &reply)) != CUMOD_OK)
        return rv;
    if (reply->body_case != want) {
        cumod__reply__free_unpacked(reply, NULL);
        return cumod__client_set_error(CUMOD_EPROTO,
                                       "%s: cumodd answered with another "
                                       "kind of reply",
                                       fn);
    }
    *out = reply;
    return CUMOD_OK;
}
