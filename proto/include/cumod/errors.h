/* SPDX-License-Identifier: MIT */
/*
 * The one error list of cumod, shared by the daemon, libcumod and the wire
 * protocol (Status.code carries these numbers). Evolve by addition: never
 * renumber a row.
 */
#ifndef CUMOD_ERRORS_H
#define CUMOD_ERRORS_H

#ifdef __cplusplus
extern "C" {
#endif

/* XX(NAME, number, "what it means") */
#define CUMOD_ERRNO_MAP(XX)                                                    \
    XX(OK, 0, "success")                                                       \
    XX(EINVAL, 1, "invalid argument")                                          \
    XX(ENOMEM, 2, "out of host memory")                                        \
    XX(ENOENT, 3, "not found")                                                 \
    XX(EEXIST, 4, "already exists")                                            \
    XX(EBUSY, 5, "busy")                                                       \
    XX(ETIMEDOUT, 6, "timed out")                                              \
    XX(ECLOSED, 7, "connection closed")                                        \
    XX(ECONNREFUSED, 8, "connection refused: is cumodd running?")              \
    XX(EPROTO, 9, "protocol error")                                            \
    XX(EVERSION, 10, "protocol version not supported")                         \
    XX(EIO, 11, "input/output error")                                          \
    XX(EPERM, 12, "operation not permitted")                                   \
    XX(ETOOBIG, 13, "message or file too large")                               \
    XX(ENOTSUP, 14, "not supported")                                           \
    XX(ENODRIVER, 15, "CUDA driver library not found")                         \
    XX(EDRIVER, 16, "CUDA driver call failed")                                 \
    XX(ENODEVICE, 17, "no such CUDA device")                                   \
    XX(ECTXLOST, 18, "CUDA context lost: the executor is restarting")          \
    XX(EDEVMEM, 19, "out of device memory")                                    \
    XX(EIMAGE, 20, "invalid or incompatible kernel image")                     \
    XX(ESHUTDOWN, 21, "daemon shutting down")                                  \
    XX(EINTERNAL, 22, "internal error")                                        \
    XX(EQUARANTINED, 23, "module quarantined after a fault or a hang")         \
    XX(ELIMIT, 24, "over a limit of this connection or of the daemon")

typedef enum cumod_err {
#define CUMOD_ERR_ENUM(name, num, msg) CUMOD_##name = (num),
    CUMOD_ERRNO_MAP(CUMOD_ERR_ENUM)
#undef CUMOD_ERR_ENUM
} cumod_err;

/* A sentence for the code ("not found"); "unknown error" for unknown codes.
 * The string is static. Any thread. */
const char *cumod_strerror(int err);

/* The code's name ("CUMOD_ENOENT"); "CUMOD_E?" for unknown codes. Static,
 * any thread. */
const char *cumod_errname(int err);

#ifdef __cplusplus
}
#endif
#endif
