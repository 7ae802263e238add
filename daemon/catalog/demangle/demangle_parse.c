/* SPDX-License-Identifier: MIT */
/*
 * The demangler's parser, names and the whole: a mangled function name
 * (Itanium C++ ABI, the subset nvcc emits for kernels) into the tree of
 * demangle_internal.h. Types are demangle_type.c's, nodes demangle_node.c's.
 *
 * It follows the ABI's grammar and, where the ABI leaves room, what
 * libiberty's cp-demangle.c (c++filt) does, so that substitutions number
 * the same way: every prefix of a nested name but the last is a candidate,
 * an unscoped template name is one when template arguments follow it, and
 * every type but a builtin, a bare substitution and a bare std abbreviation
 * is one (a cv-qualified type once, with all its qualifiers).
 *
 * Hazards: the input is hostile. Every read goes through cumod__dm_peek
 * (which answers '\0' at the end), every recursion through a depth check,
 * every node through the arena's fixed capacity, and every number is
 * bounded before it is used as a length or an index.
 */
#include <stdlib.h>
#include <string.h>

#include "demangle_internal.h"

static cumod_dm_node *demangle_parse_args(cumod_dm_parser *ps,
                                          cumod_dm_kind kind);

/* <unqualified-name>: only source names (after an 'L' for internal linkage)
 * with their ABI tags. Operators, constructors, destructors, unnamed types
 * and lambdas are refused here. */
static const cumod_dm_node *
demangle_parse_unqualified(cumod_dm_parser *ps)
{
    const cumod_dm_node *n;

    if (cumod__dm_peek(ps, 0) == 'L')
        ps->p++;
    if (!cumod__dm_digit(cumod__dm_peek(ps, 0)))
        return NULL;
    n = cumod__dm_source_name(ps);
    while (n != NULL && cumod__dm_peek(ps, 0) == 'B') {
        const cumod_dm_node *tag;
        cumod_dm_node *t;

        ps->p++;
        tag = cumod__dm_source_name(ps);
        t = cumod__dm_join(ps, CUMOD_DM_ABI_TAG, n, tag);
        if (t != NULL) {
            t->text = tag->text;
            t->len = tag->len;
        }
        n = t;
    }
    return n;
}

static const cumod_dm_node *
demangle_parse_std(cumod_dm_parser *ps, cumod_dm_kind kind, const char *text)
{
    cumod_dm_node *n = cumod__dm_new(ps, kind, NULL, NULL);

    if (n != NULL) {
        n->text = text;
        n->len = strlen(text);
    }
    return n;
}

/* <substitution> ::= S_ | S <seq-id> _ | St | Sa | Sb | Ss | Si | So | Sd,
 * at 'S'. St gives the name "std", which the caller qualifies. */
const cumod_dm_node *
cumod__dm_substitution(cumod_dm_parser *ps)
{
    char c = cumod__dm_peek(ps, 1);
    size_t id = 0;

    if (c == '\0')
        return NULL;
    ps->p += 2;
    switch (c) {
    case 't':
        return demangle_parse_std(ps, CUMOD_DM_NAME, "std");
    case 'a':
        return demangle_parse_std(ps, CUMOD_DM_STD_ABBR, "std::allocator");
    case 'b':
        return demangle_parse_std(ps, CUMOD_DM_STD_ABBR, "std::basic_string");
    case 's':
        return demangle_parse_std(ps, CUMOD_DM_STD_ABBR, "std::string");
    case 'i':
        return demangle_parse_std(ps, CUMOD_DM_STD_ABBR, "std::istream");
    case 'o':
        return demangle_parse_std(ps, CUMOD_DM_STD_ABBR, "std::ostream");
    case 'd':
        return demangle_parse_std(ps, CUMOD_DM_STD_ABBR, "std::iostream");
    case '_':
        return ps->nsubs > 0 ? ps->subs[0] : NULL;
    default:
        break;
    }
    /* <seq-id>: base 36 in digits and capitals, numbering from S0_ = 1. */
    ps->p--; /* back to the first character of the seq-id */
    for (;;) {
        char d = cumod__dm_peek(ps, 0);
        size_t v;

        if (cumod__dm_digit(d))
            v = (size_t)(d - '0');
        else if (d >= 'A' && d <= 'Z')
            v = (size_t)(d - 'A') + 10;
        else
            break;
        id = id * 36 + v;
        if (id >= ps->nsubs)
            return NULL;
        ps->p++;
    }
    if (cumod__dm_eat(ps, '_') != 0 || id + 1 >= ps->nsubs)
        return NULL;
    return ps->subs[id + 1];
}

