/* SPDX-License-Identifier: MIT */
#include "status.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

cumod_err
cumod__verrf(char *msg, size_t msglen, cumod_err code, const char *fmt,
             va_list ap)
{
    if (msg != NULL && msglen > 0)
        vsnprintf(msg, msglen, fmt, ap);
    return code;
}

void
cumod__msgf(char *msg, size_t msglen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cumod__verrf(msg, msglen, CUMOD_OK, fmt, ap);
    va_end(ap);
}

cumod_err
cumod__errf(char *msg, size_t msglen, cumod_err code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cumod__verrf(msg, msglen, code, fmt, ap);
    va_end(ap);
    return code;
}

cumod_err
cumod__status_set(cumod_status *st, cumod_err code, const char *fmt, ...)
{
    va_list ap;
    if (st == NULL)
        return code;
    st->code = code;
    va_start(ap, fmt);
    cumod__verrf(st->msg, sizeof(st->msg), code, fmt, ap);
    va_end(ap);
    return code;
}

void
cumod__status_prefix(cumod_status *st, const char *prefix)
{
    char tmp[CUMOD_STATUS_MSG];
    snprintf(tmp, sizeof(tmp), "%s%s", prefix, st->msg);
    memcpy(st->msg, tmp, sizeof(tmp));
}

cumod_err
cumod__errno_err(int e)
{
    switch (e) {
    case 0:
        return CUMOD_OK;
    case ENOENT:
    case ENOTDIR:
        return CUMOD_ENOENT;
    case EACCES:
    case EPERM:
    case EXDEV:
    case ELOOP:
        return CUMOD_EPERM;
    case EINVAL:
    case ENAMETOOLONG:
        return CUMOD_EINVAL;
    case ENOMEM:
    case EMFILE:
    case ENFILE:
    case ENOSPC:
        return CUMOD_ENOMEM;
    case EFBIG:
        return CUMOD_ETOOBIG;
    case EAGAIN:
    case EBUSY:
        return CUMOD_EBUSY;
    case ETIMEDOUT:
        return CUMOD_ETIMEDOUT;
    case EPIPE:
    case ECONNRESET:
    case ENOTCONN:
        return CUMOD_ECLOSED;
    case EPROTO:
        return CUMOD_EPROTO;
    default:
        return CUMOD_EIO;
    }
}
