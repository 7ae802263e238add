/* SPDX-License-Identifier: MIT */
/*
 * One value into cumod_config: cumod__cfg_set reads a flag's or a file
 * line's value by its option's kind (numbers, sizes, names, lists, the
 * device list, the domains) and records where it came from.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"
#include "modopts.h"

/* A module name as the catalog names modules: [A-Za-z0-9_.-]{1,128}. */
static int
cfg_module_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 128)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '.' ||
              s[i] == '-'))
            return 0;
    return 1;
}

/* An instance name: what a systemd instance may be and a path may hold. */
static int
cfg_instance_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64 || s[0] == '.')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '.' ||
              s[i] == '-' || s[i] == '@'))
            return 0;
    return 1;
}

static const char *
cfg_trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    return s;
}

/* Appends a name to --allow-cert-subject: printable, and all of them
 * within what the access policy copies (access.h). */
static int
cfg_subject(cfg_ctx *cx, const cfg_opt *o, const char *item)
{
    cumod_config *cfg = cx->cfg;
    size_t total = strlen(item) + 1;
    const char *d;

    for (int i = 0; i < cfg->nallow_subjects; i++)
        total += strlen(cfg->allow_subjects[i]) + 1;
    for (const char *c = item; *c; c++)
        if ((unsigned char)*c < 0x21 || (unsigned char)*c > 0x7e) {
            cumod__cfg_error(cx, o, "'%s' is not a certificate name", item);
            return -1;
        }
    if (strlen(item) >= 128 || cfg->nallow_subjects == CUMOD_CONFIG_MAX_IDS ||
        total > 8192) {
        cumod__cfg_error(cx, o,
                         "at most %d names of 127 bytes each, 8 KiB in all",
                         CUMOD_CONFIG_MAX_IDS);
        return -1;
    }
    if ((d = cumod__cfg_strdup(cfg, item)) == NULL) {
        cumod__cfg_error(cx, o, "out of memory");
        return -1;
    }
    cfg->allow_subjects[cfg->nallow_subjects++] = d;
    return 0;
}

/* Appends each comma- or space-separated item of value to a list. */
static int
cfg_list(cfg_ctx *cx, const cfg_opt *o, const char *value)
{
    cumod_config *cfg = cx->cfg;
    char *copy = strdup(value), *save = NULL;
    int rv = 0, any = 0;

    if (copy == NULL) {
        cumod__cfg_error(cx, o, "out of memory");
        return -1;
    }
    for (char *tok = strtok_r(copy, ", \t", &save); tok != NULL;
         tok = strtok_r(NULL, ", \t", &save)) {
        const char *item = cfg_trim(tok);
        any = 1;
        if (o->kind == CFG_K_PINS) {
            if (!cfg_module_name(item)) {
                cumod__cfg_error(cx, o,
                                 "'%s' is not a module name (1 to 128 of "
                                 "A-Z a-z 0-9 _ . -)",
                                 item);
                rv = -1;
            } else if (cfg->npins == CUMOD_CONFIG_MAX_PINS) {
                cumod__cfg_error(cx, o, "at most %d modules",
                                 CUMOD_CONFIG_MAX_PINS);
                rv = -1;
                break;
            } else {
                const char *d = cumod__cfg_strdup(cfg, item);
                if (d == NULL) {
                    cumod__cfg_error(cx, o, "out of memory");
                    rv = -1;
                    break;
                }
                cfg->pins[cfg->npins++] = d;
            }
            continue;
        }
        if (o->kind == CFG_K_SUBJECTS) {
            if (cfg_subject(cx, o, item) != 0) {
                rv = -1;
                break;
            }
            continue;
        }
        int group = o->kind == CFG_K_GIDS;
        int *n;
        uint32_t *ids = cumod__cfg_ids(cfg, o, &n);
        uint32_t id;
        if (cumod__cfg_id(item, group, &id) != 0) {
            cumod__cfg_error(cx, o, "'%s' is not a %s name or number", item,
                             group ? "group" : "user");
            rv = -1;
        } else if (*n == CUMOD_CONFIG_MAX_IDS) {
            cumod__cfg_error(cx, o, "at most %d entries", CUMOD_CONFIG_MAX_IDS);
            rv = -1;
            break;
        } else {
            ids[(*n)++] = id;
        }
    }
    free(copy);
    if (!any && rv == 0 && cx->file == NULL) {
        cumod__cfg_error(cx, o, "an empty list");
        rv = -1;
    }
    return rv;
}

