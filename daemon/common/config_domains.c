/* SPDX-License-Identifier: MIT */
/*
 * cumodd's settings per domain (config.h's cumod_domain_cfg): [domain
 * NAME] sections of the file and --domain-option NAME:KEY=VALUE, which
 * says the same on the command line; the checks made once every setting
 * is read; the domains written back as --domain-option values.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

static const char cfgd_keys[] =
    "uids, gids, listen, start, device, memory-max, pool";

static cfg_where
cfgd_here(const cfg_ctx *cx)
{
    return (cfg_where){cx->file, cx->line};
}

/* Errors about a domain name the file and line, without the option's name
 * (the file says [domain NAME]); on the command line, the flag. */
static const cfg_opt *
cfgd_opt(const cfg_ctx *cx, const cfg_opt *o)
{
    return cx->file != NULL ? NULL : o;
}

/* An error about what was given at w (checks made after the whole parse). */
static void cfgd_error_at(cfg_ctx *cx, cfg_where w, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
cfgd_error_at(cfg_ctx *cx, cfg_where w, const char *fmt, ...)
{
    const char *file = cx->file;
    int line = cx->line;
    char what[600];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    cx->file = w.file;
    cx->line = w.line;
    cumod__cfg_error(cx, w.file ? NULL : cumod__cfg_find("domain-option"), "%s",
                     what);
    cx->file = file;
    cx->line = line;
}

/* Where w is, in words: "FILE:LINE" or "--domain-option". */
static const char *
cfgd_where_str(cfg_where w, char *buf, size_t len)
{
    if (w.file == NULL)
        snprintf(buf, len, "--domain-option");
    else
        snprintf(buf, len, "%s:%d", w.file, w.line);
    return buf;
}

/* Domain NAME (n bytes of name), made at its first mention; NULL after an
 * error. "default", "uid-*" and "gid-*" are the names cumodd gives the
 * domains it makes itself (--domains), so a section may not take them. */
cumod_domain_cfg *
cumod__cfg_domain_get(cfg_ctx *cx, const cfg_opt *o, const char *name, size_t n)
{
    cumod_config *cfg = cx->cfg;
    cfg_domain_where *w;
    cumod_domain_cfg *d;

    if (n == 0 || n > 63 || strspn(name, cumod__cfg_name_chars) < n ||
        (n == 7 && strncmp(name, "default", 7) == 0) ||
        (n >= 4 &&
         (strncmp(name, "uid-", 4) == 0 || strncmp(name, "gid-", 4) == 0))) {
        cumod__cfg_error(cx, cfgd_opt(cx, o),
                         "[domain %.*s]: not a domain name (1 to 63 of A-Z "
                         "a-z 0-9 _ . -, not 'default' and not starting with "
                         "'uid-' or 'gid-': those name the domains cumodd "
                         "makes)",
                         (int)(n > 200 ? 200 : n), name);
        return NULL;
    }
    for (int i = 0; i < cfg->ndomains; i++)
        if (strlen(cfg->domains[i].name) == n &&
            memcmp(cfg->domains[i].name, name, n) == 0)
            return &cfg->domains[i];
    if ((w = cumod__cfg_domain_where(cfg)) == NULL) {
        cumod__cfg_error(cx, cfgd_opt(cx, o), "out of memory");
        return NULL;
    }
    if (cfg->ndomains == CUMOD_CONFIG_MAX_DOMAINS) {
        cumod__cfg_error(cx, cfgd_opt(cx, o),
                         "[domain %.*s]: at most %d domains", (int)n, name,
                         CUMOD_CONFIG_MAX_DOMAINS);
        return NULL;
    }
    d = &cfg->domains[cfg->ndomains];
    memset(d, 0, sizeof(*d));
    memcpy(d->name, name, n);
    d->name[n] = '\0';
    d->device = -1;
    w[cfg->ndomains] = (cfg_domain_where){.first = cfgd_here(cx)};
    cfg->ndomains++;
    return d;
}

/* uids = LIST or gids = LIST: appended, each id once. */
static int
cfgd_ids(cfg_ctx *cx, const cfg_opt *o, cumod_domain_cfg *d, int group,
         const char *value)
{
    uint32_t *ids = group ? d->gids : d->uids;
    int *n = group ? &d->ngids : &d->nuids, rv = 0, any = 0;
    char *copy = strdup(value), *save = NULL;
    const char *key = group ? "gids" : "uids";

    if (copy == NULL) {
        cumod__cfg_error(cx, cfgd_opt(cx, o), "out of memory");
        return -1;
    }
    for (char *tok = strtok_r(copy, ", \t", &save); tok != NULL && rv == 0;
         tok = strtok_r(NULL, ", \t", &save)) {
        uint32_t id;
        int dup = 0;
        any = 1;
        if (cumod__cfg_id(tok, group, &id) != 0) {
            cumod__cfg_error(cx, cfgd_opt(cx, o),
                             "[domain %s] %s: '%s' is not a %s name or number",
                             d->name, key, tok, group ? "group" : "user");
            rv = -1;
            break;
        }
        for (int i = 0; i < *n; i++)
            dup |= ids[i] == id;
        if (dup)
            continue;
        if (*n == CUMOD_CONFIG_MAX_IDS) {
            cumod__cfg_error(cx, cfgd_opt(cx, o),
                             "[domain %s] %s: at most %d entries", d->name, key,
                             CUMOD_CONFIG_MAX_IDS);
            rv = -1;
            break;
        }
        ids[(*n)++] = id;
    }
    free(copy);
    if (rv == 0 && !any) {
        cumod__cfg_error(cx, cfgd_opt(cx, o), "[domain %s] %s: an empty list",
                         d->name, key);
        rv = -1;
    }
    return rv;
}

/* One KEY=VALUE of domain d (w: where its settings were given). */
static int
cfgd_key(cfg_ctx *cx, const cfg_opt *o, cumod_domain_cfg *d,
         cfg_domain_where *w, const char *key, const char *value)
{
    const cfg_opt *eo = cfgd_opt(cx, o);
    char k[32];
    size_t kn = strlen(key);
    long long v;

    if (kn >= sizeof(k))
        kn = sizeof(k) - 1;
    for (size_t i = 0; i < kn; i++)
        k[i] = key[i] == '_' ? '-' : key[i];
    k[kn] = '\0';
    if (strcmp(k, "uids") == 0 || strcmp(k, "gids") == 0) {
        if (cfgd_ids(cx, o, d, k[0] == 'g', value) != 0)
            return -1;
        if (k[0] == 'g')
            w->gids = cfgd_here(cx);
        else
            w->uids = cfgd_here(cx);
    } else if (strcmp(k, "listen") == 0) {
        const char *url;
        if (value[0] == '\0') {
            cumod__cfg_error(cx, eo, "[domain %s] listen: an empty value",
                             d->name);
            return -1;
        }
        if ((url = cumod__cfg_strdup(cx->cfg, value)) == NULL) {
            cumod__cfg_error(cx, eo, "out of memory");
            return -1;
        }
        d->listen = url;
        w->listen = cfgd_here(cx);
    } else if (strcmp(k, "start") == 0) {
        if (strcmp(value, "always") != 0 && strcmp(value, "on-demand") != 0) {
            cumod__cfg_error(cx, eo,
                             "[domain %s] start: '%s' is not always or "
                             "on-demand",
                             d->name, value);
            return -1;
        }
        d->start_always = value[0] == 'a';
    } else if (strcmp(k, "device") == 0) {
        if (cumod__cfg_number(value, 10, 0, 0, INT_MAX, &v) != 0) {
            cumod__cfg_error(cx, eo,
                             "[domain %s] device: '%s' is not a number "
                             "from 0 to %d (a device ordinal)",
                             d->name, value, INT_MAX);
            return -1;
        }
        d->device = (int)v;
        w->device = cfgd_here(cx);
    } else if (strcmp(k, "memory-max") == 0) {
        if (cumod__cfg_number(value, 10, 1, 0, 1LL << 50, &v) != 0) {
            cumod__cfg_error(cx, eo,
                             "[domain %s] memory-max: '%s' is not a size from "
                             "0 to %lld bytes (a number, with K, M, G or T "
                             "for KiB, MiB, GiB, TiB)",
                             d->name, value, 1LL << 50);
            return -1;
        }
        d->memory_max = (uint64_t)v;
    } else if (strcmp(k, "pool") == 0) {
        if (cumod__cfg_number(value, 10, 0, 1, 48, &v) != 0) {
            cumod__cfg_error(cx, eo,
                             "[domain %s] pool: '%s' is not a number from 1 "
                             "to 48 (executors on its device, under MPS)",
                             d->name, value);
            return -1;
        }
        d->pool = (uint32_t)v;
    } else {
        cumod__cfg_error(cx, eo, "[domain %s]: unknown key '%s' (%s)", d->name,
                         key, cfgd_keys);
        return -1;
    }
    return 0;
}

static void
cfgd_trim(char *s, size_t *n)
{
    while (*n > 0 && (s[*n - 1] == ' ' || s[*n - 1] == '\t'))
        s[--*n] = '\0';
}

int
cumod__cfg_domain_set(cfg_ctx *cx, const cfg_opt *o, const char *value)
{
    const char *colon = strchr(value, ':'), *eq;
    char key[64];
    size_t kn;
    cumod_domain_cfg *d;
    cfg_domain_where *w;

    if (colon == NULL || (eq = strchr(colon + 1, '=')) == NULL ||
        eq == colon + 1) {
        cumod__cfg_error(cx, o, "'%s' is not NAME:KEY=VALUE (KEY: %s)", value,
                         cfgd_keys);
        return -1;
    }
    if ((d = cumod__cfg_domain_get(cx, o, value, (size_t)(colon - value))) ==
        NULL)
        return -1;
    w = &cumod__cfg_domain_where(cx->cfg)[d - cx->cfg->domains];
    colon = cumod__cfg_skip_space(colon + 1) - 1;
    kn = (size_t)(eq - colon - 1);
    if (kn >= sizeof(key))
        kn = sizeof(key) - 1;
    memcpy(key, colon + 1, kn);
    key[kn] = '\0';
    cfgd_trim(key, &kn);
    eq++;
    while (*eq == ' ' || *eq == '\t')
        eq++;
    return cfgd_key(cx, o, d, w, key, eq);
}

static int
cfgd_has(const uint32_t *ids, int n, uint32_t id)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == id)
            return 1;
    return 0;
}

