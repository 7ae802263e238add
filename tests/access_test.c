/* SPDX-License-Identifier: MIT */
/*
 * Who may connect, the limits of a connection, and input meant to hurt:
 * peer credentials checked before any request is read (clients run as
 * other users, so these tests need root and skip with a message
 * otherwise), a flood of connections bounded by --max-connections, the
 * --session-max-* limits, a message that decodes into far more memory than
 * it takes on the wire, nng resends, and names that try to reach the file
 * system. Each runs the real daemon on the fake driver, with another
 * client checking that it is still served.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cumod.pb-c.h"
#include "cumod/cumod.h"
#include "fixture.h"
#include "raw_req.h"
#include "harness.h"

TH_SUITE_DRIVER(0);

#define NEED_ROOT()                                                            \
    do {                                                                       \
        if (geteuid() != 0)                                                    \
            cr_skip_test("needs root, to run clients as other users");         \
    } while (0)

/* Drops to uid and gid (and the supplementary groups given), in a child
 * that is about to exec. */
static void
ac_become(uid_t uid, gid_t gid, const gid_t *groups, size_t n)
{
    struct rlimit rl = {4096, 4096};
    setrlimit(RLIMIT_NOFILE, &rl);
    if (setgroups(n, groups) != 0 || setgid(gid) != 0 || setuid(uid) != 0)
        _exit(120);
}

/* The helper runs as another user, who may not reach the build folder
 * (a checkout in a 0700 folder): a copy in the daemon's folder of url
 * (opened to everyone), with the suppressions file, is what runs. */
typedef struct ac_helper {
    char client[400], supp[400];
} ac_helper;

