/* SPDX-License-Identifier: MIT */
/*
 * The PTX reader's parts (image_meta_ptx.c reads entries and variables,
 * image_meta_ptx_lex.c tokens and declarations): its state and the token
 * helpers they share. A token is a run of letters, digits, '_', '$', '%'
 * and '.' (an identifier, a directive, a number), a "string", or one other
 * character; comments are skipped. Every read is bounded by the text's
 * length. Pure; any thread.
 */
#ifndef CUMOD_IMAGE_META_PTX_H
#define CUMOD_IMAGE_META_PTX_H

#include <stddef.h>
#include <stdint.h>

#include "image_meta_internal.h"

/* Numbers and sizes saturate here: far above any PTX, far below overflow. */
#define CUMOD_PTX_NUM_MAX ((uint64_t)1 << 40)

typedef struct cumod_ptx_lex {
    size_t pos;      /* where the next token starts looking */
    const char *tok; /* the current token, tok[0, len); len 0 at the end */
    size_t len, at;  /* at: its offset, for line numbers */
} cumod_ptx_lex;

typedef struct cumod_ptx_rd {
    const char *s;
    size_t n;
    cumod_ptx_lex lx; /* saved and restored whole to look ahead */
    const char *what;
    cumod_imeta *m;
    uint64_t const_end; /* .const bytes laid out so far */
    int module_shared;  /* .shared outside every entry: shared unknown */
    char *msg;
    size_t msglen;
} cumod_ptx_rd;

/* The next token into p->lx: 1, or 0 at the end (len 0). */
int cumod__ptx_next(cumod_ptx_rd *p);

/* Whether the current token is exactly t. */
int cumod__ptx_is(const cumod_ptx_rd *p, const char *t);

/* Whether the current token is a directive (".entry"). */
int cumod__ptx_directive(const cumod_ptx_rd *p);

/* Whether the current token could name something. */
int cumod__ptx_name(const cumod_ptx_rd *p);

/* CUMOD_EIMAGE with "<what>: line N: <why> (at '<token>')" in p->msg. */
cumod_err cumod__ptx_bad(cumod_ptx_rd *p, const char *why);

/* The current token as an unsigned number (decimal or 0x hex, an optional
 * U suffix) below CUMOD_PTX_NUM_MAX: 0, or -1 if it is none. */
int cumod__ptx_number(const cumod_ptx_rd *p, uint64_t *v);

/* The next token if it is t (consumed: 1); else leaves it unread (0). */
int cumod__ptx_accept(cumod_ptx_rd *p, const char *t);

/* The bytes of a fundamental type directive (".u32" 4), or 0. */
unsigned cumod__ptx_type_size(const cumod_ptx_rd *p);

/* The width of a vector directive (".v4" 4), or 0. */
unsigned cumod__ptx_vector(const cumod_ptx_rd *p);

/* `.align N`, the current token .align: reads N, a power of two (0), or
 * -1. */
int cumod__ptx_align(cumod_ptx_rd *p, uint64_t *a);

/* Skips to the end of the statement the current token is in: to its ';'
 * at depth 0, or to the '}' that closes the braced body ending it. 0, or
 * -1 at the text's end. */
int cumod__ptx_skip_statement(cumod_ptx_rd *p);

/* A parenthesized group, its '(' the current token: skipped to the ')'
 * that closes it, left current. 0, or -1 at the text's end. */
int cumod__ptx_skip_parens(cumod_ptx_rd *p);

/* One declarator, its name the current token: NAME, dimensions, maybe an
 * initializer. *count is its elements (0 where an open first dimension has
 * no braced initializer to count). Leaves the ',' or ';' after it current;
 * -1 if malformed. */
int cumod__ptx_declarator(cumod_ptx_rd *p, const char **name, size_t *len,
                          uint64_t *count);

/* A variable's directives, the state space's the current token: .align,
 * a type, a vector width, .attribute(...). *elem is the element's bytes
 * (0 for opaque types: .texref and the like), *align its alignment.
 * Leaves the first declarator current; -1 if malformed. */
int cumod__ptx_var_type(cumod_ptx_rd *p, uint64_t *elem, uint64_t *align);

static inline uint64_t
cumod__ptx_align_up(uint64_t v, uint64_t a)
{
    return a > 1 ? (v + a - 1) / a * a : v;
}

static inline uint64_t
cumod__ptx_mul(uint64_t a, uint64_t b)
{
    return a != 0 && b > CUMOD_PTX_NUM_MAX / a ? CUMOD_PTX_NUM_MAX : a * b;
}

#endif
