/* SPDX-License-Identifier: MIT */
/*
 * Streams to submission threads (route.h).
 */
#include "route.h"

#include <string.h>

void
cumod__route_init(cumod_route *rt, unsigned n)
{
    memset(rt, 0, sizeof(*rt));
    rt->n = n < 1                         ? 1
            : n > CUMOD_ROUTE_MAX_THREADS ? CUMOD_ROUTE_MAX_THREADS
                                          : n;
    cumod__idmap_init(&rt->keys);
}

void
cumod__route_fini(cumod_route *rt)
{
    cumod__idmap_fini(&rt->keys);
    memset(rt->owned, 0, sizeof(rt->owned));
}

unsigned
cumod__route_thread(cumod_route *rt, uint64_t key)
{
    void *v = cumod__idmap_get(&rt->keys, key);
    if (v != NULL)
        return (unsigned)((uintptr_t)v - 1);
    unsigned best = rt->next % rt->n;
    for (unsigned k = 1; k < rt->n; k++) {
        unsigned i = (rt->next + k) % rt->n;
        if (rt->owned[i] < rt->owned[best])
            best = i;
    }
    if (cumod__idmap_set(&rt->keys, key, (void *)(uintptr_t)(best + 1)) !=
        CUMOD_OK) {
        /* splitmix64's finalizer: every bit of the key reaches the top */
        uint64_t h = key;
        h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
        h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
        h ^= h >> 31;
        return (unsigned)(h % rt->n);
    }
    rt->owned[best]++;
    rt->next = best + 1;
    return best;
}

void
cumod__route_forget(cumod_route *rt, uint64_t key)
{
    void *v = cumod__idmap_remove(&rt->keys, key);
    if (v == NULL)
        return;
    unsigned i = (unsigned)((uintptr_t)v - 1);
    if (i < rt->n && rt->owned[i] > 0)
        rt->owned[i]--;
}

unsigned
cumod__route_owned(const cumod_route *rt, unsigned i)
{
    return i < rt->n ? rt->owned[i] : 0;
}
