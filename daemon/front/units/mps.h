/* SPDX-License-Identifier: MIT */
/*
 * NVIDIA MPS for the pools of executors (--pool, --mps; docs/isolation.md
 * "A pool under MPS"). Several executors on one GPU time-slice between
 * their contexts unless they are clients of one MPS server, which runs
 * their work side by side in one context of its own. With --mps own,
 * cumodd starts a control daemon (nvidia-cuda-mps-control -d) with a pipe
 * directory of its own before any executor, and tells it to quit once the
 * executors are gone; with --mps join it checks that one answers at the
 * pipe directory the operator names. The pool's executors are then started
 * as its clients (CUDA_MPS_PIPE_DIRECTORY, checked by each executor:
 * exec/executor.c); executors outside a pool are never pointed at it.
 *
 * Front's thread, at start and at exit (blocking: a few milliseconds, the
 * control program's -d returns once it has forked).
 */
#ifndef CUMOD_MPS_H
#define CUMOD_MPS_H

#include <limits.h>

#include "common/config.h"
#include "common/status.h"

typedef struct cumod_mps {
    cumod_mps_mode mode;
    char dir[PATH_MAX];     /* the pipe directory; "" without MPS */
    char log_dir[PATH_MAX]; /* own: CUDA_MPS_LOG_DIRECTORY */
    char control[PATH_MAX]; /* own: the control program */
    int started;            /* own: our control daemon runs */
    int made_dir;           /* own: dir is ours to remove at the end */
} cumod_mps;

/* --mps own starts the control daemon, join checks that one answers;
 * none does nothing. CUMOD_OK, or an error with st saying what and where. */
cumod_err cumod__mps_start(const cumod_config *cfg, cumod_mps *m,
                           cumod_status *st);

/* Once the executors are gone: own tells its control daemon to quit (and
 * its MPS server with it) and removes a pipe directory it made. */
void cumod__mps_stop(cumod_mps *m);

/* The pipe directory a pool's executors are started with, or NULL. */
const char *cumod__mps_dir(const cumod_mps *m);

#endif
