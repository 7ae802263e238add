/* SPDX-License-Identifier: MIT */
/*
 * The demangler's printer: the tree of demangle_internal.h as CUDA source
 * writes it. A type prints in two halves, as a C declarator does: the left
 * ("void (*", "const float") and the right (")(int)", "[4]"), so that a
 * pointer to a function or an array wraps its '*' in parentheses where the
 * name would go.
 *
 * Template parameters are looked up in the function's template arguments
 * as they are printed; inside a pack expansion, one that names a pack takes
 * the element pr->pack. Hazards: the tree is a DAG that may refer to itself
 * through a template argument (T_ among the arguments it names) and may
 * print exponentially through shared nodes, so every visit counts against
 * pr->steps and pr->depth, and every byte against pr->budget; running out
 * of any fails the printer, and a failed printer prints nothing more.
 */
#include <stdlib.h>
#include <string.h>

#include "demangle_internal.h"

/* How many template parameters or qualifiers in a row one lookup sees
 * through before it gives up (a well-formed name needs two or three). */
#define DEMANGLE_PRINT_HOPS 64

static void demangle_print_left(cumod_dm_printer *pr, const cumod_dm_node *n);
static void demangle_print_right(cumod_dm_printer *pr, const cumod_dm_node *n);

void
cumod__dm_put(cumod_dm_printer *pr, const char *text, size_t len)
{
    if (pr->failed || len == 0)
        return;
    if (len > pr->budget) {
        pr->failed = 1;
        return;
    }
    /* Keep a byte for the NUL; len and len are bounded by the budget, so
     * nothing here overflows. */
    if (pr->cap - pr->len <= len) {
        size_t cap = pr->cap ? pr->cap : 64;
        char *p;

        while (cap - pr->len <= len)
            cap *= 2;
        p = realloc(pr->buf, cap);
        if (p == NULL) {
            pr->failed = 1;
            return;
        }
        pr->buf = p;
        pr->cap = cap;
    }
    memcpy(pr->buf + pr->len, text, len);
    pr->len += len;
    pr->budget -= len;
}

static void
demangle_print_str(cumod_dm_printer *pr, const char *s)
{
    cumod__dm_put(pr, s, strlen(s));
}

/* Drops what was printed since mark (an empty pack's separator). */
static void
demangle_print_undo(cumod_dm_printer *pr, size_t mark)
{
    pr->budget += pr->len - mark;
    pr->len = mark;
}

/* One more step and level, or -1 when the printer failed or ran out. */
static int
demangle_print_enter(cumod_dm_printer *pr)
{
    if (pr->failed)
        return -1;
    if (pr->steps == 0 || pr->depth >= CUMOD_DM_PRINT_DEPTH) {
        pr->failed = 1;
        return -1;
    }
    pr->steps--;
    pr->depth++;
    return 0;
}

/* Item i of an ARGS or PACK, or NULL. */
static const cumod_dm_node *
demangle_print_at(cumod_dm_printer *pr, const cumod_dm_node *list, size_t i)
{
    const cumod_dm_node *c;

    if (list == NULL || i >= list->count)
        return NULL;
    for (c = list->a; c != NULL && i > 0; i--, c = c->b) {
        if (pr->steps == 0)
            return NULL;
        pr->steps--;
    }
    return c ? c->a : NULL;
}

/* n with template parameters replaced by the arguments they name; NULL,
 * the printer failed, when one names nothing, or names a pack outside an
 * expansion (never printed as a list where one type is meant). */
static const cumod_dm_node *
demangle_print_resolve(cumod_dm_printer *pr, const cumod_dm_node *n)
{
    unsigned hops = 0;

    while (n != NULL && n->kind == CUMOD_DM_TPARAM) {
        if (++hops > DEMANGLE_PRINT_HOPS)
            n = NULL;
        else
            n = demangle_print_at(pr, pr->targs, n->count);
        if (n != NULL && n->kind == CUMOD_DM_PACK)
            n = pr->pack < 0 ? NULL
                             : demangle_print_at(pr, n, (size_t)pr->pack);
    }
    if (n == NULL)
        pr->failed = 1;
    return n;
}

