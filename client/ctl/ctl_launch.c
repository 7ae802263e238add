/* SPDX-License-Identifier: MIT */
/*
 * cumodctl launch: one kernel launch from the command line, for quick
 * checks. Arguments are typed (i32:5, f32:1.5, hex:0a0b, buf:64:f32=1,2;
 * ctl_args.c parses them); buf: arguments are buffers allocated for the
 * call, zeroed, optionally filled, and printed after the kernel has run.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_launch.h"
#include "json.h"

/* Bytes of each buffer read back and printed. */
#define LAUNCH_SHOW_BYTES 256

const char cumod__ctl_launch_usage[] =
    "  launch MODULE:KERNEL [--grid X[,Y,Z]] [--block X[,Y,Z]]\n"
    "         [--shared BYTES] [--generation N] [--deadline MS]\n"
    "         [--cluster X[,Y,Z]] [--cooperative] [--carveout PERCENT] ARG...\n"
    "                launch a kernel once, wait for it, print the generation\n"
    "                that ran and the buffers; each ARG is typed:\n"
    "                  i32:V u32:V i64:V u64:V f32:V f64:V   a value\n"
    "                  hex:0a0b...   raw bytes (e.g. a struct by value)\n"
    "                  buf:SIZE[:TYPE][=V,V,...]   a zeroed buffer of SIZE\n"
    "                  bytes (K, M, G suffixes), filled from offset 0 with\n"
    "                  the values, printed afterwards as TYPE: hex (the\n"
    "                  default), f32, f64, i32 or u32 (its first 256 bytes)\n"
    "                grid and block default to 1; --deadline: how long it\n"
    "                may run (default: the daemon's, see status); --shared:\n"
    "                dynamic shared memory, up to the device's opt-in limit;\n"
    "                --cluster: thread block clusters (sm_90+); "
    "--cooperative:\n"
    "                a grid-wide synchronizing launch; --carveout: the\n"
    "                preferred shared-memory carveout\n";

