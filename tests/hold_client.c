/* SPDX-License-Identifier: MIT */
/*
 * A client that connects to URL, allocates BYTES of device memory, says
 * "ready" on stdout and waits to be killed: the data suite kills it with
 * SIGKILL to check that a dead client's session is cleaned up. (A forked
 * child cannot do this: Criterion runs on nng, which refuses fork.) With
 * LAUNCHES, it first puts that many empty:empty launches in flight and
 * waits for the last one (the ring suite holds them and kills it there);
 * "ready" then says whether it has the fast path.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cumod/cumod.h"

int
main(int argc, char **argv)
{
    cumod_client *c;
    cumod_buffer b;

    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: hold_client URL BYTES [LAUNCHES]\n");
        return 2;
    }
    if (cumod_open(argv[1], 10000, &c) != CUMOD_OK ||
        cumod_buffer_alloc(c, strtoull(argv[2], NULL, 10), &b) != CUMOD_OK) {
        fprintf(stderr, "hold_client: %s\n", cumod_last_detail());
        return 1;
    }
    if (argc == 4) {
        cumod_launch_params e = {
            .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {1, 1, 1}};
        cumod_ticket tk = 0;
        for (long i = 0; i < strtol(argv[3], NULL, 10); i++)
            if (cumod_launch(c, &e, &tk, NULL) != CUMOD_OK) {
                fprintf(stderr, "hold_client: %s\n", cumod_last_detail());
                return 1;
            }
        printf("ready ring=%d\n", cumod_fast_path(c));
        fflush(stdout);
        cumod_wait(c, tk);
        return 3;
    }
    printf("ready\n");
    fflush(stdout);
    for (;;)
        pause();
}
