/* SPDX-License-Identifier: MIT */
/*
 * The fault domain (fault.h): streams' queues of calls in flight,
 * deadlines, attribution of faults and hangs, suspects and their solo runs.
 */
#include "front/units/fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "front/units/direct.h"
#include "front/front.h"
#include "common/log.h"
#include "front/serve/work.h"

#define FAULT_TICK_MS 10

/* A stream's calls in flight, oldest (running) first. */
typedef struct fault_stream {
    cumod_list calls; /* cumod_work_call, by flight */
} fault_stream;

/* One launch in flight: a kernel of a generation, and who launched it. */
typedef struct fault_launch {
    const cumod_gen *g;
    const cumod_kernel *k;
    const cumod_session *s;
} fault_launch;

static void faults_tick_update(cumod_faults *fl);

/* The first call waiting to run alone (at the gate), or NULL. */
static cumod_work_call *
faults_solo_first(const cumod_faults *fl)
{
    cumod_list_node *n = cumod__list_first(&fl->solos);
    return n ? CUMOD_CONTAINER_OF(n, cumod_work_call, solo_link) : NULL;
}

/* Calls held behind the gate did not run: their deadlines count from
 * when they go (every running call from order on). */
static void
faults_restart_clocks(cumod_faults *fl, uint64_t order)
{
    uint64_t now = uv_now(fl->loop);
    CUMOD_LIST_FOREACH(&fl->running, n)
    {
        cumod_work_call *c = CUMOD_CONTAINER_OF(n, cumod_work_call, dl_link);
        if (c->order >= order)
            c->start_ms = now;
    }
}

void
cumod__faults_init(cumod_faults *fl, uv_loop_t *loop, const cumod_config *cfg,
                   cumod_catalog **cat, struct cumod_unit *u)
{
    memset(fl, 0, sizeof(*fl));
    fl->loop = loop;
    fl->cfg = cfg;
    fl->cat = cat;
    fl->u = u;
    cumod__idmap_init(&fl->streams);
    cumod__list_init(&fl->running);
    cumod__list_init(&fl->solos);
    uv_timer_init(loop, &fl->tick);
    fl->tick.data = fl;
}

void
cumod__faults_close(cumod_faults *fl)
{
    uv_timer_stop(&fl->tick);
    uv_close((uv_handle_t *)&fl->tick, NULL);
    /* Every call was answered before (the executor client closes first),
     * so the queues are empty; free what is left regardless. */
    size_t cur = 0;
    fault_stream *q;
    while ((q = cumod__idmap_next(&fl->streams, &cur, NULL)) != NULL)
        free(q);
    cumod__idmap_fini(&fl->streams);
}

uint32_t
cumod__faults_deadline(const cumod_faults *fl, uint32_t asked)
{
    const cumod_config *cfg = fl->cfg;
    uint32_t d = asked ? asked : cfg->launch_deadline_ms;
    if (cfg->max_launch_deadline_ms != 0 &&
        (d == 0 || d > cfg->max_launch_deadline_ms))
        d = cfg->max_launch_deadline_ms;
    return d;
}

/* --- Launches of a call -------------------------------------------------- */

/* The first launch of c, and whether all its work is launches of that
 * one kernel of that one generation (*one: a GEMM beside them is other
 * work). 0 when c launches nothing. */
static int
faults_call_kernel(const cumod_work_call *c, fault_launch *out, int *one)
{
    if (c->ngens == 0)
        return 0;
    out->g = c->gens[0];
    out->k = c->kerns[0];
    out->s = c->s;
    *one = c->ngemms == 0;
    for (uint32_t i = 1; i < c->ngens; i++)
        if (c->gens[i] != out->g || c->kerns[i] != out->k)
            *one = 0;
    return 1;
}

static int
faults_same(const fault_launch *a, const cumod_gen *g, const cumod_kernel *k)
{
    return a->g == g && a->k == k;
}

/* Adds (g, k) of session s to out (up to max) unless there; the new
 * count of distinct ones. */
static size_t
faults_add(fault_launch *out, size_t n, size_t max, const cumod_gen *g,
           const cumod_kernel *k, const cumod_session *s)
{
    size_t j;
    for (j = 0; j < n && j < max; j++)
        if (faults_same(&out[j], g, k))
            return n;
    if (n < max)
        out[n] = (fault_launch){g, k, s};
    return n + 1;
}

