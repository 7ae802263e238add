/* SPDX-License-Identifier: MIT */
/*
 * The sessions' ledger (issue 34, piece 1; docs/architecture.md "Restarts
 * and upgrades"): what each session holds, written by the session store
 * (session.h) into a ledger (common/ledger.h) at every change, so that it
 * outlives the front in the descriptors its executors hold. A session's
 * opening (pid, uid, gid), its place (domain, device), its buffers
 * (handle, size, device address), segments (handle, size, the executor's
 * mapping, the name), streams (handle, the executor's key), cuBLAS
 * workspaces charged, and its close. Replayed, it gives back a store with
 * those sessions (no tickets, no rings, no requests: what a connection
 * carried is gone with it).
 *
 * When the ledger has grown past twice what it held after its last
 * compaction (and past CUMOD_SLEDGER_MIN), a new one is written with the
 * live sessions only, and handed on (on_new) before the old is let go.
 *
 * Loop thread only, as the store.
 */
#ifndef CUMOD_SLEDGER_H
#define CUMOD_SLEDGER_H

#include <stddef.h>
#include <stdint.h>

#include "common/ledger.h"
#include "common/status.h"

struct cumod_session;
struct cumod_sessions;
struct cumod_buf;
struct cumod_seg;
struct cumod_sstream;

/* Record types. */
enum {
    CUMOD_SLR_OPEN = 1,   /* cumod_slr_open */
    CUMOD_SLR_PLACE,      /* cumod_slr_place */
    CUMOD_SLR_CLOSE,      /* cumod_slr_id */
    CUMOD_SLR_BUF,        /* cumod_slr_buf */
    CUMOD_SLR_BUF_DEL,    /* cumod_slr_handle */
    CUMOD_SLR_SEG,        /* cumod_slr_seg */
    CUMOD_SLR_SEG_DEL,    /* cumod_slr_handle */
    CUMOD_SLR_STREAM,     /* cumod_slr_stream */
    CUMOD_SLR_STREAM_DEL, /* cumod_slr_handle */
    CUMOD_SLR_WS,         /* cumod_slr_ws */
};

typedef struct cumod_slr_id {
    uint32_t id, pad;
} cumod_slr_id;
typedef struct cumod_slr_open {
    uint32_t id;
    int32_t uid, gid, pid;
} cumod_slr_open;
typedef struct cumod_slr_place {
    uint32_t id;
    int32_t device;
    char domain[64];
} cumod_slr_place;
typedef struct cumod_slr_buf {
    uint32_t id, pad;
    uint64_t handle, size, dptr;
} cumod_slr_buf;
typedef struct cumod_slr_handle {
    uint32_t id, pad;
    uint64_t handle;
} cumod_slr_handle;
typedef struct cumod_slr_seg {
    uint32_t id, pad;
    uint64_t handle, size, host;
    char name[208];
} cumod_slr_seg;
typedef struct cumod_slr_stream {
    uint32_t id, index;
    uint64_t handle, key;
} cumod_slr_stream;
typedef struct cumod_slr_ws {
    uint32_t id, pad;
    uint64_t handle; /* 0: the default stream */
    uint64_t bytes;
} cumod_slr_ws;

/* Below this many bytes a ledger is never compacted. */
#define CUMOD_SLEDGER_MIN ((size_t)256 << 10)

typedef struct cumod_sledger {
    cumod_ledger l;
    size_t base; /* its length after the last compaction */
    size_t min;  /* CUMOD_SLEDGER_MIN (tests: less) */
    uint64_t compactions;
    int broken; /* an append failed: logged once, nothing more */
    struct cumod_sessions *ss;
    /* A new ledger replaced the old (compaction): its memfd, for the
     * executors to hold instead. */
    void (*on_new)(void *arg, int fd);
    void *arg;
} cumod_sledger;

/* A new, empty ledger for ss (its store writes into it from now on).
 * CUMOD_OK, or why not. */
cumod_err cumod__sledger_open(cumod_sledger *lg, struct cumod_sessions *ss,
                              cumod_status *st);
void cumod__sledger_close(cumod_sledger *lg);

/* What the store calls at each change (lg may be NULL: nothing). */
void cumod__sledger_open_session(cumod_sledger *lg,
                                 const struct cumod_session *s);
void cumod__sledger_place(cumod_sledger *lg, const struct cumod_session *s);
void cumod__sledger_close_session(cumod_sledger *lg,
                                  const struct cumod_session *s);
void cumod__sledger_buf(cumod_sledger *lg, const struct cumod_session *s,
                        const struct cumod_buf *b, int gone);
void cumod__sledger_seg(cumod_sledger *lg, const struct cumod_session *s,
                        const struct cumod_seg *g, int gone);
void cumod__sledger_stream(cumod_sledger *lg, const struct cumod_session *s,
                           const struct cumod_sstream *t, int gone);
/* A stream's cuBLAS workspace charged (t NULL: the default stream's). */
void cumod__sledger_ws(cumod_sledger *lg, const struct cumod_session *s,
                       const struct cumod_sstream *t);

/* Replays the ledger in fd into ss (an empty, initialized store): the
 * sessions it held at its last good record, without a ledger of their
 * own. *records and why as cumod__ledger_replay says them. CUMOD_OK, or
 * why not (a record that makes no sense: CUMOD_EPROTO, saying which). */
cumod_err cumod__sledger_replay(int fd, struct cumod_sessions *ss,
                                uint64_t *records, char *why, size_t whylen,
                                cumod_status *st);

#endif
