/* SPDX-License-Identifier: MIT */
/*
 * The headers a NAME.cu includes, as part of what its image is made from.
 *
 * NVRTC reads the headers itself and says nothing of which it read, so the
 * catalog's reader scans the source's #include lines (and those of every
 * header it finds, recursively) and looks each up as the preprocessor
 * would: a quoted name in the including file's folder first, then in each
 * -I folder of the options in order (the kernel folder among them). What
 * is found there is hashed, path and bytes, into one SHA-256 that joins the
 * source and the options in the compile cache's key and in the record of
 * what the kept image was made from. A changed header therefore compiles
 * again, after a restart too; one the scan cannot see (named by a macro,
 * or the toolkit's, which goes with NVRTC's version) does not.
 */
#ifndef CUMOD_COMPILE_DEPS_H
#define CUMOD_COMPILE_DEPS_H

#include <stddef.h>

/* Limits: past them the digest covers what was read. */
#define CUMOD_DEPS_MAX_FILES 256
#define CUMOD_DEPS_MAX_DIRS 64
#define CUMOD_DEPS_MAX_ROOTS 72
#define CUMOD_DEPS_MAX_FILE_BYTES (16u << 20)
#define CUMOD_DEPS_MAX_BYTES ((size_t)64 << 20)

/* The digest of the headers that src (len bytes, the file at path, whose
 * folder a quoted include searches first) includes, with the -I folders of
 * NVRTC's options opts; "" in hex when it includes none that exists.
 * Reads only files within roots (folders or files; none: nothing is read).
 * With refused non-NULL, the first include refused is described there
 * ("k.cu:3: #include "/etc/shadow": outside ..."; "" when none), and the
 * scan stops at it. Returns how many headers it covers. Blocks on the
 * files: a pool thread, or the worker. */
size_t cumod__compile_deps(const char *path, const char *src, size_t len,
                           const char *const *opts, size_t nopts,
                           const char *const *roots, size_t nroots,
                           char hex[65], char *refused, size_t refusedlen);

/* The -I folders among NVRTC's options (--include-path=D, -ID, -I D,
 * --include-path D), in order, at most max, into dirs (pointers into
 * opts). Returns how many. */
size_t cumod__compile_include_dirs(const char *const *opts, size_t nopts,
                                   const char **dirs, size_t max);

#endif
