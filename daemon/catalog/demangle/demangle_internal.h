/* SPDX-License-Identifier: MIT */
/*
 * The demangler's tree, shared by its three files: demangle_parse.c builds
 * it from a mangled name, demangle_print.c prints it, demangle.c owns the
 * call. A tree lives in one arena for the length of one cumod__demangle
 * call; its names point into the mangled string, which outlives it.
 *
 * The tree is a DAG: a substitution (S_, S0_...) points back at a node
 * parsed earlier, and a template parameter (T_) is resolved at print time
 * against the function's template arguments. Printing therefore bounds its
 * own depth and steps (a DAG can print exponentially) as well as its output.
 */
#ifndef CUMOD_DEMANGLE_INTERNAL_H
#define CUMOD_DEMANGLE_INTERNAL_H

#include <stddef.h>

#include "demangle.h"

/* How deep the parser may recurse (types in types, argument lists in
 * argument lists), and how deep printing may go through the DAG. */
#define CUMOD_DM_PARSE_DEPTH 256
#define CUMOD_DM_PRINT_DEPTH 512
/* How many nodes printing may visit in one call (a list walk counts a step
 * a cell). It bounds a call's time to a few milliseconds; the longest CUB
 * names nvcc 13.0 writes take under 2,000. */
#define CUMOD_DM_PRINT_STEPS (1ul << 20)

typedef enum cumod_dm_kind {
    CUMOD_DM_NAME,      /* text: an identifier, or "std" */
    CUMOD_DM_STD_ABBR,  /* text: Sa, Sb, Ss, Si, So, Sd ("std::allocator") */
    CUMOD_DM_BUILTIN,   /* text; code the letter(s) it came from */
    CUMOD_DM_QUAL,      /* a::b */
    CUMOD_DM_ABI_TAG,   /* a[abi:text] */
    CUMOD_DM_TEMPLATE,  /* a<b>, b an ARGS */
    CUMOD_DM_ARGS,      /* count cells from a: template arguments */
    CUMOD_DM_PACK,      /* count cells from a: an argument pack (J...E) */
    CUMOD_DM_CELL,      /* a the item, b the next CELL or NULL */
    CUMOD_DM_CV,        /* flags CUMOD_DM_CONST... applied to a */
    CUMOD_DM_POINTER,   /* a* */
    CUMOD_DM_LREF,      /* a& */
    CUMOD_DM_RREF,      /* a&& */
    CUMOD_DM_ARRAY,     /* a[text], or a[b] for a template parameter b */
    CUMOD_DM_FUNCTION,  /* a the return type, b an ARGS of parameters */
    CUMOD_DM_TPARAM,    /* the function's template argument number count */
    CUMOD_DM_LITERAL,   /* a the type, text the digits, flags NEG/NULLPTR */
    CUMOD_DM_EXPANSION, /* a... (Dp): a printed once per pack element */
} cumod_dm_kind;

/* CV flags. Restrict is parsed and never printed. */
#define CUMOD_DM_CONST 1u
#define CUMOD_DM_VOLATILE 2u
#define CUMOD_DM_RESTRICT 4u

/* LITERAL flags. */
#define CUMOD_DM_NEG 1u
#define CUMOD_DM_NULLPTR 2u

/* How a BUILTIN type's literals print (its flags). */
#define CUMOD_DM_LIT_NONE 0u /* no literal of this type is understood */
#define CUMOD_DM_LIT_INT 1u  /* the number alone: "-3" */
#define CUMOD_DM_LIT_BOOL 2u /* "true", "false" */
#define CUMOD_DM_LIT_CAST 3u /* with a cast: "(char)97" */

typedef struct cumod_dm_node cumod_dm_node;
struct cumod_dm_node {
    cumod_dm_kind kind;
    unsigned flags;
    const char *text; /* not NUL-terminated: len bytes */
    size_t len;
    size_t count; /* ARGS, PACK: cells; TPARAM: index */
    const cumod_dm_node *a, *b;
};

/* A parsed function name. */
typedef struct cumod_dm_tree {
    const cumod_dm_node *name;
    /* The ARGS that T_, T0_... refer to: the function's own template
     * arguments, or NULL for a function that is no template. */
    const cumod_dm_node *targs;
    /* The parameter types as parsed (an EXPANSION stands for as many
     * parameters as its pack has elements); an ARGS with no cells for
     * "(void)". */
    const cumod_dm_node *params;
} cumod_dm_tree;

/* The parser's arena; cumod__dm_parser_fini frees it. */
typedef struct cumod_dm_parser {
    const char *p, *end;
    cumod_dm_node *nodes;
    size_t nnodes, cap;
    const cumod_dm_node **subs;
    size_t nsubs;
    unsigned depth;
} cumod_dm_parser;

/* Parses mangled[0..len) into *tree, whose nodes live in ps until
 * cumod__dm_parser_fini. 0 on success; -1 for a name not understood or out
 * of memory. Either way ps holds what cumod__dm_parser_fini frees. */
int cumod__dm_parse(cumod_dm_parser *ps, const char *mangled, size_t len,
                    cumod_dm_tree *tree);
