/* SPDX-License-Identifier: MIT */
/*
 * cumodctl: the command line of cumod, a thin layer over libcumod.
 * Exit status: 0 done; 1 the daemon or the connection said no; 2 usage.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_launch.h"
#include "cumod/cumod.h"
#include "json.h"

static void
ctl_usage(FILE *f)
{
    fprintf(
        f,
        "Usage: cumodctl [options] COMMAND\n"
        "Talks to cumodd, the daemon that keeps CUDA kernels loaded.\n"
        "\n"
        "Commands:\n"
        "  status        the daemon, its device, driver and memory; every\n"
        "                device and domain it serves\n"
        "  ls            the modules of the kernel folder\n"
        "  show MODULE   a module's kernels (signatures, parameters, shared\n"
        "                memory, registers, clusters) and globals, read from\n"
        "                its image before it is loaded\n"
        "  load MODULE [--jit-opt-level N] [--jit-max-registers N]\n"
        "      [--jit-line-info 0|1] [--jit-fast-compile N]\n"
        "                make a module resident; the JIT options (PTX) stay\n"
        "                the module's, a changed one makes a new generation\n"
        "                ('default' drops one given before)\n"
        "  unload MODULE take a module out of service (after its launches)\n"
        "  pin MODULE    load a module and keep it resident\n"
        "  unpin MODULE  let a pinned module be evicted again\n"
        "  reload MODULE read a module's file now (new bytes: new "
        "generation)\n"
        "  unquarantine MODULE  let a module's quarantined bytes serve "
        "again\n"
        "%s%s%s%s%s"
        "\n"
        "Options:\n"
        "  -u, --url URL       the daemon's address (default $CUMOD_URL, else\n"
        "                      " CUMOD_DEFAULT_URL ")\n"
        "  -j, --json          print JSON instead of text; an error then is\n"
        "                      an object on stdout: {\"error\": true, "
        "\"code\": N,\n"
        "                      \"name\": \"CUMOD_E...\", \"detail\": "
        "...}\n"
        "  -t, --timeout MS    give up on a reply after MS milliseconds "
        "(default 10000)\n"
        "  -d, --device N      run on the daemon's device N (default\n"
        "                      $CUMOD_DEVICE, else 0; status lists them)\n"
        "  --tls-ca FILE       tls+tcp://: the CA certificates that vouch "
        "for\n"
        "                      cumodd's (default $CUMOD_TLS_CA)\n"
        "  --tls-cert FILE     tls+tcp://: this client's certificate, for a\n"
        "                      cumodd that asks for one (default "
        "$CUMOD_TLS_CERT)\n"
        "  --tls-key FILE      its key, not encrypted (default "
        "$CUMOD_TLS_KEY)\n"
        "  -h, --help          this text\n"
        "  -V, --version       the version\n"
        "Options go before the command; all commands but launch, global,\n"
        "carveout, watch, gemm and top take them after it too (every\n"
        "command takes --json after it).\n"
        "Exit status: 0 done; 1 the daemon or the connection said no; 2 a\n"
        "usage error (in words on stderr; with --json also an object on\n"
        "stdout with \"usage\": true).\n",
        cumod__ctl_launch_usage, cumod__ctl_global_usage,
        cumod__ctl_watch_usage, cumod__ctl_gemm_usage, cumod__ctl_top_usage);
}

static int
ctl_fail(const char *what, int rv)
{
    return cumod__ctl_fail(what, rv, NULL);
}

/* The members of a module object (the caller opens and closes it). */
static void
ctl_json_module(cumod_json *j, const cumod_module_info *m)
{
    cumod__json_string(j, "name", m->name);
    cumod__json_string(j, "state", m->state);
    cumod__json_uint(j, "generation", m->generation);
    cumod__json_string(j, "sha256", m->sha256[0] ? m->sha256 : NULL);
    cumod__json_string(j, "kind", m->kind[0] ? m->kind : NULL);
    cumod__json_uint(j, "size", m->size);
    cumod__json_begin_array(j, "kernels");
    for (size_t k = 0; k < m->nkernels; k++)
        cumod__json_string(j, NULL, m->kernels[k]);
    cumod__json_end_array(j);
    cumod__json_bool(j, "pinned", m->pinned);
    cumod__json_string(j, "error", m->error);
    cumod__json_string(j, "file", m->file[0] ? m->file : NULL);
    cumod__json_begin_array(j, "images");
    for (unsigned k = 0; k < m->nimages; k++)
        cumod__json_string(j, NULL, m->images[k]);
    cumod__json_end_array(j);
    cumod__json_uint(j, "inflight", m->inflight);
    cumod__json_uint(j, "resident_generations", m->resident_generations);
    cumod__json_uint(j, "last_use_unix_ms", m->last_use_unix_ms);
    cumod__json_uint(j, "load_us", m->load_us);
    cumod__json_bool(j, "quarantined", m->quarantined);
    cumod__json_string(j, "quarantine_reason", m->quarantine_reason);
    cumod__json_string(j, "quarantined_sha256",
                       m->quarantined_sha256[0] ? m->quarantined_sha256 : NULL);
    cumod__json_uint(j, "quarantined_unix_ms", m->quarantined_unix_ms);
    cumod__json_uint(j, "faults", m->faults);
    cumod__json_string(j, "loaded_kind",
                       m->loaded_kind[0] ? m->loaded_kind : NULL);
    cumod__json_string(j, "jit_options", m->jit_options);
}

