/* SPDX-License-Identifier: MIT */
/*
 * PTX: what the JIT would make of a text, as far as the module's kernels go.
 *
 * The module header must come first: `.version X.Y` (text that does not
 * start so is no PTX; the real driver answers it CUDA_ERROR_INVALID_IMAGE),
 * `.target sm_NN[a|f][, ...]`, an optional `.address_size 64`. Then, at
 * module scope, only directives. A kernel is a `.entry NAME(params)` with a
 * body; its parameters are laid out as the ABI does: each at the next
 * multiple of its alignment (`.align N` where given, else its element size),
 * the buffer ending after the last. Bodies are skipped, brace-balanced.
 * .maxntid caps MAX_THREADS_PER_BLOCK and .reqntid does not (the H100 says
 * 1024 for .reqntid 64, 2, 1); .reqnctapercluster is the required cluster
 * shape, and .explicitcluster makes CLUSTER_SIZE_MUST_BE_SET 1. The
 * module-scope .const variables, laid out in order, are CONST_SIZE_BYTES.
 *
 * Errors follow what the driver's ptxas (CUDA 13.0) writes to the JIT log:
 * a .version above 9.0 is CUDA_ERROR_UNSUPPORTED_PTX_VERSION, a .target
 * above the device or a syntax error is CUDA_ERROR_INVALID_PTX.
 */
#include "fake.h"
#include "lex.h"

#include <stdlib.h>
#include <string.h>

enum {
    PTX_MAX_ISA = 90, /* PTX ISA 9.0: what CUDA 13.0's JIT reads */
    PTX_MAX_PARAM_BYTES = 1 << 20,
};

typedef struct ptx_parser {
    fake_lexer lx;
    fake_image *img;
    fake_jitlog *log;
    int error; /* a syntax error was logged */
} ptx_parser;

/* Logs a syntax error at the current token, as ptxas words it. */
static CUresult
ptx_syntax(ptx_parser *ps)
{
    if (!ps->error) {
        int len = ps->lx.len > 64 ? 64 : (int)ps->lx.len;
        fake_jitlog_printf(
            ps->log, 1,
            "ptxas application ptx input, line %d; fatal   : Parsing error "
            "near '%.*s': syntax error",
            ps->lx.tok_line, len, ps->lx.tok);
        fake_jitlog_printf(
            ps->log, 1, "ptxas fatal   : Ptx assembly aborted due to errors");
        ps->error = 1;
    }
    return CUDA_ERROR_INVALID_PTX;
}

/* The next token, which must exist. */
static int
ptx_want(ptx_parser *ps)
{
    return fake_lex_next(&ps->lx) == 1 ? 0 : -1;
}

/* One `.param ... name[N]` of an entry, the `.param` already read. */
static CUresult
ptx_param(ptx_parser *ps, fake_param *out, uint32_t *end)
{
    fake_lexer *lx = &ps->lx;
    uint32_t elem = 0, vec = 1, count = 1, align = 0;
    int ptr = 0;
    for (;;) {
        if (ptx_want(ps) != 0)
            return ptx_syntax(ps);
        if (lx->tok[0] != '.')
            break;
        uint32_t size = fake_lex_type_size(lx);
        if (fake_lex_is(lx, ".align")) {
            long a;
            if (ptx_want(ps) != 0 || (a = fake_lex_number(lx)) <= 0 ||
                (a & (a - 1)) != 0 || a > 4096)
                return ptx_syntax(ps);
            if (!ptr)
                align = (uint32_t)a;
        } else if (size != 0 && elem == 0) {
            elem = size;
        } else if (fake_lex_is(lx, ".v2") || fake_lex_is(lx, ".v4") ||
                   fake_lex_is(lx, ".v8")) {
            vec = (uint32_t)(lx->tok[2] - '0');
        } else if (fake_lex_is(lx, ".ptr") && elem != 0) {
            ptr = 1;
        } else if (!(ptr &&
                     (fake_lex_is(lx, ".global") || fake_lex_is(lx, ".const") ||
                      fake_lex_is(lx, ".local") ||
                      fake_lex_is(lx, ".shared")))) {
            return ptx_syntax(ps);
        }
    }
    if (elem == 0 || !fake_lex_ident(lx->tok[0]) ||
        (lx->tok[0] >= '0' && lx->tok[0] <= '9'))
        return ptx_syntax(ps);
    if (ptx_want(ps) != 0)
        return ptx_syntax(ps);
    if (fake_lex_is(lx, "[")) {
        long c;
        if (ptx_want(ps) != 0 || (c = fake_lex_number(lx)) <= 0 ||
            c > PTX_MAX_PARAM_BYTES || ptx_want(ps) != 0 ||
            !fake_lex_is(lx, "]") || ptx_want(ps) != 0)
            return ptx_syntax(ps);
        count = (uint32_t)c;
    }
    if (align == 0)
        align = elem * vec;
    uint64_t at = ((uint64_t)*end + align - 1) / align * align;
    uint64_t size = (uint64_t)elem * vec * count;
    if (at + size > PTX_MAX_PARAM_BYTES)
        return ptx_syntax(ps);
    *out = (fake_param){(uint32_t)at, (uint32_t)size};
    *end = (uint32_t)(at + size);
    return CUDA_SUCCESS;
}

