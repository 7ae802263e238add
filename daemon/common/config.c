/* SPDX-License-Identifier: MIT */
/*
 * The whole parse: the command line (getopt_long over the option table,
 * config_opts.c), the defaults, --instance, the file (config_file.c),
 * then the checks across options; and the same parse again at SIGHUP
 * (cumod__config_reread; config_reload.c applies what may change).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_internal.h"
#include "cumod/version.h"

#define OFF(field) offsetof(cumod_config, field)

/* The getopt_long table made from the option table. */
static void
cfg_getopt_table(struct option *lo, char *shorts)
{
    size_t k = 0;
    *shorts++ = ':';
    for (size_t i = 0; i < cumod__cfg_nopts; i++) {
        int needs = cumod__cfg_opts[i].arg != NULL;
        lo[i] = (struct option){cumod__cfg_opts[i].name,
                                needs ? required_argument : no_argument, NULL,
                                256 + (int)i};
        if (cumod__cfg_opts[i].letter) {
            shorts[k++] = (char)cumod__cfg_opts[i].letter;
            if (needs)
                shorts[k++] = ':';
        }
    }
    lo[cumod__cfg_nopts] = (struct option){NULL, 0, NULL, 0};
    shorts[k] = '\0';
}

static const cfg_opt *
cfg_by_code(int c)
{
    if (c >= 256 && c < 256 + (int)cumod__cfg_nopts)
        return &cumod__cfg_opts[c - 256];
    for (size_t i = 0; i < cumod__cfg_nopts; i++)
        if (cumod__cfg_opts[i].letter == c)
            return &cumod__cfg_opts[i];
    return NULL;
}

/* One pass over argv. pre: only --config, --instance, --help, --version
 * (and the check that every flag is known); otherwise everything but
 * those. Returns RUN, EXIT (help/version printed) or USAGE. */
static cumod_config_result
cfg_argv(cfg_ctx *cx, int argc, char **argv, int pre)
{
    struct option lo[CFG_MAX_OPTS + 1];
    char shorts[2 * CFG_MAX_OPTS + 2];
    int c;

    cfg_getopt_table(lo, shorts);
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
        const cfg_opt *o = cfg_by_code(c);
        if (c == ':') {
            fprintf(cx->err, "cumodd: option %s needs a value\n",
                    argv[optind - 1]);
            return CUMOD_CONFIG_USAGE;
        }
        if (o == NULL) {
            fprintf(cx->err, "cumodd: unknown option %s (see cumodd --help)\n",
                    argv[optind - 1]);
            return CUMOD_CONFIG_USAGE;
        }
        int early = o->kind == CFG_K_HELP || o->kind == CFG_K_VERSION ||
                    o->kind == CFG_K_MAN || o->off == OFF(config_file) ||
                    o->off == OFF(instance) || o->off == OFF(config_dir);
        if (pre != early)
            continue;
        if (o->kind == CFG_K_HELP) {
            cumod__cfg_usage(stdout);
            return CUMOD_CONFIG_EXIT;
        }
        if (o->kind == CFG_K_VERSION) {
            printf("cumodd %s\n", CUMOD_VERSION_STRING);
            return CUMOD_CONFIG_EXIT;
        }
        if (o->kind == CFG_K_MAN) {
            cumod__cfg_man(stdout);
            return CUMOD_CONFIG_EXIT;
        }
        if (cumod__cfg_set(cx, o, o->arg ? optarg : "1") != 0)
            return CUMOD_CONFIG_USAGE;
    }
    if (optind < argc) {
        fprintf(cx->err,
                "cumodd: unexpected argument '%s' (see cumodd --help)\n",
                argv[optind]);
        return CUMOD_CONFIG_USAGE;
    }
    return CUMOD_CONFIG_RUN;
}

/* --- Defaults, and the whole parse ---------------------------------------- */