/* Every distinct launch in flight into out (up to max); the count of
 * distinct ones (which may exceed max). Direct launches (front/units/direct.c)
 * count too; those whose generation is not known here any more are
 * counted in *unknown (nobody can be blamed beside them). */
static size_t
faults_in_flight(cumod_faults *fl, fault_launch *out, size_t max,
                 size_t *unknown)
{
    size_t cur = 0, n = 0;
    fault_stream *q;

    *unknown = 0;
    {
        enum { DMAX = 64 };
        const cumod_gen *dg[DMAX];
        const cumod_kernel *dk[DMAX];
        const cumod_session *ds[DMAX];
        size_t dn = cumod__fdirect_in_flight(fl->u, dg, dk, ds, DMAX);
        for (size_t i = 0; i < dn; i++) {
            if (i >= DMAX || dg[i] == NULL || dk[i] == NULL) {
                (*unknown)++;
                continue;
            }
            n = faults_add(out, n, max, dg[i], dk[i], ds[i]);
        }
    }

    cumod_work_call *gate = faults_solo_first(fl);
    while ((q = cumod__idmap_next(&fl->streams, &cur, NULL)) != NULL)
        CUMOD_LIST_FOREACH(&q->calls, node)
        {
            cumod_work_call *c =
                CUMOD_CONTAINER_OF(node, cumod_work_call, flight);
            /* What waits behind the gate never reached the executor. */
            if (gate != NULL && gate->sent && c->order > gate->order)
                continue;
            for (uint32_t i = 0; i < c->ngens; i++)
                n = faults_add(out, n, max, c->gens[i], c->kerns[i], c->s);
        }
    return n;
}

/* "kernel K of module M (generation G, sha256 S12)" */
static void
faults_name(const fault_launch *l, char *buf, size_t len)
{
    snprintf(buf, len, "kernel %s of module %s (generation %llu, sha256 %.12s)",
             l->k->name, cumod__gen_module(l->g),
             (unsigned long long)cumod__gen_number(l->g),
             cumod__gen_sha256(l->g));
}

/* --- Suspects ------------------------------------------------------------ */

static int
faults_suspect_match(const cumod_suspect *x, const cumod_gen *g,
                     const cumod_kernel *k)
{
    return strcmp(x->kernel, k->name) == 0 &&
           strcmp(x->module, cumod__gen_module(g)) == 0 &&
           strcmp(x->sha256, cumod__gen_sha256(g)) == 0;
}

static void
faults_suspect_add(cumod_faults *fl, const fault_launch *l)
{
    cumod_suspect *x;
    for (uint32_t i = 0; i < fl->nsuspects; i++)
        if (faults_suspect_match(&fl->suspects[i], l->g, l->k))
            return;
    if (fl->nsuspects == CUMOD_SUSPECTS_MAX) {
        /* The oldest suspect goes: it has had its chances to run alone. */
        memmove(&fl->suspects[0], &fl->suspects[1],
                sizeof(fl->suspects[0]) * (CUMOD_SUSPECTS_MAX - 1));
        fl->nsuspects--;
    }
    x = &fl->suspects[fl->nsuspects++];
    snprintf(x->module, sizeof(x->module), "%s", cumod__gen_module(l->g));
    snprintf(x->sha256, sizeof(x->sha256), "%s", cumod__gen_sha256(l->g));
    snprintf(x->kernel, sizeof(x->kernel), "%s", l->k->name);
}

/* 1 when a launch of c is a suspect. */
static int
faults_call_suspect(const cumod_faults *fl, const cumod_work_call *c)
{
    for (uint32_t i = 0; i < c->ngens; i++)
        for (uint32_t j = 0; j < fl->nsuspects; j++)
            if (faults_suspect_match(&fl->suspects[j], c->gens[i], c->kerns[i]))
                return 1;
    return 0;
}

/* c ran alone and completed: its kernels are cleared. */
static void
faults_suspects_clear(cumod_faults *fl, const cumod_work_call *c)
{
    for (uint32_t i = 0; i < c->ngens; i++)
        for (uint32_t j = 0; j < fl->nsuspects;) {
            if (faults_suspect_match(&fl->suspects[j], c->gens[i],
                                     c->kerns[i])) {
                CUMOD_LOGN("CUMOD-FAULT",
                           "suspect kernel %s of module %s ran alone "
                           "without a fault: cleared",
                           c->kerns[i]->name, cumod__gen_module(c->gens[i]));
                fl->suspects[j] = fl->suspects[--fl->nsuspects];
            } else {
                j++;
            }
        }
    cumod__fdirect_unit_update(fl->u);
}