/* <template-param> ::= T_ | T <number> _, at 'T'. */
const cumod_dm_node *
cumod__dm_tparam(cumod_dm_parser *ps)
{
    cumod_dm_node *n;
    size_t idx = 0;

    ps->p++;
    if (cumod__dm_peek(ps, 0) != '_') {
        if (cumod__dm_number(ps, &idx) != 0)
            return NULL;
        idx++;
    }
    if (cumod__dm_eat(ps, '_') != 0)
        return NULL;
    n = cumod__dm_new(ps, CUMOD_DM_TPARAM, NULL, NULL);
    if (n != NULL)
        n->count = idx;
    return n;
}

/* <expr-primary> ::= L <type> <value> E, at 'L': integers, bools,
 * characters, enumerators and nullptr. */
static const cumod_dm_node *
demangle_parse_literal(cumod_dm_parser *ps)
{
    const cumod_dm_node *type;
    cumod_dm_node *n;
    const char *digits;
    unsigned flags = 0;

    ps->p++;
    if (cumod__dm_peek(ps, 0) == 'D' && cumod__dm_peek(ps, 1) == 'n') {
        ps->p += 2;
        if (cumod__dm_peek(ps, 0) == '0')
            ps->p++;
        if (cumod__dm_eat(ps, 'E') != 0)
            return NULL;
        n = cumod__dm_new(ps, CUMOD_DM_LITERAL, NULL, NULL);
        if (n != NULL)
            n->flags = CUMOD_DM_NULLPTR;
        return n;
    }
    /* L_Z: an entity's address; not understood. */
    if (cumod__dm_peek(ps, 0) == '_')
        return NULL;
    type = cumod__dm_type(ps);
    if (type == NULL)
        return NULL;
    if (type->kind == CUMOD_DM_BUILTIN) {
        if (type->flags == CUMOD_DM_LIT_NONE)
            return NULL;
    } else if (type->kind != CUMOD_DM_NAME && type->kind != CUMOD_DM_QUAL &&
               type->kind != CUMOD_DM_TEMPLATE &&
               type->kind != CUMOD_DM_ABI_TAG) {
        return NULL;
    }
    if (cumod__dm_peek(ps, 0) == 'n') {
        flags = CUMOD_DM_NEG;
        ps->p++;
    }
    digits = ps->p;
    while (cumod__dm_digit(cumod__dm_peek(ps, 0)))
        ps->p++;
    if (ps->p == digits || cumod__dm_eat(ps, 'E') != 0)
        return NULL;
    n = cumod__dm_new(ps, CUMOD_DM_LITERAL, type, NULL);
    if (n != NULL) {
        n->flags = flags;
        n->text = digits;
        n->len = (size_t)(ps->p - 1 - digits);
    }
    return n;
}

/* <template-arg> ::= <type> | L...E | X <expression> E | J <arg>* E. Of
 * expressions only a bare template parameter or literal is understood. */
static const cumod_dm_node *
demangle_parse_arg(cumod_dm_parser *ps)
{
    const cumod_dm_node *n = NULL;

    if (ps->depth >= CUMOD_DM_PARSE_DEPTH)
        return NULL;
    ps->depth++;
    switch (cumod__dm_peek(ps, 0)) {
    case 'L':
        n = demangle_parse_literal(ps);
        break;
    case 'X':
        ps->p++;
        if (cumod__dm_peek(ps, 0) == 'T')
            n = cumod__dm_tparam(ps);
        else if (cumod__dm_peek(ps, 0) == 'L')
            n = demangle_parse_literal(ps);
        if (cumod__dm_eat(ps, 'E') != 0)
            n = NULL;
        break;
    case 'J':
        n = demangle_parse_args(ps, CUMOD_DM_PACK);
        break;
    default:
        n = cumod__dm_type(ps);
        break;
    }
    ps->depth--;
    return n;
}

/* <template-args> ::= I <arg>+ E, or a pack J <arg>* E; at the I or J. */
static cumod_dm_node *
demangle_parse_args(cumod_dm_parser *ps, cumod_dm_kind kind)
{
    cumod_dm_node *head, *tail = NULL;

    ps->p++;
    head = cumod__dm_new(ps, kind, NULL, NULL);
    if (head == NULL || (kind == CUMOD_DM_ARGS && cumod__dm_peek(ps, 0) == 'E'))
        return NULL;
    while (cumod__dm_peek(ps, 0) != 'E') {
        const cumod_dm_node *arg = demangle_parse_arg(ps);

        if (cumod__dm_append(ps, head, &tail, arg) != 0)
            return NULL;
    }
    ps->p++;
    return head;
}