static void
cfg_defaults(cumod_config *cfg)
{
    cfg->url = CUMOD_DEFAULT_URL;
    cfg->ndevices = 1; /* device 0 */
    cfg->domain_idle_s = 300;
    cfg->pool = 1;
    cfg->socket_mode = 0660;
    cfg->socket_group = -1;
    cfg->max_msg = 64u << 20;
    cfg->log_level = CUMOD_LOG_INFO;
    cfg->executor_fd = -1;
    cfg->executor_ring_fd = -1;
    cfg->max_image_size = 256u << 20;
    cfg->jit.opt_level = -1;
    cfg->jit.max_registers = -1;
    cfg->jit.line_info = -1;
    cfg->jit.fast_compile = -1;
    cfg->compile_timeout_s = 60;
    cfg->compile_memory_max = (uint64_t)4 << 30;
    cfg->drain_ms = 10000;
    cfg->restart_wait_ms = 2000;
    cfg->quarantine_after = 1;
    cfg->stuck_ms = 10000;
    cfg->max_connections = 1024;
    cfg->session_max_buffers = 65536;
    cfg->session_max_streams = 1024;
    cfg->session_max_segments = 64;
    cfg->session_max_inflight = 65536;
    cfg->busy_poll_us = 200;
    cfg->direct_launches = 1;
    cfg->max_watch_wait_ms = 60000;
    cfg->session_max_requests = 4096;
}

/* --instance NAME's defaults, before the file. */
static int
cfg_instance_defaults(cfg_ctx *cx, char *file, size_t filelen)
{
    cumod_config *cfg = cx->cfg;
    const char *name = cfg->instance;
    char buf[512];
    long long dev;

    snprintf(buf, sizeof(buf), "ipc:///run/cumod-%s/cumodd.sock", name);
    if ((cfg->url = cumod__cfg_strdup(cfg, buf)) == NULL)
        return -1;
    snprintf(buf, sizeof(buf), "/var/lib/cumod/%s/kernels", name);
    if ((cfg->kernel_dir = cumod__cfg_strdup(cfg, buf)) == NULL)
        return -1;
    if (cumod__cfg_number(name, 10, 0, 0, INT_MAX, &dev) == 0)
        cfg->device = cfg->devices[0] = (int)dev;
    if (cfg->config_dir != NULL)
        snprintf(file, filelen, "%s/%s.conf", cfg->config_dir, name);
    else
        snprintf(file, filelen, "%s/cumod/%s.conf", CUMOD_SYSCONFDIR, name);
    return 0;
}

/* --mps and the pools: a pool of executors on one GPU without MPS would
 * time-slice between their contexts (docs/isolation.md), so it is
 * refused. */
static int
cfg_mps_check(cfg_ctx *cx)
{
    cumod_config *cfg = cx->cfg;
    const char *m = cfg->mps ? cfg->mps : "none";
    uint32_t pool = cfg->pool;
    const char *who = "--pool";

    if (strcmp(m, "none") == 0)
        cfg->mps_mode = CUMOD_MPS_NONE;
    else if (strcmp(m, "own") == 0)
        cfg->mps_mode = CUMOD_MPS_OWN;
    else if (strcmp(m, "join") == 0)
        cfg->mps_mode = CUMOD_MPS_JOIN;
    else {
        fprintf(cx->err, "cumodd: --mps: '%s' is not none, own or join\n", m);
        return -1;
    }
    for (int i = 0; i < cfg->ndomains; i++)
        if (cfg->domains[i].pool > pool) {
            pool = cfg->domains[i].pool;
            who = cfg->domains[i].name;
        }
    if (pool > 1 && cfg->mps_mode == CUMOD_MPS_NONE) {
        fprintf(cx->err,
                "cumodd: %s%s: a pool of %u executors on one GPU needs MPS "
                "(--mps own, or --mps join with a control daemon running): "
                "without it their contexts time-slice the GPU, each launch "
                "waiting for the others' time slices (docs/isolation.md)\n",
                who, strcmp(who, "--pool") ? " (its pool)" : "", pool);
        return -1;
    }
    if (cfg->mps_mode != CUMOD_MPS_NONE && pool <= 1 && cfg->executor_fd < 0)
        fprintf(cx->err,
                "cumodd: warning: --mps %s and no pool above 1: no executor "
                "is made an MPS client\n",
                m);
    return 0;
}

/* tls+tcp:// needs a certificate and its key, and the TLS options are for
 * such a listener; the files must be readable (they are read when the
 * listener starts and at each SIGHUP). Exit 78 (EX_CONFIG) either way: a
 * listener without credentials would fail every handshake. */
