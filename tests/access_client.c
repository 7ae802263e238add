/* SPDX-License-Identifier: MIT */
/*
 * A client for access_test, run as another user (the suite forks, drops to
 * that user and execs this: a forked child cannot use nng, which refuses
 * fork). It connects to URL and asks for the device; with "twice", it then
 * writes "served" to stdout, waits for a line on stdin and asks again. Its
 * exit status is the last call's cumod error (0: served), 99 when the
 * answer took longer than 10 s (a timeout rather than a clear refusal);
 * the detail goes to stderr. With "sessions", it lists the sessions it may
 * see (cumod_sessions_list) and exits 98 when one of them is not its own
 * user's (or it sees none). With "fastpath", it checks that it is on the
 * fast path (96 if not, why on stderr), then maps a segment of its own and
 * moves 4 MiB up and back through a buffer (the staging segment): 95 when
 * a byte came back wrong, the call's error when one failed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cumod/cumod.h"

static double
now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int
fast_path_check(cumod_client *c)
{
    char why[320];
    size_t n = (size_t)4 << 20;
    cumod_segment *seg = NULL;
    cumod_buffer b;
    int rv;

    if (!cumod_fast_path(c)) {
        cumod_fast_path_why(c, why, sizeof(why));
        fprintf(stderr, "access_client: not on the fast path: %s\n", why);
        return 96;
    }
    if ((rv = cumod_segment_create(c, 1 << 20, &seg)) != CUMOD_OK)
        return rv;
    uint8_t *in = malloc(n), *back = malloc(n);
    if (in == NULL || back == NULL)
        return CUMOD_ENOMEM;
    for (size_t i = 0; i < n; i++)
        in[i] = (uint8_t)(i * 7 + 3);
    if ((rv = cumod_buffer_alloc(c, n, &b)) == CUMOD_OK &&
        (rv = cumod_buffer_write(c, b, 0, in, n, 0)) == CUMOD_OK &&
        (rv = cumod_buffer_read(c, b, 0, back, n, 0)) == CUMOD_OK &&
        memcmp(in, back, n) != 0)
        rv = 95;
    if (rv == CUMOD_OK && !cumod_fast_path(c)) {
        cumod_fast_path_why(c, why, sizeof(why));
        fprintf(stderr, "access_client: off the fast path: %s\n", why);
        rv = 96;
    }
    free(in);
    free(back);
    (void)cumod_segment_destroy(c, seg);
    return rv;
}

int
main(int argc, char **argv)
{
    cumod_client *c;
    cumod_device_info di;
    int rv, twice = argc > 2 && strcmp(argv[2], "twice") == 0;
    double t0 = now_ms();

    if (argc < 2) {
        fprintf(stderr, "usage: access_client URL [twice]\n");
        return 2;
    }
    if ((rv = cumod_open(argv[1], 20000, &c)) != CUMOD_OK) {
        fprintf(stderr, "access_client: %s\n", cumod_last_detail());
        return rv;
    }
    rv = cumod_device_info_get(c, &di);
    if (rv == CUMOD_OK && argc > 2 && strcmp(argv[2], "sessions") == 0) {
        cumod_session_info *l = NULL;
        size_t n = 0, theirs = 0;
        if ((rv = cumod_sessions_list(c, &l, &n, NULL)) == CUMOD_OK) {
            for (size_t i = 0; i < n; i++)
                if (l[i].uid != (int)getuid())
                    theirs++;
            fprintf(stderr,
                    "access_client: sees %zu sessions, %zu not its own\n", n,
                    theirs);
            if (n == 0 || theirs > 0)
                rv = 98;
        }
        free(l);
    }
    if (rv == CUMOD_OK && argc > 2 && strcmp(argv[2], "fastpath") == 0)
        rv = fast_path_check(c);
    if (rv == CUMOD_OK && twice) {
        char line[16];
        printf("served\n");
        fflush(stdout);
        if (fgets(line, sizeof(line), stdin) == NULL)
            return 97;
        rv = cumod_device_info_get(c, &di);
    }
    if (rv != CUMOD_OK && rv < 95)
        fprintf(stderr, "access_client: %s\n", cumod_last_detail());
    cumod_close(c);
    if (!twice && now_ms() - t0 > 10000)
        return 99;
    return rv;
}
