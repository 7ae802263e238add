/* SPDX-License-Identifier: MIT */
#include "idmap.h"

#include <stdlib.h>

#define IDMAP_MIN_CAP 16

static size_t
idmap_slot(uint64_t id, size_t cap)
{
    /* Fibonacci hashing: ids are often small and sequential. */
    return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

void
cumod__idmap_init(cumod_idmap *m)
{
    m->ids = NULL;
    m->vals = NULL;
    m->cap = 0;
    m->count = 0;
}

void
cumod__idmap_fini(cumod_idmap *m)
{
    free(m->ids);
    free(m->vals);
    cumod__idmap_init(m);
}

void *
cumod__idmap_get(const cumod_idmap *m, uint64_t id)
{
    if (m->count == 0)
        return NULL;
    for (size_t i = idmap_slot(id, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->vals[i] == NULL)
            return NULL;
        if (m->ids[i] == id)
            return m->vals[i];
    }
}

/* Puts (id, val) into a table known not to hold id and to have room. */
static void
idmap_put(uint64_t *ids, void **vals, size_t cap, uint64_t id, void *val)
{
    size_t i = idmap_slot(id, cap);
    while (vals[i] != NULL)
        i = (i + 1) & (cap - 1);
    ids[i] = id;
    vals[i] = val;
}

static cumod_err
idmap_resize(cumod_idmap *m, size_t cap)
{
    uint64_t *ids = calloc(cap, sizeof(*ids));
    void **vals = calloc(cap, sizeof(*vals));
    if (ids == NULL || vals == NULL) {
        free(ids);
        free(vals);
        return CUMOD_ENOMEM;
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->vals[i] != NULL)
            idmap_put(ids, vals, cap, m->ids[i], m->vals[i]);
    free(m->ids);
    free(m->vals);
    m->ids = ids;
    m->vals = vals;
    m->cap = cap;
    return CUMOD_OK;
}

cumod_err
cumod__idmap_set(cumod_idmap *m, uint64_t id, void *val)
{
    if (val == NULL)
        return CUMOD_EINVAL;
    if (m->count > 0)
        for (size_t i = idmap_slot(id, m->cap); m->vals[i] != NULL;
             i = (i + 1) & (m->cap - 1))
            if (m->ids[i] == id) {
                m->vals[i] = val;
                return CUMOD_OK;
            }
    if ((m->count + 1) * 4 > m->cap * 3) {
        cumod_err rv = idmap_resize(m, m->cap ? m->cap * 2 : IDMAP_MIN_CAP);
        if (rv != CUMOD_OK)
            return rv;
    }
    idmap_put(m->ids, m->vals, m->cap, id, val);
    m->count++;
    return CUMOD_OK;
}

void *
cumod__idmap_remove(cumod_idmap *m, uint64_t id)
{
    size_t mask = m->cap - 1, i;
    void *val;

    if (m->count == 0)
        return NULL;
    for (i = idmap_slot(id, m->cap);; i = (i + 1) & mask) {
        if (m->vals[i] == NULL)
            return NULL;
        if (m->ids[i] == id)
            break;
    }
    val = m->vals[i];
    m->vals[i] = NULL;
    m->count--;
    /* Backward shift: move later members of the probe run into the hole
     * when their home slot is not after it, so lookups never stop early. */
    for (size_t j = (i + 1) & mask; m->vals[j] != NULL; j = (j + 1) & mask) {
        size_t home = idmap_slot(m->ids[j], m->cap);
        /* j may move to i when home lies cyclically in (j, i]. */
        int movable =
            i <= j ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            m->ids[i] = m->ids[j];
            m->vals[i] = m->vals[j];
            m->vals[j] = NULL;
            i = j;
        }
    }
    if (m->cap > IDMAP_MIN_CAP && m->count * 8 < m->cap)
        (void)idmap_resize(m, m->cap / 2); /* a failed shrink is harmless */
    return val;
}

void *
cumod__idmap_next(const cumod_idmap *m, size_t *cursor, uint64_t *id)
{
    for (size_t i = *cursor; i < m->cap; i++)
        if (m->vals[i] != NULL) {
            *cursor = i + 1;
            if (id != NULL)
                *id = m->ids[i];
            return m->vals[i];
        }
    *cursor = m->cap;
    return NULL;
}
