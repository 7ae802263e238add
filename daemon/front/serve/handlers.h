/* SPDX-License-Identifier: MIT */
/*
 * The request handlers, one per request body, called by the dispatch table
 * (dispatch.c) on the loop thread. s is the request's session for the
 * handlers whose table row asks for one (made and checked by the
 * dispatcher), NULL for the others. Each handler answers r exactly once:
 * at its end, or, for a request that must wait, in the resume callback of
 * the state it parks.
 */
#ifndef CUMOD_HANDLERS_H
#define CUMOD_HANDLERS_H

#include "front/front.h"

typedef void (*cumod_handler_fn)(cumod_front *f, cumod_req *r,
                                 cumod_session *s);

/* h_modules.c: the daemon and its module catalog */
void cumod__h_hello(cumod_front *f, cumod_req *r, cumod_session *s);
/* Gets no session from the table (it must not start the executor of the
 * device it leaves): it looks the session up itself. */
void cumod__h_set_device(cumod_front *f, cumod_req *r, cumod_session *s);
void cumod__h_list(cumod_front *f, cumod_req *r, cumod_session *s);
void cumod__h_show(cumod_front *f, cumod_req *r, cumod_session *s);
/* WatchEvents: change events, now or when one comes (events.h). */
void cumod__h_watch(cumod_front *f, cumod_req *r, cumod_session *s);
void cumod__h_load(cumod_front *f, cumod_req *r, cumod_session *s);
void cumod__h_unload(cumod_front *f, cumod_req *r, cumod_session *s);
void cumod__h_pin(cumod_front *f, cumod_req *r, cumod_session *s);
void cumod__h_unpin(cumod_front *f, cumod_req *r, cumod_session *s);
void cumod__h_reload(cumod_front *f, cumod_req *r, cumod_session *s);
void cumod__h_unquarantine(cumod_front *f, cumod_req *r, cumod_session *s);
void cumod__h_read_global(cumod_front *f, cumod_req *r, cumod_session *s);
void cumod__h_write_global(cumod_front *f, cumod_req *r, cumod_session *s);
void cumod__h_kernel_settings(cumod_front *f, cumod_req *r, cumod_session *s);

/* h_ring.c: the fast path's ring */
void cumod__h_open_ring(cumod_front *f, cumod_req *r, cumod_session *s);

/* h_data.c: buffers, segments, streams, copies, synchronize and wait */
void cumod__h_alloc(cumod_front *f, cumod_req *r, cumod_session *s);
void cumod__h_free(cumod_front *f, cumod_req *r, cumod_session *s);
void cumod__h_write(cumod_front *f, cumod_req *r, cumod_session *s);
void cumod__h_read(cumod_front *f, cumod_req *r, cumod_session *s);
void cumod__h_memset(cumod_front *f, cumod_req *r, cumod_session *s);
void cumod__h_map(cumod_front *f, cumod_req *r, cumod_session *s);
void cumod__h_unmap(cumod_front *f, cumod_req *r, cumod_session *s);
void cumod__h_copy(cumod_front *f, cumod_req *r, cumod_session *s);
void cumod__h_stream_create(cumod_front *f, cumod_req *r, cumod_session *s);
void cumod__h_stream_destroy(cumod_front *f, cumod_req *r, cumod_session *s);
void cumod__h_sync(cumod_front *f, cumod_req *r, cumod_session *s);
void cumod__h_wait(cumod_front *f, cumod_req *r, cumod_session *s);

/* h_launch.c: launches and batches */
void cumod__h_launch(cumod_front *f, cumod_req *r, cumod_session *s);
void cumod__h_batch(cumod_front *f, cumod_req *r, cumod_session *s);
/* A GEMM through cuBLAS (gemm.h), on the launch's path. */
void cumod__h_gemm(cumod_front *f, cumod_req *r, cumod_session *s);

#endif