static int
cfg_tls_check(cfg_ctx *cx)
{
    const cumod_config *cfg = cx->cfg;
    int tls = strncmp(cfg->url, "tls+", 4) == 0;
    const struct {
        const char *path, *flag;
    } files[] = {
        {cfg->tls_cert, "--tls-cert"},
        {cfg->tls_key, "--tls-key"},
        {cfg->tls_ca, "--tls-ca"},
    };

    if (tls && (cfg->tls_cert == NULL || cfg->tls_key == NULL)) {
        fprintf(cx->err,
                "cumodd: listening on %s needs the server's certificate and "
                "its key: %s%s%s missing (tls-cert = FILE and tls-key = FILE "
                "in the file)\n",
                cfg->url, cfg->tls_cert ? "" : "--tls-cert FILE",
                cfg->tls_cert || cfg->tls_key ? "" : " and ",
                cfg->tls_key ? "" : "--tls-key FILE");
        return -1;
    }
    if (!tls && (cfg->tls_cert || cfg->tls_key || cfg->tls_ca)) {
        fprintf(cx->err,
                "cumodd: --tls-cert, --tls-key and --tls-ca are for a "
                "tls+tcp:// listener, and cumodd listens on %s\n",
                cfg->url);
        return -1;
    }
    if (cfg->nallow_subjects > 0 && cfg->tls_ca == NULL) {
        fprintf(cx->err, "cumodd: --allow-cert-subject needs --tls-ca: only a "
                         "certificate a CA vouches for names anyone\n");
        return -1;
    }
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
        if (files[i].path != NULL && access(files[i].path, R_OK) != 0) {
            fprintf(cx->err, "cumodd: %s: cannot read %s: %s\n", files[i].flag,
                    files[i].path, strerror(errno));
            return -1;
        }
    return 0;
}

/* Everything but the early pass: defaults, instance, file, flags, and the
 * checks across options. Errors go to cx->err. */
static cumod_config_result
cfg_build(cfg_ctx *cx, int argc, char **argv, const char *file,
          const char *instance, const char *dir)
{
    cumod_config *cfg = cx->cfg;
    char inst_file[PATH_MAX] = "";
    cumod_config_result r;

    cfg_defaults(cfg);
    cfg->argc = argc;
    cfg->argv = argv;
    if (dir != NULL && (cfg->config_dir = cumod__cfg_strdup(cfg, dir)) == NULL)
        return CUMOD_CONFIG_BAD;
    if (instance != NULL) {
        cfg->instance = cumod__cfg_strdup(cfg, instance);
        if (cfg->instance == NULL ||
            cfg_instance_defaults(cx, inst_file, sizeof(inst_file)) != 0) {
            fprintf(cx->err, "cumodd: out of memory\n");
            return CUMOD_CONFIG_BAD;
        }
        if (file == NULL && access(inst_file, F_OK) == 0)
            file = inst_file;
    }
    if (file != NULL) {
        if ((cfg->config_file = cumod__cfg_strdup(cfg, file)) == NULL)
            return CUMOD_CONFIG_BAD;
        if (cumod__cfg_read_file(cx, cfg->config_file) != 0)
            return CUMOD_CONFIG_BAD;
    }
    if ((r = cfg_argv(cx, argc, argv, 0)) != CUMOD_CONFIG_RUN)
        return r;
    if (cfg->executor_fd < 0 && cfg->kernel_dir == NULL) {
        fprintf(cx->err, "cumodd: --kernels DIR is required (or kernels = DIR "
                         "in the file; see cumodd --help)\n");
        return CUMOD_CONFIG_USAGE;
    }
    if (cfg->executor_fd < 0 && cfg_tls_check(cx) != 0)
        return CUMOD_CONFIG_BAD;
    if (cfg_mps_check(cx) != 0)
        return cfg->src[cumod__cfg_find("mps") - cumod__cfg_opts] ==
                           CUMOD_SRC_FLAG ||
                       cfg->src[cumod__cfg_find("pool") - cumod__cfg_opts] ==
                           CUMOD_SRC_FLAG
                   ? CUMOD_CONFIG_USAGE
                   : CUMOD_CONFIG_BAD;
    /* The domains' checks across options: a flag among them is a usage
     * error, as for the deadlines below. */
    if (cfg->executor_fd < 0 && cumod__cfg_domains_check(cx) != 0) {
        const char *by[] = {"device", "listen", "domain-option"};
        for (size_t i = 0; i < sizeof(by) / sizeof(by[0]); i++)
            if (cfg->src[cumod__cfg_find(by[i]) - cumod__cfg_opts] ==
                CUMOD_SRC_FLAG)
                return CUMOD_CONFIG_USAGE;
        return CUMOD_CONFIG_BAD;
    }
    if (cfg->max_launch_deadline_ms &&
        cfg->launch_deadline_ms > cfg->max_launch_deadline_ms) {
        fprintf(cx->err,
                "cumodd: launch-deadline %u is above max-launch-deadline "
                "%u\n",
                cfg->launch_deadline_ms, cfg->max_launch_deadline_ms);
        return cfg->src[cumod__cfg_find("launch-deadline") - cumod__cfg_opts] ==
                       CUMOD_SRC_FLAG
                   ? CUMOD_CONFIG_USAGE
                   : CUMOD_CONFIG_BAD;
    }
    return CUMOD_CONFIG_RUN;
}

