/* SPDX-License-Identifier: MIT */
/*
 * The nng side of the front: a rep0 socket, the receive capacity, and the
 * one place where replies leave.
 *
 * Receive capacity never runs out because requests are waiting. Each
 * request arrives on a slot (an nng context and its aio); a request the
 * loop has not answered yet keeps its slot, since a rep0 reply must leave
 * on the context that received it. So the server keeps `receivers` slots
 * armed at all times: when one receives, another is armed in its place (a
 * spare slot, or a new one), up to `max_requests` requests in progress;
 * past that, new requests are answered CUMOD_EBUSY at once, on nng's
 * thread, so the daemon still answers everyone. Slots are kept for reuse,
 * never freed before the server closes (a slot is an nng context and an
 * aio, about half a KiB), which is also what makes the exactly-once check
 * (req.h) safe to run on any pointer the loop ever held.
 *
 * Why contexts grown on demand rather than a raw (cooked-less) rep socket:
 * nng 1.5.2's raw rep0 queues replies per pipe in a queue of 64 and drops
 * what does not fit (xrep0_sock_getq_cb), so a client with many requests
 * outstanding could lose replies; a context keeps nng's own per-request
 * back-pressure and its request-id handling.
 *
 * Who may connect is checked when a connection arrives (nng's
 * NNG_PIPE_EV_ADD_PRE, before the pipe joins the socket, so none of its
 * requests is ever read): the peer's credentials against the access
 * policy (access.h), and the number of connections open against its
 * limit. A refused connection is closed and logged once.
 *
 * nng runs the aio callbacks on its own threads; they only decode the
 * request and post it to the loop thread (a locked queue plus
 * uv_async_send, which coalesces: the loop drains the whole queue each
 * time).
 */
#ifndef CUMOD_SERVER_H
#define CUMOD_SERVER_H

#include <nng/nng.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "front/transport/access.h"
#include "front/transport/tls.h"
#include "cumod.pb-c.h"
#include "common/list.h"
#include "front/transport/req.h"
#include "common/status.h"

typedef struct cumod_server cumod_server;

/* Requests (cumod_req, their answer and their guard) are req.h's; the
 * server is their nng transport. */

/* Called on the loop thread for each request, in arrival order per queue
 * drain. */
typedef void (*cumod_server_cb)(void *arg, cumod_req *r);

/* Called on the loop thread when a client connection (pipe) has closed,
 * after every request that came on it before has been handed over. */
typedef void (*cumod_server_pipe_cb)(void *arg, uint32_t pipe_id);

typedef struct cumod_server_cfg {
    const char *url;       /* where to listen, e.g. ipc:///run/cumod/x.sock */
    size_t max_msg;        /* NNG_OPT_RECVMAXSZ */
    int ipc_mode;          /* permissions of an ipc socket file, e.g. 0660 */
    int ipc_group;         /* its group; -1: the daemon's */
    cumod_access access;   /* who may connect, and how many at once */
    uint32_t receivers;    /* slots kept armed (0: 16) */
    uint32_t max_requests; /* requests in progress before EBUSY (0: 65536) */
    cumod_server_cb cb;    /* the loop's request handler */
    cumod_server_pipe_cb pipe_cb; /* connections that closed */
    void *arg;
    /* tls+tcp://: the PEM files and the subjects allowed (tls.h); cert
     * NULL: no TLS */
    cumod_tls_opts tls;
} cumod_server_cfg;

/* Opens the socket, listens on cfg->url and starts receiving. The handler
 * runs on loop's thread. On failure writes a sentence into msg. Loop
 * thread. */
cumod_err cumod__server_open(uv_loop_t *loop, const cumod_server_cfg *cfg,
                             cumod_server **out, char *msg, size_t msglen);

/* Listens on one more url (a [domain] section's socket), with cfg's
 * permissions and TLS; *id numbers it (1, 2, ...) for
 * cumod__server_pipe_listener. On failure writes a sentence into msg. */
cumod_err cumod__server_listen(cumod_server *srv, const char *url, int *id,
                               char *msg, size_t msglen);

/* The listener a connection came by: 0 for cfg->url, else the id
 * cumod__server_listen gave. Loop thread. */
int cumod__server_pipe_listener(const cumod_server *srv, uint32_t pipe_id);

/* Requests handed to the loop and not answered yet, and slots made. */
void cumod__server_counts(cumod_server *srv, uint32_t *in_progress,
                          uint32_t *slots);

/* Connections open now, and refused since start (not allowed, or past
 * max_connections). Any thread. */
void cumod__server_conns(cumod_server *srv, uint32_t *open, uint64_t *refused);
/* Of the connections refused: those --allow-uid / --allow-gid /
 * --allow-cert-subject refused (and the few refused for want of memory),
 * and those over --max-connections. Any thread. */
void cumod__server_refusals(cumod_server *srv, uint64_t *access,
                            uint64_t *limit);

/* A new policy (SIGHUP): connections that arrive from now on are checked
 * against it, and open ones whose peer it no longer allows are closed
 * (each logged). Loop thread. */
void cumod__server_set_access(cumod_server *srv, const cumod_access *a);

/* SIGHUP: TLS connections made from now on get the certificate, key and
 * CA of these files and are checked against these subjects (open ones
 * keep theirs). On failure (a file that does
 * not load, or a listener without TLS) writes why into msg and nothing
 * changes. Loop thread. */
cumod_err cumod__server_set_tls(cumod_server *srv, const cumod_tls_opts *o,
                                char *msg, size_t msglen);

/* Stops every slot (waits for running callbacks), closes the socket and
 * frees the server, requests still queued for the loop included. The loop
 * must not answer requests afterwards (answer them first). The async
 * handle is closed; the memory is freed in its close callback. Loop
 * thread. */
void cumod__server_close(cumod_server *srv);

#endif
