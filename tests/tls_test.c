/* SPDX-License-Identifier: MIT */
/*
 * Remote access (issue 19, point 7): cumodd on tls+tcp:// with a server
 * certificate, client certificates required and verified when a CA is
 * given, certificate names mapped by --allow-cert-subject, a certificate
 * renewed at SIGHUP, and plain tcp:// said to be unauthenticated. The
 * certificates are made at test time with openssl(1): a CA, a server
 * certificate for 127.0.0.1, clients alice and bob of that CA, and a
 * second CA with its own client, mallory. Each test runs the real daemon
 * (fake driver) on 127.0.0.1 and a port the kernel picked, and checks
 * what a client sees and what the log says.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cumod/cumod.h"
#include "harness.h"

TH_SUITE_DRIVER(0);

extern char **environ;

typedef struct tt {
    char dir[256];
    char url[128];
    char log[300];
    pid_t pid;
} tt;

static char tt_path_buf[8][400];
static int tt_path_next;

/* dir/name, in a small ring of buffers (a test uses a few at once). */
static const char *
tt_path(const tt *t, const char *name)
{
    char *b = tt_path_buf[tt_path_next++ % 8];
    snprintf(b, 400, "%s/%s", t->dir, name);
    return b;
}

static void
tt_sh(const char *cmd)
{
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    char *err = NULL;
    int rc = th_run(argv, NULL, NULL, &err, 60000);
    cr_assert_eq(rc, 0, "%s: %s", cmd, err ? err : "");
    free(err);
}

/* A key and a certificate NAME signed by CA, with subject CN and the
 * subjectAltName SAN. */
static void
tt_cert(const tt *t, const char *name, const char *cn, const char *ca,
        const char *san)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && openssl req -new -newkey ec -pkeyopt "
             "ec_paramgen_curve:prime256v1 -nodes -keyout %s.key -subj "
             "'/CN=%s' -out %s.csr 2>/dev/null && printf "
             "'subjectAltName=%s\\n' > %s.ext && openssl x509 -req -in "
             "%s.csr -CA %s.crt -CAkey %s.key -CAcreateserial -days 2 "
             "-extfile %s.ext -out %s.crt 2>/dev/null",
             t->dir, name, cn, name, san, name, name, ca, ca, name, name);
    tt_sh(cmd);
}

static void
tt_init(tt *t)
{
    char cmd[1024];

    if (system("command -v openssl > /dev/null 2>&1") != 0)
        cr_skip_test("openssl(1) is not installed: no certificates to test "
                     "with");
    memset(t, 0, sizeof(*t));
    th_tmpdir(t->dir, sizeof(t->dir));
    snprintf(t->log, sizeof(t->log), "%s/cumodd.log", t->dir);
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof(cmd),
                 "cd '%s' && openssl req -x509 -newkey ec -pkeyopt "
                 "ec_paramgen_curve:prime256v1 -nodes -keyout %s.key -subj "
                 "'/CN=cumod test %s' -days 2 -out %s.crt 2>/dev/null",
                 t->dir, i ? "ca2" : "ca", i ? "ca2" : "ca", i ? "ca2" : "ca");
        tt_sh(cmd);
    }
    /* mbed TLS 2.28 matches the host name against DNS names only. */
    tt_cert(t, "server", "127.0.0.1", "ca", "DNS:127.0.0.1,IP:127.0.0.1");
    tt_cert(t, "server2", "127.0.0.1", "ca2", "DNS:127.0.0.1");
    tt_cert(t, "alice", "alice", "ca", "DNS:alice.example");
    tt_cert(t, "bob", "bob", "ca", "DNS:bob.example");
    tt_cert(t, "mallory", "mallory", "ca2", "DNS:mallory.example");
    /* A port nothing holds now; cumodd takes it at once. */
    int port = th_free_port();
    cr_assert_gt(port, 0);
    snprintf(t->url, sizeof(t->url), "tls+tcp://127.0.0.1:%d", port);
}

static char *
tt_log(const tt *t)
{
    char *s = th_read_file(t->log);
    return s ? s : strdup("");
}

/* Starts cumodd listening on url with args (NULL-ended); returns once its
 * log says CUMOD-READY. */
