/* SPDX-License-Identifier: MIT */
/*
 * Executors as the front sees them: units. A unit is one executor process
 * (one CUDA context) on one device, in one of three roles:
 *
 *   - serving a fault domain: the sessions of the domain on that device
 *     share it, its context and its memory (docs/faults.md "Domains");
 *   - the loader: the catalog's executor, which loads every generation
 *     first (checking the bytes, describing the kernels) and runs no
 *     session's work, so that no tenant's fault can take the catalog's
 *     generations away from the others;
 *   - a standby: a spare with its context made (and the pinned modules
 *     loaded), which takes the place of a serving unit of its device whose
 *     executor died.
 *
 * With one device, no domains and no standby (the default) there is one
 * unit, which serves and is the loader at once: the daemon is what it was
 * before domains, launch for launch. Otherwise the loader is a unit of its
 * own, and serving units load the generations their sessions use again
 * (replicas, replica.c), by the catalog's bytes and kernel table.
 *
 * Each unit has what was the front's when there was one executor: the
 * executor client, the fault tracker (attribution, deadlines, solo runs),
 * the cuBLAS gate, and the requests parked while its executor starts or
 * restarts (--restart-wait).
 *
 * Loop thread.
 */
#ifndef CUMOD_UNIT_H
#define CUMOD_UNIT_H

#include <stdint.h>
#include <uv.h>

#include "catalog/catalog.h"
#include "front/units/fault.h"
#include "front/units/gemm.h"
#include "common/idmap.h"
#include "common/list.h"
#include "front/units/xclient.h"

struct cumod_front;
struct cumod_session;

typedef enum cumod_unit_role {
    CUMOD_UNIT_SERVE = 0,
    CUMOD_UNIT_LOADER,
    CUMOD_UNIT_STANDBY,
} cumod_unit_role;

typedef struct cumod_unit {
    struct cumod_front *f;
    uint32_t index; /* in f->units */
    cumod_unit_role role;
    int serves; /* sessions' work runs here (SERVE, or the lone unit) */
    int device;
    char domain[64]; /* "default", "uid-1000", a section's name; "" */
    int dcfg;        /* its [domain] section (cfg->domains), or -1 */
    /* Launches use the catalog's generations directly (the lone unit) or
     * replicas of them (every other serving unit). */
    int replicas_on;
    cumod_xc *xc; /* NULL: not started, or stopped when idle */
    int up;       /* its executor serves */
    int failed;   /* it could not start: why in fail_msg, since failed_ms */
    uint64_t failed_ms;
    char fail_msg[1100];
    cumod_faults faults;
    cumod_gemm_gate gemm;
    /* Requests that wait for its executor (starting, restarting). */
    cumod_list parked;
    uv_timer_t park_timer;
    uv_timer_t idle_timer; /* --domain-idle, and the replicas' idle unload */
    uint32_t sessions;
    uint64_t idle_since_ms; /* uv time its last session left; 0: has some */
    uint32_t restarts;      /* executors it had after its first */
    uint32_t takeovers;     /* standbys that took over for it */
    uint64_t ready_free;    /* the device's free memory when it came up */
    cumod_idmap reps;       /* replicas (replica.c), by id */
    uint64_t next_rep;
    void *direct; /* direct launches' state (direct.c), or NULL */
    /* A pool (--pool, a section's pool =; mps.h): pool executors serve
     * the domain on this device, each an MPS client, this one member
     * (0-based); sessions join the one with the fewest. 1: no pool. */
    uint32_t pool, member;
    int mps; /* its executor's context is an MPS client (as it said) */
} cumod_unit;

/* What a unit's life tells the front above it (set by front.c before the
 * first unit starts): the catalog's executor came up, was lost or could
 * not start; a serving unit's sessions lost their device state; the
 * requests parked on a unit go on, or are answered code. Units call up
 * only through these. */
typedef struct cumod_unit_ops {
    void (*loader_ready)(struct cumod_front *f, const cumod_chan_device *dev,
                         int first);
    void (*loader_lost)(struct cumod_front *f, int explained, const char *why);
    void (*start_failed)(struct cumod_front *f, const char *message, int code);
    void (*sessions_lost)(struct cumod_front *f, struct cumod_unit *u,
                          const char *why);
    void (*unpark)(struct cumod_unit *u);
    void (*park_fail)(struct cumod_unit *u, cumod_err code, const char *msg);
    /* u's executor was adopted from a front that died, and handed over
     * that front's sessions' ledger (fd, the callee's). */
    void (*adopted)(struct cumod_unit *u, int ledger_fd);
} cumod_unit_ops;

/* --- Units (unit.c) --------------------------------------------------------
 */

/* Makes the units the configuration starts with (the loader, standbys,
 * domains with start = always) and starts their executors. CUMOD_OK or an
 * error with st. */
