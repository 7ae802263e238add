/* SPDX-License-Identifier: MIT */
/*
 * Prometheus metrics (--metrics-listen ADDR:PORT): text format 0.0.4 at
 * http://ADDR:PORT/metrics, served by nng's HTTP server on its own
 * threads. The counters live on the loop thread; a scrape asks the loop
 * for a fresh rendering and waits at most 500 ms for it, else serves the
 * last one (cumod_metrics_render_age_seconds says how old): a scrape never
 * waits on the GPU, and a busy loop costs it freshness, not an answer.
 * Every cumod__metrics_ call is the loop thread's and does nothing when
 * metrics are off (f->metrics NULL).
 *
 * Series of one device carry device (the CUDA ordinal) and gpu_uuid (the
 * driver's UUID, "GPU-...", which DCGM's exporter and Triton label GPUs
 * with); daemon-wide series carry neither. Series of a session go when it
 * ends; those of a module when its files leave the folder.
 *
 * The same listener answers GET /healthz (200 while the catalog's executor
 * serves; 503 while it is starting, restarting, stuck or crash-looping, or
 * when the loop does not answer in 500 ms) and GET /readyz (200 once the
 * first scan of the kernel folder is done and the executor serves).
 */
#ifndef CUMOD_METRICS_H
#define CUMOD_METRICS_H

#include <stdint.h>

#include "catalog/catalog.h"
#include "cumod/errors.h"

struct cumod_front;
typedef struct cumod_metrics cumod_metrics;

/* Listens on addr ("127.0.0.1:9464"); NULL or "" leaves metrics off.
 * CUMOD_EINVAL or CUMOD_EADDRINUSE-like errors with err set. */
cumod_err cumod__metrics_start(struct cumod_front *f, const char *addr,
                               char *err, size_t errlen);
void cumod__metrics_stop(struct cumod_front *f);

/* A module's change (counts loads, reloads, failed loads, quarantines,
 * evictions). */
void cumod__metrics_event(struct cumod_front *f, const cumod_catalog_event *ev);
/* n launches of module completed (ok) or failed on the device. */
void cumod__metrics_launches(struct cumod_front *f, const char *module, int ok,
                             uint32_t n);
/* Launches refused before reaching the device (checks, limits), with the
 * code they were answered (cumod_refusals_total's reason). */
void cumod__metrics_refused(struct cumod_front *f, cumod_err code, uint32_t n);
/* A control request refused to a peer --control-uid / --control-gid do
 * not admit. */
void cumod__metrics_control_refused(struct cumod_front *f);
/* The catalog timed a module's load in the executor (what 0) or a NAME.cu
 * compile (what 1, from the cache too): ns. */
void cumod__metrics_timed(struct cumod_front *f, int what, uint64_t ns);
/* A launch or batch from its request to its completion. */
void cumod__metrics_latency(struct cumod_front *f, uint64_t ns);
/* What an executor's direct launches add (front/units/direct.c): requests
 * taken from rings, and count launches' latencies (their sum, ns, and
 * cumulative buckets as data/latency.h's). */
void cumod__metrics_direct(struct cumod_front *f, uint64_t requests,
                           uint64_t count, uint64_t sum_ns,
                           const uint64_t bucket[CUMOD_LAT_BUCKETS]);
/* Bytes copied: 0 to the device, 1 to the host, 2 on the device. */
void cumod__metrics_bytes(struct cumod_front *f, int direction, uint64_t n);
/* A client request arrived: through a ring (the fast path) or over nng. */
void cumod__metrics_request(struct cumod_front *f, int ring);
/* The executor met a fault (hang 0) or a hang (1). */
void cumod__metrics_fault(struct cumod_front *f, int hang);
/* ns of device time of completed work in domain: a launch of module's
 * kernel, or (module "") "copy" (copies, memsets, reads, writes) or
 * "gemm". Per-kernel series are kept for resident modules only: a module
 * that is not resident any more has its kernels' time folded into its
 * series with kernel "" when metrics render. */
void cumod__metrics_gpu(struct cumod_front *f, int device, const char *domain,
                        const char *module, const char *kernel, uint64_t ns);

#endif
