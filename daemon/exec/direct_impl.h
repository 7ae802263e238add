/* SPDX-License-Identifier: MIT */
/*
 * Inside the direct launches' service (direct.h), shared by its rooms:
 * the rings and their records (direct.c) and the snapshot (direct_snap.c:
 * modules, a session's buffers and streams, the unit's settings).
 */
#ifndef CUMOD_EXEC_DIRECT_IMPL_H
#define CUMOD_EXEC_DIRECT_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "common/channel.h"
#include "common/idmap.h"
#include "common/list.h"
#include "cumod_ring.h"
#include "data/decode.h"
#include "data/launch_check.h"
#include "direct.h"

/* A kernel a direct launch may run: its description (the checks') and
 * the carveout KernelSettings gave it. */
typedef struct dkern {
    cumod_kernel k;
    int32_t carveout;
} dkern;

/* A module's generation published by the front: launches of module name
 * go to handle (m, its loaded module here). */
typedef struct dmod {
    char name[132];
    uint64_t handle;
    uint64_t generation;
    uint32_t slot; /* in the direct page (cumod_direct_page) */
    cumod_exec_module *m;
    uint32_t nkernels;
    dkern *kernels;
    struct dmod *next; /* in its hash bucket */
} dmod;

#define DMOD_BUCKETS 256

typedef struct dring dring;

/* A submission thread's share: its rings, and what it decodes and checks
 * with (its own, so no lock). */
/* Direct launches in flight on their thread, one after the other on
 * stream s: the event recorded after the last. Launches with a ticket
 * (answered when enqueued, or posted) of one stream taken in one look
 * share it, up to DGROUP_MAX: a stream completes in order. */
typedef struct dpend {
    CUevent ev;     /* NULL when completion is a written word */
    int32_t word;   /* its word's index in dthread.words, or -1 */
    uint32_t value; /* what the GPU writes there once p's launches ran */
    CUstream s;
    struct dlaunch *l, *last; /* chained by dlaunch.gnext */
    uint32_t n;
} dpend;
#define DGROUP_MAX 64
/* Completion words of a thread: one per 64 bytes (a cache line of its own,
 * so the GPU's write to one does not touch the line the thread reads
 * another in), in host memory the device writes (cuStreamWriteValue32). */
#define DWORDS 1024
#define DWORD_STRIDE 16 /* uint32_t apart */
/* Words only while this many rings or fewer are polled in the executor:
 * cuStreamWriteValue32 costs its caller 0.9 us (an event's record 0.25,
 * its done query 1.6) but it does not scale over threads calling it at
 * once. H200, cumod_bench many (bench/ab-completion.sh): 1 client 10.9 /
 * 11.2 us p50 against 11.2 / 12.1 by events; 8 clients 20.1 / 20.3 us
 * against 17.4 / 17.2 (the 8-thread ceiling bench_submit measures: 20.3
 * us by words, 15.5 by events). */
#define DWORD_HOT_MAX 2
/* A word not written yet is not looked at by the driver for this long
 * (ns): then the stream's status (a fault or a lost context never writes
 * it). */
#define DWORD_QUERY_NS 50000

typedef struct dthread {
    cumod_list rings; /* dring, by link */
    /* Its direct launches in flight, completed by the thread itself
     * between its rings (no hand-off to the completion thread). */
    dpend *pend;
    uint32_t npend, pend_cap;
    /* Launches with tickets still taking company: no event yet (recorded
     * at the end of the look, dthread_close). */
    dpend open;
    int opened;
    /* Completion words (DWORDS, mapped for the device), NULL until the
     * first launch or when the driver has none: events then. */
    _Atomic uint32_t *words;
    int words_off; /* could not have them: events */
    uint32_t wfree[DWORDS], nwfree;
    uint32_t wseq;
    uint64_t wquery_ns; /* when a stream's status was last asked */
    cumod_decoder dec;
    cumod_launch_packed *packed;
    uint8_t *buf; /* a record copied out of the ring */
    size_t cap;
    char *fwd; /* a RING_FWD's payload */
    size_t fwd_cap;
} dthread;

