#include "server.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/protocol/reqrep0/rep.h>

#include "cumod/errors.h"
#include "log.h"
#include "relisten.h"

enum server_state {
    SERVER_RECV = 1, /* a receive is armed */
    SERVER_LOOP,     /* handed to the loop, which will reply */
    SERVER_SEND,     /* a send is armed */
};

struct cumod_server {
    nng_socket sock;
    cumod_server_cfg cfg;
    int nwork;
    cumod_work *works;
    uv_async_t async;
    /* The hand-off queue from nng's threads to the loop. Lock order: this
     * mutex is a leaf; nothing else is taken while it is held. */
    pthread_mutex_t mtx;
    cumod_work *head, *tail;
    uint32_t *gone; /* pipe ids that closed, for the loop */
    size_t ngone, capgone;
    int closing;
    cumod_relisten *guard;
};

static void server_on_aio(void *arg);

static void
server_post(cumod_server *srv, cumod_work *w)
{
    w->next = NULL;
    pthread_mutex_lock(&srv->mtx);
    if (srv->tail)
        srv->tail->next = w;
    else
        srv->head = w;
    srv->tail = w;
    pthread_mutex_unlock(&srv->mtx);
    uv_async_send(&srv->async);
}

/* nng thread: a client connection closed. */
static void
server_on_pipe_rem(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    cumod_server *srv = arg;
    (void)ev;
    pthread_mutex_lock(&srv->mtx);
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
    cumod_work *w;
    uint32_t gone[256];
    size_t ngone;

    pthread_mutex_lock(&srv->mtx);
    w = srv->head;
    srv->head = srv->tail = NULL;
    /* Requests first: a request that came before its pipe closed still
     * finds its session. */
    ngone = srv->ngone < 256 ? srv->ngone : 256;
    if (ngone > 0) {
        memcpy(gone, srv->gone, ngone * sizeof(uint32_t));
        memmove(srv->gone, srv->gone + ngone,
                (srv->ngone - ngone) * sizeof(uint32_t));
        srv->ngone -= ngone;
    }
    int more = srv->ngone > 0;
    pthread_mutex_unlock(&srv->mtx);
    if (more)
        uv_async_send(&srv->async);
    while (w != NULL) {
        cumod_work *next = w->next;
        w->next = NULL;
        srv->cfg.cb(srv->cfg.arg, w);
        w = next;
    }
    for (size_t i = 0; i < ngone; i++)
        if (srv->cfg.pipe_cb != NULL)
            srv->cfg.pipe_cb(srv->cfg.arg, gone[i]);
}

static void
server_recv(cumod_work *w)
{
    if (w->req != NULL) {
        cumod__request__free_unpacked(w->req, NULL);
        w->req = NULL;
    }
    w->state = SERVER_RECV;
    nng_ctx_recv(w->ctx, w->aio);
}

static void
server_send_msg(cumod_work *w, Cumod__Reply *reply)
{
    nng_msg *msg;
    size_t len = cumod__reply__get_packed_size(reply);
    int rv;

    if ((rv = nng_msg_alloc(&msg, len)) != 0) {
        CUMOD_LOGE("CUMOD-NNG", "cannot allocate a %zu-byte reply: %s", len,
                   nng_strerror(rv));
        server_recv(w); /* the client times out; nothing else to do */
        return;
    }
    cumod__reply__pack(reply, nng_msg_body(msg));
    w->state = SERVER_SEND;
    nng_aio_set_msg(w->aio, msg);
    nng_ctx_send(w->ctx, w->aio);
}

void
cumod__server_reply(cumod_work *w, Cumod__Reply *reply)
{
    reply->version = CUMOD__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    reply->id = w->req ? w->req->id : 0;
    server_send_msg(w, reply);
}

static void server_vfail(cumod_work *w, uint64_t id, int code, const char *fmt,
                         va_list ap) __attribute__((format(printf, 4, 0)));

