/* SPDX-License-Identifier: MIT */
/*
 * The checks a request's data must pass before anything reaches the
 * executor: handles against the session, offsets and lengths against what
 * they name, a launch's shape and arguments against its kernel and the
 * device. Each is a function of its inputs (a session, a kernel
 * description, device limits, a protobuf request): it returns a cumod
 * error and fills a status with a sentence naming what was wrong, and
 * never answers anything, so any transport can use it (nng now, a
 * shared-memory ring later) and tests can call it without a daemon.
 *
 * Pure: no I/O, no allocation but what is written to the outputs. Loop
 * thread (the session is the loop's).
 */
#ifndef CUMOD_CHECKS_H
#define CUMOD_CHECKS_H

#include <stddef.h>
#include <stdint.h>

#include "catalog/catalog.h"
#include "common/channel.h"
#include "data/gemm_check.h"
#include "data/launch_check.h"
#include "cumod.pb-c.h"
#include "front/state/session.h"
#include "common/status.h"

/* [offset, offset + len) inside buffer handle of s; what names the
 * operand in the sentence ("write", "argument 2 of vadd:vadd"). */
cumod_err cumod__check_range(const cumod_session *s, const char *what,
                             uint64_t handle, uint64_t offset, uint64_t len,
                             cumod_buf **out, cumod_status *st);

/* The executor key of stream handle (0: the session's default stream). */
cumod_err cumod__check_stream(const cumod_session *s, uint64_t handle,
                              uint64_t *key, cumod_status *st);

/* Checks launch l of kernel k for session s on a device with dev's
 * limits (data/launch_check.h says what), buffers as s holds them. */
cumod_err cumod__check_launch(const cumod_session *s,
                              const cumod_chan_device *dev,
                              const cumod_kernel *k, const Cumod__Launch *l,
                              const cumod_launch_opts *opts,
                              cumod_launch_packed *out, cumod_status *st);

/* A Copy: both sides (buffer ranges, or a segment range) and its kind. The
 * segment is in *segp (NULL for device to device). */
cumod_err cumod__check_copy(const cumod_session *s, const Cumod__Copy *r,
                            cumod_work_item *it, cumod_seg **segp,
                            cumod_status *st);

/* A Memset: the range, and a value that is a byte. */
cumod_err cumod__check_memset(const cumod_session *s, const Cumod__Memset *r,
                              cumod_work_item *it, cumod_status *st);

/* A WriteBuffer: the range its bytes go to. */
cumod_err cumod__check_write(const cumod_session *s,
                             const Cumod__WriteBuffer *r, cumod_work_item *it,
                             cumod_status *st);

/* A ReadBuffer: the range, and a length a reply of at most max_reply
 * bytes can carry. */
cumod_err cumod__check_read(const cumod_session *s, const Cumod__ReadBuffer *r,
                            size_t max_reply, cumod_work_item *it,
                            cumod_status *st);

/* A MapSegment's name ("/name", at most 200 characters, one component)
 * and size (not 0). */
cumod_err cumod__check_segment_name(const Cumod__MapSegment *r,
                                    cumod_status *st);

/* A Gemm against s's buffers (data/gemm_check.h says what is checked;
 * "A", "B" or "C" names the operand in the sentence). */
cumod_err cumod__check_gemm(const cumod_session *s, const Cumod__Gemm *r,
                            cumod_chan_gemm *out, cumod_status *st);

#endif
