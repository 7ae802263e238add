/* SPDX-License-Identifier: MIT */
/*
 * A small JSON writer for cumodctl's --json output: objects, arrays,
 * strings escaped per RFC 8259, numbers, booleans and null, with commas
 * placed for the caller. Writes to a FILE; not thread-safe.
 */
#ifndef CUMOD_JSON_H
#define CUMOD_JSON_H

#include <stdint.h>
#include <stdio.h>

typedef struct cumod_json {
    FILE *f;
    int depth;
    int first[32]; /* per level: nothing written yet at this level */
    int pretty;
} cumod_json;

void cumod__json_init(cumod_json *j, FILE *f, int pretty);
/* key may be NULL inside arrays and at the top. */
void cumod__json_begin_object(cumod_json *j, const char *key);
void cumod__json_end_object(cumod_json *j);
void cumod__json_begin_array(cumod_json *j, const char *key);
void cumod__json_end_array(cumod_json *j);
/* s NULL writes null. */
void cumod__json_string(cumod_json *j, const char *key, const char *s);
void cumod__json_int(cumod_json *j, const char *key, int64_t v);
void cumod__json_uint(cumod_json *j, const char *key, uint64_t v);
void cumod__json_bool(cumod_json *j, const char *key, int v);
/* A number the caller formatted (printf's %d, %u, %.9g); text that is not
 * a finite number ("nan", "inf": JSON has neither) writes null. */
void cumod__json_number(cumod_json *j, const char *key, const char *text);
/* Ends the document with a newline. */
void cumod__json_finish(cumod_json *j);

#endif
