/* SPDX-License-Identifier: MIT */
/*
 * A client that connects to URL, asks for the device's description, and
 * closes, printing how long cumod_close took ("closed in N ms") and what
 * libcumod logged ("log: ..."). shutdown_test runs it with
 * libcumod_test_hang_close.so preloaded (tests/hang_close.c), whose
 * nng_close never returns, to see the close bounded all the same.
 */
#include <stdio.h>
#include <time.h>

#include "cumod/cumod.h"

static void
close_client_log(int level, const char *msg, void *arg)
{
    (void)arg;
    printf("log: %d %s\n", level, msg);
    fflush(stdout);
}

int
main(int argc, char **argv)
{
    cumod_client *c;
    cumod_device_info di;
    struct timespec t0, t1;

    if (argc != 2) {
        fprintf(stderr, "usage: close_client URL\n");
        return 2;
    }
    cumod_set_log_handler(close_client_log, NULL);
    if (cumod_open(argv[1], 10000, &c) != CUMOD_OK ||
        cumod_device_info_get(c, &di) != CUMOD_OK) {
        fprintf(stderr, "close_client: %s\n", cumod_last_detail());
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cumod_close(c);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("closed in %.0f ms\n", (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
                                      (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    return 0;
}
