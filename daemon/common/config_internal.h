/* SPDX-License-Identifier: MIT */
/*
 * What the files of the configuration share: the option table's row and
 * the parse context. Private to config*.c (and their tests). Who calls
 * whom, without circles:
 *   config.c (the whole parse) -> config_file.c (the INI file)
 *     -> config_set.c (one value) -> config_domains.c ([domain NAME])
 *     -> config_value.c (owned strings, errors, numbers, ids)
 *   config.c -> config_help.c (--help, --man), config_reload.c (--check's
 *   print, SIGHUP's apply); every one reads config_opts.c (the table).
 */
#ifndef CUMOD_CONFIG_INTERNAL_H
#define CUMOD_CONFIG_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"

typedef enum cfg_kind {
    CFG_K_STR,      /* a string */
    CFG_K_PATH,     /* a path (a string) */
    CFG_K_INSTANCE, /* an instance name (a string) */
    CFG_K_INT,      /* int, lo..hi, decimal */
    CFG_K_U32,      /* uint32_t */
    CFG_K_U64,      /* uint64_t */
    CFG_K_SIZE,     /* size_t */
    CFG_K_MODE,     /* int, octal */
    CFG_K_JIT,      /* int, -1 when unset */
    CFG_K_LOG,      /* cumod_log_level */
    CFG_K_GROUP,    /* int gid, by name or number; -1 when unset */
    CFG_K_PINS,     /* module names, appended */
    CFG_K_UIDS,     /* uids, by name or number, appended */
    CFG_K_GIDS,     /* gids, likewise */
    CFG_K_NVRTC,    /* NVRTC options, one per value, appended */
    CFG_K_MODOPT,   /* NAME:KEY=VALUE, one per value, appended */
    CFG_K_FLAG,     /* no value (--check) */
    CFG_K_BOOL,     /* int: a flag sets it; the file says yes/no */
    CFG_K_HELP,
    CFG_K_VERSION,
    CFG_K_MAN, /* prints cumodd(8) from this table */
    /* certificate names, appended */
    CFG_K_SUBJECTS,
    CFG_K_DEVICES,    /* --device N[,M...]|all: devices[], device */
    CFG_K_DOMAINS_BY, /* none, uid or gid */
    CFG_K_DOMOPT,     /* NAME:KEY=VALUE into domains[] (config_domains.c) */
} cfg_kind;

enum {
    CFG_LIVE = 1 << 0,    /* may change at SIGHUP */
    CFG_CMDLINE = 1 << 1, /* a flag only: not a key of the file */
    CFG_HIDDEN = 1 << 2,  /* not in --help (internal) */
    CFG_BYTES = 1 << 3,   /* a size: K, M, G, T suffixes */
};

typedef struct cfg_opt {
    const char *name; /* the long flag and the file's key */
    int letter;       /* the short flag, or 0 */
    cfg_kind kind;
    size_t off; /* of the field in cumod_config */
    long long lo, hi;
    unsigned flags;
    const char *arg;  /* the value's name in --help; NULL: takes none */
    const char *help; /* for --help */
} cfg_opt;

/* One parse: where values go, where errors go, and where in the file. */
typedef struct cfg_ctx {
    cumod_config *cfg;
    FILE *err;
    const char *file; /* set while reading the file */
    int line;
    int errors;
} cfg_ctx;

/* The option table (config_opts.c), in --help's order; cfg->src has a
 * byte per option, at the option's index in the table. */
extern const cfg_opt cumod__cfg_opts[];
extern const size_t cumod__cfg_nopts;
#define CFG_MAX_OPTS sizeof(((cumod_config *)0)->src)

/* The option named key (the long name; '_' reads as '-'), or NULL. */
const cfg_opt *cumod__cfg_find(const char *key);

/* --help's text and cumodd(8) in troff, from the table (config_help.c). */
void cumod__cfg_usage(FILE *f);
void cumod__cfg_man(FILE *f);

/* Sets o from value; on error writes a line naming the flag or the file
 * and line, and returns -1. */
int cumod__cfg_set(cfg_ctx *cx, const cfg_opt *o, const char *value);

/* Writes one error line (with the file and line while reading one). */
void cumod__cfg_error(cfg_ctx *cx, const cfg_opt *o, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A copy of s that cfg owns (freed by cumod__config_fini); NULL when out
 * of memory. */
const char *cumod__cfg_strdup(cumod_config *cfg, const char *s);

/* A number (base 8 or 10; bytes: K, M, G, T suffixes) within lo..hi, or
 * -1. */
int cumod__cfg_number(const char *s, int base, int bytes, long long lo,
                      long long hi, long long *out);

/* A user (group: a group) by number or name, or -1. */
int cumod__cfg_id(const char *s, int group, uint32_t *out);

/* What a module's or a domain's name is made of (strspn's set). */
extern const char cumod__cfg_name_chars[];

/* s past its spaces, tabs and carriage returns. */
const char *cumod__cfg_skip_space(const char *s);

/* An id list's array (CFG_K_UIDS, CFG_K_GIDS) in cfg, and in *n its
 * count. */
uint32_t *cumod__cfg_ids(cumod_config *cfg, const cfg_opt *o, int **n);

/* Records that o's value came from here (the file or a flag). */
void cumod__cfg_from(cfg_ctx *cx, const cfg_opt *o);

/* Where a domain's settings were given, for the checks made once
 * everything is read: the file and line, or file NULL for
 * --domain-option. */
typedef struct cfg_where {
    const char *file;
    int line;
} cfg_where;
typedef struct cfg_domain_where {
    cfg_where first, uids, gids, listen, device;
} cfg_domain_where;

/* cfg's array of CUMOD_CONFIG_MAX_DOMAINS places, one per domains[] entry
 * (owned by cfg); NULL when out of memory. */
cfg_domain_where *cumod__cfg_domain_where(cumod_config *cfg);

/* [domain NAME] and --domain-option (config_domains.c). */

/* Domain NAME (n bytes of name), made at its first mention; NULL after an
 * error (written). */
cumod_domain_cfg *cumod__cfg_domain_get(cfg_ctx *cx, const cfg_opt *o,
                                        const char *name, size_t n);

/* Sets one NAME:KEY=VALUE of --domain-option (o), creating domain NAME at
 * its first mention; errors name the flag, or the file and line. */
int cumod__cfg_domain_set(cfg_ctx *cx, const cfg_opt *o, const char *value);

/* What needs every setting: a domain's listen differs from --listen and
 * from the other domains', its device is served, and no uid or gid is in
 * two domains. Errors are written; returns -1 if there was any. */
int cumod__cfg_domains_check(cfg_ctx *cx);

/* The domains as --domain-option values, one a line ("" for none), into
 * buf (len bytes, len 0: buf may be NULL); returns the length of the whole
 * text, as snprintf. */
int cumod__cfg_domains_format(const cumod_config *cfg, char *buf, size_t len);

/* 1 when a and b have the same domains but for their memory-max (what may
 * change at SIGHUP). */
int cumod__cfg_domains_live_only(const cumod_config *a, const cumod_config *b);

/* Reads the INI file at path into cx->cfg: every error is written (file
 * and line), and -1 returned if there was any. */
int cumod__cfg_read_file(cfg_ctx *cx, const char *path);

#endif
