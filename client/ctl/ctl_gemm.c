/* SPDX-License-Identifier: MIT */
/*
 * cumodctl gemm: one GEMM of a type and shape on buffers of its own, run
 * once and then timed. Its use is warming cumodd up: cuBLAS loads the
 * kernels a type and shape need at their first GEMM, and that load waits
 * for whatever runs on the device then (docs/gemm.md); run it at start
 * for the shapes your clients use, while the GPU is quiet.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "ctl_launch.h"
#include "json.h"

const char cumod__ctl_gemm_usage[] =
    "  gemm TYPE M N K [--batch B] [--transa] [--transb] [--c-type fp32]\n"
    "      [--repeat R] [--json]\n"
    "                C = A B of TYPE (fp32, fp64, fp16, bf16) on zeroed\n"
    "                buffers: the first run loads cuBLAS and the kernels of\n"
    "                that type and shape (run it at start to warm cumodd\n"
    "                up), then R more (default 10) are timed\n";

static int
gemm_usage(const char *msg, const char *arg)
{
    return cumod__ctl_usage("cumodctl: gemm: %s%s%s (see cumodctl --help)\n",
                            msg, arg ? ": " : "", arg ? arg : "");
}

static int
gemm_fail(const char *what, int rv)
{
    return cumod__ctl_fail(what, rv, NULL);
}

/* TYPE's value, element size and name as cumodctl prints it; 0 or -1. */
static int
gemm_type(const char *s, cumod_gemm_type *t, size_t *size, const char **name)
{
    static const struct {
        const char *name;
        cumod_gemm_type t;
        size_t size;
    } types[] = {
        {"fp32", CUMOD_GEMM_FP32, 4},
        {"fp64", CUMOD_GEMM_FP64, 8},
        {"fp16", CUMOD_GEMM_FP16, 2},
        {"bf16", CUMOD_GEMM_BF16, 2},
    };
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (strcasecmp(s, types[i].name) == 0) {
            *t = types[i].t;
            *size = types[i].size;
            *name = types[i].name;
            return 0;
        }
    return -1;
}

/* A count from 1 to max; 0 or -1. */
static int
gemm_count(const char *s, unsigned long long max, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < 1 || v > max)
        return -1;
    *out = (size_t)v;
    return 0;
}

static double
gemm_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int
gemm_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Allocates and zeroes *buf of bytes. */
static int
gemm_buffer(cumod_client *c, size_t bytes, cumod_buffer *buf)
{
    int rv = cumod_buffer_alloc(c, bytes, buf);
    if (rv == CUMOD_OK)
        rv = cumod_buffer_memset(c, *buf, 0, bytes, 0, 0, NULL);
    return rv;
}

/* One gemm command: the GEMM, its names, and how often it is timed. */
typedef struct gemm_job {
    cumod_gemm_desc d;
    size_t size, csize; /* element sizes of A and B, and of C */
    size_t batch, repeat;
    const char *tname, *cname; /* cname NULL: C is of TYPE */
} gemm_job;

/* The options and TYPE M N K into g: -1 to go on, else the exit status
 * (a usage error). */
static int
gemm_parse(int argc, char **argv, ctl *o, gemm_job *g)
{
    static const struct option opts[] = {
        {"batch", required_argument, NULL, 'b'},
        {"transa", no_argument, NULL, 'a'},
        {"transb", no_argument, NULL, 'B'},
        {"c-type", required_argument, NULL, 'c'},
        {"repeat", required_argument, NULL, 'r'},
        {"json", no_argument, NULL, 'j'},
        {NULL, 0, NULL, 0},
    };
    cumod_gemm_desc *d = &g->d;
    size_t dims[3];
    const char *ctype = NULL;
    int ch;

    optind = 0;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":b:aBc:r:j", opts, NULL)) != -1) {
        switch (ch) {
        case 'b':
            if (gemm_count(optarg, 1u << 20, &g->batch) != 0)
                return gemm_usage("--batch wants a count from 1 to 1048576",
                                  optarg);
            break;
        case 'a':
            d->transa = 1;
            break;
        case 'B':
            d->transb = 1;
            break;
        case 'c':
            ctype = optarg;
            break;
        case 'r':
            if (gemm_count(optarg, 100000, &g->repeat) != 0)
                return gemm_usage("--repeat wants a count from 1 to 100000",
                                  optarg);
            break;
        case 'j':
            o->json = 1;
            break;
        case ':':
            return gemm_usage("this option needs a value", argv[optind - 1]);
        default:
            return gemm_usage("unknown option", argv[optind - 1]);
        }
    }
    if (argc - optind != 4)
        return gemm_usage("give TYPE M N K", NULL);
    if (gemm_type(argv[optind], &d->type, &g->size, &g->tname) != 0)
        return gemm_usage("TYPE is fp32, fp64, fp16 or bf16", argv[optind]);
    for (int i = 0; i < 3; i++)
        if (gemm_count(argv[optind + 1 + i], 2147483647ull, &dims[i]) != 0)
            return gemm_usage("M, N and K are from 1 to 2147483647",
                              argv[optind + 1 + i]);
    d->m = dims[0];
    d->n = dims[1];
    d->k = dims[2];
    g->csize = g->size;
    if (ctype != NULL) {
        if (gemm_type(ctype, &d->c_type, &g->csize, &g->cname) != 0)
            return gemm_usage("--c-type is fp32, fp64, fp16 or bf16", ctype);
    }
    d->batch = g->batch;
    return -1;
}

/* The matrices' shapes: packed, one matrix after the other (the daemon
 * checks the rest, a type mix cuBLAS has not say, and says what is
 * wrong). -1 to go on, else the exit status. */
