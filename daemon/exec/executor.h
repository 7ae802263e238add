/* SPDX-License-Identifier: MIT */
/*
 * The executor: the process that holds the CUDA context. The front starts
 * it (cumodd --executor), hands it one end of the channel as a file
 * descriptor, and kills and restarts it when a fault poisons the context:
 * after an illegal-address fault no CUDA call in that process succeeds again,
 * so recovery is a new process.
 */
#ifndef CUMOD_EXECUTOR_H
#define CUMOD_EXECUTOR_H

typedef struct cumod_executor_cfg {
    int chan_fd;              /* the channel, inherited from the front */
    int ring_fd;              /* its ring's memfd (eventfd: ring_fd + 1), or
                                 -1 */
    int device;               /* CUDA device ordinal */
    unsigned submit_threads;  /* submission threads (submit.h); 0: by the
                                 cores */
    const char *cuda_library; /* path or soname to dlopen */

    /* cuBLAS to dlopen at the first GEMM; NULL: blas.h's default */
    const char *cublas_library;
    /* A pool's executor (front/units/mps.h): the MPS pipe directory it
     * must be a client of (CUDA_MPS_PIPE_DIRECTORY, set before cuInit);
     * a context that is not an MPS client fails its start. NULL: the
     * environment decides. */
    const char *mps_pipe_dir;
    /* When the front dies (its channel closes without CUMOD_CHAN_STOP):
     * seconds to wait for a new front at adopt_dir/exec-PID.sock
     * (orphan.h) before exiting; 0 or no adopt_dir: exit at once, and die
     * with the front (PR_SET_PDEATHSIG). */
    unsigned orphan_grace_s;
    const char *adopt_dir;
} cumod_executor_cfg;

/* Runs the executor until the front closes the channel. Loads the driver,
 * retains the device's primary context, reports READY or FAILED on the
 * channel, then serves commands. Returns the process exit status (0 when
 * the front closed the channel; EX_UNAVAILABLE when the driver or device is
 * unusable; EX_SOFTWARE on a protocol error). Blocks. */
int cumod__executor_main(const cumod_executor_cfg *cfg);

#endif
