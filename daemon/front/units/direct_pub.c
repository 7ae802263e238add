/* SPDX-License-Identifier: MIT */
/*
 * Direct launches, the front's side: what is published to a unit's
 * executor for its checks (direct_impl.h): module generations and their
 * kernels, taken back before anything changes them; the unit's settings;
 * the direct page the executor reads before each launch.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"
#include "cumod/errors.h"
#include "data/ringio.h"
#include "front/units/direct.h"
#include "front/units/direct_impl.h"
#include "front/front.h"
#include "front/metrics.h"
#include "front/transport/ring_impl.h"

fdirect_unit *
cumod__fd_unit(cumod_unit *u)
{
    if (u->direct != NULL)
        return u->direct;
    fdirect_unit *du = calloc(1, sizeof(fdirect_unit));
    if (du == NULL)
        return NULL;
    du->page_fd = memfd_create("cumod-direct-page", MFD_CLOEXEC);
    void *pg = MAP_FAILED;
    if (du->page_fd < 0 ||
        ftruncate(du->page_fd, sizeof(cumod_direct_page)) != 0 ||
        (pg = mmap(NULL, sizeof(cumod_direct_page), PROT_READ | PROT_WRITE,
                   MAP_SHARED, du->page_fd, 0)) == MAP_FAILED) {
        if (du->page_fd >= 0)
            close(du->page_fd);
        free(du);
        return NULL;
    }
    du->page = pg;
    u->direct = du;
    return du;
}

/* Tells u's executor its direct page, once per executor. */
static void
fd_page_tell(cumod_unit *u, fdirect_unit *du)
{
    if (du->page_told || u->xc == NULL)
        return;
    if (cumod__xc_post(u->xc, CUMOD_CHAN_DIRECT_PAGE, NULL, 0, du->page_fd) ==
        CUMOD_OK)
        du->page_told = 1;
}

/* A slot of the page, or 0 when all are taken (the module is then not
 * published: its launches go through the front). */
static uint32_t
fd_slot_take(fdirect_unit *du)
{
    for (uint32_t i = 1; i < CUMOD_DIRECT_SLOTS; i++)
        if (!du->used[i]) {
            du->used[i] = 1;
            return i;
        }
    return 0;
}

int
cumod__fd_on(const cumod_front *f)
{
    return f->cfg->direct_launches && !f->stopping;
}

void
cumod__fd_snap(cumod_unit *u, const cumod_chan_snap *sn, const void *rest,
               size_t restlen)
{
    if (restlen == 0) {
        (void)cumod__xc_post(u->xc, CUMOD_CHAN_SNAP, sn, sizeof(*sn), -1);
        return;
    }
    char *buf = malloc(sizeof(*sn) + restlen);
    if (buf == NULL)
        return;
    memcpy(buf, sn, sizeof(*sn));
    memcpy(buf + sizeof(*sn), rest, restlen);
    (void)cumod__xc_post(u->xc, CUMOD_CHAN_SNAP, buf, sizeof(*sn) + restlen,
                         -1);
    free(buf);
}

/* --- Publishing modules ---------------------------------------------- */

static void
fd_pub_free(fpub *p)
{
    for (uint32_t i = 0; i < p->nk; i++)
        free(p->knames[i]);
    free(p->knames);
    free(p->kidx);
    free(p);
}

void
cumod__fd_pubs_free(fpub **list)
{
    while (*list != NULL) {
        fpub *p = *list;
        *list = p->next;
        fd_pub_free(p);
    }
}

/* The name of kernel index of p, or "". */
const char *
cumod__fd_pub_kernel(const fpub *p, uint32_t index)
{
    for (uint32_t i = 0; p != NULL && i < p->nk; i++)
        if (p->kidx[i] == index)
            return p->knames[i];
    return "";
}

static void
fd_unpublish(cumod_unit *u, fpub **pp)
{
    fdirect_unit *du = u->direct;
    fpub *p = *pp;
    /* Refused at the next launch, before anything else is answered. */
    if (p->slot != 0) {
        atomic_store_explicit(&du->page->valid[p->slot], 0,
                              memory_order_seq_cst);
        du->used[p->slot] = 0;
        p->slot = 0;
    }
    cumod_chan_snap sn = {.op = CUMOD_SNAP_MODULE_DEL};
    snprintf(sn.name, sizeof(sn.name), "%s", p->name);
    cumod__fd_snap(u, &sn, NULL, 0);
    *pp = p->next;
    /* Retired: launches of it may still be in flight there. */
    p->g = NULL;
    p->next = du->retired;
    du->retired = p;
    uint32_t n = 0;
    for (fpub **q = &du->retired; *q != NULL; q = &(*q)->next)
        if (++n == FD_RETIRED_MAX) {
            cumod__fd_pubs_free(&(*q)->next);
            break;
        }
}

