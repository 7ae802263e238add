/* SPDX-License-Identifier: MIT */
/*
 * Descriptors handed over (fdpass.c): a local datagram socket beside the
 * listening one, where a client sends cumodd its ring's or segment's
 * memfd (and the ring's doorbell) with SCM_RIGHTS and a token, which its
 * OpenRing or MapSegment then names. The kernel tells who sent each
 * (SCM_CREDENTIALS): a token is taken only by a session of the same
 * process and user. This is how a cumodd of another user (the service's
 * own) maps memory it could not open by name (a client's 0600 file).
 */
#ifndef CUMOD_FRONT_FDPASS_H
#define CUMOD_FRONT_FDPASS_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/status.h"

#define CUMOD_FDPASS_TOKEN 16 /* bytes of a token */
#define CUMOD_FDPASS_MAX_FDS 2

typedef struct cumod_fdpass cumod_fdpass;

/* Binds path (removed first: a socket of an earlier run), mode 0666 (a
 * token is worth nothing to another process) and polls it on loop. */
cumod_err cumod__fdpass_open(uv_loop_t *loop, const char *path,
                             cumod_fdpass **out, cumod_status *st);
/* Closes the socket (its handle on the loop), removes its path, closes
 * every descriptor not taken. NULL: nothing. */
void cumod__fdpass_close(cumod_fdpass *fp);
const char *cumod__fdpass_path(const cumod_fdpass *fp);

/* The descriptors process pid of user uid handed over with token, taken
 * (the caller owns them): exactly want of them, else an error that says
 * what was wrong. */
cumod_err cumod__fdpass_take(cumod_fdpass *fp, const uint8_t *token, size_t len,
                             int pid, int uid, int *fds, int want,
                             cumod_status *st);

/* fd, a client's memory cumodd is to map for a connection of uid (a shm
 * object opened by name, or a memfd handed over): a regular file of uid's,
 * sealed against shrinking when handed over (then no one can cut it under
 * cumodd), at least size bytes. Else an error naming label, its messages
 * starting with what ("ring", "map"); short_code is the code of a file
 * shorter than size. */
cumod_err cumod__fdpass_check_memory(int fd, int uid, uint64_t size, int handed,
                                     const char *what, const char *label,
                                     cumod_err short_code, cumod_status *st);

/* Counters for tests and metrics: handed over, refused (malformed, no
 * credentials, over the stash), expired or evicted untaken. */
void cumod__fdpass_stats(const cumod_fdpass *fp, uint64_t *received,
                         uint64_t *refused, uint64_t *dropped);

#endif
