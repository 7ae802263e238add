/* SPDX-License-Identifier: MIT */
/*
 * The front process. One libuv loop thread owns all of its state: the
 * server's hand-off queue, the sessions, the catalog, the executor client,
 * signals. Nothing here is touched from another thread.
 *
 * A request flows one way (DESIGN.md "Processes"):
 *   server (wire, receive capacity; server.h), the request object
 *   (exactly-once reply, for every transport; req.h)
 *   -> dispatch table by request type (dispatch.c)
 *   -> handler (h_modules.c, h_data.c, h_launch.c, h_globals.c, h_ring.c)
 *   -> checks, which return a cumod error and a sentence and never answer
 *      (checks.h)
 *   -> services: the session store (session.h), the catalog's resolve with
 *      generation hold and release (catalog/catalog.h), executor work
 *      (work.h) over the executor client (xclient.h)
 *   -> channel.
 * A request that must wait (a lazy load, a completion, a Wait) parks with
 * a resume callback and its own state, and is answered there, once.
 * The ring hands its requests to the dispatch as the server does (a
 * callback given at init); the services below call up only through the
 * callbacks they are given (f->unit_ops, f->drained, xclient's hooks), so
 * that no two files of daemon/front call each other (tests/house.py).
 */
#ifndef CUMOD_FRONT_H
#define CUMOD_FRONT_H

#include <limits.h>
#include <stdint.h>
#include <uv.h>

#include "catalog/catalog.h"
#include "common/config.h"
#include "front/units/fault.h"
#include "front/units/gemm.h"
#include "front/units/mps.h"
#include "front/obs/notify.h"
#include "front/obs/events.h"
#include "front/metrics.h"
#include "front/transport/ring.h"
#include "front/transport/server.h"
#include "front/state/session.h"
#include "front/state/sledger.h"
#include "front/units/unit.h"
#include "front/units/xclient.h"

typedef struct cumod_front {
    cumod_config *cfg; /* live: SIGHUP changes what may change at run time */
    uv_loop_t loop;
    uv_signal_t sigterm, sigint, sighup;
    cumod_notify notify; /* systemd */
    cumod_rings rings;   /* the sessions' shared-memory rings */
    /* READY=1 waits for all three: the executor's context, the listening
     * socket and the first scan. */
    int exec_up, listening, scanned;
    uint64_t last_serving_ms; /* uv time the executor was last serving */
    char exe[PATH_MAX];       /* this binary, re-run as the executor */
    /* The executors (unit.h): units[0] is the loader, the catalog's. */
    cumod_unit **units;
    uint32_t nunits;
    cumod_unit *loader;
    int replicas;  /* several units may serve: the loader serves no one */
    cumod_mps mps; /* --mps: the control daemon of the pools (mps.h) */
    /* The devices served (--device), known once the loader came up, and
     * what their executors last said of each. */
    int devices[CUMOD_CONFIG_MAX_DEVICES];
    int ndevices;
    cumod_chan_device devs[CUMOD_CONFIG_MAX_DEVICES];
    uint32_t ndevs;
    cumod_chan_device nodev; /* zeroed: a device not heard of yet */
    /* Listeners of [domain] sections (listen =): listener k + 1's domain
     * is listener_dcfg[k]. */
    int listener_dcfg[CUMOD_CONFIG_MAX_DOMAINS];
    int nlisteners;
    cumod_catalog *cat;
    cumod_events events;           /* change events, for cumodctl watch */
    struct cumod_metrics *metrics; /* --metrics-listen; NULL: off */
    cumod_sessions sessions;
    /* The sessions' ledger (--orphan-grace: sledger.h); lg_on when open */
    cumod_sledger lg;
    int lg_on;
    cumod_server *srv;
    /* The socket where clients hand over their rings' and segments'
     * descriptors (fdpass.h), beside an ipc:// --listen; NULL: none. */
    struct cumod_fdpass *fdpass;
    /* h_launch.c's scratch for packing one launch (32 KiB). */
    struct cumod_launch_packed *packed;
    uint32_t inflight; /* calls of sessions not answered yet, parked ones too */
    uv_timer_t drain_timer;
    int draining; /* SIGTERM: waiting for inflight to reach 0 */
    int stopping; /* refusing new requests */
    int stopped;  /* front_stop ran */
    int exit_code;
    /* The services below call up only through these (front.c sets them):
     * a unit's life (unit.h), and the end of the drain, which the last
     * call's completion signals (calls.c). */
    cumod_unit_ops unit_ops;
    void (*drained)(struct cumod_front *f);
} cumod_front;

