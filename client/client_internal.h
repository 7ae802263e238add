/*
 * What the files of libcumod share; not installed.
 */
#ifndef CUMOD_CLIENT_INTERNAL_H
#define CUMOD_CLIENT_INTERNAL_H

#include <nng/nng.h>
#include <stdatomic.h>

#include "cumod.pb-c.h"
#include "cumod/cumod.h"

struct cumod_client {
    nng_socket sock;
    int timeout_ms;
    _Atomic uint64_t next_id;
    char url[512];
};

/* Sets this thread's detail message and returns code. */
int cumod__client_set_error(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* One request, one reply: fills in version and id, sends, waits. A reply
 * whose status is not OK becomes that error (its message the detail). On
 * success *out is the decoded reply, freed by the caller with
 * cumod__reply__free_unpacked. Blocks up to the client's timeout. */
int cumod__client_call(cumod_client *c, Cumod__Request *req,
                       Cumod__Reply **out);

#endif
