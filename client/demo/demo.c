/* SPDX-License-Identifier: MIT */
/*
 * cumod_demo: what a client of cumodd does, in two parts.
 *  1. c = a + b on N floats through vadd:vadd, the bulk data going both
 *     ways through one shared-memory segment; every element checked.
 *  2. a hot reload under load (demo_reload.c).
 * Exit status: 0 all correct; 1 a wrong result, a failed launch or a
 * daemon error; 2 usage.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "demo.h"

#ifndef CUMOD_DEMO_VARIANT
#define CUMOD_DEMO_VARIANT "vadd.cubin"
#endif

static void
demo_on_signal(int sig)
{
    (void)sig;
    cumod__demo_interrupted = 1;
}

static int
demo_fail(const char *what, int rv)
{
    const char *detail = cumod_last_detail();
    fprintf(stderr, "cumod_demo: %s: %s\n", what,
            detail[0] ? detail : cumod_strerror(rv));
    return 1;
}

static void
demo_usage(FILE *f)
{
    fprintf(f, "Usage: cumod_demo [--url URL] [--kernels DIR] [--variant PATH] "
               "[--n N]\n"
               "Adds two vectors of N floats through cumodd (vadd:vadd, a "
               "shared segment\n"
               "for the data), then replaces DIR/vadd.cubin with the variant "
               "(c = a - b)\n"
               "and back while a second connection keeps launching, checking "
               "every result.\n"
               "  --url URL      the daemon (default $CUMOD_URL, "
               "else " CUMOD_DEFAULT_URL ")\n"
               "  --kernels DIR  the folder cumodd watches (without it, no "
               "reload part)\n"
               "  --variant PATH the replacement vadd.cubin "
               "(default " CUMOD_DEMO_VARIANT ")\n"
               "  --n N          floats to add (default 1000000)\n");
}

/* Bytes per second as GB/s. */
static double
demo_gbps(size_t bytes, uint64_t ns)
{
    return ns ? (double)bytes / (double)ns : 0.0;
}

/* The three buffers and the segment of part 1, freed by demo_vadd. */
typedef struct demo_data {
    cumod_buffer a, b, c;
    cumod_segment *seg;
} demo_data;