static void
ctl_text_module(const cumod_module_info *m)
{
    printf("module:     %s\n", m->name);
    printf("state:      %s%s\n", m->state, m->pinned ? ", pinned" : "");
    printf("generation: %llu\n", (unsigned long long)m->generation);
    printf("image:      %s (%s, %llu bytes)\n", m->file[0] ? m->file : "-",
           m->kind[0] ? m->kind : "-", (unsigned long long)m->size);
    printf("sha256:     %s\n", m->sha256[0] ? m->sha256 : "-");
    if (m->nimages > 1) {
        printf("images:    ");
        for (unsigned k = 0; k < m->nimages; k++)
            printf(" %s", m->images[k]);
        printf("\n");
    }
    if (m->inflight || m->resident_generations > 1)
        printf("inflight:   %u launches, %llu generations loaded\n",
               m->inflight, (unsigned long long)m->resident_generations);
    if (m->error)
        printf("error:      %s\n", m->error);
    if (m->quarantined_sha256[0])
        printf("quarantine: %s (sha256 %s): %s\n",
               m->quarantined ? "launches refused"
                              : "the last good bytes serve",
               m->quarantined_sha256,
               m->quarantine_reason ? m->quarantine_reason : "");
    if (m->faults)
        printf("faults:     %u\n", m->faults);
    if (m->loaded_kind[0] && strcmp(m->loaded_kind, m->kind) != 0)
        printf("loaded as:  %s\n", m->loaded_kind);
    if (m->jit_options)
        printf("jit:        %s\n", m->jit_options);
}

static int
ctl_ls(cumod_client *c, const ctl *o)
{
    cumod_module_list *l;
    int rv;

    if ((rv = cumod_modules_list(c, &l)) != CUMOD_OK)
        return ctl_fail("ls", rv);
    if (o->json) {
        cumod_json j;
        cumod__json_init(&j, stdout, 1);
        cumod__json_begin_array(&j, NULL);
        for (size_t i = 0; i < l->count; i++) {
            cumod__json_begin_object(&j, NULL);
            ctl_json_module(&j, &l->modules[i]);
            cumod__json_end_object(&j);
        }
        cumod__json_end_array(&j);
        cumod__json_finish(&j);
    } else if (l->count == 0) {
        printf("no modules\n");
    } else {
        printf("%-24s %-11s %4s %-7s %10s %-8s %s\n", "MODULE", "STATE", "GEN",
               "KIND", "SIZE", "KERNELS", "ERROR");
        for (size_t i = 0; i < l->count; i++) {
            const cumod_module_info *m = &l->modules[i];
            char nk[16];
            snprintf(nk, sizeof(nk), "%zu%s", m->nkernels,
                     m->pinned ? " pin" : "");
            printf("%-24s %-11s %4llu %-7s %10llu %-8s %.100s\n", m->name,
                   m->state, (unsigned long long)m->generation,
                   m->kind[0] ? m->kind : "-", (unsigned long long)m->size, nk,
                   m->error               ? m->error
                   : m->quarantine_reason ? m->quarantine_reason
                                          : "");
        }
    }
    cumod_module_list_free(l);
    return 0;
}