cumod_config_result
cumod__config_parse(cumod_config *cfg, int argc, char **argv)
{
    cfg_ctx cx = {.cfg = cfg, .err = stderr};
    cumod_config_result r;

    memset(cfg, 0, sizeof(*cfg));
    cfg->executor_fd = -1;
    cfg->executor_ring_fd = -1;
    /* First --help, --version, --config and --instance, which say what
     * the rest starts from. */
    if ((r = cfg_argv(&cx, argc, argv, 1)) != CUMOD_CONFIG_RUN)
        return r;
    char *file = cfg->config_file ? strdup(cfg->config_file) : NULL;
    char *inst = cfg->instance ? strdup(cfg->instance) : NULL;
    char *dir = cfg->config_dir ? strdup(cfg->config_dir) : NULL;
    cumod__config_fini(cfg);
    memset(cfg, 0, sizeof(*cfg));
    r = cfg_build(&cx, argc, argv, file, inst, dir);
    free(file);
    free(inst);
    free(dir);
    if (r != CUMOD_CONFIG_RUN)
        return r;
    if (cfg->check_only) {
        struct stat st;
        if (stat(cfg->kernel_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "cumodd: kernels: %s is not a folder: %s\n",
                    cfg->kernel_dir,
                    stat(cfg->kernel_dir, &st) != 0 ? strerror(errno)
                                                    : "not a directory");
            return CUMOD_CONFIG_BAD;
        }
        cumod__config_print(cfg, stdout);
        return CUMOD_CONFIG_EXIT;
    }
    return CUMOD_CONFIG_RUN;
}

int
cumod__config_reread(const cumod_config *cur, cumod_config *next)
{
    char *text = NULL;
    size_t len = 0;
    FILE *err = open_memstream(&text, &len);
    cfg_ctx cx = {.cfg = next, .err = err};
    cumod_config_result r;

    memset(next, 0, sizeof(*next));
    next->executor_fd = -1;
    if (err == NULL)
        return -1;
    r = cfg_build(&cx, cur->argc, cur->argv, cur->config_file, cur->instance,
                  cur->config_dir);
    fclose(err);
    if (r != CUMOD_CONFIG_RUN) {
        for (char *line = strtok(text, "\n"); line != NULL;
             line = strtok(NULL, "\n"))
            CUMOD_LOGE("CUMOD-CONFIG", "%s",
                       strncmp(line, "cumodd: ", 8) == 0 ? line + 8 : line);
        CUMOD_LOGE("CUMOD-CONFIG",
                   "the configuration was not reloaded: the settings in "
                   "use stay");
        free(text);
        cumod__config_fini(next);
        return -1;
    }
    free(text);
    return 0;
}

unsigned
cumod__submit_threads_default(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores >= 16 ? 8 : cores >= 8 ? (unsigned)cores / 4 : 1;
}