/* The type n is through template parameters and qualifiers; the
 * qualifiers seen are or'ed into *quals. NULL when it does not resolve. */
static const cumod_dm_node *
demangle_print_strip(cumod_dm_printer *pr, const cumod_dm_node *n,
                     unsigned *quals)
{
    unsigned hops;

    for (hops = 0; hops < DEMANGLE_PRINT_HOPS; hops++) {
        n = demangle_print_resolve(pr, n);
        if (n == NULL || n->kind != CUMOD_DM_CV)
            return n;
        *quals |= n->flags;
        n = n->a;
    }
    pr->failed = 1;
    return NULL;
}

static int
demangle_print_is_declarator(cumod_dm_printer *pr, const cumod_dm_node *n)
{
    unsigned q = 0;

    n = demangle_print_strip(pr, n, &q);
    return n != NULL &&
           (n->kind == CUMOD_DM_ARRAY || n->kind == CUMOD_DM_FUNCTION);
}

/* What a pointer or reference n points at, into *kind the kind it is once
 * references to references collapse (T& && is T&). NULL on failure. */
static const cumod_dm_node *
demangle_print_pointee(cumod_dm_printer *pr, const cumod_dm_node *n,
                       cumod_dm_kind *kind)
{
    const cumod_dm_node *x = n->a;
    unsigned hops, q = 0;

    *kind = n->kind;
    if (n->kind == CUMOD_DM_POINTER)
        return x;
    for (hops = 0; hops < DEMANGLE_PRINT_HOPS; hops++) {
        const cumod_dm_node *d = demangle_print_strip(pr, x, &q);

        if (d == NULL)
            return NULL;
        if (d->kind != CUMOD_DM_LREF && d->kind != CUMOD_DM_RREF)
            return x;
        if (d->kind == CUMOD_DM_LREF)
            *kind = CUMOD_DM_LREF;
        x = d->a;
    }
    pr->failed = 1;
    return NULL;
}

/* The parenthesis a pointer to an array or function opens: "void (*",
 * "int* (*", and "void (*(*" with no space when it opens right inside
 * another one. */
static void
demangle_print_open(cumod_dm_printer *pr)
{
    size_t i = pr->len;

    while (i > 0 && (pr->buf[i - 1] == '*' || pr->buf[i - 1] == '&'))
        i--;
    demangle_print_str(pr, i > 0 && pr->buf[i - 1] == '(' ? "(" : " (");
}

static void
demangle_print_quals(cumod_dm_printer *pr, unsigned quals, int after)
{
    if (quals & CUMOD_DM_CONST)
        demangle_print_str(pr, after ? " const" : "const ");
    if (quals & CUMOD_DM_VOLATILE)
        demangle_print_str(pr, after ? " volatile" : "volatile ");
}

/* The items of an ARGS or PACK, ", " between; a pack flattens into the
 * list and an empty one leaves no separator behind. */
static void
demangle_print_list(cumod_dm_printer *pr, const cumod_dm_node *list)
{
    const cumod_dm_node *c;
    int any = 0;

    for (c = list->a; c != NULL && !pr->failed; c = c->b) {
        size_t mark = pr->len, start;

        if (any)
            demangle_print_str(pr, ", ");
        start = pr->len;
        cumod__dm_print(pr, c->a);
        if (pr->len == start)
            demangle_print_undo(pr, mark);
        else
            any = 1;
    }
}

/* The size of the first pack a template parameter in n names, or -1. An
 * expansion nested in n expands its own pack and is not looked into. */
static long
demangle_print_find_pack(cumod_dm_printer *pr, const cumod_dm_node *n)
{
    const cumod_dm_node *t;
    long found = -1;

    if (n == NULL || n->kind == CUMOD_DM_EXPANSION ||
        demangle_print_enter(pr) != 0)
        return -1;
    if (n->kind == CUMOD_DM_TPARAM) {
        t = demangle_print_at(pr, pr->targs, n->count);
        if (t != NULL && t->kind == CUMOD_DM_PACK)
            found = (long)t->count;
    } else {
        found = demangle_print_find_pack(pr, n->a);
        if (found < 0)
            found = demangle_print_find_pack(pr, n->b);
    }
    pr->depth--;
    return found;
}