static void
tt_start(tt *t, const char *url, const char *const *args)
{
    const char *argv[40];
    int n = 0, fd;
    posix_spawn_file_actions_t fa;

    argv[n++] = th_cumodd;
    argv[n++] = "--kernels";
    argv[n++] = th_kernel_dir;
    argv[n++] = "--listen";
    argv[n++] = url;
    argv[n++] = "--cuda-library";
    argv[n++] = th_fakecuda;
    argv[n++] = "--cublas-library";
    argv[n++] = th_fakecublas;
    for (int i = 0; args && args[i] && n < 39; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    fd = open(t->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fd, 1);
    posix_spawn_file_actions_adddup2(&fa, fd, 2);
    cr_assert_eq(posix_spawn(&t->pid, th_cumodd, &fa, NULL, (char *const *)argv,
                             environ),
                 0);
    posix_spawn_file_actions_destroy(&fa);
    close(fd);
    for (double end = th_now_ms() + 20000; th_now_ms() < end;) {
        char *log = tt_log(t);
        int ready = strstr(log, "CUMOD-READY") != NULL;
        free(log);
        if (ready)
            return;
        int st;
        if (waitpid(t->pid, &st, WNOHANG) == t->pid) {
            t->pid = 0;
            char *l = tt_log(t);
            cr_assert_fail("cumodd exited before it was ready:\n%s", l);
        }
        th_sleep_ms(20);
    }
    cr_assert_fail("cumodd was not ready in 20 s");
}

static void
tt_fini(tt *t)
{
    if (t->pid > 0) {
        int st;
        kill(t->pid, SIGTERM);
        for (double end = th_now_ms() + 10000;
             th_now_ms() < end && waitpid(t->pid, &st, WNOHANG) == 0;)
            th_sleep_ms(10);
        kill(t->pid, SIGKILL);
        waitpid(t->pid, &st, 0);
    }
    th_rmtree(t->dir);
}

/* cumod_open_tls with CA ca and, when name is not NULL, the client
 * certificate name.crt and its key. */
static int
tt_open(const tt *t, const char *url, const char *ca, const char *name,
        cumod_client **c)
{
    char cert[400], key[400];
    cumod_tls_files f = {.ca = ca ? tt_path(t, ca) : NULL};
    if (name != NULL) {
        snprintf(cert, sizeof(cert), "%s/%s.crt", t->dir, name);
        snprintf(key, sizeof(key), "%s/%s.key", t->dir, name);
        f.cert = cert;
        f.key = key;
    }
    return cumod_open_tls(url, 5000, &f, c);
}

/* Waits up to 5 s for needle in the log. */
static int
tt_log_has(const tt *t, const char *needle)
{
    for (double end = th_now_ms() + 5000;; th_sleep_ms(20)) {
        char *log = tt_log(t);
        int has = strstr(log, needle) != NULL;
        free(log);
        if (has || th_now_ms() >= end)
            return has;
    }
}

/* The client is served: a launch of vadd runs. */
static void
tt_served(cumod_client *c)
{
    cumod_buffer a, b, out;
    cr_assert_eq(cumod_buffer_alloc(c, 4096, &a), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_buffer_alloc(c, 4096, &b), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(c, 4096, &out), CUMOD_OK);
    cumod_arg args[] = {cumod_arg_buffer(a, 0), cumod_arg_buffer(b, 0),
                        cumod_arg_buffer(out, 0), cumod_arg_i32(1024)};
    cumod_launch_params p = {.kernel = "vadd:vadd",
                             .grid = {4, 1, 1},
                             .block = {256, 1, 1},
                             .nargs = 4,
                             .args = args};
    cr_assert_eq(cumod_launch(c, &p, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
}

#define TT_SERVER(t)                                                           \
    "--tls-cert", tt_path(t, "server.crt"), "--tls-key",                       \
        tt_path(t, "server.key"), "--tls-ca", tt_path(t, "ca.crt")

Test(tls, right_certificates_are_served_and_launch, .timeout = 90)
{
    tt t;
    cumod_client *c = NULL;
    tt_init(&t);
    const char *args[] = {TT_SERVER(&t), NULL};
    tt_start(&t, t.url, args);
    /* The server's certificate is the one of --tls-cert: a client that
     * trusts only the other CA refuses it. */
    cr_expect_neq(tt_open(&t, t.url, "ca2.crt", "alice", &c), CUMOD_OK);
    cr_assert_eq(tt_open(&t, t.url, "ca.crt", "alice", &c), CUMOD_OK, "%s",
                 cumod_last_detail());
    tt_served(c);
    cumod_close(c);
    tt_fini(&t);
}

Test(tls, a_client_without_certificate_is_refused_and_logged, .timeout = 90)
{
    tt t;
    cumod_client *c = NULL;
    tt_init(&t);
    const char *args[] = {TT_SERVER(&t), NULL};
    tt_start(&t, t.url, args);
    cr_expect_eq(tt_open(&t, t.url, "ca.crt", NULL, &c), CUMOD_EPERM, "%s",
                 cumod_last_detail());
    cr_expect(tt_log_has(&t, "the client sent no certificate"));
    /* The listener still serves the next one. */
    cr_assert_eq(tt_open(&t, t.url, "ca.crt", "alice", &c), CUMOD_OK, "%s",
                 cumod_last_detail());
    cumod_close(c);
    tt_fini(&t);
}

Test(tls, a_certificate_of_another_ca_is_refused_and_logged, .timeout = 90)
{
    tt t;
    cumod_client *c = NULL;
    tt_init(&t);
    const char *args[] = {TT_SERVER(&t), NULL};
    tt_start(&t, t.url, args);
    cr_expect_eq(tt_open(&t, t.url, "ca.crt", "mallory", &c), CUMOD_EPERM, "%s",
                 cumod_last_detail());
    cr_expect(tt_log_has(&t, "its certificate is not one --tls-ca vouches "
                             "for"));
    cr_assert_eq(tt_open(&t, t.url, "ca.crt", "alice", &c), CUMOD_OK, "%s",
                 cumod_last_detail());
    cumod_close(c);
    tt_fini(&t);
}

Test(tls, plain_tcp_to_the_tls_port_is_refused_and_logged, .timeout = 90)
{
    tt t;
    cumod_client *c = NULL;
    char plain[512];
    tt_init(&t);
    const char *args[] = {TT_SERVER(&t), NULL};
    tt_start(&t, t.url, args);
    snprintf(plain, sizeof(plain), "%s", t.url + strlen("tls+"));
    cr_expect_neq(cumod_open(plain, 3000, &c), CUMOD_OK);
    cr_expect(tt_log_has(&t, "not a TLS client (plain tcp:// to a tls+tcp:// "
                             "port?)"));
    cr_assert_eq(tt_open(&t, t.url, "ca.crt", "alice", &c), CUMOD_OK, "%s",
                 cumod_last_detail());
    cumod_close(c);
    tt_fini(&t);
}

Test(tls, no_certificate_means_no_start_exit_78, .timeout = 60)
{
    tt t;
    char *err = NULL;
    tt_init(&t);
    const char *no_cert[] = {th_cumodd,   "--kernels", th_kernel_dir,
                             "--listen",  t.url,       "--cuda-library",
                             th_fakecuda, NULL};
    cr_expect_eq(th_run(no_cert, NULL, NULL, &err, 20000), 78);
    cr_expect(err && strstr(err, "--tls-cert FILE and --tls-key FILE"), "%s",
              err);
    free(err);
    err = NULL;
    const char *no_key[] = {th_cumodd,
                            "--kernels",
                            th_kernel_dir,
                            "--listen",
                            t.url,
                            "--tls-cert",
                            tt_path(&t, "server.crt"),
                            NULL};
    cr_expect_eq(th_run(no_key, NULL, NULL, &err, 20000), 78);
    cr_expect(err && strstr(err, "--tls-key FILE missing") &&
                  !strstr(err, "--tls-cert FILE"),
              "%s", err);
    free(err);
    err = NULL;
    /* A key that is not the certificate's: named, and 78 too. */
    const char *bad_key[] = {th_cumodd,
                             "--kernels",
                             th_kernel_dir,
                             "--listen",
                             t.url,
                             "--cuda-library",
                             th_fakecuda,
                             "--tls-cert",
                             tt_path(&t, "server.crt"),
                             "--tls-key",
                             tt_path(&t, "alice.key"),
                             NULL};
    char *out = NULL;
    cr_expect_eq(th_run(bad_key, NULL, &out, &err, 20000), 78, "%s%s", out,
                 err);
    cr_expect((out && strstr(out, "is not the key of the certificate")) ||
                  (err && strstr(err, "is not the key of the certificate")),
              "%s%s", out, err);
    free(out);
    free(err);
    tt_fini(&t);
}

Test(tls, a_name_not_in_allow_cert_subject_is_refused_and_logged, .timeout = 90)
{
    tt t;
    cumod_client *c = NULL;
    tt_init(&t);
    const char *args[] = {TT_SERVER(&t), "--allow-cert-subject",
                          "alice.example,carol", NULL};
    tt_start(&t, t.url, args);
    cr_expect_eq(tt_open(&t, t.url, "ca.crt", "bob", &c), CUMOD_EPERM, "%s",
                 cumod_last_detail());
    /* Refused in the handshake itself (as another CA's certificate), not
     * closed after it: nng 1.5.2's dialer redials a closed connection, and
     * closing the client then could hang in nng_close. */
    cr_expect(tt_log_has(&t, "CUMOD-TLS: refused a connection in its TLS "
                             "handshake: its certificate (CN 'bob', DNS "
                             "bob.example) names no one in "
                             "--allow-cert-subject"));
    /* alice's DNS name is listed. */
    cr_assert_eq(tt_open(&t, t.url, "ca.crt", "alice", &c), CUMOD_OK, "%s",
                 cumod_last_detail());
    tt_served(c);
    cumod_close(c);
    tt_fini(&t);
}

Test(tls, sighup_gives_new_connections_the_new_certificate, .timeout = 90)
{
    tt t;
    cumod_client *old = NULL, *c = NULL;
    char cmd[1024];
    tt_init(&t);
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && cp server.crt live.crt && cp server.key live.key",
             t.dir);
    tt_sh(cmd);
    const char *args[] = {"--tls-cert", tt_path(&t, "live.crt"),
                          "--tls-key",  tt_path(&t, "live.key"),
                          "--tls-ca",   tt_path(&t, "ca.crt"),
                          NULL};
    tt_start(&t, t.url, args);
    cr_assert_eq(tt_open(&t, t.url, "ca.crt", "alice", &old), CUMOD_OK, "%s",
                 cumod_last_detail());
    /* A renewal: new contents under the same names (the other CA's, so a
     * client can tell which it was served). */
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && cp server2.crt live.crt && cp server2.key live.key",
             t.dir);
    tt_sh(cmd);
    kill(t.pid, SIGHUP);
    cr_assert(tt_log_has(&t, "new connections get the certificate"));
    cr_expect_neq(tt_open(&t, t.url, "ca.crt", "alice", &c), CUMOD_OK);
    cr_assert_eq(tt_open(&t, t.url, "ca2.crt", "alice", &c), CUMOD_OK, "%s",
                 cumod_last_detail());
    cumod_close(c);
    /* The connection made before keeps working. */
    tt_served(old);
    cumod_close(old);
    tt_fini(&t);
}

Test(tcp, plain_tcp_is_said_unauthenticated_and_has_no_uid, .timeout = 90)
{
    tt t;
    cumod_client *c = NULL;
    char plain[512];
    tt_init(&t);
    snprintf(plain, sizeof(plain), "%s", t.url + strlen("tls+"));
    tt_start(&t, plain, NULL);
    cr_expect(tt_log_has(&t, "plain tcp:// is unauthenticated"));
    cr_assert_eq(cumod_open(plain, 5000, &c), CUMOD_OK, "%s",
                 cumod_last_detail());
    cumod_close(c);
    tt_fini(&t);

    /* With a uid list, a TCP peer is refused for what it is, not for
     * who runs it. */
    tt_init(&t);
    snprintf(plain, sizeof(plain), "%s", t.url + strlen("tls+"));
    const char *args[] = {"--allow-uid", "0", NULL};
    tt_start(&t, plain, args);
    cr_expect_eq(cumod_open(plain, 5000, &c), CUMOD_EPERM);
    cr_expect(strstr(cumod_last_detail(), "remote peers have no uid") != NULL,
              "%s", cumod_last_detail());
    cr_expect(tt_log_has(&t, "refused a connection from 127.0.0.1:"));
    cr_expect(tt_log_has(&t, "remote peers have no uid"));
    tt_fini(&t);
}