static void
server_vfail(cumod_work *w, uint64_t id, int code, const char *fmt, va_list ap)
{
    Cumod__Reply reply = CUMOD__REPLY__INIT;
    Cumod__Status st = CUMOD__STATUS__INIT;
    Cumod__BatchReply br = CUMOD__BATCH_REPLY__INIT;
    char msg[1024];

    vsnprintf(msg, sizeof(msg), fmt, ap);
    st.code = code;
    st.message = msg;
    reply.status = &st;
    if (w->req != NULL && w->req->body_case == CUMOD__REQUEST__BODY_BATCH) {
        /* A refused batch says which item: nothing of it ran. */
        br.failed_index = w->batch_item;
        reply.body_case = CUMOD__REPLY__BODY_BATCH;
        reply.batch = &br;
    }
    reply.version = CUMOD__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    reply.id = id;
    server_send_msg(w, &reply);
}

void
cumod__server_fail(cumod_work *w, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    server_vfail(w, w->req ? w->req->id : 0, code, fmt, ap);
    va_end(ap);
}

static void server_fail_id(cumod_work *w, uint64_t id, int code,
                           const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
server_fail_id(cumod_work *w, uint64_t id, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    server_vfail(w, id, code, fmt, ap);
    va_end(ap);
}

/* A request arrived on w (nng thread): decode and check it, then post it to
 * the loop; what cannot be decoded is answered here. */
static void
server_on_request(cumod_work *w, nng_msg *msg)
{
    Cumod__Request *req;

    w->pipe = nng_msg_get_pipe(msg);
    req = cumod__request__unpack(NULL, nng_msg_len(msg), nng_msg_body(msg));
    nng_msg_free(msg);
    if (req == NULL) {
        server_fail_id(w, 0, CUMOD_EPROTO,
                       "the request is not a valid cumod.Request message");
        return;
    }
    if (req->version != CUMOD__PROTOCOL_VERSION__PROTOCOL_VERSION_1) {
        uint64_t id = req->id;
        unsigned ver = req->version;
        cumod__request__free_unpacked(req, NULL);
        server_fail_id(w, id, CUMOD_EVERSION,
                       "protocol version %u is not supported; this cumodd "
                       "speaks version %d",
                       ver, CUMOD__PROTOCOL_VERSION__PROTOCOL_VERSION_1);
        return;
    }
    w->req = req;
    w->batch_item = -1;
    w->state = SERVER_LOOP;
    server_post(w->srv, w);
}

static void
server_on_aio(void *arg)
{
    cumod_work *w = arg;
    int rv = nng_aio_result(w->aio);

    switch (w->state) {
    case SERVER_RECV:
        if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
            return; /* shutting down */
        if (rv != 0) {
            CUMOD_LOGW("CUMOD-NNG", "receive failed: %s", nng_strerror(rv));
            server_recv(w);
            return;
        }
        server_on_request(w, nng_aio_get_msg(w->aio));
        return;
    case SERVER_SEND:
        if (rv != 0) {
            /* A failed send leaves the message with us (nng #1713). */
            nng_msg_free(nng_aio_get_msg(w->aio));
            nng_aio_set_msg(w->aio, NULL);
            if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
                return;
            CUMOD_LOGD("CUMOD-NNG", "reply not delivered: %s",
                       nng_strerror(rv));
        }
        server_recv(w);
        return;
    default:
        CUMOD_LOGE("CUMOD-NNG", "aio completion in state %d", w->state);
        return;
    }
}

void
cumod__server_peer(nng_pipe p, int *uid, int *gid, int *pid)
{
    uint64_t v;
    *uid = *gid = *pid = -1;
    if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, &v) == 0)
        *uid = (int)v;
    if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_GID, &v) == 0)
        *gid = (int)v;
    if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_PID, &v) == 0)
        *pid = (int)v;
}

static void
server_free(cumod_server *srv)
{
    for (int i = 0; i < srv->nwork; i++) {
        cumod_work *w = &srv->works[i];
        if (w->aio != NULL)
            nng_aio_free(w->aio);
        if (w->req != NULL)
            cumod__request__free_unpacked(w->req, NULL);
    }
    free(srv->works);
    free(srv->gone);
    pthread_mutex_destroy(&srv->mtx);
    free(srv);
}

static void
server_on_async_close(uv_handle_t *h)
{
    server_free(h->data);
}

