/* SPDX-License-Identifier: MIT */
#include "front/transport/server.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nng/protocol/reqrep0/rep.h>

#include "cumod/errors.h"
#include "common/idmap.h"
#include "common/log.h"
#include "data/decode.h"
#include "front/transport/relisten.h"
#include "front/transport/tls.h"

#define SERVER_RECEIVERS 16
#define SERVER_MAX_REQUESTS 65536

enum slot_state {
    SLOT_IDLE = 0, /* spare: on srv->idle */
    SLOT_RECV,     /* a receive is armed */
    SLOT_LOOP,     /* its request is the loop's until answered */
    SLOT_SEND,     /* its reply is being sent */
};

static const char *const slot_state_names[] = {
    [SLOT_IDLE] = "spare",
    [SLOT_RECV] = "receiving",
    [SLOT_LOOP] = "waiting for its answer",
    [SLOT_SEND] = "sending its answer",
};

/* A slot: one nng context, its aio, and the request it carries. */
typedef struct srv_slot {
    cumod_req r; /* the loop's view of the request */
    cumod_server *srv;
    nng_ctx ctx;
    nng_aio *aio;
    nng_pipe pipe;
    Cumod__Request *req; /* the decoded request, owned */
    int state;           /* guarded by srv->mtx */
    /* Decoding goes through a budget (decode.h): protobuf-c turns a few
     * wire bytes into structs many times their size. */
    cumod_decoder dec;
    cumod_list_node all; /* srv->slots, for teardown */
    cumod_list_node spare;
} srv_slot;

#define SERVER_MAX_LISTENERS 64

struct cumod_server {
    nng_socket sock;
    cumod_server_cfg cfg;
    /* Listeners beyond cfg->url ([domain] sections' sockets), by number
     * less one. */
    nng_listener extra[SERVER_MAX_LISTENERS];
    int nextra;
    uint32_t receivers, max_requests;
    uv_async_t async;
    /* Guards what nng's threads and the loop share: the slot lists and
     * counts, every slot's state, the hand-off queue and the closed pipes.
     * A leaf: no other lock is taken, and no nng call made, while it is
     * held. */
    pthread_mutex_t mtx;
    cumod_list slots, idle;
    uint32_t nslots, nrecv, nloop;
    cumod_list posted; /* requests for the loop, by r.link */
    uint32_t *gone;    /* pipe ids that closed, for the loop */
    size_t ngone, capgone;
    int closing;
    cumod_relisten *guard;
    cumod_tls *tls; /* tls+tcp:// only */
    /* Connections (also under mtx): the policy, the admitted ones by pipe
     * id (srv_conn), and the refusals, whose log lines are limited to
     * SERVER_REFUSAL_LINES per SERVER_REFUSAL_WINDOW_MS. */
    cumod_access access;
    cumod_idmap conns;
    uint64_t refused;
    uint64_t refused_limit; /* of refused: over --max-connections */
    uint64_t log_window_ms;
    unsigned log_lines;
    uint64_t log_suppressed;
};

#define SERVER_REFUSAL_LINES 10
#define SERVER_REFUSAL_WINDOW_MS 10000

/* An admitted connection. */
typedef struct srv_conn {
    nng_pipe pipe;
    cumod_peer peer;
    uint64_t requests; /* read from it (under mtx): for the access log */
} srv_conn;

static void server_on_aio(void *arg);
static cumod_err server_req_send(cumod_req *r, const Cumod__Reply *reply);
static void server_req_drop(cumod_req *r);
static cumod_err server_req_peer(const cumod_req *r, int *uid, int *gid,
                                 int *pid);

static const cumod_req_ops server_req_ops = {
    .name = "nng",
    .send = server_req_send,
    .drop = server_req_drop,
    .peer = server_req_peer,
};

static srv_slot *
slot_of(cumod_req *r)
{
    return CUMOD_CONTAINER_OF(r, srv_slot, r);
}

static srv_slot *
slot_new(cumod_server *srv)
{
    srv_slot *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->srv = srv;
    cumod__req_begin(&s->r, &server_req_ops);
    s->r.done = 1; /* nothing to answer until it receives */
    cumod__decoder_init(&s->dec);
    cumod__list_node_init(&s->all);
    cumod__list_node_init(&s->spare);
    if (nng_aio_alloc(&s->aio, server_on_aio, s) != 0) {
        free(s);
        return NULL;
    }
    if (nng_ctx_open(&s->ctx, srv->sock) != 0) {
        nng_aio_free(s->aio);
        free(s);
        return NULL;
    }
    return s;
}

