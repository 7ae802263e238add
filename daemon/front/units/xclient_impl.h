/* SPDX-License-Identifier: MIT */
/*
 * Inside the executor client (xclient.h), shared by its two rooms: the
 * process (xc_proc.c: starting, exit, restart backoff, heartbeats, kill,
 * close, status) and the channel (xclient.c: calls, the out queue and the
 * gate, the executor's packets and replies, the rings beside the socket).
 * The process side calls the channel's functions below; the channel never
 * calls the process side but through xc->hooks and xc->broken.
 *
 * Loop thread only.
 */
#ifndef CUMOD_XCLIENT_IMPL_H
#define CUMOD_XCLIENT_IMPL_H

#include <limits.h>
#include <stdint.h>
#include <uv.h>

#include "common/chanring.h"
#include "common/idmap.h"
#include "common/list.h"
#include "front/transport/ring.h"
#include "front/units/xclient.h"

typedef enum xc_state {
    XC_DOWN = 0, /* not running; a restart may be scheduled */
    XC_STARTING, /* spawned, waiting for READY or FAILED */
    XC_READY,    /* context up, serving commands */
} xc_state;

/* A call waiting for its reply. */
typedef struct xc_pending {
    uint64_t seq;
    cumod_chan_reply_cb cb;
    void *arg;
} xc_pending;

/* A command waiting for room in the channel. */
typedef struct xc_out {
    cumod_list_node link;
    cumod_chan_hdr hdr;
    int fd; /* a dup of the descriptor to pass, or -1 */
    size_t len;
    char payload[];
} xc_out;

struct cumod_xc {
    uv_loop_t *loop;
    const cumod_config *cfg;
    cumod_xc_hooks hooks;
    int device;              /* the CUDA device it runs on */
    char mps_dir[PATH_MAX];  /* a pool's executor: its MPS pipes; "" */
    unsigned submit_threads; /* 0: --submit-threads */
    char label[96];          /* for the log: "domain uid-1000", "the loader" */
    /* --orphan-grace: where its adoption socket goes (orphan.h); "" */
    char adopt_dir[PATH_MAX];
    char grace[16];
    char exe[4096];
    uv_process_t proc;
    int proc_alive; /* proc (or pid_poll) is open and its exit not come */
    /* An executor adopted from a front that died (not our child): its
     * pid, watched by a pidfd (pid_poll) instead of proc. */
    int adopt_try; /* adopt at the first start */
    int adopted;
    uint32_t adoptions; /* for status and metrics */
    int apid;
    uv_poll_t pid_poll;
    int adopt_ledger; /* the ledger it handed over, until taken; -1 */
    uv_poll_t chan_poll;
    int chan_polling;
    int chan_fd; /* -1 when closed */
    uv_timer_t restart_timer;
    uv_timer_t beat_timer; /* the heartbeat; also the kill at shutdown */
    int handles; /* open handles; the client is freed at 0 once closing */
    xc_state state;
    int ever_ready; /* has any executor come up? */
    int closing;
    /* For status. */
    uint64_t state_unix_ms;
    uint32_t started_again; /* executors started after the first */
    int start_failures;     /* consecutive deaths before READY */
    char last_fault[512];
    uint64_t last_fault_unix_ms;
    uint64_t mem_free, mem_total, mem_uv_ms; /* the last MEMINFO, uv_now */
    int ping_out;                            /* a heartbeat is unanswered */
    uint64_t ping_uv_ms;                     /* since when */
    uint64_t ping_unix_ms;
    int killed;       /* we killed it (a hang, stuck) */
    int grace_killed; /* killed at shutdown, its grace over */
    int reported;     /* it reported a fault that ends its context */
    /* It reported that fault: it is exiting (exec/reply.c _exits right
     * after), so its calls were answered and the front told at once, not
     * once the driver has torn its context down (80-100 ms on an H100
     * after a fault): a standby takes over that much sooner. */
    int dying;
    uint64_t dying_ms; /* since when (uv time) */
    char error[1024];  /* the executor's FAILED message */
    int error_code;
    cumod_chan_device dev;
    char *buf;           /* CUMOD_CHAN_MAX bytes */
    cumod_idmap pending; /* seq -> xc_pending */
    uint64_t next_seq;
    /* The channel's ring (chanring.h): commands without descriptors go
     * there while nothing waits in the out queue. */
    cumod_chanring ring;
    int ring_on;
    /* The completion ring (the executor's answers without descriptors),
     * read first whenever the loop spins (rs's poller) or its eventfd
     * rings, and before anything read from the socket. */
    cumod_chanring back;
    cumod_rings *rs;
    cumod_rings_poller poller;
    uv_poll_t back_poll;
    int back_polling;
    cumod_list outq; /* xc_out, in order */
    size_t outq_bytes;
    /* The gate (a solo run): while closed, calls from gate_seq on wait in
     * the out queue; gate_seq itself goes once gate_pass is set. */
    int gated, gate_pass;
    uint64_t gate_seq;
    /* Deaths in a row of executors that served less than XC_STABLE_MS
     * (or never came up): the restart backoff. */
    int quick_deaths;
    uint64_t restart_ms; /* the next start's delay */
    uint64_t ready_uv_ms;
    /* The channel found the executor broken (a corrupt completion ring):
     * the process side stops it (cumod__xc_kill). */
    void (*broken)(cumod_xc *xc, const char *why);
};

/* --- The channel (xclient.c), for the process side ---------------------- */

/* Sets up the channel's parts of a new client: its pending calls, out
 * queue, and the poller of its completion ring on rs (may be NULL). */
void cumod__xc_chan_init(cumod_xc *xc, cumod_rings *rs);

/* Makes the rings beside the socket for the executor about to start (the
 * old ones closed); without them (no memfd) the socket carries all. */
void cumod__xc_chan_rings(cumod_xc *xc);

/* The executor started with the other end of chan_fd: its packets are
 * read from now on (the socket, the completion ring). */
void cumod__xc_chan_open(cumod_xc *xc, int chan_fd);

/* Reads what the executor sent before it went (its last replies first,
 * then its calls are failed); closes the channel and its rings. */
void cumod__xc_chan_drain(cumod_xc *xc);
void cumod__xc_chan_close(cumod_xc *xc);

/* Answers every call in flight with code, oldest first. */
void cumod__xc_fail_pending(cumod_xc *xc, int code);

/* The state, with the time it changed (status). */
void cumod__xc_set_state(cumod_xc *xc, xc_state st);

/* A handle of the client closed; the client is freed once closing and
 * its last handle closed. */
void cumod__xc_on_handle_close(uv_handle_t *h);
void cumod__xc_maybe_free(cumod_xc *xc);

#endif
