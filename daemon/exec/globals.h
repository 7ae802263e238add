/* SPDX-License-Identifier: MIT */
/*
 * Service: module globals (globals.c), for the LOAD and GLOBALS handlers.
 */
#ifndef CUMOD_EXEC_GLOBALS_H
#define CUMOD_EXEC_GLOBALS_H

#include "exec.h"

/* Looks up the globals of a globals spec (channel.h) in mod and applies
 * their kept writes, synchronously; appends the globals table of a LOAD's
 * reply to table (a cumod_exec_table of reply.h, when not NULL).
 * CUMOD_OK, or an error with a sentence in msg (a global with kept
 * writes missing or at another size). Load lane. */
int cumod__exec_globals_apply(cumod_exec *ex, CUmodule mod, const void *spec,
                              size_t len, const char *module, void *table,
                              char *msg, size_t msglen);

#endif
