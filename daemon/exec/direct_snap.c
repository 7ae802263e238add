/* SPDX-License-Identifier: MIT */
/*
 * The direct launches' snapshot (direct_impl.h): the modules the front
 * published, by name, under mods_rw (the dispatcher writes, the
 * submission threads read one launch at a time); a session's buffers and
 * streams, its thread's own; the unit's settings.
 */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "cumod/errors.h"
#include "direct_impl.h"
#include "modtab.h"

static uint32_t
snap_hash(const char *name)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h % DMOD_BUCKETS;
}

static void
snap_kern_fini(dkern *k)
{
    free(k->k.name);
    free(k->k.offsets);
    free(k->k.sizes);
    free(k->k.pindirect);
    free(k->k.pvalue);
}

static void
snap_mod_free(dmod *m)
{
    if (m == NULL)
        return;
    for (uint32_t i = 0; i < m->nkernels; i++)
        snap_kern_fini(&m->kernels[i]);
    free(m->kernels);
    free(m);
}

/* Takes module name out of the table (write-locked); the entry, or NULL. */
static dmod *
snap_mod_take(struct cumod_direct *d, const char *name)
{
    for (dmod **pp = &d->mods[snap_hash(name)]; *pp != NULL; pp = &(*pp)->next)
        if (strcmp((*pp)->name, name) == 0) {
            dmod *m = *pp;
            *pp = m->next;
            return m;
        }
    return NULL;
}

/* One kernel of a MODULE_SET, from p (n bytes left); the bytes it took,
 * or 0 when malformed. */
static size_t
snap_kern_read(dkern *k, const char *p, size_t n)
{
    cumod_chan_skernel sk;
    if (n < sizeof(sk))
        return 0;
    memcpy(&sk, p, sizeof(sk));
    if (sk.nparams > 4096 || memchr(sk.name, '\0', sizeof(sk.name)) == NULL)
        return 0;
    size_t arr = (size_t)sk.nparams * (2 * sizeof(uint32_t) + 2);
    size_t need = sizeof(sk) + ((arr + 7) & ~(size_t)7);
    if (n < need)
        return 0;
    memset(k, 0, sizeof(*k));
    k->k.name = strdup(sk.name);
    k->k.display = k->k.name;
    k->k.index = sk.index;
    k->k.nparams = sk.nparams;
    k->k.static_shared = sk.static_shared;
    k->k.registers = -1;
    k->k.max_threads = sk.max_threads;
    memcpy(k->k.cluster, sk.cluster, sizeof(k->k.cluster));
    k->k.max_dyn_shared = -1;
    k->carveout = sk.carveout;
    size_t np = sk.nparams ? sk.nparams : 1;
    k->k.offsets = calloc(np, sizeof(uint32_t));
    k->k.sizes = calloc(np, sizeof(uint32_t));
    if (k->k.name == NULL || k->k.offsets == NULL || k->k.sizes == NULL)
        return 0;
    const char *q = p + sizeof(sk);
    memcpy(k->k.offsets, q, sk.nparams * sizeof(uint32_t));
    q += sk.nparams * sizeof(uint32_t);
    memcpy(k->k.sizes, q, sk.nparams * sizeof(uint32_t));
    q += sk.nparams * sizeof(uint32_t);
    if (sk.typed) {
        if ((k->k.pindirect = calloc(np, 1)) == NULL ||
            (k->k.pvalue = calloc(np, 1)) == NULL)
            return 0;
        memcpy(k->k.pindirect, q, sk.nparams);
        memcpy(k->k.pvalue, q + sk.nparams, sk.nparams);
    }
    return need;
}

