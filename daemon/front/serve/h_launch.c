/* SPDX-License-Identifier: MIT */
/*
 * Launches and batches. Each item is checked (checks.h) against its kernel
 * (the catalog's resolve, which holds the generation while the work is in
 * flight) and the session before anything reaches the executor, and an
 * error names the item and the argument or limit. A launch whose module is
 * not resident parks its call on the module; when the module settles, the
 * call's resume callback builds it again from the first item (the
 * session's buffers may have changed meanwhile), never going back through
 * the dispatcher.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "front/state/checks.h"
#include "cumod/errors.h"
#include "cumod_ring.h"
#include "front/units/direct.h"
#include "front/units/gemm.h"
#include "front/serve/handlers.h"
#include "common/log.h"
#include "front/serve/work.h"

enum { ITEM_ADDED = 0, ITEM_PARKED = 1, ITEM_REFUSED = -1 };

static void launch_build(cumod_work_call *c);

/* The item's error, prefixed "item N: " in a batch. */
static int
launch_refused(cumod_status *st, int item)
{
    char where[32];
    if (item >= 0) {
        snprintf(where, sizeof(where), "item %d: ", item);
        cumod__status_prefix(st, where);
    }
    return ITEM_REFUSED;
}

static int
launch_item(cumod_work_call *c, const Cumod__Launch *l, int item,
            cumod_status *st)
{
    cumod_launch_packed *packed = c->f->packed;
    char module[129];
    const char *fn;
    const cumod_kernel *k;
    cumod_gen *g;
    cumod_rep *rep;
    uint64_t handle;

    cumod_launch_opts opts = {
        .allow_pointer_values = c->f->cfg->allow_pointer_values,
    };
    /* A batch's items mostly launch one kernel: the name found once (the
     * generation is held by the first of them, so it stays). */
    if (c->memo_k != NULL && l->generation == c->memo_asked &&
        strcmp(l->kernel, c->memo_name) == 0) {
        g = c->memo_g;
        k = c->memo_k;
        rep = c->memo_rep;
        handle = c->memo_handle;
        opts.carveout = c->memo_carveout;
    } else {
        if (cumod__check_kernel_name(l->kernel, module, &fn, st) != CUMOD_OK)
            return launch_refused(st, item);
        switch (cumod__catalog_resolve(c->f->cat, module, l->generation,
                                       &c->waiter, &g, st)) {
        case CUMOD_RESOLVE_PARKED:
            return ITEM_PARKED;
        case CUMOD_RESOLVE_REFUSED:
            return launch_refused(st, item);
        case CUMOD_RESOLVE_READY:
            break;
        }
        if ((k = cumod__gen_kernel(g, fn, st)) == NULL)
            return launch_refused(st, item);
        /* The same bytes in this session's executor (unit.h). */
        switch (cumod__rep_get(c->s->unit, g, &c->waiter, &handle, &rep, st)) {
        case CUMOD_RESOLVE_PARKED:
            return ITEM_PARKED;
        case CUMOD_RESOLVE_REFUSED:
            return launch_refused(st, item);
        case CUMOD_RESOLVE_READY:
            break;
        }
        opts.carveout = cumod__gen_kernel_carveout(g, k->name);
        /* Served here: its executor may launch it directly from now on
         * (direct.h). */
        if (c->s->ring != NULL)
            cumod__fdirect_publish(c->s->unit, g, handle);
        c->memo_name = l->kernel;
        c->memo_asked = l->generation;
        c->memo_g = g;
        c->memo_k = k;
        c->memo_rep = rep;
        c->memo_handle = handle;
        c->memo_carveout = opts.carveout;
    }
    if (cumod__check_launch(c->s, cumod__unit_device(c->s->unit), k, l, &opts,
                            packed, st) != CUMOD_OK)
        return launch_refused(st, item);
    if (cumod__work_hold_launch(c, g, k, rep) != CUMOD_OK) {
        cumod__status_set(st, CUMOD_ENOMEM, "out of memory");
        return ITEM_REFUSED;
    }
    packed->it.a = handle;
    packed->it.b = k->index;
    c->generation = cumod__gen_number(g);
    cumod__work_msg_item(&c->msg, &packed->it, packed->params, packed->nparams);
    return ITEM_ADDED;
}

static int
batch_item(cumod_work_call *c, const Cumod__BatchItem *bi, int i,
           cumod_status *st)
{
    cumod_work_item it;
    cumod_seg *g;
    cumod_err rv;

    switch (bi->item_case) {
    case CUMOD__BATCH_ITEM__ITEM_LAUNCH:
        return launch_item(c, bi->launch, i, st);
    case CUMOD__BATCH_ITEM__ITEM_COPY:
        if ((rv = cumod__check_copy(c->s, bi->copy, &it, &g, st)) != CUMOD_OK)
            return launch_refused(st, i);
        if (g != NULL && cumod__work_hold_seg(c, g) != CUMOD_OK)
            break;
        cumod__work_msg_item(&c->msg, &it, NULL, 0);
        return ITEM_ADDED;
    case CUMOD__BATCH_ITEM__ITEM_MEMSET:
        if ((rv = cumod__check_memset(c->s, bi->memset, &it, st)) != CUMOD_OK)
            return launch_refused(st, i);
        cumod__work_msg_item(&c->msg, &it, NULL, 0);
        return ITEM_ADDED;
    case CUMOD__BATCH_ITEM__ITEM_WRITE:
        if ((rv = cumod__check_write(c->s, bi->write, &it, st)) != CUMOD_OK)
            return launch_refused(st, i);
        cumod__work_msg_item(&c->msg, &it, bi->write->data.data,
                             bi->write->data.len);
        return ITEM_ADDED;
    case CUMOD__BATCH_ITEM__ITEM_GEMM:
        switch (cumod__gemm_item(c, bi->gemm, st)) {
        case 0:
            return ITEM_ADDED;
        case 1:
            return ITEM_PARKED;
        default:
            return launch_refused(st, i);
        }
    default:
        cumod__status_set(st, CUMOD_EINVAL, "item %d is empty", i);
        return ITEM_REFUSED;
    }
    cumod__status_set(st, CUMOD_ENOMEM, "out of memory");
    return ITEM_REFUSED;
}

