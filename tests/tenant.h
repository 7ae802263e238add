/* SPDX-License-Identifier: MIT */
/*
 * Tenants for the domain suites (domains_test, gpu_domains_test):
 * tests/domain_client run as processes of their own (a forked child
 * cannot use nng, so it is exec'ed), as another user where asked.
 */
#ifndef CUMOD_TEST_TENANT_H
#define CUMOD_TEST_TENANT_H

#include <sys/types.h>

#include "fixture.h"

typedef struct th_tenant {
    pid_t pid;
    int in; /* its stdin (hold waits for a line) */
    char out[320];
} th_tenant;

/* Starts domain_client url args... as uid (-1: as we are), with env
 * (NAME=VALUE strings, may be NULL); its output goes to a file in t's
 * folder. */
void th_tenant_spawn(th_tenant *p, th_env *t, int uid, const char *const *env,
                     const char *url, const char *const *args);
/* Its output so far (a copy, never NULL). */
char *th_tenant_output(const th_tenant *p);
/* Waits until its output holds needle; fails the test after 60 s. */
void th_tenant_wait_for(const th_tenant *p, const char *needle);
/* Closes its stdin and waits for it: its exit status. */
int th_tenant_wait(th_tenant *p);
/* A tenant run to its end: its exit status, *out its output (caller
 * frees). */
int th_tenant_run(th_env *t, int uid, const char *const *env, const char *url,
                  const char *const *args, char **out);

/* A tenant checking vadd until th_check_stop (domain_client check). */
typedef struct th_check {
    th_tenant p;
    char stop[320];
} th_check;

typedef struct th_check_result {
    long ok, failed;
    int lost;
    double gap_ms;
    char first[256];
} th_check_result;

/* real: compare the sums (a real GPU). Returns once its buffers are made. */
void th_check_start(th_check *c, th_env *t, int uid, const char *const *env,
                    const char *url, int real);
void th_check_stop(th_check *c, th_check_result *r);

#endif