/* MODULE_SET: the module's new entry replaces its old one. */
static void
snap_mod_set(struct cumod_direct *d, const cumod_chan_snap *sn,
             const char *rest, size_t n)
{
    dmod *m = calloc(1, sizeof(*m));
    cumod_exec_module *em = cumod__exec_module(d->ex, sn->a);

    if (m == NULL || em == NULL || sn->c > 65536 ||
        memchr(sn->name, '\0', sizeof(sn->name)) == NULL)
        goto bad;
    memcpy(m->name, sn->name, sizeof(m->name));
    m->handle = sn->a;
    m->generation = sn->b;
    m->slot = sn->slot;
    m->m = em;
    if (sn->c > 0 && (m->kernels = calloc(sn->c, sizeof(dkern))) == NULL)
        goto bad;
    for (uint64_t i = 0; i < sn->c; i++) {
        size_t took = snap_kern_read(&m->kernels[i], rest, n);
        m->nkernels = (uint32_t)i + 1;
        if (took == 0 || m->kernels[i].k.index >= em->nfunc ||
            m->kernels[i].k.nparams != em->nparams[m->kernels[i].k.index])
            goto bad;
        rest += took;
        n -= took;
    }
    pthread_rwlock_wrlock(&d->mods_rw);
    dmod *old = snap_mod_take(d, m->name);
    uint32_t b = snap_hash(m->name);
    m->next = d->mods[b];
    d->mods[b] = m;
    pthread_rwlock_unlock(&d->mods_rw);
    snap_mod_free(old);
    CUMOD_LOGD("CUMOD-EXEC-DIRECT",
               "module %s generation %llu (handle %llx, %u kernels) is "
               "launched directly",
               m->name, (unsigned long long)m->generation,
               (unsigned long long)m->handle, m->nkernels);
    return;
bad:
    /* Not published: its launches go through the front. */
    CUMOD_LOGD("CUMOD-EXEC-DIRECT",
               "module %.128s (handle %llx) is not taken for direct launches",
               sn->name, (unsigned long long)sn->a);
    snap_mod_free(m);
}

int
cumod__direct_snap_apply(struct cumod_direct *d, const cumod_chan_snap *sn,
                         const void *rest, size_t restlen)
{
    switch (sn->op) {
    case CUMOD_SNAP_MODULE_SET:
        snap_mod_set(d, sn, rest, restlen);
        return 0;
    case CUMOD_SNAP_MODULE_DEL: {
        if (memchr(sn->name, '\0', sizeof(sn->name)) == NULL)
            return 0;
        pthread_rwlock_wrlock(&d->mods_rw);
        dmod *old = snap_mod_take(d, sn->name);
        pthread_rwlock_unlock(&d->mods_rw);
        snap_mod_free(old);
        return 0;
    }
    case CUMOD_SNAP_UNIT:
        atomic_store(&d->flags, (uint32_t)sn->a);
        atomic_store(&d->deadline_ms, (uint32_t)sn->b);
        atomic_store(&d->max_deadline_ms, (uint32_t)sn->c);
        return 0;
    case CUMOD_SNAP_LIMIT:
    case CUMOD_SNAP_GEMM:
    case CUMOD_SNAP_BUF_ADD:
    case CUMOD_SNAP_BUF_DEL:
    case CUMOD_SNAP_STREAM_ADD:
    case CUMOD_SNAP_STREAM_DEL:
        return 1;
    default:
        CUMOD_LOGW("CUMOD-EXEC-DIRECT", "unknown snapshot op %u", sn->op);
        return 0;
    }
}