static int launch_usage(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static int
launch_usage(const char *fmt, ...)
{
    va_list ap;
    char msg[512];

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return cumod__ctl_usage("cumodctl: launch: %s (see cumodctl --help)\n",
                            msg);
}

/* what NULL: the detail alone (the daemon's messages name the kernel).
 * With --json, an error object on stdout (cumod__ctl_fail). */
static int
launch_fail(const char *what, int rv)
{
    return cumod__ctl_fail(what, rv, NULL);
}

/* Prints the first n bytes of buffer argument i (from 0; printed from 1,
 * as the daemon numbers arguments), read back into b. */
static void
launch_print_buffer(const ctl *o, cumod_json *j, size_t i, const ctl_arg *a,
                    const unsigned char *b, size_t n)
{
    size_t esize = cumod__ctl_view_size(a->view), count = n / esize;
    char hex[2 * LAUNCH_SHOW_BYTES + 1], num[40];

    if (!o->json) {
        /* Rows of 32 bytes, each led by its offset; hex in 4-byte words. */
        printf("arg %zu: buffer of %zu bytes, %s:", i + 1, a->size,
               cumod__ctl_view_name(a->view));
        for (size_t k = 0; k < count; k++) {
            size_t off = k * esize;
            if (off % 32 == 0)
                printf("\n  %04zx:", off);
            cumod__ctl_format(a->view, b + off, num, sizeof(num));
            printf("%s%s", a->view != CTL_VIEW_HEX || off % 4 == 0 ? " " : "",
                   num);
        }
        printf("%s\n", a->size > count * esize ? "\n  ..." : "");
        return;
    }
    cumod__json_begin_object(j, NULL);
    cumod__json_uint(j, "arg", i + 1);
    cumod__json_uint(j, "handle", a->handle);
    cumod__json_uint(j, "size", a->size);
    cumod__json_string(j, "type", cumod__ctl_view_name(a->view));
    cumod__json_uint(j, "shown_bytes", count * esize);
    if (a->view == CTL_VIEW_HEX) {
        for (size_t k = 0; k < count; k++)
            cumod__ctl_format(CTL_VIEW_HEX, b + k, hex + 2 * k, 3);
        hex[2 * count] = '\0';
        cumod__json_string(j, "hex", hex);
    } else {
        cumod__json_begin_array(j, "values");
        for (size_t k = 0; k < count; k++) {
            cumod__ctl_format(a->view, b + k * esize, num, sizeof(num));
            cumod__json_number(j, NULL, num);
        }
        cumod__json_end_array(j);
    }
    cumod__json_end_object(j);
}

/* Allocates, zeroes and fills the buffer arguments; sets their args. */
static int
launch_buffers(cumod_client *c, ctl_arg *la, cumod_arg *args, size_t n)
{
    int rv;

    for (size_t i = 0; i < n; i++) {
        ctl_arg *a = &la[i];
        if (!a->is_buffer)
            continue;
        if ((rv = cumod_buffer_alloc(c, a->size, &a->handle)) != CUMOD_OK ||
            (rv = cumod_buffer_memset(c, a->handle, 0, a->size, 0, 0, NULL)) !=
                CUMOD_OK ||
            (a->nbytes > 0 &&
             (rv = cumod_buffer_write(c, a->handle, 0, a->bytes, a->nbytes,
                                      0)) != CUMOD_OK)) {
            char what[64];
            snprintf(what, sizeof(what), "argument %zu (buf:%zu)", i + 1,
                     a->size);
            return launch_fail(what, rv);
        }
        args[i] = cumod_arg_buffer(a->handle, 0);
    }
    return 0;
}

/* Reads back every buffer argument, then prints what ran and them: a
 * failed read is the only output (with --json, one error object). */
static int
launch_report(cumod_client *c, const ctl *o, const cumod_launch_params *p,
              uint64_t generation, const ctl_arg *la)
{
    unsigned char *b = calloc(p->nargs + 1, LAUNCH_SHOW_BYTES);
    cumod_json j;
    int rv;

    if (b == NULL)
        return launch_fail(NULL, CUMOD_ENOMEM);
    for (size_t i = 0; i < p->nargs; i++) {
        size_t n =
            la[i].size < LAUNCH_SHOW_BYTES ? la[i].size : LAUNCH_SHOW_BYTES;
        if (la[i].is_buffer &&
            (rv = cumod_buffer_read(c, la[i].handle, 0,
                                    b + i * LAUNCH_SHOW_BYTES, n, 0)) !=
                CUMOD_OK) {
            free(b);
            return launch_fail("reading a buffer back", rv);
        }
    }
    if (o->json) {
        cumod__json_init(&j, stdout, 1);
        cumod__json_begin_object(&j, NULL);
        cumod__json_string(&j, "kernel", p->kernel);
        cumod__json_uint(&j, "generation", generation);
        cumod__json_begin_array(&j, "buffers");
    } else {
        printf("%s: done (generation %llu)\n", p->kernel,
               (unsigned long long)generation);
    }
    for (size_t i = 0; i < p->nargs; i++) {
        size_t n =
            la[i].size < LAUNCH_SHOW_BYTES ? la[i].size : LAUNCH_SHOW_BYTES;
        if (la[i].is_buffer)
            launch_print_buffer(o, &j, i, &la[i], b + i * LAUNCH_SHOW_BYTES, n);
    }
    if (o->json) {
        cumod__json_end_array(&j);
        cumod__json_end_object(&j);
        cumod__json_finish(&j);
    }
    free(b);
    return 0;
}

/* launch's options into p and at: 0, or the exit status (a usage
 * error). */
static int
launch_options(int argc, char **argv, ctl *o, cumod_launch_params *p,
               cumod_launch_attrs *at)
{
    static const struct option opts[] = {
        {"grid", required_argument, NULL, 'g'},
        {"block", required_argument, NULL, 'b'},
        {"shared", required_argument, NULL, 's'},
        {"generation", required_argument, NULL, 'G'},
        {"deadline", required_argument, NULL, 'D'},
        {"cluster", required_argument, NULL, 'C'},
        {"cooperative", no_argument, NULL, 'O'},
        {"carveout", required_argument, NULL, 'V'},
        {"json", no_argument, NULL, 'j'},
        {NULL, 0, NULL, 0},
    };
    unsigned long long v;
    int ch;

    optind = 0; /* glibc: start afresh, after argv[0] ("launch") */
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":g:b:s:G:D:C:OV:j", opts, NULL)) !=
           -1) {
        switch (ch) {
        case 'g':
        case 'b':
            if (cumod__ctl_parse_dim3(optarg,
                                      ch == 'g' ? &p->grid : &p->block) != 0)
                return launch_usage("--%s: '%s' is not X[,Y,Z] of numbers "
                                    "from 1",
                                    ch == 'g' ? "grid" : "block", optarg);
            break;
        case 's':
            if (cumod__ctl_parse_uint(optarg, UINT32_MAX, &v) != 0)
                return launch_usage("--shared: '%s' is not a number of bytes",
                                    optarg);
            p->shared_mem = (unsigned)v;
            break;
        case 'G':
            if (cumod__ctl_parse_uint(optarg, UINT64_MAX, &v) != 0)
                return launch_usage("--generation: '%s' is not a number",
                                    optarg);
            p->generation = v;
            break;
        case 'D':
            if (cumod__ctl_parse_uint(optarg, UINT32_MAX, &v) != 0)
                return launch_usage("--deadline: '%s' is not a number of "
                                    "milliseconds",
                                    optarg);
            p->deadline_ms = (unsigned)v;
            break;
        case 'C':
            if (cumod__ctl_parse_dim3(optarg, &at->cluster) != 0)
                return launch_usage("--cluster: '%s' is not X[,Y,Z] of "
                                    "numbers from 1",
                                    optarg);
            break;
        case 'O':
            at->cooperative = 1;
            break;
        case 'V':
            if (cumod__ctl_parse_uint(optarg, 100, &v) != 0)
                return launch_usage("--carveout: '%s' is not a percentage "
                                    "(0-100)",
                                    optarg);
            at->carveout = (int)v;
            break;
        case 'j':
            o->json = 1;
            break;
        case ':':
            return launch_usage("option %s needs a value", argv[optind - 1]);
        default:
            return launch_usage("unknown option %s", argv[optind - 1]);
        }
    }
    return 0;
}

