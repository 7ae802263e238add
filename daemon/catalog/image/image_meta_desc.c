/* SPDX-License-Identifier: MIT */
/*
 * The description (image_meta.h) itself: the readers (image_meta_cubin.c,
 * image_meta_ptx.c) append kernels and globals to it, the caller frees it.
 * A leaf: it calls no reader. Pure; any thread.
 */
#include "image_meta.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumod/errors.h"
#include "image_meta_internal.h"
#include "common/status.h"

const char *
cumod__imeta_source_name(cumod_imeta_source s)
{
    switch (s) {
    case CUMOD_IMETA_CUBIN:
        return "cubin";
    case CUMOD_IMETA_PTX:
        return "ptx";
    case CUMOD_IMETA_FATBIN_CUBIN:
        return "fatbin cubin";
    case CUMOD_IMETA_FATBIN_PTX:
        return "fatbin ptx";
    }
    return "?";
}

/* Room for one more element in *p, which holds n of size bytes each: the
 * capacity doubles at every power of two from 4, so none is kept. */
static int
meta_grow(void **p, size_t n, size_t size)
{
    size_t cap;
    void *q;

    if (n != 0 && (n < 4 || (n & (n - 1)) != 0))
        return 0;
    cap = n < 4 ? 4 : n * 2;
    if (cap > SIZE_MAX / size)
        return -1;
    q = realloc(*p, cap * size);
    if (q == NULL)
        return -1;
    *p = q;
    return 0;
}

cumod_err
cumod__imeta_add_kernel(cumod_imeta *m, const char *name, size_t len,
                        cumod_kdesc **k, char *msg, size_t msglen)
{
    cumod_kdesc *d;
    void *p = m->kernels;

    if (meta_grow(&p, m->nkernels, sizeof(*d)) != 0)
        goto nomem;
    m->kernels = p;
    d = &m->kernels[m->nkernels];
    memset(d, 0, sizeof(*d));
    if ((d->name = strndup(name, len)) == NULL)
        goto nomem;
    d->registers = -1;
    m->nkernels++;
    *k = d;
    return CUMOD_OK;
nomem:
    return cumod__errf(msg, msglen, CUMOD_ENOMEM,
                       "no memory for the description of kernel %zu",
                       m->nkernels);
}

cumod_err
cumod__imeta_add_global(cumod_imeta *m, const char *name, size_t len,
                        uint64_t size, int constant, char *msg, size_t msglen)
{
    cumod_gdesc *g;
    void *p = m->globals;

    if (meta_grow(&p, m->nglobals, sizeof(*g)) != 0)
        goto nomem;
    m->globals = p;
    g = &m->globals[m->nglobals];
    if ((g->name = strndup(name, len)) == NULL)
        goto nomem;
    g->size = size;
    g->constant = constant;
    m->nglobals++;
    return CUMOD_OK;
nomem:
    return cumod__errf(msg, msglen, CUMOD_ENOMEM,
                       "no memory for the description of global %zu",
                       m->nglobals);
}

void
cumod__imeta_fini(cumod_imeta *m)
{
    size_t i;

    if (m == NULL)
        return;
    for (i = 0; i < m->nkernels; i++) {
        free(m->kernels[i].name);
        free(m->kernels[i].params);
    }
    for (i = 0; i < m->nglobals; i++)
        free(m->globals[i].name);
    free(m->kernels);
    free(m->globals);
    memset(m, 0, sizeof(*m));
}
