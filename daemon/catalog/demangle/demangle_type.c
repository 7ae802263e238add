/* SPDX-License-Identifier: MIT */
/*
 * The demangler's parser, types: builtins, qualified, pointer, reference,
 * array and function types, class types by name, template parameters,
 * substitutions and pack expansions (the ABI's <type>). Every type but a
 * builtin, a bare substitution and a bare std abbreviation becomes a
 * substitution candidate here, after the types inside it.
 */
#include <stddef.h>

#include "demangle_internal.h"

/* clang-format off */
#define DM_B(t, lit) {.kind = CUMOD_DM_BUILTIN, .flags = (lit), .text = (t), \
    .len = sizeof(t) - 1}
/* clang-format on */

/* The one-letter builtin types, by letter; an entry without text is none. */
static const cumod_dm_node demangle_type_letters[26] = {
    ['a' - 'a'] = DM_B("signed char", CUMOD_DM_LIT_CAST),
    ['b' - 'a'] = DM_B("bool", CUMOD_DM_LIT_BOOL),
    ['c' - 'a'] = DM_B("char", CUMOD_DM_LIT_CAST),
    ['d' - 'a'] = DM_B("double", CUMOD_DM_LIT_NONE),
    ['e' - 'a'] = DM_B("long double", CUMOD_DM_LIT_NONE),
    ['f' - 'a'] = DM_B("float", CUMOD_DM_LIT_NONE),
    ['g' - 'a'] = DM_B("__float128", CUMOD_DM_LIT_NONE),
    ['h' - 'a'] = DM_B("unsigned char", CUMOD_DM_LIT_CAST),
    ['i' - 'a'] = DM_B("int", CUMOD_DM_LIT_INT),
    ['j' - 'a'] = DM_B("unsigned int", CUMOD_DM_LIT_INT),
    ['l' - 'a'] = DM_B("long", CUMOD_DM_LIT_INT),
    ['m' - 'a'] = DM_B("unsigned long", CUMOD_DM_LIT_INT),
    ['n' - 'a'] = DM_B("__int128", CUMOD_DM_LIT_INT),
    ['o' - 'a'] = DM_B("unsigned __int128", CUMOD_DM_LIT_INT),
    ['s' - 'a'] = DM_B("short", CUMOD_DM_LIT_INT),
    ['t' - 'a'] = DM_B("unsigned short", CUMOD_DM_LIT_INT),
    ['v' - 'a'] = DM_B("void", CUMOD_DM_LIT_NONE),
    ['w' - 'a'] = DM_B("wchar_t", CUMOD_DM_LIT_CAST),
    ['x' - 'a'] = DM_B("long long", CUMOD_DM_LIT_INT),
    ['y' - 'a'] = DM_B("unsigned long long", CUMOD_DM_LIT_INT),
    ['z' - 'a'] = DM_B("...", CUMOD_DM_LIT_NONE),
};

/* The builtins written D<letter>, by letter. */
static const cumod_dm_node demangle_type_dletters[26] = {
    ['a' - 'a'] = DM_B("auto", CUMOD_DM_LIT_NONE),
    ['c' - 'a'] = DM_B("decltype(auto)", CUMOD_DM_LIT_NONE),
    ['d' - 'a'] = DM_B("decimal64", CUMOD_DM_LIT_NONE),
    ['e' - 'a'] = DM_B("decimal128", CUMOD_DM_LIT_NONE),
    ['f' - 'a'] = DM_B("decimal32", CUMOD_DM_LIT_NONE),
    ['h' - 'a'] = DM_B("half", CUMOD_DM_LIT_NONE),
    ['i' - 'a'] = DM_B("char32_t", CUMOD_DM_LIT_CAST),
    ['n' - 'a'] = DM_B("decltype(nullptr)", CUMOD_DM_LIT_NONE),
    ['s' - 'a'] = DM_B("char16_t", CUMOD_DM_LIT_CAST),
    ['u' - 'a'] = DM_B("char8_t", CUMOD_DM_LIT_CAST),
};

/* DF<bits>_ (_FloatN) and DF16b (std::bfloat16_t). */
static const cumod_dm_node demangle_type_float16 =
    DM_B("_Float16", CUMOD_DM_LIT_NONE);