static void
ac_helper_make(ac_helper *h, const char *url)
{
    char dir[300], cmd[2400];
    snprintf(dir, sizeof(dir), "%s", url + strlen("ipc://"));
    *strrchr(dir, '/') = '\0';
    snprintf(h->client, sizeof(h->client), "%s/access_client", dir);
    snprintf(h->supp, sizeof(h->supp), "%s/lsan-nng.supp", dir);
    if (access(h->client, X_OK) == 0)
        return;
    snprintf(cmd, sizeof(cmd),
             "cp '%s' '%s' && cp '%s' '%s' && chmod 0755 '%s' && "
             "chmod 0644 '%s'",
             CUMOD_TEST_ACCESS_CLIENT, h->client, CUMOD_TEST_NNG_SUPP, h->supp,
             h->client, h->supp);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* In the child: becomes uid and runs the helper (arg: NULL or "twice"). */
static void __attribute__((noreturn))
ac_helper_exec(const ac_helper *h, uid_t uid, gid_t gid, const gid_t *groups,
               size_t n, const char *url, const char *arg)
{
    /* A refused client may exit with its request inside nng
     * (lsan-nng.supp): leaks inside libnng are not this test's. */
    char opt[1024];
    const char *was = getenv("LSAN_OPTIONS");
    snprintf(opt, sizeof(opt), "%s%ssuppressions=%s", was ? was : "",
             was && was[0] ? ":" : "", h->supp);
    setenv("LSAN_OPTIONS", opt, 1);
    ac_become(uid, gid, groups, n);
    execl(h->client, h->client, url, arg, (char *)NULL);
    _exit(121);
}

/* Runs tests/access_client URL as uid and gid; returns its exit status:
 * 0 when served, the cumod error otherwise, 99 for a timeout. */
static int
ac_as(uid_t uid, gid_t gid, const gid_t *groups, size_t n, const char *url)
{
    ac_helper h;
    ac_helper_make(&h, url);
    pid_t pid = fork();
    int st;
    if (pid == 0)
        ac_helper_exec(&h, uid, gid, groups, n, url, NULL);
    cr_assert(pid > 0);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A daemon whose socket other users can reach. */
static void
ac_start(th_env *t, const char *const *extra)
{
    th_env_init(t, (const char *const[]){"vadd", "empty", NULL});
    th_env_start(t, extra, NULL);
    cr_assert_eq(chmod(t->d.dir, 0755), 0);
}

Test(access, a_user_not_allowed_is_closed_before_any_request_and_told,
     .timeout = 120)
{
    th_env t;
    NEED_ROOT();
    ac_start(&t, (const char *const[]){"--socket-mode", "0666", "--allow-uid",
                                       "4242", NULL});
    int rv = ac_as(65534, 65534, NULL, 0, t.d.url);
    cr_expect_eq(rv, CUMOD_EPERM,
                 "refused at once with a clear error, not a timeout (99): "
                 "%d",
                 rv);
    int served = ac_as(4242, 4242, NULL, 0, t.d.url);
    /* root, the operator, always is. */
    cumod_device_info di;
    cr_expect_eq(cumod_device_info_get(t.c, &di), CUMOD_OK);
    char *log = th_daemon_log(&t.d);
    cr_expect_eq(served, CUMOD_OK,
                 "an allowed user is served: %d; the log:\n%s", served, log);
    cr_expect(strstr(log, "CUMOD-ACCESS: refused a connection from pid"), "%s",
              log);
    cr_expect(strstr(log, "uid 65534 gid 65534: not allowed by --allow-uid"),
              "%s", log);
    cr_expect(strstr(log, "closed before any request was read"), "%s", log);
    cr_expect(!strstr(log, "uid 4242 gid 4242: not allowed"), "%s", log);
    cr_expect(!strstr(log, "session 0"), "no session was made for it");
    free(log);
    th_env_stop(&t);
}

/* cumodctl top's listing (issue 20 point 6): another user sees its own
 * sessions only, never root's (their pids and GPU time); root sees all. */
Test(access, another_user_lists_only_its_own_sessions, .timeout = 120)
{
    th_env t;
    cumod_client *b;
    NEED_ROOT();
    ac_start(&t, (const char *const[]){"--socket-mode", "0666", NULL});
    cr_assert_eq(cumod_open(t.d.url, 20000, &b), CUMOD_OK);
    ac_helper h;
    ac_helper_make(&h, t.d.url);
    pid_t pid = fork();
    int st;
    if (pid == 0)
        ac_helper_exec(&h, 65534, 65534, NULL, 0, t.d.url, "sessions");
    cr_assert(pid > 0);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "uid 65534 saw sessions not its own, or none (status %d)", st);
    cumod_session_info *l = NULL;
    size_t n = 0;
    cr_assert_eq(cumod_sessions_list(t.c, &l, &n, NULL), CUMOD_OK);
    cr_expect_geq(n, 2, "root sees its own two sessions at least: %zu", n);
    free(l);
    cumod_close(b);
    th_env_stop(&t);
}

Test(access, members_of_an_allowed_group_may_connect, .timeout = 120)
{
    th_env t;
    gid_t extra[] = {7777};

    NEED_ROOT();
    ac_start(&t, (const char *const[]){"--socket-mode", "0666", "--allow-gid",
                                       "7777", NULL});
    cr_expect_eq(ac_as(5000, 5000, extra, 1, t.d.url), CUMOD_OK,
                 "a supplementary group counts");
    cr_expect_eq(ac_as(5001, 7777, NULL, 0, t.d.url), CUMOD_OK,
                 "so does the primary one");
    cr_expect_eq(ac_as(5002, 5002, NULL, 0, t.d.url), CUMOD_EPERM,
                 "others are refused");
    th_env_stop(&t);
}

Test(access, sighup_closes_the_connections_no_longer_allowed, .timeout = 120)
{
    th_env t;
    char conf[400];
    int up[2], down[2];

    NEED_ROOT();
    th_env_init(&t, (const char *const[]){"vadd", NULL});
    snprintf(conf, sizeof(conf), "%s/.cumodd.conf", t.dir);
    cr_assert_eq(th_write_file(conf, "allow-uid = 4242\n"), 0);
    th_env_start(
        &t,
        (const char *const[]){"--socket-mode", "0666", "--config", conf, NULL},
        NULL);
    cr_assert_eq(chmod(t.d.dir, 0755), 0);
    cr_assert_eq(pipe(up), 0);
    cr_assert_eq(pipe(down), 0);
    ac_helper h;
    ac_helper_make(&h, t.d.url);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(up[1], 1);
        dup2(down[0], 0);
        ac_helper_exec(&h, 4242, 4242, NULL, 0, t.d.url, "twice");
    }
    close(up[1]);
    close(down[0]);
    char b;
    cr_assert_eq(read(up[0], &b, 1), 1, "the child was served first");
    cr_assert_eq(th_write_file(conf, "allow-uid = 4343\n"), 0);
    kill(t.d.pid, SIGHUP);
    int seen = 0;
    char *log = NULL;
    for (int i = 0; i < 250 && !seen; i++) {
        free(log);
        log = th_daemon_log(&t.d);
        seen = strstr(log, "no longer allowed") != NULL;
        th_sleep_ms(20);
    }
    cr_expect(seen, "the revocation is logged");
    /* It had sent requests: the line says so, not "before any" (the
     * client's own reconnections are refused before any, rightly). */
    cr_expect(strstr(log, "the open connection was closed after ") != NULL &&
                  strstr(log, "the open connection was closed before") == NULL,
              "%s", log);
    free(log);
    cr_assert_eq(write(down[1], "go\n", 3), 3);
    int st;
    waitpid(pid, &st, 0);
    cr_expect(WIFEXITED(st) && (WEXITSTATUS(st) == CUMOD_ECLOSED ||
                                WEXITSTATUS(st) == CUMOD_EPERM),
              "its connection was closed: status %d", WEXITSTATUS(st));
    th_env_stop(&t);
}

