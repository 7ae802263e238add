/* SPDX-License-Identifier: MIT */
/*
 * cumodctl top: who uses the GPU now. Two session listings (Hello with
 * sessions) an interval apart: each session's device time between them,
 * as a share of the interval by cumodd's own clock, most first.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl_launch.h"
#include "json.h"

const char cumod__ctl_top_usage[] =
    "  top [--json] [--interval SECONDS]\n"
    "                the sessions you may see (every one for root or\n"
    "                cumodd's user) by GPU time over the last SECONDS\n"
    "                (default 1): session, pid, uid, domain, device,\n"
    "                GPU seconds in all, GPU % over the interval\n";

typedef struct top_row {
    cumod_session_info s;
    uint64_t delta_ns; /* device time within the interval */
} top_row;

static void
top_json_double(cumod_json *j, const char *key, double v)
{
    char text[32];
    snprintf(text, sizeof(text), "%.6f", v);
    cumod__json_number(j, key, text);
}

static int
top_cmp(const void *a, const void *b)
{
    const top_row *x = a, *y = b;
    if (x->delta_ns != y->delta_ns)
        return x->delta_ns < y->delta_ns ? 1 : -1;
    if (x->s.gpu_ns != y->s.gpu_ns)
        return x->s.gpu_ns < y->s.gpu_ns ? 1 : -1;
    return x->s.id < y->s.id ? -1 : x->s.id > y->s.id;
}

/* top's options into *interval: -1 to go on, else the exit status (a
 * usage error). */
static int
top_parse(int argc, char **argv, ctl *o, double *interval)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},
        {"interval", required_argument, NULL, 'i'},
        {NULL, 0, NULL, 0},
    };
    int ch;

    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":ji:", opts, NULL)) != -1) {
        switch (ch) {
        case 'j':
            o->json = 1;
            break;
        case 'i': {
            char *end;
            errno = 0;
            *interval = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(*interval >= 0.01) ||
                *interval > 3600) {
                return cumod__ctl_usage(
                    "cumodctl top: --interval: '%s' is not a number of "
                    "seconds from 0.01 to 3600\n",
                    optarg);
            }
            break;
        }
        case ':':
            return cumod__ctl_usage("cumodctl top: option %s needs a value\n",
                                    argv[optind - 1]);
        default:
            return cumod__ctl_usage(
                "cumodctl top: unknown option %s (see cumodctl --help)\n",
                argv[optind - 1]);
        }
    }
    if (optind < argc) {
        return cumod__ctl_usage("cumodctl top: unexpected argument '%s'\n",
                                argv[optind]);
    }
    return -1;
}

/* The rows of the second listing (b, nb), each with its device time since
 * the first (a, na), most first; NULL when out of memory (or nb 0). A
 * session new since the first listing counts from 0 (its own). */
static top_row *
top_rows(const cumod_session_info *a, size_t na, const cumod_session_info *b,
         size_t nb)
{
    top_row *rows = nb > 0 ? calloc(nb, sizeof(*rows)) : NULL;

    if (rows == NULL)
        return NULL;
    for (size_t i = 0; i < nb; i++) {
        uint64_t before = 0;
        for (size_t k = 0; k < na; k++)
            if (a[k].id == b[i].id && a[k].pid == b[i].pid)
                before = a[k].gpu_ns;
        rows[i].s = b[i];
        rows[i].delta_ns = b[i].gpu_ns >= before ? b[i].gpu_ns - before : 0;
    }
    if (nb > 1)
        qsort(rows, nb, sizeof(*rows), top_cmp);
    return rows;
}

/* The rows (n of them) over span ns of cumodd's clock. */
static void
top_print(const ctl *o, const top_row *rows, size_t n, double span)
{
    if (o->json) {
        cumod_json j;
        cumod__json_init(&j, stdout, 1);
        cumod__json_begin_object(&j, NULL);
        top_json_double(&j, "interval_seconds", span / 1e9);
        cumod__json_begin_array(&j, "sessions");
        for (size_t i = 0; i < n; i++) {
            const top_row *r = &rows[i];
            cumod__json_begin_object(&j, NULL);
            cumod__json_uint(&j, "session", r->s.id);
            cumod__json_int(&j, "pid", r->s.pid);
            cumod__json_int(&j, "uid", r->s.uid);
            cumod__json_string(&j, "domain", r->s.domain);
            cumod__json_int(&j, "device", r->s.device);
            top_json_double(&j, "gpu_seconds", (double)r->s.gpu_ns / 1e9);
            top_json_double(&j, "interval_gpu_seconds",
                            (double)r->delta_ns / 1e9);
            top_json_double(&j, "gpu_percent",
                            100.0 * (double)r->delta_ns / span);
            cumod__json_uint(&j, "memory_bytes", r->s.memory_bytes);
            cumod__json_uint(&j, "inflight", r->s.inflight);
            cumod__json_bool(&j, "fast_path", r->s.fast_path);
            cumod__json_end_object(&j);
        }
        cumod__json_end_array(&j);
        cumod__json_end_object(&j);
        cumod__json_finish(&j);
        return;
    }
    printf("%-8s %-8s %-6s %-10s %-6s %-4s %12s %7s\n", "SESSION", "PID", "UID",
           "DOMAIN", "DEVICE", "PATH", "GPU_SECONDS", "GPU%");
    for (size_t i = 0; i < n; i++) {
        const top_row *r = &rows[i];
        printf("%-8u %-8d %-6d %-10s %-6d %-4s %12.3f %6.1f%%\n", r->s.id,
               r->s.pid, r->s.uid, r->s.domain, r->s.device,
               r->s.fast_path ? "ring" : "nng", (double)r->s.gpu_ns / 1e9,
               100.0 * (double)r->delta_ns / span);
    }
}

int
cumod__ctl_top(int argc, char **argv, ctl *o)
{
    double interval = 1.0;
    int rv, status = 1;
    cumod_client *c = NULL;
    cumod_session_info *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    uint64_t ta = 0, tb = 0;
    top_row *rows = NULL;

    if ((status = top_parse(argc, argv, o, &interval)) >= 0)
        return status;
    status = 1;
    if ((rv = cumod_open_tls(o->url, o->timeout_ms, &o->tls, &c)) != CUMOD_OK) {
        return cumod__ctl_fail("connect", rv, NULL);
    }
    struct timespec nap = {(time_t)interval,
                           (long)((interval - (double)(time_t)interval) * 1e9)};
    if ((rv = cumod_sessions_list(c, &a, &na, &ta)) != CUMOD_OK)
        goto fail;
    while (nanosleep(&nap, &nap) != 0 && errno == EINTR)
        ;
    if ((rv = cumod_sessions_list(c, &b, &nb, &tb)) != CUMOD_OK)
        goto fail;
    if (nb > 0 && (rows = top_rows(a, na, b, nb)) == NULL) {
        cumod__ctl_fail(NULL, CUMOD_ENOMEM, NULL);
        goto done;
    }
    top_print(o, rows, nb, tb > ta ? (double)(tb - ta) : interval * 1e9);
    status = 0;
    goto done;
fail:
    cumod__ctl_fail(NULL, rv, NULL);
done:
    free(rows);
    free(a);
    free(b);
    cumod_close(c);
    return status;
}