static void
slot_recv(srv_slot *s)
{
    nng_ctx_recv(s->ctx, s->aio);
}

/* Arms slots until `receivers` are receiving: spare ones first, then new
 * ones, while fewer than max_requests + receivers exist. Any thread. */
static void
server_refill(cumod_server *srv)
{
    for (;;) {
        srv_slot *s = NULL;
        cumod_list_node *n;

        pthread_mutex_lock(&srv->mtx);
        if (srv->closing || srv->nrecv >= srv->receivers) {
            pthread_mutex_unlock(&srv->mtx);
            return;
        }
        if ((n = cumod__list_pop(&srv->idle)) != NULL) {
            s = CUMOD_CONTAINER_OF(n, srv_slot, spare);
            s->state = SLOT_RECV;
        } else if (srv->nslots >= srv->max_requests + srv->receivers) {
            pthread_mutex_unlock(&srv->mtx);
            return;
        } else {
            srv->nslots++; /* reserved while it is made */
        }
        srv->nrecv++;
        pthread_mutex_unlock(&srv->mtx);

        if (s == NULL) {
            s = slot_new(srv);
            pthread_mutex_lock(&srv->mtx);
            if (s == NULL) {
                srv->nslots--;
                srv->nrecv--;
                pthread_mutex_unlock(&srv->mtx);
                CUMOD_LOGE("CUMOD-NOMEM",
                           "cannot make another request slot (%u exist)",
                           srv->nslots);
                return;
            }
            s->state = SLOT_RECV;
            cumod__list_append(&srv->slots, &s->all);
            pthread_mutex_unlock(&srv->mtx);
        }
        slot_recv(s);
    }
}

/* The slot's send is done (or there was nothing to send): receive again if
 * receivers are short, else wait as a spare. Any thread. */
static void
slot_after_send(srv_slot *s)
{
    cumod_server *srv = s->srv;
    int arm = 0;

    pthread_mutex_lock(&srv->mtx);
    if (!srv->closing && srv->nrecv < srv->receivers) {
        s->state = SLOT_RECV;
        srv->nrecv++;
        arm = 1;
    } else {
        s->state = SLOT_IDLE;
        cumod__list_append(&srv->idle, &s->spare);
    }
    pthread_mutex_unlock(&srv->mtx);
    if (arm)
        slot_recv(s);
}

/* Gives the slot back to nng once its request is answered or dropped:
 * the loop's count, then the slot's state. 0, or -1 when the slot was not
 * waiting for an answer (the request object's guard passed, so the two
 * disagree: a bug; nothing may be sent on a context that holds no
 * request). Any thread; the slot's state says who may call: the loop for
 * requests it was handed, nng's threads for the ones they answer
 * themselves before handing over. */
static int
slot_take_back(srv_slot *s)
{
    cumod_server *srv = s->srv;
    int state;

    pthread_mutex_lock(&srv->mtx);
    state = s->state;
    if (state == SLOT_LOOP) {
        s->state = SLOT_SEND;
        srv->nloop--;
    }
    pthread_mutex_unlock(&srv->mtx);
    if (state != SLOT_LOOP) {
        CUMOD_LOGE("CUMOD-BUG",
                   "request %llu: its nng slot is %s, not waiting for an "
                   "answer: nothing was sent; this is a bug in cumodd",
                   (unsigned long long)s->r.id, slot_state_names[state]);
        return -1;
    }
    return 0;
}

/* The request is done with once its reply is packed. */
static void
slot_release(srv_slot *s)
{
    if (s->req != NULL) {
        cumod__decoder_release(&s->dec);
        s->req = NULL;
    }
    s->r.msg = NULL;
}

/* The nng transport's send: the reply into a message on the slot's
 * context. */
