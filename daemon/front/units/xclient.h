/* SPDX-License-Identifier: MIT */
/*
 * The executor client: the front's side of the executor process. It
 * spawns the executor (this binary, --executor) with one end of the channel
 * as fd 3, reads its packets under uv_poll, matches replies to calls by
 * sequence number, and restarts it with backoff when it dies after having
 * come up. Everything the front and the catalog ask of the GPU goes through
 * cumod__xc_call; the names cumod__exec_* belong to the executor process
 * itself.
 *
 * Two rooms (xclient_impl.h): the process in xc_proc.c (open, start,
 * exit, restart backoff, heartbeats, kill, close, status) and the channel
 * in xclient.c (calls, the out queue and the gate, the executor's packets
 * and replies); the process side calls the channel's, never the reverse.
 *
 * Loop thread only. Never waits on the executor: the channel is
 * non-blocking, and what its socket buffer cannot take waits here, in
 * order, until it can.
 */
#ifndef CUMOD_XCLIENT_H
#define CUMOD_XCLIENT_H

#include <stdint.h>
#include <uv.h>

#include "common/channel.h"
#include "common/config.h"
#include "common/status.h"

struct cumod_rings;

typedef struct cumod_xc cumod_xc;

/* What the front hears of the executor's life. Loop thread. */
typedef struct cumod_xc_hooks {
    /* An executor holds its context and serves (first is 1 the very first
     * time). */
    void (*ready)(void *arg, const cumod_chan_device *dev, int first);
    /* The executor that served died: calls in flight were answered with
     * CUMOD_ECTXLOST already; a new one is being started. killed: by
     * cumod__xc_kill (a hang, a silent executor). Not called when one of
     * those answers closed the client (cumod__xc_close: the end of a
     * drain at SIGTERM), nor after it. */
    void (*lost)(void *arg, int killed);
    /* The serving executor met a CUDA error that ends its context and is
     * exiting: message names the error. Called once, before the calls it
     * leaves are answered. May be NULL. */
    void (*fault)(void *arg, const char *message);
    /* The very first executor could not start (no driver, no device):
     * message says why; the daemon should stop with code. */
    void (*failed)(void *arg, const char *message, int code);
    /* What the executor says of its direct launches unasked (RING_FWD,
     * RING_BAD, DIRECT_STATS: front/units/direct.c); the payload lives during
     * the call. May be NULL. */
    void (*direct)(void *arg, uint32_t op, const void *payload, size_t len);
    void *arg;
} cumod_xc_hooks;

/* Starts the first executor, on CUDA device `device`. exe is this
 * program's path; label names it in the log ("domain uid-1000"; may be
 * NULL). CUMOD_OK, or an error with a sentence in st (the client is not
 * made). */
/* How an executor is started: its device, and for a pool's executor the
 * MPS pipe directory it must be a client of (mps.h) and its share of the
 * submission threads. */
typedef struct cumod_xc_spawn {
    int device;
    const char *mps_dir;     /* NULL: not a pool's */
    unsigned submit_threads; /* 0: --submit-threads */
    /* At its first start, adopt an orphaned executor of the device found
     * at the adoption sockets (exec/orphan.h) before spawning one. */
    int adopt;
} cumod_xc_spawn;

/* The sessions' ledger an adopted executor handed over (a memfd; the
 * caller takes it), or -1: once, after its READY. */
int cumod__xc_take_adopted_ledger(cumod_xc *xc);

cumod_err cumod__xc_open(uv_loop_t *loop, struct cumod_rings *rs,
                         const cumod_config *cfg, const char *exe,
                         const cumod_xc_spawn *sp, const char *label,
                         const cumod_xc_hooks *hooks, cumod_xc **out,
                         cumod_status *st);

/* Who hears of this executor from now on, and what the log calls it (a
 * standby taking a domain's place changes owner). */
void cumod__xc_set_hooks(cumod_xc *xc, const cumod_xc_hooks *hooks,
                         const char *label);