static int
demo_vadd_run(cumod_client *c, demo_data *d, size_t n)
{
    size_t bytes = n * sizeof(float);
    cumod_launch_params p = {
        .kernel = "vadd:vadd",
        .grid = {(unsigned)((n + 255) / 256), 1, 1},
        .block = {256, 1, 1},
    };
    cumod_arg args[4];
    uint64_t t0, t1, t2, t3, generation;
    cumod_ticket ticket;
    size_t wrong = 0, first_wrong = 0;
    float *h;
    int rv;

    if ((rv = cumod_buffer_alloc(c, bytes, &d->a)) != CUMOD_OK ||
        (rv = cumod_buffer_alloc(c, bytes, &d->b)) != CUMOD_OK ||
        (rv = cumod_buffer_alloc(c, bytes, &d->c)) != CUMOD_OK)
        return demo_fail("allocating the buffers", rv);
    /* One segment: a and b go in through it, c comes back into its first
     * half. */
    if ((rv = cumod_segment_create(c, 2 * bytes, &d->seg)) != CUMOD_OK)
        return demo_fail("creating a shared segment", rv);
    h = cumod_segment_data(d->seg);
    for (size_t i = 0; i < n; i++) {
        h[i] = (float)i;
        h[n + i] = (float)(2 * i);
    }
    t0 = cumod__demo_now_ns();
    if ((rv = cumod_copy_to_device(c, d->a, 0, d->seg, 0, bytes, 0, &ticket)) !=
            CUMOD_OK ||
        (rv = cumod_copy_to_device(c, d->b, 0, d->seg, bytes, bytes, 0,
                                   NULL)) != CUMOD_OK)
        return demo_fail("copying a and b to the device", rv);
    t1 = cumod__demo_now_ns();
    args[0] = cumod_arg_buffer(d->a, 0);
    args[1] = cumod_arg_buffer(d->b, 0);
    args[2] = cumod_arg_buffer(d->c, 0);
    args[3] = cumod_arg_i32((int32_t)n);
    p.nargs = 4;
    p.args = args;
    if ((rv = cumod_launch(c, &p, NULL, &generation)) != CUMOD_OK)
        return demo_fail("launching vadd:vadd", rv);
    memset(h, 0xff, bytes); /* so that a copy that did nothing shows */
    t2 = cumod__demo_now_ns();
    if ((rv = cumod_copy_to_host(c, d->seg, 0, d->c, 0, bytes, 0, NULL)) !=
        CUMOD_OK)
        return demo_fail("copying c back", rv);
    t3 = cumod__demo_now_ns();
    for (size_t i = 0; i < n; i++) {
        /* The sum in float, as the kernel computes it: 3 * i exactly while
         * 3 * i < 2^24. */
        float want = (float)i + (float)(2 * i);
        if (h[i] != want && wrong++ == 0)
            first_wrong = i;
    }
    printf("vadd:vadd (generation %llu) on %zu floats: %s",
           (unsigned long long)generation, n,
           wrong ? "" : "every c[i] == 3*i\n");
    if (wrong) {
        float want = (float)first_wrong + (float)(2 * first_wrong);
        printf("%zu elements WRONG, the first c[%zu] = %g (want %g)\n", wrong,
               first_wrong, (double)h[first_wrong], (double)want);
    }
    printf("shared-segment copies: %.1f MB in %.2f ms to the device "
           "(%.1f GB/s), %.1f MB in %.2f ms back (%.1f GB/s)\n",
           2.0 * (double)bytes / 1e6, (double)(t1 - t0) / 1e6,
           demo_gbps(2 * bytes, t1 - t0), (double)bytes / 1e6,
           (double)(t3 - t2) / 1e6, demo_gbps(bytes, t3 - t2));
    return wrong ? 1 : 0;
}

static int
demo_vadd(cumod_client *c, size_t n)
{
    demo_data d = {0};
    int rv = demo_vadd_run(c, &d, n);

    cumod_segment_destroy(c, d.seg);
    if (d.a)
        cumod_buffer_free(c, d.a);
    if (d.b)
        cumod_buffer_free(c, d.b);
    if (d.c)
        cumod_buffer_free(c, d.c);
    return rv;
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"url", required_argument, NULL, 'u'},
        {"kernels", required_argument, NULL, 'k'},
        {"variant", required_argument, NULL, 'v'},
        {"n", required_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    demo_opts o = {.url = getenv("CUMOD_URL"),
                   .variant = CUMOD_DEMO_VARIANT,
                   .n = 1000000};
    struct sigaction sa;
    cumod_client *c;
    int ch, rv;

    while ((ch = getopt_long(argc, argv, "u:k:v:n:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'u':
            o.url = optarg;
            break;
        case 'k':
            o.kernels = optarg;
            break;
        case 'v':
            o.variant = optarg;
            break;
        case 'n': {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(optarg, &end, 10);
            /* The kernel's n is an int. */
            if (errno || end == optarg || *end || optarg[0] == '-' || v == 0 ||
                v > 0x7fffffff) {
                fprintf(stderr,
                        "cumod_demo: --n: '%s' is not a count from 1 "
                        "to 2147483647\n",
                        optarg);
                return 2;
            }
            o.n = (size_t)v;
            break;
        }
        case 'h':
            demo_usage(stdout);
            return 0;
        default:
            demo_usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "cumod_demo: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = demo_on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    if ((rv = cumod_open(o.url, 0, &c)) != CUMOD_OK)
        return demo_fail("connect", rv);
    rv = demo_vadd(c, o.n);
    if (o.kernels == NULL)
        printf("(no --kernels folder: the hot-reload part is skipped)\n");
    else if (rv == 0)
        rv = cumod__demo_reload(c, &o);
    cumod_close(c);
    return rv;
}
