/*
 * A command's failure, as every command of cumodctl reports it: words on
 * stderr, or with --json an object on stdout (ctl_launch.h says which).
 * A leaf: the commands and main call it, it calls none of them.
 */
#include <stdio.h>
#include <string.h>

#include "ctl_launch.h"
#include "cumod/cumod.h"
#include "json.h"

static const ctl *ctl_current;

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