static void
ctl_json_kernel(cumod_json *j, const cumod_kernel_desc *k)
{
    cumod__json_begin_object(j, NULL);
    cumod__json_string(j, "name", k->name);
    cumod__json_string(j, "display_name", k->display);
    cumod__json_string(j, "signature", k->signature);
    cumod__json_int(j, "static_shared", k->static_shared);
    cumod__json_int(j, "registers", k->registers);
    cumod__json_uint(j, "max_threads", k->max_threads);
    cumod__json_int(j, "carveout", k->carveout);
    cumod__json_begin_array(j, "cluster");
    cumod__json_uint(j, NULL, k->cluster.x);
    cumod__json_uint(j, NULL, k->cluster.y);
    cumod__json_uint(j, NULL, k->cluster.z);
    cumod__json_end_array(j);
    cumod__json_begin_array(j, "params");
    for (size_t p = 0; p < k->nparams; p++) {
        cumod__json_begin_object(j, NULL);
        cumod__json_uint(j, "offset", k->params[p].offset);
        cumod__json_uint(j, "size", k->params[p].size);
        cumod__json_string(j, "type", k->params[p].type);
        cumod__json_bool(j, "indirect", k->params[p].indirect);
        cumod__json_end_object(j);
    }
    cumod__json_end_array(j);
    cumod__json_end_object(j);
}

static void
ctl_text_kernel(const cumod_kernel_desc *k)
{
    if (k->signature[0] != '\0')
        printf("kernel:     %s\n", k->signature);
    else
        printf("kernel:     %s\n", k->display);
    if (strcmp(k->display, k->name) != 0)
        printf("  symbol:   %s\n", k->name);
    printf("  params:   ");
    if (k->nparams == 0)
        printf("none");
    for (size_t p = 0; p < k->nparams; p++)
        printf("%s%u@%u", p ? ", " : "", k->params[p].size,
               k->params[p].offset);
    printf("  [size@offset]\n");
    printf("  shared:   ");
    if (k->static_shared >= 0)
        printf("%d bytes static", k->static_shared);
    else
        printf("static unknown until loaded");
    if (k->registers >= 0)
        printf("; %d registers", k->registers);
    if (k->max_threads)
        printf("; at most %u threads a block", k->max_threads);
    if (k->cluster.x)
        printf("; clusters of %ux%ux%u", k->cluster.x, k->cluster.y,
               k->cluster.z);
    if (k->carveout >= 0)
        printf("; carveout %d%%", k->carveout);
    printf("\n");
}