static cumod_err
server_req_send(cumod_req *r, const Cumod__Reply *reply)
{
    srv_slot *s = slot_of(r);
    nng_msg *msg;
    int rv;

    if (slot_take_back(s) != 0)
        return CUMOD_EINTERNAL;
    size_t len = cumod__reply__get_packed_size(reply);
    if ((rv = nng_msg_alloc(&msg, len)) != 0) {
        CUMOD_LOGE("CUMOD-NNG", "cannot allocate a %zu-byte reply: %s", len,
                   nng_strerror(rv));
    } else {
        cumod__reply__pack(reply, nng_msg_body(msg));
    }
    slot_release(s);
    if (rv != 0) {
        slot_after_send(s); /* the client times out; nothing else to do */
        return CUMOD_ENOMEM;
    }
    nng_aio_set_msg(s->aio, msg);
    nng_ctx_send(s->ctx, s->aio);
    return CUMOD_OK;
}

static void
server_req_drop(cumod_req *r)
{
    srv_slot *s = slot_of(r);
    if (slot_take_back(s) != 0)
        return;
    slot_release(s);
    slot_after_send(s); /* a new receive on its context forgets it */
}

static cumod_err
server_req_peer(const cumod_req *r, int *uid, int *gid, int *pid)
{
    nng_pipe p = slot_of((cumod_req *)r)->pipe;
    uint64_t v;

    *uid = *gid = *pid = -1;
    /* A closed pipe is not found; a live one of another transport answers
     * "not supported" for the IPC options. */
    if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_PID, &v) == NNG_ENOENT)
        return CUMOD_ECLOSED;
    if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_PID, &v) == 0)
        *pid = (int)v;
    if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, &v) == 0)
        *uid = (int)v;
    if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_GID, &v) == 0)
        *gid = (int)v;
    return CUMOD_OK;
}

void
cumod__server_counts(cumod_server *srv, uint32_t *in_progress, uint32_t *slots)
{
    pthread_mutex_lock(&srv->mtx);
    *in_progress = srv->nloop;
    *slots = srv->nslots;
    pthread_mutex_unlock(&srv->mtx);
}

static cumod_peer
server_pipe_peer(nng_pipe p)
{
    cumod_peer peer = {.uid = -1, .gid = -1, .pid = -1};
    uint64_t v;
    if (cumod__tls_peer(p, &peer))
        return peer; /* TCP: no credentials */
    if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, &v) == 0)
        peer.uid = (int)v;
    if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_GID, &v) == 0)
        peer.gid = (int)v;
    if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_PID, &v) == 0)
        peer.pid = (int)v;
    return peer;
}

/* Logs a refused connection, at most SERVER_REFUSAL_LINES lines a window
 * (a flood of connections must not become a flood of log lines); the next
 * line says how many went unsaid. what: "refused a connection", why: the
 * reason, after: what became of it. Any thread. */
static void
server_log_refusal(cumod_server *srv, const cumod_peer *peer, const char *what,
                   const char *why, const char *after)
{
    uint64_t now = cumod__mono_ms(), unsaid = 0;
    int say = 0;

    pthread_mutex_lock(&srv->mtx);
    if (now - srv->log_window_ms >= SERVER_REFUSAL_WINDOW_MS) {
        srv->log_window_ms = now;
        srv->log_lines = 0;
    }
    if (srv->log_lines < SERVER_REFUSAL_LINES) {
        srv->log_lines++;
        say = 1;
        unsaid = srv->log_suppressed;
        srv->log_suppressed = 0;
    } else {
        srv->log_suppressed++;
    }
    pthread_mutex_unlock(&srv->mtx);
    if (!say)
        return;
    char more[80] = "";
    if (unsaid > 0)
        snprintf(more, sizeof(more), " (and %llu more refused before it)",
                 (unsigned long long)unsaid);
    if (peer->remote)
        CUMOD_LOGW("CUMOD-ACCESS", "%s from %s%s%s%s: %s; %s%s", what,
                   peer->addr, peer->tls ? " over TLS" : "",
                   peer->cn[0] ? ", certificate CN " : "", peer->cn, why, after,
                   more);
    else
        CUMOD_LOGW("CUMOD-ACCESS", "%s from pid %d uid %d gid %d: %s; %s%s",
                   what, peer->pid, peer->uid, peer->gid, why, after, more);
}

/* nng thread: a connection arrives, before it joins the socket. Closing it
 * here means nng never reads a request from it. */
