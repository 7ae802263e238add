/* SPDX-License-Identifier: MIT */
/*
 * cumodctl global: read or write a module's __device__ or __constant__
 * variable by name; cumodctl carveout: a kernel's own carveout.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_launch.h"
#include "json.h"

const char cumod__ctl_global_usage[] =
    "  global MODULE NAME [--type T] [--offset BYTES] [--length BYTES]\n"
    "                print a module's global (its whole, from offset), as\n"
    "                T: hex (the default), f32, f64, i32 or u32\n"
    "  global MODULE NAME --set V,V,... [--type T] [--offset BYTES]\n"
    "                write values of type T into it; cumodd keeps the write\n"
    "                for every later generation of the module\n"
    "  carveout MODULE:KERNEL PERCENT|default [--json]\n"
    "                the shared-memory carveout the kernel's launches prefer\n"
    "                when they give none\n";

static int
global_usage(const char *cmd, const char *msg, const char *arg)
{
    return cumod__ctl_usage("cumodctl: %s: %s%s%s (see cumodctl --help)\n", cmd,
                            msg, arg ? ": " : "", arg ? arg : "");
}

static int
global_fail(const char *what, int rv)
{
    return cumod__ctl_fail(what, rv, NULL);
}

/* The global's size, from the module's description. */
static int
global_size(cumod_client *c, const char *module, const char *name,
            uint64_t *size)
{
    cumod_module_description *d;
    int rv = cumod_module_describe(c, module, &d), found = 0;
    if (rv != CUMOD_OK)
        return rv;
    for (size_t i = 0; i < d->nglobals; i++)
        if (strcmp(d->globals[i].name, name) == 0) {
            *size = d->globals[i].size;
            found = 1;
        }
    cumod_module_description_free(d);
    return found ? CUMOD_OK : CUMOD_ENOENT;
}

/* What `global` was asked: how to show the bytes, which of them, and
 * what to write (NULL: read). */
typedef struct global_args {
    ctl_view view;
    unsigned long long off, len;
    char *set;
} global_args;

/* global's options into g: -1 to go on, else the exit status (a usage
 * error). */
static int
global_parse(int argc, char **argv, ctl *o, global_args *g)
{
    static const struct option opts[] = {
        {"type", required_argument, NULL, 'T'},
        {"offset", required_argument, NULL, 'o'},
        {"length", required_argument, NULL, 'l'},
        {"set", required_argument, NULL, 's'},
        {"json", no_argument, NULL, 'j'},
        {NULL, 0, NULL, 0},
    };
    int ch;

    optind = 0;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":T:o:l:s:j", opts, NULL)) != -1) {
        switch (ch) {
        case 'T':
            if (cumod__ctl_parse_view(optarg, &g->view) != 0)
                return global_usage(
                    "global", "--type is hex, f32, f64, i32 or u32", optarg);
            break;
        case 'o':
        case 'l':
            if (cumod__ctl_parse_uint(optarg, 1ull << 40,
                                      ch == 'o' ? &g->off : &g->len) != 0)
                return global_usage("global", "not a number of bytes", optarg);
            break;
        case 's':
            g->set = optarg;
            break;
        case 'j':
            o->json = 1;
            break;
        default:
            return global_usage("global", "unknown option or missing value",
                                argv[optind - 1]);
        }
    }
    if (argc - optind != 2)
        return global_usage("global", "needs MODULE NAME", NULL);
    return -1;
}

/* --set: writes the n bytes; the exit status. Closes c. */
static int
global_write(cumod_client *c, const char *module, const char *name,
             const global_args *g, unsigned char *bytes, size_t n)
{
    int rv = cumod_global_write(c, module, name, g->off, bytes, n, 0);

    free(bytes);
    if (rv == CUMOD_OK)
        printf("%s:%s: %zu bytes written at offset %llu (kept for later "
               "generations)\n",
               module, name, n, g->off);
    cumod_close(c);
    return rv == CUMOD_OK ? 0 : global_fail("global", rv);
}

/* Reads the global's bytes from g->off (g->len of them; 0: to its end)
 * into *out (the caller frees): 0, or the exit status of a failure
 * (reported). Closes c. */
static int
global_read(cumod_client *c, const char *module, const char *name,
            global_args *g, unsigned char **out)
{
    unsigned char *bytes;
    int rv;

    if (g->len == 0) {
        uint64_t size = 0;
        if ((rv = global_size(c, module, name, &size)) != CUMOD_OK) {
            if (rv == CUMOD_ENOENT && cumod_last_detail()[0] == '\0') {
                char msg[600];
                snprintf(msg, sizeof(msg), "%s has no global %s", module, name);
                cumod_close(c);
                return cumod__ctl_fail(NULL, rv, msg);
            }
            cumod_close(c);
            return global_fail("global", rv);
        }
        g->len = size > g->off ? size - g->off : 0;
    }
    if ((bytes = malloc(g->len ? g->len : 1)) == NULL) {
        cumod_close(c);
        return global_fail("global", CUMOD_ENOMEM);
    }
    rv = cumod_global_read(c, module, name, g->off, bytes, g->len, 0);
    cumod_close(c);
    if (rv != CUMOD_OK) {
        free(bytes);
        return global_fail("global", rv);
    }
    *out = bytes;
    return 0;
}

