/* SPDX-License-Identifier: MIT */
/*
 * Direct launches' answers (direct_impl.h): a ring's life and its giving
 * up, answers written into its completion ring beside the front's, the
 * state block's slots, the statistics for the front, the tickets of
 * launches answered when enqueued or posted (their Waits and kept
 * failures), and the end of a launch.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sched.h>
#include <unistd.h>

#include "common/log.h"
#include "cumod/errors.h"
#include "data/latency.h"
#include "data/ringio.h"
#include "device.h"
#include "direct_impl.h"
#include "evpool.h"
#include "inflight.h"
#include "launch.h"
#include "reply.h"
#include "streams.h"
#include "submit.h"

/* --- The ring's life ----------------------------------------------------- */

void
cumod__dring_ref(dring *g)
{
    atomic_fetch_add(&g->refs, 1);
}

void
cumod__dring_unref(dring *g)
{
    if (atomic_fetch_sub(&g->refs, 1) != 1)
        return;
    (void)cumod__dring_stats_flush(g, 0); /* nothing counted is lost */
    if (g->map != NULL)
        munmap(g->map, g->map_len);
    if (g->st != NULL)
        munmap(g->st, g->st_len);
    if (g->bell_fd >= 0)
        close(g->bell_fd);
    cumod__direct_ring_snap_fini(g);
    pthread_mutex_destroy(&g->mtx);
    free(g);
}

/* The client sleeps on cq_seq: wake it (a shared futex: the word is in
 * its mapping too), from the thread that answered. Not through a waking
 * thread, as the front's one loop does: measured on the H200 with 16-48
 * crowded clients, one waking thread at 88-90% of a core capped the
 * executor at 252-291k launches a second; the submission threads making
 * their own calls reached 280-306k with lower tails (bench/notes.md). */