struct cumod_direct {
    cumod_exec *ex;
    unsigned n;
    dthread *thr;
    cumod_chan_device dev; /* the checks' device limits */
    /* The snapshot's modules (direct_snap.c): the dispatcher writes, the
     * submission threads read. */
    pthread_rwlock_t mods_rw;
    dmod *mods[DMOD_BUCKETS];
    /* The unit's settings (CUMOD_SNAP_UNIT). */
    _Atomic uint32_t flags;
    _Atomic uint32_t deadline_ms, max_deadline_ms;
    /* Sessions' rings by session id: the dispatcher changes it, the
     * doorbell thread reads it (map_mtx). */
    pthread_mutex_t map_mtx;
    cumod_idmap rings;
    cumod_idmap states;    /* RING_STATE's block, until its RING_ATTACH */
    _Atomic uint32_t nhot; /* rings polled now, in all */
    cumod_crowd *crowd;    /* the host's (CUMOD_CHAN_CROWD), or NULL */
    /* The unit's (CUMOD_CHAN_DIRECT_PAGE), read-only here; NULL until told:
     * nothing is launched directly before. */
    _Atomic(cumod_direct_page *) page;
    /* The doorbell thread. */
    pthread_t bell;
    int bell_started;
    int epfd;
    int stop_fd; /* an eventfd that ends it */
    int tick_fd; /* an eventfd: statistics are due (stats_due) */
    _Atomic int stats_due;
    uint64_t scan_ns; /* the doorbell thread's last look at them */
};

/* A free slot of the state block, or -1. */
#define DRING_NO_SLOT (-1)
/* A record that waits for a slot: taken again at the next look. */
#define DRING_AGAIN 1

/* Launches of one kernel answered since the ring's last statistics. */
#define DRING_STATS 32
typedef struct dring_stat {
    uint64_t handle;
    uint32_t kernel;
    uint64_t ok, failed, gpu_ns;
} dring_stat;

struct dring {
    struct cumod_direct *d;
    uint32_t session;
    unsigned thread;
    int pid, uid;
    char name[208];
    uint8_t *map;
    size_t map_len;
    cumod_ring_hdr *h;
    uint8_t *sq, *cq;
    uint64_t sq_size, cq_size;
    cumod_dring_state *st;
    size_t st_len;
    int bell_fd;
    uint32_t busy_poll_us, crowded_at;
    cumod_list_node link; /* its thread's */
    /* The owner thread's. */
    uint64_t sq_head;
    uint32_t fwd_out;   /* records forwarded and not yet resumed */
    uint64_t fwd_total; /* answers the front owes in all (fwd_answered's) */
    uint64_t defer_ns;  /* waiting for resumes since (0: not) */
    uint64_t fwd_ns;    /* the last record forwarded, when */
    int hot, crowded, detaching;
    uint64_t last_ns;
    uint64_t detach_seq;
    cumod_idmap bufs;    /* handle -> dbuf */
    cumod_idmap streams; /* handle (not 0) -> key */
    cumod_idmap gemm_ws; /* handle + 1 -> 1: GEMMs served here (SNAP_GEMM) */
    uint32_t max_inflight;
    /* Its tickets (CUMOD_DRING_TICKET_BIT): the first of this attach, and
     * the next to give (the owner's, under mtx). */
    uint64_t ticket_first, ticket_next;
    int stalled; /* a record waits for a slot: polled on */
    /* The doorbell rang (doorbell thread -> owner). */
    _Atomic int rung;
    /* Shared by the owner and the completion thread, under mtx: answers
     * into cq (and under the state block's cq_lock, which the front takes
     * to write its own), the state block's slots, the statistics. */
    pthread_mutex_t mtx;
    int gone; /* given up (its client broke the rules), or detached */
    int detach_told;
    int32_t free_slot[CUMOD_DRING_SLOTS];
    uint32_t nfree;
    uint32_t inflight;
    uint64_t requests, lat_count, lat_sum_ns;
    uint64_t lat_bucket[CUMOD_LAT_BUCKETS];
    dring_stat stat[DRING_STATS];
    uint32_t nstat;
    uint64_t stats_ns;              /* when they were last sent */
    _Atomic uint32_t stats_sending; /* taken, not yet written */
    _Atomic uint32_t refs; /* its thread's list, each launch in flight */
};

