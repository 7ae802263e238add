/* SPDX-License-Identifier: MIT */
/*
 * A guard for nng 1.5.2's listener (Debian 12's nng): a client that
 * disconnects during the SP handshake ends the listener's accept loop for
 * good (nanomsg/nng #1518, fixed in later releases), after which every new
 * client hangs. One connect-and-close (a port scanner, a second cumodd
 * checking whether the socket is live, a client killed while connecting)
 * would take the service down.
 *
 * Once a second, on the loop thread, the guard reads the listener's "other
 * errors" statistic (where that failure is counted); when it has grown, it
 * checks the listener with a raw handshake over a Unix socket, and if no
 * answer comes, unlinks the socket path and listens again on a new
 * listener. The dead one stays open, so the pipes it accepted before keep
 * working. ipc:// URLs only: other transports are left as they are.
 */
#ifndef CUMOD_RELISTEN_H
#define CUMOD_RELISTEN_H

#include <nng/nng.h>
#include <uv.h>

#include "cumod/errors.h"

typedef struct cumod_relisten cumod_relisten;

/* Starts guarding listener l of sock (listening on url; a new socket file
 * gets ipc_mode and, when >= 0, ipc_group). Loop thread. On success *out
 * is the guard; stop it with cumod__relisten_stop. */
cumod_err cumod__relisten_start(uv_loop_t *loop, nng_socket sock,
                                const char *url, int ipc_mode, int ipc_group,
                                nng_listener l, cumod_relisten **out);

/* How many times the guard had to listen again. */
unsigned cumod__relisten_count(const cumod_relisten *g);

/* Stops the timer; the guard is freed in its close callback. The listeners
 * close with their socket. Loop thread; accepts NULL. */
void cumod__relisten_stop(cumod_relisten *g);

#endif