cumod_err cumod__units_start(struct cumod_front *f, cumod_status *st);

/* Stops every unit (at front_stop): parked requests answered code; their
 * handles close. cumod__units_free frees them once the loop has ended. */
void cumod__units_stop(struct cumod_front *f, cumod_err code, const char *msg);
void cumod__units_free(struct cumod_front *f);

/* SIGHUP changed the configuration: --standby is followed. */
void cumod__units_config_changed(struct cumod_front *f);

/* The devices served, once the first executor said how many there are
 * (--device all); whether a device is served (unit_state.c). */
void cumod__devices_known(struct cumod_front *f, const cumod_chan_device *dev);
int cumod__device_served(const struct cumod_front *f, int device);

/* The unit a new session belongs to: its domain (by its listener, uid,
 * gid and --domains) on device (-1: the domain's, else the first). NULL
 * only when out of memory. */
cumod_unit *cumod__unit_for_session(struct cumod_front *f, int listener,
                                    int uid, int gid, int device);

/* The unit of domain on device, made (not started) when new; for a pool,
 * the member a new session joins (the ready one with the fewest sessions,
 * every member made and started). NULL when out of memory. */
cumod_unit *cumod__unit_get(struct cumod_front *f, const char *domain, int dcfg,
                            int device);

/* A session joins or leaves u (the last one leaving starts the idle
 * clock: --domain-idle; unit_state.c). */
void cumod__unit_join(cumod_unit *u, struct cumod_session *s);
void cumod__unit_leave(cumod_unit *u, struct cumod_session *s);

/* Starts u's executor if it has none (a session needs it now). */
void cumod__unit_want(cumod_unit *u);

/* --- What a unit is and holds (unit_state.c) ------------------------------
 */

/* 1 when u's executor serves. */
int cumod__unit_ready(const cumod_unit *u);

/* What u's executor is doing, as status says it: "serving", "starting",
 * "restarting", ..., or "stopped" (not started or stopped when idle),
 * "failed". */
const char *cumod__unit_state(const cumod_unit *u);

/* The refusal of a request of u's that found no executor. */
void cumod__unit_refusal(const cumod_unit *u, cumod_err rv, cumod_status *st);

/* The device as u's executor described it, else as any executor of the
 * same device did (zeroed when none has come up yet). */
const cumod_chan_device *cumod__unit_device(const cumod_unit *u);

/* Memory held by u's sessions, and its limit (0: none). */
uint64_t cumod__unit_mem_used(const cumod_unit *u);
uint64_t cumod__unit_mem_max(const cumod_unit *u);

/* Reserves size bytes for s (of u) against the session's and the
 * domain's limits: CUMOD_EDEVMEM naming the one it is over. */
cumod_err cumod__unit_reserve(cumod_unit *u, struct cumod_session *s,
                              uint64_t size, cumod_status *st);

/* --- Replicas (replica.c) --------------------------------------------------
 */

typedef struct cumod_rep cumod_rep;

/* g (a generation the catalog resolved) as loaded in u: READY with *handle
 * (the executor's module) and *rep (NULL where u uses the catalog's
 * generations); PARKED with w waiting for u's load of it (its callback
 * hears the outcome: CUMOD_OK, resolve again); REFUSED with st. A NULL w
 * only starts the load (a prefetch). */
cumod_resolve cumod__rep_get(cumod_unit *u, cumod_gen *g, cumod_waiter *w,
                             uint64_t *handle, cumod_rep **rep,
                             cumod_status *st);

/* A launch in flight holds its replica: an old one is unloaded after its
 * last launch. Accept NULL. */
void cumod__rep_hold(cumod_rep *r);
void cumod__rep_release(cumod_rep *r);

/* The global name of a replica (its own device address), or NULL. */
const cumod_gen_global *cumod__rep_global(const cumod_rep *r, const char *name);

/* Replicas that no longer serve (their generation retired, or unused for
 * --idle-unload) are unloaded once idle; a module whose generation
 * changed is loaded again where it was resident. After a catalog event. */
void cumod__reps_sweep(cumod_unit *u, const char *module);

/* Loads the pinned modules' current generations in u (at its start). */
void cumod__reps_pinned(cumod_unit *u);

/* u's executor is gone: its replicas with it (waiters hear code, msg). */
void cumod__reps_lost(cumod_unit *u, cumod_err code, const char *msg);

/* The replica loaded in u as handle was used now (direct launches,
 * counted when the executor reports them). */
void cumod__reps_touch(cumod_unit *u, uint64_t handle);

/* Replicas loaded in u. */
uint32_t cumod__reps_count(const cumod_unit *u);

/* Moves the replicas of a onto b, and b's onto a (a standby's takeover:
 * the executors changed places). */
void cumod__reps_swap(cumod_unit *a, cumod_unit *b);

#endif