/* Records a thread takes from one ring before it looks at its queue and
 * its other rings again. */
#define DRING_TAKE_MAX 64
/* The largest record decoded to see whether it is a GEMM it may serve (a
 * GEMM is about a hundred bytes): the others go on undecoded. */
#define DRING_GEMM_MAX 1024
/* Statistics go to the front this often while launches keep coming; the
 * doorbell thread sends what is left this long after a ring goes quiet,
 * and a forwarded record takes them first (so that the front counts a
 * ring's launches before it serves what the client sent after them). Not
 * one message per launch: a waited launch would pay a write(2). */
#define DRING_STATS_NS 1000000
/* How long a ring waits for the resumes of answers the front wrote. */
#define DRING_DEFER_NS 10000000
/* Slots kept for Waits: launches take the others, so that a Wait for a
 * ticket always finds one while the ring's launches fill theirs. */
#define DRING_WAIT_SLOTS 32

/* A Wait for a ticket still in flight: answered when it completes. */
typedef struct dwait {
    uint64_t id;
    int32_t slot;
    struct dwait *next;
} dwait;

/* A direct launch in flight. */
typedef struct dlaunch {
    dring *g;
    cumod_exec_module *m;
    uint64_t id, generation, handle;
    uint32_t kernel;
    int32_t slot;
    uint64_t t0_ns;  /* the record was taken */
    uint64_t ticket; /* answered when enqueued, with this ticket (0: not) */
    dwait *waits;    /* Waits for it, answered when it completes */
    struct dlaunch *gnext; /* the next of its completion group (dpend) */
} dlaunch;

typedef struct dbuf {
    uint64_t dptr, size;
} dbuf;

/* direct_answer.c: the rings' answers, slots, statistics and tickets. */

/* The completion thread (or the submission thread, inline): l's event
 * said r. */
void cumod__dlaunch_done(cumod_exec *ex, void *arg, CUresult r,
                         uint64_t gpu_ns);

/* A direct launch is over: answered (unless the context is lost: then the
 * front answers it from the state block, once this process is gone), its
 * slot freed, its module and ring let go. */
void cumod__dlaunch_end(cumod_exec *ex, dlaunch *l, int code, const char *msg,
                        uint64_t gpu_ns, int answer);

/* g's client broke its rules: given up (nothing more read or written),
 * the client told, the front told why. */
void cumod__dring_bad(dring *g, const char *why);

/* ticket's kept failure (g->mtx held), or NULL. */
cumod_dring_failed *cumod__dring_failed_find(dring *g, uint64_t ticket);

/* ticket's failure if one is kept (and then forgotten: reported once), g->mtx
 * held: 1 and *code, msg; else 0. */
int cumod__dring_failed_take(dring *g, uint64_t ticket, int *code, char *msg,
                             size_t cap);

/* The answer to request id: done (code 0, generation) or an error. */
size_t cumod__dring_pack(uint64_t id, int code, const char *msg,
                         uint64_t generation, uint64_t ticket, uint8_t *buf,
                         size_t cap);

/* Writes bytes (a packed cumod.Reply) into g's cq (g->mtx held), under
 * the state block's lock (the front writes the answers it gives too): 0,
 * or -1 when the client left its replies unread (the ring is given
 * up). */
int cumod__dring_put_locked(dring *g, const uint8_t *bytes, size_t len,
                            int32_t slot);

/* A reference to g (its thread's list, each launch in flight). */
void cumod__dring_ref(dring *g);

