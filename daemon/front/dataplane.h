/*
 * The data-plane requests of the front (dataplane.c: buffers, segments,
 * streams, copies, waits; launch.c: launches and batches). Each validates
 * against the session (handles, bounds) before anything reaches the
 * executor, and answers its work exactly once. Loop thread.
 */
#ifndef CUMOD_DATAPLANE_H
#define CUMOD_DATAPLANE_H

#include <stddef.h>
#include <stdint.h>

#include "channel.h"
#include "front.h"
#include "session.h"

struct cumod_daemon;
struct cumod_gen;

/* A WORK command being built: cumod_chan_work, then items. */
typedef struct cumod_dp_msg {
    char *buf;
    size_t len, cap;
    uint32_t nitems;
    int oom;
} cumod_dp_msg;

void cumod__dp_msg_init(cumod_dp_msg *m, uint64_t stream_key);
void cumod__dp_msg_item(cumod_dp_msg *m, const cumod_work_item *it,
                        const void *extra, size_t extra_len);
void cumod__dp_msg_fini(cumod_dp_msg *m);

/* An executor WORK call in flight for a request. */
typedef struct cumod_dp_call {
    struct cumod_work *w; /* NULL once answered */
    cumod_session *s;
    int kind; /* the request body case */
    int ack;  /* answered once enqueued, with a ticket */
    uint64_t ticket;
    uint64_t generation;     /* Launch: for the reply */
    struct cumod_gen **gens; /* generations held in flight */
    uint32_t ngens;
    cumod_seg **segs; /* segments held in flight */
    uint32_t nsegs;
    uint32_t batch_items;
} cumod_dp_call;

/* Sends m for call c (which holds its work, session and generations) and
 * answers when the executor does. Takes c. */
void cumod__dp_submit(struct cumod_daemon *d, cumod_dp_call *c,
                      cumod_dp_msg *m);

/* Checks [offset, offset+len) against buffer handle of s. On failure
 * answers w (naming what) and returns NULL. */
cumod_buf *cumod__dp_range(cumod_session *s, struct cumod_work *w,
                           const char *what, uint64_t handle, uint64_t offset,
                           uint64_t len);

/* The stream key of handle for s, or 0 after answering w. */
uint64_t cumod__dp_stream(cumod_session *s, struct cumod_work *w,
                          uint64_t handle);

/* Holds g (or seg) in flight for c until the executor answers. 0 or -1
 * (out of memory). */
int cumod__dp_hold_gen(cumod_dp_call *c, struct cumod_gen *g);
int cumod__dp_hold_seg(cumod_dp_call *c, cumod_seg *g);

/* A call for w that will not be submitted (w answered or parked): releases
 * what it holds. */
void cumod__dp_call_abort(cumod_dp_call *c);
cumod_dp_call *cumod__dp_call_new(struct cumod_work *w, cumod_session *s,
                                  int ack);

/* Checks a Copy against both sides and fills the item (segment in *segp,
 * NULL for device to device). On failure answers w and returns -1. */
int cumod__dp_copy_item(cumod_session *s, struct cumod_work *w,
                        const Cumod__Copy *r, cumod_work_item *it,
                        cumod_seg **segp);

/* A simple executor call for a request: w, its session, one number. */
typedef struct cumod_dp_simple {
    struct cumod_work *w;
    cumod_session *s;
    uint64_t a, b;
} cumod_dp_simple;

/* Sends op for w; cb gets a cumod_dp_simple (with a) and must call
 * cumod__session_call_done and free it. 0, or -1 after answering w. */
int cumod__dp_call_simple(struct cumod_daemon *d, struct cumod_work *w,
                          cumod_session *s, uint32_t op, const void *p,
                          size_t len, int fd, cumod_exec_cb cb, uint64_t a);
/* The cb for calls answered with a DoneReply or the executor's status. */
void cumod__dp_on_simple(struct cumod_daemon *d, void *arg,
                         const cumod_chan_hdr *hdr, const void *payload,
                         size_t len);
void cumod__dp_reply_done(struct cumod_work *w, uint64_t ticket,
                          uint64_t generation);

/* dataplane_ctl.c */
void cumod__dp_map(struct cumod_daemon *d, struct cumod_work *w,
                   cumod_session *s);
void cumod__dp_unmap(struct cumod_daemon *d, struct cumod_work *w,
                     cumod_session *s);
void cumod__dp_stream_create(struct cumod_daemon *d, struct cumod_work *w,
                             cumod_session *s);
void cumod__dp_stream_destroy(struct cumod_daemon *d, struct cumod_work *w,
                              cumod_session *s);
void cumod__dp_sync(struct cumod_daemon *d, struct cumod_work *w,
                    cumod_session *s);
void cumod__dp_wait(struct cumod_daemon *d, struct cumod_work *w,
                    cumod_session *s);

/* Handlers. Each returns 1 when it handled the body case. */
int cumod__dp_on_request(struct cumod_daemon *d, struct cumod_work *w);

/* launch.c: a Launch or a Batch. */
void cumod__launch_request(struct cumod_daemon *d, struct cumod_work *w,
                           cumod_session *s);

/* Appends a validated Launch to m, holding its generation in c. On failure
 * answers w naming item (or -1) and returns -1; 1 when w was parked for a
 * module load (it is re-run after); 0 when appended. */
int cumod__launch_append(struct cumod_daemon *d, struct cumod_work *w,
                         cumod_session *s, const Cumod__Launch *l, int item,
                         cumod_dp_msg *m, cumod_dp_call *c);

#endif
