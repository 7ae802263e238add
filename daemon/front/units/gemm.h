/* SPDX-License-Identifier: MIT */
/*
 * GEMMs in the front (gemm.c): a Gemm request, or a Gemm item of a batch,
 * checked (data/gemm_check.c) and put into its call's work like a launch, once
 * the executor has cuBLAS.
 *
 * The gate: cuBLAS is loaded in the executor at the first GEMM, on its load
 * lane (a large library: never on the thread that submits every session's
 * work), once per executor process. GEMMs that come meanwhile park on the
 * gate, each with its call's waiter (as a launch parks on a lazy module
 * load), and are built again once the executor answers; if cuBLAS cannot
 * be loaded, they and every later GEMM are refused with the executor's
 * sentence (what was tried and why it failed), until a new executor tries
 * again. Everything else is served as before.
 *
 * Loop thread.
 */
#ifndef CUMOD_GEMM_H
#define CUMOD_GEMM_H

#include "cumod.pb-c.h"
#include "common/list.h"
#include "common/status.h"

struct cumod_unit;
struct cumod_work_call;

typedef enum cumod_gemm_gate_state {
    CUMOD_GEMM_GATE_UNKNOWN = 0, /* this executor has not been asked */
    CUMOD_GEMM_GATE_LOADING,     /* asked; GEMMs park */
    CUMOD_GEMM_GATE_READY,       /* it has a cuBLAS handle */
    CUMOD_GEMM_GATE_FAILED,      /* no usable cuBLAS: why in failed */
} cumod_gemm_gate_state;

typedef struct cumod_gemm_gate {
    struct cumod_unit *u;
    cumod_gemm_gate_state state;
    cumod_status failed;
    cumod_list waiters; /* cumod_waiter, by link: calls holding a GEMM */
} cumod_gemm_gate;

void cumod__gemm_gate_init(cumod_gemm_gate *g, struct cumod_unit *u);

/* The executor is gone: the next one loads cuBLAS again at its first
 * GEMM (a load in progress was answered CUMOD_ECTXLOST already). */
void cumod__gemm_gate_lost(cumod_gemm_gate *g);

/* A GEMM of call c (r is the Request's gemm, or a batch item's): checked,
 * then appended to c's work once the executor has cuBLAS. Returns 0 when
 * added; 1 when parked on the gate: c->waiter's callback hears when
 * cuBLAS is there (CUMOD_OK: build the work again) or why not; -1 when
 * refused, with st saying why (the caller prefixes a batch's item). */
int cumod__gemm_item(struct cumod_work_call *c, const Cumod__Gemm *r,
                     cumod_status *st);

#endif
