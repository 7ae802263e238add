/* SPDX-License-Identifier: MIT */
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
#include "image_meta_ptx.h"

#include <stdlib.h>
#include <string.h>

#include "common/status.h"

/* A module-scope .global, .const or .shared variable, its state space the
 * current token. */
static cumod_err
ptx_variable(cumod_ptx_rd *p, int external)
{
    int constant = cumod__ptx_is(p, ".const"),
        shared = cumod__ptx_is(p, ".shared");
    uint64_t elem, align, count;
    const char *name;
    size_t len;
    cumod_err rc;

    if (cumod__ptx_var_type(p, &elem, &align) != 0)
        return cumod__ptx_bad(p, "a variable declaration not understood here");
    if (external || elem == 0 || shared) {
        /* No storage of this module's, or no size; a .shared variable of
         * the module leaves every entry's static shared memory unknown. */
        p->module_shared |= shared && !external;
        return cumod__ptx_skip_statement(p) == 0
                   ? CUMOD_OK
                   : cumod__ptx_bad(p, "a declaration that never ends");
    }
    for (;;) {
        if (cumod__ptx_declarator(p, &name, &len, &count) != 0)
            return cumod__ptx_bad(p,
                                  "a variable declaration not understood here");
        if (count != 0) {
            rc = cumod__imeta_add_global(p->m, name, len,
                                         cumod__ptx_mul(elem, count), constant,
                                         p->msg, p->msglen);
            if (rc != CUMOD_OK)
                return rc;
            if (constant)
                p->const_end = cumod__ptx_align_up(p->const_end, align) +
                               cumod__ptx_mul(elem, count);
        }
        if (cumod__ptx_is(p, ";"))
            return CUMOD_OK;
        cumod__ptx_next(p);
    }
}

/* One `.param`, the directive the current token. Leaves the ',' or ')'
 * after it current. */
static cumod_err
ptx_param(cumod_ptx_rd *p, cumod_kparam *out, uint64_t *end)
{
    uint64_t elem = 0, vec = 1, align = 0, count = 1, a, at, size;
    int ptr = 0;
    size_t n;

    while (cumod__ptx_next(p) && cumod__ptx_directive(p)) {
        n = p->lx.len;
        if (cumod__ptx_is(p, ".align")) {
            if (cumod__ptx_align(p, &a) != 0)
                return cumod__ptx_bad(p,
                                      "a parameter's .align is not a power of "
                                      "two");
            if (!ptr)
                align = a;
        } else if (cumod__ptx_type_size(p) != 0 && elem == 0) {
            elem = cumod__ptx_type_size(p);
        } else if (cumod__ptx_vector(p) != 0) {
            vec = cumod__ptx_vector(p);
        } else if (n >= 4 && memcmp(p->lx.tok, ".ptr", 4) == 0) {
            /* .ptr .global .align 16, also written .ptr.global.align 16:
             * the pointee's, not the parameter's. */
            ptr = 1;
            if (n >= 10 && memcmp(p->lx.tok + n - 6, ".align", 6) == 0 &&
                cumod__ptx_align(p, &a) != 0)
                return cumod__ptx_bad(p,
                                      "a pointer parameter's .align is not a "
                                      "power of two");
        } else if (!ptr ||
                   !(cumod__ptx_is(p, ".global") ||
                     cumod__ptx_is(p, ".const") || cumod__ptx_is(p, ".local") ||
                     cumod__ptx_is(p, ".shared"))) {
            return cumod__ptx_bad(p,
                                  "a parameter directive not understood here");
        }
    }
    if (elem == 0 || !cumod__ptx_name(p))
        return cumod__ptx_bad(p, "a parameter without a type or a name");
    cumod__ptx_next(p);
    if (cumod__ptx_is(p, "[")) {
        if (!cumod__ptx_next(p) || cumod__ptx_number(p, &count) != 0 ||
            count == 0 || !cumod__ptx_next(p) || !cumod__ptx_is(p, "]"))
            return cumod__ptx_bad(p,
                                  "a parameter's array size is not a number");
        cumod__ptx_next(p);
    }
    size = cumod__ptx_mul(cumod__ptx_mul(elem, vec), count);
    at = cumod__ptx_align_up(*end, align != 0 ? align : elem * vec);
    if (at + size > UINT32_MAX)
        return cumod__ptx_bad(p, "parameters larger than 4 GiB");
    *out = (cumod_kparam){(uint32_t)at, (uint32_t)size};
    *end = at + size;
    return CUMOD_OK;
}

