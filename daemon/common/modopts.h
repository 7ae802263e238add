/* SPDX-License-Identifier: MIT */
/*
 * A module's own settings: JIT options (cumod_jit_opts, config.h) and NVRTC
 * options, as the configuration (--jit-*, --module-option, [module NAME])
 * and the sidecar files NAME.ptx.opts and NAME.cu.opts give them. Pure
 * functions: the configuration parser and the catalog's readers (any
 * thread) share them, so a key means the same everywhere.
 */
#ifndef CUMOD_MODOPTS_H
#define CUMOD_MODOPTS_H

#include <stddef.h>

#include "config.h"

/* The most options one NAME.cu.opts may hold, and the longest line. */
#define CUMOD_OPTS_FILE_MAX 256
#define CUMOD_OPTS_LINE_MAX 4096
/* The largest sidecar file read. */
#define CUMOD_OPTS_FILE_BYTES (256 * 1024)

/* Sets the JIT option key to value in o. key may be spelt as the daemon's
 * option ("jit-opt-level"), without "jit-" ("opt-level"), with leading
 * dashes, '_' for '-', or as the driver's name ("CU_JIT_OPTIMIZATION_LEVEL");
 * also "O" / "optimization-level", "maxrregcount" / "max-regs", "lineinfo" /
 * "generate-line-info". value NULL or "" is 1 for line-info and an error
 * for the others. 0, or -1 with a sentence in msg ("max-registers: '300' is
 * not a number from 1 to 255", "unknown JIT option 'foo' (...)"). */
int cumod__jit_set(cumod_jit_opts *o, const char *key, const char *value,
                   char *msg, size_t msglen);

/* 1 if key names a JIT option (as cumod__jit_set reads it). */
int cumod__jit_is_key(const char *key);

/* dst's fields set again from src's that are set. */
void cumod__jit_merge(cumod_jit_opts *dst, const cumod_jit_opts *src);

int cumod__jit_equal(const cumod_jit_opts *a, const cumod_jit_opts *b);

/* "opt-level 3, max-registers 64, line-info 1" or "none (the driver's
 * defaults)". */
void cumod__jit_format(const cumod_jit_opts *o, char *buf, size_t len);

/* Splits a --module-option item "NAME:KEY=VALUE" and checks it: the name
 * (a module name), the key (a JIT option or "nvrtc-option") and, for a JIT
 * option, the value. Writes the name into name, and pointers into item
 * for key (its length into *keylen) and value. 0, or -1 with a sentence. */
int cumod__modopt_split(const char *item, char name[129], const char **key,
                        size_t *keylen, const char **value, char *msg,
                        size_t msglen);

/* The settings --module-option gives module name: its JIT options merged
 * into *jit (in order), and its nvrtc-option values appended to opts (up to
 * max; *n counts them). Items that do not parse are skipped (the parser
 * refused them already). */
void cumod__modopt_for(const char *const *items, int nitems, const char *name,
                       cumod_jit_opts *jit, const char **opts, size_t max,
                       size_t *n);

/* Parses NAME.ptx.opts (text, len bytes; fname for messages): one JIT
 * option a line, "KEY VALUE", "KEY=VALUE" or "KEY" (line-info), '#' starts
 * a comment. 0 with *out set (fields not named stay -1), or -1 with
 * "fname:LINE: what was wrong" in msg. */
int cumod__opts_parse_jit(const char *text, size_t len, const char *fname,
                          cumod_jit_opts *out, char *msg, size_t msglen);

/* Parses NAME.cu.opts: one NVRTC option a line (trimmed; blank lines and
 * lines starting with '#' skipped). Writes at most CUMOD_OPTS_FILE_MAX
 * malloc'd strings into opts and their count into *n (the caller frees
 * them); 0, or -1 with "fname:LINE: ..." in msg (a NUL byte, a line too
 * long, too many options, no memory). */
int cumod__opts_parse_lines(const char *text, size_t len, const char *fname,
                            char **opts, size_t *n, char *msg, size_t msglen);

#endif
