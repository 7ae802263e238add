/* SPDX-License-Identifier: MIT */
/*
 * A module's own settings (modopts.h): the JIT option keys and their
 * spellings, merging layers, and the two sidecar file formats.
 */
#include "modopts.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct jit_key {
    const char *name; /* as show prints it */
    const char *const *aliases;
    size_t off;
    int lo, hi;
} jit_key;

static const char *const k_opt[] = {"opt-level",
                                    "jit-opt-level",
                                    "optimization-level",
                                    "o",
                                    "cu-jit-optimization-level",
                                    NULL};
static const char *const k_reg[] = {"max-registers",
                                    "jit-max-registers",
                                    "maxrregcount",
                                    "max-regs",
                                    "maxreg",
                                    "cu-jit-max-registers",
                                    NULL};
static const char *const k_line[] = {"line-info",
                                     "jit-line-info",
                                     "lineinfo",
                                     "generate-line-info",
                                     "cu-jit-generate-line-info",
                                     NULL};
static const char *const k_fast[] = {"fast-compile", "jit-fast-compile",
                                     "cu-jit-fast-compile", NULL};

static const jit_key jit_keys[] = {
    {"opt-level", k_opt, offsetof(cumod_jit_opts, opt_level), 0, 4},
    {"max-registers", k_reg, offsetof(cumod_jit_opts, max_registers), 1, 255},
    {"line-info", k_line, offsetof(cumod_jit_opts, line_info), 0, 1},
    {"fast-compile", k_fast, offsetof(cumod_jit_opts, fast_compile), 0, 3},
};
#define JIT_NKEYS (sizeof(jit_keys) / sizeof(jit_keys[0]))

/* key without leading dashes, lowercased, '_' as '-'; "" if too long. */
static void
jit_norm(const char *key, size_t keylen, char *out, size_t outlen)
{
    while (keylen > 0 && *key == '-') {
        key++;
        keylen--;
    }
    if (keylen + 1 > outlen) {
        out[0] = '\0';
        return;
    }
    for (size_t i = 0; i < keylen; i++)
        out[i] = key[i] == '_' ? '-' : (char)tolower((unsigned char)key[i]);
    out[keylen] = '\0';
}

static const jit_key *
jit_find(const char *key, size_t keylen)
{
    char n[64];
    jit_norm(key, keylen, n, sizeof(n));
    for (size_t i = 0; i < JIT_NKEYS; i++)
        for (const char *const *a = jit_keys[i].aliases; *a; a++)
            if (strcmp(n, *a) == 0)
                return &jit_keys[i];
    return NULL;
}

int
cumod__jit_is_key(const char *key)
{
    return jit_find(key, strlen(key)) != NULL;
}

static int
jit_set_n(cumod_jit_opts *o, const char *key, size_t keylen, const char *value,
          char *msg, size_t msglen)
{
    const jit_key *k = jit_find(key, keylen);
    long v;
    char *end;

    if (k == NULL) {
        snprintf(msg, msglen,
                 "unknown JIT option '%.*s' (opt-level N, max-registers N, "
                 "line-info [0|1], fast-compile N)",
                 (int)(keylen > 64 ? 64 : keylen), key);
        return -1;
    }
    if (value == NULL || *value == '\0') {
        if (k->off != offsetof(cumod_jit_opts, line_info)) {
            snprintf(msg, msglen, "%s needs a value (%d to %d)", k->name, k->lo,
                     k->hi);
            return -1;
        }
        value = "1";
    }
    errno = 0;
    v = strtol(value, &end, 10);
    if (errno != 0 || end == value || *end != '\0' || v < k->lo || v > k->hi) {
        snprintf(msg, msglen, "%s: '%.64s' is not a number from %d to %d",
                 k->name, value, k->lo, k->hi);
        return -1;
    }
    int32_t i = (int32_t)v;
    memcpy((char *)o + k->off, &i, sizeof(i));
    return 0;
}

int
cumod__jit_set(cumod_jit_opts *o, const char *key, const char *value, char *msg,
               size_t msglen)
{
    return jit_set_n(o, key, strlen(key), value, msg, msglen);
}