Test(access, the_socket_file_has_the_mode_and_group_asked, .timeout = 60)
{
    th_env t;
    char sock[400];
    struct stat st;

    NEED_ROOT();
    th_env_init(&t, NULL);
    th_env_start(&t,
                 (const char *const[]){"--socket-mode", "0640",
                                       "--socket-group", "4321", NULL},
                 NULL);
    snprintf(sock, sizeof(sock), "%s/cumodd.sock", t.d.dir);
    cr_assert_eq(stat(sock, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0640);
    cr_expect_eq(st.st_gid, 4321);
    th_env_stop(&t);
}

/* --- A flood of connections --------------------------------------------- */

typedef struct ac_flood {
    const char *path;
    int report; /* a pipe to the parent */
    int n;
    int handshakes, closed_by_daemon, failed;
} ac_flood;

/* Opens n raw connections at once, each doing the SP handshake as an nng
 * req peer, then counts those the daemon closed. */
static int
ac_flood_main(void *arg)
{
    ac_flood *f = arg;
    static const unsigned char hs[8] = {0, 'S', 'P', 0, 0x00, 0x30, 0, 0};
    int *fds = calloc((size_t)f->n, sizeof(int));
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->path);
    for (int i = 0; i < f->n; i++) {
        fds[i] = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fds[i] < 0 ||
            connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
            write(fds[i], hs, 8) != 8) {
            f->failed++;
            continue;
        }
    }
    /* Read each: the daemon's header, then EOF for those it refused. */
    th_sleep_ms(1500);
    for (int i = 0; i < f->n; i++) {
        unsigned char got[8];
        if (fds[i] < 0)
            continue;
        int fl = fcntl(fds[i], F_GETFL);
        fcntl(fds[i], F_SETFL, fl | O_NONBLOCK);
        ssize_t k = read(fds[i], got, 8);
        if (k == 8)
            f->handshakes++;
        k = read(fds[i], got, 1);
        if (k == 0)
            f->closed_by_daemon++;
    }
    /* Report, then keep them open a little, for the parent to look at
     * the daemon meanwhile. */
    char line[64];
    int k = snprintf(line, sizeof(line), "%d %d %d\n", f->handshakes,
                     f->closed_by_daemon, f->failed);
    if (write(f->report, line, (size_t)k) != k)
        return 1;
    th_sleep_ms(1500);
    for (int i = 0; i < f->n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(fds);
    return 0;
}

static long
ac_rss_kib(pid_t pid)
{
    char path[64], *s;
    long kib = -1;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    if ((s = th_read_file(path)) != NULL) {
        char *p = strstr(s, "VmRSS:");
        if (p != NULL)
            kib = strtol(p + 6, NULL, 10);
        free(s);
    }
    return kib;
}

