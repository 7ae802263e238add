/* SPDX-License-Identifier: MIT */
#include "json.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

void
cumod__json_init(cumod_json *j, FILE *f, int pretty)
{
    j->f = f;
    j->depth = 0;
    j->first[0] = 1;
    j->pretty = pretty;
}

static void
json_escaped(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\r':
            fputs("\\r", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

/* Writes the separator, the indentation and the key of a new member. */
static void
json_member(cumod_json *j, const char *key)
{
    if (!j->first[j->depth])
        fputc(',', j->f);
    j->first[j->depth] = 0;
    if (j->pretty && j->depth > 0) {
        fputc('\n', j->f);
        for (int i = 0; i < j->depth; i++)
            fputs("  ", j->f);
    }
    if (key != NULL) {
        json_escaped(j->f, key);
        fputs(j->pretty ? ": " : ":", j->f);
    }
}

static void
json_open(cumod_json *j, const char *key, char c)
{
    json_member(j, key);
    fputc(c, j->f);
    if (j->depth < 31)
        j->depth++;
    j->first[j->depth] = 1;
}

static void
json_close(cumod_json *j, char c)
{
    int empty = j->first[j->depth];
    if (j->depth > 0)
        j->depth--;
    if (j->pretty && !empty) {
        fputc('\n', j->f);
        for (int i = 0; i < j->depth; i++)
            fputs("  ", j->f);
    }
    fputc(c, j->f);
}

void
cumod__json_begin_object(cumod_json *j, const char *key)
{
    json_open(j, key, '{');
}

void
cumod__json_end_object(cumod_json *j)
{
    json_close(j, '}');
}

void
cumod__json_begin_array(cumod_json *j, const char *key)
{
    json_open(j, key, '[');
}

void
cumod__json_end_array(cumod_json *j)
{
    json_close(j, ']');
}

void
cumod__json_string(cumod_json *j, const char *key, const char *s)
{
    json_member(j, key);
    if (s == NULL)
        fputs("null", j->f);
    else
        json_escaped(j->f, s);
}

void
cumod__json_int(cumod_json *j, const char *key, int64_t v)
{
    json_member(j, key);
    fprintf(j->f, "%" PRId64, v);
}

void
cumod__json_uint(cumod_json *j, const char *key, uint64_t v)
{
    json_member(j, key);
    fprintf(j->f, "%" PRIu64, v);
}

void
cumod__json_bool(cumod_json *j, const char *key, int v)
{
    json_member(j, key);
    fputs(v ? "true" : "false", j->f);
}

void
cumod__json_number(cumod_json *j, const char *key, const char *text)
{
    char *end;
    double v = strtod(text, &end);

    json_member(j, key);
    if (end != text && *end == '\0' && isfinite(v))
        fputs(text, j->f);
    else
        fputs("null", j->f);
}

void
cumod__json_finish(cumod_json *j)
{
    fputc('\n', j->f);
    fflush(j->f);
}