static int
ctl_show(cumod_client *c, const ctl *o, const char *name)
{
    cumod_module_description *d;
    cumod_module_detail *dl = NULL;
    int rv;

    if ((rv = cumod_module_describe(c, name, &d)) != CUMOD_OK)
        return ctl_fail("show", rv);
    /* The JIT log comes with the older call. */
    (void)cumod_module_show(c, name, &dl);
    if (o->json) {
        cumod_json j;
        cumod__json_init(&j, stdout, 1);
        cumod__json_begin_object(&j, NULL);
        ctl_json_module(&j, &d->module);
        cumod__json_string(&j, "described_from", d->described_from);
        cumod__json_begin_array(&j, "kernel_params");
        for (size_t i = 0; i < d->nkernels; i++)
            ctl_json_kernel(&j, &d->kernels[i]);
        cumod__json_end_array(&j);
        cumod__json_begin_array(&j, "globals");
        for (size_t i = 0; i < d->nglobals; i++) {
            cumod__json_begin_object(&j, NULL);
            cumod__json_string(&j, "name", d->globals[i].name);
            cumod__json_uint(&j, "size", d->globals[i].size);
            cumod__json_bool(&j, "constant", d->globals[i].constant);
            cumod__json_uint(&j, "kept_bytes", d->globals[i].kept_bytes);
            cumod__json_end_object(&j);
        }
        cumod__json_end_array(&j);
        cumod__json_string(&j, "jit_log", dl ? dl->jit_log : NULL);
        cumod__json_string(&j, "compile", dl ? dl->compile : NULL);
        cumod__json_string(&j, "compile_log", dl ? dl->compile_log : NULL);
        cumod__json_uint(&j, "compiles", dl ? dl->compiles : 0);
        cumod__json_uint(&j, "compile_cache_hits",
                         dl ? dl->compile_cache_hits : 0);
        cumod__json_end_object(&j);
        cumod__json_finish(&j);
    } else {
        ctl_text_module(&d->module);
        printf("described:  from %s\n", d->described_from);
        if (d->nkernels == 0)
            printf("kernels:    none known\n");
        for (size_t i = 0; i < d->nkernels; i++)
            ctl_text_kernel(&d->kernels[i]);
        for (size_t i = 0; i < d->nglobals; i++) {
            const cumod_global_desc *g = &d->globals[i];
            printf("global:     %s %s (%llu bytes)",
                   g->constant ? "__constant__" : "__device__", g->name,
                   (unsigned long long)g->size);
            if (g->kept_bytes)
                printf("; %llu bytes written by clients, kept across reloads",
                       (unsigned long long)g->kept_bytes);
            printf("\n");
        }
        if (dl && dl->compile)
            printf("compile:    %s (%llu compiled, %llu from the cache "
                   "since cumodd started)\n",
                   dl->compile, (unsigned long long)dl->compiles,
                   (unsigned long long)dl->compile_cache_hits);
        if (dl && dl->compile_log)
            printf("compile log:\n%s\n", dl->compile_log);
        if (dl && dl->jit_log)
            printf("jit log:\n%s\n", dl->jit_log);
    }
    cumod_module_detail_free(dl);
    cumod_module_description_free(d);
    return 0;
}

typedef int (*ctl_module_fn)(cumod_client *, const char *,
                             cumod_module_result *);

/* Prints what a module command did (JSON, or a line; jit: with the
 * options that built the generation) and releases it. */
static int
ctl_module_result(const ctl *o, cumod_module_result *r, int jit)
{
    if (o->json) {
        cumod_json j;
        cumod__json_init(&j, stdout, 1);
        cumod__json_begin_object(&j, NULL);
        ctl_json_module(&j, &r->module);
        cumod__json_string(&j, "note", r->note);
        cumod__json_end_object(&j);
        cumod__json_finish(&j);
    } else if (jit) {
        printf("%s: %s; jit: %s\n", r->module.name, r->note,
               r->module.jit_options ? r->module.jit_options : "-");
    } else {
        printf("%s: %s\n", r->module.name, r->note);
    }
    cumod_module_result_fini(r);
    return 0;
}

static int
ctl_module_cmd(cumod_client *c, const ctl *o, const char *cmd, ctl_module_fn fn,
               const char *name)
{
    cumod_module_result r;
    int rv;

    if ((rv = fn(c, name, &r)) != CUMOD_OK)
        return ctl_fail(cmd, rv);
    return ctl_module_result(o, &r, 0);
}

/* load with JIT options, saying which options built the generation. */
static int
ctl_load_jit(cumod_client *c, const ctl *o, const char *name,
             const cumod_jit_options *jit)
{
    cumod_module_result r;
    int rv;

    if ((rv = cumod_module_load_jit(c, name, jit, &r)) != CUMOD_OK)
        return ctl_fail("load", rv);
    return ctl_module_result(o, &r, 1);
}

