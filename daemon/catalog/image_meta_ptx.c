/*
 * Describing PTX text: the kernels (.entry) with their parameter lists and
 * performance directives, and the module's .global and .const variables.
 * Checked against driver 580's view of the JIT's result on an H100 (see
 * image_meta_cubin.c for the cubin side):
 *
 * - Parameters are laid out in order, each at the next multiple of its
 *   alignment (.align N where given, else its element size times its
 *   vector width), as cuFuncGetParamInfo gives them: `.param .u8 a, .param
 *   .align 16 .b8 b[20], .param .u16 c, .param .f64 d` lie at 0, 16, 36, 40.
 *   After .ptr, .align is the pointee's and leaves the layout alone.
 * - .maxntid x, y, z bounds the block (max_threads is their product);
 *   .reqntid fixes its shape and does not lower MAX_THREADS_PER_BLOCK;
 *   .reqnctapercluster is the required cluster shape; .explicitcluster
 *   sets CLUSTER_SIZE_MUST_BE_SET (nvcc writes both for __cluster_dims__).
 *   A missing y or z is 1.
 * - Static shared memory is the .shared arrays an entry's body declares,
 *   each at the next multiple of its alignment: what the driver says of
 *   nvcc's PTX, whose shared variables all live in the entry that uses
 *   them. Where the module declares .shared variables of its own, or a
 *   .func declares any, which entries use them is the JIT's business: -1.
 * - Registers are the JIT's choice: -1.
 * - Globals are the module-scope .global and .const variables that are not
 *   .extern, visible or not (cuModuleGetGlobal finds both), each of its
 *   element size times its vector width times its dimensions (an open
 *   first dimension counted from the initializer). CONST_SIZE_BYTES is the
 *   .const variables laid out in order, each aligned.
 *
 * A small tokenizer skips comments and strings; bodies are skipped
 * brace-balanced. What is not understood at module scope is skipped to the
 * end of its statement (the JIT, not this reader, judges PTX), but a
 * parameter list or a variable declaration that cannot be read is an
 * error, not a description with something missing. Every read is bounded
 * by the text's length.
 */
#include "image_meta_internal.h"

#include <stdlib.h>
#include <string.h>

#include "status.h"

#define PTX_NUM_MAX ((uint64_t)1 << 40)

typedef struct ptx_lex {
    size_t pos;      /* where the next token starts looking */
    const char *tok; /* the current token, tok[0, len); len 0 at the end */
    size_t len, at;  /* at: its offset, for line numbers */
} ptx_lex;

typedef struct ptx_rd {
    const char *s;
    size_t n;
    ptx_lex lx;
    const char *what;
    cumod_imeta *m;
    uint64_t const_end; /* .const bytes laid out so far */
    int module_shared;  /* .shared outside every entry: shared unknown */
    char *msg;
    size_t msglen;
} ptx_rd;

static int
ptx_ident(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_' || c == '$' || c == '%' ||
           c == '.';
}

/* The next token: a run of ptx_ident characters (an identifier, directive
 * or number), a string, or one other character. 1, or 0 at the end. */
static int
ptx_next(ptx_rd *p)
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

static int
ptx_is(const ptx_rd *p, const char *t)
{
    size_t n = strlen(t);
    return p->lx.len == n && memcmp(p->lx.tok, t, n) == 0;
}

/* Whether the current token is a directive (".entry"). */
static int
ptx_directive(const ptx_rd *p)
{
    return p->lx.len > 1 && p->lx.tok[0] == '.';
}

/* Whether the current token could name something. */
static int
ptx_name(const ptx_rd *p)
{
    char c = p->lx.len > 0 ? p->lx.tok[0] : '\0';
    return ptx_ident(c) && c != '.' && !(c >= '0' && c <= '9');
}

static cumod_err
ptx_bad(ptx_rd *p, const char *what)
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
 * U suffix) below PTX_NUM_MAX; -1 if it is none. */
static int
ptx_number(const ptx_rd *p, uint64_t *v)
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
        if (*v >= PTX_NUM_MAX / base)
            return -1;
        *v = *v * base + d;
    }
    return 0;
}

/* The next token if it is `t` (consumed: 1); else leaves it unread (0). */
static int
ptx_accept(ptx_rd *p, const char *t)
{
    ptx_lex save = p->lx;

    if (ptx_next(p) && ptx_is(p, t))
        return 1;
    p->lx = save;
    return 0;
}