/* The bytes a `.local` or `.shared` declaration takes (the directive is the
 * current token): `.align N`, a type, maybe a vector, a name, maybe `[N]`.
 * Reads up to the name or its `]`; 0 if it is no plain declaration. */
static uint64_t
ptx_decl_bytes(fake_lexer *lx)
{
    uint64_t elem = 0, vec = 1, count = 1;
    while (fake_lex_next(lx) == 1 && lx->tok[0] == '.') {
        if (fake_lex_is(lx, ".align") && fake_lex_next(lx) != 1)
            return 0;
        if (fake_lex_type_size(lx) != 0)
            elem = fake_lex_type_size(lx);
        else if (fake_lex_is(lx, ".v2") || fake_lex_is(lx, ".v4"))
            vec = (uint64_t)(lx->tok[2] - '0');
    }
    fake_lexer ahead = *lx;
    long n;
    if (fake_lex_next(&ahead) == 1 && fake_lex_is(&ahead, "[") &&
        fake_lex_next(&ahead) == 1 && (n = fake_lex_number(&ahead)) > 0 &&
        fake_lex_next(&ahead) == 1 && fake_lex_is(&ahead, "]")) {
        count = (uint64_t)n;
        *lx = ahead;
    }
    return elem * vec * count;
}

/* Skips a brace-balanced body, the '{' the current token, adding up the
 * `.local` and `.shared` arrays it declares (NULL: not wanted). */
static CUresult
ptx_body(ptx_parser *ps, uint64_t *local, uint64_t *shared)
{
    int depth = 1, r, start = 1; /* at the start of a statement */
    while (depth > 0) {
        if ((r = fake_lex_next(&ps->lx)) != 1)
            return ptx_syntax(ps);
        int is_local = fake_lex_is(&ps->lx, ".local"),
            is_shared = fake_lex_is(&ps->lx, ".shared");
        if (start && local != NULL && (is_local || is_shared)) {
            uint64_t bytes = ptx_decl_bytes(&ps->lx);
            uint64_t *sum = is_local ? local : shared;
            *sum = *sum + bytes > FAKE_STATIC_SHMEM * 64ull
                       ? FAKE_STATIC_SHMEM * 64ull
                       : *sum + bytes;
        }
        if (fake_lex_is(&ps->lx, "{"))
            depth++;
        else if (fake_lex_is(&ps->lx, "}"))
            depth--;
        start = fake_lex_is(&ps->lx, "{") || fake_lex_is(&ps->lx, "}") ||
                fake_lex_is(&ps->lx, ";");
    }
    return CUDA_SUCCESS;
}