static const struct ctl_cmd {
    const char *name;
    int takes_module;
    ctl_module_fn fn;
} ctl_cmds[] = {
    {"status", 0, NULL},
    {"ls", 0, NULL},
    {"show", 1, NULL},
    {"load", 1, cumod_module_load},
    {"unload", 1, cumod_module_unload},
    {"pin", 1, cumod_module_pin},
    {"unpin", 1, cumod_module_unpin},
    {"reload", 1, cumod_module_reload},
    {"unquarantine", 1, cumod_module_unquarantine},
};

/* `cumodctl __complete modules` prints the module names, one a line;
 * `cumodctl __complete kernels MODULE` its kernels as MODULE:KERNEL. For
 * the bash completion (cumodctl.bash), not in --help: plain lines a shell
 * reads without a JSON parser. Nothing on stderr; exit status 1 when the
 * daemon does not answer. */
static int
ctl_complete(const ctl *o, int argc, char **argv)
{
    cumod_client *c;
    int rv = 1;

    if (argc < 1 || (strcmp(argv[0], "modules") == 0   ? argc != 1
                     : strcmp(argv[0], "kernels") == 0 ? argc != 2
                                                       : 1))
        return 2;
    if (cumod_open_tls(o->url, o->timeout_ms, &o->tls, &c) != CUMOD_OK)
        return 1;
    if (argc == 1) {
        cumod_module_list *l;
        if (cumod_modules_list(c, &l) == CUMOD_OK) {
            for (size_t i = 0; i < l->count; i++)
                printf("%s\n", l->modules[i].name);
            cumod_module_list_free(l);
            rv = 0;
        }
    } else {
        cumod_module_description *d;
        if (cumod_module_describe(c, argv[1], &d) == CUMOD_OK) {
            /* The catalog's names; else those read from the image. */
            for (size_t k = 0; k < d->module.nkernels; k++)
                printf("%s:%s\n", argv[1], d->module.kernels[k]);
            for (size_t k = 0; d->module.nkernels == 0 && k < d->nkernels; k++)
                printf("%s:%s\n", argv[1], d->kernels[k].name);
            cumod_module_description_free(d);
            rv = 0;
        }
    }
    cumod_close(c);
    return rv;
}

/* The index of the command word: the first argument that is neither a
 * global option nor an option's value (argc if none). launch parses its
 * own options, so main's parsing stops there. */
static int
ctl_command_index(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        size_t n = strlen(a);
        if (strcmp(a, "--") == 0)
            return i + 1;
        if (a[0] != '-' || n == 1)
            return i;
        if (a[1] == '-') {
            /* --url VALUE, --timeout VALUE, --tls-* VALUE, or an
             * abbreviation of them. */
            if (n > 2 && strchr(a, '=') == NULL &&
                (strncmp(a, "--url", n) == 0 ||
                 strncmp(a, "--timeout", n) == 0 ||
                 strncmp(a, "--device", n) == 0 ||
                 (n > 6 && (strncmp(a, "--tls-ca", n) == 0 ||
                            strncmp(a, "--tls-cert", n) == 0 ||
                            strncmp(a, "--tls-key", n) == 0))))
                i++;
            continue;
        }
        /* Short options: -u, -t and -d take the rest, or the next
         * argument. */
        for (const char *p = a + 1; *p; p++)
            if (*p == 'u' || *p == 't' || *p == 'd') {
                i += p[1] == '\0';
                break;
            }
    }
    return argc;
}

/* main's options: those before the command, and after it but for the
 * commands that parse their own. */
static const struct option ctl_opts[] = {
    {"url", required_argument, NULL, 'u'},
    {"json", no_argument, NULL, 'j'},
    {"timeout", required_argument, NULL, 't'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {"jit-opt-level", required_argument, NULL, 1000},
    {"jit-max-registers", required_argument, NULL, 1001},
    {"jit-line-info", required_argument, NULL, 1002},
    {"jit-fast-compile", required_argument, NULL, 1003},
    {"tls-ca", required_argument, NULL, 1010},
    {"tls-cert", required_argument, NULL, 1011},
    {"tls-key", required_argument, NULL, 1012},
    {"device", required_argument, NULL, 'd'},
    {NULL, 0, NULL, 0},
};

/* --timeout MS: -1 when taken, else the exit status. */
static int
ctl_opt_timeout(ctl *o, const char *arg)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno || end == arg || *end || v <= 0 || v > 3600000) {
        return cumod__ctl_usage("cumodctl: --timeout: '%s' is not a number of "
                                "milliseconds from 1 to 3600000\n",
                                arg);
    }
    o->timeout_ms = (int)v;
    return -1;
}