long
cumod__dm_param_count(cumod_dm_printer *pr, const cumod_dm_node *n)
{
    long count;

    if (n->kind != CUMOD_DM_EXPANSION)
        return 1;
    count = demangle_print_find_pack(pr, n->a);
    if (count < 0)
        pr->failed = 1;
    return count;
}

int
cumod__dm_shape(cumod_dm_printer *pr, const cumod_dm_node *n,
                cumod_dm_kind *kind)
{
    unsigned q = 0;

    n = demangle_print_strip(pr, n, &q);
    if (n == NULL)
        return -1;
    *kind = n->kind;
    return 0;
}

/* A pack expansion outside a parameter list: its pattern once per element
 * of the pack, ", " between. */
static void
demangle_print_expansion(cumod_dm_printer *pr, const cumod_dm_node *n)
{
    long count = cumod__dm_param_count(pr, n), i, outer = pr->pack;
    int any = 0;

    for (i = 0; i < count && !pr->failed; i++) {
        size_t mark = pr->len, start;

        if (any)
            demangle_print_str(pr, ", ");
        start = pr->len;
        pr->pack = i;
        cumod__dm_print(pr, n->a);
        if (pr->len == start)
            demangle_print_undo(pr, mark);
        else
            any = 1;
    }
    pr->pack = outer;
}

/* "4", "-3", "true", "(char)97", "(ns::mode)1", "nullptr": the number
 * alone where its type goes without saying (int and friends, bool). */
static void
demangle_print_literal(cumod_dm_printer *pr, const cumod_dm_node *n)
{
    const cumod_dm_node *t = n->a;

    if (n->flags & CUMOD_DM_NULLPTR) {
        demangle_print_str(pr, "nullptr");
        return;
    }
    if (t->kind == CUMOD_DM_BUILTIN && t->flags == CUMOD_DM_LIT_BOOL &&
        !(n->flags & CUMOD_DM_NEG) && n->len == 1 &&
        (n->text[0] == '0' || n->text[0] == '1')) {
        demangle_print_str(pr, n->text[0] == '1' ? "true" : "false");
        return;
    }
    if (t->kind != CUMOD_DM_BUILTIN || t->flags != CUMOD_DM_LIT_INT) {
        demangle_print_str(pr, "(");
        cumod__dm_print(pr, t);
        demangle_print_str(pr, ")");
    }
    if (n->flags & CUMOD_DM_NEG)
        demangle_print_str(pr, "-");
    cumod__dm_put(pr, n->text, n->len);
}

