/* SPDX-License-Identifier: MIT */
/*
 * An id map: 64-bit ids to non-NULL pointers, an open-addressed hash table
 * (linear probing, backward-shift deletion, so no tombstones build up), in
 * the spirit of nng's nni_id_map. Lookups, inserts and removals are O(1)
 * on average; the table doubles past 3/4 full and halves below 1/8.
 *
 * Not thread-safe: a map belongs to one thread (the front's loop) or to
 * whoever holds the lock that guards it.
 */
#ifndef CUMOD_IDMAP_H
#define CUMOD_IDMAP_H

#include <stddef.h>
#include <stdint.h>

#include "cumod/errors.h"

typedef struct cumod_idmap {
    uint64_t *ids;
    void **vals; /* NULL: an empty slot */
    size_t cap;  /* 0 or a power of two */
    size_t count;
} cumod_idmap;

/* An empty map; allocates nothing until the first set. */
void cumod__idmap_init(cumod_idmap *m);

/* Frees the table (not the values). The map is empty after, and usable. */
void cumod__idmap_fini(cumod_idmap *m);

/* The value of id, or NULL. */
void *cumod__idmap_get(const cumod_idmap *m, uint64_t id);

/* Maps id to val (non-NULL), replacing what was there. CUMOD_OK, or
 * CUMOD_ENOMEM (the map is unchanged), or CUMOD_EINVAL for a NULL val. */
cumod_err cumod__idmap_set(cumod_idmap *m, uint64_t id, void *val);

/* Removes id; returns what it mapped to, or NULL. */
void *cumod__idmap_remove(cumod_idmap *m, uint64_t id);

static inline size_t
cumod__idmap_count(const cumod_idmap *m)
{
    return m->count;
}

/* Iteration: start with *cursor = 0; each call returns the next value (and
 * its id in *id if id is non-NULL), NULL at the end. The map must not
 * change during an iteration (collect first, then remove). */
void *cumod__idmap_next(const cumod_idmap *m, size_t *cursor, uint64_t *id);

#endif
