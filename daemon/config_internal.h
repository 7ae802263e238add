/*
 * What config.c and config_file.c share: the option table's row and the
 * parse context. Private to those two files (and their tests).
 */
#ifndef CUMOD_CONFIG_INTERNAL_H
#define CUMOD_CONFIG_INTERNAL_H

#include <stddef.h>
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

/* The option named key (the long name; '_' reads as '-'), or NULL. */
const cfg_opt *cumod__cfg_find(const char *key);

/* Sets o from value; on error writes a line naming the flag or the file
 * and line, and returns -1. */
int cumod__cfg_set(cfg_ctx *cx, const cfg_opt *o, const char *value);

/* Writes one error line (with the file and line while reading one). */
void cumod__cfg_error(cfg_ctx *cx, const cfg_opt *o, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A copy of s that cfg owns (freed by cumod__config_fini); NULL when out
 * of memory. */
const char *cumod__cfg_strdup(cumod_config *cfg, const char *s);

/* Reads the INI file at path into cx->cfg: every error is written (file
 * and line), and -1 returned if there was any. */
int cumod__cfg_read_file(cfg_ctx *cx, const char *path);

#endif
