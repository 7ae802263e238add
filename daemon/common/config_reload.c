/* SPDX-License-Identifier: MIT */
/*
 * The settings as the file would give them, and what SIGHUP may change:
 * --check prints every setting and where it came from
 * (cumod__config_print); at SIGHUP the reread settings replace those in
 * use where the option is live (CFG_LIVE) and are logged as waiting for a
 * restart where not (cumod__config_apply).
 */
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"
#include "cumod/version.h"

/* The value of a list option (o's kind one of the lists) in cfg as the
 * file would give it: NVRTC and module options one a line, the others
 * comma-separated. */
static void
cfg_format_list(const cumod_config *cfg, const cfg_opt *o, char *buf,
                size_t len)
{
    size_t at = 0;

    switch (o->kind) {
    case CFG_K_NVRTC:
    case CFG_K_MODOPT: {
        int nv = o->kind == CFG_K_NVRTC;
        int n = nv ? cfg->nnvrtc_opts : cfg->nmod_opts;
        const char *const *v = nv ? cfg->nvrtc_opts : cfg->mod_opts;
        for (int i = 0; i < n && at < len; i++)
            at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? "\n" : "",
                                   v[i]);
        break;
    }
    case CFG_K_PINS:
        for (int i = 0; i < cfg->npins && at < len; i++)
            at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? ", " : "",
                                   cfg->pins[i]);
        break;
    case CFG_K_SUBJECTS:
        for (int i = 0; i < cfg->nallow_subjects && at < len; i++)
            at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? ", " : "",
                                   cfg->allow_subjects[i]);
        break;
    case CFG_K_DEVICES:
        if (cfg->devices_all)
            snprintf(buf, len, "all");
        for (int i = 0; i < cfg->ndevices && at < len; i++)
            at += (size_t)snprintf(buf + at, len - at, "%s%d", i ? "," : "",
                                   cfg->devices[i]);
        break;
    case CFG_K_UIDS:
    case CFG_K_GIDS: {
        int *np;
        const uint32_t *ids = cumod__cfg_ids((cumod_config *)cfg, o, &np);
        int n = *np;
        for (int i = 0; i < n && at < len; i++)
            at += (size_t)snprintf(buf + at, len - at, "%s%u", i ? ", " : "",
                                   ids[i]);
        break;
    }
    default:
        break;
    }
}

/* The value of o in cfg as the file would give it. */
static void
cfg_format(const cumod_config *cfg, const cfg_opt *o, char *buf, size_t len)
{
    const char *p = (const char *)cfg + o->off;

    buf[0] = '\0';
    switch (o->kind) {
    case CFG_K_STR:
    case CFG_K_PATH: {
        const char *s;
        memcpy(&s, p, sizeof(s));
        snprintf(buf, len, "%s", s ? s : "");
        break;
    }
    case CFG_K_INT:
    case CFG_K_JIT: {
        int v;
        memcpy(&v, p, sizeof(v));
        if (v >= 0)
            snprintf(buf, len, "%d", v);
        break;
    }
    case CFG_K_MODE: {
        int v;
        memcpy(&v, p, sizeof(v));
        snprintf(buf, len, "0%o", (unsigned)v);
        break;
    }
    case CFG_K_BOOL: {
        int v;
        memcpy(&v, p, sizeof(v));
        snprintf(buf, len, "%s", v ? "yes" : "no");
        break;
    }
    case CFG_K_U32: {
        uint32_t v;
        memcpy(&v, p, sizeof(v));
        snprintf(buf, len, "%u", v);
        break;
    }
    case CFG_K_U64: {
        uint64_t v;
        memcpy(&v, p, sizeof(v));
        snprintf(buf, len, "%llu", (unsigned long long)v);
        break;
    }
    case CFG_K_SIZE: {
        size_t v;
        memcpy(&v, p, sizeof(v));
        snprintf(buf, len, "%zu", v);
        break;
    }
    case CFG_K_LOG:
        snprintf(buf, len, "%s", cumod__log_level_name(cfg->log_level));
        break;
    case CFG_K_GROUP:
        if (cfg->socket_group >= 0)
            snprintf(buf, len, "%d", cfg->socket_group);
        break;
    case CFG_K_DOMAINS_BY:
        snprintf(buf, len, "%s",
                 cfg->domains_by == CUMOD_DOMAINS_UID   ? "uid"
                 : cfg->domains_by == CUMOD_DOMAINS_GID ? "gid"
                                                        : "none");
        break;
    case CFG_K_NVRTC:
    case CFG_K_MODOPT:
    case CFG_K_PINS:
    case CFG_K_SUBJECTS:
    case CFG_K_DEVICES:
    case CFG_K_UIDS:
    case CFG_K_GIDS:
        cfg_format_list(cfg, o, buf, len);
        break;
    default:
        break;
    }
}

