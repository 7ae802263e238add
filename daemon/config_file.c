/*
 * The configuration file: INI, read with inih. Keys are the long option
 * names ("max-message = 16M"), at the top or under [cumodd]; '#' and ';'
 * start comments; a list option may be repeated or comma-separated.
 *
 * inih does not tell its handler the line number (the library is built
 * without INI_HANDLER_LINENO), so the file is fed to it through a reader
 * that hands over one physical line per call and counts them: every error
 * names its line. The reader also catches what inih would skip or split
 * silently: lines that are too long, and lines that are neither a section,
 * a comment nor "key = value"; and it strips indentation, which inih would
 * take for a continuation of the previous value.
 *
 * [domain NAME] sections, and --domain-option NAME:KEY=VALUE which says
 * the same on the command line, are read here too (cumodd's settings per
 * domain: config.h's cumod_domain_cfg).
 */
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config_internal.h"
#include "modopts.h"

typedef struct cfgf_stream {
    cfg_ctx *cx;
    FILE *f;
    char *line;
    size_t cap;
    int in_other_section; /* keys under an unknown section are ignored */
    char module[129];     /* under [module NAME]: its name, else "" */
    char domain[64];      /* under [domain NAME]: its name, else "" */
} cfgf_stream;

static const char cfgf_name_chars[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-";

static cumod_domain_cfg *cfgd_get(cfg_ctx *cx, const cfg_opt *o,
                                  const char *name, size_t n);

static const char *
cfgf_skip_space(const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\r')
        s++;
    return s;
}

/* Checks one physical line's shape; returns 0 to hand it to inih, -1 to
 * hand over an empty line instead (an error was written). */
static int
cfgf_check_line(cfgf_stream *fs, const char *line, size_t n, int max)
{
    cfg_ctx *cx = fs->cx;
    const char *s = cfgf_skip_space(line);

    if ((int)n > max - 2) {
        cumod__cfg_error(cx, NULL, "the line is longer than %d characters",
                         max - 2);
        return -1;
    }
    if (memchr(line, '\0', n) != NULL) {
        cumod__cfg_error(cx, NULL, "the line holds a NUL byte");
        return -1;
    }
    if (*s == '\0' || *s == '\n' || *s == '#' || *s == ';')
        return 0;
    if (*s == '[') {
        const char *end = strchr(s, ']');
        if (end == NULL) {
            cumod__cfg_error(cx, NULL, "a section name without its ']'");
            return -1;
        }
        size_t len = (size_t)(end - s - 1);
        fs->in_other_section = 0;
        fs->module[0] = '\0';
        fs->domain[0] = '\0';
        if (len > 7 && strncmp(s + 1, "domain ", 7) == 0) {
            /* [domain NAME] or [domain "NAME"]: made here, so that a
             * section without keys is a domain too */
            const cfg_opt *o = cumod__cfg_find("domain-option");
            const char *nm = cfgf_skip_space(s + 8);
            size_t nl = (size_t)(end - nm);
            if (nl >= 2 && nm[0] == '"' && nm[nl - 1] == '"') {
                nm++;
                nl -= 2;
            }
            if (cfgd_get(cx, o, nm, nl) == NULL) {
                fs->in_other_section = 1;
                return -1;
            }
            cumod__cfg_from(cx, o);
            memcpy(fs->domain, nm, nl);
            fs->domain[nl] = '\0';
            return 0;
        }
        if (len > 7 && strncmp(s + 1, "module ", 7) == 0) {
            /* [module NAME] or [module "NAME"]: settings of one module */
            const char *nm = cfgf_skip_space(s + 8);
            size_t nl = (size_t)(end - nm);
            if (nl >= 2 && nm[0] == '"' && nm[nl - 1] == '"') {
                nm++;
                nl -= 2;
            }
            if (nl == 0 || nl > 128 || strspn(nm, cfgf_name_chars) < nl) {
                cumod__cfg_error(cx, NULL,
                                 "[module %.*s]: not a module name (1 to 128 "
                                 "of A-Z a-z 0-9 _ . -)",
                                 (int)(nl > 200 ? 200 : nl), nm);
                fs->in_other_section = 1;
                return -1;
            }
            memcpy(fs->module, nm, nl);
            fs->module[nl] = '\0';
            return 0;
        }
        if (len != 6 || strncmp(s + 1, "cumodd", 6) != 0) {
            cumod__cfg_error(cx, NULL,
                             "unknown section [%.*s] (keys go at the top, "
                             "under [cumodd], [module NAME] or [domain NAME])",
                             (int)len, s + 1);
            fs->in_other_section = 1;
            return -1;
        }
        return 0;
    }
    if (strchr(s, '=') == NULL && strchr(s, ':') == NULL) {
        cumod__cfg_error(cx, NULL, "not 'key = value': %.*s",
                         (int)strcspn(s, "\r\n"), s);
        return -1;
    }
    return 0;
}

/* inih's reader: one physical line per call, counted. */
static char *
cfgf_reader(char *str, int num, void *stream)
{
    cfgf_stream *fs = stream;
    ssize_t n = getline(&fs->line, &fs->cap, fs->f);

    if (n < 0)
        return NULL;
    fs->cx->line++;
    if (cfgf_check_line(fs, fs->line, (size_t)n, num) != 0) {
        snprintf(str, (size_t)num, "\n");
        return str;
    }
    /* Without its indentation: inih would read an indented line as the
     * previous value's continuation, a trap for keys indented under
     * [cumodd]. */
    const char *s = cfgf_skip_space(fs->line);
    n -= s - fs->line;
    memcpy(str, s, (size_t)n);
    str[n] = '\0';
    return str;
}

static int
cfgf_handler(void *user, const char *section, const char *name,
             const char *value)
{
    cfgf_stream *fs = user;
    cfg_ctx *cx = fs->cx;
    const cfg_opt *o;

    (void)section; /* checked by the reader */
    if (fs->in_other_section)
        return 1;
    if (fs->module[0] != '\0') {
        /* KEY = VALUE of [module NAME] is module-option = NAME:KEY=VALUE */
        char item[8192];
        if (!cumod__jit_is_key(name) && strcmp(name, "nvrtc-option") != 0 &&
            strcmp(name, "nvrtc_option") != 0) {
            cumod__cfg_error(
                cx, NULL,
                "unknown key '%s' under [module %s] (jit-opt-level, "
                "jit-max-registers, jit-line-info, "
                "jit-fast-compile, nvrtc-option)",
                name, fs->module);
            return 1;
        }
        snprintf(item, sizeof(item), "%s:%s=%s", fs->module, name, value);
        (void)cumod__cfg_set(cx, cumod__cfg_find("module-option"), item);
        return 1;
    }
    if (fs->domain[0] != '\0') {
        /* KEY = VALUE of [domain NAME] is domain-option = NAME:KEY=VALUE */
        char item[8192];
        snprintf(item, sizeof(item), "%s:%s=%s", fs->domain, name, value);
        (void)cumod__cfg_set(cx, cumod__cfg_find("domain-option"), item);
        return 1;
    }
    if ((o = cumod__cfg_find(name)) == NULL) {
        cumod__cfg_error(cx, NULL, "unknown key '%s' (see cumodd --help)",
                         name);
        return 1;
    }
    if (o->flags & CFG_CMDLINE) {
        cumod__cfg_error(cx, NULL, "'%s' is a command-line option, not a key",
                         name);
        return 1;
    }
    (void)cumod__cfg_set(cx, o, value);
    return 1; /* errors are counted in cx, with their line */
}

int
cumod__cfg_read_file(cfg_ctx *cx, const char *path)
{
    cfgf_stream fs = {.cx = cx};
    struct stat st;
    int before = cx->errors, rv;

    if ((fs.f = fopen(path, "re")) == NULL) {
        fprintf(cx->err, "cumodd: cannot read the configuration file %s: %s\n",
                path, strerror(errno));
        cx->errors++;
        return -1;
    }
    if (fstat(fileno(fs.f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fprintf(cx->err, "cumodd: the configuration file %s is not a file\n",
                path);
        fclose(fs.f);
        cx->errors++;
        return -1;
    }
    cx->file = path;
    cx->line = 0;
    rv = ini_parse_stream(cfgf_reader, &fs, cfgf_handler, &fs);
    if (rv < 0 && cx->errors == before) {
        fprintf(cx->err, "cumodd: %s: cannot be parsed (%d)\n", path, rv);
        cx->errors++;
    }
    cx->file = NULL;
    free(fs.line);
    fclose(fs.f);
    return cx->errors == before ? 0 : -1;
}

/* --- [domain NAME] and --domain-option ------------------------------------
 */

static const char cfgd_keys[] = "uids, gids, listen, start, device, memory-max";

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
static cumod_domain_cfg *
cfgd_get(cfg_ctx *cx, const cfg_opt *o, const char *name, size_t n)
{
    cumod_config *cfg = cx->cfg;
    cfg_domain_where *w;
    cumod_domain_cfg *d;

    if (n == 0 || n > 63 || strspn(name, cfgf_name_chars) < n ||
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
    if ((d = cfgd_get(cx, o, value, (size_t)(colon - value))) == NULL)
        return -1;
    w = &cumod__cfg_domain_where(cx->cfg)[d - cx->cfg->domains];
    colon = cfgf_skip_space(colon + 1) - 1;
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
            x->start_always != y->start_always || x->device != y->device)
            return 0;
    }
    return 1;
}