static void
demangle_print_left(cumod_dm_printer *pr, const cumod_dm_node *n)
{
    const cumod_dm_node *r;
    cumod_dm_kind k;
    unsigned q = 0;

    if (demangle_print_enter(pr) != 0)
        return;
    switch (n->kind) {
    case CUMOD_DM_NAME:
    case CUMOD_DM_STD_ABBR:
    case CUMOD_DM_BUILTIN:
        cumod__dm_put(pr, n->text, n->len);
        break;
    case CUMOD_DM_QUAL:
        cumod__dm_print(pr, n->a);
        demangle_print_str(pr, "::");
        cumod__dm_print(pr, n->b);
        break;
    case CUMOD_DM_ABI_TAG:
        cumod__dm_print(pr, n->a);
        demangle_print_str(pr, "[abi:");
        cumod__dm_put(pr, n->text, n->len);
        demangle_print_str(pr, "]");
        break;
    case CUMOD_DM_TEMPLATE:
        cumod__dm_print(pr, n->a);
        demangle_print_str(pr, "<");
        demangle_print_list(pr, n->b);
        demangle_print_str(pr, ">");
        break;
    case CUMOD_DM_ARGS:
    case CUMOD_DM_PACK:
        demangle_print_list(pr, n);
        break;
    case CUMOD_DM_CV:
        /* const goes before what it qualifies, after a pointer's '*'. */
        r = demangle_print_strip(pr, n, &q);
        if (r == NULL)
            break;
        if (r->kind == CUMOD_DM_POINTER || r->kind == CUMOD_DM_LREF ||
            r->kind == CUMOD_DM_RREF) {
            demangle_print_left(pr, r);
            demangle_print_quals(pr, q, 1);
        } else {
            demangle_print_quals(pr, q, 0);
            demangle_print_left(pr, r);
        }
        break;
    case CUMOD_DM_POINTER:
    case CUMOD_DM_LREF:
    case CUMOD_DM_RREF:
        r = demangle_print_pointee(pr, n, &k);
        if (r == NULL)
            break;
        demangle_print_left(pr, r);
        if (demangle_print_is_declarator(pr, r))
            demangle_print_open(pr);
        demangle_print_str(pr, k == CUMOD_DM_POINTER ? "*"
                               : k == CUMOD_DM_LREF  ? "&"
                                                     : "&&");
        break;
    case CUMOD_DM_ARRAY:
    case CUMOD_DM_FUNCTION:
        demangle_print_left(pr, n->a);
        break;
    case CUMOD_DM_TPARAM:
        r = demangle_print_resolve(pr, n);
        if (r != NULL)
            demangle_print_left(pr, r);
        break;
    case CUMOD_DM_LITERAL:
        demangle_print_literal(pr, n);
        break;
    case CUMOD_DM_EXPANSION:
        demangle_print_expansion(pr, n);
        break;
    default: /* a CELL is never printed by itself */
        pr->failed = 1;
        break;
    }
    pr->depth--;
}

static void
demangle_print_right(cumod_dm_printer *pr, const cumod_dm_node *n)
{
    const cumod_dm_node *r;
    cumod_dm_kind k;
    unsigned q = 0;

    if (demangle_print_enter(pr) != 0)
        return;
    switch (n->kind) {
    case CUMOD_DM_CV:
        r = demangle_print_strip(pr, n, &q);
        if (r != NULL)
            demangle_print_right(pr, r);
        break;
    case CUMOD_DM_POINTER:
    case CUMOD_DM_LREF:
    case CUMOD_DM_RREF:
        r = demangle_print_pointee(pr, n, &k);
        if (r == NULL)
            break;
        if (demangle_print_is_declarator(pr, r))
            demangle_print_str(pr, ")");
        demangle_print_right(pr, r);
        break;
    case CUMOD_DM_ARRAY:
        demangle_print_str(pr, "[");
        if (n->b != NULL)
            cumod__dm_print(pr, n->b);
        else
            cumod__dm_put(pr, n->text, n->len);
        demangle_print_str(pr, "]");
        demangle_print_right(pr, n->a);
        break;
    case CUMOD_DM_FUNCTION:
        demangle_print_str(pr, "(");
        demangle_print_list(pr, n->b);
        demangle_print_str(pr, ")");
        demangle_print_right(pr, n->a);
        break;
    case CUMOD_DM_TPARAM:
        r = demangle_print_resolve(pr, n);
        if (r != NULL)
            demangle_print_right(pr, r);
        break;
    default: /* everything else is all left */
        break;
    }
    pr->depth--;
}

void
cumod__dm_print(cumod_dm_printer *pr, const cumod_dm_node *n)
{
    demangle_print_left(pr, n);
    demangle_print_right(pr, n);
}

char *
cumod__dm_take(cumod_dm_printer *pr)
{
    char *s;

    if (!pr->failed && pr->buf == NULL) {
        pr->buf = malloc(1);
        pr->cap = pr->buf ? 1 : 0;
        pr->failed = pr->buf == NULL;
    }
    if (pr->failed)
        return NULL;
    s = pr->buf;
    s[pr->len] = '\0';
    pr->buf = NULL;
    pr->len = pr->cap = 0;
    return s;
}

void
cumod__dm_printer_fini(cumod_dm_printer *pr)
{
    free(pr->buf);
    pr->buf = NULL;
    pr->len = pr->cap = 0;
}
