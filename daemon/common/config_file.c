/* SPDX-License-Identifier: MIT */
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
 * A [domain NAME] section is made here (config_domains.c reads its keys,
 * handed over as --domain-option values).
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

/* Checks one physical line's shape; returns 0 to hand it to inih, -1 to
 * hand over an empty line instead (an error was written). */
static int
cfgf_check_line(cfgf_stream *fs, const char *line, size_t n, int max)
{
    cfg_ctx *cx = fs->cx;
    const char *s = cumod__cfg_skip_space(line);

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
            const char *nm = cumod__cfg_skip_space(s + 8);
            size_t nl = (size_t)(end - nm);
            if (nl >= 2 && nm[0] == '"' && nm[nl - 1] == '"') {
                nm++;
                nl -= 2;
            }
            if (cumod__cfg_domain_get(cx, o, nm, nl) == NULL) {
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
            const char *nm = cumod__cfg_skip_space(s + 8);
            size_t nl = (size_t)(end - nm);
            if (nl >= 2 && nm[0] == '"' && nm[nl - 1] == '"') {
                nm++;
                nl -= 2;
            }
            if (nl == 0 || nl > 128 || strspn(nm, cumod__cfg_name_chars) < nl) {
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
    const char *s = cumod__cfg_skip_space(fs->line);
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
