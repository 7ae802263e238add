/* SPDX-License-Identifier: MIT */
/*
 * Handler of CUMOD_CHAN_BLAS, on the load lane (a dlopen of hundreds of
 * megabytes never runs on the submission thread): loads cuBLAS and makes
 * the executor's handle, once (gemm.h), and answers with what was loaded
 * or why not.
 */

#include "cumod/errors.h"
#include "gemm.h"
#include "handlers.h"
#include "reply.h"

int
cumod__exec_on_blas(cumod_exec *ex, const cumod_chan_hdr *hdr,
                    const void *payload, size_t len, int fd, void *aux)
{
    cumod_chan_error e = {0};

    (void)aux;
    (void)cumod__exec_payload(payload, len, fd, NULL, 0);
    e.code = cumod__exec_blas_open(ex, e.message, sizeof(e.message));
    return cumod__exec_reply(ex, hdr, e.code, &e, sizeof(e));
}