int
cumod__server_open(uv_loop_t *loop, const cumod_server_cfg *cfg,
                   cumod_server **out, char *msg, size_t msglen)
{
    cumod_server *srv;
    nng_listener l;
    int rv;

    if ((srv = calloc(1, sizeof(*srv))) == NULL ||
        (srv->works = calloc((size_t)cfg->nctx, sizeof(cumod_work))) == NULL) {
        free(srv);
        snprintf(msg, msglen, "out of memory");
        return CUMOD_ENOMEM;
    }
    srv->cfg = *cfg;
    srv->nwork = cfg->nctx;
    pthread_mutex_init(&srv->mtx, NULL);
    /* Before any pipe can exist: nng's threads post through it. */
    uv_async_init(loop, &srv->async, server_on_async);
    srv->async.data = srv;
    if ((rv = nng_rep0_open(&srv->sock)) != 0) {
        snprintf(msg, msglen, "cannot open the rep socket: %s",
                 nng_strerror(rv));
        uv_close((uv_handle_t *)&srv->async, server_on_async_close);
        return CUMOD_EIO;
    }
    /* nng's default is no limit: a client could make us allocate anything. */
    nng_socket_set_size(srv->sock, NNG_OPT_RECVMAXSZ, cfg->max_msg);
    nng_pipe_notify(srv->sock, NNG_PIPE_EV_REM_POST, server_on_pipe_rem, srv);
    for (int i = 0; i < srv->nwork; i++) {
        cumod_work *w = &srv->works[i];
        w->srv = srv;
        if ((rv = nng_aio_alloc(&w->aio, server_on_aio, w)) != 0 ||
            (rv = nng_ctx_open(&w->ctx, srv->sock)) != 0) {
            snprintf(msg, msglen, "cannot set up request contexts: %s",
                     nng_strerror(rv));
            goto fail;
        }
    }
    if ((rv = nng_listener_create(&l, srv->sock, cfg->url)) != 0) {
        snprintf(msg, msglen, "cannot listen on %s: %s", cfg->url,
                 nng_strerror(rv));
        goto fail;
    }
    if (strncmp(cfg->url, "ipc://", 6) == 0 && cfg->ipc_mode > 0)
        nng_listener_set_int(l, NNG_OPT_IPC_PERMISSIONS, cfg->ipc_mode);
    if ((rv = nng_listener_start(l, 0)) != 0) {
        snprintf(msg, msglen, "cannot listen on %s: %s%s", cfg->url,
                 nng_strerror(rv),
                 rv == NNG_EADDRINUSE ? " (is another cumodd running?)" : "");
        goto fail;
    }
    if ((rv = cumod__relisten_start(loop, srv->sock, cfg->url, cfg->ipc_mode, l,
                                    &srv->guard)) != CUMOD_OK) {
        snprintf(msg, msglen, "out of memory");
        goto fail;
    }
    for (int i = 0; i < srv->nwork; i++)
        server_recv(&srv->works[i]);
    *out = srv;
    return CUMOD_OK;

fail:
    nng_close(srv->sock); /* no synchronous call is running on it */
    uv_close((uv_handle_t *)&srv->async, server_on_async_close);
    return CUMOD_EIO;
}

void
cumod__server_close(cumod_server *srv)
{
    /* Order matters in nng 1.5.2 (DESIGN.md): stop every aio, close the
     * contexts, then the socket. nng_aio_stop waits for a running callback,
     * which at most posts to our queue. */
    srv->closing = 1;
    cumod__relisten_stop(srv->guard);
    srv->guard = NULL;
    for (int i = 0; i < srv->nwork; i++)
        nng_aio_stop(srv->works[i].aio);
    for (int i = 0; i < srv->nwork; i++) {
        cumod_work *w = &srv->works[i];
        if (w->state == SERVER_SEND && nng_aio_get_msg(w->aio) != NULL) {
            nng_msg_free(nng_aio_get_msg(w->aio));
            nng_aio_set_msg(w->aio, NULL);
        }
        nng_ctx_close(w->ctx);
    }
    nng_close(srv->sock);
    uv_close((uv_handle_t *)&srv->async, server_on_async_close);
}
