/* SPDX-License-Identifier: MIT */
/*
 * Service: answers on the channel, from any thread of the executor (the
 * channel is a SOCK_SEQPACKET socket: a packet goes whole whichever thread
 * sends it). Handlers and the other services call it; it calls nothing of
 * the executor's.
 */
#ifndef CUMOD_EXEC_REPLY_H
#define CUMOD_EXEC_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include "exec.h"

/* Sends one packet to the front: through the completion ring when there
 * is one and it fits (waiting for room while the front reads), else over
 * the socket. 0, or -errno of the socket. */
int cumod__exec_send(cumod_exec *ex, cumod_chan_hdr *hdr, const void *payload,
                     size_t len);

/* Answers req with its op and seq, status and payload (len bytes, may be
 * 0). 0 or -errno of the channel. Any thread. */
int cumod__exec_reply(cumod_exec *ex, const cumod_chan_hdr *req, int status,
                      const void *payload, size_t len);

/* Answers seq with a DONE packet (status, failed item, message, data).
 * 0 or -errno of the channel. Any thread. */
int cumod__exec_send_done(cumod_exec *ex, uint64_t seq, int status, int failed,
                          const char *msg, const void *data, uint64_t dlen);
/* The same with the WORK's device time (cumod_chan_done.gpu_ns). */
int cumod__exec_send_done_ns(cumod_exec *ex, uint64_t seq, int status,
                             int failed, const char *msg, const void *data,
                             uint64_t dlen, uint64_t gpu_ns);

/* The context is lost (r is on CUMOD_CU_CONTEXT_LOST): says so on the
 * channel, logs it and ends the process, so that the front starts a new
 * executor. Any thread. */
void cumod__exec_context_lost(cumod_exec *ex, CUresult r)
    __attribute__((noreturn));

/* After the reply to the command that met r: a lost context ends the
 * process (cumod__exec_context_lost). */
static inline void
cumod__exec_check_lost(cumod_exec *ex, CUresult r)
{
    if (cumod__cu_context_lost(r))
        cumod__exec_context_lost(ex, r);
}

/* A handler's start, for a command that carries no descriptor: fd closed
 * if one came (a front's mistake), and the command's fixed part (size
 * bytes, 0 for a command of none: out may be NULL) copied from payload
 * into out. -1 when the payload is shorter (out untouched): the command
 * is malformed. */
int cumod__exec_payload(const void *payload, size_t len, int fd, void *out,
                        size_t size);

/* Whether n u64 keys follow the fixed part (size bytes) of a payload of
 * len bytes. */
int cumod__exec_keys_fit(size_t len, size_t size, uint64_t n);

/* A handler's end after a driver call (or what stands for one): answers
 * req with r as a status (what names the operation in the message, which
 * is logged at warn under tag when r is a failure; tag NULL: not logged)
 * and payload; then a lost context ends the process
 * (cumod__exec_check_lost). 0 or -errno of the channel. */
int cumod__exec_reply_cu(cumod_exec *ex, const cumod_chan_hdr *req, CUresult r,
                         const char *what, const char *tag, const void *payload,
                         size_t len);

/* A growing byte buffer (a LOAD's reply); oom set when it could not grow
 * (then nothing more is put). The caller frees buf. */
typedef struct cumod_exec_table {
    char *buf;
    size_t len, cap;
    int oom;
} cumod_exec_table;
void cumod__exec_table_put(cumod_exec_table *t, const void *p, size_t n);

#endif
