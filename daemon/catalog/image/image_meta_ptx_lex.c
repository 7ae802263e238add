/* SPDX-License-Identifier: MIT */
/*
 * The PTX reader's tokens and declarations (see image_meta_ptx.h): the
 * tokenizer, numbers and type directives, skipping statements, and
 * reading a variable's type and declarators, which module-scope variables
 * and an entry's .shared arrays share.
 */
#include "image_meta_ptx.h"

#include <string.h>

#include "common/status.h"

static int
ptx_ident(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_' || c == '$' || c == '%' ||
           c == '.';
}

/* The next token: a run of ptx_ident characters (an identifier, directive
 * or number), a string, or one other character. 1, or 0 at the end. */
int
cumod__ptx_next(cumod_ptx_rd *p)
{
    const char *s = p->s, *e;
    size_t i = p->lx.pos;

    for (;;) {
        while (i < p->n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' ||
                            s[i] == '\r' || s[i] == '\v' || s[i] == '\f'))
            i++;
        if (i + 1 < p->n && s[i] == '/' && s[i + 1] == '/') {
            while (i < p->n && s[i] != '\n')
                i++;
        } else if (i + 1 < p->n && s[i] == '/' && s[i + 1] == '*') {
            e = memmem(s + i + 2, p->n - i - 2, "*/", 2);
            i = e != NULL ? (size_t)(e - s) + 2 : p->n;
        } else {
            break;
        }
    }
    p->lx.at = i;
    p->lx.tok = s + i;
    if (i >= p->n) {
        p->lx.len = 0;
        p->lx.pos = p->n;
        return 0;
    }
    if (ptx_ident(s[i])) {
        while (i < p->n && ptx_ident(s[i]))
            i++;
    } else if (s[i] == '"') {
        for (i++; i < p->n && s[i] != '"'; i++)
            if (s[i] == '\\' && i + 1 < p->n)
                i++;
        i = i < p->n ? i + 1 : p->n;
    } else {
        i++;
    }
    p->lx.len = i - p->lx.at;
    p->lx.pos = i;
    return 1;
}

int
cumod__ptx_is(const cumod_ptx_rd *p, const char *t)
{
    size_t n = strlen(t);
    return p->lx.len == n && memcmp(p->lx.tok, t, n) == 0;
}

/* Whether the current token is a directive (".entry"). */
int
cumod__ptx_directive(const cumod_ptx_rd *p)
{
    return p->lx.len > 1 && p->lx.tok[0] == '.';
}

/* Whether the current token could name something. */
int
cumod__ptx_name(const cumod_ptx_rd *p)
{
    char c = p->lx.len > 0 ? p->lx.tok[0] : '\0';
    return ptx_ident(c) && c != '.' && !(c >= '0' && c <= '9');
}

cumod_err
cumod__ptx_bad(cumod_ptx_rd *p, const char *what)
{
    unsigned line = 1;
    size_t i;

    for (i = 0; i < p->lx.at && i < p->n; i++)
        line += p->s[i] == '\n';
    return cumod__errf(p->msg, p->msglen, CUMOD_EIMAGE,
                       "%s: line %u: %s (at '%.*s')", p->what, line, what,
                       (int)(p->lx.len > 40 ? 40 : p->lx.len), p->lx.tok);
}

/* The current token as an unsigned number (decimal or 0x hex, an optional
 * U suffix) below CUMOD_PTX_NUM_MAX; -1 if it is none. */
int
cumod__ptx_number(const cumod_ptx_rd *p, uint64_t *v)
{
    const char *t = p->lx.tok;
    size_t i = 0, n = p->lx.len;
    unsigned base = 10, d;

    if (n > 1 && (t[n - 1] == 'U' || t[n - 1] == 'u'))
        n--;
    if (n > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
        base = 16;
        i = 2;
    }
    if (i >= n)
        return -1;
    for (*v = 0; i < n; i++) {
        if (t[i] >= '0' && t[i] <= '9')
            d = (unsigned)(t[i] - '0');
        else if (base == 16 && t[i] >= 'a' && t[i] <= 'f')
            d = (unsigned)(t[i] - 'a' + 10);
        else if (base == 16 && t[i] >= 'A' && t[i] <= 'F')
            d = (unsigned)(t[i] - 'A' + 10);
        else
            return -1;
        if (*v >= CUMOD_PTX_NUM_MAX / base)
            return -1;
        *v = *v * base + d;
    }
    return 0;
}

/* The next token if it is `t` (consumed: 1); else leaves it unread (0). */
int
cumod__ptx_accept(cumod_ptx_rd *p, const char *t)
{
    cumod_ptx_lex save = p->lx;

    if (cumod__ptx_next(p) && cumod__ptx_is(p, t))
        return 1;
    p->lx = save;
    return 0;
}