static const cumod_dm_node demangle_type_float32 =
    DM_B("_Float32", CUMOD_DM_LIT_NONE);
static const cumod_dm_node demangle_type_float64 =
    DM_B("_Float64", CUMOD_DM_LIT_NONE);
static const cumod_dm_node demangle_type_float128 =
    DM_B("_Float128", CUMOD_DM_LIT_NONE);
static const cumod_dm_node demangle_type_bfloat16 =
    DM_B("std::bfloat16_t", CUMOD_DM_LIT_NONE);

/* A list of types up to the 'E' or the end: function parameters. A lone
 * void is no parameter at all; void among others is refused. */
cumod_dm_node *
cumod__dm_params(cumod_dm_parser *ps)
{
    const cumod_dm_node *tvoid = &demangle_type_letters['v' - 'a'];
    cumod_dm_node *head, *tail = NULL;
    int has_void = 0;

    head = cumod__dm_new(ps, CUMOD_DM_ARGS, NULL, NULL);
    if (head == NULL)
        return NULL;
    while (ps->p < ps->end && cumod__dm_peek(ps, 0) != 'E') {
        const cumod_dm_node *t = cumod__dm_type(ps);

        if (cumod__dm_append(ps, head, &tail, t) != 0)
            return NULL;
        has_void |= t == tvoid;
    }
    if (head->count == 0 || (has_void && head->count > 1))
        return NULL;
    if (has_void) {
        head->a = NULL;
        head->count = 0;
    }
    return head;
}

/* <function-type> ::= F [Y] <return type> <parameters> E, at F. A
 * ref-qualifier before the E (only member functions have one) is refused. */
static const cumod_dm_node *
demangle_type_function(cumod_dm_parser *ps)
{
    const cumod_dm_node *ret;
    cumod_dm_node *params;

    ps->p++;
    if (cumod__dm_peek(ps, 0) == 'Y')
        ps->p++;
    ret = cumod__dm_type(ps);
    if (ret == NULL)
        return NULL;
    params = cumod__dm_params(ps);
    if (params == NULL || cumod__dm_eat(ps, 'E') != 0)
        return NULL;
    return cumod__dm_join(ps, CUMOD_DM_FUNCTION, ret, params);
}

/* <array-type> ::= A [<dimension>] _ <element type>, at A. Of dimensions
 * that are expressions only a template parameter is understood (a
 * template's T (*)[N]), kept in b. */
static const cumod_dm_node *
demangle_type_array(cumod_dm_parser *ps)
{
    const cumod_dm_node *tparam = NULL;
    const char *dim;
    cumod_dm_node *n;

    ps->p++;
    dim = ps->p;
    if (cumod__dm_peek(ps, 0) == 'T') {
        tparam = cumod__dm_tparam(ps);
        if (tparam == NULL)
            return NULL;
    }
    while (cumod__dm_digit(cumod__dm_peek(ps, 0)))
        ps->p++;
    if (cumod__dm_peek(ps, 0) != '_')
        return NULL;
    n = cumod__dm_new(ps, CUMOD_DM_ARRAY, NULL, tparam);
    if (n == NULL)
        return NULL;
    if (tparam == NULL) {
        n->text = dim;
        n->len = (size_t)(ps->p - dim);
    }
    ps->p++;
    n->a = cumod__dm_type(ps);
    return n->a ? n : NULL;
}

/* The builtins that start with D; D<p> is a pack expansion. */
static const cumod_dm_node *
demangle_type_d(cumod_dm_parser *ps)
{
    char c = cumod__dm_peek(ps, 1);
    size_t bits;

    if (c == 'p') {
        ps->p += 2;
        return cumod__dm_sub(
            ps, cumod__dm_unary(ps, CUMOD_DM_EXPANSION, cumod__dm_type(ps)));
    }
    if (c == 'F') {
        ps->p += 2;
        if (cumod__dm_number(ps, &bits) != 0)
            return NULL;
        if (bits == 16 && cumod__dm_eat(ps, 'b') == 0)
            return &demangle_type_bfloat16;
        if (cumod__dm_eat(ps, '_') != 0)
            return NULL;
        switch (bits) {
        case 16:
            return &demangle_type_float16;
        case 32:
            return &demangle_type_float32;
        case 64:
            return &demangle_type_float64;
        case 128:
            return &demangle_type_float128;
        default:
            return NULL;
        }
    }
    if (c < 'a' || c > 'z' || demangle_type_dletters[c - 'a'].text == NULL)
        return NULL;
    ps->p += 2;
    return &demangle_type_dletters[c - 'a'];
}