Test(access, a_thousand_connections_at_once_are_bounded_by_the_limit,
     .timeout = 180)
{
    th_env t;
    char sock[100];

    NEED_ROOT();
    ac_start(&t, (const char *const[]){"--socket-mode", "0666",
                                       "--max-connections", "64", NULL});
    snprintf(sock, sizeof(sock), "%.80s/cumodd.sock", t.d.dir);
    long before = ac_rss_kib(t.d.pid);
    int rep[2];
    cr_assert_eq(pipe(rep), 0);
    ac_flood f = {.path = sock, .report = rep[1], .n = 1000};
    pid_t pid = fork();
    if (pid == 0) {
        /* Raw sockets only: no nng in this child. */
        ac_become(4242, 4242, NULL, 0);
        _exit(ac_flood_main(&f));
    }
    close(rep[1]);
    char r[64] = "";
    struct pollfd pf = {.fd = rep[0], .events = POLLIN};
    cr_assert_eq(poll(&pf, 1, 60000), 1, "the flood ran");
    cr_assert_gt(read(rep[0], r, sizeof(r) - 1), 0);
    close(rep[0]);
    cumod_device_info di;
    cr_expect_eq(cumod_device_info_get(t.c, &di), CUMOD_OK,
                 "root is answered during the flood: %s", cumod_last_detail());
    long during = ac_rss_kib(t.d.pid);
    int hs = 0, closed = 0, failed = 0;
    sscanf(r, "%d %d %d", &hs, &closed, &failed);
    int st;
    waitpid(pid, &st, 0);
    cr_expect_eq(failed, 0, "every connect went through");
    cr_expect_geq(closed, 1000 - 64, "past the limit, closed: %d", closed);
    cr_expect_leq(closed, 1000 - 60, "the first 64 kept: %d closed", closed);
    cr_expect_lt(during - before, 64 * 1024,
                 "the flood cost %ld KiB of the daemon's memory",
                 during - before);
    char *log = th_daemon_log(&t.d);
    int lines = th_count(log, "CUMOD-ACCESS");
    cr_expect_leq(lines, 30, "refusals are logged with a limit: %d lines",
                  lines);
    cr_expect(strstr(log, "connections are open, the limit"), "%s", log);
    free(log);
    /* Once the flood is gone, a user is served again. */
    cr_expect_eq(ac_as(4242, 4242, NULL, 0, t.d.url), CUMOD_OK);
    th_env_stop(&t);
}

/* --- Limits of a connection ------------------------------------------------
 */

Test(limits, buffers_streams_and_segments_stop_at_the_limit, .timeout = 60)
{
    th_env t;
    cumod_buffer b;
    cumod_stream s;
    cumod_segment *g1, *g2;

    th_env_init(&t, NULL);
    th_env_start(&t,
                 (const char *const[]){"--session-max-buffers", "2",
                                       "--session-max-streams", "1",
                                       "--session-max-segments", "1", NULL},
                 NULL);
    cr_expect_eq(cumod_buffer_alloc(t.c, 16, &b), CUMOD_OK);
    cr_expect_eq(cumod_buffer_alloc(t.c, 16, &b), CUMOD_OK);
    cr_expect_eq(cumod_buffer_alloc(t.c, 16, &b), CUMOD_ELIMIT);
    cr_expect(strstr(cumod_last_detail(), "2 buffers, its limit "
                                          "(--session-max-buffers)"),
              "%s", cumod_last_detail());
    cr_expect_eq(cumod_buffer_free(t.c, b), CUMOD_OK);
    cr_expect_eq(cumod_buffer_alloc(t.c, 16, &b), CUMOD_OK, "room again");
    cr_expect_eq(cumod_stream_create(t.c, &s), CUMOD_OK);
    cr_expect_eq(cumod_stream_create(t.c, &s), CUMOD_ELIMIT);
    cr_expect(strstr(cumod_last_detail(), "--session-max-streams"), "%s",
              cumod_last_detail());
    cr_expect_eq(cumod_segment_create(t.c, 4096, &g1), CUMOD_OK);
    cr_expect_eq(cumod_segment_create(t.c, 4096, &g2), CUMOD_ELIMIT);
    cr_expect(strstr(cumod_last_detail(), "--session-max-segments"), "%s",
              cumod_last_detail());
    /* Another connection has limits of its own. */
    cumod_client *c2;
    cr_assert_eq(cumod_open(t.d.url, 10000, &c2), CUMOD_OK);
    cr_expect_eq(cumod_buffer_alloc(c2, 16, &b), CUMOD_OK);
    cumod_close(c2);
    cumod_segment_destroy(t.c, g1);
    th_env_stop(&t);
}

