/* SPDX-License-Identifier: MIT */
/*
 * The demangler's nodes: the arena's allocation, the substitution table,
 * lists, and the leaves of the grammar (numbers, source names) that the
 * parser (demangle_parse.c) and the types (demangle_type.c) both build
 * with. A leaf: it parses no name or type.
 */
#include <stdlib.h>
#include <string.h>

#include "demangle_internal.h"

cumod_dm_node *
cumod__dm_new(cumod_dm_parser *ps, cumod_dm_kind kind, const cumod_dm_node *a,
              const cumod_dm_node *b)
{
    cumod_dm_node *n;

    if (ps->nnodes == ps->cap)
        return NULL;
    n = &ps->nodes[ps->nnodes++];
    memset(n, 0, sizeof(*n));
    n->kind = kind;
    n->a = a;
    n->b = b;
    return n;
}

/* A node made of a and b, or NULL when either is missing (so that a failed
 * parse below falls through the caller's return). */
cumod_dm_node *
cumod__dm_join(cumod_dm_parser *ps, cumod_dm_kind kind, const cumod_dm_node *a,
               const cumod_dm_node *b)
{
    if (a == NULL || b == NULL)
        return NULL;
    return cumod__dm_new(ps, kind, a, b);
}

/* A node of one child, or NULL when the child is missing. */
cumod_dm_node *
cumod__dm_unary(cumod_dm_parser *ps, cumod_dm_kind kind, const cumod_dm_node *a)
{
    if (a == NULL)
        return NULL;
    return cumod__dm_new(ps, kind, a, NULL);
}

/* Makes n the next substitution candidate and passes it on. */
const cumod_dm_node *
cumod__dm_sub(cumod_dm_parser *ps, const cumod_dm_node *n)
{
    if (n == NULL || ps->nsubs == ps->cap)
        return NULL;
    ps->subs[ps->nsubs++] = n;
    return n;
}

/* A decimal number below 10^9 (so it fits every use), no leading zero
 * unless it is 0 itself. */
int
cumod__dm_number(cumod_dm_parser *ps, size_t *out)
{
    size_t v = 0, nd = 0;

    while (cumod__dm_digit(cumod__dm_peek(ps, 0))) {
        if (nd == 9 || (nd == 1 && v == 0))
            return -1;
        v = v * 10 + (size_t)(*ps->p - '0');
        ps->p++;
        nd++;
    }
    if (nd == 0)
        return -1;
    *out = v;
    return 0;
}

/* <source-name> ::= <length> <identifier>. Only identifier characters are
 * accepted: the text reaches logs and error messages as it is. */
const cumod_dm_node *
cumod__dm_source_name(cumod_dm_parser *ps)
{
    static const char anon[] = "(anonymous namespace)";
    cumod_dm_node *n;
    size_t len, i;

    if (cumod__dm_number(ps, &len) != 0 || len == 0 ||
        len > (size_t)(ps->end - ps->p))
        return NULL;
    for (i = 0; i < len; i++) {
        char c = ps->p[i];
        if (!(c == '_' || c == '$' || cumod__dm_digit(c) ||
              (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
            return NULL;
    }
    n = cumod__dm_new(ps, CUMOD_DM_NAME, NULL, NULL);
    if (n == NULL)
        return NULL;
    /* GCC and nvcc name an anonymous namespace _GLOBAL__N_<something>
     * (libiberty's test: "_GLOBAL_", one of "._$", then 'N'). */
    if (len >= 10 && strncmp(ps->p, "_GLOBAL_", 8) == 0 &&
        (ps->p[8] == '.' || ps->p[8] == '_' || ps->p[8] == '$') &&
        ps->p[9] == 'N') {
        n->text = anon;
        n->len = sizeof(anon) - 1;
    } else {
        n->text = ps->p;
        n->len = len;
    }
    ps->p += len;
    return n;
}

int
cumod__dm_append(cumod_dm_parser *ps, cumod_dm_node *head, cumod_dm_node **tail,
                 const cumod_dm_node *item)
{
    cumod_dm_node *cell;

    cell = item ? cumod__dm_new(ps, CUMOD_DM_CELL, item, NULL) : NULL;
    if (cell == NULL)
        return -1;
    if (*tail == NULL)
        head->a = cell;
    else
        (*tail)->b = cell;
    *tail = cell;
    head->count++;
    return 0;
}