/* The parameter list, its '(' the current token. Leaves ')' current. */
static cumod_err
ptx_params(cumod_ptx_rd *p, cumod_kdesc *k)
{
    uint64_t end = 0;
    void *grown;
    cumod_err rc;

    if (!cumod__ptx_next(p))
        return cumod__ptx_bad(p, "a parameter list that never ends");
    while (!cumod__ptx_is(p, ")")) {
        if (!cumod__ptx_is(p, ".param"))
            return cumod__ptx_bad(p, "a kernel parameter that is not a .param");
        if (k->nparams >= UINT32_MAX / sizeof(*k->params) / 2)
            return cumod__ptx_bad(p, "too many parameters");
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
        if (cumod__ptx_is(p, ",") && !cumod__ptx_next(p))
            return cumod__ptx_bad(p, "a parameter list that never ends");
        if (!cumod__ptx_is(p, ")") && !cumod__ptx_is(p, ".param"))
            return cumod__ptx_bad(p, "a parameter list not understood here");
    }
    return CUMOD_OK;
}

/* A performance directive's numbers (".maxntid 256, 1, 1"), the
 * directive the current token: up to 3 into v (missing ones 1). */
static void
ptx_dims(cumod_ptx_rd *p, uint32_t v[3])
{
    cumod_ptx_lex save;
    uint64_t x;
    int i = 0;

    v[0] = v[1] = v[2] = 1;
    for (;;) {
        save = p->lx;
        if (!cumod__ptx_next(p) || cumod__ptx_number(p, &x) != 0) {
            p->lx = save;
            return;
        }
        if (i < 3)
            v[i++] = x > UINT32_MAX ? UINT32_MAX : (uint32_t)x;
        if (!cumod__ptx_accept(p, ","))
            return;
    }
}

/* A body, its '{' the current token, to its '}': the .shared arrays
 * declared at the start of its statements, laid out in *shared (NULL: a
 * .func's, where any makes every entry's static shared memory unknown). */
static cumod_err
ptx_body(cumod_ptx_rd *p, uint64_t *shared)
{
    uint64_t elem, align, count;
    const char *name;
    size_t len;
    long depth = 1;
    int start = 1, more;

    while (depth > 0) {
        if (!cumod__ptx_next(p))
            return cumod__ptx_bad(p, "a body that never ends");
        if (start && cumod__ptx_is(p, ".shared")) {
            if (shared == NULL)
                p->module_shared = 1;
            else if (cumod__ptx_var_type(p, &elem, &align) != 0)
                return cumod__ptx_bad(p, "a .shared declaration not understood "
                                         "here");
            for (more = shared != NULL; more; more = cumod__ptx_is(p, ",")) {
                if (cumod__ptx_is(p, ",") && !cumod__ptx_next(p))
                    break;
                if (cumod__ptx_declarator(p, &name, &len, &count) != 0)
                    return cumod__ptx_bad(p, "a .shared declaration not "
                                             "understood here");
                *shared = cumod__ptx_align_up(*shared, align) +
                          cumod__ptx_mul(elem, count);
            }
        }
        if (cumod__ptx_is(p, "{"))
            depth++;
        else if (cumod__ptx_is(p, "}"))
            depth--;
        start = cumod__ptx_is(p, "{") || cumod__ptx_is(p, "}") ||
                cumod__ptx_is(p, ";") || cumod__ptx_is(p, ":");
    }
    return CUMOD_OK;
}

/* An .entry, the directive the current token: its name, parameters,
 * performance directives and body. A declaration (no body) is skipped. */
