/* SPDX-License-Identifier: MIT */
/*
 * Text from outside (module and kernel names, file names, compile and JIT
 * logs, client messages), made safe where it is written (STYLE.md 17e):
 *
 * - in the log, one event is one line: every control character (newlines
 *   too), DEL, the C1 controls and every byte that is not part of valid
 *   UTF-8 is written as an escape (\n, \t, \r, \xNN), so no text can start
 *   a line of its own that looks like cumodd's;
 * - in a reply, a string field is valid UTF-8 (protobuf's rule for string
 *   fields; Python's protobuf refuses the whole message otherwise): bytes
 *   that are not valid UTF-8 and control characters other than newline
 *   and tab are written as \xNN.
 *
 * Backslashes are kept as they are: the escapes are for people and for
 * parsers of lines, not a reversible encoding.
 */
#ifndef CUMOD_TEXT_H
#define CUMOD_TEXT_H

#include <stddef.h>

#include "cumod.pb-c.h"

/* How text is escaped: for one log line, or for a reply's string field
 * (newlines and tabs kept). */
typedef enum cumod_text_mode {
    CUMOD_TEXT_LOG = 0,
    CUMOD_TEXT_REPLY = 1,
} cumod_text_mode;

/* The bytes src[0..len) take once escaped for mode. Pure. */
size_t cumod__text_escaped_len(const char *src, size_t len,
                               cumod_text_mode mode);

/* Writes src[0..len) escaped for mode into dst (cap bytes, NUL-terminated
 * when cap > 0), never cutting an escape or a UTF-8 sequence; returns the
 * bytes written (without the NUL) and sets *used (may be NULL) to the
 * bytes of src written, less than len when dst was too small. Pure. */
size_t cumod__text_escape(char *dst, size_t cap, const char *src, size_t len,
                          cumod_text_mode mode, size_t *used);

/* Valid UTF-8 copies of a reply's strings, swapped in for packing and
 * swapped back after. */
typedef struct cumod_text_fix {
    size_t n;
    char ***field; /* the fields swapped */
    char **orig;   /* their own strings */
} cumod_text_fix;

/* Makes every string field of reply (nested messages, repeated fields and
 * oneofs included; bytes fields are not text) valid for CUMOD_TEXT_REPLY:
 * a field that needs it points at an escaped copy until
 * cumod__text_fix_undo. Nothing is allocated when every field is clean
 * (the common case). reply itself is the caller's own copy: when memory
 * for the copies cannot be had, its body is dropped and its status made
 * CUMOD_ENOMEM, so that what is packed is still valid. Any thread; the
 * reply's nested messages must not be packed by another thread meanwhile. */
void cumod__text_fix_reply(Cumod__Reply *reply, cumod_text_fix *fix);

/* Puts the fields' own strings back and frees the copies. Accepts a fix
 * that changed nothing. */
void cumod__text_fix_undo(cumod_text_fix *fix);

#endif