void
cumod__jit_merge(cumod_jit_opts *dst, const cumod_jit_opts *src)
{
    if (src->opt_level >= 0)
        dst->opt_level = src->opt_level;
    if (src->max_registers >= 0)
        dst->max_registers = src->max_registers;
    if (src->line_info >= 0)
        dst->line_info = src->line_info;
    if (src->fast_compile >= 0)
        dst->fast_compile = src->fast_compile;
}

int
cumod__jit_equal(const cumod_jit_opts *a, const cumod_jit_opts *b)
{
    return a->opt_level == b->opt_level &&
           a->max_registers == b->max_registers &&
           a->line_info == b->line_info && a->fast_compile == b->fast_compile;
}

void
cumod__jit_format(const cumod_jit_opts *o, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < JIT_NKEYS && at < len; i++) {
        int32_t v;
        memcpy(&v, (const char *)o + jit_keys[i].off, sizeof(v));
        if (v >= 0)
            at += (size_t)snprintf(buf + at, len - at, "%s%s %d",
                                   at ? ", " : "", jit_keys[i].name, v);
    }
    if (at == 0)
        snprintf(buf, len, "none (the driver's defaults)");
}

static int
modopt_name_ok(const char *s, size_t n)
{
    if (n == 0 || n > 128)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '.' &&
            s[i] != '-')
            return 0;
    return 1;
}

int
cumod__modopt_split(const char *item, char name[129], const char **key,
                    size_t *keylen, const char **value, char *msg,
                    size_t msglen)
{
    const char *colon = strchr(item, ':');
    const char *eq = colon ? strchr(colon + 1, '=') : NULL;

    if (colon == NULL || eq == NULL) {
        snprintf(msg, msglen, "'%.200s' is not NAME:KEY=VALUE", item);
        return -1;
    }
    if (!modopt_name_ok(item, (size_t)(colon - item))) {
        snprintf(msg, msglen,
                 "'%.*s' is not a module name (1 to 128 of A-Z a-z 0-9 _ . "
                 "-)",
                 (int)((colon - item) > 200 ? 200 : (colon - item)), item);
        return -1;
    }
    memcpy(name, item, (size_t)(colon - item));
    name[colon - item] = '\0';
    *key = colon + 1;
    *keylen = (size_t)(eq - colon - 1);
    *value = eq + 1;
    char k[64];
    jit_norm(*key, *keylen, k, sizeof(k));
    if (strcmp(k, "nvrtc-option") == 0) {
        if (**value == '\0') {
            snprintf(msg, msglen, "%s: nvrtc-option needs a value", name);
            return -1;
        }
        return 0;
    }
    cumod_jit_opts tmp = CUMOD_JIT_OPTS_UNSET;
    char m2[200];
    if (jit_set_n(&tmp, *key, *keylen, *value, m2, sizeof(m2)) != 0) {
        snprintf(msg, msglen, "%s: %s (or nvrtc-option)", name, m2);
        return -1;
    }
    return 0;
}

void
cumod__modopt_for(const char *const *items, int nitems, const char *name,
                  cumod_jit_opts *jit, const char **opts, size_t max, size_t *n)
{
    for (int i = 0; i < nitems; i++) {
        char nm[129], msg[256], k[64];
        const char *key, *value;
        size_t keylen;
        if (cumod__modopt_split(items[i], nm, &key, &keylen, &value, msg,
                                sizeof(msg)) != 0 ||
            strcmp(nm, name) != 0)
            continue;
        jit_norm(key, keylen, k, sizeof(k));
        if (strcmp(k, "nvrtc-option") == 0) {
            if (opts != NULL && *n < max)
                opts[(*n)++] = value;
            continue;
        }
        if (jit != NULL)
            (void)jit_set_n(jit, key, keylen, value, msg, sizeof(msg));
    }
}

/* The next line of text (without its '\n'), or NULL at the end. */
static const char *
opts_line(const char *text, size_t len, size_t *at, size_t *linelen)
{
    if (*at >= len)
        return NULL;
    const char *s = text + *at;
    const char *nl = memchr(s, '\n', len - *at);
    size_t n = nl ? (size_t)(nl - s) : len - *at;
    *at += n + (nl != NULL);
    *linelen = n;
    return s;
}