/* No id of domain i's list (uids or gids) is in an earlier domain's. */
static void
cfgd_check_ids(cfg_ctx *cx, const cfg_domain_where *w, int i, int group)
{
    const cumod_config *cfg = cx->cfg;
    const cumod_domain_cfg *d = &cfg->domains[i];
    const uint32_t *ids = group ? d->gids : d->uids;
    int n = group ? d->ngids : d->nuids;
    char at[300];

    for (int k = 0; k < n; k++)
        for (int j = 0; j < i; j++) {
            const cumod_domain_cfg *e = &cfg->domains[j];
            if (!cfgd_has(group ? e->gids : e->uids,
                          group ? e->ngids : e->nuids, ids[k]))
                continue;
            cfgd_error_at(
                cx, group ? w[i].gids : w[i].uids,
                "[domain %s] %s: %s %u is also in [domain %s] (%s): "
                "a %s belongs to one domain",
                d->name, group ? "gids" : "uids", group ? "gid" : "uid", ids[k],
                e->name,
                cfgd_where_str(group ? w[j].gids : w[j].uids, at, sizeof(at)),
                group ? "group" : "user");
        }
}

int
cumod__cfg_domains_check(cfg_ctx *cx)
{
    const cumod_config *cfg = cx->cfg;
    const cfg_domain_where *w;
    int before = cx->errors;
    char at[300];

    if (cfg->ndomains == 0)
        return 0;
    if ((w = cumod__cfg_domain_where(cx->cfg)) == NULL) {
        fprintf(cx->err, "cumodd: out of memory\n");
        cx->errors++;
        return -1;
    }
    for (int i = 0; i < cfg->ndomains; i++) {
        const cumod_domain_cfg *d = &cfg->domains[i];
        if (d->listen != NULL && strcmp(d->listen, cfg->url) == 0)
            cfgd_error_at(cx, w[i].listen,
                          "[domain %s] listen: %s is cumodd's --listen: a "
                          "domain's socket is one of its own",
                          d->name, d->listen);
        for (int j = 0; d->listen != NULL && j < i; j++)
            if (cfg->domains[j].listen != NULL &&
                strcmp(d->listen, cfg->domains[j].listen) == 0)
                cfgd_error_at(cx, w[i].listen,
                              "[domain %s] listen: %s is also [domain %s]'s "
                              "(%s)",
                              d->name, d->listen, cfg->domains[j].name,
                              cfgd_where_str(w[j].listen, at, sizeof(at)));
        if (d->device >= 0 && !cfg->devices_all) {
            int served = 0;
            size_t len = 0;
            at[0] = '\0';
            for (int k = 0; k < cfg->ndevices; k++) {
                served |= cfg->devices[k] == d->device;
                if (len < sizeof(at))
                    len += (size_t)snprintf(at + len, sizeof(at) - len, "%s%d",
                                            k ? "," : "", cfg->devices[k]);
            }
            if (!served)
                cfgd_error_at(cx, w[i].device,
                              "[domain %s] device: %d is not served "
                              "(--device %s)",
                              d->name, d->device, at);
        }
        cfgd_check_ids(cx, w, i, 0);
        cfgd_check_ids(cx, w, i, 1);
    }
    return cx->errors == before ? 0 : -1;
}

