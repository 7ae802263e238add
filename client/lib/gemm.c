/* SPDX-License-Identifier: MIT */
/* GEMM requests of libcumod (cumod_gemm, cumod_batch_gemm): the
 * descriptor's protobuf form. The daemon checks the shape and every operand
 * against the session's buffers (it alone knows them); here only what needs
 * no buffer: the enums and the sizes the protocol carries. */
#include <stdint.h>
#include <string.h>

#include "client_internal.h"

static void
gemm_operand(Cumod__GemmOperand *o, const cumod_gemm_operand *src)
{
    cumod__gemm_operand__init(o);
    o->buffer = src->buffer;
    o->offset = src->offset;
    o->ld = src->ld;
    o->stride = src->stride;
}

int
cumod__gemm_fill(const char *fn, const cumod_gemm_desc *d, cumod__gemm_msg *m)
{
    if (d == NULL)
        return cumod__client_set_error(CUMOD_EINVAL, "%s: NULL argument", fn);
    if (d->type < CUMOD_GEMM_FP32 || d->type > CUMOD_GEMM_BF16)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "%s: type %d is not a cumod_gemm_type "
                                       "(CUMOD_GEMM_FP32, _FP64, _FP16, "
                                       "_BF16)",
                                       fn, (int)d->type);
    if (d->c_type != 0 &&
        (d->c_type < CUMOD_GEMM_FP32 || d->c_type > CUMOD_GEMM_BF16))
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "%s: c_type %d is neither 0 nor a "
                                       "cumod_gemm_type",
                                       fn, (int)d->c_type);
    if (d->order != CUMOD_GEMM_ROW_MAJOR && d->order != CUMOD_GEMM_COL_MAJOR)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "%s: order %d is neither "
                                       "CUMOD_GEMM_ROW_MAJOR nor "
                                       "CUMOD_GEMM_COL_MAJOR",
                                       fn, (int)d->order);
    if (d->batch > UINT32_MAX)
        return cumod__client_set_error(
            CUMOD_EINVAL, "%s: a batch of %zu is too large", fn, d->batch);
    cumod__gemm__init(&m->gemm);
    gemm_operand(&m->a, &d->a);
    gemm_operand(&m->b, &d->b);
    gemm_operand(&m->c, &d->c);
    m->gemm.type = (Cumod__GemmType)d->type;
    m->gemm.c_type = (Cumod__GemmType)d->c_type;
    m->gemm.order = (Cumod__GemmOrder)d->order;
    m->gemm.transa = d->transa != 0;
    m->gemm.transb = d->transb != 0;
    m->gemm.m = d->m;
    m->gemm.n = d->n;
    m->gemm.k = d->k;
    m->gemm.alpha = d->alpha;
    m->gemm.beta = d->beta;
    m->gemm.a = &m->a;
    m->gemm.b = &m->b;
    m->gemm.c = &m->c;
    m->gemm.batch = (uint32_t)d->batch;
    return CUMOD_OK;
}

int
cumod_gemm(cumod_client *c, const cumod_gemm_desc *d, cumod_ticket *ticket)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    cumod__gemm_msg m;
    int rv;

    if (c == NULL)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_gemm: the client is NULL");
    if ((rv = cumod__gemm_fill("cumod_gemm", d, &m)) != CUMOD_OK)
        return rv;
    m.gemm.stream = d->stream;
    m.gemm.when = CUMOD__WHEN(ticket);
    m.gemm.deadline_ms = d->deadline_ms;
    req.body_case = CUMOD__REQUEST__BODY_GEMM;
    req.gemm = &m.gemm;
    return cumod__client_done(c, &req, "cumod_gemm", ticket, NULL);
}