typedef struct ac_sync {
    cumod_client *c;
    int rv;
} ac_sync;

static void *
ac_sync_main(void *arg)
{
    ac_sync *s = arg;
    s->rv = cumod_stream_synchronize(s->c, 0);
    return NULL;
}

Test(limits, work_in_flight_and_waiting_requests_stop_at_the_limit,
     .timeout = 120)
{
    th_env t;
    cumod_ticket tk[8];
    enum { WAITERS = 12 };
    pthread_t th[WAITERS];
    ac_sync w[WAITERS];

    th_env_init(&t, (const char *const[]){"empty", NULL});
    cr_assert_eq(th_write_file(t.fake_hold, "empty\n"), 0);
    th_env_start(&t,
                 (const char *const[]){"--session-max-inflight", "4",
                                       "--session-max-requests", "6", NULL},
                 NULL);
    cumod_launch_params p = {
        .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {1, 1, 1}};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(cumod_launch(t.c, &p, &tk[i], NULL), CUMOD_OK, "%s",
                     cumod_last_detail());
    cr_expect_eq(cumod_launch(t.c, &p, &tk[4], NULL), CUMOD_ELIMIT);
    cr_expect(strstr(cumod_last_detail(), "--session-max-inflight"), "%s",
              cumod_last_detail());
    /* Waits park: past 6 waiting, refused at once. */
    for (int i = 0; i < WAITERS; i++) {
        w[i] = (ac_sync){.c = t.c, .rv = -1};
        pthread_create(&th[i], NULL, ac_sync_main, &w[i]);
    }
    th_sleep_ms(500);
    /* Another connection is served meanwhile. */
    cumod_client *c2;
    cumod_buffer b;
    cr_assert_eq(cumod_open(t.d.url, 10000, &c2), CUMOD_OK);
    cr_expect_eq(cumod_buffer_alloc(c2, 16, &b), CUMOD_OK);
    cumod_close(c2);
    unlink(t.fake_hold);
    int ok = 0, limited = 0;
    for (int i = 0; i < WAITERS; i++) {
        pthread_join(th[i], NULL);
        ok += w[i].rv == CUMOD_OK;
        limited += w[i].rv == CUMOD_ELIMIT;
    }
    cr_expect_eq(ok, 6, "6 waited and were answered");
    cr_expect_eq(limited, WAITERS - 6, "the rest refused");
    for (int i = 0; i < 4; i++)
        cr_expect_eq(cumod_wait(t.c, tk[i]), CUMOD_OK);
    th_env_stop(&t);
}

/* --- Hostile messages ------------------------------------------------------
 */

/* A raw req socket to the daemon (no libcumod), resending after resend_ms
 * (0: never). */
static nng_socket
ac_raw(const char *url, int resend_ms)
{
    nng_socket s;
    cr_assert_eq(nng_req0_open(&s), 0);
    nng_socket_set_ms(s, NNG_OPT_REQ_RESENDTIME,
                      resend_ms ? resend_ms : NNG_DURATION_INFINITE);
    nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 20000);
    cr_assert_eq(nng_dial(s, url, NULL, 0), 0);
    return s;
}

/* Sends req on s as it is (its id and version the test's own). */
static Cumod__Reply *
ac_raw_call(nng_socket s, const Cumod__Request *req)
{
    return th_raw_call(s, NULL, (Cumod__Request *)req);
}

#define ac_code th_rcode

