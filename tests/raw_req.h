/* SPDX-License-Identifier: MIT */
/*
 * A request made by hand over nng, as an old or hostile client would make
 * it (access_test, ring_test, handover_test): packed, sent and its reply
 * unpacked, nothing checked, so that a test can send what libcumod never
 * would and read the daemon's answer.
 */
#ifndef CUMOD_TEST_RAW_REQ_H
#define CUMOD_TEST_RAW_REQ_H

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "cumod.pb-c.h"

/* Sends req on s (version and id set when id is not NULL: the next of
 * *id) and returns the decoded reply (the caller frees it), or NULL when
 * it could not be sent or nothing came back (logged). */
static inline Cumod__Reply *
th_raw_call(nng_socket s, uint64_t *id, Cumod__Request *req)
{
    if (id != NULL) {
        req->version = 1;
        req->id = ++*id;
    }
    size_t n = cumod__request__get_packed_size(req);
    uint8_t *buf = malloc(n ? n : 1);
    cumod__request__pack(req, buf);
    int rv = nng_send(s, buf, n, 0);
    free(buf);
    if (rv != 0) {
        cr_log_warn("raw send: %s", nng_strerror(rv));
        return NULL;
    }
    void *got;
    size_t len;
    if ((rv = nng_recv(s, &got, &len, NNG_FLAG_ALLOC)) != 0) {
        cr_log_warn("raw recv: %s", nng_strerror(rv));
        return NULL;
    }
    Cumod__Reply *rep = cumod__reply__unpack(NULL, len, got);
    nng_free(got, len);
    return rep;
}

/* Dials url on a new req socket *s and says Hello: its reply (the caller
 * frees it), or NULL after five tries (the socket then closed). As
 * libcumod does, a connection is served once it answered: nng 1.5.2's
 * listener may drop one made just after another peer left (nng #1518),
 * so it dials again when the Hello goes unanswered. Replies are then
 * waited for up to 10 s. */
static inline Cumod__Reply *
th_raw_connect(nng_socket *s, uint64_t *id, const char *url)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__Hello h = CUMOD__HELLO__INIT;
    Cumod__Reply *rep = NULL;
    req.body_case = CUMOD__REQUEST__BODY_HELLO;
    req.hello = &h;
    for (int tries = 0; rep == NULL && tries < 5; tries++) {
        if (tries > 0)
            nng_close(*s);
        if (nng_req0_open(s) != 0)
            return NULL;
        nng_socket_set_ms(*s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
        nng_socket_set_ms(*s, NNG_OPT_RECVTIMEO, 2000);
        int rv = nng_dial(*s, url, NULL, 0);
        if (rv != 0) {
            cr_log_warn("dial %s: %s", url, nng_strerror(rv));
            struct timespec nap = {0, 200 * 1000 * 1000};
            nanosleep(&nap, NULL);
            continue;
        }
        rep = th_raw_call(*s, id, &req);
    }
    if (rep == NULL)
        nng_close(*s);
    else
        nng_socket_set_ms(*s, NNG_OPT_RECVTIMEO, 10000);
    return rep;
}

/* A reply's code (0: done; -1: no reply) and message ("" when none). */
static inline int
th_rcode(const Cumod__Reply *r)
{
    return r == NULL ? -1 : r->status ? r->status->code : 0;
}

static inline const char *
th_rmsg(const Cumod__Reply *r)
{
    return r && r->status && r->status->message ? r->status->message : "";
}

#endif
