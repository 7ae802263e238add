/* SPDX-License-Identifier: MIT */
/*
 * A tenant for domains_test and gpu_domains_test (and the domains
 * benchmark): a process of its own, run as whatever user the suite chose
 * (a forked child cannot use nng, so the suite execs this), on the device
 * $CUMOD_DEVICE names (cumod_open reads it).
 *
 *   domain_client URL check STOPFILE REAL
 *       Checks vadd in a loop until STOPFILE exists (at most 60 s): three
 *       buffers made once, a launch waited for, c read back and, with REAL
 *       1, compared with a + b. Prints "ready" once its buffers are made,
 *       then at the end one line:
 *         ok=N failed=F lost=L gap_us=G first=ERROR
 *       failed: launches or reads that failed; lost: 1 when its buffers
 *       no longer hold what was written (read back at the end); gap_us:
 *       the longest time between two successful rounds.
 *   domain_client URL fault MODULE:KERNEL DEADLINE_MS
 *       Launches KERNEL(p) once on a fresh zeroed buffer, with that
 *       deadline (0: the daemon's) and waits; prints "code=NAME detail"
 *       and exits with the cumod error (0: it ran).
 *   domain_client URL hold
 *       Allocates a buffer (its domain's executor starts), prints "ready"
 *       and waits for a line on stdin (or EOF) before it disconnects.
 *   domain_client URL alloc BYTES
 *       Allocates BYTES and exits with the cumod error; the detail goes
 *       to stdout.
 *   domain_client URL domains
 *       Lists the domains status shows it (cumod_domains_get), one
 *       "domain NAME device N pid P" line each, after "mine NAME".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cumod/cumod.h"

#define N 4096

static double
now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int
dc_check(cumod_client *c, const char *stopfile, int real)
{
    static float a[N], b[N], out[N], back[N];
    cumod_buffer da, db, dc;
    long ok = 0, failed = 0;
    int lost = 0;
    char first[300] = "none";
    double last = now_us(), gap = 0, t0 = last;

    for (int i = 0; i < N; i++) {
        a[i] = (float)i;
        b[i] = (float)(2 * i);
    }
    if (cumod_buffer_alloc(c, sizeof(a), &da) != CUMOD_OK ||
        cumod_buffer_alloc(c, sizeof(b), &db) != CUMOD_OK ||
        cumod_buffer_alloc(c, sizeof(out), &dc) != CUMOD_OK ||
        cumod_buffer_write(c, da, 0, a, sizeof(a), 0) != CUMOD_OK ||
        cumod_buffer_write(c, db, 0, b, sizeof(b), 0) != CUMOD_OK) {
        printf("setup failed: %s\n", cumod_last_detail());
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    cumod_arg args[] = {cumod_arg_buffer(da, 0), cumod_arg_buffer(db, 0),
                        cumod_arg_buffer(dc, 0), cumod_arg_i32(N)};
    cumod_launch_params p = {.kernel = "vadd:vadd",
                             .grid = {N / 256, 1, 1},
                             .block = {256, 1, 1},
                             .nargs = 4,
                             .args = args};
    while (access(stopfile, F_OK) != 0 && now_us() - t0 < 60e6) {
        int rv = cumod_launch(c, &p, NULL, NULL);
        if (rv == CUMOD_OK)
            rv = cumod_buffer_read(c, dc, 0, out, sizeof(out), 0);
        if (rv == CUMOD_OK && real)
            for (int i = 0; i < N; i++)
                if (out[i] != a[i] + b[i]) {
                    rv = CUMOD_EIO;
                    break;
                }
        if (rv != CUMOD_OK) {
            if (failed++ == 0)
                snprintf(first, sizeof(first), "%s:%s", cumod_errname(rv),
                         rv == CUMOD_EIO ? "wrong sums" : cumod_last_detail());
            continue;
        }
        double now = now_us();
        if (now - last > gap)
            gap = now - last;
        last = now;
        ok++;
    }
    /* Its buffers still hold what it wrote: nothing of its was lost. */
    if (cumod_buffer_read(c, da, 0, back, sizeof(back), 0) != CUMOD_OK ||
        memcmp(back, a, sizeof(a)) != 0)
        lost = 1;
    for (char *q = first; *q; q++)
        if (*q == ' ' || *q == '\n')
            *q = '_';
    printf("ok=%ld failed=%ld lost=%d gap_us=%.0f first=%s\n", ok, failed, lost,
           gap, first);
    return 0;
}

static int
dc_fault(cumod_client *c, const char *kernel, unsigned deadline_ms)
{
    cumod_buffer p;
    int rv;

    if ((rv = cumod_buffer_alloc(c, 4096, &p)) != CUMOD_OK ||
        (rv = cumod_buffer_memset(c, p, 0, 4096, 0, 0, NULL)) != CUMOD_OK) {
        printf("code=%s %s\n", cumod_errname(rv), cumod_last_detail());
        return rv;
    }
    cumod_arg args[] = {cumod_arg_buffer(p, 0)};
    cumod_launch_params l = {.kernel = kernel,
                             .grid = {1, 1, 1},
                             .block = {32, 1, 1},
                             .nargs = 1,
                             .args = args,
                             .deadline_ms = deadline_ms};
    rv = cumod_launch(c, &l, NULL, NULL);
    printf("code=%s %s\n", cumod_errname(rv), rv ? cumod_last_detail() : "ran");
    return rv;
}

int
main(int argc, char **argv)
{
    cumod_client *c;
    int rv;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 3) {
        fprintf(stderr,
                "usage: domain_client URL check|fault|hold|alloc ...\n");
        return 2;
    }
    if ((rv = cumod_open(argv[1], 20000, &c)) != CUMOD_OK) {
        printf("open failed: %s\n", cumod_last_detail());
        return rv;
    }
    if (strcmp(argv[2], "check") == 0 && argc >= 5) {
        rv = dc_check(c, argv[3], atoi(argv[4]));
    } else if (strcmp(argv[2], "fault") == 0 && argc >= 5) {
        rv = dc_fault(c, argv[3], (unsigned)atoi(argv[4]));
    } else if (strcmp(argv[2], "hold") == 0) {
        cumod_buffer b;
        if ((rv = cumod_buffer_alloc(c, 4096, &b)) == CUMOD_OK) {
            printf("ready\n");
            char line[16];
            (void)!fgets(line, sizeof(line), stdin);
        } else {
            printf("hold failed: %s\n", cumod_last_detail());
        }
    } else if (strcmp(argv[2], "alloc") == 0 && argc >= 4) {
        cumod_buffer b;
        rv = cumod_buffer_alloc(c, strtoull(argv[3], NULL, 0), &b);
        printf("%s %s\n", cumod_errname(rv), rv ? cumod_last_detail() : "");
    } else if (strcmp(argv[2], "domains") == 0) {
        cumod_domains *d = NULL;
        if ((rv = cumod_domains_get(c, &d)) == CUMOD_OK) {
            printf("mine %s\n", d->domain);
            for (size_t i = 0; i < d->ndomains; i++)
                printf("domain %s device %d pid %lld\n", d->domains[i].name,
                       d->domains[i].device,
                       (long long)d->domains[i].executor_pid);
            cumod_domains_free(d);
        }
    } else {
        fprintf(stderr, "domain_client: unknown mode %s\n", argv[2]);
        rv = 2;
    }
    cumod_close(c);
    return rv;
}