static void
server_on_pipe_add(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    cumod_server *srv = arg;
    cumod_peer peer = server_pipe_peer(p);
    cumod_access a;
    srv_conn *c = NULL;
    const char *why = NULL;
    char buf[400];
    (void)ev;

    pthread_mutex_lock(&srv->mtx);
    a = srv->access; /* a copy: /proc is read without the lock */
    pthread_mutex_unlock(&srv->mtx);
    /* The operator (root, or cumodd's own user: its probe) is always
     * answered, whatever the limit. */
    int is_operator =
        peer.uid == 0 || (peer.uid >= 0 && (uint32_t)peer.uid == a.self_uid);
    why = cumod__access_refusal(&a, &peer, buf, sizeof(buf));
    if (why == NULL && (c = calloc(1, sizeof(*c))) == NULL)
        why = "out of memory";
    if (why == NULL) {
        c->pipe = p;
        c->peer = peer;
        pthread_mutex_lock(&srv->mtx);
        if (!is_operator && a.max_connections > 0 &&
            cumod__idmap_count(&srv->conns) >= a.max_connections) {
            snprintf(buf, sizeof(buf),
                     "%u connections are open, the limit "
                     "(--max-connections)",
                     a.max_connections);
            why = buf;
            srv->refused_limit++;
        } else if (cumod__idmap_set(&srv->conns, nng_pipe_id(p), c) !=
                   CUMOD_OK) {
            why = "out of memory";
        }
        if (why != NULL)
            srv->refused++;
        pthread_mutex_unlock(&srv->mtx);
    } else {
        pthread_mutex_lock(&srv->mtx);
        srv->refused++;
        pthread_mutex_unlock(&srv->mtx);
    }
    if (why == NULL)
        return;
    free(c);
    nng_pipe_close(p);
    server_log_refusal(srv, &peer, "refused a connection", why,
                       "it was closed before any request was read");
}

void
cumod__server_conns(cumod_server *srv, uint32_t *open, uint64_t *refused)
{
    pthread_mutex_lock(&srv->mtx);
    *open = (uint32_t)cumod__idmap_count(&srv->conns);
    *refused = srv->refused;
    pthread_mutex_unlock(&srv->mtx);
}

void
cumod__server_refusals(cumod_server *srv, uint64_t *access, uint64_t *limit)
{
    pthread_mutex_lock(&srv->mtx);
    *limit = srv->refused_limit;
    *access = srv->refused - srv->refused_limit;
    pthread_mutex_unlock(&srv->mtx);
}

void
cumod__server_set_access(cumod_server *srv, const cumod_access *a)
{
    srv_conn **all = NULL;
    size_t n = 0, cur = 0;
    srv_conn *c;

    pthread_mutex_lock(&srv->mtx);
    srv->access = *a;
    all = calloc(cumod__idmap_count(&srv->conns) + 1, sizeof(*all));
    while (all != NULL &&
           (c = cumod__idmap_next(&srv->conns, &cur, NULL)) != NULL)
        all[n++] = c;
    /* Copies: a connection may close (and its srv_conn go) meanwhile. */
    srv_conn *copies = calloc(n + 1, sizeof(*copies));
    for (size_t i = 0; copies != NULL && i < n; i++)
        copies[i] = *all[i];
    pthread_mutex_unlock(&srv->mtx);
    free(all);
    for (size_t i = 0; copies != NULL && i < n; i++) {
        char buf[400], why[600], after[120];
        const char *no =
            cumod__access_refusal(a, &copies[i].peer, buf, sizeof(buf));
        if (no == NULL)
            continue;
        nng_pipe_close(copies[i].pipe);
        if (copies[i].requests > 0)
            snprintf(after, sizeof(after),
                     "the open connection was closed after %llu request%s "
                     "read from it",
                     (unsigned long long)copies[i].requests,
                     copies[i].requests == 1 ? "" : "s");
        else
            snprintf(after, sizeof(after),
                     "the open connection was closed before any request "
                     "was read");
        snprintf(why, sizeof(why),
                 "no longer allowed by the reloaded settings (%s)", no);
        server_log_refusal(srv, &copies[i].peer, "closed a connection", why,
                           after);
    }
    free(copies);
}

