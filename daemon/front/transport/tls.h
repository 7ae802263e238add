/* SPDX-License-Identifier: MIT */
/*
 * TLS for tls+tcp:// listeners: the server's certificate and key, and a CA
 * that client certificates must chain to (then required), loaded from PEM
 * files into a credential set that new connections use. SIGHUP loads a new
 * set (cumod__tls_reload): connections made from then on get it, the open
 * ones keep theirs, and the listener is never closed (closing an nng
 * listener closes every connection it accepted).
 *
 * Why cumodd has its own TLS engine (nng's engine API, over mbed TLS, as
 * nng's own): nng 1.5.2 (Debian 12) can neither swap the credentials of a
 * configuration in use nor say who a peer's certificate names (its
 * NNG_OPT_TLS_PEER_CN came in 1.6). The engine is registered for the whole
 * process the first time a set is opened; configurations that no set is
 * bound to behave as nng's own engine's (a client in the same process).
 */
#ifndef CUMOD_TLS_H
#define CUMOD_TLS_H

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>
#include <stddef.h>

#include "front/transport/access.h"
#include "cumod/errors.h"

typedef struct cumod_tls cumod_tls;

/* What a set is loaded from: the files of --tls-cert, --tls-key and
 * --tls-ca (NULL: no client certificates asked), and --allow-cert-subject
 * (checked in the handshake: a certificate whose CN and DNS names are none
 * of these fails it, and is logged so). The caller's strings are copied. */
typedef struct cumod_tls_opts {
    const char *cert, *key, *ca;
    const char *const *subjects;
    int nsubjects;
} cumod_tls_opts;

/* Loads o->cert (PEM: the server's certificate, its chain may follow),
 * o->key (PEM, unencrypted) and, when o->ca is not NULL, o->ca (PEM: the
 * CAs client certificates must chain to; a client without one is then
 * refused in its handshake, as is one no listed subject names) into a new
 * set, and an nng TLS configuration bound to it for
 * the listener (cumod__tls_config). Handshakes that fail are logged
 * (CUMOD-TLS, at most 10 lines in 10 s). On failure writes a sentence
 * naming the file and the option into msg and returns CUMOD_EINVAL (or
 * CUMOD_ENOMEM). Reads the files; loop thread. */
cumod_err cumod__tls_open(const cumod_tls_opts *o, cumod_tls **out, char *msg,
                          size_t msglen);

/* The nng configuration to set on the listener (NNG_OPT_TLS_CONFIG). */
nng_tls_config *cumod__tls_config(cumod_tls *t);

/* Loads a new set as cumod__tls_open does; on success new connections get
 * it. On failure nothing changes. Loop thread. */
cumod_err cumod__tls_reload(cumod_tls *t, const cumod_tls_opts *o, char *msg,
                            size_t msglen);

/* Drops the caller's hold; the set goes with the last connection. Accepts
 * NULL. */
void cumod__tls_close(cumod_tls *t);

/* For a TCP pipe (tcp:// or tls+tcp://): sets peer->remote, its address,
 * and for TLS peer->tls, ->verified and the names of its certificate (CN,
 * DNS subject alternative names; bytes outside printable ASCII read as
 * '?'). Returns 1 for a TCP pipe, 0 for any other. Any thread. */
int cumod__tls_peer(nng_pipe p, cumod_peer *peer);

#endif
