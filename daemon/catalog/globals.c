/* SPDX-License-Identifier: MIT */
/*
 * Module globals in the catalog: the writes clients make to a module's
 * __device__ and __constant__ variables are kept here, per module, as a
 * shadow of each global with a mask of the bytes written, so that every
 * later generation gets them before it serves (the executor applies the
 * globals spec a LOAD carries: channel.h). A generation's globals (their
 * device addresses and sizes) come back in the LOAD's reply.
 *
 * A global's kept bytes are bounded (CUMOD_GLOBALS_KEPT_MAX per module):
 * a write past it is refused, and says so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog_internal.h"
#include "cumod/errors.h"
#include "common/log.h"

#define CUMOD_GLOBALS_KEPT_MAX ((uint64_t)16 << 20)

static cumod_kept_global *
glob_kept(const cumod_module *m, const char *name)
{
    for (uint32_t i = 0; i < m->nkept; i++)
        if (strcmp(m->kept[i].name, name) == 0)
            return &m->kept[i];
    return NULL;
}

const cumod_gen_global *
cumod__gen_global(const cumod_gen *g, const char *name)
{
    for (uint32_t i = 0; g != NULL && i < g->nglobals; i++)
        if (strcmp(g->globals[i].name, name) == 0)
            return &g->globals[i];
    return NULL;
}

cumod_err
cumod__globals_keep(cumod_module *m, const char *name, uint64_t size,
                    uint64_t offset, const void *data, uint64_t len,
                    cumod_status *st)
{
    cumod_kept_global *k = glob_kept(m, name);
    uint64_t total = 0;

    for (uint32_t i = 0; i < m->nkept; i++)
        total += m->kept[i].size;
    if (k == NULL) {
        if (total + size > CUMOD_GLOBALS_KEPT_MAX)
            return cumod__status_set(
                st, CUMOD_ELIMIT,
                "global %s of %s: keeping its %llu bytes would pass the "
                "%llu bytes of globals cumodd keeps per module",
                name, m->name, (unsigned long long)size,
                (unsigned long long)CUMOD_GLOBALS_KEPT_MAX);
        cumod_kept_global *a =
            realloc(m->kept, (m->nkept + 1) * sizeof(*m->kept));
        if (a == NULL)
            return cumod__status_set(st, CUMOD_ENOMEM, "out of memory");
        m->kept = a;
        k = &m->kept[m->nkept];
        memset(k, 0, sizeof(*k));
        if ((k->name = strdup(name)) == NULL ||
            (k->bytes = calloc(1, size ? size : 1)) == NULL ||
            (k->mask = calloc(1, size ? size : 1)) == NULL) {
            free(k->name);
            free(k->bytes);
            return cumod__status_set(st, CUMOD_ENOMEM, "out of memory");
        }
        k->size = size;
        m->nkept++;
    } else if (k->size != size) {
        /* The global changed size with a generation whose load accepted
         * it (it had no writes then): start again at the new size. */
        uint8_t *b = calloc(1, size ? size : 1),
                *mk = calloc(1, size ? size : 1);
        if (b == NULL || mk == NULL) {
            free(b);
            free(mk);
            return cumod__status_set(st, CUMOD_ENOMEM, "out of memory");
        }
        free(k->bytes);
        free(k->mask);
        k->bytes = b;
        k->mask = mk;
        k->size = size;
    }
    memcpy(k->bytes + offset, data, len);
    memset(k->mask + offset, 1, len);
    m->globals_version++;
    return CUMOD_OK;
}

uint64_t
cumod__globals_kept_bytes(const cumod_module *m, const char *name)
{
    const cumod_kept_global *k = glob_kept(m, name);
    uint64_t n = 0;
    for (uint64_t i = 0; k != NULL && i < k->size; i++)
        n += k->mask[i];
    return n;
}

void
cumod__globals_fini(cumod_module *m)
{
    for (uint32_t i = 0; i < m->nkept; i++) {
        free(m->kept[i].name);
        free(m->kept[i].bytes);
        free(m->kept[i].mask);
    }
    free(m->kept);
    m->kept = NULL;
    m->nkept = 0;
}

/* A growing byte buffer. */
typedef struct glob_buf {
    uint8_t *p;
    size_t len, cap;
    int oom;
} glob_buf;

static void
glob_put(glob_buf *b, const void *p, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (q == NULL) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

/* One global of the spec: its name, size and the runs of written bytes. */
static void
glob_spec_one(glob_buf *b, const char *name, uint64_t size,
              const cumod_kept_global *k)
{
    uint16_t nl = (uint16_t)strnlen(name, 1000);
    uint32_t runs = 0;
    for (uint64_t i = 0; k != NULL && i < k->size; i++)
        if (k->mask[i] && (i == 0 || !k->mask[i - 1]))
            runs++;
    glob_put(b, &nl, sizeof(nl));
    glob_put(b, name, nl);
    glob_put(b, &size, sizeof(size));
    glob_put(b, &runs, sizeof(runs));
    for (uint64_t i = 0; k != NULL && i < k->size;) {
        if (!k->mask[i]) {
            i++;
            continue;
        }
        uint64_t end = i;
        while (end < k->size && k->mask[end] && end - i < UINT32_MAX)
            end++;
        uint32_t len = (uint32_t)(end - i);
        glob_put(b, &i, sizeof(i));
        glob_put(b, &len, sizeof(len));
        glob_put(b, k->bytes + i, len);
        i = end;
    }
}

cumod_err
cumod__globals_spec(const cumod_module *m, uint8_t **out, size_t *len)
{
    glob_buf b = {0};
    uint32_t n = m->nkept;

    /* The globals the image was described with (to learn their device
     * addresses), then those with kept writes that it did not list. */
    for (uint32_t i = 0; i < m->ndescribed; i++)
        if (glob_kept(m, m->described[i]) == NULL)
            n++;
    glob_put(&b, &n, sizeof(n));
    for (uint32_t i = 0; i < m->ndescribed; i++)
        if (glob_kept(m, m->described[i]) == NULL)
            glob_spec_one(&b, m->described[i], 0, NULL);
    for (uint32_t i = 0; i < m->nkept; i++)
        glob_spec_one(&b, m->kept[i].name, m->kept[i].size, &m->kept[i]);
    if (b.oom) {
        free(b.p);
        return CUMOD_ENOMEM;
    }
    *out = b.p;
    *len = b.len;
    return CUMOD_OK;
}

int
cumod__globals_parse(cumod_gen *g, const uint8_t *p, size_t len)
{
    const uint8_t *end = p + len;
    uint32_t n;

    if (len == 0)
        return 0; /* an executor that sends none */
    if (len < 4)
        return -1;
    memcpy(&n, p, 4);
    p += 4;
    if (n > 65536 ||
        (g->globals = calloc(n ? n : 1, sizeof(*g->globals))) == NULL)
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        uint16_t nl;
        if (end - p < 2)
            return -1;
        memcpy(&nl, p, 2);
        p += 2;
        if (end - p < (ptrdiff_t)nl + 16)
            return -1;
        cumod_gen_global *x = &g->globals[g->nglobals];
        if ((x->name = strndup((const char *)p, nl)) == NULL)
            return -1;
        p += nl;
        memcpy(&x->dptr, p, 8);
        memcpy(&x->size, p + 8, 8);
        p += 16;
        g->nglobals++;
    }
    return 0;
}

void
cumod__gen_globals_free(cumod_gen *g)
{
    for (uint32_t i = 0; i < g->nglobals; i++)
        free(g->globals[i].name);
    free(g->globals);
    g->globals = NULL;
    g->nglobals = 0;
}
