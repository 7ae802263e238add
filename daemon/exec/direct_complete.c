/* SPDX-License-Identifier: MIT */
/*
 * Direct launches' completions (direct_impl.h): what a submission thread
 * has the device do after its launches so that it sees them done (a word
 * written into host memory it registered, or an event), its launches in
 * flight, and their answers once done.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/log.h"
#include "direct_impl.h"
#include "evpool.h"
#include "reply.h"

/* --- Completions ------------------------------------------------------- */

/* t's completion words, at its first launch (its context is current):
 * the device writes a launch's number there once the launch ran, which t
 * reads as plain memory (0.04 us) where a cuEventQuery that finds its
 * event done costs 1.6 us. $CUMOD_EXEC_COMPLETION=event keeps events (for
 * measuring). */
static void
dthread_words(cumod_exec *ex, dthread *t)
{
    if (t->words != NULL || t->words_off)
        return;
    const char *e = getenv("CUMOD_EXEC_COMPLETION");
    t->words_off = 1;
    if (ex->drv.stream_write_value32 == NULL ||
        (e != NULL && strcmp(e, "event") == 0))
        return;
    size_t len = (size_t)DWORDS * DWORD_STRIDE * sizeof(uint32_t);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return;
    if (ex->drv.mem_host_register(p, len,
                                  CU_MEMHOSTREGISTER_DEVICEMAP |
                                      CU_MEMHOSTREGISTER_PORTABLE) !=
        CUDA_SUCCESS) {
        munmap(p, len);
        return;
    }
    t->words = p;
    t->words_off = 0;
    for (uint32_t i = 0; i < DWORDS; i++)
        t->wfree[i] = DWORDS - 1 - i;
    t->nwfree = DWORDS;
}

void
cumod__dthread_words_free(cumod_exec *ex, dthread *t)
{
    if (t->words == NULL)
        return;
    size_t len = (size_t)DWORDS * DWORD_STRIDE * sizeof(uint32_t);
    (void)ex->drv.mem_host_unregister((void *)t->words);
    munmap((void *)t->words, len);
    t->words = NULL;
}

/* Something the device does after the launches of p (on p->s) that t can
 * see done: its word written, or else an event; and p among t's launches
 * in flight. */
static CUresult
dthread_push(cumod_exec *ex, dthread *t, dpend *p)
{
    CUevent ev = NULL;
    CUresult r;
    if (t->npend == t->pend_cap) {
        uint32_t cap = t->pend_cap ? t->pend_cap * 2 : 64;
        dpend *np = realloc(t->pend, cap * sizeof(*np));
        if (np == NULL)
            return CUDA_ERROR_OUT_OF_MEMORY;
        t->pend = np;
        t->pend_cap = cap;
    }
    dthread_words(ex, t);
    p->ev = NULL;
    p->word = -1;
    if (t->words != NULL && t->nwfree > 0 &&
        atomic_load_explicit(&ex->direct->nhot, memory_order_relaxed) <=
            DWORD_HOT_MAX) {
        uint32_t w = t->wfree[t->nwfree - 1];
        uint32_t v = ++t->wseq;
        _Atomic uint32_t *at = t->words + (size_t)w * DWORD_STRIDE;
        r = ex->drv.stream_write_value32(p->s, (CUdeviceptr)(uintptr_t)at, v,
                                         0);
        if (r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_NOT_SUPPORTED) {
            /* this driver or device will not: events from now on */
            CUMOD_LOGW("CUMOD-EXEC-WORDS",
                       "cuStreamWriteValue32 refused (CUresult %d): direct "
                       "launches complete by events on this thread",
                       (int)r);
            cumod__dthread_words_free(ex, t);
            t->words_off = 1;
            goto event;
        }
        if (r != CUDA_SUCCESS)
            return r;
        t->nwfree--;
        p->word = (int32_t)w;
        p->value = v;
        t->pend[t->npend++] = *p;
        return CUDA_SUCCESS;
    }
event:
    if ((r = cumod__exec_event_get(ex, &ev)) != CUDA_SUCCESS)
        return r;
    if ((r = ex->drv.event_record(ev, p->s)) != CUDA_SUCCESS) {
        cumod__exec_event_put(ex, ev);
        return r;
    }
    p->ev = ev;
    t->pend[t->npend++] = *p;
    return CUDA_SUCCESS;
}

/* Whether p's launches ran: CUDA_SUCCESS, CUDA_ERROR_NOT_READY, or the
 * error that ended them. A word not written yet: the stream's status at
 * most every DWORD_QUERY_NS on the thread (a fault never writes it; a
 * fake driver completes work only inside its calls). */
