/* SPDX-License-Identifier: MIT */
/*
 * Tenants for the domain suites (tenant.h).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tenant.h"

/* The tenant as another user runs: a copy of domain_client in the
 * daemon's folder (which the suite opens to everyone, for its socket),
 * since that user may not reach the build folder (a checkout in a 0700
 * folder, as `mktemp -d` makes). */
static char *
tenant_reachable(th_env *t, char *exe, size_t cap)
{
    char cmd[1200];
    snprintf(exe, cap, "%s/domain_client", t->d.dir);
    if (access(exe, X_OK) == 0)
        return exe;
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s' && chmod 0755 '%s'",
             CUMOD_TEST_DOMAIN_CLIENT, exe, exe);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    return exe;
}

void
th_tenant_spawn(th_tenant *p, th_env *t, int uid, const char *const *env,
                const char *url, const char *const *args)
{
    static int seq;
    int fds[2];
    char *argv[16], exe[400];
    int n = 0;

    snprintf(p->out, sizeof(p->out), "%s/.tenant-%d-%d.out", t->dir,
             (int)getpid(), seq++);
    cr_assert_eq(pipe(fds), 0);
    argv[n++] = uid >= 0 ? tenant_reachable(t, exe, sizeof(exe))
                         : (char *)CUMOD_TEST_DOMAIN_CLIENT;
    argv[n++] = (char *)url;
    for (int i = 0; args[i] != NULL && n < 15; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    p->pid = fork();
    cr_assert(p->pid >= 0);
    if (p->pid == 0) {
        int o = open(p->out, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        dup2(fds[0], 0);
        dup2(o, 1);
        close(fds[1]);
        for (int i = 0; env != NULL && env[i] != NULL; i++)
            putenv((char *)env[i]);
        if (uid >= 0) {
            gid_t g = (gid_t)uid;
            if (setgroups(1, &g) != 0 || setgid(g) != 0 ||
                setuid((uid_t)uid) != 0)
                _exit(97);
        }
        execv(argv[0], argv);
        _exit(96);
    }
    close(fds[0]);
    p->in = fds[1];
}

char *
th_tenant_output(const th_tenant *p)
{
    char *s = th_read_file(p->out);
    return s != NULL ? s : strdup("");
}

void
th_tenant_wait_for(const th_tenant *p, const char *needle)
{
    for (int w = 0; w < 6000; w++) {
        char *s = th_tenant_output(p);
        int hit = strstr(s, needle) != NULL;
        free(s);
        if (hit)
            return;
        th_sleep_ms(10);
    }
    char *s = th_tenant_output(p);
    cr_assert_fail("the tenant never said '%s': %s", needle, s);
}

int
th_tenant_wait(th_tenant *p)
{
    int st;
    close(p->in);
    while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int
th_tenant_run(th_env *t, int uid, const char *const *env, const char *url,
              const char *const *args, char **out)
{
    th_tenant p;
    th_tenant_spawn(&p, t, uid, env, url, args);
    int rc = th_tenant_wait(&p);
    *out = th_tenant_output(&p);
    return rc;
}

void
th_check_start(th_check *c, th_env *t, int uid, const char *const *env,
               const char *url, int real)
{
    static int seq;
    snprintf(c->stop, sizeof(c->stop), "%s/.stop-%d-%d", t->dir, (int)getpid(),
             seq++);
    th_tenant_spawn(
        &c->p, t, uid, env, url,
        (const char *const[]){"check", c->stop, real ? "1" : "0", NULL});
    th_tenant_wait_for(&c->p, "ready");
}

void
th_check_stop(th_check *c, th_check_result *r)
{
    double gap_us;
    cr_assert_eq(th_write_file(c->stop, "stop"), 0);
    cr_assert_eq(th_tenant_wait(&c->p), 0);
    char *s = th_tenant_output(&c->p), *line = strstr(s, "ok=");
    cr_assert(line != NULL, "no result line: %s", s);
    cr_assert_eq(sscanf(line,
                        "ok=%ld failed=%ld lost=%d gap_us=%lf first=%255s",
                        &r->ok, &r->failed, &r->lost, &gap_us, r->first),
                 5, "%s", line);
    r->gap_ms = gap_us / 1e3;
    free(s);
}