void
cumod__direct_snap_session(dring *g, const cumod_chan_snap *sn)
{
    dbuf *b;
    switch (sn->op) {
    case CUMOD_SNAP_BUF_ADD:
        if ((b = malloc(sizeof(*b))) == NULL)
            return; /* unknown here: its launches go through the front */
        b->dptr = sn->b;
        b->size = sn->c;
        free(cumod__idmap_remove(&g->bufs, sn->a));
        if (cumod__idmap_set(&g->bufs, sn->a, b) != CUMOD_OK)
            free(b);
        return;
    case CUMOD_SNAP_BUF_DEL:
        free(cumod__idmap_remove(&g->bufs, sn->a));
        return;
    case CUMOD_SNAP_STREAM_ADD:
        if (sn->a != 0)
            (void)cumod__idmap_set(&g->streams, sn->a,
                                   (void *)(uintptr_t)sn->b);
        return;
    case CUMOD_SNAP_STREAM_DEL:
        (void)cumod__idmap_remove(&g->streams, sn->a);
        (void)cumod__idmap_remove(&g->gemm_ws, sn->a + 1);
        return;
    case CUMOD_SNAP_GEMM:
        (void)cumod__idmap_set(&g->gemm_ws, sn->a + 1, (void *)(uintptr_t)1);
        return;
    case CUMOD_SNAP_LIMIT:
        g->max_inflight =
            sn->a > CUMOD_DRING_SLOTS ? CUMOD_DRING_SLOTS : (uint32_t)sn->a;
        return;
    default:
        return;
    }
}

void
cumod__direct_ring_snap_fini(dring *g)
{
    size_t cur = 0;
    void *v;
    while ((v = cumod__idmap_next(&g->bufs, &cur, NULL)) != NULL)
        free(v);
    cumod__idmap_fini(&g->bufs);
    cumod__idmap_fini(&g->streams);
    cumod__idmap_fini(&g->gemm_ws);
}

void
cumod__direct_forget_modules(cumod_exec *ex)
{
    struct cumod_direct *d = ex->direct;
    dmod *all = NULL;
    if (d == NULL)
        return;
    pthread_rwlock_wrlock(&d->mods_rw);
    for (int b = 0; b < DMOD_BUCKETS; b++)
        while (d->mods[b] != NULL) {
            dmod *m = d->mods[b];
            d->mods[b] = m->next;
            m->next = all;
            all = m;
        }
    pthread_rwlock_unlock(&d->mods_rw);
    while (all != NULL) {
        dmod *m = all;
        all = m->next;
        snap_mod_free(m);
    }
}

void
cumod__direct_snap_fini(struct cumod_direct *d)
{
    for (int b = 0; b < DMOD_BUCKETS; b++)
        while (d->mods[b] != NULL) {
            dmod *m = d->mods[b];
            d->mods[b] = m->next;
            snap_mod_free(m);
        }
}

const dmod *
cumod__direct_mod_find(const struct cumod_direct *d, const char *module)
{
    for (const dmod *m = d->mods[snap_hash(module)]; m != NULL; m = m->next)
        if (strcmp(m->name, module) == 0)
            return m;
    return NULL;
}

const dkern *
cumod__direct_kern_find(const dmod *m, const char *fn)
{
    for (uint32_t i = 0; i < m->nkernels; i++)
        if (strcmp(m->kernels[i].k.name, fn) == 0)
            return &m->kernels[i];
    return NULL;
}

cumod_err
cumod__direct_buf_size(const void *arg, const char *what, uint64_t handle,
                       uint64_t *dptr, uint64_t *size, cumod_status *st)
{
    const dring *g = arg;
    const dbuf *b = cumod__idmap_get(&g->bufs, handle);
    if (b == NULL)
        return cumod__status_set(st, CUMOD_ENOENT,
                                 "%s: buffer %llu is not known here", what,
                                 (unsigned long long)handle);
    *dptr = b->dptr;
    *size = b->size;
    return CUMOD_OK;
}

cumod_err
cumod__direct_buf(const void *arg, const char *what, uint64_t handle,
                  uint64_t offset, uint64_t *dptr, cumod_status *st)
{
    uint64_t size;
    cumod_err rv = cumod__direct_buf_size(arg, what, handle, dptr, &size, st);
    if (rv == CUMOD_OK && offset > size)
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "%s: offset %llu is past the end of buffer "
                                 "%llu",
                                 what, (unsigned long long)offset,
                                 (unsigned long long)handle);
    return rv;
}
