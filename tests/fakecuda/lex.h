/* SPDX-License-Identifier: MIT */
/*
 * The PTX lexer (lex.c), for the PTX reader (ptx.c). Tokens are
 * directives and identifiers (letters, digits, '_', '$', '%', '.'),
 * "strings", and any other character alone. One lexer per parse.
 */
#ifndef FAKE_LEX_H
#define FAKE_LEX_H

#include <stddef.h>
#include <stdint.h>

/* A position in a text of n bytes and the token just read. */
typedef struct fake_lexer {
    const char *p;
    size_t n, pos;
    int line;
    const char *tok; /* the current token */
    size_t len;
    int tok_line;
} fake_lexer;

/* Whether c may be part of an identifier or a directive. */
int fake_lex_ident(char c);

/* Reads the next token into lx->tok and lx->len: 1, 0 at the end of the
 * text (len 0), -1 on an unterminated comment or string. */
int fake_lex_next(fake_lexer *lx);

/* Whether the current token is exactly s. */
int fake_lex_is(const fake_lexer *lx, const char *s);

/* The current token as a decimal number (at most 9 digits), or -1. */
long fake_lex_number(const fake_lexer *lx);

/* The size in bytes of a scalar type directive (".u32": 4), or 0. */
uint32_t fake_lex_type_size(const fake_lexer *lx);

#endif
