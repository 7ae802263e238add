/* SPDX-License-Identifier: MIT */
/*
 * The detail of the last error (one per thread, like errno) and the log
 * hook: what every file of libcumod reports through. A leaf: it calls no
 * other file of the library.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

#include "client_internal.h"

/* Like errno: one per thread, so concurrent callers never see each other's
 * messages. With the log handler below, the only mutable state outside a
 * client. */
static _Thread_local char client_detail[1024];

/* cumod_set_log_handler's: the process's, as a library's log hook is. */
static _Atomic(cumod_log_fn) client_log_fn;
static void *_Atomic client_log_arg;

const char *
cumod_last_detail(void)
{
    return client_detail;
}

int
cumod__client_set_error(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(client_detail, sizeof(client_detail), fmt, ap);
    va_end(ap);
    return code;
}

void
cumod_set_log_handler(cumod_log_fn fn, void *arg)
{
    atomic_store(&client_log_arg, arg);
    atomic_store(&client_log_fn, fn);
}

void
cumod__client_log(int level, const char *fmt, ...)
{
    cumod_log_fn fn = atomic_load(&client_log_fn);
    char msg[512];
    va_list ap;

    if (fn == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fn(level, msg, atomic_load(&client_log_arg));
}

int
cumod__client_ok(void)
{
    client_detail[0] = '\0';
    return CUMOD_OK;
}