/* The kernels of g as MODULE_SET carries them (direct_snap.c reads
 * them); NULL when out of memory. */
static char *
fd_kernels(cumod_gen *g, const cumod_module *m, uint32_t *nk, size_t *len)
{
    (void)m;
    uint32_t n = cumod__gen_kernel_count(g);
    size_t cap = 0;
    for (uint32_t i = 0; i < n; i++) {
        const cumod_kernel *k = cumod__gen_kernel_at(g, i);
        cap += sizeof(cumod_chan_skernel) +
               (((size_t)k->nparams * 10 + 7) & ~(size_t)7);
    }
    char *buf = calloc(1, cap ? cap : 1), *p = buf;
    if (buf == NULL)
        return NULL;
    for (uint32_t i = 0; i < n; i++) {
        const cumod_kernel *k = cumod__gen_kernel_at(g, i);
        cumod_chan_skernel sk = {.index = k->index,
                                 .nparams = k->nparams,
                                 .static_shared = k->static_shared,
                                 .max_threads = k->max_threads,
                                 .typed = k->pindirect != NULL,
                                 .carveout =
                                     cumod__gen_kernel_carveout(g, k->name)};
        memcpy(sk.cluster, k->cluster, sizeof(sk.cluster));
        snprintf(sk.name, sizeof(sk.name), "%s", k->name);
        if (strlen(k->name) >= sizeof(sk.name)) {
            /* A name this long is not served directly. */
            sk.name[0] = '\0';
        }
        memcpy(p, &sk, sizeof(sk));
        p += sizeof(sk);
        memcpy(p, k->offsets, k->nparams * sizeof(uint32_t));
        p += k->nparams * sizeof(uint32_t);
        memcpy(p, k->sizes, k->nparams * sizeof(uint32_t));
        p += k->nparams * sizeof(uint32_t);
        if (k->pindirect != NULL)
            memcpy(p, k->pindirect, k->nparams);
        if (k->pvalue != NULL)
            memcpy(p + k->nparams, k->pvalue, k->nparams);
        p += ((size_t)k->nparams * 2 + 7) & ~(size_t)7;
    }
    *nk = n;
    *len = (size_t)(p - buf);
    return buf;
}

void
cumod__fdirect_publish(cumod_unit *u, cumod_gen *g, uint64_t handle)
{
    cumod_front *f = u->f;
    fdirect_unit *du;
    const char *name = cumod__gen_module(g);
    uint32_t nk;
    size_t len;

    if (!cumod__fd_on(f) || handle == 0 || !cumod__unit_ready(u) ||
        (du = cumod__fd_unit(u)) == NULL || strlen(name) > 128)
        return;
    for (fpub **pp = &du->pubs; *pp != NULL; pp = &(*pp)->next)
        if (strcmp((*pp)->name, name) == 0) {
            if ((*pp)->handle == handle)
                return; /* published already */
            fd_unpublish(u, pp);
            break;
        }
    fpub *p = calloc(1, sizeof(*p));
    char *ks = fd_kernels(g, NULL, &nk, &len);
    if (p == NULL || ks == NULL) {
        free(p);
        free(ks);
        return;
    }
    snprintf(p->name, sizeof(p->name), "%s", name);
    p->handle = handle;
    p->generation = cumod__gen_number(g);
    p->g = g;
    p->kidx = calloc(nk ? nk : 1, sizeof(*p->kidx));
    p->knames = calloc(nk ? nk : 1, sizeof(*p->knames));
    if (p->kidx == NULL || p->knames == NULL) {
        fd_pub_free(p);
        free(ks);
        return;
    }
    for (uint32_t i = 0; i < nk; i++) {
        const cumod_kernel *k = cumod__gen_kernel_at(g, i);
        p->kidx[i] = k->index;
        if ((p->knames[i] = strdup(k->name)) == NULL) {
            p->nk = i;
            fd_pub_free(p);
            free(ks);
            return;
        }
        p->nk = i + 1;
    }
    fd_page_tell(u, du);
    if (!du->page_told || (p->slot = fd_slot_take(du)) == 0) {
        fd_pub_free(p); /* no room: served by the front */
        free(ks);
        return;
    }
    p->next = du->pubs;
    du->pubs = p;
    cumod_chan_snap sn = {.op = CUMOD_SNAP_MODULE_SET,
                          .a = handle,
                          .b = p->generation,
                          .c = nk,
                          .slot = p->slot};
    snprintf(sn.name, sizeof(sn.name), "%s", name);
    cumod__fd_snap(u, &sn, ks, len);
    free(ks);
    /* Valid once the executor has it (the message goes first). */
    atomic_store_explicit(&du->page->valid[p->slot], handle,
                          memory_order_release);
}