/* Runs the front until SIGTERM or SIGINT (exit 0) or a fatal start error
 * (EX_UNAVAILABLE when the driver or device is unusable, EX_CONFIG for a bad
 * kernel folder, EX_UNAVAILABLE when the listen address is taken). Blocks. */
int cumod__front_run(cumod_config *cfg);

/* The server's and the rings' request callback: the dispatch table
 * (dispatch.c). */
void cumod__front_on_request(void *arg, cumod_req *r);

/* u's executor serves (again): the requests parked meanwhile go on, in
 * the order they came (dispatch.c). */
void cumod__front_unpark(cumod_unit *u);

/* Answers every request parked on u with code. */
void cumod__front_park_fail(cumod_unit *u, cumod_err code, const char *msg);

/* The catalog's executor came up, was lost (explained: its end has a
 * known cause; why: what it met), or could not start at all (front.c). */
/* u's executor was adopted with the ledger of the front that died (fd,
 * taken): its sessions' rings are detached, then what they held released
 * and its modules let go (calls.c). */
void cumod__front_adopted(cumod_unit *u, int ledger_fd);

/* Hands the sessions' ledger to xc's executor (CUMOD_CHAN_LEDGER), when
 * the front keeps one. */
void cumod__front_ledger_give(cumod_front *f, cumod_xc *xc);

void cumod__front_loader_ready(cumod_front *f, const cumod_chan_device *dev,
                               int first);
void cumod__front_loader_lost(cumod_front *f, int explained, const char *why);
void cumod__front_start_failed(cumod_front *f, const char *message, int code);

/* --- Sessions of connections (conn.c; their calls, calls.c) ------------- */

/* The session of r's connection, made at its first request (with the
 * peer's credentials). CUMOD_ECLOSED when the connection is gone; st says
 * so. */
cumod_err cumod__front_session(cumod_front *f, cumod_req *r,
                               cumod_session **out, cumod_status *st);

/* An executor call of s went out / came back; releasing a closed session
 * when it was the last, and signalling f->drained when it was the
 * daemon's last while draining (calls.c). */
void cumod__front_call_begin(cumod_front *f, cumod_session *s);
void cumod__front_call_end(cumod_front *f, cumod_session *s);

/* The drain at SIGTERM is over (nothing in flight, or its time is up):
 * the rest is answered CUMOD_ESHUTDOWN and everything stops (front.c;
 * the last call's completion signals it through f->drained). */
void cumod__front_drained(cumod_front *f);

/* Releases what closed session s holds in the executor, then frees it
 * (calls.c). */
void cumod__front_release(cumod_front *f, cumod_session *s);

/* A connection closed: its session is released once its calls are back. */
void cumod__front_conn_closed(void *arg, uint32_t pipe_id);

/* u's executor died (why: what it met, "" when not known): every buffer
 * and segment of u's sessions is lost (their handles answer
 * CUMOD_ECTXLOST, saying why, until freed); sessions carry on. */
void cumod__front_sessions_lost(cumod_front *f, cumod_unit *u, const char *why);

/* Answers every request of list (cumod_req by link) with code (calls.c). */
void cumod__front_fail_all(cumod_list *list, cumod_err code, const char *msg);

#endif
