/* SPDX-License-Identifier: MIT */
/*
 * The fault domain: what the front knows of the work in flight on the GPU,
 * and what it does when the executor faults or a launch runs past its
 * deadline (README.md "Faults, hangs and quarantine" says it for users).
 *
 * - In flight: every WORK call sent is on its stream's queue until the
 *   executor answers it. A stream completes in order, so the head of a
 *   queue is running: since its predecessor completed, or since it was
 *   sent onto an idle stream.
 * - Deadlines: a head with a deadline that runs longer is a hang. The hang
 *   is attributed (below), the executor killed and restarted; the call
 *   answers CUMOD_ETIMEDOUT naming the kernel and the deadline.
 * - Attribution: when the executor reports a fault (a CUDA error that ends
 *   the context), every launch in flight, anywhere in its stream's queue,
 *   is a suspect. When they are all one kernel of one module generation,
 *   that is the culprit: it is blamed (the catalog quarantines it), and
 *   the log line (CUMOD-FAULT) and the answers name it and its session.
 *   Otherwise nobody is blamed: the next launch of each suspect runs alone
 *   (the executor client's gate holds everything sent after it until it
 *   completes, for at most CUMOD_SOLO_MS), so that a repeated fault pins
 *   its kernel down. A hang's culprit is the late launch, unless a launch
 *   that started before it is still running beside it (then nobody).
 *
 * Loop thread.
 */
#ifndef CUMOD_FAULT_H
#define CUMOD_FAULT_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "catalog/catalog.h"
#include "common/config.h"
#include "cumod/errors.h"
#include "common/idmap.h"
#include "common/list.h"
#include "common/status.h"

struct cumod_unit;
struct cumod_work_call;

#define CUMOD_SUSPECTS_MAX 32
/* How long a solo run may hold everyone else, in all: waiting for the
 * work ahead of it to complete, then running. */
#define CUMOD_SOLO_MS 1000

typedef struct cumod_suspect {
    char module[129];
    char sha256[65];
    char kernel[256];
} cumod_suspect;

typedef struct cumod_faults {
    uv_loop_t *loop;
    const cumod_config *cfg; /* live: deadlines */
    cumod_catalog **cat;     /* the front's, blamed (NULL once stopped) */
    struct cumod_unit *u;    /* whose executor's work this is */
    cumod_idmap streams;     /* stream key -> its queue of calls in flight */
    cumod_list running;      /* heads with a deadline (work call's dl_link) */
    uv_timer_t tick;         /* deadlines and the solo run */
    int ticking;
    uint32_t nflight; /* WORK calls sent and not answered */
    uint64_t orders;  /* calls sent so far: each call's order */
    /* This executor's end, once known: what the answers of its calls say.
     * Reset when it is gone. */
    int known;     /* a fault it reported, or a hang */
    int work_lost; /* work was in flight when it went */
    const void *culprit_gen, *culprit_kernel; /* NULL: none pinned down */
    int culprit_quarantined;
    /* The culprit as a direct launch's slot names it (its generation's
     * handle on this executor, its kernel's index), and its name: the
     * generation may be taken back from the executor (its quarantine) before
     * the direct launches are answered. handle 0: none. */
    uint64_t culprit_handle;
    uint32_t culprit_kidx;
    char culprit_name[512];
    /* An MPS client's (a pool's executor): when another MPS client of
     * the device last reported a fault (uv time; 0: never). Every MPS
     * client of a device sees one client's fatal fault, each in the
     * kernel it had in flight: a fault within FAULT_MPS_SHARED_MS of
     * another, or while another MPS client had work in flight, blames
     * nobody (fault.c). */
    uint64_t mps_fault_ms;
    char fault[256]; /* the CUDA error, as the executor said it */
    char cause[768]; /* for the other calls: what ended the context */
    cumod_suspect suspects[CUMOD_SUSPECTS_MAX];
    uint32_t nsuspects;
    /* Solo runs: suspects' calls waiting to run alone, in order (the
     * work call's solo_link); the first is at the gate. */
    cumod_list solos;
    uint32_t ahead;      /* calls sent before the first, not complete */
    int solo_sent;       /* the first went, alone */
    uint64_t solo_since; /* uv_now when the gate closed */
} cumod_faults;

void cumod__faults_init(cumod_faults *fl, uv_loop_t *loop,
                        const cumod_config *cfg, cumod_catalog **cat,
                        struct cumod_unit *u);
/* Closes the timer (at stop). */
void cumod__faults_close(cumod_faults *fl);

/* The deadline of a launch or batch that asked for asked ms (0: the
 * default): the default when none, capped at the maximum; 0: none. */
uint32_t cumod__faults_deadline(const cumod_faults *fl, uint32_t asked);

/* c is about to be sent. When one of its launches is a suspect, it is to
 * run alone: the gate closes (returns 1). */
int cumod__faults_before_send(cumod_faults *fl, struct cumod_work_call *c);
/* c could not be sent after all (undoes before_send). */
void cumod__faults_not_sent(cumod_faults *fl, struct cumod_work_call *c);
/* c went to the executor (or waits in its out queue). */
void cumod__faults_sent(cumod_faults *fl, struct cumod_work_call *c);

/* The executor answered c, or went first. *st and msg (msglen bytes) are
 * the answer as the executor gave it; reported says the executor sent it
 * (not the client's "it went"). Rewritten here for a fault (naming the
 * culprit or the cause) and a hang (CUMOD_ETIMEDOUT). c leaves its queue;
 * the next call of its stream starts. */
void cumod__faults_done(cumod_faults *fl, struct cumod_work_call *c,
                        cumod_err *st, int reported, char *msg, size_t msglen);

/* The executor reported a fault (message names the CUDA error), met by
 * any of its calls: attributed now, once, if no answer of a WORK call
 * has done it already. */
void cumod__faults_reported(cumod_faults *fl, const char *message);

/* A CUMOD_ECTXLOST status of another kind (a launch parked on a module
 * whose load the executor's end cut short) gains the cause, when known. */
void cumod__faults_explain(const cumod_faults *fl, cumod_status *st);

/* The executor is gone (every call answered): 1 when its end has a known
 * cause (a fault, a hang, work in flight). Forgets that executor. */
int cumod__faults_lost(cumod_faults *fl);

/* A direct launch (front/units/direct.c) that the executor took and did not
 * answer before it went: its answer, as a WORK call's would be (the
 * culprit named, or the cause). handle and kidx: its slot's. */
void cumod__faults_lost_answer(cumod_faults *fl, uint64_t handle, uint32_t kidx,
                               cumod_err *st, char *msg, size_t msglen);

#endif
