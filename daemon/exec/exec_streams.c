/* SPDX-License-Identifier: MIT */
/*
 * Handler of CUMOD_CHAN_STREAMS_CLOSE, on the submission thread: a
 * session's streams go back to the pool (streams.h) once their work has
 * completed, each through the session's reclaim queue (reclaim.h), with
 * its GEMM workspace (gemm.h); a close without streams ends the session's
 * queue after what it holds.
 */
#include <string.h>

#include "cumod/errors.h"
#include "gemm.h"
#include "handlers.h"
#include "evpool.h"
#include "common/log.h"
#include "reclaim.h"
#include "reply.h"
#include "streams.h"

/* Takes the stream of each key in use (keys: n u64s) out of use and
 * queues it on rkey, gated by an event recorded on it, to go back to the
 * pool after its work. */
static CUresult
streams_close(cumod_exec *ex, uint64_t rkey, const char *keys, uint64_t n)
{
    CUresult r = CUDA_SUCCESS;

    for (uint64_t i = 0; i < n; i++) {
        uint64_t key;
        CUstream s;
        CUevent x;
        memcpy(&key, keys + i * sizeof(uint64_t), sizeof(key));
        if ((r = cumod__exec_stream_mark(ex, key, &s, &x)) != CUDA_SUCCESS)
            break;
        if (s == NULL)
            continue; /* never used: nothing to wait for */
        /* Each closed stream is an operation of its own: it goes back to
         * the pool after its own work, and later frees wait for it. */
        cumod__exec_blas_stream_closed(ex, s);
        (void)cumod__exec_stream_take(ex, key);
        if (cumod__exec_reclaim_push(ex, rkey, CUMOD_RECLAIM_STREAM, 0, 0, s,
                                     &x, 1, NULL) != CUMOD_OK) {
            cumod__exec_event_put(ex, x); /* the stream is lost to the pool */
            r = CUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
    }
    return r;
}

int
cumod__exec_on_streams_close(cumod_exec *ex, const cumod_chan_hdr *hdr,
                             const void *payload, size_t len, int fd, void *aux)
{
    const char *p = payload;
    cumod_chan_streams sc = {0};
    CUresult e = CUDA_SUCCESS;

    (void)aux;
    if (cumod__exec_payload(p, len, fd, &sc, sizeof(sc)) != 0 ||
        !cumod__exec_keys_fit(len, sizeof(sc), sc.count))
        return cumod__exec_reply(ex, hdr, CUMOD_EPROTO, NULL, 0);
    if (sc.count == 0) {
        /* The session is gone: its queue ends after what it holds. */
        if (cumod__exec_reclaim_push(ex, sc.reclaim, CUMOD_RECLAIM_END, 0, 0,
                                     NULL, NULL, 0, NULL) != CUMOD_OK)
            e = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        e = streams_close(ex, sc.reclaim, p + sizeof(sc), sc.count);
    }
    return cumod__exec_reply_cu(ex, hdr, e, "closing streams",
                                "CUMOD-EXEC-STREAMS", NULL, 0);
}