/* --- Solo runs ---------------------------------------------------------- */

/* The first solo call is at the gate: count what went before it. */
static void
faults_solo_arm(cumod_faults *fl)
{
    cumod_work_call *s = faults_solo_first(fl);
    size_t cur = 0;
    fault_stream *q;

    fl->ahead = 0;
    fl->solo_sent = 0;
    while ((q = cumod__idmap_next(&fl->streams, &cur, NULL)) != NULL)
        CUMOD_LIST_FOREACH(&q->calls, node)
        {
            cumod_work_call *c =
                CUMOD_CONTAINER_OF(node, cumod_work_call, flight);
            if (c->order < s->order)
                fl->ahead++;
        }
}

/* The first solo call goes once what went before it has completed. */
static void
faults_solo_pump(cumod_faults *fl)
{
    cumod_work_call *s = faults_solo_first(fl);
    if (s == NULL || fl->solo_sent || !s->sent || fl->ahead != 0 || fl->known)
        return; /* (known: the executor is going; the next one runs it) */
    fl->solo_sent = 1;
    faults_restart_clocks(fl, s->order);
    CUMOD_LOGN("CUMOD-FAULT",
               "a launch of suspect kernel %s of module %s (session pid %d) "
               "runs alone",
               s->kerns[0]->name, cumod__gen_module(s->gens[0]), s->s->pid);
    cumod__xc_gate_pass(fl->u->xc);
}

/* The first solo call is done (or gone): the next one goes to the gate,
 * or the gate opens. */
static void
faults_solo_next(cumod_faults *fl)
{
    cumod_work_call *s = faults_solo_first(fl);
    if (s != NULL)
        faults_restart_clocks(fl, s->order + 1);
    if (s != NULL) {
        cumod__list_remove(&s->solo_link);
        s->solo = 0;
    }
    if ((s = faults_solo_first(fl)) == NULL || !s->sent) {
        /* None left (or the next was never sent: it is dropped). */
        while ((s = faults_solo_first(fl)) != NULL) {
            cumod__list_remove(&s->solo_link);
            s->solo = 0;
        }
        fl->solo_sent = 0;
        cumod__xc_gate_open(fl->u->xc);
        return;
    }
    cumod__xc_gate_at(fl->u->xc, s->xseq);
    fl->solo_since = uv_now(fl->loop);
    faults_solo_arm(fl);
    faults_solo_pump(fl);
}

/* The solo runs took too long: everyone goes on; the suspects stay
 * suspects. */
static void
faults_solo_abandon(cumod_faults *fl)
{
    cumod_work_call *s = faults_solo_first(fl);
    if (s != NULL)
        faults_restart_clocks(fl, fl->solo_sent ? s->order + 1 : s->order);
    while ((s = faults_solo_first(fl)) != NULL) {
        cumod__list_remove(&s->solo_link);
        s->solo = 0;
    }
    fl->solo_sent = 0;
    cumod__xc_gate_open(fl->u->xc);
}

int
cumod__faults_before_send(cumod_faults *fl, cumod_work_call *c)
{
    if (fl->nsuspects == 0 || !faults_call_suspect(fl, c))
        return 0;
    c->solo = 1;
    c->xseq = cumod__xc_next_seq(fl->u->xc);
    cumod__list_append(&fl->solos, &c->solo_link);
    if (faults_solo_first(fl) == c) {
        fl->solo_since = uv_now(fl->loop);
        cumod__xc_gate_at(fl->u->xc, c->xseq);
    }
    /* else: it waits behind the gate for its turn */
    return 1;
}

void
cumod__faults_not_sent(cumod_faults *fl, cumod_work_call *c)
{
    if (!c->solo)
        return;
    if (faults_solo_first(fl) == c) {
        faults_solo_next(fl);
        return;
    }
    cumod__list_remove(&c->solo_link);
    c->solo = 0;
}

/* --- Queues and deadlines ------------------------------------------------ */

