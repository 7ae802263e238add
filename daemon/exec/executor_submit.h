/* SPDX-License-Identifier: MIT */
/*
 * The executor's submission threads (submit.h) as the executor runs them:
 * what each is posted (a session's WORK, a direct ring's command), what
 * it polls between (its rings: direct.h), how many there are.
 */
#ifndef CUMOD_EXECUTOR_SUBMIT_H
#define CUMOD_EXECUTOR_SUBMIT_H

#include "exec.h"

#define CUMOD_EXEC_SUBMIT_MAX 64

/* Starts them (aux: CUMOD_EXEC_SUBMIT_MAX slots for their WORK states; *n
 * how many were made, to stop even after a failure). */
cumod_err cumod__executor_submit_start(cumod_exec *ex, void **aux, unsigned *n);
/* Stops them and frees their states. */
void cumod__executor_submit_stop(cumod_exec *ex, void **aux, unsigned n);

#endif