/* --device N: -1 when taken, else the exit status. */
static int
ctl_opt_device(const char *arg)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno || end == arg || *end || v < 0 || v > 1000000) {
        return cumod__ctl_usage("cumodctl: --device: '%s' is not a device "
                                "ordinal (0, 1, ...; cumodctl status lists "
                                "them)\n",
                                arg);
    }
    /* Every command opens its client with cumod_open, which chooses
     * $CUMOD_DEVICE: one place for all of them. */
    char text[16];
    snprintf(text, sizeof(text), "%ld", v);
    setenv("CUMOD_DEVICE", text, 1);
    return -1;
}

/* --jit-* (i: 0 opt-level, 1 max-registers, 2 line-info, 3 fast-compile):
 * -1 when taken, else the exit status. */
static int
ctl_opt_jit(int i, const char *arg, cumod_jit_options *jit, int *given)
{
    static const int lo[] = {0, 1, 0, 0}, hi[] = {4, 255, 1, 3};
    int *to[] = {&jit->opt_level, &jit->max_registers, &jit->line_info,
                 &jit->fast_compile};
    char *end;

    if (strcmp(arg, "default") == 0) {
        *to[i] = CUMOD_JIT_CLEAR;
        *given = 1;
        return -1;
    }
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno || end == arg || *end || v < lo[i] || v > hi[i]) {
        return cumod__ctl_usage(
            "cumodctl: %s: '%s' is not a number from %d to %d "
            "(or default)\n",
            ctl_opts[5 + i].name, arg, lo[i], hi[i]);
    }
    *to[i] = (int)v;
    *given = 1;
    return -1;
}

/* main's options in argv[0..argc): -1 to go on, else the exit status
 * (--help and --version print and end here). */
static int
ctl_options(int argc, char **argv, ctl *o, cumod_jit_options *jit,
            int *jit_given)
{
    int ch, rv;

    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":u:jt:d:hV", ctl_opts, NULL)) != -1) {
        rv = -1;
        switch (ch) {
        case 'u':
            o->url = optarg;
            break;
        case 'j':
            o->json = 1;
            break;
        case 't':
            rv = ctl_opt_timeout(o, optarg);
            break;
        case 'd':
            rv = ctl_opt_device(optarg);
            break;
        case 1010:
            o->tls.ca = optarg;
            break;
        case 1011:
            o->tls.cert = optarg;
            break;
        case 1012:
            o->tls.key = optarg;
            break;
        case 'h':
            ctl_usage(stdout);
            return 0;
        case 'V':
            printf("cumodctl %s\n", CUMOD_VERSION_STRING);
            return 0;
        case 1000:
        case 1001:
        case 1002:
        case 1003:
            rv = ctl_opt_jit(ch - 1000, optarg, jit, jit_given);
            break;
        case ':':
            return cumod__ctl_usage("cumodctl: option %s needs a value\n",
                                    argv[optind - 1]);
        default:
            return cumod__ctl_usage("cumodctl: unknown option %s (see cumodctl "
                                    "--help)\n",
                                    argv[optind - 1]);
        }
        if (rv >= 0)
            return rv;
    }
    return -1;
}

/* The commands that parse their own options (after the command name). */
static int
ctl_parses_own(const char *cmd)
{
    return strcmp(cmd, "launch") == 0 || strcmp(cmd, "global") == 0 ||
           strcmp(cmd, "carveout") == 0 || strcmp(cmd, "watch") == 0 ||
           strcmp(cmd, "top") == 0 || strcmp(cmd, "gemm") == 0;
}