/* The bytes of a fundamental type directive, 0 if the token is none. */
unsigned
cumod__ptx_type_size(const cumod_ptx_rd *p)
{
    static const struct {
        const char *name;
        unsigned size;
    } types[] = {
        {".b8", 1},  {".u8", 1},  {".s8", 1},    {".b16", 2},    {".u16", 2},
        {".s16", 2}, {".f16", 2}, {".bf16", 2},  {".b32", 4},    {".u32", 4},
        {".s32", 4}, {".f32", 4}, {".f16x2", 4}, {".bf16x2", 4}, {".b64", 8},
        {".u64", 8}, {".s64", 8}, {".f64", 8},   {".b128", 16},
    };
    size_t i;

    for (i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (cumod__ptx_is(p, types[i].name))
            return types[i].size;
    return 0;
}

unsigned
cumod__ptx_vector(const cumod_ptx_rd *p)
{
    if (cumod__ptx_is(p, ".v2"))
        return 2;
    if (cumod__ptx_is(p, ".v4"))
        return 4;
    if (cumod__ptx_is(p, ".v8"))
        return 8;
    return 0;
}

/* `.align N` where the current token is .align: N, a power of two. */
int
cumod__ptx_align(cumod_ptx_rd *p, uint64_t *a)
{
    return cumod__ptx_next(p) && cumod__ptx_number(p, a) == 0 && *a > 0 &&
                   (*a & (*a - 1)) == 0
               ? 0
               : -1;
}

/* Skips to the end of the statement the current token is in: to its ';'
 * at depth 0, or to the '}' that closes the braced body ending it. 0, or
 * -1 at the text's end. */
int
cumod__ptx_skip_statement(cumod_ptx_rd *p)
{
    long depth = 0;

    for (; p->lx.len > 0; cumod__ptx_next(p)) {
        if (cumod__ptx_is(p, "{") || cumod__ptx_is(p, "("))
            depth++;
        else if (cumod__ptx_is(p, ")") && depth > 0)
            depth--;
        else if (cumod__ptx_is(p, "}") && depth > 0 && --depth == 0)
            return 0;
        else if (depth == 0 && cumod__ptx_is(p, ";"))
            return 0;
    }
    return -1;
}

/* A parenthesized group, its '(' the current token: skipped to the ')'
 * that closes it, left current. 0, or -1 at the text's end. */
int
cumod__ptx_skip_parens(cumod_ptx_rd *p)
{
    long depth = 0;

    for (; p->lx.len > 0; cumod__ptx_next(p)) {
        if (cumod__ptx_is(p, "("))
            depth++;
        else if (cumod__ptx_is(p, ")") && --depth <= 0)
            return 0;
    }
    return -1;
}

/* An initializer, the '=' the current token: skipped to the ',' or ';'
 * that ends it, left current. Returns how many elements a braced list has
 * at its top level ("{1, 2, {3}}" has 3), 0 for anything else. */
static uint64_t
ptx_initializer(cumod_ptx_rd *p)
{
    uint64_t commas = 0;
    long depth = 0;
    int any = 0;

    while (cumod__ptx_next(p)) {
        if (cumod__ptx_is(p, "{") || cumod__ptx_is(p, "(")) {
            any |= depth >= 1;
            depth++;
        } else if (cumod__ptx_is(p, "}") || cumod__ptx_is(p, ")")) {
            depth--;
        } else if (depth <= 0 &&
                   (cumod__ptx_is(p, ",") || cumod__ptx_is(p, ";"))) {
            break;
        } else if (depth == 1 && cumod__ptx_is(p, ",")) {
            commas++;
        } else if (depth >= 1) {
            any = 1;
        }
    }
    return any ? commas + 1 : 0;
}

/* One declarator, its name the current token: NAME, dimensions, maybe an
 * initializer. *count is its elements (0 where an open first dimension has
 * no braced initializer to count). Leaves the ',' or ';' after it current;
 * -1 if malformed. */
int
cumod__ptx_declarator(cumod_ptx_rd *p, const char **name, size_t *len,
                      uint64_t *count)
{
    uint64_t dim, n;
    int open = 0;

    if (!cumod__ptx_name(p))
        return -1;
    *name = p->lx.tok;
    *len = p->lx.len;
    *count = 1;
    cumod__ptx_next(p);
    while (cumod__ptx_is(p, "[")) {
        cumod__ptx_next(p);
        if (cumod__ptx_is(p, "]")) {
            if (*count != 1 || open)
                return -1;
            open = 1;
        } else if (cumod__ptx_number(p, &dim) != 0 || !cumod__ptx_next(p) ||
                   !cumod__ptx_is(p, "]")) {
            return -1;
        } else {
            *count = cumod__ptx_mul(*count, dim);
        }
        cumod__ptx_next(p);
    }
    if (cumod__ptx_is(p, "=")) {
        n = ptx_initializer(p);
        if (open)
            *count = cumod__ptx_mul(*count, n);
    } else if (open) {
        *count = 0;
    }
    return cumod__ptx_is(p, ",") || cumod__ptx_is(p, ";") ? 0 : -1;
}

/* A variable's directives, the state space's the current token: .align,
 * a type, a vector width, .attribute(...). *elem 0 for opaque types
 * (.texref and the like). Leaves the first declarator current. */
int
cumod__ptx_var_type(cumod_ptx_rd *p, uint64_t *elem, uint64_t *align)
{
    uint64_t vec = 1;

    *elem = 0;
    *align = 0;
    while (cumod__ptx_next(p) && cumod__ptx_directive(p)) {
        if (cumod__ptx_is(p, ".align")) {
            if (cumod__ptx_align(p, align) != 0)
                return -1;
        } else if (cumod__ptx_type_size(p) != 0) {
            *elem = cumod__ptx_type_size(p);
        } else if (cumod__ptx_vector(p) != 0) {
            vec = cumod__ptx_vector(p);
        } else if (cumod__ptx_is(p, ".attribute")) {
            if (!cumod__ptx_accept(p, "(") || cumod__ptx_skip_parens(p) != 0)
                return -1;
        }
    }
    *elem *= vec;
    if (*align == 0)
        *align = *elem;
    return 0;
}
