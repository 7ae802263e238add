/*
 * The nng side of the front: a rep0 socket with a fixed set of contexts,
 * each an explicit state machine (receive, hand to the loop, send). nng runs
 * the aio callbacks on its own threads; they only decode the request and
 * post the work item to the loop thread (a locked queue plus uv_async_send,
 * which coalesces: the loop drains the whole queue each time).
 */
#ifndef CUMOD_SERVER_H
#define CUMOD_SERVER_H

#include <nng/nng.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "cumod.pb-c.h"

typedef struct cumod_server cumod_server;
typedef struct cumod_work cumod_work;

/* One request in progress. Owned by its server; the loop may read req and
 * pipe and must answer every work it is handed exactly once, through
 * cumod__server_reply or cumod__server_fail. */
struct cumod_work {
    cumod_server *srv;
    Cumod__Request *req; /* decoded; freed after the reply is sent */
    nng_pipe pipe;       /* the client connection it came on */
    cumod_work *next;    /* loop-side queues */
    int loop_op;         /* loop-side: what a parked request waits for */
    int batch_item;      /* loop-side: the Batch item being checked, or -1;
                            a failure then carries it as failed_index */
    /* server-private below */
    nng_ctx ctx;
    nng_aio *aio;
    int state;
};

/* Called on the loop thread for each request, in arrival order per queue
 * drain. */
typedef void (*cumod_server_cb)(void *arg, cumod_work *w);

/* Called on the loop thread when a client connection (pipe) has closed. */
typedef void (*cumod_server_pipe_cb)(void *arg, uint32_t pipe_id);

typedef struct cumod_server_cfg {
    const char *url;    /* where to listen, e.g. ipc:///run/cumod/cumodd.sock */
    size_t max_msg;     /* NNG_OPT_RECVMAXSZ */
    int ipc_mode;       /* permissions of an ipc socket file, e.g. 0660 */
    int nctx;           /* requests served concurrently */
    cumod_server_cb cb; /* the loop's request handler */
    cumod_server_pipe_cb pipe_cb; /* connections that closed */
    void *arg;
} cumod_server_cfg;

/* Opens the socket, listens on cfg->url and starts receiving. The handler
 * runs on loop's thread. On failure writes a sentence into msg. Loop thread. */
int cumod__server_open(uv_loop_t *loop, const cumod_server_cfg *cfg,
                       cumod_server **out, char *msg, size_t msglen);

/* Sends reply for w (packs it; reply's version and id are filled in here)
 * and re-arms the context. Any thread; w must not be touched after. */
void cumod__server_reply(cumod_work *w, Cumod__Reply *reply);

/* Answers w with an error status. Any thread; w is not touched after. */
void cumod__server_fail(cumod_work *w, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Stops every context (waits for running callbacks), closes the socket and
 * frees the server, including work items still queued for the loop. Must be
 * called on the loop thread; the loop must not hold works afterwards (fail
 * them first). The async handle is closed; the server memory is freed in
 * its close callback. */
void cumod__server_close(cumod_server *srv);

/* The peer's credentials for a pipe (IPC only); -1 where unknown. */
void cumod__server_peer(nng_pipe p, int *uid, int *gid, int *pid);

#endif
