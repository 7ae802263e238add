/* SPDX-License-Identifier: MIT */
/*
 * A command's failure, as every command of cumodctl reports it: words on
 * stderr, or with --json an object on stdout (ctl_launch.h says which).
 * A leaf: the commands and main call it, it calls none of them.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ctl_launch.h"
#include "cumod/cumod.h"
#include "json.h"

static const ctl *ctl_current;
static int ctl_json_asked; /* --json anywhere on the command line */

void
cumod__ctl_json_asked(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--json") == 0)
            ctl_json_asked = 1;
}

int
cumod__ctl_usage(const char *fmt, ...)
{
    const ctl *o = ctl_current;
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fputs(msg, stderr);
    if (ctl_json_asked || (o != NULL && o->json)) {
        const char *d = strncmp(msg, "cumodctl: ", 10) == 0 ? msg + 10
                        : strncmp(msg, "cumodctl ", 9) == 0 ? msg + 9
                                                            : msg;
        size_t n = strlen(d);
        char detail[1024];
        cumod_json j;
        snprintf(detail, sizeof(detail), "%.*s",
                 (int)(n > 0 && d[n - 1] == '\n' ? n - 1 : n), d);
        cumod__json_init(&j, stdout, 0);
        cumod__json_begin_object(&j, NULL);
        cumod__json_bool(&j, "error", 1);
        cumod__json_bool(&j, "usage", 1);
        cumod__json_string(&j, "command", o != NULL ? o->command : NULL);
        cumod__json_int(&j, "code", CUMOD_EINVAL);
        cumod__json_string(&j, "name", cumod_errname(CUMOD_EINVAL));
        cumod__json_string(&j, "detail", detail);
        cumod__json_end_object(&j);
        cumod__json_finish(&j);
    }
    return 2;
}

void
cumod__ctl_errors(const ctl *o)
{
    ctl_current = o;
}

int
cumod__ctl_fail(const char *what, int rv, const char *detail)
{
    const ctl *o = ctl_current;
    const char *cmd = o != NULL && o->command != NULL ? o->command : "cumodctl";

    if (detail == NULL)
        detail = cumod_last_detail();
    if (detail[0] == '\0')
        detail = cumod_strerror(rv);
    if (what != NULL && strcmp(what, cmd) == 0)
        what = NULL;
    if (o != NULL && o->json) {
        cumod_json j;
        /* After whatever the command printed (watch's lines). */
        fflush(stdout);
        cumod__json_init(&j, stdout, 0);
        cumod__json_begin_object(&j, NULL);
        cumod__json_bool(&j, "error", 1);
        cumod__json_string(&j, "command", cmd);
        cumod__json_string(&j, "context", what);
        cumod__json_int(&j, "code", rv);
        cumod__json_string(&j, "name", cumod_errname(rv));
        cumod__json_string(&j, "detail", detail);
        cumod__json_end_object(&j);
        cumod__json_finish(&j);
    } else {
        fprintf(stderr, "cumodctl: %s: %s%s%s\n", cmd, what ? what : "",
                what ? ": " : "", detail);
    }
    return 1;
}
