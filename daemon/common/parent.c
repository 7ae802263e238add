/* SPDX-License-Identifier: MIT */
/* Helpers tied to the front's life (parent.h). */
#include "parent.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#define PARENT_ENV "CUMOD_FRONT_PID"

void
cumod__parent_mark(void)
{
    char pid[24];

    snprintf(pid, sizeof(pid), "%ld", (long)getpid());
    (void)setenv(PARENT_ENV, pid, 1);
}

int
cumod__parent_tie(void)
{
    (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
    return cumod__parent_alive();
}

int
cumod__parent_alive(void)
{
    const char *v = getenv(PARENT_ENV);
    char *end;
    long front;

    errno = 0;
    front = v != NULL ? strtol(v, &end, 10) : 0;
    if (v == NULL || errno != 0 || end == v || *end != '\0' || front <= 0)
        front = 0;
    /* Without the front's word (a helper started by hand), the old look:
     * a parent of 1 is init, which took in an orphan. */
    if (front == 0)
        return getppid() == 1 ? -1 : 0;
    return getppid() == (pid_t)front ? 0 : -1;
}
