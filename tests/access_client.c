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
 * user's (or it sees none).
 */
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
    if (rv == CUMOD_OK && twice) {
        char line[16];
        printf("served\n");
        fflush(stdout);
        if (fgets(line, sizeof(line), stdin) == NULL)
            return 97;
        rv = cumod_device_info_get(c, &di);
    }
    if (rv != CUMOD_OK)
        fprintf(stderr, "access_client: %s\n", cumod_last_detail());
    cumod_close(c);
    if (!twice && now_ms() - t0 > 10000)
        return 99;
    return rv;
}
