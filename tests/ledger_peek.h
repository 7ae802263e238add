/* SPDX-License-Identifier: MIT */
/*
 * What a sessions' ledger (daemon/front/state/sledger.h) says of one
 * client's session, for suites that also include the client's header
 * (whose cumod_ticket the front's session store names too).
 */
#ifndef CUMOD_TEST_LEDGER_PEEK_H
#define CUMOD_TEST_LEDGER_PEEK_H

#include <stddef.h>
#include <stdint.h>

typedef struct lp_buf {
    uint64_t handle, size, dptr;
} lp_buf;

typedef struct lp_view {
    int found; /* a session of pid holding buffers */
    int uid, device;
    char domain[64];
    size_t nbufs, nstreams, nsessions;
    lp_buf bufs[16];
    uint64_t records;
    char why[256]; /* the replay's word: "" when every byte was good */
} lp_view;

/* Replays the ledger in fd: 0 and *v filled, or -1 with why in v->why. */
int lp_peek(int fd, int pid, lp_view *v);

#endif