void
cumod__dring_wake(dring *g)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (!atomic_load_explicit(&g->h->client_waiting, memory_order_relaxed))
        return;
    atomic_fetch_add_explicit(&g->h->cq_seq, 1, memory_order_release);
    syscall(SYS_futex, &g->h->cq_seq, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* Tells the front a ring was given up (its client broke the rules). */
static void
dring_tell_bad(dring *g, const char *why)
{
    struct cumod_direct *d = g->d;
    char buf[sizeof(cumod_chan_ring_msg) + 512];
    cumod_chan_ring_msg m = {.session = g->session};
    int n = snprintf(buf + sizeof(m), 512, "%s", why);
    m.len = (uint32_t)(n < 512 ? n : 511);
    memcpy(buf, &m, sizeof(m));
    cumod_chan_hdr h = {.op = CUMOD_CHAN_RING_BAD};
    (void)cumod__exec_send(d->ex, &h, buf, sizeof(m) + m.len);
}

/* g's client broke its rules: nothing more is read or written, the
 * client is told (its header says closed) and the front hears why. With
 * g->mtx held. */
static int
dring_bad_locked(dring *g, const char *why)
{
    if (g->gone)
        return 0;
    g->gone = 1;
    CUMOD_LOGW("CUMOD-RING",
               "the ring %s of session %u (pid %d uid %d) is given up: %s; "
               "its client goes on over its connection",
               g->name, g->session, g->pid, g->uid, why);
    atomic_store_explicit(&g->h->closed, 1, memory_order_seq_cst);
    atomic_fetch_add_explicit(&g->h->cq_seq, 1, memory_order_release);
    syscall(SYS_futex, &g->h->cq_seq, FUTEX_WAKE, 1, NULL, NULL, 0);
    return 1;
}

void
cumod__dring_bad(dring *g, const char *why)
{
    pthread_mutex_lock(&g->mtx);
    int told = dring_bad_locked(g, why);
    pthread_mutex_unlock(&g->mtx);
    if (told)
        dring_tell_bad(g, why);
}

/* --- Answers --------------------------------------------------------------
 */

/* The statistics since the last, to the front (with g->mtx held: the
 * payload built; sent by the caller after it lets go). 0 bytes: none. */
static size_t
dring_stats_take(dring *g, char *buf, size_t cap)
{
    if (g->requests == 0 && g->lat_count == 0 && g->nstat == 0)
        return 0;
    cumod_chan_dstats s = {.session = g->session,
                           .n = g->nstat,
                           .requests = g->requests,
                           .lat_count = g->lat_count,
                           .lat_sum_ns = g->lat_sum_ns};
    memcpy(s.lat_bucket, g->lat_bucket, sizeof(s.lat_bucket));
    size_t len = sizeof(s) + g->nstat * sizeof(cumod_chan_dstat);
    if (len > cap)
        return 0;
    memcpy(buf, &s, sizeof(s));
    for (uint32_t i = 0; i < g->nstat; i++) {
        cumod_chan_dstat e = {.handle = g->stat[i].handle,
                              .kernel = g->stat[i].kernel,
                              .ok = g->stat[i].ok,
                              .failed = g->stat[i].failed,
                              .gpu_ns = g->stat[i].gpu_ns};
        memcpy(buf + sizeof(s) + i * sizeof(e), &e, sizeof(e));
    }
    g->requests = g->lat_count = g->lat_sum_ns = 0;
    memset(g->lat_bucket, 0, sizeof(g->lat_bucket));
    g->nstat = 0;
    g->stats_ns = cumod__mono_ns();
    atomic_fetch_add_explicit(&g->stats_sending, 1, memory_order_relaxed);
    return len;
}

#define DRING_STATS_BYTES                                                      \
    (sizeof(cumod_chan_dstats) + DRING_STATS * sizeof(cumod_chan_dstat))

/* Sends what dring_stats_take took (and counted in stats_sending). */
static void
dring_stats_send(dring *g, const char *buf, size_t len)
{
    if (len == 0)
        return;
    cumod_chan_hdr h = {.op = CUMOD_CHAN_DIRECT_STATS};
    (void)cumod__exec_send(g->d->ex, &h, buf, len);
    atomic_fetch_sub_explicit(&g->stats_sending, 1, memory_order_release);
}

/* Sends g's statistics if they are at least min_age old: 1 when some were
 * left (too young), else 0. */
int
cumod__dring_stats_flush(dring *g, uint64_t min_age)
{
    char stats[DRING_STATS_BYTES];
    size_t slen = 0;
    int left = 0;

    pthread_mutex_lock(&g->mtx);
    if (cumod__mono_ns() - g->stats_ns >= min_age)
        slen = dring_stats_take(g, stats, sizeof(stats));
    else
        left = g->requests != 0 || g->lat_count != 0 || g->nstat != 0;
    pthread_mutex_unlock(&g->mtx);
    dring_stats_send(g, stats, slen);
    return left;
}

/* Statistics left behind by a launch: the doorbell thread sends them
 * unless more come first. */
static void
dring_stats_due(struct cumod_direct *d)
{
    if (atomic_exchange_explicit(&d->stats_due, 1, memory_order_acq_rel) == 0) {
        uint64_t one = 1;
        (void)!write(d->tick_fd, &one, sizeof(one));
    }
}

/* A launch's figures (g->mtx held). 1 when the table is full: send. */
static int
dring_stat_add(dring *g, const dlaunch *l, int ok, uint64_t gpu_ns,
               uint64_t now)
{
    uint32_t i;
    for (i = 0; i < g->nstat; i++)
        if (g->stat[i].handle == l->handle && g->stat[i].kernel == l->kernel)
            break;
    if (i == g->nstat) {
        g->stat[i] = (dring_stat){.handle = l->handle, .kernel = l->kernel};
        g->nstat++;
    }
    if (ok)
        g->stat[i].ok++;
    else
        g->stat[i].failed++;
    g->stat[i].gpu_ns += gpu_ns;
    uint64_t lat = now > l->t0_ns ? now - l->t0_ns : 0;
    g->lat_count++;
    g->lat_sum_ns += lat;
    cumod__lat_count(g->lat_bucket, lat);
    return g->nstat == DRING_STATS;
}

/* Writes bytes (a packed cumod.Reply) into g's cq (g->mtx held), under
 * the state block's lock (the front writes the answers it gives too): 0,
 * or -1 when the client left its replies unread (the ring is given
 * up). */
int
cumod__dring_put_locked(dring *g, const uint8_t *bytes, size_t len,
                        int32_t slot)
{
    if (g->gone)
        return -1;
    int rv = pthread_mutex_lock(&g->st->cq_lock);
    if (rv == EOWNERDEAD) /* the front died holding it: we exit soon */
        pthread_mutex_consistent(&g->st->cq_lock);
    uint64_t tail = atomic_load_explicit(&g->st->cq_tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&g->h->cq_head, memory_order_acquire);
    if (cumod__ring_put_bytes(g->cq, g->cq_size, head, &tail, bytes, len) !=
        0) {
        pthread_mutex_unlock(&g->st->cq_lock);
        dring_bad_locked(g, "its completion ring is full (replies left "
                            "unread)");
        return -1;
    }
    if (slot >= 0)
        atomic_store_explicit(&g->st->slot[slot].answered_at, tail,
                              memory_order_release);
    atomic_store_explicit(&g->st->cq_tail, tail, memory_order_release);
    atomic_store_explicit(&g->h->cq_tail, tail, memory_order_release);
    pthread_mutex_unlock(&g->st->cq_lock);
    return 0;
}

/* The answer to request id: done (code 0, generation) or an error. */
size_t
cumod__dring_pack(uint64_t id, int code, const char *msg, uint64_t generation,
                  uint64_t ticket, uint8_t *buf, size_t cap)
{
    Cumod__Reply rep = CUMOD__REPLY__INIT;
    Cumod__DoneReply done = CUMOD__DONE_REPLY__INIT;
    Cumod__Status st = CUMOD__STATUS__INIT;

    rep.version = CUMOD__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    rep.id = id;
    if (code == CUMOD_OK) {
        done.generation = generation;
        done.ticket = ticket;
        rep.body_case = CUMOD__REPLY__BODY_DONE;
        rep.done = &done;
    } else {
        st.code = code;
        st.message = (char *)(msg ? msg : "failed");
        rep.status = &st;
    }
    size_t len = cumod__reply__get_packed_size(&rep);
    if (len > cap)
        return 0;
    cumod__reply__pack(&rep, buf);
    return len;
}

/* A slot for a record (g->mtx held): its index, or DRING_NO_SLOT. */
int32_t
cumod__dring_slot_take(dring *g, const cumod_dring_slot *what)
{
    if (g->nfree == 0)
        return DRING_NO_SLOT;
    int32_t slot = g->free_slot[--g->nfree];
    cumod_dring_slot *sl = &g->st->slot[slot];
    /* Everything before the id: the front reads a slot whose id is set
     * (a fault's attribution) while this process runs. */
    sl->handle = what->handle;
    sl->kernel = what->kernel;
    sl->stream = what->stream;
    sl->start_ms = what->start_ms;
    sl->end = what->end;
    sl->ticket = what->ticket;
    sl->wait = what->wait;
    sl->posted = what->posted;
    atomic_store_explicit(&sl->answered_at, 0, memory_order_relaxed);
    atomic_store_explicit(&sl->id,
                          atomic_load_explicit(&what->id, memory_order_relaxed),
                          memory_order_release);
    return slot;
}

void
cumod__dring_slot_free(dring *g, int32_t slot)
{
    atomic_store_explicit(&g->st->slot[slot].id, 0, memory_order_release);
    g->free_slot[g->nfree++] = slot;
}

/* "ticket N: what" */
static void
dring_ticket_msg(char *buf, size_t cap, uint64_t ticket, int code,
                 const char *msg)
{
    snprintf(buf, cap, "ticket %llu: %s", (unsigned long long)ticket,
             msg != NULL && msg[0] != '\0' ? msg : cumod_strerror(code));
}

/* The answer to a Wait (in slot, or none) for ticket: done, or code with
 * msg (g->mtx held). */
void
cumod__dring_wait_answer(dring *g, uint64_t id, int32_t slot, uint64_t ticket,
                         int code, const char *msg)
{
    uint8_t reply[1024];
    char text[600];
    if (code != CUMOD_OK)
        dring_ticket_msg(text, sizeof(text), ticket, code, msg);
    size_t len = cumod__dring_pack(id, code, code != CUMOD_OK ? text : NULL, 0,
                                   0, reply, sizeof(reply));
    (void)cumod__dring_put_locked(g, reply, len, slot);
}

/* A failed ticket kept for a later Wait (g->mtx held): the newest
 * CUMOD_DRING_FAILED, in the state block, where the front finds them if
 * it takes the ring back. */
static void
dring_failed_add(dring *g, uint64_t ticket, int code, const char *msg)
{
    cumod_dring_state *st = g->st;
    uint32_t i;
    if (st->nfailed < CUMOD_DRING_FAILED) {
        i = (st->failed_at + st->nfailed) % CUMOD_DRING_FAILED;
        st->nfailed++;
    } else {
        i = st->failed_at; /* the oldest goes */
        st->failed_at = (st->failed_at + 1) % CUMOD_DRING_FAILED;
    }
    cumod_dring_failed *f = &st->failed[i];
    f->code = code;
    snprintf(f->msg, sizeof(f->msg), "%s",
             msg != NULL && msg[0] != '\0' ? msg : cumod_strerror(code));
    f->ticket = ticket;
}

cumod_dring_failed *
cumod__dring_failed_find(dring *g, uint64_t ticket)
{
    cumod_dring_state *st = g->st;
    for (uint32_t n = 0; n < st->nfailed && n < CUMOD_DRING_FAILED; n++) {
        cumod_dring_failed *f =
            &st->failed[(st->failed_at + n) % CUMOD_DRING_FAILED];
        if (f->ticket == ticket)
            return f;
    }
    return NULL;
}

/* ticket's failure if one is kept (and then forgotten: reported once), g->mtx
 * held: 1 and *code, msg; else 0. */
int
cumod__dring_failed_take(dring *g, uint64_t ticket, int *code, char *msg,
                         size_t cap)
{
    cumod_dring_failed *f = cumod__dring_failed_find(g, ticket);
    if (f == NULL)
        return 0;
    *code = f->code;
    snprintf(msg, cap, "%s", f->msg);
    f->ticket = 0;
    return 1;
}

/* l, answered when enqueued, ended with code (g->mtx held): its Waits
 * answered (when answer), or a failure kept. Returns 0: l itself is not
 * answered again. */
static int
dring_ticket_end(dring *g, dlaunch *l, int code, const char *msg, int answer)
{
    int waited = l->waits != NULL;
    while (l->waits != NULL) {
        dwait *w = l->waits;
        l->waits = w->next;
        if (answer)
            cumod__dring_wait_answer(g, w->id, w->slot, l->ticket, code, msg);
        cumod__dring_slot_free(g, w->slot);
        free(w);
    }
    if (code != CUMOD_OK && !waited)
        dring_failed_add(g, l->ticket, code, msg);
    return 0;
}

/* A direct launch is over: answered (unless the context is lost: then the
 * front answers it from the state block, once this process is gone), its
 * slot freed, its module and ring let go. */
void
cumod__dlaunch_end(cumod_exec *ex, dlaunch *l, int code, const char *msg,
                   uint64_t gpu_ns, int answer)
{
    /* answer 0: the ring is given up, nothing more goes into it */
    dring *g = l->g;
    uint8_t reply[1024];
    char stats[DRING_STATS_BYTES];
    size_t slen = 0;
    uint64_t now = cumod__mono_ns();
    /* A launch answered when enqueued was answered then: its Waits hear
     * how it ended, or its failure is kept for a later one. */
    int acked = l->ticket != 0;
    size_t len = answer && !acked
                     ? cumod__dring_pack(l->id, code, msg, l->generation, 0,
                                         reply, sizeof(reply))
                     : 0;

    pthread_mutex_lock(&g->mtx);
    if (answer && !acked)
        (void)cumod__dring_put_locked(g, reply, len, l->slot);
    int woke = acked && answer && l->waits != NULL;
    if (acked)
        answer = dring_ticket_end(g, l, code, msg, answer);
    if (l->slot >= 0)
        cumod__dring_slot_free(g, l->slot);
    g->inflight--;
    atomic_store_explicit(&g->st->inflight, g->inflight, memory_order_release);
    int full = dring_stat_add(g, l, code == CUMOD_OK, gpu_ns, now);
    if (full || now - g->stats_ns >= DRING_STATS_NS)
        slen = dring_stats_take(g, stats, sizeof(stats));
    int last = g->detaching && g->inflight == 0 && !g->detach_told;
    if (last)
        g->detach_told = 1;
    pthread_mutex_unlock(&g->mtx);
    if (answer || woke)
        cumod__dring_wake(g);
    dring_stats_send(g, stats, slen);
    if (slen == 0)
        dring_stats_due(g->d);
    if (last)
        cumod__dring_detach_done(g);
    if (l->m != NULL) /* a GEMM runs no module */
        atomic_fetch_sub(&l->m->direct, 1);
    (void)ex;
    cumod__dring_unref(g);
    free(l);
}

/* The completion thread (or the submission thread, inline): l's event
 * said r. */
void
cumod__dlaunch_done(cumod_exec *ex, void *arg, CUresult r, uint64_t gpu_ns)
{
    dlaunch *l = arg;
    if (r == CUDA_SUCCESS) {
        cumod__dlaunch_end(ex, l, CUMOD_OK, NULL, gpu_ns, 1);
        return;
    }
    if (cumod__cu_context_lost(r)) {
        /* The front answers it, naming the culprit, from the state block
         * (this process exits right after). */
        return;
    }
    char msg[512];
    int st = cumod__cu_err(&ex->drv, r, "the work failed on the device", msg,
                           sizeof(msg));
    cumod__dlaunch_end(ex, l, st, msg, gpu_ns, 1);
}