/* Frees a slot of dring_slot_take (g->mtx held). */
void cumod__dring_slot_free(dring *g, int32_t slot);

/* A slot for a record (g->mtx held) that what describes (id, end,
 * start_ms; a launch's handle, kernel, stream, ticket, posted; a Wait's
 * ticket and wait): its index, or DRING_NO_SLOT. */
int32_t cumod__dring_slot_take(dring *g, const cumod_dring_slot *what);

/* Sends g's statistics if they are at least min_age old: 1 when some were
 * left (too young), else 0. */
int cumod__dring_stats_flush(dring *g, uint64_t min_age);

/* direct_record.c: records and their completions. */

/* Takes up to DRING_TAKE_MAX records of g (its thread's): how many, or
 * -errno of the channel. */
int cumod__dring_take(dthread *t, dring *g);

/* Lets go of one: the last frees g (its statistics sent first). */
void cumod__dring_unref(dring *g);

/* The answer to a Wait (in slot, or none) for ticket: done, or code with
 * msg (g->mtx held). */
void cumod__dring_wait_answer(dring *g, uint64_t id, int32_t slot,
                              uint64_t ticket, int code, const char *msg);

/* The client sleeps on cq_seq: wake it (a shared futex: the word is in
 * its mapping too), from the thread that answered. Not through a waking
 * thread, as the front's one loop does: measured on the H200 with 16-48
 * crowded clients, one waking thread at 88-90% of a core capped the
 * executor at 252-291k launches a second; the submission threads making
 * their own calls reached 280-306k with lower tails (bench/notes.md). */
void cumod__dring_wake(dring *g);

/* t's open group gets its event (the end of a look, or a launch that
 * cannot join it). Should that fail, its launches end with the error
 * (on their streams already: their tickets say so). */
void cumod__dthread_close(cumod_exec *ex, dthread *t);
/* l was launched on s by t: among t's launches in flight, with what the
 * device does after it (direct_complete.c). */
CUresult cumod__dthread_track(cumod_exec *ex, dthread *t, CUstream s,
                              struct dlaunch *l);

/* The launches of t that completed: answered. How many. A lost context
 * ends the process (the front answers the rest from the state block). */
int cumod__dthread_complete(cumod_exec *ex, dthread *t);
/* Lets t's completion words go (the thread is done with them). */
void cumod__dthread_words_free(cumod_exec *ex, dthread *t);

/* direct.c: the service. */

/* DETACH's reply, once nothing of g is in flight. */
void cumod__dring_detach_done(dring *g);

/* direct_snap.c: the snapshot. */

/* CUMOD_CHAN_SNAP on the dispatcher: module ops applied (mods_rw), the
 * unit's settings stored. Session ops return 1: the caller posts them to
 * the session's thread (cumod__direct_snap_session). */
int cumod__direct_snap_apply(struct cumod_direct *d, const cumod_chan_snap *sn,
                             const void *rest, size_t restlen);
void cumod__direct_snap_session(dring *g, const cumod_chan_snap *sn);
void cumod__direct_snap_fini(struct cumod_direct *d);
void cumod__direct_ring_snap_fini(dring *g);

/* The kernel "module:function" of the current snapshot (read-locked by
 * the caller): NULL when not published. */
const dmod *cumod__direct_mod_find(const struct cumod_direct *d,
                                   const char *module);
const dkern *cumod__direct_kern_find(const dmod *m, const char *fn);

/* A buffer argument of g's session (launch_check.h's lookup). */
cumod_err cumod__direct_buf(const void *arg, const char *what, uint64_t handle,
                            uint64_t offset, uint64_t *dptr, cumod_status *st);
/* A GEMM operand's buffer of g's session (gemm_check.h's lookup). */
cumod_err cumod__direct_buf_size(const void *arg, const char *what,
                                 uint64_t handle, uint64_t *dptr,
                                 uint64_t *size, cumod_status *st);

#endif