/* c is the head of its stream now: it runs, and its deadline counts. */
static void
faults_start(cumod_faults *fl, cumod_work_call *c)
{
    c->start_ms = uv_now(fl->loop);
    if (c->deadline_ms != 0) {
        cumod__list_append(&fl->running, &c->dl_link);
        faults_tick_update(fl);
    }
}

void
cumod__faults_sent(cumod_faults *fl, cumod_work_call *c)
{
    fault_stream *q = cumod__idmap_get(&fl->streams, c->stream);

    if (q == NULL) {
        if ((q = calloc(1, sizeof(*q))) == NULL ||
            cumod__idmap_set(&fl->streams, c->stream, q) != CUMOD_OK) {
            /* Out of memory: the call runs, untracked (no deadline, not
             * a suspect). */
            free(q);
            return;
        }
        cumod__list_init(&q->calls);
    }
    c->sent = 1;
    c->order = ++fl->orders;
    if (c->solo && faults_solo_first(fl) == c)
        fl->ahead = fl->nflight; /* every call in flight went before */
    fl->nflight++;
    cumod__list_append(&q->calls, &c->flight);
    if (cumod__list_first(&q->calls) == &c->flight)
        faults_start(fl, c);
    faults_solo_pump(fl);
}

static void
faults_unqueue(cumod_faults *fl, cumod_work_call *c)
{
    fault_stream *q = cumod__idmap_get(&fl->streams, c->stream);
    cumod_list_node *next;

    if (!c->sent)
        return;
    cumod_work_call *first = faults_solo_first(fl);
    c->sent = 0;
    fl->nflight--;
    if (first != NULL && c != first && first->sent && c->order < first->order &&
        fl->ahead > 0)
        fl->ahead--;
    if (cumod__list_node_active(&c->dl_link))
        cumod__list_remove(&c->dl_link);
    cumod__list_remove(&c->flight);
    if (q == NULL)
        return;
    if ((next = cumod__list_first(&q->calls)) == NULL) {
        cumod__idmap_remove(&fl->streams, c->stream);
        free(q);
        return;
    }
    cumod_work_call *n = CUMOD_CONTAINER_OF(next, cumod_work_call, flight);
    if (n->start_ms == 0)
        faults_start(fl, n);
}

/* A head ran past its deadline: a hang. Attributes it, and kills the
 * executor; its calls are answered when it is gone. */
static void
faults_hang(cumod_faults *fl, cumod_work_call *c, uint64_t now)
{
    char name[512] = "work", why[1024], older[512] = "";
    if (c->kind == CUMOD__REQUEST__BODY_GEMM)
        snprintf(name, sizeof(name), "a GEMM");
    fault_launch l;
    int one = 0, has = faults_call_kernel(c, &l, &one);

    c->timed_out = 1;
    fl->known = 1;
    cumod__metrics_fault(fl->u->f, 1);
    if (has)
        faults_name(&l, name, sizeof(name));
    /* A launch that started before this one and still runs may be what
     * kept it from finishing: then nobody is blamed. */
    size_t cur = 0;
    fault_stream *q;
    while (older[0] == '\0' &&
           (q = cumod__idmap_next(&fl->streams, &cur, NULL)) != NULL) {
        cumod_work_call *h = CUMOD_CONTAINER_OF(cumod__list_first(&q->calls),
                                                cumod_work_call, flight);
        fault_launch hl;
        int hone;
        if (h == c || h->start_ms == 0 || h->start_ms >= c->start_ms)
            continue;
        if (faults_call_kernel(h, &hl, &hone))
            faults_name(&hl, older, sizeof(older));
        else if (h->ngemms > 0) /* a long GEMM is older work too */
            snprintf(older, sizeof(older), "a GEMM");
    }
    cumod__msgf(why, sizeof(why), "%s ran past its deadline of %u ms", name,
                c->deadline_ms);
    if (has && one && older[0] == '\0') {
        fl->culprit_gen = l.g;
        fl->culprit_kernel = l.k;
        fl->culprit_quarantined =
            cumod__catalog_blame(*fl->cat, (cumod_gen *)l.g, why, 1);
        CUMOD_LOGE(
            "CUMOD-HANG",
            "%s (launched by session pid %d uid %d, running %llu "
            "ms): a hang; the executor is restarted%s",
            why, c->s->pid, c->s->uid, (unsigned long long)(now - c->start_ms),
            fl->culprit_quarantined ? " and the generation quarantined" : "");
    } else {
        CUMOD_LOGE("CUMOD-HANG",
                   "%s (launched by session pid %d uid %d): a hang; the "
                   "executor is restarted; nobody is quarantined: %s%s",
                   why, c->s->pid, c->s->uid,
                   older[0] ? "an older launch was still running beside it: "
                            : "the call launches several kernels",
                   older);
    }
    cumod__msgf(fl->cause, sizeof(fl->cause),
                "%s (a hang): the executor was "
                "restarted",
                why);
    cumod__msgf(fl->fault, sizeof(fl->fault), "a hang");
    cumod__xc_kill(fl->u->xc, why);
}