/* nng thread: a client connection closed. */
static void
server_on_pipe_rem(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    cumod_server *srv = arg;
    (void)ev;
    pthread_mutex_lock(&srv->mtx);
    free(cumod__idmap_remove(&srv->conns, nng_pipe_id(p)));
    if (srv->ngone == srv->capgone) {
        size_t cap = srv->capgone ? srv->capgone * 2 : 64;
        uint32_t *g = realloc(srv->gone, cap * sizeof(*g));
        if (g == NULL) {
            pthread_mutex_unlock(&srv->mtx);
            CUMOD_LOGE("CUMOD-NOMEM", "pipe %u closed, its session leaks",
                       (unsigned)nng_pipe_id(p));
            return;
        }
        srv->gone = g;
        srv->capgone = cap;
    }
    srv->gone[srv->ngone++] = (uint32_t)nng_pipe_id(p);
    pthread_mutex_unlock(&srv->mtx);
    uv_async_send(&srv->async);
}

static void
server_on_async(uv_async_t *h)
{
    cumod_server *srv = h->data;
    cumod_list got;
    uint32_t *gone;
    size_t ngone;

    cumod__list_init(&got);
    pthread_mutex_lock(&srv->mtx);
    /* Requests first: a request that came before its pipe closed still
     * finds its session. */
    cumod__list_splice(&got, &srv->posted);
    gone = srv->gone;
    ngone = srv->ngone;
    srv->gone = NULL;
    srv->ngone = srv->capgone = 0;
    pthread_mutex_unlock(&srv->mtx);
    for (cumod_list_node *n; (n = cumod__list_pop(&got)) != NULL;)
        srv->cfg.cb(srv->cfg.arg, CUMOD_CONTAINER_OF(n, cumod_req, link));
    for (size_t i = 0; i < ngone; i++)
        if (srv->cfg.pipe_cb != NULL)
            srv->cfg.pipe_cb(srv->cfg.arg, gone[i]);
    free(gone);
}

/* A request over --max-message (nng's own limit is twice it, so that the
 * daemon sees the ones not far over and can say who sent them): dropped
 * and its connection closed, as nng does with larger ones, and logged with
 * its size and sender. The slot receives again. nng thread. */
static void
server_drop_oversize(srv_slot *s, nng_msg *msg)
{
    cumod_server *srv = s->srv;
    nng_pipe p = nng_msg_get_pipe(msg);
    size_t len = nng_msg_len(msg);
    cumod_peer peer = {.uid = -1, .gid = -1, .pid = -1};
    char why[160];

    nng_msg_free(msg);
    pthread_mutex_lock(&srv->mtx);
    srv_conn *c = cumod__idmap_get(&srv->conns, nng_pipe_id(p));
    if (c != NULL)
        peer = c->peer;
    pthread_mutex_unlock(&srv->mtx);
    nng_pipe_close(p);
    snprintf(why, sizeof(why),
             "a request of %zu bytes, over --max-message (%zu)", len,
             srv->cfg.max_msg);
    server_log_refusal(srv, &peer, "dropped a request", why,
                       "its connection was closed");
    slot_recv(s);
}

/* A request arrived on s (nng thread): decode it, then hand it to the loop;
 * what cannot be decoded, or finds the daemon full, is answered here. */
static void
server_on_request(srv_slot *s, nng_msg *msg)
{
    cumod_server *srv = s->srv;
    Cumod__Request *req;
    int over;

    if (nng_msg_len(msg) > srv->cfg.max_msg) {
        server_drop_oversize(s, msg);
        return;
    }
    s->pipe = nng_msg_get_pipe(msg);
    cumod__req_begin(&s->r, &server_req_ops);
    s->r.pipe_id = (uint32_t)nng_pipe_id(s->pipe);
    cumod_status dst;
    cumod_err drv = cumod__decode_request(&s->dec, nng_msg_body(msg),
                                          nng_msg_len(msg), &req, &dst);
    nng_msg_free(msg);
    pthread_mutex_lock(&srv->mtx);
    srv->nrecv--;
    srv->nloop++;
    over = srv->nloop > srv->max_requests;
    s->state = SLOT_LOOP;
    srv_conn *c = cumod__idmap_get(&srv->conns, nng_pipe_id(s->pipe));
    if (c != NULL)
        c->requests++;
    pthread_mutex_unlock(&srv->mtx);

    s->req = req; /* freed with the answer */
    s->r.id = req != NULL ? req->id : 0;
    if (drv != CUMOD_OK) {
        server_refill(srv); /* another slot receives in this one's place */
        cumod__req_answer(&s->r, drv, dst.msg, NULL);
        return;
    }
    s->r.msg = req;
    if (over) {
        char m[200];
        snprintf(m, sizeof(m),
                 "cumodd has %u requests in progress, its limit: retry later",
                 srv->max_requests);
        server_refill(srv);
        cumod__req_answer(&s->r, CUMOD_EBUSY, m, NULL);
        return;
    }
    pthread_mutex_lock(&srv->mtx);
    cumod__list_append(&srv->posted, &s->r.link);
    pthread_mutex_unlock(&srv->mtx);
    uv_async_send(&srv->async);
    /* Another slot receives in this one's place: after the hand-off to the
     * loop, so that arming it is not on this request's way. */
    server_refill(srv);
}

