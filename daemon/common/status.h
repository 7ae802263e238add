/* SPDX-License-Identifier: MIT */
/*
 * Errors as the daemon passes them around: a cumod error code and a
 * sentence for a person, written once where the error is first understood.
 * Checks return a code and fill a status; whoever answers the request sends
 * both. Also the one formatter for "(msg, msglen)" out-parameters and the
 * one converter from errno (CUresult's is in exec/driver.h, nng's in
 * libcumod: one per foreign family, each where that family enters).
 *
 * Pure: any thread.
 */
#ifndef CUMOD_STATUS_H
#define CUMOD_STATUS_H

#include <stdarg.h>
#include <stddef.h>

#include "cumod/errors.h"

#define CUMOD_STATUS_MSG 1024

typedef struct cumod_status {
    cumod_err code;
    char msg[CUMOD_STATUS_MSG];
} cumod_status;

/* The one formatter of "(msg, msglen)" out-parameters: writes the sentence
 * into msg (msglen bytes; nothing when msg is NULL or msglen is 0). */
void cumod__msgf(char *msg, size_t msglen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The same, returning code: `return cumod__errf(msg, len, CUMOD_EIMAGE,
 * "%s: ...", name);`. */
cumod_err cumod__errf(char *msg, size_t msglen, cumod_err code, const char *fmt,
                      ...) __attribute__((format(printf, 4, 5)));
cumod_err cumod__verrf(char *msg, size_t msglen, cumod_err code,
                       const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

/* Sets st (when non-NULL) to code and the sentence; returns code. */
cumod_err cumod__status_set(cumod_status *st, cumod_err code, const char *fmt,
                            ...) __attribute__((format(printf, 3, 4)));

/* A status that says success. */
static inline void
cumod__status_ok(cumod_status *st)
{
    st->code = CUMOD_OK;
    st->msg[0] = '\0';
}

/* Prefixes st's sentence with prefix (e.g. "item 3: "). */
void cumod__status_prefix(cumod_status *st, const char *prefix);

/* The cumod error for an errno value: ENOENT and ENOTDIR CUMOD_ENOENT;
 * EACCES, EPERM, EXDEV and ELOOP CUMOD_EPERM; EINVAL and ENAMETOOLONG
 * CUMOD_EINVAL; ENOMEM, EMFILE, ENFILE and ENOSPC CUMOD_ENOMEM; EFBIG
 * CUMOD_ETOOBIG; EAGAIN and EBUSY CUMOD_EBUSY; ETIMEDOUT CUMOD_ETIMEDOUT;
 * EPIPE, ECONNRESET and ENOTCONN CUMOD_ECLOSED; EPROTO CUMOD_EPROTO;
 * anything else CUMOD_EIO. */
cumod_err cumod__errno_err(int e);

#endif
