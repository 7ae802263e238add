/* SPDX-License-Identifier: MIT */
/*
 * cumod_demo (demo.c, demo_reload.c): a client of cumodd that adds vectors
 * through a shared segment, then keeps launching from a second connection
 * while vadd.cubin is replaced under it. Not part of libcumod.
 */
#ifndef CUMOD_DEMO_H
#define CUMOD_DEMO_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "cumod/cumod.h"

typedef struct demo_opts {
    const char *url;     /* the daemon */
    const char *kernels; /* the folder it watches; NULL: no reload part */
    const char *variant; /* the replacement vadd.cubin (c = a - b) */
    size_t n;            /* floats in the vector addition */
} demo_opts;

/* Set by SIGINT and SIGTERM; the demo's waits check it, so that an
 * interrupted demo still puts the original vadd.cubin back. */
extern volatile sig_atomic_t cumod__demo_interrupted;

/* Monotonic nanoseconds. */
uint64_t cumod__demo_now_ns(void);

/* The hot reload under load: a worker thread on its own connection keeps
 * launching vadd:vadd and checking each result, while this thread replaces
 * o->kernels/vadd.cubin with o->variant and then puts the original back,
 * waiting after each swap for the results to change. c is the main
 * connection (used to watch the module's generation). Prints a short
 * report; returns 0 when both swaps were seen and no launch failed, 1
 * otherwise. The original file is back in place when it returns. */
int cumod__demo_reload(cumod_client *c, const demo_opts *o);

#endif