/* The options, MODULE:KERNEL and the arguments of `launch` into p and at;
 * *lap and *argsp are the arguments' (the caller frees them). 0, or the
 * exit status. */
static int
launch_parse(int argc, char **argv, ctl *o, cumod_launch_params *p,
             cumod_launch_attrs *at, ctl_arg **lap, cumod_arg **argsp)
{
    int rv;

    if ((rv = launch_options(argc, argv, o, p, at)) != 0)
        return rv;
    if (optind >= argc)
        return launch_usage("%s", "needs MODULE:KERNEL");
    p->kernel = argv[optind++];
    if (strchr(p->kernel, ':') == NULL)
        return launch_usage("'%s' is not MODULE:KERNEL", p->kernel);
    p->nargs = (size_t)(argc - optind);
    if (p->nargs > CUMOD_MAX_ARGS)
        return launch_usage("%s", "too many arguments");
    *lap = calloc(p->nargs + 1, sizeof(**lap));
    *argsp = calloc(p->nargs + 1, sizeof(**argsp));
    if (*lap == NULL || *argsp == NULL) {
        fprintf(stderr, "cumodctl: out of memory\n");
        return 1;
    }
    p->args = *argsp;
    for (size_t i = 0; i < p->nargs; i++) {
        char *s = argv[optind + (int)i], copy[80];
        snprintf(copy, sizeof(copy), "%s", s);
        if (cumod__ctl_parse_arg(s, &(*lap)[i], &(*argsp)[i]) != 0)
            return launch_usage("'%s' is not an argument: i32:V, u32:V, "
                                "i64:V, u64:V, f32:V, f64:V, hex:BYTES or "
                                "buf:SIZE[:TYPE][=V,...]",
                                copy);
    }
    return 0;
}

int
cumod__ctl_launch(int argc, char **argv, ctl *o)
{
    cumod_launch_params p = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
    cumod_launch_attrs at = {.carveout = -1};
    ctl_arg *la = NULL;
    cumod_arg *args = NULL;
    cumod_client *c = NULL;
    uint64_t generation = 0;
    int rv;

    if ((rv = launch_parse(argc, argv, o, &p, &at, &la, &args)) != 0)
        goto done;
    if ((rv = cumod_open_tls(o->url, o->timeout_ms, &o->tls, &c)) != CUMOD_OK) {
        rv = launch_fail("connect", rv);
        goto done;
    }
    if ((rv = launch_buffers(c, la, args, p.nargs)) != 0)
        goto done;
    if ((rv = cumod_launch_v2(c, &p, &at, NULL, &generation)) != CUMOD_OK) {
        rv = launch_fail(NULL, rv);
        goto done;
    }
    rv = launch_report(c, o, &p, generation, la);

done:
    for (size_t i = 0; la != NULL && i < p.nargs; i++) {
        /* Closing the session would free them too. */
        if (c != NULL && la[i].handle != 0)
            cumod_buffer_free(c, la[i].handle);
        free(la[i].bytes);
    }
    cumod_close(c);
    free(la);
    free(args);
    return rv;
}