/* The module a parked item waited for has settled. */
static void
launch_on_settled(cumod_waiter *w, cumod_module *m, const cumod_status *st)
{
    cumod_work_call *c = CUMOD_CONTAINER_OF(w, cumod_work_call, waiter);
    (void)m;
    if (st->code != CUMOD_OK) {
        cumod_status err = *st;
        int item = c->batch_items > 0 ? c->parked_item : -1;
        cumod__faults_explain(&c->s->unit->faults, &err);
        cumod__work_refuse(c, &err, item);
        return;
    }
    launch_build(c);
}

/* Builds c's work from its request, item by item; submits it, refuses it
 * (naming the item), or leaves it parked on a module. */
static void
launch_build(cumod_work_call *c)
{
    const Cumod__Request *q = c->r->msg;
    cumod_status st;
    int rv = ITEM_ADDED, i = -1;

    cumod__work_reset(c);
    if (c->s->closed) {
        cumod__status_set(&st, CUMOD_ECLOSED, "the session closed");
        cumod__work_refuse(c, &st, -1);
        return;
    }
    if (q->body_case == CUMOD__REQUEST__BODY_LAUNCH) {
        rv = launch_item(c, q->launch, -1, &st);
    } else if (q->body_case == CUMOD__REQUEST__BODY_GEMM) {
        rv = cumod__gemm_item(c, q->gemm, &st);
        rv = rv == 0 ? ITEM_ADDED : rv == 1 ? ITEM_PARKED : ITEM_REFUSED;
    } else {
        for (i = 0; rv == ITEM_ADDED && (size_t)i < q->batch->n_items; i++)
            rv = batch_item(c, q->batch->items[i], i, &st);
        i--;
    }
    if (rv == ITEM_PARKED) {
        c->parked_item = i;
        return;
    }
    if (rv == ITEM_REFUSED) {
        cumod__work_refuse(c, &st, i);
        return;
    }
    cumod__work_submit(c);
}

static void
launch_start(cumod_front *f, cumod_req *r, cumod_session *s, uint64_t stream,
             Cumod__ReplyWhen when, uint32_t batch_items, uint32_t deadline_ms)
{
    int posted =
        when == CUMOD__REPLY_WHEN__REPLY_WHEN_POSTED && batch_items == 0;
    cumod_work_call *c = cumod__work_call_start(
        f, r, s, stream,
        when == CUMOD__REPLY_WHEN__REPLY_WHEN_ENQUEUED || posted);

    if (c == NULL)
        return;
    if (posted) {
        /* Its ticket from now, so that a Wait for it right behind finds it
         * while it is parked on its module; its answer goes nowhere (the
         * ring's transport drops it), its refusal to the ticket. */
        cumod_ticket *t;
        cumod_err rv =
            cumod__session_ticket_new_at(s, CUMOD_TICKET_POSTED | r->id, &t);
        if (rv != CUMOD_OK) {
            cumod_status st;
            cumod__status_set(&st, rv,
                              rv == CUMOD_EEXIST
                                  ? "a posted launch's ticket is still kept "
                                    "for request id %llu"
                                  : "out of memory",
                              (unsigned long long)r->id);
            cumod__work_refuse(c, &st, -1);
            return;
        }
        c->ticket = t->ticket;
        c->posted = 1;
    }
    c->batch_items = batch_items;
    c->stream_handle = stream;
    c->deadline_ms = cumod__faults_deadline(&s->unit->faults, deadline_ms);
    c->waiter.cb = launch_on_settled;
    launch_build(c);
}

void
cumod__h_launch(cumod_front *f, cumod_req *r, cumod_session *s)
{
    const Cumod__Launch *l = r->msg->launch;
    launch_start(f, r, s, l->stream, l->when, 0, l->deadline_ms);
}

void
cumod__h_gemm(cumod_front *f, cumod_req *r, cumod_session *s)
{
    const Cumod__Gemm *g = r->msg->gemm;
    launch_start(f, r, s, g->stream, g->when, 0, g->deadline_ms);
}

void
cumod__h_batch(cumod_front *f, cumod_req *r, cumod_session *s)
{
    const Cumod__Batch *b = r->msg->batch;
    if (b->n_items == 0) {
        cumod__req_failf(r, CUMOD_EINVAL, "an empty batch");
        return;
    }
    launch_start(f, r, s, b->stream, b->when, (uint32_t)b->n_items,
                 b->deadline_ms);
}