static void
faults_on_tick(uv_timer_t *h)
{
    cumod_faults *fl = h->data;
    uint64_t now = uv_now(fl->loop);

    cumod_work_call *s = faults_solo_first(fl);
    if (s != NULL && now - fl->solo_since >= CUMOD_SOLO_MS) {
        CUMOD_LOGN("CUMOD-FAULT",
                   "suspect kernel %s %s %d ms: everyone goes on beside it",
                   s->kerns[0]->name,
                   fl->solo_sent ? "still runs alone after"
                                 : "did not get to run alone within",
                   CUMOD_SOLO_MS);
        faults_solo_abandon(fl);
    }
    if (!fl->known)
        CUMOD_LIST_FOREACH(&fl->running, n)
        {
            cumod_work_call *c =
                CUMOD_CONTAINER_OF(n, cumod_work_call, dl_link);
            cumod_work_call *g = faults_solo_first(fl);
            if (g != NULL && g->sent &&
                (c->order > g->order || (c == g && !fl->solo_sent)))
                continue; /* behind the gate: not running */
            if (now - c->start_ms >= c->deadline_ms) {
                faults_hang(fl, c, now);
                break; /* one kill ends them all */
            }
        }
    faults_tick_update(fl);
}

static void
faults_tick_update(cumod_faults *fl)
{
    int want =
        !cumod__list_empty(&fl->solos) || !cumod__list_empty(&fl->running);
    if (want && !fl->ticking)
        uv_timer_start(&fl->tick, faults_on_tick, FAULT_TICK_MS, FAULT_TICK_MS);
    else if (!want && fl->ticking)
        uv_timer_stop(&fl->tick);
    fl->ticking = want;
}

/* --- Faults -------------------------------------------------------------- */

/* Under MPS (a pool), one client's fatal fault ends every MPS client of
 * the device, and each reports it in the kernel it had in flight
 * (measured on the H200: the other pool executor blamed its own vadd).
 * So a fault an MPS client reports while another MPS client of the device
 * had work in flight, or within this long of another's report, is shared:
 * nobody can be blamed from one executor's view. */
#define FAULT_MPS_SHARED_MS 3000

static int
faults_mps_shared(cumod_faults *fl)
{
    cumod_unit *u = fl->u;
    cumod_front *f = u->f;
    uint64_t now = uv_now(fl->loop);
    int shared =
        fl->mps_fault_ms != 0 && now - fl->mps_fault_ms < FAULT_MPS_SHARED_MS;

    for (uint32_t i = 0; i < f->nunits; i++) {
        cumod_unit *v = f->units[i];
        if (v == u || !v->mps || v->device != u->device)
            continue;
        fault_launch one[1];
        size_t unknown = 0;
        if (v->xc != NULL &&
            faults_in_flight(&v->faults, one, 1, &unknown) + unknown > 0)
            shared = 1;
        v->faults.mps_fault_ms = now;
    }
    return shared;
}