/* An `.entry`, the directive already read: name, params, attributes, body. */
static CUresult
ptx_entry(ptx_parser *ps, int external)
{
    fake_lexer *lx = &ps->lx;
    if (ptx_want(ps) != 0 || lx->tok[0] == '.' || !fake_lex_ident(lx->tok[0]) ||
        (lx->tok[0] >= '0' && lx->tok[0] <= '9'))
        return ptx_syntax(ps);
    const char *name = lx->tok;
    size_t name_len = lx->len;
    fake_param *params = NULL;
    uint32_t nparams = 0, end = 0;
    int max_threads = 1024;
    CUresult rc =
        CUDA_ERROR_INVALID_PTX; /* what every `goto fail` means, but OOM */

    if (ptx_want(ps) != 0)
        goto fail;
    if (fake_lex_is(lx, "(")) {
        if (ptx_want(ps) != 0)
            goto fail;
        while (!fake_lex_is(lx, ")")) {
            if (!fake_lex_is(lx, ".param") || nparams >= FAKE_MAX_PARAMS)
                goto fail;
            fake_param *grown =
                realloc(params, (nparams + 1) * sizeof(*params));
            if (grown == NULL) {
                rc = CUDA_ERROR_OUT_OF_MEMORY;
                goto fail;
            }
            params = grown;
            if (ptx_param(ps, &params[nparams++], &end) != CUDA_SUCCESS)
                goto fail;
            if (fake_lex_is(lx, ",") && ptx_want(ps) != 0)
                goto fail;
        }
        if (ptx_want(ps) != 0)
            goto fail;
    }
    /* Performance directives: .maxntid 256, 1, 1 and the like. */
    int cluster[3] = {0, 0, 0}, cluster_explicit = 0;
    while (lx->tok[0] == '.') {
        int bound = fake_lex_is(lx, ".maxntid"),
            shape = fake_lex_is(lx, ".reqnctapercluster");
        long product = 1, v;
        int dim = 0;
        cluster_explicit |= fake_lex_is(lx, ".explicitcluster");
        if (fake_lex_is(lx, ".pragma")) {
            if (ptx_want(ps) != 0 || lx->tok[0] != '"' || ptx_want(ps) != 0 ||
                !fake_lex_is(lx, ";"))
                goto fail;
        }
        if (ptx_want(ps) != 0)
            goto fail;
        while ((v = fake_lex_number(lx)) >= 0 || fake_lex_is(lx, ",")) {
            if (v >= 0)
                product *= v > 1024 ? 1025 : v;
            if (v >= 0 && shape && dim < 3)
                cluster[dim++] = v > 0xffff ? 0xffff : (int)v;
            if (ptx_want(ps) != 0)
                goto fail;
        }
        for (; shape && dim < 3; dim++)
            cluster[dim] = 1;
        if (bound && product > 0 && product < max_threads)
            max_threads = (int)product;
    }
    if (fake_lex_is(lx, ";") && external) {
        free(params); /* a declaration: no kernel of this module */
        return CUDA_SUCCESS;
    }
    uint64_t local = 0, shared = 0;
    if (!fake_lex_is(lx, "{") || ptx_body(ps, &local, &shared) != CUDA_SUCCESS)
        goto fail;
    fake_kernel *k = fake_image_add_kernel(ps->img, name, name_len);
    if (k == NULL) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto fail;
    }
    k->params = params;
    k->nparams = nparams;
    k->param_bytes = end;
    k->max_threads = max_threads;
    memcpy(k->cluster, cluster, sizeof(cluster));
    k->cluster_explicit = cluster_explicit;
    k->local_bytes = (int)local;
    k->shared_bytes =
        shared > FAKE_STATIC_SHMEM ? FAKE_STATIC_SHMEM : (int)shared;
    k->num_regs = 16; /* unknowable before the JIT runs; plausible */
    if (ps->log != NULL && ps->log->verbose)
        fake_jitlog_printf(
            ps->log, 0,
            "ptxas info    : Compiling entry function '%s' for 'sm_%d'",
            k->name, ps->img->sm);
    return CUDA_SUCCESS;
fail:
    if (rc == CUDA_ERROR_INVALID_PTX)
        ptx_syntax(ps); /* logs the first error only */
    free(params);
    return rc;
}

/* A module-scope `.const` variable, the directive the current token: its
 * bytes laid out after the others' (`.align N` where given, else its
 * element size). Reads up to its name or its `]`. */
