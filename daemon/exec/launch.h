/* SPDX-License-Identifier: MIT */
/*
 * Service: a kernel launch on a stream (launch.c), for every submitting
 * thread: the function's attributes set where the launch needs them
 * (more dynamic shared memory, a carveout, non-portable cluster sizes;
 * under ex->attr_mtx, since several threads launch), a cooperative
 * grid's size checked, its parameters pointed at in the packed buffer,
 * and cuLaunchKernel (cuLaunchKernelEx for clusters and cooperative
 * launches).
 */
#ifndef CUMOD_EXEC_LAUNCH_H
#define CUMOD_EXEC_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include "exec.h"

/* Launches item it (op LAUNCH: a the module's handle, b the kernel's
 * index) with the parameter buffer extra on s. On failure, what says what
 * failed: the call's name in *name, or the whole sentence in what. When
 * timing_ns is not NULL, the time in the driver's launch call is added to
 * it. */
CUresult cumod__exec_launch(cumod_exec *ex, const cumod_work_item *it,
                            const char *extra, CUstream s, uint64_t *timing_ns,
                            char *what, size_t whatlen, const char **name);

/* The same with the module already looked up (m may be NULL: not
 * loaded). */
CUresult cumod__exec_launch_in(cumod_exec *ex, cumod_exec_module *m,
                               const cumod_work_item *it, const char *extra,
                               CUstream s, uint64_t *timing_ns, char *what,
                               size_t whatlen, const char **name);

#endif
