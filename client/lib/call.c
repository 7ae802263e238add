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
#include "cumod_ring.h"

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

/* Sends msg (then nng's) on k's context through its aio, before until.
 * The send leaves once a connection is up; while none comes, a new one is
 * tried every CLIENT_STALL_MS (cumod__client_redial). On failure msg is
 * freed and k removed. */
static int
client_send(cumod_client *c, cumod__call *k, nng_msg *msg, nng_time until)
{
    nng_aio *aio = k->aio;
    nng_ctx ctx = k->ctx;
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
    if (rv != 0) {
        cumod__client_call_remove(c, k, 0);
        /* A failed send leaves the message with us. */
        nng_msg_free(msg);
        if (rv == NNG_ECLOSED && atomic_load(&c->shut) != 0)
            return cumod__client_shut_error(c); /* it was not sent */
        return rv == NNG_ECONNRESET
                   ? cumod__client_conn_ended(c)
                   : cumod__client_set_error(cumod__client_nng_err(rv),
                                             "cannot send to cumodd at %s: %s",
                                             c->url, nng_strerror(rv));
    }
    /* Sent: cumod_shutdown lets it run to its reply. Under c->mtx, which
     * cumod_shutdown holds while it looks at sent and aborts: without it,
     * an abort decided on sent == 0 could land after this store, on the
     * receive started next, and fail a call already sent (seen once in a
     * fresh-clone run of shutdown_test). An abort that lands before it,
     * on the idle aio, does nothing. */
    nng_mtx_lock(c->mtx);
    atomic_store(&k->sent, 1);
    nng_mtx_unlock(c->mtx);
    return CUMOD_OK;
}

/* nng's thread: k's aio completed. Only its receive is ours to see (its
 * send is waited for with nng_aio_wait): the caller is woken, or, when it
 * gave up, the reply is dropped here and the call left for
 * cumod__client_late_reap. */
static void
client_call_cb(void *arg)
{
    cumod__call *k = arg;
    cumod_client *c = k->c;

    if (!atomic_load(&k->recv))
        return;
    nng_mtx_lock(c->mtx);
    k->done = 1;
    if (k->late) {
        if (nng_aio_result(k->aio) == 0) {
            nng_msg_free(nng_aio_get_msg(k->aio));
            nng_aio_set_msg(k->aio, NULL);
        }
        c->n_late_done++;
        nng_cv_wake(c->late_cv);
    } else {
        nng_cv_wake(k->cv);
    }
    nng_mtx_unlock(c->mtx);
}

/* A late call past CLIENT_LATE_MAX: the oldest still waiting is aborted
 * (its reply, if it comes, nng drops). Under c->mtx. */
static void
client_late_trim(cumod_client *c)
{
    cumod__call *oldest = NULL;
    for (cumod__call *k = c->calls; k != NULL; k = k->next)
        if (k->late && !k->done)
            oldest = k; /* calls are prepended: the last is the oldest */
    if (oldest != NULL)
        nng_aio_abort(oldest->aio, NNG_ECANCELED);
}

/* The reply on k's context, waited for until until: *reply decoded (NULL
 * when it is not a reply) and *pipe_id the connection it came over; k
 * removed. The wait is ours, not the aio's, so that a caller that times
 * out leaves k late (*kept set: the library's now, its receive still
 * posted) instead of cancelling the request in nng. */
