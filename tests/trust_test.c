/* SPDX-License-Identifier: MIT */
/*
 * Text from outside and who did what (DESIGN.md "Trust"): a compile log,
 * a file name or a client's name never writes a log line of its own, and
 * comes back in a reply as valid UTF-8; control requests (load, unload,
 * pin, unpin, reload, unquarantine, kernel settings, global writes) need
 * root, cumodd's own user or --control-uid / --control-gid, and each is
 * logged with the pid and uid that sent it; a request over --max-message
 * is logged with its sender and size. Each runs the real daemon on the
 * fake driver; the tests that run clients as other users need root and
 * skip with a message otherwise.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <iconv.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <grp.h>
#include <unistd.h>

#include "cumod/cumod.h"
#include "fixture.h"
#include "harness.h"

TH_SUITE_DRIVER(0);

/* What a forged line would look like: the start of one of cumodd's. */
#define TT_FORGED                                                              \
    "2026-01-01T00:00:00.000Z cumodd[1] notice CUMOD-READY: forged"

/* 1 when s is valid UTF-8 (glibc's iconv refuses anything else). */
static int
tt_utf8(const char *s)
{
    iconv_t cd = iconv_open("UTF-8", "UTF-8");
    char out[8192];
    char *in = (char *)s, *o = out;
    size_t inl = strlen(s), outl = sizeof(out);
    cr_assert(cd != (iconv_t)-1);
    size_t r = iconv(cd, &in, &inl, &o, &outl);
    iconv_close(cd);
    return r != (size_t)-1 && inl == 0;
}

/* 1 when a line of log starts with prefix. */
static int
tt_line_starts(const char *log, const char *prefix)
{
    for (const char *l = log; l != NULL && *l; l = strchr(l, '\n')) {
        if (*l == '\n')
            l++;
        if (strncmp(l, prefix, strlen(prefix)) == 0)
            return 1;
    }
    return 0;
}

/* The daemon's log once it holds needle (polled for 30 s), else fails. */
static char *
tt_log_with(th_env *t, const char *needle)
{
    for (int i = 0; i < 1500; i++) {
        char *log = th_daemon_log(&t->d);
        if (log != NULL && strstr(log, needle) != NULL)
            return log;
        free(log);
        th_sleep_ms(20);
    }
    char *log = th_daemon_log(&t->d);
    cr_assert_fail("the log never said %s:\n%s", needle, log);
    return NULL;
}

static void
tt_write(th_env *t, const char *name, const char *text)
{
    char path[700];
    snprintf(path, sizeof(path), "%s/%s", t->dir, name);
    cr_assert_eq(th_write_file(path, text), 0, "write %s", path);
}

/* --- Text from outside ---------------------------------------------------- */