/* Sends a command (with fd passed along when >= 0; the caller keeps its own
 * copy) and calls cb (unless NULL) once with the reply, or with status
 * CUMOD_ECTXLOST and no payload when the executor dies first, or
 * CUMOD_ESHUTDOWN when the client closes first. Returns CUMOD_ECTXLOST
 * (and never calls cb) when no executor is serving, CUMOD_EBUSY when 256
 * MiB of commands already wait for the channel, CUMOD_ENOMEM. */
cumod_err cumod__xc_call(cumod_xc *xc, uint32_t op, const void *payload,
                         size_t len, int fd, cumod_chan_reply_cb cb, void *arg);

/* Sends a command that has no reply (the direct launches' RING_ANSWER
 * and SNAP), in order with the calls; the same errors as a call. */
cumod_err cumod__xc_post(cumod_xc *xc, uint32_t op, const void *payload,
                         size_t len, int fd);

/* The answer for a request whose cumod__xc_call failed with rv: far
 * behind, restarting (after which fault, when one brought it down), ... */
void cumod__xc_refusal(const cumod_xc *xc, cumod_err rv, cumod_status *st);

/* 1 when an executor is up and serving. */
int cumod__xc_ready(const cumod_xc *xc);

/* What status says of the executor, from the client's own state: it never
 * asks the executor. */
typedef struct cumod_xc_status {
    const char *state;      /* "starting", "serving", "restarting", "stuck",
                               "crash-looping", "stopping" */
    uint64_t since_unix_ms; /* when it entered that state */
    uint32_t restarts;      /* executors started after the first */
    uint32_t adoptions;     /* executors adopted from a front that died */
    const char *last_fault; /* the last fault, hang or loss; "" when none */
    uint64_t last_fault_unix_ms;
    uint64_t free_memory, total_memory; /* as last heard */
    uint64_t memory_age_ms;             /* how long ago */
} cumod_xc_status;
void cumod__xc_status(const cumod_xc *xc, cumod_xc_status *out);

/* Fresh memory figures from a MEMINFO the front asked for itself. */
void cumod__xc_meminfo(cumod_xc *xc, uint64_t free_b, uint64_t total_b);

/* Records what ended (or is about to end) the executor, for status and the
 * log: a fault, a hang. */
void cumod__xc_note_fault(cumod_xc *xc, const char *what);

/* Ends the serving executor now (SIGKILL) because of what (a hang past its
 * deadline, an executor that stopped answering): calls in flight are
 * answered CUMOD_ECTXLOST when it is gone, and a new one starts. */
void cumod__xc_kill(cumod_xc *xc, const char *what);

/* The gate, for a launch that must run alone (a suspect of a fault that
 * could not be pinned down): after gate_at(seq), the call numbered seq
 * (next_seq tells a call's number before it is made) and all after it
 * wait in the out queue, in order, while those before it go; gate_pass
 * sends call seq (once what went before it has completed, as the caller
 * judges); gate_at again moves the gate on; gate_open sends the rest.
 * The gate opens by itself when the executor goes. */
uint64_t cumod__xc_next_seq(const cumod_xc *xc);
void cumod__xc_gate_at(cumod_xc *xc, uint64_t seq);
void cumod__xc_gate_pass(cumod_xc *xc);
void cumod__xc_gate_open(cumod_xc *xc);

/* The device as the serving executor described it (zeroed before the
 * first one came up). */
const cumod_chan_device *cumod__xc_device(const cumod_xc *xc);

/* The executor's pid, or 0. */
int cumod__xc_pid(const cumod_xc *xc);

/* Stops: answers every call in flight with CUMOD_ESHUTDOWN, closes the
 * channel (the executor sees EOF and exits; one that has not exited 2 s
 * later is killed) and frees the client once its handles are closed.
 * Accepts NULL. */
void cumod__xc_close(cumod_xc *xc);

#endif