static void
server_on_aio(void *arg)
{
    srv_slot *s = arg;
    int rv = nng_aio_result(s->aio);
    int state;

    pthread_mutex_lock(&s->srv->mtx);
    state = s->state;
    pthread_mutex_unlock(&s->srv->mtx);
    switch (state) {
    case SLOT_RECV:
        if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
            return; /* shutting down */
        if (rv != 0) {
            CUMOD_LOGW("CUMOD-NNG", "receive failed: %s", nng_strerror(rv));
            slot_recv(s);
            return;
        }
        server_on_request(s, nng_aio_get_msg(s->aio));
        return;
    case SLOT_SEND:
        if (rv != 0) {
            /* A failed send leaves the message with us (nng #1713). */
            nng_msg_free(nng_aio_get_msg(s->aio));
            nng_aio_set_msg(s->aio, NULL);
            if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
                return;
            CUMOD_LOGD("CUMOD-NNG", "reply not delivered: %s",
                       nng_strerror(rv));
        }
        slot_after_send(s);
        return;
    default:
        CUMOD_LOGE("CUMOD-INTERNAL", "aio completion on a slot %s",
                   slot_state_names[state]);
        return;
    }
}

static void
server_on_async_close(uv_handle_t *h)
{
    cumod_server *srv = h->data;
    for (cumod_list_node *n; (n = cumod__list_pop(&srv->slots)) != NULL;) {
        srv_slot *s = CUMOD_CONTAINER_OF(n, srv_slot, all);
        if (s->aio != NULL)
            nng_aio_free(s->aio);
        cumod__decoder_fini(&s->dec);
        free(s);
    }
    free(srv->gone);
    size_t cur = 0;
    for (void *c; (c = cumod__idmap_next(&srv->conns, &cur, NULL)) != NULL;)
        free(c);
    cumod__idmap_fini(&srv->conns);
    pthread_mutex_destroy(&srv->mtx);
    free(srv);
}