static CUresult
dpend_query(cumod_exec *ex, dthread *t, const dpend *p)
{
    if (p->word < 0)
        return ex->drv.event_query(p->ev);
    const _Atomic uint32_t *at = t->words + (size_t)p->word * DWORD_STRIDE;
    if (atomic_load_explicit(at, memory_order_acquire) == p->value)
        return CUDA_SUCCESS;
    uint64_t now = cumod__mono_ns();
    if (now - t->wquery_ns < DWORD_QUERY_NS)
        return CUDA_ERROR_NOT_READY;
    t->wquery_ns = now;
    CUresult r = ex->drv.stream_query(p->s);
    if (r == CUDA_SUCCESS &&
        atomic_load_explicit(at, memory_order_acquire) != p->value)
        /* the stream is idle, so p ran (its word not seen yet) */
        return CUDA_SUCCESS;
    return r;
}

/* t's open group gets its event (the end of a look, or a launch that
 * cannot join it). Should that fail, its launches end with the error
 * (on their streams already: their tickets say so). */
void
cumod__dthread_close(cumod_exec *ex, dthread *t)
{
    if (!t->opened)
        return;
    t->opened = 0;
    CUresult r = dthread_push(ex, t, &t->open);
    if (r == CUDA_SUCCESS)
        return;
    char msg[512];
    cumod__exec_check_lost(ex, r);
    int st =
        cumod__cu_err(&ex->drv, r, "cuEventRecord failed", msg, sizeof(msg));
    for (dlaunch *l = t->open.l, *next; l != NULL; l = next) {
        next = l->gnext;
        cumod__dlaunch_end(ex, l, st, msg, 0, 1);
    }
}

/* l was launched on s by thread t: an event after it (or after the
 * launches with tickets it joins), which t polls (dthread_complete). */
CUresult
cumod__dthread_track(cumod_exec *ex, dthread *t, CUstream s, dlaunch *l)
{
    int group = l->ticket != 0;
    if (group && t->opened && t->open.s == s && t->open.n < DGROUP_MAX) {
        t->open.last->gnext = l;
        t->open.last = l;
        t->open.n++;
        return CUDA_SUCCESS;
    }
    cumod__dthread_close(ex, t);
    dpend p = {.s = s, .l = l, .last = l, .n = 1};
    if (group) {
        t->open = p;
        t->opened = 1;
        return CUDA_SUCCESS;
    }
    return dthread_push(ex, t, &p);
}

/* The launches of t that completed: answered. How many. A lost context
 * ends the process (the front answers the rest from the state block). */
int
cumod__dthread_complete(cumod_exec *ex, dthread *t)
{
    int done = 0;
    /* A stream completes in order: behind a launch not done yet, nothing
     * of its stream is looked at (a cuEventQuery each would cost a pass
     * over many launches answered when enqueued 1-2 us apiece). */
    CUstream busy[8];
    uint32_t nbusy = 0;
    for (uint32_t i = 0; i < t->npend;) {
        uint32_t b;
        for (b = 0; b < nbusy && busy[b] != t->pend[i].s; b++)
            ;
        if (b < nbusy) {
            i++;
            continue;
        }
        CUresult r = dpend_query(ex, t, &t->pend[i]);
        if (r == CUDA_ERROR_NOT_READY) {
            if (nbusy < 8)
                busy[nbusy++] = t->pend[i].s;
            i++;
            continue;
        }
        dpend p = t->pend[i];
        /* in order: the oldest are looked at first */
        memmove(&t->pend[i], &t->pend[i + 1],
                (t->npend - i - 1) * sizeof(*t->pend));
        t->npend--;
        if (r != CUDA_SUCCESS)
            cumod__exec_check_lost(ex, r);
        if (p.word >= 0)
            t->wfree[t->nwfree++] = (uint32_t)p.word;
        else
            cumod__exec_event_put(ex, p.ev);
        uint64_t now = cumod__mono_ns();
        for (dlaunch *l = p.l, *next; l != NULL; l = next) {
            next = l->gnext;
            cumod__dlaunch_done(ex, l, r, now > l->t0_ns ? now - l->t0_ns : 0);
            done++;
        }
    }
    return done;
}

int
cumod__direct_drain(cumod_exec *ex, unsigned index)
{
    struct cumod_direct *d = ex->direct;
    if (d == NULL || index >= d->n)
        return 0;
    dthread *t = &d->thr[index];
    cumod__dthread_close(ex, t);
    while (t->npend > 0)
        if (cumod__dthread_complete(ex, t) == 0)
            cumod__cpu_relax();
    return 0;
}