void cumod__dm_parser_fini(cumod_dm_parser *ps);

/* The parser's parts, shared by demangle_parse.c and demangle_type.c. Each
 * parses one production at ps->p and returns its node, or NULL (leaving
 * ps->p anywhere) when the input is not that production, is not understood,
 * or the arena is full. */

/* The character k places ahead, '\0' at and past the end. */
static inline char
cumod__dm_peek(const cumod_dm_parser *ps, size_t k)
{
    return (size_t)(ps->end - ps->p) > k ? ps->p[k] : '\0';
}

/* Steps over c: 0, or -1 when c is not next. */
static inline int
cumod__dm_eat(cumod_dm_parser *ps, char c)
{
    if (cumod__dm_peek(ps, 0) != c)
        return -1;
    ps->p++;
    return 0;
}

static inline int
cumod__dm_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* demangle_node.c */
/* A zeroed node of the arena, or NULL when it is full. */
cumod_dm_node *cumod__dm_new(cumod_dm_parser *ps, cumod_dm_kind kind,
                             const cumod_dm_node *a, const cumod_dm_node *b);
/* A node of a and b; NULL when either is NULL. */
cumod_dm_node *cumod__dm_join(cumod_dm_parser *ps, cumod_dm_kind kind,
                              const cumod_dm_node *a, const cumod_dm_node *b);
/* A node of a; NULL when a is NULL. */
cumod_dm_node *cumod__dm_unary(cumod_dm_parser *ps, cumod_dm_kind kind,
                               const cumod_dm_node *a);
/* Makes n the next substitution candidate and returns it; NULL when n is
 * NULL or the table is full (which must fail the parse: a skipped
 * candidate would renumber every later one). */
const cumod_dm_node *cumod__dm_sub(cumod_dm_parser *ps, const cumod_dm_node *n);
/* A decimal number below 10^9 without leading zeros: 0, or -1. */
int cumod__dm_number(cumod_dm_parser *ps, size_t *out);
const cumod_dm_node *cumod__dm_source_name(cumod_dm_parser *ps);
/* Appends item to the list head (its first cell in head->a, each next in
 * b), *tail its last cell (NULL: none yet). 0, or -1 when item is NULL or
 * the arena is full. */
int cumod__dm_append(cumod_dm_parser *ps, cumod_dm_node *head,
                     cumod_dm_node **tail, const cumod_dm_node *item);
/* demangle_parse.c, demangle_type.c */
/* At an 'S'. */
const cumod_dm_node *cumod__dm_substitution(cumod_dm_parser *ps);
/* At a 'T'. */
const cumod_dm_node *cumod__dm_tparam(cumod_dm_parser *ps);
/* n and the template arguments at the 'I' that follows. */
const cumod_dm_node *cumod__dm_template(cumod_dm_parser *ps,
                                        const cumod_dm_node *n);
const cumod_dm_node *cumod__dm_name(cumod_dm_parser *ps);
const cumod_dm_node *cumod__dm_type(cumod_dm_parser *ps);
/* Types up to an 'E' or the end: an ARGS, empty for a lone void. */
cumod_dm_node *cumod__dm_params(cumod_dm_parser *ps);

/* The printer: one growing string at a time, under one budget of bytes and
 * steps for the whole call. Start from CUMOD_DM_PRINTER_INIT with targs set. */
typedef struct cumod_dm_printer {
    char *buf;
    size_t len, cap;
    size_t budget;       /* bytes left to print in this call */
    unsigned long steps; /* nodes left to visit in this call */
    unsigned depth;
    const cumod_dm_node *targs;
    long pack; /* the element of the pack being expanded, or -1 */
    int failed;
} cumod_dm_printer;

/* clang-format off */
#define CUMOD_DM_PRINTER_INIT {.budget = CUMOD_DM_OUT_MAX, \
    .steps = CUMOD_DM_PRINT_STEPS, .pack = -1}
/* clang-format on */

/* Appends n printed as C++ source to the printer's string. */
void cumod__dm_print(cumod_dm_printer *pr, const cumod_dm_node *n);
/* Appends len bytes of text. */
void cumod__dm_put(cumod_dm_printer *pr, const char *text, size_t len);
/* The string printed so far (NUL-terminated, owned by the caller), leaving
 * the printer empty for the next; NULL if printing failed or memory ran
 * out (the printer then stays failed). */
char *cumod__dm_take(cumod_dm_printer *pr);
/* How many parameters n stands for: the size of the pack an EXPANSION
 * expands, 1 for any other node; -1 when that cannot be told. */
long cumod__dm_param_count(cumod_dm_printer *pr, const cumod_dm_node *n);
/* The kind of type n is once template parameters and cv-qualifiers are
 * seen through (under pr->pack) into *kind: CUMOD_DM_POINTER, _LREF...
 * 0, or -1 (and the printer failed) when a parameter does not resolve. */
int cumod__dm_shape(cumod_dm_printer *pr, const cumod_dm_node *n,
                    cumod_dm_kind *kind);
void cumod__dm_printer_fini(cumod_dm_printer *pr);

#endif