static int
client_recv(cumod_client *c, cumod__call *k, nng_time until,
            Cumod__Reply **reply, int *pipe_id, int *kept)
{
    nng_aio *aio = k->aio;
    nng_msg *msg;
    int rv;

    nng_aio_set_timeout(aio, NNG_DURATION_INFINITE);
    atomic_store(&k->recv, 1);
    nng_ctx_recv(k->ctx, aio);
    nng_mtx_lock(c->mtx);
    while (!k->done && nng_cv_until(k->cv, until) != NNG_ETIMEDOUT)
        ;
    if (!k->done) {
        k->late = 1;
        *kept = 1;
        if (atomic_fetch_add(&c->n_late, 1) + 1 > CLIENT_LATE_MAX)
            client_late_trim(c);
        nng_mtx_unlock(c->mtx);
        return cumod__client_set_error(
            CUMOD_ETIMEDOUT,
            "no reply from cumodd at %s: %s (is it overloaded or stuck?)",
            c->url, nng_strerror(NNG_ETIMEDOUT));
    }
    nng_mtx_unlock(c->mtx);
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
    nng_aio_set_msg(aio, NULL);
    *reply = cumod__reply__unpack(NULL, nng_msg_len(msg), nng_msg_body(msg));
    *pipe_id = nng_pipe_id(nng_msg_get_pipe(msg));
    nng_msg_free(msg);
    return CUMOD_OK;
}

/* Frees a call that is over (done, or never sent): nng_aio_free waits
 * for its callback. Accepts one half made. */
static void
client_call_free(cumod__call *k)
{
    if (k == NULL)
        return;
    if (k->aio != NULL)
        nng_aio_free(k->aio);
    if (nng_ctx_id(k->ctx) > 0)
        nng_ctx_close(k->ctx);
    if (k->cv != NULL)
        nng_cv_free(k->cv);
    free(k);
}

void
cumod__client_late_reap(cumod_client *c, int all)
{
    cumod__call *over = NULL;

    if (atomic_load(&c->n_late) == 0)
        return;
    nng_mtx_lock(c->mtx);
    if (all) {
        /* Their replies first, for a while; then they are aborted, which
         * completes them at once. */
        nng_time until = nng_clock() + CLIENT_LATE_CLOSE_MS;
        while (c->n_late_done < atomic_load(&c->n_late) &&
               nng_cv_until(c->late_cv, until) != NNG_ETIMEDOUT)
            ;
        for (cumod__call *k = c->calls; k != NULL; k = k->next)
            if (k->late && !k->done)
                nng_aio_abort(k->aio, NNG_ECLOSED);
        until = nng_clock() + CLIENT_LATE_CLOSE_MS;
        while (c->n_late_done < atomic_load(&c->n_late) &&
               nng_cv_until(c->late_cv, until) != NNG_ETIMEDOUT)
            ;
    }
    for (cumod__call **pp = &c->calls; *pp != NULL;) {
        cumod__call *k = *pp;
        if (k->late && k->done) {
            *pp = k->next;
            k->next = over;
            over = k;
            c->n_late_done--;
            atomic_fetch_sub(&c->n_late, 1);
        } else {
            pp = &k->next;
        }
    }
    nng_mtx_unlock(c->mtx);
    while (over != NULL) {
        cumod__call *k = over;
        over = k->next;
        client_call_free(k);
    }
}

static _Thread_local uint32_t client_reply_pipe;

uint32_t
cumod__client_reply_pipe(void)
{
    return client_reply_pipe;
}

/* The reply to req that came over the connection pipe_id: checked, and
 * handed on in *out. */
