/* SPDX-License-Identifier: MIT */
#include "front/units/gemm.h"

#include <stdio.h>
#include <string.h>

#include "front/state/checks.h"
#include "cumod/errors.h"
#include "front/front.h"
#include "common/log.h"
#include "front/serve/work.h"
#include "front/units/direct.h"

void
cumod__gemm_gate_init(cumod_gemm_gate *g, struct cumod_unit *u)
{
    memset(g, 0, sizeof(*g));
    g->u = u;
    cumod__list_init(&g->waiters);
}

void
cumod__gemm_gate_lost(cumod_gemm_gate *g)
{
    if (g->state != CUMOD_GEMM_GATE_LOADING)
        g->state = CUMOD_GEMM_GATE_UNKNOWN;
}

/* The executor answered CUMOD_CHAN_BLAS (or went first): the calls parked
 * on the gate go on, or hear why not. */
static void
gemm_on_blas(void *arg, const cumod_chan_hdr *hdr, const void *payload,
             size_t len)
{
    cumod_gemm_gate *g = arg;
    cumod_chan_error e = {.code = hdr->status};
    cumod_status st;
    cumod_list waiters;

    if (payload != NULL && len >= sizeof(e))
        memcpy(&e, payload, sizeof(e));
    e.message[sizeof(e.message) - 1] = '\0';
    if (hdr->status == CUMOD_OK) {
        g->state = CUMOD_GEMM_GATE_READY;
        cumod__status_ok(&st);
        CUMOD_LOGI("CUMOD-BLAS", "GEMMs run through %s", e.message);
    } else if (payload == NULL || hdr->status != CUMOD_ENOTSUP) {
        /* The executor went away, memory ran short, or cuBLAS failed to
         * start (cublasCreate): the next GEMM asks again. */
        g->state = CUMOD_GEMM_GATE_UNKNOWN;
        cumod__status_set(&st, hdr->status,
                          "cuBLAS could not be made ready for this GEMM: %s",
                          payload != NULL ? e.message
                          : hdr->status == CUMOD_ESHUTDOWN
                              ? "cumodd is shutting down"
                              : "the CUDA executor went away first; retry");
    } else {
        /* No usable cuBLAS (missing, not cuBLAS, too old): so it stays
         * until another executor tries. */
        g->state = CUMOD_GEMM_GATE_FAILED;
        cumod__status_set(&g->failed, hdr->status, "%s", e.message);
        st = g->failed;
        CUMOD_LOGW("CUMOD-BLAS-FAIL", "GEMMs are refused: %s", e.message);
    }
    cumod__list_init(&waiters);
    cumod__list_splice(&waiters, &g->waiters);
    for (cumod_list_node *n; (n = cumod__list_pop(&waiters)) != NULL;) {
        cumod_waiter *w = CUMOD_CONTAINER_OF(n, cumod_waiter, link);
        w->cb(w, NULL, &st);
    }
}

/* Where cuBLAS stands for call c: 0 ready, 1 c parked, -1 refused. */
static int
gemm_gate(cumod_work_call *c, cumod_status *st)
{
    cumod_gemm_gate *g = &c->s->unit->gemm;
    cumod_err rv;

    switch (g->state) {
    case CUMOD_GEMM_GATE_READY:
        return 0;
    case CUMOD_GEMM_GATE_FAILED:
        *st = g->failed;
        return -1;
    case CUMOD_GEMM_GATE_UNKNOWN:
        rv = cumod__xc_call(c->s->unit->xc, CUMOD_CHAN_BLAS, NULL, 0, -1,
                            gemm_on_blas, g);
        if (rv != CUMOD_OK) {
            cumod__unit_refusal(c->s->unit, rv, st);
            return -1;
        }
        g->state = CUMOD_GEMM_GATE_LOADING;
        /* fall through */
    case CUMOD_GEMM_GATE_LOADING:
        cumod__list_append(&g->waiters, &c->waiter.link);
        return 1;
    }
    return -1;
}

/* The first GEMM on a stream gives it a cuBLAS workspace in the executor:
 * charged to the session's memory like a buffer (else a session could
 * hold 32 MiB per stream past --session-memory-limit), released with the
 * stream. */
static cumod_err
gemm_charge_workspace(cumod_work_call *c, cumod_status *st)
{
    cumod_session *s = c->s;
    /* The call's stream, which the launch path checked: a batch item's
     * own stream field is not used. */
    uint64_t handle = c->stream_handle;
    cumod_sstream *t = handle ? cumod__session_stream(s, handle) : NULL;
    uint64_t *charged = t ? &t->ws_bytes : &s->default_ws_bytes;
    const cumod_chan_device *dev = cumod__unit_device(c->s->unit);
    uint64_t ws = CUMOD_BLAS_WORKSPACE(dev ? dev->sm_major : 9);

    if (*charged != 0 || (handle != 0 && t == NULL))
        return CUMOD_OK;
    if (cumod__unit_reserve(s->unit, s, ws, st) != CUMOD_OK) {
        char why[sizeof(st->msg)];
        snprintf(why, sizeof(why), "%s", st->msg);
        cumod__status_set(st, st->code,
                          "a GEMM on stream %llu needs the stream's %llu MiB "
                          "cuBLAS workspace: %s",
                          (unsigned long long)handle,
                          (unsigned long long)(ws >> 20), why);
        return st->code;
    }
    *charged = ws;
    cumod__session_ws_charged(s, t);
    /* From the next GEMM on this stream (after this one's answer, in ring
     * order), the executor that reads the session's ring may serve its
     * GEMMs itself. */
    cumod__fdirect_gemm(s, handle);
    return CUMOD_OK;
}

int
cumod__gemm_item(cumod_work_call *c, const Cumod__Gemm *r, cumod_status *st)
{
    cumod_work_item it = {.op = CUMOD_WORK_GEMM};
    cumod_chan_gemm g;
    int rv;

    /* Checked first: a wrong GEMM hears so even where cuBLAS is missing. */
    if (cumod__check_gemm(c->s, r, &g, st) != CUMOD_OK)
        return -1;
    if ((rv = gemm_gate(c, st)) != 0)
        return rv;
    if (gemm_charge_workspace(c, st) != CUMOD_OK)
        return -1;
    c->ngemms++;
    cumod__work_msg_item(&c->msg, &it, &g, sizeof(g));
    return 0;
}
