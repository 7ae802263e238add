/* SPDX-License-Identifier: MIT */
/*
 * Inside the metrics (metrics.h), shared by their three rooms: the
 * counters and their series (metrics.c, the loop's cumod__metrics_ calls),
 * the rendering (metrics_render.c, family group by family group) and the
 * serving (metrics_http.c: nng's HTTP server, start and stop). Serving
 * calls the rendering, which calls the counters' store; never the
 * reverse.
 */
#ifndef CUMOD_METRICS_IMPL_H
#define CUMOD_METRICS_IMPL_H

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>
#include <pthread.h>
#include <stdint.h>
#include <uv.h>

#include "front/front.h"
#include "common/idmap.h"
#include "data/latency.h"
#include "front/metrics.h"

/* Launch latency buckets, seconds: 10 us to 10 s (data/latency.h: the
 * executor counts its direct launches in the same). */
#define lat_le cumod_lat_le
#define NLAT CUMOD_LAT_BUCKETS

/* Module loads in the executor, seconds: 1 ms to 60 s. */
static const double load_le[] = {1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2,
                                 5e-2, 0.1,    0.25, 0.5,  1,
                                 2.5,  5,      10,   30,   60};
/* NAME.cu compiles (the cache's answers too), seconds: 10 ms to 10 min. */
static const double compile_le[] = {1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1,  2.5,
                                    5,    10,     30,   60,  120,  300, 600};
#define NHIST 15
_Static_assert(sizeof(load_le) / sizeof(load_le[0]) == NHIST &&
                   sizeof(compile_le) / sizeof(compile_le[0]) == NHIST,
               "a histogram's buckets: NHIST");

typedef struct hist {
    uint64_t count, bucket[NHIST];
    double sum;
} hist;

/* Why launches were refused: the codes they were answered, as
 * cumod_refusals_total's reason; the last row takes every other code. */
static const struct {
    cumod_err code;
    const char *reason;
} refusal_reasons[] = {
    {CUMOD_EINVAL, "invalid_argument"},
    {CUMOD_ELIMIT, "limit"},
    {CUMOD_ENOENT, "not_found"},
    {CUMOD_EQUARANTINED, "quarantined"},
    {CUMOD_ECTXLOST, "executor_down"},
    {CUMOD_EBUSY, "busy"},
    {CUMOD_EPERM, "not_permitted"},
    {CUMOD_ETOOBIG, "too_big"},
    {CUMOD_EIMAGE, "bad_image"},
    {CUMOD_EDEVMEM, "device_memory"},
    {CUMOD_ENOTSUP, "not_supported"},
    {CUMOD_ESHUTDOWN, "shutting_down"},
    {CUMOD_OK, "other"},
};
#define NREASONS (sizeof(refusal_reasons) / sizeof(refusal_reasons[0]))

/* Per-module counters, by the name's hash (names kept to tell apart). */
typedef struct mod_counts {
    char *name;
    uint64_t launches_ok, launches_failed;
    uint64_t loads, reloads, load_failures, quarantines, evictions;
} mod_counts;

/* Device time by domain, module and kernel (cumod__metrics_gpu). */
typedef struct gpu_counts {
    char *key; /* domain, module, kernel: each NUL-terminated */
    const char *domain, *module, *kernel;
    int device;
    uint64_t ns;
} gpu_counts;

struct cumod_metrics {
    cumod_front *f;
    cumod_idmap mods; /* fnv64(name) -> mod_counts */
    cumod_idmap gpu;  /* fnv64(key) -> gpu_counts */
    uint64_t refused, faults, hangs;
    uint64_t refused_by[NREASONS]; /* launches, by refusal_reasons */
    uint64_t control_refused;
    hist load, compile;
    uint64_t requests[2]; /* over nng, through a ring */
    uint64_t bytes[3];
    uint64_t lat_count, lat_bucket[NLAT];
    uint64_t direct_launches; /* answered by executors (front/units/direct.c) */
    double lat_sum;
    /* The HTTP side. */
    nng_http_server *srv;
    nng_http_handler *h;
    uv_async_t async;
    pthread_mutex_t mtx;
    pthread_cond_t cond;
    char *text; /* the last rendering */
    size_t len;
    uint64_t gen;       /* renderings so far */
    uint64_t render_ms; /* wall time of the last */
    /* /healthz and /readyz as of the last rendering: the loop's word. */
    int healthy, ready;
    char health_why[160], ready_why[160];
    nng_http_handler *hz, *rz;
    int closing;
};

/* The series of modules no longer resident folded into their module's
 * (kernel ""), and those of modules the catalog no longer knows forgotten:
 * before each rendering (metrics.c). */
void cumod__metrics_fold(cumod_metrics *m);
void cumod__metrics_prune(cumod_metrics *m);

/* Renders every family into the text scrapes serve, and what /healthz and
 * /readyz answer (metrics_render.c; loop thread). */
void cumod__metrics_render(cumod_metrics *m);

#endif