/* --device N[,M...]|all. The whole list is read before any of it is
 * kept: a later value replaces an earlier one (flags win over the file). */
static int
cfg_devices(cfg_ctx *cx, const cfg_opt *o, const char *value)
{
    cumod_config *cfg = cx->cfg;
    int devs[CUMOD_CONFIG_MAX_DEVICES], n = 0, rv = 0;
    char *copy, *save = NULL;

    if (strcmp(value, "all") == 0) {
        cfg->devices_all = 1;
        cfg->ndevices = 0;
        cfg->device = 0;
        return 0;
    }
    if ((copy = strdup(value)) == NULL) {
        cumod__cfg_error(cx, o, "out of memory");
        return -1;
    }
    for (char *tok = strtok_r(copy, ", \t", &save); tok != NULL && rv == 0;
         tok = strtok_r(NULL, ", \t", &save)) {
        long long v;
        int dup = 0;
        if (strcmp(tok, "all") == 0) {
            cumod__cfg_error(cx, o,
                             "'all' stands alone (every device), not in a "
                             "list: '%s'",
                             value);
            rv = -1;
        } else if (cumod__cfg_number(tok, 10, 0, 0, INT_MAX, &v) != 0) {
            /* "is not a number from 0 to" as for every number */
            int alone = strcmp(tok, value) == 0;
            cumod__cfg_error(cx, o,
                             "'%s' is not a number from 0 to %d%s%s%s "
                             "(a device ordinal: N[,M...] or all)",
                             tok, INT_MAX, alone ? "" : " in '",
                             alone ? "" : value, alone ? "" : "'");
            rv = -1;
        } else {
            for (int i = 0; i < n; i++)
                dup |= devs[i] == (int)v;
            if (dup) {
                cumod__cfg_error(cx, o, "device %lld is listed twice in '%s'",
                                 v, value);
                rv = -1;
            } else if (n == CUMOD_CONFIG_MAX_DEVICES) {
                cumod__cfg_error(cx, o, "at most %d devices in '%s'",
                                 CUMOD_CONFIG_MAX_DEVICES, value);
                rv = -1;
            } else {
                devs[n++] = (int)v;
            }
        }
    }
    free(copy);
    if (rv == 0 && n == 0) {
        cumod__cfg_error(cx, o, "an empty list (N[,M...] or all)");
        rv = -1;
    }
    if (rv != 0)
        return -1;
    memcpy(cfg->devices, devs, sizeof(int) * (size_t)n);
    cfg->ndevices = n;
    cfg->devices_all = 0;
    cfg->device = devs[0];
    return 0;
}

/* A string, a path or an instance name: not empty, and copied. */
static int
cfg_set_string(cfg_ctx *cx, const cfg_opt *o, const char *value, char *p)
{
    if (value[0] == '\0') {
        cumod__cfg_error(cx, o, "an empty value");
        return -1;
    }
    if (o->kind == CFG_K_INSTANCE && !cfg_instance_name(value)) {
        cumod__cfg_error(cx, o,
                         "'%s' is not an instance name (1 to 64 of "
                         "A-Z a-z 0-9 _ . - @, not starting with .)",
                         value);
        return -1;
    }
    const char *d = cumod__cfg_strdup(cx->cfg, value);
    if (d == NULL) {
        cumod__cfg_error(cx, o, "out of memory");
        return -1;
    }
    memcpy(p, &d, sizeof(d));
    return 0;
}

/* A number within o's limits (octal for a mode, a size with its suffix),
 * stored at the field's width. */
