/* SPDX-License-Identifier: MIT */
/*
 * Helper processes (the executor, the NVRTC worker) die with the front:
 * PR_SET_PDEATHSIG, and a look at whether the front is gone already (it
 * died before the prctl took effect). That look compares the parent with
 * the front's pid, which the front puts in the environment its children
 * inherit: "is my parent PID 1?" is wrong where the front is PID 1 itself
 * (a container's ENTRYPOINT, a Kubernetes pod), and every helper then
 * took itself for an orphan and exited.
 */
#ifndef CUMOD_COMMON_PARENT_H
#define CUMOD_COMMON_PARENT_H

/* The front: records its pid for its children (before any thread). */
void cumod__parent_mark(void);

/* A helper: dies with its parent from now on; 0, or -1 when the front is
 * gone already (the caller exits). */
int cumod__parent_tie(void);

/* An executor that may outlive the front (--orphan-grace): only the look
 * whether the front is gone already, no PR_SET_PDEATHSIG. 0 or -1. */
int cumod__parent_alive(void);

#endif
