/* SPDX-License-Identifier: MIT */
/*
 * cumod__demangle: parse (demangle_parse.c, demangle_type.c), then print
 * the name, each parameter and the signature (demangle_print.c) under one
 * budget. Everything the call allocates is its own until it succeeds.
 */
#include "demangle.h"

#include <stdlib.h>
#include <string.h>

#include "demangle_internal.h"

/* Prints parameter type t into *p and tells whether the kernel receives an
 * address for it. */
static int
demangle_param(cumod_dm_printer *pr, const cumod_dm_node *t, cumod_dm_param *p)
{
    cumod_dm_kind k;

    cumod__dm_print(pr, t);
    p->type = cumod__dm_take(pr);
    /* Nothing printed: a parameter that names an empty pack. */
    if (p->type == NULL || p->type[0] == '\0' ||
        cumod__dm_shape(pr, t, &k) != 0)
        return -1;
    p->reference = k == CUMOD_DM_LREF || k == CUMOD_DM_RREF;
    p->indirect = p->reference || k == CUMOD_DM_POINTER;
    return 0;
}

/* The parameters of tree into d: an expansion (Dp) stands for one
 * parameter per element of its pack. */
static int
demangle_params(cumod_dm_printer *pr, const cumod_dm_tree *tree,
                cumod_demangled *d)
{
    const cumod_dm_node *c;
    size_t n = 0, i = 0;
    long j, k;

    for (c = tree->params->a; c != NULL; c = c->b) {
        k = cumod__dm_param_count(pr, c->a);
        /* Each parameter prints at least three bytes of the signature. */
        if (k < 0 || (size_t)k > CUMOD_DM_OUT_MAX / 3 - n)
            return -1;
        n += (size_t)k;
    }
    if (n == 0)
        return 0;
    d->params = calloc(n, sizeof(*d->params));
    if (d->params == NULL)
        return -1;
    d->nparams = n;
    for (c = tree->params->a; c != NULL; c = c->b) {
        const cumod_dm_node *t = c->a;

        if (t->kind != CUMOD_DM_EXPANSION) {
            if (demangle_param(pr, t, &d->params[i++]) != 0)
                return -1;
            continue;
        }
        /* The same count as above, unless the steps ran out since. */
        k = cumod__dm_param_count(pr, t);
        if (k < 0 || (size_t)k > n - i)
            return -1;
        for (j = 0; j < k; j++) {
            pr->pack = j;
            if (demangle_param(pr, t->a, &d->params[i++]) != 0)
                return -1;
        }
        pr->pack = -1;
    }
    return 0;
}

int
cumod__demangle(const char *mangled, cumod_demangled *out)
{
    cumod_dm_printer pr = CUMOD_DM_PRINTER_INIT;
    cumod_demangled d = {0};
    cumod_dm_parser ps;
    cumod_dm_tree tree;
    size_t len, i;
    int rc = -1;

    if (mangled == NULL || out == NULL || strncmp(mangled, "_Z", 2) != 0)
        return -1;
    len = strnlen(mangled, CUMOD_DM_MANGLED_MAX + 1);
    if (len > CUMOD_DM_MANGLED_MAX)
        return -1;

    if (cumod__dm_parse(&ps, mangled, len, &tree) != 0)
        goto fail;
    pr.targs = tree.targs;
    if (demangle_params(&pr, &tree, &d) != 0)
        goto fail;
    cumod__dm_print(&pr, tree.name);
    d.name = cumod__dm_take(&pr);
    if (d.name == NULL)
        goto fail;

    cumod__dm_put(&pr, d.name, strlen(d.name));
    cumod__dm_put(&pr, "(", 1);
    for (i = 0; i < d.nparams; i++) {
        if (i > 0)
            cumod__dm_put(&pr, ", ", 2);
        cumod__dm_put(&pr, d.params[i].type, strlen(d.params[i].type));
    }
    cumod__dm_put(&pr, ")", 1);
    d.signature = cumod__dm_take(&pr);
    if (d.signature == NULL)
        goto fail;
    *out = d;
    rc = 0;
fail:
    if (rc != 0)
        cumod__demangled_fini(&d);
    cumod__dm_printer_fini(&pr);
    cumod__dm_parser_fini(&ps);
    return rc;
}

void
cumod__demangled_fini(cumod_demangled *d)
{
    size_t i;

    if (d == NULL)
        return;
    for (i = 0; i < d->nparams; i++)
        free(d->params[i].type);
    free(d->params);
    free(d->signature);
    free(d->name);
    memset(d, 0, sizeof(*d));
}