static int
cfg_set_number(cfg_ctx *cx, const cfg_opt *o, const char *value, char *p)
{
    long long v;

    if (cumod__cfg_number(value, o->kind == CFG_K_MODE ? 8 : 10,
                          (o->flags & CFG_BYTES) != 0, o->lo, o->hi, &v) != 0) {
        if (o->kind == CFG_K_MODE)
            cumod__cfg_error(cx, o,
                             "'%s' is not an octal mode from 0 to "
                             "0777",
                             value);
        else if (o->flags & CFG_BYTES)
            cumod__cfg_error(cx, o,
                             "'%s' is not a size from %lld to %lld bytes "
                             "(a number, with K, M, G or T for KiB, MiB, "
                             "GiB, TiB)",
                             value, o->lo, o->hi);
        else
            cumod__cfg_error(cx, o, "'%s' is not a number from %lld to %lld",
                             value, o->lo, o->hi);
        return -1;
    }
    if (o->kind == CFG_K_U64) {
        uint64_t u = (uint64_t)v;
        memcpy(p, &u, sizeof(u));
    } else if (o->kind == CFG_K_U32) {
        uint32_t u = (uint32_t)v;
        memcpy(p, &u, sizeof(u));
    } else if (o->kind == CFG_K_SIZE) {
        size_t u = (size_t)v;
        memcpy(p, &u, sizeof(u));
    } else {
        int i = (int)v;
        memcpy(p, &i, sizeof(i));
    }
    return 0;
}

/* A list (module names, users, groups, certificate names): a list given
 * by flags replaces the file's (flags win). */
static int
cfg_set_list(cfg_ctx *cx, const cfg_opt *o, const char *value, int idx)
{
    cumod_config *cfg = cx->cfg;

    if (!cx->file && cfg->src[idx] != CUMOD_SRC_FLAG) {
        int *n;
        if (o->kind == CFG_K_PINS)
            cfg->npins = 0;
        else if (o->kind == CFG_K_SUBJECTS)
            cfg->nallow_subjects = 0;
        else if (cumod__cfg_ids(cfg, o, &n) != NULL)
            *n = 0;
    }
    return cfg_list(cx, o, value);
}

/* One item per value: an NVRTC option may hold commas and spaces. A list
 * given by flags replaces the file's (flags win). */
static int
cfg_set_item(cfg_ctx *cx, const cfg_opt *o, const char *value, int idx)
{
    cumod_config *cfg = cx->cfg;
    int nv = o->kind == CFG_K_NVRTC;
    int *n = nv ? &cfg->nnvrtc_opts : &cfg->nmod_opts;
    const char **items = nv ? cfg->nvrtc_opts : cfg->mod_opts;

    if (!cx->file && cfg->src[idx] != CUMOD_SRC_FLAG)
        *n = 0;
    if (nv)
        cfg->nvrtc_opts_set = 1;
    if (value[0] == '\0') {
        if (nv)
            return 0; /* an empty list: no defaults */
        cumod__cfg_error(cx, o, "an empty value");
        return -1;
    }
    if (!nv) {
        char name[129], msg[512];
        const char *key, *val;
        size_t keylen;
        if (cumod__modopt_split(value, name, &key, &keylen, &val, msg,
                                sizeof(msg)) != 0) {
            cumod__cfg_error(cx, o, "%s", msg);
            return -1;
        }
    }
    if (*n == CUMOD_CONFIG_MAX_OPTS) {
        cumod__cfg_error(cx, o, "at most %d entries", CUMOD_CONFIG_MAX_OPTS);
        return -1;
    }
    const char *d = cumod__cfg_strdup(cfg, value);
    if (d == NULL) {
        cumod__cfg_error(cx, o, "out of memory");
        return -1;
    }
    items[(*n)++] = d;
    return 0;
}

/* Domains given by flags replace the file's (flags win), as
 * --module-option's list does. */
static int
cfg_set_domain(cfg_ctx *cx, const cfg_opt *o, const char *value, int idx)
{
    cumod_config *cfg = cx->cfg;

    if (!cx->file && cfg->src[idx] != CUMOD_SRC_FLAG) {
        memset(cfg->domains, 0, sizeof(cfg->domains));
        cfg->ndomains = 0;
    }
    return cumod__cfg_domain_set(cx, o, value);
}