const cumod_dm_node *
cumod__dm_template(cumod_dm_parser *ps, const cumod_dm_node *n)
{
    if (n == NULL || ps->depth >= CUMOD_DM_PARSE_DEPTH)
        return NULL;
    ps->depth++;
    n = cumod__dm_join(ps, CUMOD_DM_TEMPLATE, n,
                       demangle_parse_args(ps, CUMOD_DM_ARGS));
    ps->depth--;
    return n;
}

/* <nested-name> ::= N <prefix> <unqualified-name> E, at the N. Every prefix
 * but one that came from a substitution and but the whole name is a
 * substitution candidate. Member functions (N followed by cv- or
 * ref-qualifiers) are refused: kernels are never members. */
static const cumod_dm_node *
demangle_parse_nested(cumod_dm_parser *ps)
{
    const cumod_dm_node *ret = NULL;

    ps->p++;
    for (;;) {
        char c = cumod__dm_peek(ps, 0);

        if (c == 'E') {
            ps->p++;
            return ret;
        }
        if (cumod__dm_digit(c) || c == 'L')
            ret = ret ? cumod__dm_join(ps, CUMOD_DM_QUAL, ret,
                                       demangle_parse_unqualified(ps))
                      : demangle_parse_unqualified(ps);
        else if (c == 'S' && ret == NULL)
            ret = cumod__dm_substitution(ps);
        else if (c == 'I' && ret != NULL)
            ret = cumod__dm_template(ps, ret);
        else if (c == 'T' && ret == NULL)
            ret = cumod__dm_tparam(ps);
        else
            return NULL;
        if (ret == NULL)
            return NULL;
        if (c != 'S' && cumod__dm_peek(ps, 0) != 'E' &&
            cumod__dm_sub(ps, ret) == NULL)
            return NULL;
    }
}

/* <name>: nested, unscoped (St or not), or an unscoped template name and
 * its arguments; the unscoped template name is a substitution candidate
 * unless it came from one. Local names (Z) are refused. */
const cumod_dm_node *
cumod__dm_name(cumod_dm_parser *ps)
{
    const cumod_dm_node *n;
    int from_sub = 0;

    switch (cumod__dm_peek(ps, 0)) {
    case 'N':
        return demangle_parse_nested(ps);
    case 'S':
        if (cumod__dm_peek(ps, 1) == 't') {
            n = cumod__dm_substitution(ps);
            n = cumod__dm_join(ps, CUMOD_DM_QUAL, n,
                               demangle_parse_unqualified(ps));
        } else {
            n = cumod__dm_substitution(ps);
            from_sub = 1;
        }
        break;
    default:
        n = demangle_parse_unqualified(ps);
        break;
    }
    if (n != NULL && cumod__dm_peek(ps, 0) == 'I') {
        if (!from_sub && cumod__dm_sub(ps, n) == NULL)
            return NULL;
        n = cumod__dm_template(ps, n);
    }
    return n;
}

int
cumod__dm_parse(cumod_dm_parser *ps, const char *mangled, size_t len,
                cumod_dm_tree *tree)
{
    const cumod_dm_node *name, *targs = NULL;
    cumod_dm_node *params;

    memset(ps, 0, sizeof(*ps));
    if (len < 3 || len > CUMOD_DM_MANGLED_MAX || strncmp(mangled, "_Z", 2))
        return -1;
    /* No production makes more than three nodes of three bytes ("IiE":
     * the list, its cell, the template) and most make one or none a byte,
     * so a name that fills the arena is no name; the substitution table
     * never holds more entries than there are nodes and bytes. */
    ps->cap = 3 * len + 16;
    ps->nodes = calloc(ps->cap, sizeof(*ps->nodes));
    ps->subs = calloc(ps->cap, sizeof(*ps->subs));
    if (ps->nodes == NULL || ps->subs == NULL)
        return -1;
    ps->p = mangled + 2;
    ps->end = mangled + len;

    name = cumod__dm_name(ps);
    if (name == NULL || ps->p == ps->end)
        return -1; /* a name not understood, or data */
    /* A template function's mangled name carries its return type. */
    if (name->kind == CUMOD_DM_TEMPLATE) {
        targs = name->b;
        if (cumod__dm_type(ps) == NULL)
            return -1;
    }
    params = cumod__dm_params(ps);
    if (params == NULL || ps->p != ps->end)
        return -1;
    tree->name = name;
    tree->targs = targs;
    tree->params = params;
    return 0;
}

void
cumod__dm_parser_fini(cumod_dm_parser *ps)
{
    free(ps->nodes);
    free(ps->subs);
    memset(ps, 0, sizeof(*ps));
}
