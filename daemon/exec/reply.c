/* SPDX-License-Identifier: MIT */
/*
 * Answers on the channel (reply.h): what every handler and the completion
 * thread share to answer a command, and the one way out when the context
 * is lost.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <unistd.h>

#include "common/chanring.h"
#include "cumod/errors.h"
#include "common/log.h"
#include "direct.h"
#include "reply.h"

/* How long an answer waits for room in a full completion ring before it
 * takes the socket (the front reads the ring whenever its loop turns; a
 * full ring means the front is stuck or gone). */
#define BACK_WAIT_NS 1000000000ull

int
cumod__exec_send(cumod_exec *ex, cumod_chan_hdr *hdr, const void *payload,
                 size_t len)
{
    /* What the socket would carry in one packet (the front reads a ring
     * packet into its CUMOD_CHAN_MAX buffer); more goes in a memfd. */
    if (atomic_load_explicit(&ex->back, memory_order_acquire) != NULL &&
        sizeof(*hdr) + len <= CUMOD_CHAN_MAX) {
        uint64_t t0 = 0;
        hdr->len = len;
        hdr->flags &= ~(CUMOD_CHAN_F_MEMFD | CUMOD_CHAN_F_FD2);
        pthread_mutex_lock(&ex->back_mtx);
        /* An adopted executor let the ring go (orphan.h): the socket. */
        while (ex->back != NULL) {
            if (cumod__chanring_put(ex->back, hdr, payload, len) == 0) {
                pthread_mutex_unlock(&ex->back_mtx);
                return 0;
            }
            uint64_t now = cumod__mono_ns();
            if (t0 == 0)
                t0 = now;
            else if (now - t0 > BACK_WAIT_NS)
                break;
            sched_yield();
        }
        pthread_mutex_unlock(&ex->back_mtx);
        /* The front has not read for a second: the socket, which tells
         * the executor when the front is gone. */
    }
    return cumod__chan_send_any(ex->chan, hdr, payload, len);
}

int
cumod__exec_reply(cumod_exec *ex, const cumod_chan_hdr *req, int status,
                  const void *payload, size_t len)
{
    cumod_chan_hdr h = {.op = req->op, .seq = req->seq, .status = status};
    return cumod__exec_send(ex, &h, payload, len);
}

int
cumod__exec_send_done(cumod_exec *ex, uint64_t seq, int status, int failed,
                      const char *msg, const void *data, uint64_t dlen)
{
    return cumod__exec_send_done_ns(ex, seq, status, failed, msg, data, dlen,
                                    0);
}

int
cumod__exec_send_done_ns(cumod_exec *ex, uint64_t seq, int status, int failed,
                         const char *msg, const void *data, uint64_t dlen,
                         uint64_t gpu_ns)
{
    cumod_chan_hdr h = {.op = CUMOD_CHAN_DONE, .seq = seq, .status = status};
    cumod_chan_done d = {.failed_index = failed, .gpu_ns = gpu_ns};
    size_t mlen = msg ? strlen(msg) : 0;
    size_t total = sizeof(d) + mlen + dlen;
    char stackbuf[1024];
    char *buf = total <= sizeof(stackbuf) ? stackbuf : malloc(total);
    int rv;

    if (buf == NULL)
        return -ENOMEM;
    d.msg_len = (uint32_t)mlen;
    d.data_len = dlen;
    memcpy(buf, &d, sizeof(d));
    if (mlen)
        memcpy(buf + sizeof(d), msg, mlen);
    if (dlen)
        memcpy(buf + sizeof(d) + mlen, data, dlen);
    rv = cumod__exec_send(ex, &h, buf, total);
    if (buf != stackbuf)
        free(buf);
    return rv;
}

void
cumod__exec_context_lost(cumod_exec *ex, CUresult r)
{
    char name[64];
    cumod_chan_hdr h = {.op = CUMOD_CHAN_FAULT, .status = CUMOD_ECTXLOST};
    cumod_chan_error e = {.code = CUMOD_ECTXLOST};

    CUMOD_LOGE("CUMOD-EXEC-FAULT",
               "%s: the CUDA context is lost; the executor exits so that a "
               "new one can serve",
               cumod__cu_name(&ex->drv, r, name, sizeof(name)));
    /* The front hears it before the exit, whichever call met it first (a
     * launch's completion, a submission, an allocation, a load). */
    (void)cumod__cu_err(&ex->drv, r, "the CUDA context is lost", e.message,
                        sizeof(e.message));
    cumod__direct_flush_stats(ex); /* its launches counted first */
    (void)cumod__exec_send(ex, &h, &e, sizeof(e));
    _exit(EX_SOFTWARE);
}

void
cumod__exec_table_put(cumod_exec_table *r, const void *p, size_t n)
{
    if (r->oom || n == 0)
        return;
    if (r->len + n > r->cap) {
        size_t cap = (r->cap ? r->cap * 2 : 4096);
        while (cap < r->len + n)
            cap *= 2;
        char *b = realloc(r->buf, cap);
        if (b == NULL) {
            r->oom = 1;
            return;
        }
        r->buf = b;
        r->cap = cap;
    }
    memcpy(r->buf + r->len, p, n);
    r->len += n;
}

int
cumod__exec_payload(const void *payload, size_t len, int fd, void *out,
                    size_t size)
{
    if (fd >= 0) /* no such command carries one: a front's mistake */
        close(fd);
    if (len < size)
        return -1;
    if (size > 0)
        memcpy(out, payload, size);
    return 0;
}

int
cumod__exec_keys_fit(size_t len, size_t size, uint64_t n)
{
    return n <= (len - size) / sizeof(uint64_t);
}

int
cumod__exec_reply_cu(cumod_exec *ex, const cumod_chan_hdr *req, CUresult r,
                     const char *what, const char *tag, const void *payload,
                     size_t len)
{
    char msg[256];
    int st = cumod__cu_err(&ex->drv, r, what, msg, sizeof(msg));

    if (st != CUMOD_OK && tag != NULL)
        CUMOD_LOGW(tag, "%s", msg);
    int rv = cumod__exec_reply(ex, req, st, payload, len);
    cumod__exec_check_lost(ex, r);
    return rv;
}