Test(text, a_compile_log_that_forges_a_line_is_one_escaped_event,
     .timeout = 120)
{
    th_env t;
    th_env_init(&t, (const char *const[]){"vadd", NULL});
    /* A #line naming a file so, and an #error: NVRTC's log then holds a
     * line that begins as one of cumodd's, and bytes that are no UTF-8. */
    tt_write(&t, "forge.cu",
             "// FAKE_NVRTC_LOG\nforge.cu(1): error: #error first\n" TT_FORGED
             "(1): error \xff\xfe\x1b[2J\n2 errors detected\n");
    th_env_start(&t,
                 (const char *const[]){"--nvrtc-library", CUMOD_TEST_FAKENVRTC,
                                       "--compile-cache", "none", NULL},
                 NULL);
    char *log = tt_log_with(&t, "forged");
    cr_expect(!tt_line_starts(log, TT_FORGED),
              "no line begins with the forged text:\n%s", log);
    cr_expect_eq(th_count(log, "#error first"), 1,
                 "the compile log is one event:\n%s", log);
    cr_expect(strstr(log, "#error first\\n" TT_FORGED
                          "(1): error \\xff\\xfe\\x1b[2J\\n2 errors") != NULL,
              "its newlines and bytes escaped, on one line:\n%s", log);
    free(log);

    /* The reply that carries it is valid UTF-8, the bytes escaped. */
    cumod_module_detail *d = NULL;
    cr_assert_eq(cumod_module_show(t.c, "forge", &d), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert(d->module.error != NULL);
    cr_expect(tt_utf8(d->module.error), "error: %s", d->module.error);
    cr_expect(strstr(d->module.error, "\\xff\\xfe\\x1b[2J") != NULL, "%s",
              d->module.error);
    cr_assert(d->compile_log != NULL);
    cr_expect(tt_utf8(d->compile_log), "compile log: %s", d->compile_log);
    cr_expect(strstr(d->compile_log, "\n" TT_FORGED) != NULL,
              "a reply keeps the log's lines: %s", d->compile_log);
    cumod_module_detail_free(d);
    cumod_module_list *l = NULL;
    cr_expect_eq(cumod_modules_list(t.c, &l), CUMOD_OK, "%s",
                 cumod_last_detail());
    for (size_t i = 0; l != NULL && i < l->count; i++)
        if (l->modules[i].error != NULL)
            cr_expect(tt_utf8(l->modules[i].error), "%s", l->modules[i].error);
    cumod_module_list_free(l);
    th_env_stop(&t);
}

Test(text, a_name_of_bytes_ff_fe_comes_back_escaped_in_a_valid_reply,
     .timeout = 60)
{
    static const char name[] = "\xff\xfe\x1b[2J\n" TT_FORGED;
    th_env t;
    cumod_module_result r;

    th_env_init(&t, (const char *const[]){"vadd", NULL});
    th_env_start(&t, NULL, NULL);
    memset(&r, 0, sizeof(r));
    int rv = cumod_module_load(t.c, name, &r);
    cumod_module_result_fini(&r);
    cr_expect_neq(rv, CUMOD_OK);
    const char *detail = cumod_last_detail();
    cr_expect(tt_utf8(detail), "the reply's message is valid UTF-8: %s",
              detail);
    cr_expect(strstr(detail, "\\xff\\xfe\\x1b[2J") != NULL,
              "the name shows escaped: %s", detail);
    /* The same over the ring, where the client has one. */
    cumod_module_detail *d = NULL;
    rv = cumod_module_show(t.c, name, &d);
    cumod_module_detail_free(d);
    cr_expect_neq(rv, CUMOD_OK);
    cr_expect(tt_utf8(cumod_last_detail()), "%s", cumod_last_detail());
    /* The connection still serves. */
    cumod_device_info di;
    cr_expect_eq(cumod_device_info_get(t.c, &di), CUMOD_OK);
    char *log = tt_log_with(&t, "CUMOD-CONTROL");
    cr_expect(!tt_line_starts(log, TT_FORGED), "%s", log);
    cr_expect(strstr(log, "load \\xff\\xfe\\x1b[2J\\n" TT_FORGED) != NULL,
              "the load is logged with the name escaped:\n%s", log);
    free(log);
    th_env_stop(&t);
}

Test(text, a_file_name_with_a_newline_in_the_folder_stays_on_one_line,
     .timeout = 120)
{
    th_env t;
    th_env_init(&t, (const char *const[]){"vadd", NULL});
    tt_write(&t, "src.cu", "// FAKE_NVRTC_LOG\nsrc.cu(1): error\n");
    th_env_start(&t,
                 (const char *const[]){"--nvrtc-library", CUMOD_TEST_FAKENVRTC,
                                       "--compile-cache", "none", NULL},
                 NULL);
    char *log = tt_log_with(&t, "src.cu(1)");
    free(log);
    /* A header (the .cu compiles again, and the log names it) and an image
     * whose name is no module name (ignored). */
    tt_write(&t, "evil\n" TT_FORGED "\x01\xff.cuh", "\n");
    tt_write(&t, "bad\n" TT_FORGED ".cubin", "\n");
    log = tt_log_with(&t, "CUMOD-HEADER");
    cr_expect(!tt_line_starts(log, TT_FORGED), "%s", log);
    cr_expect(strstr(log, "evil\\n" TT_FORGED "\\x01\\xff.cuh changed") != NULL,
              "the name is escaped:\n%s", log);
    free(log);
    cumod_module_list *l = NULL;
    cr_expect_eq(cumod_modules_list(t.c, &l), CUMOD_OK, "%s",
                 cumod_last_detail());
    for (size_t i = 0; l != NULL && i < l->count; i++)
        cr_expect(tt_utf8(l->modules[i].name), "%s", l->modules[i].name);
    cumod_module_list_free(l);
    th_env_stop(&t);
}

/* --- Control requests and who sent them ---------------------------------- */

#define NEED_ROOT()                                                            \
    do {                                                                       \
        if (geteuid() != 0)                                                    \
            cr_skip_test("needs root, to run clients as other users");         \
    } while (0)

/* Runs tests/control_client URL OP ARG as uid and gid (and groups): a copy
 * in the daemon's folder, which another user can reach. Returns its exit
 * status: 0 when done, the cumod error otherwise. */
static int
tt_as(const th_env *t, uid_t uid, gid_t gid, const gid_t *groups, size_t n,
      const char *op, const char *arg)
{
    char client[400], supp[400], cmd[2400];
    snprintf(client, sizeof(client), "%s/control_client", t->d.dir);
    snprintf(supp, sizeof(supp), "%s/lsan-nng.supp", t->d.dir);
    if (access(client, X_OK) != 0) {
        snprintf(cmd, sizeof(cmd),
                 "cp '%s' '%s' && cp '%s' '%s' && chmod 0755 '%s' '%s' && "
                 "chmod 0644 '%s'",
                 CUMOD_TEST_CONTROL_CLIENT, client, CUMOD_TEST_NNG_SUPP, supp,
                 client, t->d.dir, supp);
        cr_assert_eq(system(cmd), 0, "%s", cmd);
    }
    pid_t pid = fork();
    if (pid == 0) {
        char opt[1024];
        const char *was = getenv("LSAN_OPTIONS");
        struct rlimit rl = {4096, 4096};
        snprintf(opt, sizeof(opt), "%s%ssuppressions=%s", was ? was : "",
                 was && was[0] ? ":" : "", supp);
        setenv("LSAN_OPTIONS", opt, 1);
        setrlimit(RLIMIT_NOFILE, &rl);
        if (setgroups(n, groups) != 0 || setgid(gid) != 0 || setuid(uid) != 0)
            _exit(120);
        execl(client, client, t->d.url, op, arg, (char *)NULL);
        _exit(121);
    }
    cr_assert(pid > 0);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void
tt_start(th_env *t, const char *const *extra)
{
    th_env_init(t, (const char *const[]){"vadd", "table", NULL});
    const char *args[16] = {"--socket-mode", "0666"};
    int n = 2;
    for (int i = 0; extra != NULL && extra[i] != NULL && n < 15; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    th_env_start(t, args, NULL);
    cr_assert_eq(chmod(t->d.dir, 0755), 0);
}

Test(control, another_user_may_connect_but_not_control_by_default,
     .timeout = 120)
{
    th_env t;
    NEED_ROOT();
    tt_start(&t, NULL);
    cr_expect_eq(tt_as(&t, 4242, 4242, NULL, 0, "info", ""), CUMOD_OK,
                 "a user who may connect is served");
    static const char *const ops[][3] = {
        {"load", "vadd", "load vadd"},
        {"unload", "vadd", "unload vadd"},
        {"pin", "vadd", "pin vadd"},
        {"unpin", "vadd", "unpin vadd"},
        {"reload", "vadd", "reload vadd"},
        {"unquarantine", "vadd", "unquarantine vadd"},
        {"carveout", "vadd:vadd", "kernel-settings vadd:vadd carveout 50"},
        {"write-global", "table:scale",
         "write-global table:scale, 4 bytes at offset 0"},
    };
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        cr_expect_eq(tt_as(&t, 4242, 4242, NULL, 0, ops[i][0], ops[i][1]),
                     CUMOD_EPERM, "%s is refused to uid 4242", ops[i][0]);
    char *log = tt_log_with(&t, "refused: session");
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        char want[200];
        snprintf(want, sizeof(want), "uid 4242 gid 4242): %s", ops[i][2]);
        cr_expect(strstr(log, want) != NULL, "the log says %s:\n%s", want, log);
    }
    cr_expect(strstr(log, "not allowed by --control-uid / --control-gid"), "%s",
              log);
    free(log);
    /* root (the test itself) still may. */
    cumod_module_result r;
    cr_expect_eq(cumod_module_load(t.c, "vadd", &r), CUMOD_OK, "%s",
                 cumod_last_detail());
    cumod_module_result_fini(&r);
    th_env_stop(&t);
}

Test(control, control_uid_and_gid_allow_it_and_each_is_logged_with_its_sender,
     .timeout = 120)
{
    th_env t;
    gid_t extra[] = {7777};
    NEED_ROOT();
    tt_start(&t, (const char *const[]){"--control-uid", "4242", "--control-gid",
                                       "7777", NULL});
    static const char *const ops[][3] = {
        {"load", "vadd", "load vadd"},
        {"pin", "vadd", "pin vadd"},
        {"unpin", "vadd", "unpin vadd"},
        {"reload", "vadd", "reload vadd"},
        {"carveout", "vadd:vadd", "kernel-settings vadd:vadd carveout 50"},
        {"write-global", "table:scale",
         "write-global table:scale, 4 bytes at offset 0"},
        {"unload", "vadd", "unload vadd"},
    };
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        cr_expect_eq(tt_as(&t, 4242, 4242, NULL, 0, ops[i][0], ops[i][1]),
                     CUMOD_OK, "%s is done for uid 4242", ops[i][0]);
    cr_expect_eq(tt_as(&t, 5000, 5000, extra, 1, "load", "vadd"), CUMOD_OK,
                 "a member of --control-gid may");
    cr_expect_eq(tt_as(&t, 5001, 5001, NULL, 0, "load", "vadd"), CUMOD_EPERM,
                 "others may not");
    char *log = tt_log_with(&t, "uid 5000 gid 5000): load vadd");
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        char want[200];
        snprintf(want, sizeof(want), "uid 4242 gid 4242): %s", ops[i][2]);
        cr_expect(strstr(log, want) != NULL, "the log says %s:\n%s", want, log);
    }
    cr_expect(strstr(log, "CUMOD-CONTROL: session") != NULL, "%s", log);
    free(log);
    th_env_stop(&t);
}

Test(control, a_request_over_max_message_is_logged_with_its_sender_and_size,
     .timeout = 60)
{
    th_env t;
    nng_socket sock;
    char want[200];

    th_env_init(&t, (const char *const[]){"vadd", NULL});
    th_env_start(&t, (const char *const[]){"--max-message", "4096", NULL},
                 NULL);
    cr_assert_eq(nng_req0_open(&sock), 0);
    cr_assert_eq(nng_dial(sock, t.d.url, NULL, 0), 0);
    nng_socket_set_ms(sock, NNG_OPT_RECVTIMEO, 500);
    nng_socket_set_ms(sock, NNG_OPT_REQ_RESENDTIME, 60000);
    char *big = calloc(1, 6000);
    cr_assert_eq(nng_send(sock, big, 6000, 0), 0);
    free(big);
    char *reply = NULL;
    size_t len = 0;
    cr_expect_neq(nng_recv(sock, &reply, &len, NNG_FLAG_ALLOC), 0,
                  "no answer: the request is dropped");
    nng_close(sock);
    snprintf(want, sizeof(want),
             "dropped a request from pid %d uid %d gid %d: a request of 6000 "
             "bytes, over --max-message (4096)",
             (int)getpid(), (int)geteuid(), (int)getegid());
    char *log = tt_log_with(&t, "dropped a request");
    cr_expect(strstr(log, want) != NULL, "the log says %s:\n%s", want, log);
    free(log);
    /* Others are served. */
    cumod_device_info di;
    cr_expect_eq(cumod_device_info_get(t.c, &di), CUMOD_OK);
    th_env_stop(&t);
}