Test(hostile, a_batch_that_decodes_to_gigabytes_is_refused, .timeout = 120)
{
    th_env t;
    th_env_init(&t, NULL);
    th_env_start(&t, NULL, NULL);
    long before = ac_rss_kib(t.d.pid);
    /* 2 MiB of empty batch items: a million, ~150 MiB decoded. */
    size_t items = 1u << 20;
    uint8_t *msg = malloc(16 + items * 2);
    size_t at = 0;
    msg[at++] = 0x08; /* version = 1 */
    msg[at++] = 0x01;
    msg[at++] = 0x10; /* id = 1 */
    msg[at++] = 0x01;
    /* Batch (field 37, length-delimited): tag 0xaa 0x02, then a varint
     * length, then the items (field 2: 0x12 0x00 each). */
    msg[at++] = 0xaa;
    msg[at++] = 0x02;
    size_t blen = items * 2, v = blen;
    while (v >= 0x80) {
        msg[at++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    msg[at++] = (uint8_t)v;
    for (size_t i = 0; i < items; i++) {
        msg[at++] = 0x12;
        msg[at++] = 0x00;
    }
    nng_socket s = ac_raw(t.d.url, 0);
    cr_assert_eq(nng_send(s, msg, at, 0), 0);
    free(msg);
    void *got;
    size_t len;
    cr_assert_eq(nng_recv(s, &got, &len, NNG_FLAG_ALLOC), 0);
    Cumod__Reply *r = cumod__reply__unpack(NULL, len, got);
    nng_free(got, len);
    cr_assert_not_null(r);
    cr_expect_eq(ac_code(r), CUMOD_ETOOBIG);
    cr_expect(r->status && strstr(r->status->message, "to decode"), "%s",
              r->status ? r->status->message : "");
    cumod__reply__free_unpacked(r, NULL);
    long after = ac_rss_kib(t.d.pid);
    cr_expect_lt(after - before, 100 * 1024, "decoding it cost %ld KiB",
                 after - before);
    cumod_device_info di;
    cr_expect_eq(cumod_device_info_get(t.c, &di), CUMOD_OK);
    nng_close(s);
    th_env_stop(&t);
}

Test(hostile, an_nng_resend_runs_once, .timeout = 120)
{
    th_env t;
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__Launch l = CUMOD__LAUNCH__INIT;

    th_env_init(&t, (const char *const[]){"empty", NULL});
    cr_assert_eq(th_write_file(t.fake_hold, "empty\n"), 0);
    th_env_start(&t, (const char *const[]){"--log-level", "debug", NULL}, NULL);
    /* A req socket that resends every 100 ms while the launch is held. */
    nng_socket s = ac_raw(t.d.url, 100);
    l.kernel = "empty:empty";
    req.version = 1;
    req.id = 7;
    req.body_case = CUMOD__REQUEST__BODY_LAUNCH;
    req.launch = &l;
    size_t n = cumod__request__get_packed_size(&req);
    uint8_t buf[256];
    cumod__request__pack(&req, buf);
    cr_assert_eq(nng_send(s, buf, n, 0), 0);
    th_sleep_ms(800);
    unlink(t.fake_hold);
    void *got;
    size_t len;
    cr_assert_eq(nng_recv(s, &got, &len, NNG_FLAG_ALLOC), 0);
    Cumod__Reply *r = cumod__reply__unpack(NULL, len, got);
    nng_free(got, len);
    cr_expect_eq(ac_code(r), CUMOD_OK);
    cumod__reply__free_unpacked(r, NULL);
    char *fl = th_read_file(t.fake_log);
    cr_expect_eq(th_count(fl, "launch fn=empty"), 1, "run once:\n%s", fl);
    free(fl);
    char *log = th_daemon_log(&t.d);
    cr_expect(strstr(log, "request id 7 arrived again while in progress"),
              "the resends were dropped");
    free(log);
    /* The same id again, after its answer: refused, not run. */
    r = ac_raw_call(s, &req);
    cr_expect_eq(ac_code(r), CUMOD_EPROTO);
    cr_expect(r && r->status && strstr(r->status->message, "answered already"),
              "%s", r && r->status ? r->status->message : "");
    cumod__reply__free_unpacked(r, NULL);
    fl = th_read_file(t.fake_log);
    cr_expect_eq(th_count(fl, "launch fn=empty"), 1);
    free(fl);
    nng_close(s);
    th_env_stop(&t);
}

Test(hostile, names_never_reach_outside_their_place, .timeout = 60)
{
    th_env t;
    cumod_module_result mr;
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__MapSegment m = CUMOD__MAP_SEGMENT__INIT;

    th_env_init(&t, (const char *const[]){"vadd", NULL});
    th_env_start(&t, NULL, NULL);
    const char *bad[] = {"../vadd", "/etc/passwd", "vadd/..", "a b", "vadd\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_expect_eq(cumod_module_load(t.c, bad[i], &mr), CUMOD_EINVAL, "'%s'",
                     bad[i]);
        cr_expect(strstr(cumod_last_detail(), "is not a module name"), "%s",
                  cumod_last_detail());
    }
    nng_socket s = ac_raw(t.d.url, 0);
    const char *segs[] = {"/../../etc/passwd", "/..", "noslash", "/a/b", "/"};
    req.version = 1;
    req.body_case = CUMOD__REQUEST__BODY_MAP_SEGMENT;
    req.map_segment = &m;
    for (size_t i = 0; i < sizeof(segs) / sizeof(segs[0]); i++) {
        m.name = (char *)segs[i];
        m.size = 4096;
        req.id = 100 + i;
        Cumod__Reply *r = ac_raw_call(s, &req);
        cr_expect_eq(ac_code(r), CUMOD_EINVAL, "'%s': %s", segs[i],
                     r && r->status ? r->status->message : "");
        cumod__reply__free_unpacked(r, NULL);
    }
    /* A segment of another user's is not mapped. */
    if (geteuid() == 0) {
        char name[64];
        snprintf(name, sizeof(name), "/cumod-test-other-%d", (int)getpid());
        int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
        cr_assert(fd >= 0);
        cr_assert_eq(ftruncate(fd, 4096), 0);
        cr_assert_eq(fchown(fd, 4242, 4242), 0);
        close(fd);
        m.name = name;
        req.id = 200;
        Cumod__Reply *r = ac_raw_call(s, &req);
        cr_expect_eq(ac_code(r), CUMOD_EPERM);
        cr_expect(r && r->status &&
                      strstr(r->status->message, "is not owned by the "
                                                 "connecting user"),
                  "%s", r && r->status ? r->status->message : "");
        cumod__reply__free_unpacked(r, NULL);
        shm_unlink(name);
    }
    nng_close(s);
    th_env_stop(&t);
}

/* Runs tests/access_client URL ARG as uid (gid the same); its status. */
static int
ac_as_mode(uid_t uid, const char *url, const char *arg)
{
    ac_helper h;
    ac_helper_make(&h, url);
    pid_t pid = fork();
    int st;
    if (pid == 0)
        ac_helper_exec(&h, uid, uid, NULL, 0, url, arg);
    cr_assert(pid > 0);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Whether process pid has capability cap in its effective set. */
static int
ac_has_cap(pid_t pid, int cap)
{
    char path[64], line[256];
    unsigned long long eff = 0;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    cr_assert_not_null(f);
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "CapEff: %llx", &eff) == 1)
            break;
    fclose(f);
    return (eff >> cap) & 1;
}

