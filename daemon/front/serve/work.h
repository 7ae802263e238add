/* SPDX-License-Identifier: MIT */
/*
 * Work on a session's stream: the WORK command (a cumod_chan_work and its
 * items) and the call that carries one request's work to the executor and
 * back. The call is also the request's state while it waits: what it holds
 * in flight (generations, segments), its ticket, and its answer, given
 * once: when the work is in the channel (reply when enqueued; the channel
 * keeps stream order) or when the executor says it completed.
 *
 * Loop thread.
 */
#ifndef CUMOD_WORK_H
#define CUMOD_WORK_H

#include <stddef.h>
#include <stdint.h>

#include "catalog/catalog.h"
#include "common/channel.h"
#include "front/front.h"

/* A WORK command being built: cumod_chan_work, then items. */
typedef struct cumod_work_msg {
    char *buf;
    size_t len, cap;
    uint32_t nitems;
    int oom;
} cumod_work_msg;

void cumod__work_msg_init(cumod_work_msg *m, uint64_t stream_key);
/* Appends an item and its extra bytes (padded to 8). An allocation
 * failure is remembered and reported at submit. */
void cumod__work_msg_item(cumod_work_msg *m, const cumod_work_item *it,
                          const void *extra, size_t extra_len);
void cumod__work_msg_fini(cumod_work_msg *m);

typedef struct cumod_work_call {
    cumod_front *f;
    cumod_req *r; /* NULL once answered */
    cumod_session *s;
    int kind;   /* the request's body case */
    int ack;    /* answered once enqueued, with a ticket */
    int posted; /* a posted launch: its ticket the client's, never answered */
    uint64_t stream;        /* the executor key */
    uint64_t stream_handle; /* the session's handle of it (0: default) */
    uint32_t ngemms;        /* GEMM items, which gens/kerns do not list */
    uint64_t ticket;
    uint64_t generation;        /* a Launch's, for its reply */
    uint32_t batch_items;       /* a Batch's item count */
    int parked_item;            /* the item parked on a module, or -1 */
    cumod_gen **gens;           /* generations held in flight, one per launch */
    cumod_rep **reps;           /* and their replicas (NULL: the lone unit) */
    const cumod_kernel **kerns; /* the kernel of each launch */
    uint32_t ngens, capgens;
    cumod_seg **segs; /* segments held in flight */
    uint32_t nsegs, capsegs;
    cumod_gen *ghold; /* a generation whose global the call writes/reads */
    cumod_rep *rhold; /* and its replica */
    cumod_work_msg msg;
    cumod_waiter waiter; /* a launch parked for a module load */
    /* In flight (fault.c): its stream's queue, the running list while it
     * is its stream's head and has a deadline. */
    cumod_list_node flight, dl_link, solo_link;
    uint64_t order;       /* the faults' send order */
    uint64_t xseq;        /* its executor call's number */
    uint64_t start_ms;    /* uv_now when it could start running; 0: not yet */
    uint32_t deadline_ms; /* 0: none */
    int sent;             /* on its stream's queue */
    int timed_out;        /* ran past its deadline: CUMOD_ETIMEDOUT */
    int solo;             /* runs alone (a suspect of a fault) */
    uint64_t sent_ns;     /* a large batch's send time (debug timing) */
    uint64_t begin_ns;    /* made (metrics: from request to completion) */
    uint64_t bytes[3];    /* copied: to device, to host, on device */
    /* The last kernel a batch's items named, as found (h_launch.c); reset
     * with the work. */
    const char *memo_name;
    uint64_t memo_asked; /* the generation asked */
    cumod_gen *memo_g;
    const cumod_kernel *memo_k;
    cumod_rep *memo_rep;
    uint64_t memo_handle;
    int memo_carveout;
} cumod_work_call;

/* A call for r on stream key of s; s stays alive (not released) while the
 * call lives, parked or in flight. NULL when out of memory. */
cumod_work_call *cumod__work_call_new(cumod_front *f, cumod_req *r,
                                      cumod_session *s, int ack, uint64_t key);

/* The handlers' start of a call: stream (a client's handle, 0: the
 * session's default) checked and the call made; NULL when r was answered
 * (a bad stream, out of memory). */
cumod_work_call *cumod__work_call_start(cumod_front *f, cumod_req *r,
                                        cumod_session *s, uint64_t stream,
                                        int ack);

/* Holds g, whose kernel k the call launches (or seg), until the executor
 * answers. CUMOD_ENOMEM. */
cumod_err cumod__work_hold_launch(cumod_work_call *c, cumod_gen *g,
                                  const cumod_kernel *k, cumod_rep *rep);
cumod_err cumod__work_hold_seg(cumod_work_call *c, cumod_seg *g);
/* Holds g (whose global the call reads or writes) until the executor
 * answers: it is not unloaded under the copy. One per call. */
void cumod__work_hold_gen(cumod_work_call *c, cumod_gen *g, cumod_rep *rep);

/* Drops what c holds and the items built so far (a batch starts again
 * after a module load). */
void cumod__work_reset(cumod_work_call *c);

/* Sends c's work; answers r now (reply when enqueued) or when the executor
 * does, then frees c. */
void cumod__work_submit(cumod_work_call *c);

/* Answers r with st (a Batch's reply says failed_index: the item refused,
 * or -1) and frees c; nothing was sent. */
void cumod__work_refuse(cumod_work_call *c, const cumod_status *st,
                        int failed_index);

/* A DoneReply (ticket, generation) for r. */
void cumod__work_reply_done(cumod_req *r, uint64_t ticket, uint64_t generation);

#endif
