/* SPDX-License-Identifier: MIT */
/*
 * The NVRTC worker's confinement, seen from inside: cumodd runs as a real
 * process and compiles NAME.cu files with tests/fakecuda's libfakenvrtc,
 * whose FAKE_NVRTC_PROBE_* lines try what a hostile compiler would (open
 * a socket, reach a listener, allocate, write, spin) from within the real
 * worker and report what happened in the compile log that `cumodctl show`
 * gives. Each test asserts a protection the docs promise: no network,
 * no new privileges, a memory and a CPU limit, and writes only to the
 * compile cache.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cumod/cumod.h"
#include "fixture.h"

TH_SUITE_DRIVER(0);

/* Writes text to the folder as name (a temporary name, then rename). */
static void
sb_write(th_env *t, const char *name, const char *text)
{
    char tmp[512], path[512];
    snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", t->dir, name);
    snprintf(path, sizeof(path), "%s/%s", t->dir, name);
    cr_assert_eq(th_write_file(tmp, text), 0, "write %s", tmp);
    cr_assert_eq(rename(tmp, path), 0, "rename to %s", path);
}

/* cumodd on the folder with the fake NVRTC, its cache in DIR/.cache, and
 * the extra arguments (NULL-ended, may be NULL). */
static void
sb_start(th_env *t, const char *const *extra)
{
    const char *args[16];
    char cache[400];
    int n = 0;
    snprintf(cache, sizeof(cache), "%s/.cache", t->dir);
    args[n++] = "--nvrtc-library";
    args[n++] = CUMOD_TEST_FAKENVRTC;
    args[n++] = "--compile-cache";
    args[n++] = cache;
    for (int i = 0; extra && extra[i] && n < 15; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    th_env_start(t, args, NULL);
}

/* The module's detail once its compile has failed (polled for 60 s: a
 * loaded machine may be slow, nothing here is timed). */
static cumod_module_detail *
sb_failed(th_env *t, const char *name)
{
    cumod_module_detail *d = NULL;
    double end = th_now_ms() + 60000;
    while (th_now_ms() < end) {
        cumod_module_detail_free(d);
        d = NULL;
        if (cumod_module_show(t->c, name, &d) == CUMOD_OK &&
            d->module.error != NULL)
            return d;
        th_sleep_ms(30);
    }
    cr_assert_fail("%s: its compile never failed (state %s)", name,
                   d ? d->module.state : "?");
    return NULL;
}

/* Fails unless the compile log of d holds want. */
static void
sb_log_has(const cumod_module_detail *d, const char *want)
{
    cr_expect(d->compile_log != NULL && strstr(d->compile_log, want) != NULL,
              "the compile log says \"%s\":\n%s", want,
              d->compile_log ? d->compile_log : "(none)");
}

/* The probe's result line ("probe WHAT: RESULT"), copied into out. */
static void
sb_probe(const cumod_module_detail *d, const char *what, char *out, size_t len)
{
    char head[300];
    snprintf(head, sizeof(head), "probe %s: ", what);
    const char *at = d->compile_log ? strstr(d->compile_log, head) : NULL;
    cr_assert_not_null(at, "the probe of %s ran:\n%s", what,
                       d->compile_log ? d->compile_log : "(none)");
    at += strlen(head);
    snprintf(out, len, "%.*s", (int)strcspn(at, "\n"), at);
}

static int
sb_landlock(void)
{
    return syscall(444 /* landlock_create_ruleset */, NULL, 0, 1U) > 0;
}

/* No socket: neither IPv4 nor IPv6 opens, and a listener the test holds
 * on 127.0.0.1 hears nothing (seccomp refuses socket(); where cumodd may,
 * the worker is also in a namespace of its own, and Landlock ABI 4 refuses
 * TCP connects). */
Test(sandbox, the_compiler_opens_no_socket_and_reaches_no_listener,
     .timeout = 120)
{
    th_env t;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    cr_assert_geq(l, 0);
    cr_assert_eq(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(listen(l, 8), 0);
    cr_assert_eq(getsockname(l, (struct sockaddr *)&a, &alen), 0);
    int port = ntohs(a.sin_port);
    char src[128], what[64], res[256];
    snprintf(src, sizeof(src), "// FAKE_NVRTC_PROBE_SOCKET %d\n", port);
    th_env_init(&t, NULL);
    sb_write(&t, "net.cu", src);
    sb_start(&t, NULL);
    cumod_module_detail *d = sb_failed(&t, "net");
    sb_probe(d, "socket AF_INET", res, sizeof(res));
    cr_expect_str_neq(res, "ok", "an IPv4 socket was refused: %s", res);
    sb_probe(d, "socket AF_INET6", res, sizeof(res));
    cr_expect_str_neq(res, "ok", "an IPv6 socket was refused: %s", res);
    snprintf(what, sizeof(what), "connect 127.0.0.1:%d", port);
    sb_probe(d, what, res, sizeof(res));
    cr_expect_str_neq(res, "ok", "the connect failed: %s", res);
    cumod_module_detail_free(d);
    /* The compile is over: a connect it made would be queued by now. */
    int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    cr_expect_lt(c, 0, "the listener heard nobody");
    cr_expect(c >= 0 || errno == EAGAIN || errno == EWOULDBLOCK, "accept: %s",
              strerror(errno));
    if (c >= 0)
        close(c);
    /* And the listener does hear a connect from outside the sandbox. */
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_eq(connect(s, (struct sockaddr *)&a, sizeof(a)), 0);
    close(s);
    char *log = th_daemon_log(&t.d);
    if (geteuid() == 0)
        cr_expect(strstr(log, "network: new namespace + seccomp") != NULL,
                  "root: the worker gets a namespace of its own:\n%s", log);
    else
        cr_log_warn("not root: no network namespace for the worker (seccomp "
                    "alone refuses its sockets)");
    free(log);
    close(l);
    th_env_stop(&t);
}

/* no_new_privs is set (nothing the compiler execs gains privileges), and
 * a seccomp filter is in force. */
Test(sandbox, the_compiler_runs_with_no_new_privs, .timeout = 120)
{
    th_env t;
    char res[256];
    th_env_init(&t, NULL);
    sb_write(&t, "privs.cu", "// FAKE_NVRTC_PROBE_PRIVS\n");
    sb_start(&t, NULL);
    cumod_module_detail *d = sb_failed(&t, "privs");
    sb_probe(d, "privs", res, sizeof(res));
    cr_expect_eq(strncmp(res, "NoNewPrivs 1 ", 13), 0, "no_new_privs: %s", res);
#if defined(__x86_64__) || defined(__aarch64__)
    sb_log_has(d, "probe privs: seccomp 2\n");
#endif
    cumod_module_detail_free(d);
    th_env_stop(&t);
}

/* --compile-memory-max 256M: a compile may take 64 MiB, not 1 GiB (an
 * RLIMIT_AS beyond what the worker had mapped before the compile, which
 * under ASan includes its shadow). */
Test(sandbox, the_compiler_cannot_allocate_past_compile_memory_max,
     .timeout = 120)
{
    th_env t;
    th_env_init(&t, NULL);
    sb_write(&t, "mem.cu",
             "// FAKE_NVRTC_PROBE_ALLOC 64M\n// FAKE_NVRTC_PROBE_ALLOC 1G\n");
    sb_start(&t, (const char *const[]){"--compile-memory-max", "256M", NULL});
    cumod_module_detail *d = sb_failed(&t, "mem");
    sb_log_has(d, "probe alloc 64M: ok\n");
    sb_log_has(d, "probe alloc 1G: failed (Cannot allocate memory)\n");
    cumod_module_detail_free(d);
    char *log = th_daemon_log(&t.d);
    cr_expect(strstr(log, "memory: 256 MiB (--compile-memory-max)") != NULL,
              "the log says the limit:\n%s", log);
    free(log);
    th_env_stop(&t);
}

/* A compile that only burns CPU is ended by --compile-timeout: by the
 * daemon's wall clock, or by RLIMIT_CPU (SIGXCPU) where the worker's two
 * spinning threads spend a second of CPU first. The error says which. */
Test(sandbox, a_compile_spinning_on_the_cpu_is_ended_and_says_why,
     .timeout = 120)
{
    th_env t;
    th_env_init(&t, NULL);
    sb_write(&t, "spin.cu", "// FAKE_NVRTC_PROBE_CPU\n");
    sb_start(&t, (const char *const[]){"--compile-timeout", "1", NULL});
    cumod_module_detail *d = sb_failed(&t, "spin");
    sb_log_has(d, "probe cpu: RLIMIT_CPU 1 s\n");
    const char *e = d->module.error;
    int wall = strstr(e, "spin.cu: the compile ran past its limit of 1000 ms "
                         "and was killed (--compile-timeout)") != NULL;
    int cpu = strstr(e, "spin.cu: the NVRTC worker died (CPU time limit "
                        "exceeded) while compiling it") != NULL;
    cr_expect(wall || cpu, "the error says what ended it: %s", e);
    cr_log_info("ended by %s", wall ? "the wall clock" : "RLIMIT_CPU");
    cumod_module_detail_free(d);
    th_env_stop(&t);
}

/* Landlock: a file may be made in the compile cache, not in the kernel
 * folder (read-only to the worker) nor anywhere else. */
Test(sandbox, the_compiler_writes_only_in_the_compile_cache, .timeout = 120)
{
    th_env t;
    char out[256], src[2048], path[3][400], res[256];
    th_env_init(&t, NULL);
    th_tmpdir(out, sizeof(out));
    snprintf(path[0], sizeof(path[0]), "%s/escaped", out);
    snprintf(path[1], sizeof(path[1]), "%s/planted.h", t.dir);
    snprintf(path[2], sizeof(path[2]), "%s/.cache/probe", t.dir);
    snprintf(src, sizeof(src),
             "// FAKE_NVRTC_PROBE_WRITE %s\n// FAKE_NVRTC_PROBE_WRITE %s\n"
             "// FAKE_NVRTC_PROBE_WRITE %s\n",
             path[0], path[1], path[2]);
    sb_write(&t, "wr.cu", src);
    sb_start(&t, NULL);
    cumod_module_detail *d = sb_failed(&t, "wr");
    struct stat st;
    if (!sb_landlock()) {
        cr_log_warn("no Landlock in this kernel: the compiler's writes are "
                    "not confined (the log says: fallback: path check)");
    } else {
        for (int i = 0; i < 2; i++) {
            char what[sizeof(path) + 16];
            snprintf(what, sizeof(what), "write %s", path[i]);
            sb_probe(d, what, res, sizeof(res));
            cr_expect_str_eq(res, "Permission denied", "%s: %s", path[i], res);
            cr_expect_neq(stat(path[i], &st), 0, "%s is not there", path[i]);
        }
    }
    char what[sizeof(path) + 16];
    snprintf(what, sizeof(what), "write %s", path[2]);
    sb_probe(d, what, res, sizeof(res));
    cr_expect_str_eq(res, "ok", "the cache takes a file: %s", res);
    cumod_module_detail_free(d);
    th_env_stop(&t);
    th_rmtree(out);
}