static cumod_err
ptx_entry(cumod_ptx_rd *p)
{
    cumod_kdesc k, *d;
    uint32_t v[3];
    uint64_t shared = 0, t;
    cumod_err rc;
    int dir;

    memset(&k, 0, sizeof(k));
    if (!cumod__ptx_next(p) || !cumod__ptx_name(p))
        return cumod__ptx_bad(p, "an .entry without a name");
    if ((k.name = strndup(p->lx.tok, p->lx.len)) == NULL)
        return cumod__errf(p->msg, p->msglen, CUMOD_ENOMEM,
                           "%s: no memory for a kernel's name", p->what);
    cumod__ptx_next(p);
    if (cumod__ptx_is(p, "(")) {
        if ((rc = ptx_params(p, &k)) != CUMOD_OK)
            goto fail;
        cumod__ptx_next(p);
    }
    for (; cumod__ptx_directive(p); cumod__ptx_next(p)) {
        if (cumod__ptx_is(p, ".explicitcluster")) {
            k.cluster_explicit = 1;
        } else if (cumod__ptx_is(p, ".pragma")) {
            while (cumod__ptx_next(p) && !cumod__ptx_is(p, ";"))
                ;
        } else {
            dir = cumod__ptx_is(p, ".maxntid")             ? 1
                  : cumod__ptx_is(p, ".reqntid")           ? 2
                  : cumod__ptx_is(p, ".reqnctapercluster") ? 3
                                                           : 0;
            ptx_dims(p, v);
            t = (uint64_t)v[0] * v[1] * v[2];
            if (dir == 1)
                k.max_threads = t > INT32_MAX ? INT32_MAX : (int32_t)t;
            else if (dir != 0)
                memcpy(dir == 2 ? k.reqntid : k.cluster, v, sizeof(v));
        }
    }
    if (cumod__ptx_is(p, ";")) { /* a declaration: no kernel of this module */
        rc = CUMOD_OK;
        goto fail;
    }
    if (!cumod__ptx_is(p, "{")) {
        rc = cumod__ptx_bad(p, "an .entry without a body");
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
ptx_file(cumod_ptx_rd *p)
{
    cumod_ptx_lex save = p->lx;

    if (!cumod__ptx_next(p) || !cumod__ptx_next(p) || p->lx.tok[0] != '"') {
        p->lx = save;
        return;
    }
    while (cumod__ptx_accept(p, ","))
        cumod__ptx_next(p);
}

/* Module scope: one statement at a time, the first token current. */
static cumod_err
ptx_statement(cumod_ptx_rd *p)
{
    int external = 0;

    while (cumod__ptx_is(p, ".visible") || cumod__ptx_is(p, ".extern") ||
           cumod__ptx_is(p, ".weak") || cumod__ptx_is(p, ".common")) {
        external |= cumod__ptx_is(p, ".extern");
        if (!cumod__ptx_next(p))
            return CUMOD_OK;
    }
    if (cumod__ptx_is(p, ".entry"))
        return external
                   ? (cumod__ptx_skip_statement(p) == 0
                          ? CUMOD_OK
                          : cumod__ptx_bad(p, "a declaration that never ends"))
                   : ptx_entry(p);
    if (cumod__ptx_is(p, ".global") || cumod__ptx_is(p, ".const") ||
        cumod__ptx_is(p, ".shared"))
        return ptx_variable(p, external);
    if (cumod__ptx_is(p, ".version") || cumod__ptx_is(p, ".address_size")) {
        cumod__ptx_next(p);
        return CUMOD_OK;
    }
    if (cumod__ptx_is(p, ".target")) {
        do
            cumod__ptx_next(p);
        while (cumod__ptx_accept(p, ","));
        return CUMOD_OK;
    }
    if (cumod__ptx_is(p, ".file")) {
        ptx_file(p);
        return CUMOD_OK;
    }
    if (cumod__ptx_is(p, ".func")) {
        /* To its body (or ';'), over its return and parameter lists. */
        while (p->lx.len > 0 && !cumod__ptx_is(p, "{") &&
               !cumod__ptx_is(p, ";")) {
            if (cumod__ptx_is(p, "(") && cumod__ptx_skip_parens(p) != 0)
                break;
            cumod__ptx_next(p);
        }
        if (cumod__ptx_is(p, "{"))
            return ptx_body(p, NULL);
    }
    if (cumod__ptx_skip_statement(p) != 0)
        return cumod__ptx_bad(p, "a statement that never ends");
    return CUMOD_OK;
}

cumod_err
cumod__imeta_ptx(const char *s, size_t n, const char *what, cumod_imeta *m,
                 char *msg, size_t msglen)
{
    cumod_ptx_rd p;
    cumod_err rc = CUMOD_OK;
    size_t i;

    memset(&p, 0, sizeof(p));
    p.s = s;
    p.n = n;
    p.what = what;
    p.m = m;
    p.msg = msg;
    p.msglen = msglen;
    while (rc == CUMOD_OK && cumod__ptx_next(&p))
        rc = ptx_statement(&p);
    if (rc != CUMOD_OK)
        return rc;
    if (p.module_shared)
        for (i = 0; i < m->nkernels; i++)
            m->kernels[i].static_shared = -1;
    m->const_bytes = p.const_end;
    return CUMOD_OK;
}