/* Trims white space (and a '\r') off both ends. */
static const char *
opts_trim(const char *s, size_t *n)
{
    while (*n > 0 && isspace((unsigned char)*s)) {
        s++;
        (*n)--;
    }
    while (*n > 0 && isspace((unsigned char)s[*n - 1]))
        (*n)--;
    return s;
}

/* The next line of a sidecar that says something: trimmed, neither blank
 * nor a comment; *line counts every line. NULL at the end. */
static const char *
opts_next(const char *text, size_t len, size_t *at, int *line, size_t *n)
{
    const char *s;
    while ((s = opts_line(text, len, at, n)) != NULL) {
        ++*line;
        s = opts_trim(s, n);
        if (*n > 0 && *s != '#')
            return s;
    }
    return NULL;
}

/* Both sidecar formats are text: a NUL byte says the file is not. */
static int
opts_is_text(const char *text, size_t len, const char *fname, char *msg,
             size_t msglen)
{
    if (memchr(text, '\0', len) == NULL)
        return 1;
    snprintf(msg, msglen, "%s: holds a NUL byte: not a text file", fname);
    return 0;
}

int
cumod__opts_parse_jit(const char *text, size_t len, const char *fname,
                      cumod_jit_opts *out, char *msg, size_t msglen)
{
    size_t at = 0, n;
    const char *s;
    int line = 0;
    cumod_jit_opts o = CUMOD_JIT_OPTS_UNSET;

    if (!opts_is_text(text, len, fname, msg, msglen))
        return -1;
    while ((s = opts_next(text, len, &at, &line, &n)) != NULL) {
        if (n >= CUMOD_OPTS_LINE_MAX) {
            snprintf(msg, msglen, "%s:%d: the line is too long", fname, line);
            return -1;
        }
        char buf[CUMOD_OPTS_LINE_MAX];
        memcpy(buf, s, n);
        buf[n] = '\0';
        char *hash = strchr(buf, '#');
        if (hash != NULL)
            *hash = '\0';
        /* KEY=VALUE, KEY VALUE, or KEY; also -O3 */
        size_t klen = strcspn(buf, "= \t");
        char *v = buf + klen;
        if (*v != '\0') {
            *v++ = '\0';
            while (*v == ' ' || *v == '\t' || *v == '=')
                v++;
            size_t vn = strlen(v);
            while (vn > 0 && isspace((unsigned char)v[vn - 1]))
                v[--vn] = '\0';
        }
        char key[64];
        jit_norm(buf, strlen(buf), key, sizeof(key));
        const char *k = buf;
        char lvl[2] = {key[1], '\0'};
        if (*v == '\0' && key[0] == 'o' && isdigit((unsigned char)key[1]) &&
            key[2] == '\0') {
            k = "opt-level"; /* -O3: the level in the key */
            v = lvl;
        }
        char m2[256];
        if (cumod__jit_set(&o, k, v, m2, sizeof(m2)) != 0) {
            snprintf(msg, msglen, "%s:%d: %s", fname, line, m2);
            return -1;
        }
    }
    *out = o;
    return 0;
}

int
cumod__opts_parse_lines(const char *text, size_t len, const char *fname,
                        char **opts, size_t *count, char *msg, size_t msglen)
{
    size_t at = 0, n, k = 0;
    const char *s;
    int line = 0;

    *count = 0;
    if (!opts_is_text(text, len, fname, msg, msglen))
        return -1;
    while ((s = opts_next(text, len, &at, &line, &n)) != NULL) {
        if (n >= CUMOD_OPTS_LINE_MAX || k == CUMOD_OPTS_FILE_MAX) {
            snprintf(msg, msglen, "%s:%d: %s", fname, line,
                     k == CUMOD_OPTS_FILE_MAX ? "too many options (at most "
                                                "256)"
                                              : "the line is too long");
            goto fail;
        }
        if ((opts[k] = strndup(s, n)) == NULL) {
            snprintf(msg, msglen, "%s: out of memory", fname);
            goto fail;
        }
        k++;
    }
    *count = k;
    return 0;
fail:
    while (k > 0)
        free(opts[--k]);
    return -1;
}