cumod_err
cumod__server_open(uv_loop_t *loop, const cumod_server_cfg *cfg,
                   cumod_server **out, char *msg, size_t msglen)
{
    cumod_server *srv;
    nng_listener l;
    int rv;

    if ((srv = calloc(1, sizeof(*srv))) == NULL)
        return cumod__errf(msg, msglen, CUMOD_ENOMEM, "out of memory");
    srv->cfg = *cfg;
    srv->receivers = cfg->receivers ? cfg->receivers : SERVER_RECEIVERS;
    srv->max_requests =
        cfg->max_requests ? cfg->max_requests : SERVER_MAX_REQUESTS;
    cumod__list_init(&srv->slots);
    cumod__list_init(&srv->idle);
    cumod__list_init(&srv->posted);
    cumod__idmap_init(&srv->conns);
    srv->access = cfg->access;
    pthread_mutex_init(&srv->mtx, NULL);
    /* Before any pipe can exist: nng's threads post through it. */
    uv_async_init(loop, &srv->async, server_on_async);
    srv->async.data = srv;
    if ((rv = nng_rep0_open(&srv->sock)) != 0) {
        cumod__msgf(msg, msglen, "cannot open the rep socket: %s",
                    nng_strerror(rv));
        uv_close((uv_handle_t *)&srv->async, server_on_async_close);
        return CUMOD_EIO;
    }
    /* nng's default is no limit: a client could make us allocate anything.
     * Twice --max-message: nng cuts off a larger request as its length
     * arrives and says nothing of it; one up to twice the limit is read and
     * dropped by server_drop_oversize, which logs who sent it. */
    nng_socket_set_size(srv->sock, NNG_OPT_RECVMAXSZ,
                        cfg->max_msg > SIZE_MAX / 2 ? SIZE_MAX
                                                    : cfg->max_msg * 2);
    nng_pipe_notify(srv->sock, NNG_PIPE_EV_ADD_PRE, server_on_pipe_add, srv);
    nng_pipe_notify(srv->sock, NNG_PIPE_EV_REM_POST, server_on_pipe_rem, srv);
    if ((rv = nng_listener_create(&l, srv->sock, cfg->url)) != 0) {
        cumod__msgf(msg, msglen, "cannot listen on %s: %s", cfg->url,
                    nng_strerror(rv));
        goto fail;
    }
    if (cfg->tls.cert != NULL) {
        cumod_err e = cumod__tls_open(&cfg->tls, &srv->tls, msg, msglen);
        if (e != CUMOD_OK) {
            nng_close(srv->sock);
            uv_close((uv_handle_t *)&srv->async, server_on_async_close);
            return e;
        }
        if ((rv = nng_listener_set_ptr(l, NNG_OPT_TLS_CONFIG,
                                       cumod__tls_config(srv->tls))) != 0) {
            cumod__msgf(msg, msglen, "cannot set TLS on %s: %s", cfg->url,
                        nng_strerror(rv));
            goto fail;
        }
    }
    if (strncmp(cfg->url, "ipc://", 6) == 0 && cfg->ipc_mode > 0)
        nng_listener_set_int(l, NNG_OPT_IPC_PERMISSIONS, cfg->ipc_mode);
    if ((rv = nng_listener_start(l, 0)) != 0) {
        cumod__msgf(msg, msglen, "cannot listen on %s: %s%s", cfg->url,
                    nng_strerror(rv),
                    rv == NNG_EADDRINUSE ? " (is another cumodd running?)"
                                         : "");
        goto fail;
    }
    if (strncmp(cfg->url, "ipc://", 6) == 0 && cfg->ipc_group >= 0 &&
        chown(cfg->url + 6, (uid_t)-1, (gid_t)cfg->ipc_group) != 0) {
        cumod__msgf(msg, msglen,
                    "cannot give the socket %s to group %d (--socket-group): "
                    "%s",
                    cfg->url + 6, cfg->ipc_group, strerror(errno));
        goto fail;
    }
    if (cumod__relisten_start(loop, srv->sock, cfg->url, cfg->ipc_mode,
                              cfg->ipc_group, l, &srv->guard) != CUMOD_OK) {
        cumod__msgf(msg, msglen, "out of memory");
        goto fail;
    }
    server_refill(srv);
    if (srv->nrecv == 0) {
        cumod__msgf(msg, msglen, "cannot set up request contexts");
        cumod__relisten_stop(srv->guard);
        srv->guard = NULL;
        goto fail;
    }
    *out = srv;
    return CUMOD_OK;

fail:
    nng_close(srv->sock); /* no synchronous call is running on it */
    cumod__tls_close(srv->tls);
    uv_close((uv_handle_t *)&srv->async, server_on_async_close);
    return CUMOD_EIO;
}

cumod_err
cumod__server_listen(cumod_server *srv, const char *url, int *id, char *msg,
                     size_t msglen)
{
    const cumod_server_cfg *cfg = &srv->cfg;
    nng_listener l;
    int rv;

    if (srv->nextra >= SERVER_MAX_LISTENERS)
        return cumod__errf(msg, msglen, CUMOD_ELIMIT,
                           "cannot listen on %s: %d sockets already", url,
                           SERVER_MAX_LISTENERS + 1);
    if ((rv = nng_listener_create(&l, srv->sock, url)) != 0)
        return cumod__errf(msg, msglen, CUMOD_EIO, "cannot listen on %s: %s",
                           url, nng_strerror(rv));
    if (srv->tls != NULL && strncmp(url, "tls+", 4) == 0 &&
        (rv = nng_listener_set_ptr(l, NNG_OPT_TLS_CONFIG,
                                   cumod__tls_config(srv->tls))) != 0)
        return cumod__errf(msg, msglen, CUMOD_EIO, "cannot set TLS on %s: %s",
                           url, nng_strerror(rv));
    if (strncmp(url, "ipc://", 6) == 0 && cfg->ipc_mode > 0)
        nng_listener_set_int(l, NNG_OPT_IPC_PERMISSIONS, cfg->ipc_mode);
    if ((rv = nng_listener_start(l, 0)) != 0)
        return cumod__errf(msg, msglen, CUMOD_EIO, "cannot listen on %s: %s",
                           url, nng_strerror(rv));
    if (strncmp(url, "ipc://", 6) == 0 && cfg->ipc_group >= 0 &&
        chown(url + 6, (uid_t)-1, (gid_t)cfg->ipc_group) != 0)
        return cumod__errf(msg, msglen, CUMOD_EIO,
                           "cannot give the socket %s to group %d "
                           "(--socket-group): %s",
                           url + 6, cfg->ipc_group, strerror(errno));
    srv->extra[srv->nextra++] = l;
    *id = srv->nextra;
    return CUMOD_OK;
}

