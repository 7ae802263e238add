/* SPDX-License-Identifier: MIT */
/*
 * What both parts of the demo read: the clock, and whether a signal asked
 * it to stop (a leaf: it calls neither part).
 */
#include <time.h>

#include "demo.h"

/* The one mutable global: what a signal handler may set. */
volatile sig_atomic_t cumod__demo_interrupted;

uint64_t
cumod__demo_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