static const char *const cfg_src_names[] = {
    [CUMOD_SRC_DEFAULT] = "default",
    [CUMOD_SRC_FILE] = "from the file",
    [CUMOD_SRC_FLAG] = "from a flag",
};

/* The domains as --domain-option values, one a line, in a string the
 * caller frees (NULL when out of memory): 64 domains of 512 ids each do
 * not fit the buffers of the other options. */
static char *
cfg_domains_text(const cumod_config *cfg)
{
    int n = cumod__cfg_domains_format(cfg, NULL, 0);
    char *t = malloc((size_t)n + 1);

    if (t != NULL)
        cumod__cfg_domains_format(cfg, t, (size_t)n + 1);
    return t;
}

static void
cfg_print_domains(const cumod_config *cfg, size_t i, FILE *out)
{
    const char *name = cumod__cfg_opts[i].name,
               *src = cfg_src_names[cfg->src[i]];
    char *t = cfg_domains_text(cfg);

    if (t == NULL || t[0] == '\0')
        fprintf(out, "# %s = ; %s, %s\n", name, t ? "unset" : "out of memory",
                src);
    for (char *line = t, *nl; t != NULL && *line != '\0'; line = nl) {
        if ((nl = strchr(line, '\n')) != NULL)
            *nl++ = '\0';
        else
            nl = line + strlen(line);
        fprintf(out, "%s = %s ; %s\n", name, line, src);
    }
    free(t);
}

/* At a reread: only the domains' memory-max may change while cumodd runs;
 * any other change to the domains waits for a restart. */
static void
cfg_apply_domains(cumod_config *cur, cumod_config *next, size_t i,
                  cumod_config_change_cb cb, void *arg)
{
    const char *name = cumod__cfg_opts[i].name;
    char *a = cfg_domains_text(cur), *b = cfg_domains_text(next);

    if (a == NULL || b == NULL || strcmp(a, b) == 0)
        goto done;
    if (!cumod__cfg_domains_live_only(cur, next)) {
        CUMOD_LOGW("CUMOD-CONFIG",
                   "%s: '%s' -> '%s' cannot change while cumodd runs: "
                   "restart it to apply",
                   name, a, b);
        if (cb != NULL)
            cb(arg, name, 0);
        goto done;
    }
    CUMOD_LOGN("CUMOD-CONFIG", "%s: '%s' -> '%s' (%s)", name, a, b,
               cfg_src_names[next->src[i]]);
    for (int k = 0; k < cur->ndomains; k++)
        cur->domains[k].memory_max = next->domains[k].memory_max;
    cur->src[i] = next->src[i];
    if (cb != NULL)
        cb(arg, name, 1);
done:
    free(a);
    free(b);
}

void
cumod__config_print(const cumod_config *cfg, FILE *out)
{
    char val[8192];

    fprintf(out, "# cumodd %s: the settings in effect", CUMOD_VERSION_STRING);
    if (cfg->instance)
        fprintf(out, " for instance %s", cfg->instance);
    fprintf(out, "\n# (the file %s, then the flags)\n[cumodd]\n",
            cfg->config_file ? cfg->config_file : "none");
    for (size_t i = 0; i < cumod__cfg_nopts; i++) {
        const cfg_opt *o = &cumod__cfg_opts[i];
        if (o->flags & CFG_CMDLINE)
            continue;
        if (o->kind == CFG_K_DOMOPT) {
            cfg_print_domains(cfg, i, out);
            continue;
        }
        cfg_format(cfg, o, val, sizeof(val));
        if ((o->kind == CFG_K_NVRTC || o->kind == CFG_K_MODOPT) && val[0]) {
            /* One line per item: values may hold commas. */
            for (char *line = val, *nl; line != NULL; line = nl) {
                if ((nl = strchr(line, '\n')) != NULL)
                    *nl++ = '\0';
                fprintf(out, "%s = %s ; %s\n", o->name, line,
                        cfg_src_names[cfg->src[i]]);
            }
            continue;
        }
        if (o->kind == CFG_K_NVRTC && cfg->nvrtc_opts_set) {
            fprintf(out, "%s = ; none, %s\n", o->name,
                    cfg_src_names[cfg->src[i]]);
            continue;
        }
        if (val[0])
            fprintf(out, "%s = %s ; %s\n", o->name, val,
                    cfg_src_names[cfg->src[i]]);
        else
            fprintf(out, "# %s = ; unset, %s\n", o->name,
                    cfg_src_names[cfg->src[i]]);
    }
}