void
cumod__fdirect_module_changed(cumod_front *f, const char *module)
{
    if (module == NULL)
        return;
    for (uint32_t i = 0; i < f->nunits; i++) {
        cumod_unit *u = f->units[i];
        if (u->direct == NULL)
            continue;
        for (fpub **pp = &((fdirect_unit *)u->direct)->pubs; *pp != NULL;)
            if (strcmp((*pp)->name, module) == 0)
                fd_unpublish(u, pp);
            else
                pp = &(*pp)->next;
    }
}

void
cumod__fdirect_unloading(cumod_unit *u, uint64_t handle)
{
    if (u == NULL || u->direct == NULL)
        return;
    for (fpub **pp = &((fdirect_unit *)u->direct)->pubs; *pp != NULL;)
        if ((*pp)->handle == handle)
            fd_unpublish(u, pp);
        else
            pp = &(*pp)->next;
}

uint64_t
cumod__fdirect_handle_of(cumod_unit *u, const cumod_gen *g)
{
    if (u == NULL || u->direct == NULL || g == NULL)
        return 0;
    for (const fpub *p = ((fdirect_unit *)u->direct)->pubs; p != NULL;
         p = p->next)
        if (p->g == g)
            return p->handle;
    return 0;
}

/* The published generation of handle in u, or a retired one (its g
 * NULL), or NULL. */
const fpub *
cumod__fd_pub_of(cumod_unit *u, uint64_t handle)
{
    const fdirect_unit *du = u->direct;
    if (du == NULL)
        return NULL;
    for (const fpub *p = du->pubs; p != NULL; p = p->next)
        if (p->handle == handle)
            return p;
    for (const fpub *p = du->retired; p != NULL; p = p->next)
        if (p->handle == handle)
            return p;
    return NULL;
}

/* --- The unit's settings --------------------------------------------- */

static uint32_t
fd_flags(const cumod_unit *u)
{
    const cumod_front *f = u->f;
    uint32_t fl = 0;
    if (cumod__fd_on(f) && u->faults.nsuspects == 0 &&
        cumod__list_empty(&u->faults.solos))
        fl |= CUMOD_SNAP_F_DIRECT;
    if (f->cfg->allow_pointer_values)
        fl |= CUMOD_SNAP_F_POINTER_VALUES;
    return fl;
}

void
cumod__fdirect_unit_update(cumod_unit *u)
{
    fdirect_unit *du;
    if (u->xc == NULL || !cumod__unit_ready(u) ||
        (du = cumod__fd_unit(u)) == NULL)
        return;
    const cumod_config *cfg = u->f->cfg;
    uint32_t fl = fd_flags(u);
    /* At once for the next launch (a suspect, a stop); the message below
     * carries the deadlines. */
    fd_page_tell(u, du);
    atomic_store_explicit(&du->page->flags, fl, memory_order_seq_cst);
    /* deadlines ride along: a change of them is told too */
    uint64_t key = (uint64_t)fl ^ ((uint64_t)cfg->launch_deadline_ms << 8) ^
                   ((uint64_t)cfg->max_launch_deadline_ms << 36);
    if (du->told && du->flags == (uint32_t)key && du->flags == (uint32_t)key)
        return;
    du->told = 1;
    du->flags = (uint32_t)key;
    cumod_chan_snap sn = {.op = CUMOD_SNAP_UNIT,
                          .a = fl,
                          .b = cfg->launch_deadline_ms,
                          .c = cfg->max_launch_deadline_ms};
    cumod__fd_snap(u, &sn, NULL, 0);
}
