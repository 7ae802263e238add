/* SPDX-License-Identifier: MIT */
/*
 * A launch's checks, for both processes: the front checks every launch it
 * serves against a session (front/state/checks.h), and the executor its direct
 * launches against the snapshot the front gave it (exec/direct_snap.c).
 * Pure: a function of a kernel description, the device's limits, the
 * request and a buffer lookup; it returns a cumod error with a sentence
 * naming what was wrong, and never answers anything. Any thread.
 */
#ifndef CUMOD_DATA_LAUNCH_CHECK_H
#define CUMOD_DATA_LAUNCH_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "common/channel.h"
#include "common/status.h"
#include "cumod.pb-c.h"
#include "data/kdesc.h"

/* CUDA 12.1+'s kernel parameter limit. */
#define CUMOD_MAX_PARAM_BYTES 32764

/* Blocks in a cluster: 8 portably, 16 with non-portable sizes (sm_90),
 * which the executor allows for the function when a launch asks. */
#define CUMOD_MAX_CLUSTER 16

/* Splits "MODULE:FUNCTION" (module at most 128 characters) into module
 * (NUL-terminated) and *fn (pointing into kernel). */
cumod_err cumod__check_kernel_name(const char *kernel, char module[129],
                                   const char **fn, cumod_status *st);

/* A launch checked and packed. */
typedef struct cumod_launch_packed {
    cumod_work_item it; /* op, grid, block, shmem; a and b (module handle,
                           kernel index) are the caller's to fill */
    size_t nparams;     /* bytes of params used */
    unsigned char params[CUMOD_MAX_PARAM_BYTES];
} cumod_launch_packed;

/* What a launch's checks take besides the request: the daemon's settings
 * and the kernel's own (KernelSettings). */
typedef struct cumod_launch_opts {
    int allow_pointer_values; /* a value where a C++ kernel takes a pointer */
    int32_t carveout;         /* the kernel's default carveout; -1: none */
} cumod_launch_opts;

/* A buffer argument's device address: the base of buffer handle, after
 * checking that offset is inside it (what names the argument in the
 * sentence). */
typedef cumod_err (*cumod_launch_buf_fn)(const void *arg, const char *what,
                                         uint64_t handle, uint64_t offset,
                                         uint64_t *dptr, cumod_status *st);

/* Checks launch l of kernel k (from l->kernel) on a device with dev's
 * limits: grid and block within the device's limits (0 counts as 1),
 * threads per block and the kernel's launch bounds, dynamic shared memory
 * up to the device's opt-in limit less the kernel's static shared memory,
 * a cluster shape (dividing the grid, within the device's limits, the
 * kernel's compiled shape where it has one), a cooperative launch on a
 * device that has them, a carveout, the argument count, each value's size
 * (a C++ kernel's pointer parameter takes a buffer unless
 * opts->allow_pointer_values, and then a 64-bit integer), each typed
 * value's type against an arithmetic parameter's (Arg.type; integers of
 * one width pass for each other, a value of a type not known here is
 * checked by size), each buffer argument (through buf). Arguments are
 * numbered from 1, with their type where the kernel's signature gives it;
 * a type refused names the kernel's signature and both types. Packs the
 * parameter buffer at the kernel's offsets: values in place, buffers as
 * device pointers. */
cumod_err cumod__launch_check(const cumod_chan_device *dev,
                              const cumod_kernel *k, const Cumod__Launch *l,
                              const cumod_launch_opts *opts,
                              cumod_launch_buf_fn buf, const void *buf_arg,
                              cumod_launch_packed *out, cumod_status *st);

#endif