static int
cfg_set_log(cfg_ctx *cx, const cfg_opt *o, const char *value)
{
    if (cumod__log_parse_level(value, &cx->cfg->log_level) != 0) {
        cumod__cfg_error(cx, o,
                         "'%s' is not one of error, warn, notice, info, "
                         "debug",
                         value);
        return -1;
    }
    return 0;
}

static int
cfg_set_group(cfg_ctx *cx, const cfg_opt *o, const char *value)
{
    uint32_t g;

    if (cumod__cfg_id(value, 1, &g) != 0) {
        cumod__cfg_error(cx, o, "'%s' is not a group name or number", value);
        return -1;
    }
    cx->cfg->socket_group = (int)g;
    return 0;
}

static int
cfg_set_domains_by(cfg_ctx *cx, const cfg_opt *o, const char *value)
{
    cumod_config *cfg = cx->cfg;

    if (strcmp(value, "none") == 0)
        cfg->domains_by = CUMOD_DOMAINS_NONE;
    else if (strcmp(value, "uid") == 0)
        cfg->domains_by = CUMOD_DOMAINS_UID;
    else if (strcmp(value, "gid") == 0)
        cfg->domains_by = CUMOD_DOMAINS_GID;
    else {
        cumod__cfg_error(cx, o, "'%s' is not none, uid or gid", value);
        return -1;
    }
    return 0;
}

static int
cfg_set_bool(cfg_ctx *cx, const cfg_opt *o, const char *value, char *p)
{
    int b;

    if (strcmp(value, "yes") == 0 || strcmp(value, "true") == 0 ||
        strcmp(value, "1") == 0 || strcmp(value, "on") == 0)
        b = 1;
    else if (strcmp(value, "no") == 0 || strcmp(value, "false") == 0 ||
             strcmp(value, "0") == 0 || strcmp(value, "off") == 0)
        b = 0;
    else {
        cumod__cfg_error(cx, o, "'%s' is not yes or no", value);
        return -1;
    }
    memcpy(p, &b, sizeof(b));
    return 0;
}

/* Sets option o from value (from a flag, or the file's line): by its
 * kind, then records where the value came from. */
int
cumod__cfg_set(cfg_ctx *cx, const cfg_opt *o, const char *value)
{
    char *p = (char *)cx->cfg + o->off;
    int idx = (int)(o - cumod__cfg_opts);
    int rv;

    switch (o->kind) {
    case CFG_K_STR:
    case CFG_K_PATH:
    case CFG_K_INSTANCE:
        rv = cfg_set_string(cx, o, value, p);
        break;
    case CFG_K_INT:
    case CFG_K_U32:
    case CFG_K_U64:
    case CFG_K_SIZE:
    case CFG_K_MODE:
    case CFG_K_JIT:
        rv = cfg_set_number(cx, o, value, p);
        break;
    case CFG_K_LOG:
        rv = cfg_set_log(cx, o, value);
        break;
    case CFG_K_GROUP:
        rv = cfg_set_group(cx, o, value);
        break;
    case CFG_K_PINS:
    case CFG_K_UIDS:
    case CFG_K_GIDS:
    case CFG_K_SUBJECTS:
        rv = cfg_set_list(cx, o, value, idx);
        break;
    case CFG_K_NVRTC:
    case CFG_K_MODOPT:
        rv = cfg_set_item(cx, o, value, idx);
        break;
    case CFG_K_DEVICES:
        rv = cfg_devices(cx, o, value);
        break;
    case CFG_K_DOMAINS_BY:
        rv = cfg_set_domains_by(cx, o, value);
        break;
    case CFG_K_DOMOPT:
        rv = cfg_set_domain(cx, o, value, idx);
        break;
    case CFG_K_FLAG:
        cx->cfg->check_only = 1;
        rv = 0;
        break;
    case CFG_K_BOOL:
        rv = cfg_set_bool(cx, o, value, p);
        break;
    default:
        return -1;
    }
    if (rv != 0)
        return -1;
    cumod__cfg_from(cx, o);
    return 0;
}

void
cumod__cfg_from(cfg_ctx *cx, const cfg_opt *o)
{
    cx->cfg->src[o - cumod__cfg_opts] =
        cx->file ? CUMOD_SRC_FILE : CUMOD_SRC_FLAG;
}
