/* SPDX-License-Identifier: MIT */
/*
 * The fixture most daemon suites start from: cumodd on a kernel folder of
 * its own (a temp folder with copies of example kernels), and a client
 * connected to it. Failures stop the test with the daemon's log. Call from
 * Criterion tests only.
 */
#ifndef CUMOD_TEST_FIXTURE_H
#define CUMOD_TEST_FIXTURE_H

#include "cumod/cumod.h"
#include "harness.h"

typedef struct th_env {
    th_daemon d;
    char dir[256];       /* the watched folder */
    char fake_log[300];  /* dir/.fake.log: CUMOD_FAKE_LOG of the daemon */
    char fake_hold[300]; /* dir/.hold: CUMOD_FAKE_HOLD (absent: not held) */
    cumod_client *c;
} th_env;

/* Makes the temp folder and copies the named example kernels into it
 * ("vadd" copies vadd.cubin; kernels may be NULL). On a real-GPU suite
 * without a usable GPU, skips the test with a message. */
void th_env_init(th_env *t, const char *const *kernels);

/* Starts cumodd on the folder with extra arguments and NAME=VALUE settings
 * (both NULL-ended, may be NULL), the fake driver's log and hold file set to
 * fake_log and fake_hold, and connects t->c. */
void th_env_start(th_env *t, const char *const *extra, const char *const *env);

/* Copies src into the folder as name (cp: open, write, close). */
void th_env_put(th_env *t, const char *src, const char *name);

/* Disconnects, stops cumodd expecting exit status 0 (its log shown if not)
 * and removes the folder. */
void th_env_stop(th_env *t);

/* The fake driver's device pointer of the allocation of exactly bytes
 * bytes (the last one in its log), or 0. */
uint64_t th_env_alloc_ptr(th_env *t, size_t bytes);

/* The fake driver's log once it holds needle, or as it is after ms
 * (NULL if unreadable); the caller frees it. */
char *th_env_fake_log_wait(th_env *t, const char *needle, int ms);

/* How many times needle occurs in text. */
int th_count(const char *text, const char *needle);

#endif
