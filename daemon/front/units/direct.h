/* SPDX-License-Identifier: MIT */
/*
 * Direct launches, the front's side (docs/architecture.md "The data
 * path"; the executor's side is exec/direct.h). Once a session's ring is
 * open (a memfd its client handed over, sealed against shrinking), the
 * front hands it to the session's executor (RING_STATE, RING_ATTACH,
 * RING_BELL) and stops reading it: the executor launches what the
 * snapshot the front gives it lets it check, answers into the ring, and
 * forwards the rest here, where each forwarded record is served as one
 * the loop took, its answer going back through the executor.
 *
 * What the front publishes: per unit, the modules whose current
 * generation serves there (MODULE_SET, after a launch of it was served
 * here; MODULE_DEL before anything changes it: a catalog event for the
 * module, its unload), whether the unit launches directly at all (no
 * suspects of a fault, no deadlines: SNAP_UNIT); per session, its
 * buffers, streams and limit.
 *
 * The ring comes back (DETACH) when its session closes; when the
 * executor dies, the front takes it back from the state block, answers
 * the direct launches that were in flight, and hands it to the next
 * executor once it serves.
 *
 * --direct-launches=no (cumodd.conf: direct-launches = no) keeps every
 * ring on the front. Loop thread.
 */
#ifndef CUMOD_FRONT_DIRECT_H
#define CUMOD_FRONT_DIRECT_H

#include <stddef.h>
#include <stdint.h>

#include "catalog/catalog.h"

struct cumod_front;
struct cumod_unit;
struct cumod_session;
struct cumod_ring;
struct cumod_buf;

/* The session's ring was opened (OpenRing answered): handed to its
 * executor when it may be. */
void cumod__fdirect_ring_opened(struct cumod_session *s);

/* The session lets go of ring g, which an executor reads (or is told
 * about): 1 when g stays until it is detached (the session's reference
 * then goes), 0 when the caller lets go now. */
int cumod__fdirect_ring_closing(struct cumod_ring *g);

/* The answer to a record g forwarded (packed), to its executor. */
/* A posted launch of g's session refused (cumod_rings.posted_failed). */
void cumod__fdirect_posted_failed(struct cumod_ring *g, uint64_t ticket,
                                  cumod_err code, const char *msg);
void cumod__fdirect_answer(struct cumod_ring *g, const uint8_t *bytes,
                           size_t len);

/* A launch of g was served on u as handle: published there. */
void cumod__fdirect_publish(struct cumod_unit *u, cumod_gen *g,
                            uint64_t handle);

/* Something changed of module (a catalog event, its kernels' settings):
 * taken back everywhere. */
void cumod__fdirect_module_changed(struct cumod_front *f, const char *module);

/* u's executor is about to unload handle: taken back there first. */
void cumod__fdirect_unloading(struct cumod_unit *u, uint64_t handle);

/* Whether u launches directly now (its suspects, the deadlines, the
 * configuration): told to its executor when it changed. */
void cumod__fdirect_unit_update(struct cumod_unit *u);

/* u's executor serves (again): its rings are handed to it. */
void cumod__fdirect_unit_ready(struct cumod_unit *u);

/* u's executor is gone: its rings come back, their direct launches in
 * flight are answered (the faults' words, from u->faults), and what was
 * published there is forgotten. Before the faults are reset. */
void cumod__fdirect_unit_lost(struct cumod_unit *u);

/* A unit's direct state, freed with it. */
void cumod__fdirect_unit_free(struct cumod_unit *u);

/* A session's buffer came (add 1) or goes, a stream likewise: told to the
 * executor that reads its ring. */
void cumod__fdirect_buf(struct cumod_session *s, const struct cumod_buf *b,
                        int add);
void cumod__fdirect_stream(struct cumod_session *s, uint64_t handle,
                           uint64_t key, int add);
/* Stream handle of s (0: its default stream) has its cuBLAS workspace
 * charged: the executor that reads its ring may run its GEMMs itself. */
void cumod__fdirect_gemm(struct cumod_session *s, uint64_t handle);

/* What u's executor says unasked: RING_FWD, RING_BAD, DIRECT_STATS. */
void cumod__fdirect_packet(struct cumod_unit *u, uint32_t op,
                           const void *payload, size_t len);

/* The next ticket s's executor gives (CUMOD_DRING_TICKET_BIT): a Wait for
 * one below it that the front holds no failure of was done. */
uint64_t cumod__fdirect_ticket_next(const struct cumod_session *s);

/* A ticket of s's executor while its ring is the executor's (a Wait that
 * came over the connection: the client's ring was given up): 1 with the
 * index of its stream when its launch is in flight, 2 with its failure
 * when one is kept, else 0. */
int cumod__fdirect_ticket_live(const struct cumod_session *s, uint64_t ticket,
                               uint32_t *stream, cumod_err *code, char *msg,
                               size_t cap);

/* Direct launches in flight on u, for a fault's attribution: each as
 * (gen, kernel, session) in out (up to max); how many there are (which may
 * exceed max, and counts those whose generation is not known here). */
size_t cumod__fdirect_in_flight(struct cumod_unit *u, const cumod_gen **gens,
                                const cumod_kernel **kerns,
                                const struct cumod_session **sess, size_t max);

/* cumodd stops: every ring an executor reads comes back to the front,
 * each counted in f->inflight until it is back (its direct launches
 * answered), so that the drain waits for them. */
void cumod__fdirect_drain(struct cumod_front *f);
/* The handle g is published under on u (its direct launches' slots name
 * it), or 0. */
uint64_t cumod__fdirect_handle_of(struct cumod_unit *u, const cumod_gen *g);
/* s's calls in progress in the front changed: the executor's count of
 * them (its launches' limit counts them too). */
void cumod__fdirect_session_calls(const struct cumod_session *s);
/* Direct launches of session s in flight now (its limit counts them). */
uint32_t cumod__fdirect_session_inflight(const struct cumod_session *s);

#endif