/* The executor reported a fault: attributes it to what was in flight. */
static void
faults_attribute(cumod_faults *fl, const char *exec_msg)
{
    fault_launch all[8];
    char name[512], list[600] = "", why[1024];
    size_t unknown = 0, n = faults_in_flight(fl, all, 8, &unknown), at = 0;
    /* The CUDA error, from the executor's sentence: which call saw the
     * sticky error first ("cuEventRecord failed: ...") is chance. */
    const char *err = strstr(exec_msg, "CUDA_ERROR_");

    fl->known = 1;
    cumod__msgf(fl->fault, sizeof(fl->fault), "%s", err ? err : exec_msg);
    int shared = fl->u->mps && faults_mps_shared(fl);
    if (n == 1 && unknown == 0 && !shared) {
        faults_name(&all[0], name, sizeof(name));
        cumod__msgf(why, sizeof(why), "%s in %s", fl->fault, name);
        fl->culprit_gen = all[0].g;
        fl->culprit_kernel = all[0].k;
        fl->culprit_handle = cumod__fdirect_handle_of(fl->u, all[0].g);
        fl->culprit_kidx = all[0].k->index;
        snprintf(fl->culprit_name, sizeof(fl->culprit_name), "%s", name);
        fl->culprit_quarantined =
            cumod__catalog_blame(*fl->cat, (cumod_gen *)all[0].g, why, 0);
        CUMOD_LOGE("CUMOD-FAULT",
                   "%s: the culprit is kernel %s of module %s generation "
                   "%llu (sha256 %s), launched by session pid %d uid %d; "
                   "the executor is restarted%s",
                   fl->fault, all[0].k->name, cumod__gen_module(all[0].g),
                   (unsigned long long)cumod__gen_number(all[0].g),
                   cumod__gen_sha256(all[0].g), all[0].s->pid, all[0].s->uid,
                   fl->culprit_quarantined ? " and the generation quarantined"
                                           : "");
        cumod__msgf(fl->cause, sizeof(fl->cause), "%s faulted (%s)", name,
                    fl->fault);
        cumod__xc_note_fault(fl->u->xc, why);
        return;
    }
    if (n == 0 && unknown == 0) {
        CUMOD_LOGE("CUMOD-FAULT",
                   "%s with no launch in flight: nobody is blamed; the "
                   "executor is restarted",
                   fl->fault);
        cumod__msgf(fl->cause, sizeof(fl->cause), "%s", fl->fault);
        cumod__xc_note_fault(fl->u->xc, fl->fault);
        return;
    }
    for (size_t i = 0; i < n && i < 8; i++) {
        faults_suspect_add(fl, &all[i]);
        at += (size_t)snprintf(
            list + at, at < sizeof(list) ? sizeof(list) - at : 0,
            "%s%s:%s generation %llu (pid %d uid %d)", i ? ", " : "",
            cumod__gen_module(all[i].g), all[i].k->name,
            (unsigned long long)cumod__gen_number(all[i].g), all[i].s->pid,
            all[i].s->uid);
        if (at >= sizeof(list))
            at = sizeof(list) - 1;
    }
    n += unknown;
    if (shared)
        CUMOD_LOGE("CUMOD-FAULT",
                   "%s in an MPS client of device %d while %zu kernels were "
                   "in flight here (%s%s) and other MPS clients of the device "
                   "were busy or faulted: under MPS every client sees one "
                   "client's fault, so nobody is blamed; the next launch of "
                   "each runs alone here; the executor is restarted",
                   fl->fault, fl->u->device, n, list, n > 8 ? ", ..." : "");
    else
        CUMOD_LOGE("CUMOD-FAULT",
                   "%s while %zu kernels were in flight (%s%s): the culprit "
                   "cannot be pinned down, nobody is blamed; the next launch "
                   "of each runs alone; the executor is restarted",
                   fl->fault, n, list, n > 8 ? ", ..." : "");
    cumod__fdirect_unit_update(fl->u); /* suspects: through the front */
    cumod__msgf(fl->cause, sizeof(fl->cause),
                "%s while %zu kernels were in flight (%s%s)%s; the culprit "
                "could not be pinned down",
                fl->fault, n, list, n > 8 ? ", ..." : "",
                shared ? " under MPS, other clients of the device busy" : "");
    cumod__msgf(why, sizeof(why), "%s; culprit unknown among %zu kernels",
                fl->fault, n);
    cumod__xc_note_fault(fl->u->xc, why);
}

/* 1 when c launched the culprit. */
static int
faults_is_culprit(const cumod_faults *fl, const cumod_work_call *c)
{
    if (fl->culprit_gen == NULL)
        return 0;
    for (uint32_t i = 0; i < c->ngens; i++)
        if ((const void *)c->gens[i] == fl->culprit_gen &&
            (const void *)c->kerns[i] == fl->culprit_kernel)
            return 1;
    return 0;
}

