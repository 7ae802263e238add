/* SPDX-License-Identifier: MIT */
/*
 * Inside direct launches' front side (direct.h), shared by its rooms:
 * rings handed over and taken back (direct.c) and what is published to
 * the executors (direct_pub.c: modules, the unit's settings, the page).
 */
#ifndef CUMOD_FRONT_UNITS_DIRECT_IMPL_H
#define CUMOD_FRONT_UNITS_DIRECT_IMPL_H

#include <stdint.h>

#include "common/channel.h"
#include "front/front.h"
#include "front/units/unit.h"

/* A module's generation published in a unit. */
typedef struct fpub {
    char name[129];
    uint64_t handle;
    uint64_t generation;
    const cumod_gen *g; /* valid while published (taken back before it
                           can go); NULL once retired */
    uint32_t slot;      /* in the direct page while published */
    /* Its kernels' names by index, copied: the statistics of launches that
     * complete after it was taken back still name them. */
    uint32_t nk;
    uint32_t *kidx;
    char **knames;
    struct fpub *next;
} fpub;

/* Generations taken back, kept by name for the counts still to come. */
#define FD_RETIRED_MAX 32

typedef struct fdirect_unit {
    fpub *pubs;
    fpub *retired;  /* newest first, at most FD_RETIRED_MAX */
    uint32_t flags; /* CUMOD_SNAP_UNIT's, as last told */
    int told;       /* to this executor */
    /* The unit's direct page (cumod_direct_page): written here before
     * anything is answered after a change; its slots, used[i] when a
     * published module holds slot i (0 is never used). */
    cumod_direct_page *page;
    int page_fd;
    int page_told; /* to this executor */
    uint8_t used[CUMOD_DIRECT_SLOTS];
} fdirect_unit;

/* u's direct state, made (with its page) on first use; NULL when out
 * of memory. */
fdirect_unit *cumod__fd_unit(cumod_unit *u);

/* Whether direct launches are on (configured, and not stopping). */
int cumod__fd_on(const cumod_front *f);

/* Posts a CUMOD_CHAN_SNAP (sn and rest) to u's executor. */
void cumod__fd_snap(cumod_unit *u, const cumod_chan_snap *sn, const void *rest,
                    size_t restlen);

/* Frees a list of publications. */
void cumod__fd_pubs_free(fpub **list);

/* The name of kernel index of p, or "". */
const char *cumod__fd_pub_kernel(const fpub *p, uint32_t index);

/* The published generation of handle in u, or a retired one (its g
 * NULL), or NULL. */
const fpub *cumod__fd_pub_of(cumod_unit *u, uint64_t handle);

#endif
