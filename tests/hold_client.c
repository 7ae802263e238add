/*
 * A client that connects to URL, allocates BYTES of device memory, says
 * "ready" on stdout and waits to be killed: the data suite kills it with
 * SIGKILL to check that a dead client's session is cleaned up. (A forked
 * child cannot do this: Criterion runs on nng, which refuses fork.)
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

    if (argc != 3) {
        fprintf(stderr, "usage: hold_client URL BYTES\n");
        return 2;
    }
    if (cumod_open(argv[1], 10000, &c) != CUMOD_OK ||
        cumod_buffer_alloc(c, strtoull(argv[2], NULL, 10), &b) != CUMOD_OK) {
        fprintf(stderr, "hold_client: %s\n", cumod_last_detail());
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    for (;;)
        pause();
}