void
cumod__faults_done(cumod_faults *fl, cumod_work_call *c, cumod_err *st,
                   int reported, char *msg, size_t msglen)
{
    if (*st == CUMOD_ECTXLOST && reported && !fl->known)
        faults_attribute(fl, msg);
    if (*st == CUMOD_ECTXLOST && !reported)
        fl->work_lost = 1;

    if (c->timed_out) {
        *st = CUMOD_ETIMEDOUT;
        fault_launch l;
        int one;
        char name[512] = "the work";
        if (c->kind == CUMOD__REQUEST__BODY_GEMM)
            snprintf(name, sizeof(name), "the GEMM");
        if (faults_call_kernel(c, &l, &one))
            faults_name(&l, name, sizeof(name));
        cumod__msgf(msg, msglen,
                    "%s ran past its deadline of %u ms: a hang; the executor "
                    "was restarted%s",
                    name, c->deadline_ms,
                    faults_is_culprit(fl, c) && fl->culprit_quarantined
                        ? " and the module generation quarantined"
                        : "");
    } else if (*st == CUMOD_ECTXLOST && fl->known) {
        if (faults_is_culprit(fl, c)) {
            fault_launch l = {fl->culprit_gen, fl->culprit_kernel, c->s};
            char name[512];
            faults_name(&l, name, sizeof(name));
            cumod__msgf(msg, msglen,
                        "%s: the work faulted on the device; the culprit is "
                        "%s%s; the executor was restarted",
                        fl->fault, name,
                        fl->culprit_quarantined ? ", now quarantined" : "");
        } else {
            cumod__msgf(msg, msglen,
                        "the CUDA context was lost before this work "
                        "completed: %s; retry",
                        fl->cause);
        }
    }
    faults_unqueue(fl, c);
    if (c->solo && faults_solo_first(fl) == c) {
        if (*st == CUMOD_OK && fl->solo_sent)
            faults_suspects_clear(fl, c);
        faults_solo_next(fl);
    } else {
        if (c->solo) { /* answered before its turn (the executor went) */
            cumod__list_remove(&c->solo_link);
            c->solo = 0;
        }
        faults_solo_pump(fl);
    }
    faults_tick_update(fl);
}

int
cumod__faults_lost(cumod_faults *fl)
{
    int explained = fl->known || fl->work_lost;
    fl->known = fl->work_lost = 0;
    fl->culprit_gen = fl->culprit_kernel = NULL;
    fl->culprit_quarantined = 0;
    fl->culprit_handle = 0;
    fl->culprit_name[0] = '\0';
    fl->fault[0] = fl->cause[0] = '\0';
    /* Every call was answered: no solo call is left. */
    fl->solo_sent = 0;
    faults_tick_update(fl);
    return explained;
}

void
cumod__faults_explain(const cumod_faults *fl, cumod_status *st)
{
    char tmp[CUMOD_STATUS_MSG];
    if (st->code != CUMOD_ECTXLOST || !fl->known || fl->cause[0] == '\0')
        return;
    cumod__msgf(tmp, sizeof(tmp), "%.300s (%s)", st->msg, fl->cause);
    memcpy(st->msg, tmp, sizeof(st->msg));
}

void
cumod__faults_reported(cumod_faults *fl, const char *message)
{
    if (!fl->known)
        faults_attribute(fl, message);
}

void
cumod__faults_lost_answer(cumod_faults *fl, uint64_t handle, uint32_t kidx,
                          cumod_err *st, char *msg, size_t msglen)
{
    *st = CUMOD_ECTXLOST;
    if (!fl->known) {
        fl->work_lost = 1;
        cumod__msgf(msg, msglen,
                    "the CUDA context was lost (the executor exited) before "
                    "this work completed");
        return;
    }
    if (handle != 0 && handle == fl->culprit_handle &&
        kidx == fl->culprit_kidx) {
        cumod__msgf(msg, msglen,
                    "%s: the work faulted on the device; the culprit is "
                    "%s%s; the executor was restarted",
                    fl->fault, fl->culprit_name,
                    fl->culprit_quarantined ? ", now quarantined" : "");
        return;
    }
    cumod__msgf(msg, msglen,
                "the CUDA context was lost before this work completed: %s; "
                "retry",
                fl->cause);
}