static void
ptx_variable(ptx_parser *ps, int constant)
{
    fake_lexer *lx = &ps->lx;
    uint64_t elem = 0, vec = 1, count = 1, align = 0;
    while (fake_lex_next(lx) == 1 && lx->tok[0] == '.') {
        long a;
        if (fake_lex_is(lx, ".align") && fake_lex_next(lx) == 1 &&
            (a = fake_lex_number(lx)) > 0)
            align = (uint64_t)a;
        else if (fake_lex_type_size(lx) != 0)
            elem = fake_lex_type_size(lx);
        else if (fake_lex_is(lx, ".v2") || fake_lex_is(lx, ".v4"))
            vec = (uint64_t)(lx->tok[2] - '0');
    }
    /* Its name, for cuModuleGetGlobal (the initializer is not read: the
     * fake's PTX globals start as zeros). */
    char name[256] = "";
    if (lx->len > 0 && lx->len < sizeof(name) && lx->tok[0] != ';') {
        memcpy(name, lx->tok, lx->len);
        name[lx->len] = '\0';
    }
    fake_lexer ahead = *lx;
    long n;
    if (fake_lex_next(&ahead) == 1 && fake_lex_is(&ahead, "[") &&
        fake_lex_next(&ahead) == 1 && (n = fake_lex_number(&ahead)) > 0 &&
        fake_lex_next(&ahead) == 1 && fake_lex_is(&ahead, "]")) {
        count = (uint64_t)n;
        *lx = ahead;
    }
    if (name[0] != '\0' && elem * vec * count > 0)
        (void)fake_image_add_global(ps->img, name, elem * vec * count, NULL,
                                    constant);
    if (!constant)
        return;
    if (align == 0)
        align = elem * vec;
    uint64_t at = (uint64_t)ps->img->const_bytes;
    if (align > 1)
        at = (at + align - 1) / align * align;
    at += elem * vec * count;
    ps->img->const_bytes = at > 0x7fffffff ? 0x7fffffff : (int)at;
}