static int
gemm_shape(gemm_job *g, size_t *ea, size_t *eb, size_t *ec)
{
    cumod_gemm_desc *d = &g->d;
    size_t size = g->size, csize = g->csize, batch = g->batch;

    *ea = d->m * d->k;
    *eb = d->k * d->n;
    *ec = d->m * d->n;
    if (*ea / d->m != d->k || *eb / d->k != d->n || *ec / d->m != d->n ||
        *ea > SIZE_MAX / size / batch || *eb > SIZE_MAX / size / batch ||
        *ec > SIZE_MAX / csize / batch)
        return gemm_usage("the matrices do not fit in memory", NULL);
    if (batch > 1) {
        d->a.stride = *ea;
        d->b.stride = *eb;
        d->c.stride = *ec;
    }
    return -1;
}

/* The buffers, the first GEMM (timed into *first) and g->repeat more
 * (into ms, sorted): 0, or the exit status of a failure (reported). */
static int
gemm_run(cumod_client *c, gemm_job *g, size_t ea, size_t eb, size_t ec,
         double *first, double *ms)
{
    cumod_gemm_desc *d = &g->d;
    size_t size = g->size, csize = g->csize, batch = g->batch;
    int rv;

    if ((rv = gemm_buffer(c, ea * size * batch, &d->a.buffer)) != CUMOD_OK ||
        (rv = gemm_buffer(c, eb * size * batch, &d->b.buffer)) != CUMOD_OK ||
        (rv = gemm_buffer(c, ec * csize * batch, &d->c.buffer)) != CUMOD_OK)
        return gemm_fail("the buffers", rv);
    double t0 = gemm_now_ms();
    if ((rv = cumod_gemm(c, d, NULL)) != CUMOD_OK)
        return gemm_fail("the GEMM", rv);
    *first = gemm_now_ms() - t0;
    for (size_t i = 0; i < g->repeat; i++) {
        t0 = gemm_now_ms();
        if ((rv = cumod_gemm(c, d, NULL)) != CUMOD_OK)
            return gemm_fail("the GEMM", rv);
        ms[i] = gemm_now_ms() - t0;
    }
    qsort(ms, g->repeat, sizeof(*ms), gemm_cmp);
    return 0;
}

/* The result: the first run, the median and best of the rest (ms,
 * sorted), and the TFLOP/s at the median. */
static void
gemm_print(const ctl *o, const gemm_job *g, double first, const double *ms)
{
    const cumod_gemm_desc *d = &g->d;
    size_t batch = g->batch, repeat = g->repeat;
    const char *tname = g->tname, *cname = g->cname;
    double p50 = ms[repeat / 2], best = ms[0];
    double flops =
        2.0 * (double)d->m * (double)d->n * (double)d->k * (double)batch;
    double tflops = flops / (p50 * 1e-3) / 1e12;

    if (o->json) {
        char num[64];
        cumod_json j;
        cumod__json_init(&j, stdout, 1);
        cumod__json_begin_object(&j, NULL);
        cumod__json_string(&j, "type", tname);
        cumod__json_string(&j, "c_type", cname ? cname : tname);
        cumod__json_uint(&j, "m", d->m);
        cumod__json_uint(&j, "n", d->n);
        cumod__json_uint(&j, "k", d->k);
        cumod__json_uint(&j, "batch", batch);
        cumod__json_bool(&j, "transa", d->transa);
        cumod__json_bool(&j, "transb", d->transb);
        snprintf(num, sizeof(num), "%.3f", first);
        cumod__json_number(&j, "first_ms", num);
        cumod__json_uint(&j, "repeat", repeat);
        snprintf(num, sizeof(num), "%.3f", p50);
        cumod__json_number(&j, "p50_ms", num);
        snprintf(num, sizeof(num), "%.3f", best);
        cumod__json_number(&j, "best_ms", num);
        snprintf(num, sizeof(num), "%.2f", tflops);
        cumod__json_number(&j, "tflops", num);
        cumod__json_end_object(&j);
        cumod__json_finish(&j);
    } else {
        printf("gemm %s %zu x %zu x %zu%s%s", tname, d->m, d->n, d->k,
               d->transa ? " A^T" : "", d->transb ? " B^T" : "");
        if (cname != NULL)
            printf(" to %s", cname);
        if (batch > 1)
            printf(", batch %zu", batch);
        printf(": the first %.2f ms (with cuBLAS's loads, if any), then "
               "p50 %.3f ms (best %.3f) over %zu = %.2f TFLOP/s, waited for "
               "each\n",
               first, p50, best, repeat, tflops);
    }
}

int
cumod__ctl_gemm(int argc, char **argv, ctl *o)
{
    gemm_job g = {.d = {.order = CUMOD_GEMM_ROW_MAJOR, .alpha = 1},
                  .batch = 1,
                  .repeat = 10};
    size_t ea, eb, ec;
    double first = 0;
    int rv, code;

    if ((code = gemm_parse(argc, argv, o, &g)) >= 0 ||
        (code = gemm_shape(&g, &ea, &eb, &ec)) >= 0)
        return code;
    cumod_client *c;
    if ((rv = cumod_open_tls(o->url, o->timeout_ms, &o->tls, &c)) != CUMOD_OK)
        return gemm_fail("cannot connect", rv);
    double *ms = calloc(g.repeat, sizeof(*ms));
    if (ms == NULL) {
        cumod_close(c);
        return cumod__ctl_fail(NULL, CUMOD_ENOMEM, NULL);
    }
    if ((code = gemm_run(c, &g, ea, eb, ec, &first, ms)) == 0)
        gemm_print(o, &g, first, ms);
    free(ms);
    cumod_close(c); /* frees the buffers */
    return code;
}