static int
client_answered(cumod_client *c, Cumod__Request *req, Cumod__Reply *reply,
                int pipe_id, Cumod__Reply **out, int keep_on_error)
{
    int rv;

    client_reply_pipe = pipe_id > 0 ? (uint32_t)pipe_id : 0;
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

static int client_call_timed(cumod_client *c, Cumod__Request *req,
                             const cumod__pack_items *pre, Cumod__Reply **out,
                             int keep_on_error, int timeout_ms);

int
cumod__client_shut_error(cumod_client *c)
{
    return cumod__client_set_error(
        CUMOD_ECLOSED,
        "the client is closed (cumod_shutdown; Python: Client.close): the "
        "call was not sent to cumodd at %s, and the session's buffers, "
        "segments and streams are gone",
        c->url);
}

/* Every call counts itself in c->users while it runs, so that
 * cumod_shutdown can fail it and wait it out (client.c). */
int
cumod__client_call_timed(cumod_client *c, Cumod__Request *req,
                         const cumod__pack_items *pre, Cumod__Reply **out,
                         int keep_on_error, int timeout_ms)
{
    int rv;

    if (keep_on_error)
        *out = NULL;
    atomic_fetch_add(&c->users, 1);
    if (atomic_load(&c->shut) != 0)
        rv = cumod__client_shut_error(c);
    else
        rv = client_call_timed(c, req, pre, out, keep_on_error, timeout_ms);
    atomic_fetch_sub(&c->users, 1);
    return rv;
}

static int
client_call_timed(cumod_client *c, Cumod__Request *req,
                  const cumod__pack_items *pre, Cumod__Reply **out,
                  int keep_on_error, int timeout_ms)
{
    nng_msg *msg = NULL;
    Cumod__Reply *reply = NULL;
    cumod__call *k;
    int rv, code, pipe_id = 0, kept = 0;

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
    if (atomic_load(&c->n_late) != 0)
        cumod__client_late_reap(c, 0);
    if ((k = calloc(1, sizeof(*k))) == NULL)
        return cumod__client_set_error(CUMOD_ENOMEM, "out of memory");
    k->c = c;
    /* A context per call: concurrent callers each get their own reply. */
    if ((rv = nng_ctx_open(&k->ctx, c->sock)) != 0) {
        free(k);
        return cumod__client_set_error(cumod__client_nng_err(rv),
                                       "cannot open a request context: %s",
                                       nng_strerror(rv));
    }
    if ((rv = nng_aio_alloc(&k->aio, client_call_cb, k)) != 0 ||
        (rv = nng_cv_alloc(&k->cv, c->mtx)) != 0) {
        client_call_free(k);
        return cumod__client_set_error(cumod__client_nng_err(rv),
                                       "out of memory");
    }
    if ((code = client_pack(c, req, pre, &msg)) != CUMOD_OK) {
        client_call_free(k);
        return code;
    }
    cumod__client_call_add(c, k);
    nng_time until =
        nng_clock() + (nng_time)(timeout_ms > 0 ? timeout_ms : c->timeout_ms);
    if ((code = client_send(c, k, msg, until)) == CUMOD_OK)
        code = client_recv(c, k, until, &reply, &pipe_id, &kept);
    if (!kept)
        client_call_free(k);
    if (code != CUMOD_OK)
        return code;
    return client_answered(c, req, reply, pipe_id, out, keep_on_error);
}

int
cumod__client_post(cumod_client *c, Cumod__Request *req, const char *fn,
                   cumod_ticket *ticket)
{
    int rv = CUMOD__RING_NOT_TAKEN;

    atomic_fetch_add(&c->users, 1);
    if (atomic_load(&c->shut) != 0) {
        rv = cumod__client_shut_error(c);
        atomic_fetch_sub(&c->users, 1);
        return rv;
    }
    if (c->ring_want && cumod__device_again(c, req) == CUMOD_OK) {
        req->version = CUMOD__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
        req->id = atomic_fetch_add(&c->next_id, 1) + 1;
        cumod__ring *g = cumod__client_ring_now(c);
        if (g != NULL)
            rv = cumod__ring_post(g, req, c->timeout_ms);
    }
    atomic_fetch_sub(&c->users, 1);
    if (rv == CUMOD_OK) {
        *ticket = CUMOD_TICKET_POSTED | req->id;
        cumod__client_set_error(CUMOD_OK, "%s", "");
        return CUMOD_OK;
    }
    /* No ring took it: answered when enqueued, over the connection. */
    req->launch->when = CUMOD__REPLY_WHEN__REPLY_WHEN_ENQUEUED;
    return cumod__client_done(c, req, fn, ticket, NULL);
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
