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

/* The length of the well-formed UTF-8 sequence at p (RFC 3629: no
 * overlong forms, no surrogates, nothing past U+10FFFF), or 0. */
static size_t
json_utf8_len(const unsigned char *p)
{
    unsigned char c = p[0];
    size_t n = c < 0x80                 ? 1
               : c >= 0xc2 && c <= 0xdf ? 2
               : c >= 0xe0 && c <= 0xef ? 3
               : c >= 0xf0 && c <= 0xf4 ? 4
                                        : 0;
    unsigned char lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
    unsigned char hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;

    for (size_t i = 1; i < n; i++)
        if (p[i] < (i == 1 ? lo : 0x80) || p[i] > (i == 1 ? hi : 0xbf))
            return 0;
    return n;
}

/* s as a JSON string: quotes, backslashes and control bytes escaped, and
 * each byte that is not part of well-formed UTF-8 (an argument's, a
 * file name's) written as U+FFFD, so that the output is always JSON. */
static void
json_escaped(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p >= 0x80) {
            size_t n = json_utf8_len(p);
            if (n == 0) {
                fputs("\\ufffd", f);
                continue;
            }
            fwrite(p, 1, n, f);
            p += n - 1;
            continue;
        }
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