/* The bytes of a fundamental type directive, 0 if the token is none. */
static unsigned
ptx_type_size(const ptx_rd *p)
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
        if (ptx_is(p, types[i].name))
            return types[i].size;
    return 0;
}

static unsigned
ptx_vector(const ptx_rd *p)
{
    if (ptx_is(p, ".v2"))
        return 2;
    if (ptx_is(p, ".v4"))
        return 4;
    if (ptx_is(p, ".v8"))
        return 8;
    return 0;
}

static uint64_t
ptx_align_up(uint64_t v, uint64_t a)
{
    return a > 1 ? (v + a - 1) / a * a : v;
}

static uint64_t
ptx_mul(uint64_t a, uint64_t b)
{
    return a != 0 && b > PTX_NUM_MAX / a ? PTX_NUM_MAX : a * b;
}

/* `.align N` where the current token is .align: N, a power of two. */
static int
ptx_align(ptx_rd *p, uint64_t *a)
{
    return ptx_next(p) && ptx_number(p, a) == 0 && *a > 0 &&
                   (*a & (*a - 1)) == 0
               ? 0
               : -1;
}

/* Skips to the end of the statement the current token is in: to its ';'
 * at depth 0, or to the '}' that closes the braced body ending it. 0, or
 * -1 at the text's end. */
static int
ptx_skip_statement(ptx_rd *p)
{
    long depth = 0;

    for (; p->lx.len > 0; ptx_next(p)) {
        if (ptx_is(p, "{") || ptx_is(p, "("))
            depth++;
        else if (ptx_is(p, ")") && depth > 0)
            depth--;
        else if (ptx_is(p, "}") && depth > 0 && --depth == 0)
            return 0;
        else if (depth == 0 && ptx_is(p, ";"))
            return 0;
    }
    return -1;
}

/* A parenthesized group, its '(' the current token: skipped to the ')'
 * that closes it, left current. 0, or -1 at the text's end. */
static int
ptx_skip_parens(ptx_rd *p)
{
    long depth = 0;

    for (; p->lx.len > 0; ptx_next(p)) {
        if (ptx_is(p, "("))
            depth++;
        else if (ptx_is(p, ")") && --depth <= 0)
            return 0;
    }
    return -1;
}

/* An initializer, the '=' the current token: skipped to the ',' or ';'
 * that ends it, left current. Returns how many elements a braced list has
 * at its top level ("{1, 2, {3}}" has 3), 0 for anything else. */