/* The bytes read, as values of g->view. */
static void
global_print(const ctl *o, const char *module, const char *name,
             const global_args *g, const unsigned char *bytes)
{
    ctl_view view = g->view;
    unsigned long long off = g->off, len = g->len;
    size_t es = cumod__ctl_view_size(view);

    if (o->json) {
        cumod_json j;
        cumod__json_init(&j, stdout, 1);
        cumod__json_begin_object(&j, NULL);
        cumod__json_string(&j, "module", module);
        cumod__json_string(&j, "name", name);
        cumod__json_uint(&j, "offset", off);
        cumod__json_string(&j, "type", cumod__ctl_view_name(view));
        cumod__json_begin_array(&j, "values");
        for (size_t i = 0; i + es <= len; i += es) {
            char t[64];
            cumod__ctl_format(view, bytes + i, t, sizeof(t));
            if (view == CTL_VIEW_HEX)
                cumod__json_string(&j, NULL, t);
            else
                cumod__json_number(&j, NULL, t);
        }
        cumod__json_end_array(&j);
        cumod__json_end_object(&j);
        cumod__json_finish(&j);
    } else {
        printf("%s:%s [%llu bytes at %llu, %s]:", module, name, len, off,
               cumod__ctl_view_name(view));
        for (size_t i = 0; i + es <= len; i += es) {
            char t[64];
            cumod__ctl_format(view, bytes + i, t, sizeof(t));
            printf(" %s", t);
        }
        printf("\n");
    }
}

int
cumod__ctl_global(int argc, char **argv, ctl *o)
{
    global_args g = {.view = CTL_VIEW_HEX};
    int rv;

    if ((rv = global_parse(argc, argv, o, &g)) >= 0)
        return rv;
    const char *module = argv[optind], *name = argv[optind + 1];
    cumod_client *c;
    unsigned char *bytes = NULL;
    size_t n = 0;
    if (g.set != NULL &&
        cumod__ctl_parse_values(g.view, g.set, &bytes, &n) != 0)
        return global_usage("global", "--set: not values of --type", g.set);
    if ((rv = cumod_open_tls(o->url, o->timeout_ms, &o->tls, &c)) != CUMOD_OK) {
        free(bytes);
        return global_fail("connect", rv);
    }
    if (g.set != NULL)
        return global_write(c, module, name, &g, bytes, n);
    if ((rv = global_read(c, module, name, &g, &bytes)) != 0)
        return rv;
    global_print(o, module, name, &g, bytes);
    free(bytes);
    return 0;
}

int
cumod__ctl_carveout(int argc, char **argv, ctl *o)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},
        {NULL, 0, NULL, 0},
    };
    unsigned long long pct = 0;
    cumod_client *c;
    int ch, rv;

    optind = 0;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":j", opts, NULL)) != -1) {
        if (ch != 'j')
            return global_usage("carveout", "unknown option", argv[optind - 1]);
        o->json = 1;
    }
    if (argc - optind != 2)
        return global_usage("carveout", "needs MODULE:KERNEL PERCENT|default",
                            NULL);
    const char *kernel = argv[optind], *value = argv[optind + 1];
    int dflt = strcmp(value, "default") == 0;
    if (!dflt && cumod__ctl_parse_uint(value, 100, &pct) != 0)
        return global_usage("carveout", "not a percentage (0-100) or default",
                            value);
    if ((rv = cumod_open_tls(o->url, o->timeout_ms, &o->tls, &c)) != CUMOD_OK)
        return global_fail("connect", rv);
    rv = cumod_kernel_set_carveout(c, kernel, dflt ? -1 : (int)pct);
    cumod_close(c);
    if (rv != CUMOD_OK)
        return global_fail("carveout", rv);
    if (o->json) {
        cumod_json j;
        cumod__json_init(&j, stdout, 1);
        cumod__json_begin_object(&j, NULL);
        cumod__json_string(&j, "kernel", kernel);
        if (dflt)
            cumod__json_string(&j, "carveout", NULL);
        else
            cumod__json_uint(&j, "carveout", pct);
        cumod__json_end_object(&j);
        cumod__json_finish(&j);
    } else {
        printf("%s: carveout %s%s\n", kernel, dflt ? "default" : value,
               dflt ? "" : "%");
    }
    return 0;
}
