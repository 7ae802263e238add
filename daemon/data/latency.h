/* SPDX-License-Identifier: MIT */
/*
 * The buckets of the launch latency histogram (cumod_launch_latency_
 * seconds): the front fills them for the launches it serves, the executor
 * for its direct launches (sent in CUMOD_CHAN_DIRECT_STATS), so both
 * count alike.
 */
#ifndef CUMOD_DATA_LATENCY_H
#define CUMOD_DATA_LATENCY_H

#include <stdint.h>

#include "common/channel.h"

/* Bounds, seconds: 10 us to 10 s (CUMOD_LAT_BUCKETS of them). */
static const double cumod_lat_le[CUMOD_LAT_BUCKETS] = {
    1e-5,   2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2,
    2.5e-2, 5e-2,   0.1,  0.25, 0.5,    1,    2.5,  5,      10};

/* Counts ns into cumulative buckets (each bound at or above it). */
static inline void
cumod__lat_count(uint64_t bucket[CUMOD_LAT_BUCKETS], uint64_t ns)
{
    double s = (double)ns / 1e9;
    for (int i = 0; i < CUMOD_LAT_BUCKETS; i++)
        if (s <= cumod_lat_le[i])
            bucket[i]++;
}

#endif