/* A substitution where a type is expected: a candidate again only when
 * template arguments follow it (then the template is). */
static const cumod_dm_node *
demangle_type_subst(cumod_dm_parser *ps)
{
    char c = cumod__dm_peek(ps, 1);
    const cumod_dm_node *n;

    if (c == '_' || cumod__dm_digit(c) || (c >= 'A' && c <= 'Z')) {
        n = cumod__dm_substitution(ps);
        if (n != NULL && cumod__dm_peek(ps, 0) == 'I')
            n = cumod__dm_sub(ps, cumod__dm_template(ps, n));
        return n;
    }
    /* St..., Sa..., Ss...: a name; a bare abbreviation is no candidate. */
    n = cumod__dm_name(ps);
    if (n != NULL && n->kind != CUMOD_DM_STD_ABBR)
        n = cumod__dm_sub(ps, n);
    return n;
}

static const cumod_dm_node *
demangle_type_any(cumod_dm_parser *ps)
{
    char c = cumod__dm_peek(ps, 0);
    const cumod_dm_node *n;
    cumod_dm_kind kind;
    cumod_dm_node *q;

    if (c == 'r' || c == 'V' || c == 'K') {
        q = cumod__dm_new(ps, CUMOD_DM_CV, NULL, NULL);
        if (q == NULL)
            return NULL;
        while ((c = cumod__dm_peek(ps, 0)) == 'r' || c == 'V' || c == 'K') {
            q->flags |= c == 'r'   ? CUMOD_DM_RESTRICT
                        : c == 'V' ? CUMOD_DM_VOLATILE
                                   : CUMOD_DM_CONST;
            ps->p++;
        }
        /* A cv-qualified function type is a member function's. */
        if (c == 'F')
            return NULL;
        q->a = cumod__dm_type(ps);
        return q->a ? cumod__dm_sub(ps, q) : NULL;
    }
    if (c >= 'a' && c <= 'z' && demangle_type_letters[c - 'a'].text) {
        ps->p++;
        return &demangle_type_letters[c - 'a'];
    }
    if (cumod__dm_digit(c))
        return cumod__dm_sub(ps, cumod__dm_name(ps));
    switch (c) {
    case 'u': /* a vendor's type, by name */
        ps->p++;
        return cumod__dm_sub(ps, cumod__dm_source_name(ps));
    case 'D':
        return demangle_type_d(ps);
    case 'N':
        return cumod__dm_sub(ps, cumod__dm_name(ps));
    case 'S':
        return demangle_type_subst(ps);
    case 'T':
        c = cumod__dm_peek(ps, 1);
        if (c == 's' || c == 'u' || c == 'e') { /* elaborated: struct X */
            ps->p += 2;
            return cumod__dm_sub(ps, cumod__dm_name(ps));
        }
        n = cumod__dm_tparam(ps);
        /* A template template parameter and its arguments. */
        if (n != NULL && cumod__dm_peek(ps, 0) == 'I')
            n = cumod__dm_template(ps, cumod__dm_sub(ps, n));
        return cumod__dm_sub(ps, n);
    case 'P':
    case 'R':
    case 'O':
        kind = c == 'P'   ? CUMOD_DM_POINTER
               : c == 'R' ? CUMOD_DM_LREF
                          : CUMOD_DM_RREF;
        ps->p++;
        n = cumod__dm_type(ps);
        return cumod__dm_sub(ps, cumod__dm_unary(ps, kind, n));
    case 'F':
        return cumod__dm_sub(ps, demangle_type_function(ps));
    case 'A':
        return cumod__dm_sub(ps, demangle_type_array(ps));
    default: /* M (member pointers), C, G, Dv... */
        return NULL;
    }
}

const cumod_dm_node *
cumod__dm_type(cumod_dm_parser *ps)
{
    const cumod_dm_node *n;

    if (ps->depth >= CUMOD_DM_PARSE_DEPTH)
        return NULL;
    ps->depth++;
    n = demangle_type_any(ps);
    ps->depth--;
    return n;
}