static uint64_t
ptx_initializer(ptx_rd *p)
{
    uint64_t commas = 0;
    long depth = 0;
    int any = 0;

    while (ptx_next(p)) {
        if (ptx_is(p, "{") || ptx_is(p, "(")) {
            any |= depth >= 1;
            depth++;
        } else if (ptx_is(p, "}") || ptx_is(p, ")")) {
            depth--;
        } else if (depth <= 0 && (ptx_is(p, ",") || ptx_is(p, ";"))) {
            break;
        } else if (depth == 1 && ptx_is(p, ",")) {
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
static int
ptx_declarator(ptx_rd *p, const char **name, size_t *len, uint64_t *count)
{
    uint64_t dim, n;
    int open = 0;

    if (!ptx_name(p))
        return -1;
    *name = p->lx.tok;
    *len = p->lx.len;
    *count = 1;
    ptx_next(p);
    while (ptx_is(p, "[")) {
        ptx_next(p);
        if (ptx_is(p, "]")) {
            if (*count != 1 || open)
                return -1;
            open = 1;
        } else if (ptx_number(p, &dim) != 0 || !ptx_next(p) ||
                   !ptx_is(p, "]")) {
            return -1;
        } else {
            *count = ptx_mul(*count, dim);
        }
        ptx_next(p);
    }
    if (ptx_is(p, "=")) {
        n = ptx_initializer(p);
        if (open)
            *count = ptx_mul(*count, n);
    } else if (open) {
        *count = 0;
    }
    return ptx_is(p, ",") || ptx_is(p, ";") ? 0 : -1;
}

/* A variable's directives, the state space's the current token: .align,
 * a type, a vector width, .attribute(...). *elem 0 for opaque types
 * (.texref and the like). Leaves the first declarator current. */
static int
ptx_var_type(ptx_rd *p, uint64_t *elem, uint64_t *align)
{
    uint64_t vec = 1;

    *elem = 0;
    *align = 0;
    while (ptx_next(p) && ptx_directive(p)) {
        if (ptx_is(p, ".align")) {
            if (ptx_align(p, align) != 0)
                return -1;
        } else if (ptx_type_size(p) != 0) {
            *elem = ptx_type_size(p);
        } else if (ptx_vector(p) != 0) {
            vec = ptx_vector(p);
        } else if (ptx_is(p, ".attribute")) {
            if (!ptx_accept(p, "(") || ptx_skip_parens(p) != 0)
                return -1;
        }
    }
    *elem *= vec;
    if (*align == 0)
        *align = *elem;
    return 0;
}

/* A module-scope .global, .const or .shared variable, its state space the
 * current token. */
static cumod_err
ptx_variable(ptx_rd *p, int external)
{
    int constant = ptx_is(p, ".const"), shared = ptx_is(p, ".shared");
    uint64_t elem, align, count;
    const char *name;
    size_t len;
    cumod_err rc;

    if (ptx_var_type(p, &elem, &align) != 0)
        return ptx_bad(p, "a variable declaration not understood here");
    if (external || elem == 0 || shared) {
        /* No storage of this module's, or no size; a .shared variable of
         * the module leaves every entry's static shared memory unknown. */
        p->module_shared |= shared && !external;
        return ptx_skip_statement(p) == 0
                   ? CUMOD_OK
                   : ptx_bad(p, "a declaration that never ends");
    }
    for (;;) {
        if (ptx_declarator(p, &name, &len, &count) != 0)
            return ptx_bad(p, "a variable declaration not understood here");
        if (count != 0) {
            rc = cumod__imeta_add_global(p->m, name, len, ptx_mul(elem, count),
                                         constant, p->msg, p->msglen);
            if (rc != CUMOD_OK)
                return rc;
            if (constant)
                p->const_end =
                    ptx_align_up(p->const_end, align) + ptx_mul(elem, count);
        }
        if (ptx_is(p, ";"))
            return CUMOD_OK;
        ptx_next(p);
    }
}

/* One `.param`, the directive the current token. Leaves the ',' or ')'
 * after it current. */
static cumod_err
ptx_param(ptx_rd *p, cumod_kparam *out, uint64_t *end)
{
    uint64_t elem = 0, vec = 1, align = 0, count = 1, a, at, size;
    int ptr = 0;
    size_t n;

    while (ptx_next(p) && ptx_directive(p)) {
        n = p->lx.len;
        if (ptx_is(p, ".align")) {
            if (ptx_align(p, &a) != 0)
                return ptx_bad(p, "a parameter's .align is not a power of "
                                  "two");
            if (!ptr)
                align = a;
        } else if (ptx_type_size(p) != 0 && elem == 0) {
            elem = ptx_type_size(p);
        } else if (ptx_vector(p) != 0) {
            vec = ptx_vector(p);
        } else if (n >= 4 && memcmp(p->lx.tok, ".ptr", 4) == 0) {
            /* .ptr .global .align 16, also written .ptr.global.align 16:
             * the pointee's, not the parameter's. */
            ptr = 1;
            if (n >= 10 && memcmp(p->lx.tok + n - 6, ".align", 6) == 0 &&
                ptx_align(p, &a) != 0)
                return ptx_bad(p, "a pointer parameter's .align is not a "
                                  "power of two");
        } else if (!ptr || !(ptx_is(p, ".global") || ptx_is(p, ".const") ||
                             ptx_is(p, ".local") || ptx_is(p, ".shared"))) {
            return ptx_bad(p, "a parameter directive not understood here");
        }
    }
    if (elem == 0 || !ptx_name(p))
        return ptx_bad(p, "a parameter without a type or a name");
    ptx_next(p);
    if (ptx_is(p, "[")) {
        if (!ptx_next(p) || ptx_number(p, &count) != 0 || count == 0 ||
            !ptx_next(p) || !ptx_is(p, "]"))
            return ptx_bad(p, "a parameter's array size is not a number");
        ptx_next(p);
    }
    size = ptx_mul(ptx_mul(elem, vec), count);
    at = ptx_align_up(*end, align != 0 ? align : elem * vec);
    if (at + size > UINT32_MAX)
        return ptx_bad(p, "parameters larger than 4 GiB");
    *out = (cumod_kparam){(uint32_t)at, (uint32_t)size};
    *end = at + size;
    return CUMOD_OK;
}

/* The parameter list, its '(' the current token. Leaves ')' current. */
static cumod_err
ptx_params(ptx_rd *p, cumod_kdesc *k)
{
    uint64_t end = 0;
    void *grown;
    cumod_err rc;

    if (!ptx_next(p))
        return ptx_bad(p, "a parameter list that never ends");
    while (!ptx_is(p, ")")) {
        if (!ptx_is(p, ".param"))
            return ptx_bad(p, "a kernel parameter that is not a .param");
        if (k->nparams >= UINT32_MAX / sizeof(*k->params) / 2)
            return ptx_bad(p, "too many parameters");
        if ((k->nparams & (k->nparams - 1)) == 0) { /* 0, 1, 2, 4: double */
            grown = realloc(k->params, (k->nparams ? k->nparams * 2 : 1) *
                                           sizeof(*k->params));
            if (grown == NULL)
                return cumod__errf(p->msg, p->msglen, CUMOD_ENOMEM,
                                   "%s: no memory for the parameters of %s",
                                   p->what, k->name);
            k->params = grown;
        }
        rc = ptx_param(p, &k->params[k->nparams], &end);
        if (rc != CUMOD_OK)
            return rc;
        k->nparams++;
        if (ptx_is(p, ",") && !ptx_next(p))
            return ptx_bad(p, "a parameter list that never ends");
        if (!ptx_is(p, ")") && !ptx_is(p, ".param"))
            return ptx_bad(p, "a parameter list not understood here");
    }
    return CUMOD_OK;
}

/* A performance directive's numbers (".maxntid 256, 1, 1"), the
 * directive the current token: up to 3 into v (missing ones 1). */
static void
ptx_dims(ptx_rd *p, uint32_t v[3])
{
    ptx_lex save;
    uint64_t x;
    int i = 0;

    v[0] = v[1] = v[2] = 1;
    for (;;) {
        save = p->lx;
        if (!ptx_next(p) || ptx_number(p, &x) != 0) {
            p->lx = save;
            return;
        }
        if (i < 3)
            v[i++] = x > UINT32_MAX ? UINT32_MAX : (uint32_t)x;
        if (!ptx_accept(p, ","))
            return;
    }
}

/* A body, its '{' the current token, to its '}': the .shared arrays
 * declared at the start of its statements, laid out in *shared (NULL: a
 * .func's, where any makes every entry's static shared memory unknown). */
static cumod_err
ptx_body(ptx_rd *p, uint64_t *shared)
{
    uint64_t elem, align, count;
    const char *name;
    size_t len;
    long depth = 1;
    int start = 1, more;

    while (depth > 0) {
        if (!ptx_next(p))
            return ptx_bad(p, "a body that never ends");
        if (start && ptx_is(p, ".shared")) {
            if (shared == NULL)
                p->module_shared = 1;
            else if (ptx_var_type(p, &elem, &align) != 0)
                return ptx_bad(p, "a .shared declaration not understood "
                                  "here");
            for (more = shared != NULL; more; more = ptx_is(p, ",")) {
                if (ptx_is(p, ",") && !ptx_next(p))
                    break;
                if (ptx_declarator(p, &name, &len, &count) != 0)
                    return ptx_bad(p, "a .shared declaration not "
                                      "understood here");
                *shared = ptx_align_up(*shared, align) + ptx_mul(elem, count);
            }
        }
        if (ptx_is(p, "{"))
            depth++;
        else if (ptx_is(p, "}"))
            depth--;
        start = ptx_is(p, "{") || ptx_is(p, "}") || ptx_is(p, ";") ||
                ptx_is(p, ":");
    }
    return CUMOD_OK;
}

/* An .entry, the directive the current token: its name, parameters,
 * performance directives and body. A declaration (no body) is skipped. */
static cumod_err
ptx_entry(ptx_rd *p)
{
    cumod_kdesc k, *d;
    uint32_t v[3];
    uint64_t shared = 0, t;
    cumod_err rc;
    int dir;

    memset(&k, 0, sizeof(k));
    if (!ptx_next(p) || !ptx_name(p))
        return ptx_bad(p, "an .entry without a name");
    if ((k.name = strndup(p->lx.tok, p->lx.len)) == NULL)
        return cumod__errf(p->msg, p->msglen, CUMOD_ENOMEM,
                           "%s: no memory for a kernel's name", p->what);
    ptx_next(p);
    if (ptx_is(p, "(")) {
        if ((rc = ptx_params(p, &k)) != CUMOD_OK)
            goto fail;
        ptx_next(p);
    }
    for (; ptx_directive(p); ptx_next(p)) {
        if (ptx_is(p, ".explicitcluster")) {
            k.cluster_explicit = 1;
        } else if (ptx_is(p, ".pragma")) {
            while (ptx_next(p) && !ptx_is(p, ";"))
                ;
        } else {
            dir = ptx_is(p, ".maxntid")             ? 1
                  : ptx_is(p, ".reqntid")           ? 2
                  : ptx_is(p, ".reqnctapercluster") ? 3
                                                    : 0;
            ptx_dims(p, v);
            t = (uint64_t)v[0] * v[1] * v[2];
            if (dir == 1)
                k.max_threads = t > INT32_MAX ? INT32_MAX : (int32_t)t;
            else if (dir != 0)
                memcpy(dir == 2 ? k.reqntid : k.cluster, v, sizeof(v));
        }
    }
    if (ptx_is(p, ";")) { /* a declaration: no kernel of this module */
        rc = CUMOD_OK;
        goto fail;
    }
    if (!ptx_is(p, "{")) {
        rc = ptx_bad(p, "an .entry without a body");
        goto fail;
    }
    if ((rc = ptx_body(p, &shared)) != CUMOD_OK)
        goto fail;
    rc = cumod__imeta_add_kernel(p->m, k.name, strlen(k.name), &d, p->msg,
                                 p->msglen);
    if (rc != CUMOD_OK)
        goto fail;
    free(d->name);
    *d = k;
    d->registers = -1;
    d->static_shared = shared > INT32_MAX ? INT32_MAX : (int32_t)shared;
    return CUMOD_OK;
fail:
    free(k.name);
    free(k.params);
    return rc;
}

/* What follows .file: `1 "name"`, maybe `, time, size`. */
static void
ptx_file(ptx_rd *p)
{
    ptx_lex save = p->lx;

    if (!ptx_next(p) || !ptx_next(p) || p->lx.tok[0] != '"') {
        p->lx = save;
        return;
    }
    while (ptx_accept(p, ","))
        ptx_next(p);
}

/* Module scope: one statement at a time, the first token current. */
static cumod_err
ptx_statement(ptx_rd *p)
{
    int external = 0;

    while (ptx_is(p, ".visible") || ptx_is(p, ".extern") ||
           ptx_is(p, ".weak") || ptx_is(p, ".common")) {
        external |= ptx_is(p, ".extern");
        if (!ptx_next(p))
            return CUMOD_OK;
    }
    if (ptx_is(p, ".entry"))
        return external ? (ptx_skip_statement(p) == 0
                               ? CUMOD_OK
                               : ptx_bad(p, "a declaration that never ends"))
                        : ptx_entry(p);
    if (ptx_is(p, ".global") || ptx_is(p, ".const") || ptx_is(p, ".shared"))
        return ptx_variable(p, external);
    if (ptx_is(p, ".version") || ptx_is(p, ".address_size")) {
        ptx_next(p);
        return CUMOD_OK;
    }
    if (ptx_is(p, ".target")) {
        do
            ptx_next(p);
        while (ptx_accept(p, ","));
        return CUMOD_OK;
    }
    if (ptx_is(p, ".file")) {
        ptx_file(p);
        return CUMOD_OK;
    }
    if (ptx_is(p, ".func")) {
        /* To its body (or ';'), over its return and parameter lists. */
        while (p->lx.len > 0 && !ptx_is(p, "{") && !ptx_is(p, ";")) {
            if (ptx_is(p, "(") && ptx_skip_parens(p) != 0)
                break;
            ptx_next(p);
        }
        if (ptx_is(p, "{"))
            return ptx_body(p, NULL);
    }
    if (ptx_skip_statement(p) != 0)
        return ptx_bad(p, "a statement that never ends");
    return CUMOD_OK;
}

cumod_err
cumod__imeta_ptx(const char *s, size_t n, const char *what, cumod_imeta *m,
                 char *msg, size_t msglen)
{
    ptx_rd p;
    cumod_err rc = CUMOD_OK;
    size_t i;

    memset(&p, 0, sizeof(p));
    p.s = s;
    p.n = n;
    p.what = what;
    p.m = m;
    p.msg = msg;
    p.msglen = msglen;
    while (rc == CUMOD_OK && ptx_next(&p))
        rc = ptx_statement(&p);
    if (rc != CUMOD_OK)
        return rc;
    if (p.module_shared)
        for (i = 0; i < m->nkernels; i++)
            m->kernels[i].static_shared = -1;
    m->const_bytes = p.const_end;
    return CUMOD_OK;
}
