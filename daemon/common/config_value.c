/* SPDX-License-Identifier: MIT */
/*
 * What every part of the parse uses: the strings a cumod_config owns, the
 * error line, and the readers of numbers, sizes, users and groups.
 */
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

/* --- Owned strings ------------------------------------------------------ */

struct cumod_config_strs {
    size_t n, cap;
    char **v;
    cfg_domain_where *dwhere; /* CUMOD_CONFIG_MAX_DOMAINS, or NULL */
};

static cumod_config_strs *
cfg_strs(cumod_config *cfg)
{
    if (cfg->strs == NULL)
        cfg->strs = calloc(1, sizeof(*cfg->strs));
    return cfg->strs;
}

cfg_domain_where *
cumod__cfg_domain_where(cumod_config *cfg)
{
    cumod_config_strs *st = cfg_strs(cfg);

    if (st != NULL && st->dwhere == NULL)
        st->dwhere = calloc(CUMOD_CONFIG_MAX_DOMAINS, sizeof(*st->dwhere));
    return st != NULL ? st->dwhere : NULL;
}

const char *
cumod__cfg_strdup(cumod_config *cfg, const char *s)
{
    cumod_config_strs *st = cfg_strs(cfg);
    char *d;

    if (st == NULL)
        return NULL;
    if (st->n == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 16;
        char **v = realloc(st->v, cap * sizeof(*v));
        if (v == NULL)
            return NULL;
        st->v = v;
        st->cap = cap;
    }
    if ((d = strdup(s)) == NULL)
        return NULL;
    st->v[st->n++] = d;
    return d;
}

void
cumod__config_fini(cumod_config *cfg)
{
    if (cfg == NULL || cfg->strs == NULL)
        return;
    for (size_t i = 0; i < cfg->strs->n; i++)
        free(cfg->strs->v[i]);
    free(cfg->strs->v);
    free(cfg->strs->dwhere);
    free(cfg->strs);
    cfg->strs = NULL;
}

const char cumod__cfg_name_chars[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-";

const char *
cumod__cfg_skip_space(const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\r')
        s++;
    return s;
}

/* --- Errors -------------------------------------------------------------- */

void
cumod__cfg_error(cfg_ctx *cx, const cfg_opt *o, const char *fmt, ...)
{
    va_list ap;
    char what[600];

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    cx->errors++;
    if (cx->file != NULL)
        fprintf(cx->err, "cumodd: %s:%d: %s%s%s\n", cx->file, cx->line,
                o ? o->name : "", o ? ": " : "", what);
    else
        fprintf(cx->err, "cumodd: %s%s%s%s\n", o ? "--" : "", o ? o->name : "",
                o ? ": " : "", what);
}
/* --- Values -------------------------------------------------------------- */

/* A number, with a size suffix where bytes is set: K, M, G, T (powers of
 * 1024; "KiB" and "k" too). */
int
cumod__cfg_number(const char *s, int base, int bytes, long long lo,
                  long long hi, long long *out)
{
    char *end;
    long long v;
    unsigned shift = 0;

    if (s[0] == '\0' || s[0] == '-' || s[0] == '+' || s[0] == ' ')
        return -1;
    errno = 0;
    v = strtoll(s, &end, base);
    if (errno != 0 || end == s)
        return -1;
    if (bytes && *end != '\0') {
        switch (*end) {
        case 'k':
        case 'K':
            shift = 10;
            break;
        case 'M':
            shift = 20;
            break;
        case 'G':
            shift = 30;
            break;
        case 'T':
            shift = 40;
            break;
        default:
            return -1;
        }
        end++;
        if (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0)
            end += strlen(end);
        if (v > (LLONG_MAX >> shift))
            return -1;
        v <<= shift;
    }
    if (*end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* A user or group, by number or name. */
int
cumod__cfg_id(const char *s, int group, uint32_t *out)
{
    long long v;
    if (cumod__cfg_number(s, 10, 0, 0, 0xfffffffeLL, &v) == 0) {
        *out = (uint32_t)v;
        return 0;
    }
    char buf[4096];
    if (group) {
        struct group gr, *g = NULL;
        if (getgrnam_r(s, &gr, buf, sizeof(buf), &g) != 0 || g == NULL)
            return -1;
        *out = (uint32_t)g->gr_gid;
    } else {
        struct passwd pw, *p = NULL;
        if (getpwnam_r(s, &pw, buf, sizeof(buf), &p) != 0 || p == NULL)
            return -1;
        *out = (uint32_t)p->pw_uid;
    }
    return 0;
}

/* An id list (CFG_K_UIDS, CFG_K_GIDS): its array is at o->off, its count
 * right after it (config.h). */
uint32_t *
cumod__cfg_ids(cumod_config *cfg, const cfg_opt *o, int **n)
{
    char *at = (char *)cfg + o->off;
    *n = (int *)(void *)(at + sizeof(uint32_t) * CUMOD_CONFIG_MAX_IDS);
    return (uint32_t *)(void *)at;
}
_Static_assert(offsetof(cumod_config, nallow_uid) ==
                       offsetof(cumod_config, allow_uid) +
                           sizeof(uint32_t) * CUMOD_CONFIG_MAX_IDS &&
                   offsetof(cumod_config, nallow_gid) ==
                       offsetof(cumod_config, allow_gid) +
                           sizeof(uint32_t) * CUMOD_CONFIG_MAX_IDS &&
                   offsetof(cumod_config, ncontrol_uid) ==
                       offsetof(cumod_config, control_uid) +
                           sizeof(uint32_t) * CUMOD_CONFIG_MAX_IDS &&
                   offsetof(cumod_config, ncontrol_gid) ==
                       offsetof(cumod_config, control_gid) +
                           sizeof(uint32_t) * CUMOD_CONFIG_MAX_IDS,
               "an id list's count follows its array");