Test(
    access,
    a_client_of_another_user_gets_the_fast_path_from_a_cumodd_that_cannot_open_its_files,
    .timeout = 120)
{
    th_env t;
    NEED_ROOT();
    /* cumodd as a service user is: it may not open another user's 0600
     * files (root without these capabilities obeys file modes). Dropped
     * from this test process's bounding set, cumodd starts without them. */
    static const int caps[] = {1 /* DAC_OVERRIDE */, 2 /* DAC_READ_SEARCH */,
                               3 /* FOWNER */};
    for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++)
        if (prctl(PR_CAPBSET_DROP, caps[i], 0, 0, 0) != 0)
            cr_skip_test("cannot drop capability %d from the bounding set "
                         "(%s): needs CAP_SETPCAP",
                         caps[i], strerror(errno));
    ac_start(&t, (const char *const[]){"--socket-mode", "0666", NULL});
    cr_assert(!ac_has_cap(t.d.pid, 1) && !ac_has_cap(t.d.pid, 3),
              "cumodd runs without CAP_DAC_OVERRIDE and CAP_FOWNER");
    /* By name (the old way), its ring cannot be opened: the socket only. */
    setenv("CUMOD_NO_HANDOVER", "1", 1);
    int rv = ac_as_mode(65534, t.d.url, "fastpath");
    unsetenv("CUMOD_NO_HANDOVER");
    cr_assert_eq(rv, 96,
                 "by name, uid 65534's ring is not cumodd's to open (%d)", rv);
    /* Handed over: the fast path, a segment and staged transfers. */
    rv = ac_as_mode(65534, t.d.url, "fastpath");
    cr_assert_eq(rv, 0,
                 "uid 65534 is on the fast path, its segment mapped and 4 MiB "
                 "right (status %d)",
                 rv);
    th_env_stop(&t);
}