void
cumod__config_apply(cumod_config *cur, cumod_config *next,
                    cumod_config_change_cb cb, void *arg)
{
    char a[8192], b[8192];

    for (size_t i = 0; i < cumod__cfg_nopts; i++) {
        const cfg_opt *o = &cumod__cfg_opts[i];
        if (o->flags & CFG_CMDLINE)
            continue;
        if (o->kind == CFG_K_DOMOPT) {
            cfg_apply_domains(cur, next, i, cb, arg);
            continue;
        }
        cfg_format(cur, o, a, sizeof(a));
        cfg_format(next, o, b, sizeof(b));
        if (strcmp(a, b) == 0)
            continue;
        if (!(o->flags & CFG_LIVE)) {
            CUMOD_LOGW("CUMOD-CONFIG",
                       "%s: '%s' -> '%s' cannot change while cumodd runs: "
                       "restart it to apply",
                       o->name, a, b);
            if (cb != NULL)
                cb(arg, o->name, 0);
            continue;
        }
        CUMOD_LOGN("CUMOD-CONFIG", "%s: '%s' -> '%s' (%s)", o->name, a, b,
                   cfg_src_names[next->src[i]]);
        switch (o->kind) {
        case CFG_K_PINS:
            cur->npins = 0;
            for (int k = 0; k < next->npins; k++) {
                const char *d = cumod__cfg_strdup(cur, next->pins[k]);
                if (d != NULL)
                    cur->pins[cur->npins++] = d;
            }
            break;
        case CFG_K_NVRTC:
        case CFG_K_MODOPT: {
            int nv = o->kind == CFG_K_NVRTC;
            int *n = nv ? &cur->nnvrtc_opts : &cur->nmod_opts;
            const char **v = nv ? cur->nvrtc_opts : cur->mod_opts;
            int nn = nv ? next->nnvrtc_opts : next->nmod_opts;
            const char *const *nvv = nv ? next->nvrtc_opts : next->mod_opts;
            *n = 0;
            for (int k = 0; k < nn; k++) {
                const char *d = cumod__cfg_strdup(cur, nvv[k]);
                if (d != NULL)
                    v[(*n)++] = d;
            }
            if (nv)
                cur->nvrtc_opts_set = next->nvrtc_opts_set;
            break;
        }
        case CFG_K_SUBJECTS:
            cur->nallow_subjects = 0;
            for (int k = 0; k < next->nallow_subjects; k++) {
                const char *d = cumod__cfg_strdup(cur, next->allow_subjects[k]);
                if (d != NULL)
                    cur->allow_subjects[cur->nallow_subjects++] = d;
            }
            break;
        case CFG_K_UIDS:
        case CFG_K_GIDS: {
            int *cn, *nn;
            uint32_t *c = cumod__cfg_ids(cur, o, &cn);
            const uint32_t *nx = cumod__cfg_ids((cumod_config *)next, o, &nn);
            memcpy(c, nx, sizeof(uint32_t) * CUMOD_CONFIG_MAX_IDS);
            *cn = *nn;
            break;
        }
        case CFG_K_LOG:
            cur->log_level = next->log_level;
            cumod__log_set_level(next->log_level);
            break;
        case CFG_K_STR:
        case CFG_K_PATH: {
            const char *s;
            memcpy(&s, (char *)next + o->off, sizeof(s));
            s = s ? cumod__cfg_strdup(cur, s) : NULL;
            memcpy((char *)cur + o->off, &s, sizeof(s));
            break;
        }
        default: {
            size_t w = o->kind == CFG_K_U64    ? sizeof(uint64_t)
                       : o->kind == CFG_K_SIZE ? sizeof(size_t)
                       : o->kind == CFG_K_U32  ? sizeof(uint32_t)
                                               : sizeof(int);
            memcpy((char *)cur + o->off, (char *)next + o->off, w);
            break;
        }
        }
        cur->src[i] = next->src[i];
        if (cb != NULL)
            cb(arg, o->name, 1);
    }
}