int
cumod__server_pipe_listener(const cumod_server *srv, uint32_t pipe_id)
{
    nng_pipe p = NNG_PIPE_INITIALIZER;
    p.id = pipe_id;
    nng_listener l = nng_pipe_listener(p);
    for (int i = 0; i < srv->nextra; i++)
        if (nng_listener_id(srv->extra[i]) == nng_listener_id(l) &&
            nng_listener_id(l) > 0)
            return i + 1;
    return 0;
}

/* How long a closing server waits for replies being sent. */
#define SERVER_CLOSE_SEND_MS 3000

/* Waits up to ms for no slot to be sending; how many still are. */
static unsigned
server_wait_sends(cumod_server *srv, int ms)
{
    struct timespec nap = {0, 1000000};
    unsigned sending = 0;

    for (int waited = 0;; waited++) {
        sending = 0;
        pthread_mutex_lock(&srv->mtx);
        CUMOD_LIST_FOREACH(&srv->slots, x)
        sending += CUMOD_CONTAINER_OF(x, srv_slot, all)->state == SLOT_SEND;
        pthread_mutex_unlock(&srv->mtx);
        if (sending == 0 || waited >= ms)
            break;
        nanosleep(&nap, NULL);
    }
    if (sending > 0)
        CUMOD_LOGW("CUMOD-STOP",
                   "%u replies not delivered within %d ms of stopping (their "
                   "clients read nothing)",
                   sending, ms);
    return sending;
}

void
cumod__server_close(cumod_server *srv)
{
    srv_slot *s;

    /* Order matters in nng 1.5.2 (DESIGN.md): stop every aio, close the
     * contexts, then the socket. nng_aio_stop waits for a running callback,
     * which may still add a slot (server_refill): slots are appended, so
     * walking on from the last one stopped reaches it. */
    pthread_mutex_lock(&srv->mtx);
    srv->closing = 1;
    pthread_mutex_unlock(&srv->mtx);
    cumod__relisten_stop(srv->guard);
    srv->guard = NULL;
    /* Replies being sent go out first: stopping their aio drops a reply
     * the loop has already given (a drain's last answers come right
     * before this, and every request gets one). Bounded, for a client
     * that reads nothing. */
    server_wait_sends(srv, SERVER_CLOSE_SEND_MS);
    for (cumod_list_node *n = NULL;;) {
        pthread_mutex_lock(&srv->mtx);
        n = n == NULL ? cumod__list_first(&srv->slots)
                      : cumod__list_next(&srv->slots, n);
        pthread_mutex_unlock(&srv->mtx);
        if (n == NULL)
            break;
        nng_aio_stop(CUMOD_CONTAINER_OF(n, srv_slot, all)->aio);
    }
    CUMOD_LIST_FOREACH(&srv->slots, x)
    {
        s = CUMOD_CONTAINER_OF(x, srv_slot, all);
        if (nng_aio_get_msg(s->aio) != NULL) {
            nng_msg_free(nng_aio_get_msg(s->aio));
            nng_aio_set_msg(s->aio, NULL);
        }
        nng_ctx_close(s->ctx);
    }
    nng_close(srv->sock);
    cumod__tls_close(srv->tls); /* after the listener let go of it */
    uv_close((uv_handle_t *)&srv->async, server_on_async_close);
}

cumod_err
cumod__server_set_tls(cumod_server *srv, const cumod_tls_opts *o, char *msg,
                      size_t msglen)
{
    if (srv->tls == NULL)
        return cumod__errf(msg, msglen, CUMOD_EINVAL,
                           "TLS cannot be added to a listener without it: "
                           "restart cumodd");
    return cumod__tls_reload(srv->tls, o, msg, msglen);
}