/* Runs one of those: argv[0] is the command. */
static int
ctl_own_command(int argc, char **argv, ctl *o)
{
    if (strcmp(argv[0], "global") == 0)
        return cumod__ctl_global(argc, argv, o);
    if (strcmp(argv[0], "carveout") == 0)
        return cumod__ctl_carveout(argc, argv, o);
    if (strcmp(argv[0], "watch") == 0)
        return cumod__ctl_watch(argc, argv, o);
    if (strcmp(argv[0], "top") == 0)
        return cumod__ctl_top(argc, argv, o);
    if (strcmp(argv[0], "gemm") == 0)
        return cumod__ctl_gemm(argc, argv, o);
    return cumod__ctl_launch(argc, argv, o);
}

/* Runs a command of ctl_cmds (or __complete): argv[0] is the command,
 * argv[1] its MODULE where it takes one. */
static int
ctl_table_command(int argc, char **argv, ctl *o, const cumod_jit_options *jit,
                  int jit_given)
{
    const char *cmd = argv[0];
    cumod_client *c;
    int rv;

    o->command = cmd;
    if (strcmp(cmd, "__complete") == 0)
        return ctl_complete(o, argc - 1, argv + 1);
    const struct ctl_cmd *cc = NULL;
    for (size_t i = 0; i < sizeof(ctl_cmds) / sizeof(ctl_cmds[0]); i++)
        if (strcmp(cmd, ctl_cmds[i].name) == 0)
            cc = &ctl_cmds[i];
    if (cc == NULL) {
        return cumod__ctl_usage("cumodctl: unknown command '%s' (see cumodctl "
                                "--help)\n",
                                cmd);
    }
    int nargs = argc - 1;
    if (nargs != cc->takes_module) {
        if (cc->takes_module)
            return cumod__ctl_usage("cumodctl: %s needs one MODULE (see "
                                    "cumodctl ls)\n",
                                    cmd);
        return cumod__ctl_usage("cumodctl: %s: unexpected argument '%s'\n", cmd,
                                argv[1]);
    }
    const char *module = cc->takes_module ? argv[1] : NULL;
    if (jit_given && strcmp(cmd, "load") != 0) {
        return cumod__ctl_usage("cumodctl: the --jit-* options go with load\n");
    }
    if ((rv = cumod_open_tls(o->url, o->timeout_ms, &o->tls, &c)) != CUMOD_OK)
        return ctl_fail("connect", rv);
    if (jit_given)
        rv = ctl_load_jit(c, o, module, jit);
    else if (cc->fn != NULL)
        rv = ctl_module_cmd(c, o, cmd, cc->fn, module);
    else if (strcmp(cmd, "show") == 0)
        rv = ctl_show(c, o, module);
    else if (strcmp(cmd, "status") == 0)
        rv = cumod__ctl_status(c, o);
    else
        rv = ctl_ls(c, o);
    cumod_close(c);
    return rv;
}

int
main(int argc, char **argv)
{
    cumod_jit_options jit = CUMOD_JIT_OPTIONS_INIT;
    int jit_given = 0, rv;
    ctl o = {.url = getenv("CUMOD_URL"), .timeout_ms = 10000};
    int cmdi = ctl_command_index(argc, argv);
    /* Commands that parse their own options take main's only before
     * their name. */
    int own = cmdi < argc && ctl_parses_own(argv[cmdi]);

    /* Every error of the command follows --json, wherever it is given
     * (a usage error too, found before the options are read). */
    cumod__ctl_errors(&o);
    cumod__ctl_json_asked(argc, argv);
    if (cmdi < argc)
        o.command = argv[cmdi];
    if ((rv = ctl_options(own ? cmdi : argc, argv, &o, &jit, &jit_given)) >= 0)
        return rv;
    if (o.url == NULL || o.url[0] == '\0')
        o.url = CUMOD_DEFAULT_URL;
    if (own)
        return ctl_own_command(argc - cmdi, argv + cmdi, &o);
    if (optind >= argc) {
        ctl_usage(stderr);
        return cumod__ctl_usage("cumodctl: no command given\n");
    }
    return ctl_table_command(argc - optind, argv + optind, &o, &jit, jit_given);
}
