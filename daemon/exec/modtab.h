/* SPDX-License-Identifier: MIT */
/*
 * Service: the table of loaded modules (modtab.c), filled by the LOAD
 * handler and read by every handler that names a module by handle.
 */
#ifndef CUMOD_EXEC_MODTAB_H
#define CUMOD_EXEC_MODTAB_H

#include "exec.h"

/* The loaded module of handle, or NULL when stale or unknown. Any thread. */
cumod_exec_module *cumod__exec_module(cumod_exec *ex, uint64_t handle);
/* Puts m in a free slot and gives it its handle. CUMOD_ENOMEM. Any
 * thread. */
cumod_err cumod__exec_module_insert(cumod_exec *ex, cumod_exec_module *m);
/* Takes the module of handle out of the table; NULL when unknown. */
cumod_exec_module *cumod__exec_module_take(cumod_exec *ex, uint64_t handle);
/* Unloads m (when loaded) and frees it; accepts NULL and a half-built
 * one. */
void cumod__exec_module_free(cumod_exec *ex, cumod_exec_module *m);
/* Unloads everything (at exit, the lanes stopped). */
void cumod__exec_modules_fini(cumod_exec *ex);

#endif
