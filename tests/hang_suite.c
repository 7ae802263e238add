/* SPDX-License-Identifier: MIT */
/*
 * A suite that hangs, for guard_check.sh: it says which test runs as
 * Criterion does, starts a child that hangs too (as a suite's daemon
 * would), writes a log under TMPDIR, and then never returns. The guard
 * must name the test, print both processes' stacks (these functions) and
 * the log's last line, and leave nothing running.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile sig_atomic_t forever = 1;

__attribute__((noinline)) static void
guard_child_waits(void)
{
    while (forever)
        pause();
}

__attribute__((noinline)) static void
guard_suite_hangs(void)
{
    while (forever)
        sleep(1);
}

int
main(int argc, char **argv)
{
    const char *tmp = getenv("TMPDIR");
    char path[4096];
    if (argc > 1) {
        /* where the child's pid goes, for the check */
        FILE *f;
        pid_t child = fork();
        if (child == 0) {
            guard_child_waits();
            return 0;
        }
        if ((f = fopen(argv[1], "w")) != NULL) {
            fprintf(f, "%d\n", (int)child);
            fclose(f);
        }
    }
    snprintf(path, sizeof(path), "%s/hang-suite.log", tmp ? tmp : "/tmp");
    FILE *log = fopen(path, "w");
    if (log != NULL) {
        fputs("the demo's last words before it hangs\n", log);
        fflush(log);
    }
    printf("[====] Running 1 test from guard:\n");
    printf("[RUN ] guard::a_test_that_hangs\n");
    fflush(stdout);
    guard_suite_hangs();
    return 0;
}