/* snprintf's way: appends at *at, counting what did not fit. */
static void cfgd_put(char *buf, size_t len, size_t *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
cfgd_put(char *buf, size_t len, size_t *at, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(*at < len ? buf + *at : NULL, *at < len ? len - *at : 0, fmt,
                  ap);
    va_end(ap);
    if (n > 0)
        *at += (size_t)n;
}

static void
cfgd_put_ids(char *buf, size_t len, size_t *at, const char *name,
             const char *key, const uint32_t *ids, int n)
{
    if (n == 0)
        return;
    cfgd_put(buf, len, at, "\n%s:%s=", name, key);
    for (int i = 0; i < n; i++)
        cfgd_put(buf, len, at, "%s%u", i ? "," : "", ids[i]);
}

int
cumod__cfg_domains_format(const cumod_config *cfg, char *buf, size_t len)
{
    size_t at = 0;

    if (len > 0)
        buf[0] = '\0';
    for (int i = 0; i < cfg->ndomains; i++) {
        const cumod_domain_cfg *d = &cfg->domains[i];
        /* start comes first and always: a domain without other settings
         * is still written */
        cfgd_put(buf, len, &at, "%s%s:start=%s", i ? "\n" : "", d->name,
                 d->start_always ? "always" : "on-demand");
        cfgd_put_ids(buf, len, &at, d->name, "uids", d->uids, d->nuids);
        cfgd_put_ids(buf, len, &at, d->name, "gids", d->gids, d->ngids);
        if (d->listen != NULL)
            cfgd_put(buf, len, &at, "\n%s:listen=%s", d->name, d->listen);
        if (d->device >= 0)
            cfgd_put(buf, len, &at, "\n%s:device=%d", d->name, d->device);
        if (d->memory_max > 0)
            cfgd_put(buf, len, &at, "\n%s:memory-max=%llu", d->name,
                     (unsigned long long)d->memory_max);
        if (d->pool > 1)
            cfgd_put(buf, len, &at, "\n%s:pool=%u", d->name, d->pool);
    }
    return at > INT_MAX ? INT_MAX : (int)at;
}

int
cumod__cfg_domains_live_only(const cumod_config *a, const cumod_config *b)
{
    if (a->ndomains != b->ndomains)
        return 0;
    for (int i = 0; i < a->ndomains; i++) {
        const cumod_domain_cfg *x = &a->domains[i], *y = &b->domains[i];
        if (strcmp(x->name, y->name) != 0 || x->nuids != y->nuids ||
            x->ngids != y->ngids ||
            memcmp(x->uids, y->uids, sizeof(uint32_t) * (size_t)x->nuids) ||
            memcmp(x->gids, y->gids, sizeof(uint32_t) * (size_t)x->ngids) ||
            (x->listen == NULL) != (y->listen == NULL) ||
            (x->listen != NULL && strcmp(x->listen, y->listen) != 0) ||
            x->start_always != y->start_always || x->device != y->device ||
            x->pool != y->pool)
            return 0;
    }
    return 1;
}