/* Module scope: directives only; entries parsed, the rest skipped. */
static CUresult
ptx_module(ptx_parser *ps)
{
    fake_lexer *lx = &ps->lx;
    int r;
    while ((r = fake_lex_next(lx)) == 1) {
        if (fake_lex_is(lx, ";"))
            continue;
        if (lx->tok[0] != '.')
            return ptx_syntax(ps);
        int external = 0;
        CUresult rc = CUDA_SUCCESS;
        /* Leading directives; .entry ends the statement's own parsing. */
        while (r == 1 && lx->tok[0] == '.' && !fake_lex_is(lx, ".entry")) {
            external |= fake_lex_is(lx, ".extern");
            if (fake_lex_is(lx, ".func") || fake_lex_is(lx, ".file"))
                break;
            if ((fake_lex_is(lx, ".const") || fake_lex_is(lx, ".global")) &&
                !external) {
                /* then the rest runs to ';' below */
                ptx_variable(ps, fake_lex_is(lx, ".const"));
                break;
            }
            r = fake_lex_next(lx);
        }
        if (r == 1 && fake_lex_is(lx, ".entry")) {
            rc = ptx_entry(ps, external);
        } else if (r == 1 && fake_lex_is(lx, ".file")) {
            /* `.file 1 "name"[, time, size]` has no ';': read what is its. */
            fake_lexer ahead = *lx;
            while (fake_lex_next(&ahead) == 1 &&
                   (fake_lex_number(&ahead) >= 0 || ahead.tok[0] == '"' ||
                    fake_lex_is(&ahead, ",")))
                *lx = ahead;
        } else {
            /* Anything else runs to ';' or through a braced body. */
            int paren = 0;
            while (r == 1 && !(paren == 0 && (fake_lex_is(lx, ";") ||
                                              fake_lex_is(lx, "{")))) {
                paren += fake_lex_is(lx, "(") - fake_lex_is(lx, ")");
                r = fake_lex_next(lx);
            }
            if (r != 1)
                return ptx_syntax(ps);
            if (fake_lex_is(lx, "{"))
                rc = ptx_body(ps, NULL, NULL);
        }
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    return r == 0 ? CUDA_SUCCESS : ptx_syntax(ps);
}

/* `.target sm_NN[a|f] [, option]...`; the SM, or -1. */
static int
ptx_target(ptx_parser *ps, int *arch_specific)
{
    fake_lexer *lx = &ps->lx;
    if (ptx_want(ps) != 0 || lx->len < 5 || memcmp(lx->tok, "sm_", 3) != 0)
        return -1;
    int sm = 0;
    size_t i = 3;
    for (; i < lx->len && lx->tok[i] >= '0' && lx->tok[i] <= '9' && sm < 1000;
         i++)
        sm = sm * 10 + (lx->tok[i] - '0');
    *arch_specific = i + 1 == lx->len && lx->tok[i] == 'a';
    if (sm < 10 || (i != lx->len && !(i + 1 == lx->len && (lx->tok[i] == 'a' ||
                                                           lx->tok[i] == 'f'))))
        return -1;
    return sm;
}

CUresult
fake_ptx_parse(const char *p, size_t n, int sm, fake_image *img,
               fake_jitlog *log)
{
    ptx_parser ps = {.lx = {.p = p, .n = n, .line = 1}, .img = img, .log = log};
    fake_lexer *lx = &ps.lx;
    memset(img, 0, sizeof(*img));
    img->sm = sm;
    if (fake_lex_next(lx) != 1 || !fake_lex_is(lx, ".version")) {
        fake_jitlog_printf(log, 1, "%s", fake_unknown_format_log);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    CUresult rc = CUDA_ERROR_INVALID_PTX;
    int major = -1, minor = -1, arch_specific = 0;
    if (ptx_want(&ps) == 0 && lx->len >= 3 && lx->len <= 6) {
        const char *dot = memchr(lx->tok, '.', lx->len);
        if (dot != NULL && dot > lx->tok && dot + 1 < lx->tok + lx->len) {
            fake_lexer a = *lx, b = *lx;
            a.len = (size_t)(dot - lx->tok);
            b.tok = dot + 1;
            b.len = lx->len - a.len - 1;
            major = (int)fake_lex_number(&a);
            minor = (int)fake_lex_number(&b);
        }
    }
    if (major < 0 || minor < 0 || minor > 9) {
        rc = ptx_syntax(&ps);
        goto fail;
    }
    if (major * 10 + minor > PTX_MAX_ISA) {
        fake_jitlog_printf(log, 1,
                           "ptxas application ptx input, line %d; fatal   : "
                           "Unsupported .version "
                           "%d.%d; current version is '%d.%d'",
                           lx->tok_line, major, minor, PTX_MAX_ISA / 10,
                           PTX_MAX_ISA % 10);
        rc = CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
        goto fail;
    }
    if (fake_lex_next(lx) != 1 || !fake_lex_is(lx, ".target")) {
        fake_jitlog_printf(
            log, 1,
            "ptxas application ptx input, line %d; fatal   : Missing "
            ".target directive at start of file 'application ptx input'",
            lx->line);
        fake_jitlog_printf(
            log, 1, "ptxas fatal   : Ptx assembly aborted due to errors");
        goto fail;
    }
    int target = ptx_target(&ps, &arch_specific);
    if (target < 0) {
        rc = ptx_syntax(&ps);
        goto fail;
    }
    /* Target options (", texmode_independent"), then maybe .address_size. */
    size_t mark = lx->pos;
    int line = lx->line;
    while (fake_lex_next(lx) == 1 && fake_lex_is(lx, ",")) {
        if (ptx_want(&ps) != 0) {
            rc = ptx_syntax(&ps);
            goto fail;
        }
        mark = lx->pos;
        line = lx->line;
    }
    if (fake_lex_is(lx, ".address_size")) {
        long bits;
        if (ptx_want(&ps) != 0 ||
            ((bits = fake_lex_number(lx)) != 64 && bits != 32)) {
            rc = ptx_syntax(&ps);
            goto fail;
        }
    } else {
        lx->pos = mark; /* not ours: the module scope reads it again */
        lx->line = line;
    }
    if (target > sm || (arch_specific && target != sm)) {
        fake_jitlog_printf(
            log, 1,
            "ptxas fatal   : SM version specified by .target is higher "
            "than default SM version assumed");
        goto fail;
    }
    img->kind = FAKE_IMAGE_PTX;
    img->ptx_version = target;
    if ((rc = ptx_module(&ps)) != CUDA_SUCCESS)
        goto fail;
    if (log != NULL && log->verbose)
        fake_jitlog_printf(log, 0, "ptxas info    : 0 bytes gmem");
    return CUDA_SUCCESS;
fail:
    fake_image_fini(img);
    return rc;
}
