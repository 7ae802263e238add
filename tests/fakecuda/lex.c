/* SPDX-License-Identifier: MIT */
/*
 * The PTX lexer: blanks and comments skipped, one token at a time, with
 * line numbers for ptxas-style messages. Every read stays inside [0, n).
 */
#include "lex.h"

#include <string.h>

int
fake_lex_ident(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_' || c == '$' || c == '%' ||
           c == '.';
}

/* Skips blanks and comments; 0, or -1 on an unterminated comment. */
static int
lex_skip(fake_lexer *lx)
{
    while (lx->pos < lx->n) {
        char c = lx->p[lx->pos];
        if (c == '\n') {
            lx->line++;
            lx->pos++;
        } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' ||
                   c == '\v') {
            lx->pos++;
        } else if (c == '/' && lx->pos + 1 < lx->n &&
                   lx->p[lx->pos + 1] == '/') {
            while (lx->pos < lx->n && lx->p[lx->pos] != '\n')
                lx->pos++;
        } else if (c == '/' && lx->pos + 1 < lx->n &&
                   lx->p[lx->pos + 1] == '*') {
            lx->pos += 2;
            while (lx->pos + 1 < lx->n &&
                   !(lx->p[lx->pos] == '*' && lx->p[lx->pos + 1] == '/'))
                lx->line += lx->p[lx->pos++] == '\n';
            if (lx->pos + 1 >= lx->n)
                return -1;
            lx->pos += 2;
        } else {
            break;
        }
    }
    return 0;
}

int
fake_lex_next(fake_lexer *lx)
{
    if (lex_skip(lx) != 0)
        return -1;
    lx->tok = lx->p + lx->pos;
    lx->tok_line = lx->line;
    if (lx->pos >= lx->n) {
        lx->len = 0;
        return 0;
    }
    size_t start = lx->pos;
    char c = lx->p[lx->pos++];
    if (c == '"') {
        while (lx->pos < lx->n && lx->p[lx->pos] != '"' &&
               lx->p[lx->pos] != '\n')
            lx->pos += lx->p[lx->pos] == '\\' && lx->pos + 1 < lx->n ? 2 : 1;
        if (lx->pos >= lx->n || lx->p[lx->pos] != '"')
            return -1;
        lx->pos++;
    } else if (fake_lex_ident(c)) {
        while (lx->pos < lx->n && fake_lex_ident(lx->p[lx->pos]))
            lx->pos++;
    }
    lx->len = lx->pos - start;
    return 1;
}

int
fake_lex_is(const fake_lexer *lx, const char *s)
{
    return lx->len == strlen(s) && memcmp(lx->tok, s, lx->len) == 0;
}

long
fake_lex_number(const fake_lexer *lx)
{
    if (lx->len == 0 || lx->len > 9)
        return -1;
    long v = 0;
    for (size_t i = 0; i < lx->len; i++) {
        if (lx->tok[i] < '0' || lx->tok[i] > '9')
            return -1;
        v = v * 10 + (lx->tok[i] - '0');
    }
    return v;
}

uint32_t
fake_lex_type_size(const fake_lexer *lx)
{
    static const struct {
        const char *name;
        uint32_t size;
    } types[] = {
        {".b8", 1},     {".s8", 1},         {".u8", 1},      {".b16", 2},
        {".s16", 2},    {".u16", 2},        {".f16", 2},     {".bf16", 2},
        {".b32", 4},    {".s32", 4},        {".u32", 4},     {".f32", 4},
        {".f16x2", 4},  {".bf16x2", 4},     {".tf32", 4},    {".b64", 8},
        {".s64", 8},    {".u64", 8},        {".f64", 8},     {".b128", 16},
        {".texref", 8}, {".samplerref", 8}, {".surfref", 8},
    };
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (fake_lex_is(lx, types[i].name))
            return types[i].size;
    return 0;
}
