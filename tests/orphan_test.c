/* SPDX-License-Identifier: MIT */
/*
 * Executors that outlive their front (issue 34, piece 2; exec/orphan.h),
 * against cumodd as a real process on the fake driver (and, built as
 * gpu_orphan_test, on a GPU's real context): by default an
 * executor dies with a killed front; with --orphan-grace it keeps its
 * context for that long at an adoption socket (mode 0600) and then exits
 * and removes it; an orderly stop ends it at once; a new front of its uid
 * adopts it over the socket (a new channel, READY again, commands
 * answered there); forged requests and other users are refused, logged
 * with who asked, and the executor can still be adopted after them.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/channel.h"
#include "cumod/errors.h"
#include "fixture.h"
#include "ledger_peek.h"

#ifndef CUMOD_TEST_REAL_GPU
#define CUMOD_TEST_REAL_GPU 0
#endif
TH_SUITE_DRIVER(CUMOD_TEST_REAL_GPU);

/* The front's executor (the child whose command line says --executor),
 * or -1. */
static pid_t
ot_executor(pid_t front)
{
    char path[64], *kids;
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)front,
             (int)front);
    for (int tries = 0; tries < 500; tries++) {
        if ((kids = th_read_file(path)) == NULL)
            return -1;
        for (char *p = kids, *end; *p != '\0'; p = end) {
            long pid = strtol(p, &end, 10);
            if (end == p)
                break;
            char cl[64], buf[4096];
            snprintf(cl, sizeof(cl), "/proc/%ld/cmdline", pid);
            FILE *f = fopen(cl, "r");
            size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
            if (f)
                fclose(f);
            buf[n] = '\0';
            /* NUL-separated: each argument */
            for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
                if (strcmp(buf + i, "--executor") == 0) {
                    free(kids);
                    return (pid_t)pid;
                }
        }
        free(kids);
        th_sleep_ms(10);
    }
    return -1;
}

static int
ot_alive(pid_t pid)
{
    char path[64], *st;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((st = th_read_file(path)) == NULL)
        return 0;
    /* a zombie (reaped by init soon) counts as gone */
    const char *rp = strrchr(st, ')');
    int alive = rp != NULL && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
    free(st);
    return alive;
}

/* Waits up to ms for pid to be gone: 1 when it is. */
static int
ot_gone_within(pid_t pid, int ms)
{
    for (int w = 0; w < ms / 10; w++) {
        if (!ot_alive(pid))
            return 1;
        th_sleep_ms(10);
    }
    return !ot_alive(pid);
}

static void
ot_sock(const th_env *t, pid_t ex, char *out, size_t cap)
{
    snprintf(out, cap, "%s/exec-%d.sock", t->d.dir, (int)ex);
}

/* Waits up to ms for path to exist as a socket: 1 when it does. */
static int
ot_sock_within(const char *path, int ms)
{
    struct stat st;
    for (int w = 0; w < ms / 10; w++) {
        if (stat(path, &st) == 0 && S_ISSOCK(st.st_mode))
            return 1;
        th_sleep_ms(10);
    }
    return 0;
}

/* The front killed as a crash would (its client still connected, as
 * clients are then); its log stays readable. */
static void
ot_kill_front(th_env *t)
{
    int st;
    kill(t->d.pid, SIGKILL);
    waitpid(t->d.pid, &st, 0);
    t->d.exited = 1;
    t->d.status = st;
}

static void
ot_start(th_env *t, const char *grace)
{
    static const char *const k[] = {"empty", NULL};
    const char *args[] = {"--log-level", "debug", "--orphan-grace", grace,
                          NULL};
    th_env_init(t, k);
    th_env_start(t, grace != NULL ? args : NULL, NULL);
    cr_assert_eq(cumod_launch(t->c,
                              &(cumod_launch_params){.kernel = "empty:empty",
                                                     .grid = {1, 1, 1},
                                                     .block = {1, 1, 1}},
                              NULL, NULL),
                 CUMOD_OK, "%s", cumod_last_detail());
}

/* Ends t's front as a crash would, its executor (returned) waiting at its
 * adoption socket (its path in sock). */
static pid_t
ot_orphan(th_env *t, char *sock, size_t cap)
{
    pid_t ex = ot_executor(t->d.pid);
    cr_assert_gt(ex, 0, "the front's executor");
    ot_sock(t, ex, sock, cap);
    ot_kill_front(t);
    cr_assert(ot_sock_within(sock, 3000), "its adoption socket %s", sock);
    return ex;
}

/* Ends a test whose front is gone: the folder goes. */
static void
ot_done(th_env *t, pid_t ex)
{
    if (t->c != NULL) {
        cumod_close(t->c);
        t->c = NULL;
    }
    if (ex > 0 && ot_alive(ex))
        kill(ex, SIGKILL);
    th_rmtree(t->d.dir);
    th_rmtree(t->dir);
}

/* Where ot_adopt puts the ledger an answer carries (NULL: closed). */
static int *ot_ledger_out;

/* An adoption request on a new connection to path: the reply (status
 * -1000 - errno when the connection failed), and *chan our end of the new
 * channel when it was taken. magic, version: what to say; pass_fd: whether
 * to pass a channel. */
static cumod_adopt_reply
ot_adopt(const char *path, uint32_t magic, uint32_t version, int pass_fd,
         int *chan)
{
    cumod_adopt_reply r = {.status = -1000};
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0),
        fds[2] = {-1, -1};
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
    if (chan != NULL)
        *chan = -1;
    if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) != 0) {
        r.status = -1000 - errno;
        if (s >= 0)
            close(s);
        return r;
    }
    cumod_adopt_req req = {
        .magic = magic, .version = version, .front_pid = getpid()};
    if (pass_fd)
        (void)cumod__chan_pair(fds);
    if (cumod__fd_send(s, &req, sizeof(req), fds[1], 0) == 0) {
        int got[2], trunc = 0;
        if (cumod__fd_recv(s, &r, sizeof(r), got, 0, &trunc) != (long)sizeof(r))
            r.status = -999;
        if (got[0] >= 0 && ot_ledger_out != NULL && *ot_ledger_out < 0)
            *ot_ledger_out = got[0];
        else if (got[0] >= 0)
            close(got[0]);
        if (got[1] >= 0)
            close(got[1]);
    }
    if (fds[1] >= 0)
        close(fds[1]);
    if (r.status == 0 && chan != NULL)
        *chan = fds[0];
    else if (fds[0] >= 0)
        close(fds[0]);
    close(s);
    return r;
}

/* One packet from the channel within ms: its header (op 0 if none). */
static cumod_chan_hdr
ot_recv(int chan, void *buf, int ms)
{
    cumod_chan_hdr h = {0};
    for (int w = 0; w < ms; w += 5) {
        int fds[2] = {-1, -1};
        long n =
            cumod__chan_recv2(chan, buf, CUMOD_CHAN_MAX, fds, MSG_DONTWAIT);
        if (fds[0] >= 0)
            close(fds[0]);
        if (n >= (long)sizeof(h)) {
            memcpy(&h, buf, sizeof(h));
            return h;
        }
        if (n != -EAGAIN)
            return h;
        th_sleep_ms(5);
    }
    return h;
}

/* --- the tests ----------------------------------------------------------- */

Test(orphan, by_default_the_executor_dies_with_a_killed_front, .timeout = 60)
{
    th_env t;
    ot_start(&t, NULL);
    pid_t ex = ot_executor(t.d.pid);
    cr_assert_gt(ex, 0, "the front's executor");
    ot_kill_front(&t);
    cr_expect(ot_gone_within(ex, 5000),
              "without --orphan-grace the executor (pid %d) goes with its "
              "front",
              (int)ex);
    char sock[400];
    ot_sock(&t, ex, sock, sizeof(sock));
    cr_expect_neq(access(sock, F_OK), 0, "no adoption socket: %s", sock);
    ot_done(&t, ex);
}

Test(orphan, a_killed_fronts_executor_waits_its_grace_then_exits, .timeout = 60)
{
    th_env t;
    ot_start(&t, "2");
    char sock[400];
    pid_t ex = ot_orphan(&t, sock, sizeof(sock));
    double t0 = th_now_ms();
    struct stat st;
    cr_assert_eq(stat(sock, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0600, "mode %o", st.st_mode & 0777);
    cr_expect_eq(st.st_uid, geteuid(), "owned by the executor's uid");
    cr_expect(ot_alive(ex), "alive without its front");
    cr_assert(ot_gone_within(ex, 8000), "gone after its grace");
    double waited = th_now_ms() - t0;
    cr_expect_geq(waited, 1500, "it waited its grace: %.0f ms", waited);
    cr_expect_neq(access(sock, F_OK), 0, "the socket went with it");
    char *log = th_daemon_log(&t.d);
    cr_expect_not_null(strstr(log, "the front is gone without a stop"), "%s",
                       log);
    cr_expect_not_null(strstr(log, "no front adopted this executor within 2 s"),
                       "%s", log);
    free(log);
    ot_done(&t, ex);
}

Test(orphan, an_orderly_stop_ends_the_executor_at_once, .timeout = 60)
{
    th_env t;
    ot_start(&t, "60");
    pid_t ex = ot_executor(t.d.pid);
    cr_assert_gt(ex, 0);
    char sock[400];
    ot_sock(&t, ex, sock, sizeof(sock));
    char *log = NULL;
    cumod_close(t.c);
    t.c = NULL;
    kill(t.d.pid, SIGTERM);
    cr_expect_eq(th_daemon_wait(&t.d, 10000), 0, "the front stopped cleanly");
    log = th_daemon_log(&t.d);
    cr_expect(ot_gone_within(ex, 5000),
              "told to stop, the executor did not wait its 60 s grace");
    cr_expect_null(strstr(log, "the front is gone without a stop"), "%s", log);
    free(log);
    cr_expect_neq(access(sock, F_OK), 0, "no adoption socket");
    ot_done(&t, ex);
}

Test(orphan, a_new_front_adopts_the_executor_over_its_socket, .timeout = 60)
{
    th_env t;
    ot_start(&t, "30");
    char sock[400];
    pid_t ex = ot_orphan(&t, sock, sizeof(sock));
    int chan;
    cumod_adopt_reply r =
        ot_adopt(sock, CUMOD_ADOPT_MAGIC, CUMOD_ADOPT_VERSION, 1, &chan);
    cr_assert_eq(r.status, 0, "adopted: %d %s", r.status, r.detail);
    cr_expect_eq(r.pid, ex, "the executor says its pid: %d", r.pid);
    cr_expect_eq(r.device, 0);
    cr_expect_gt(r.last_seq, 0,
                 "it says how far the old front numbered its commands");
    char *buf = malloc(CUMOD_CHAN_MAX);
    cumod_chan_hdr h = ot_recv(chan, buf, 5000);
    cr_assert_eq(h.op, CUMOD_CHAN_READY, "READY on the new channel: op %u",
                 h.op);
    cumod_chan_device dev;
    memcpy(&dev, buf + sizeof(h), sizeof(dev));
    if (th_real_gpu())
        cr_expect_gt(dev.total_memory, 0, "the context's device");
    else
        cr_expect_eq(dev.total_memory, (uint64_t)80 << 30,
                     "the context's device: %llu bytes",
                     (unsigned long long)dev.total_memory);
    /* The adopted executor answers commands on the new channel. */
    cumod_chan_hdr q = {.op = CUMOD_CHAN_MEMINFO, .seq = 77};
    cr_assert_eq(cumod__chan_send(chan, &q, NULL, 0, -1), 0);
    h = ot_recv(chan, buf, 5000);
    cr_expect_eq(h.op, CUMOD_CHAN_MEMINFO, "answered: op %u", h.op);
    cr_expect_eq(h.seq, 77, "the same request: seq %llu",
                 (unsigned long long)h.seq);
    cr_expect_eq(h.status, CUMOD_OK);
    cr_expect_neq(access(sock, F_OK), 0, "the socket goes once adopted");
    /* And stops when its new front says so. */
    cumod_chan_hdr stop = {.op = CUMOD_CHAN_STOP};
    cr_assert_eq(cumod__chan_send(chan, &stop, NULL, 0, -1), 0);
    close(chan);
    cr_expect(ot_gone_within(ex, 5000), "stopped by its new front");
    char *log = th_daemon_log(&t.d);
    char want[64];
    snprintf(want, sizeof(want), "adopted by the front pid %d", (int)getpid());
    cr_expect_not_null(strstr(log, want), "%s", log);
    free(log);
    free(buf);
    ot_done(&t, ex);
}

/* The request as uid 65534 in a child: the reply's status, or 100 + errno
 * when it could not connect. */
static int
ot_adopt_as_nobody(const char *sock)
{
    pid_t pid = fork();
    if (pid == 0) {
        gid_t g = 65534;
        if (setgroups(1, &g) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
            _exit(99);
        cumod_adopt_reply r =
            ot_adopt(sock, CUMOD_ADOPT_MAGIC, CUMOD_ADOPT_VERSION, 1, NULL);
        _exit(r.status <= -1000 ? 100 + (-1000 - r.status) % 100
                                : r.status & 0x7f);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(orphan, forged_requests_and_other_users_are_refused, .timeout = 60)
{
    th_env t;
    ot_start(&t, "30");
    char sock[400];
    pid_t ex = ot_orphan(&t, sock, sizeof(sock));
    cumod_adopt_reply r =
        ot_adopt(sock, 0x11223344, CUMOD_ADOPT_VERSION, 1, NULL);
    cr_expect_eq(r.status, CUMOD_EPROTO, "a wrong magic: %d", r.status);
    cr_expect_not_null(strstr(r.detail, "not an adoption request"), "%s",
                       r.detail);
    r = ot_adopt(sock, CUMOD_ADOPT_MAGIC, 99, 1, NULL);
    cr_expect_eq(r.status, CUMOD_EPROTO, "a later version: %d", r.status);
    cr_expect_not_null(strstr(r.detail, "version 99"), "%s", r.detail);
    r = ot_adopt(sock, CUMOD_ADOPT_MAGIC, CUMOD_ADOPT_VERSION, 0, NULL);
    cr_expect_eq(r.status, CUMOD_EPROTO, "no channel: %d", r.status);
    cr_expect_not_null(strstr(r.detail, "no channel passed"), "%s", r.detail);
    if (geteuid() == 0) {
        /* The socket's mode keeps other users out... */
        int st = ot_adopt_as_nobody(sock);
        cr_expect_eq(st, 100 + EACCES,
                     "uid 65534 could not even connect (status %d)", st);
        /* ...and were it opened to them, its peer check would. */
        cr_assert_eq(chmod(t.d.dir, 0711), 0);
        cr_assert_eq(chmod(sock, 0666), 0);
        st = ot_adopt_as_nobody(sock);
        cr_expect_eq(st, CUMOD_EPERM, "uid 65534 refused (status %d)", st);
        char *log = th_daemon_log(&t.d);
        cr_expect_not_null(strstr(log, "uid 65534: only uid 0 may adopt"), "%s",
                           log);
        free(log);
    } else {
        cr_log_warn("not root: the other-uid part is skipped");
    }
    cr_expect(ot_alive(ex), "none of that ended the wait");
    int chan;
    r = ot_adopt(sock, CUMOD_ADOPT_MAGIC, CUMOD_ADOPT_VERSION, 1, &chan);
    cr_expect_eq(r.status, 0, "still adoptable: %s", r.detail);
    if (r.status == 0) {
        cumod_chan_hdr stop = {.op = CUMOD_CHAN_STOP};
        (void)cumod__chan_send(chan, &stop, NULL, 0, -1);
        close(chan);
        cr_expect(ot_gone_within(ex, 5000));
    }
    ot_done(&t, ex);
}

/* The sessions' ledger outlives the front in its executor, which hands it
 * to whoever adopts it: replayed, it holds the client's session as it
 * was, its buffers (sizes, device addresses), its stream, its place. */
Test(orphan, the_adopter_gets_the_sessions_ledger, .timeout = 60)
{
    th_env t;
    ot_start(&t, "30");
    cumod_buffer b1, b2, gone;
    cumod_stream sm;
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &b1), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, 8192, &b2), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, 256, &gone), CUMOD_OK);
    cr_assert_eq(cumod_buffer_free(t.c, gone), CUMOD_OK);
    cr_assert_eq(cumod_stream_create(t.c, &sm), CUMOD_OK);
    /* a call on the stream: the executor makes it */
    cr_assert_eq(cumod_buffer_memset(t.c, b1, 0, 4096, 1, sm, NULL), CUMOD_OK,
                 "%s", cumod_last_detail());
    char sock[400];
    pid_t ex = ot_orphan(&t, sock, sizeof(sock));
    int chan, ledger = -1;
    ot_ledger_out = &ledger;
    cumod_adopt_reply r =
        ot_adopt(sock, CUMOD_ADOPT_MAGIC, CUMOD_ADOPT_VERSION, 1, &chan);
    ot_ledger_out = NULL;
    cr_assert_eq(r.status, 0, "%s", r.detail);
    cr_expect_eq(r.has_ledger, 1, "the answer says it carries the ledger");
    cr_assert_geq(ledger, 0, "the ledger came with the answer");
    lp_view v;
    cr_assert_eq(lp_peek(ledger, getpid(), &v), 0, "%s", v.why);
    cr_expect_str_empty(v.why, "%s", v.why);
    cr_assert(v.found,
              "this client's session is in the ledger (%llu records, %zu "
              "sessions)",
              (unsigned long long)v.records, v.nsessions);
    cr_expect_eq(v.uid, (int)geteuid());
    cr_expect_str_eq(v.domain, "default");
    cr_expect_eq(v.device, 0);
    cr_assert_eq(v.nbufs, 2, "two buffers live: %zu", v.nbufs);
    const lp_buf *x1 = NULL, *x2 = NULL;
    for (size_t i = 0; i < v.nbufs; i++) {
        cr_expect_neq(v.bufs[i].handle, gone, "the freed one is not there");
        if (v.bufs[i].handle == b1)
            x1 = &v.bufs[i];
        if (v.bufs[i].handle == b2)
            x2 = &v.bufs[i];
    }
    cr_assert_not_null(x1, "buffer %llu", (unsigned long long)b1);
    cr_assert_not_null(x2);
    cr_expect_eq(x1->size, 4096);
    cr_expect_eq(x2->size, 8192);
    cr_expect_neq(x1->dptr, 0, "its device address");
    cr_expect_neq(x1->dptr, x2->dptr);
    cr_expect_eq(v.nstreams, 1, "its stream");
    close(ledger);
    cumod_chan_hdr stop = {.op = CUMOD_CHAN_STOP};
    (void)cumod__chan_send(chan, &stop, NULL, 0, -1);
    close(chan);
    cr_expect(ot_gone_within(ex, 5000));
    ot_done(&t, ex);
}

/* cumodd started again with the same configuration after its front was
 * killed takes over the executor it left (no new context), releases what
 * the dead front's sessions held in it (from the ledger), lets the old
 * front's modules go, serves, and stops it on an orderly stop. */
Test(orphan, a_cumodd_started_again_adopts_the_executor, .timeout = 90)
{
    th_env t;
    ot_start(&t, "30");
    cumod_buffer b1, b2;
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &b1), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, 8192, &b2), CUMOD_OK);
    uint64_t p1 = th_real_gpu() ? 0 : th_env_alloc_ptr(&t, 4096);
    char sock[400];
    pid_t ex = ot_orphan(&t, sock, sizeof(sock));
    cumod_close(t.c);
    t.c = NULL;
    char log[400], hold[400];
    snprintf(log, sizeof(log), "CUMOD_FAKE_LOG=%s", t.fake_log);
    snprintf(hold, sizeof(hold), "CUMOD_FAKE_HOLD=%s", t.fake_hold);
    int port = th_free_port();
    cr_assert_gt(port, 0);
    char ps[32];
    snprintf(ps, sizeof(ps), "127.0.0.1:%d", port);
    const char *args[] = {"--kernels",
                          t.dir,
                          "--log-level",
                          "debug",
                          "--orphan-grace",
                          "30",
                          "--metrics-listen",
                          ps,
                          NULL};
    const char *env[] = {log, hold, NULL};
    cr_assert_eq(th_daemon_start_again(&t.d, args, env), 0,
                 "cumodd started again");
    cumod_client *c;
    cr_assert_eq(cumod_open(t.d.url, 30000, &c), CUMOD_OK);
    const cumod_launch_params empty = {
        .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {1, 1, 1}};
    cr_expect_eq(cumod_launch(c, &empty, NULL, NULL), CUMOD_OK, "served: %s",
                 cumod_last_detail());
    cumod_device_info di;
    cr_assert_eq(cumod_device_info_get(c, &di), CUMOD_OK);
    cr_expect_eq(di.executor_pid, ex,
                 "the executor serving is the one adopted: pid %lld, not %d",
                 (long long)di.executor_pid, (int)ex);
    cr_expect_eq(th_metric(port, "cumod_executor_adoptions_total "), 1,
                 "the metrics count the adoption");
    char *dl = NULL;
    for (int w = 0; w < 500; w++) {
        free(dl);
        dl = th_daemon_log(&t.d);
        if (strstr(dl, "modules of the old front go") != NULL)
            break;
        th_sleep_ms(10);
    }
    char want[96];
    snprintf(want, sizeof(want), "adopted executor pid %d", (int)ex);
    cr_expect_not_null(strstr(dl, want), "%s", dl);
    cr_expect_null(strstr(dl, "CUMOD-EXEC-SPAWN"), "no new executor: %s", dl);
    cr_expect_not_null(strstr(dl, "1 sessions, 2 buffers"),
                       "the dead front's session released: %s", dl);
    cr_expect_not_null(strstr(dl, "let 1 modules of the old front go"), "%s",
                       dl);
    free(dl);
    if (!th_real_gpu()) {
        char freed[64];
        snprintf(freed, sizeof(freed), "free ptr=0x%llx",
                 (unsigned long long)p1);
        char *fl = th_env_fake_log_wait(&t, freed, 5000);
        cr_expect_not_null(fl != NULL ? strstr(fl, freed) : NULL,
                           "its buffer freed (%s)", freed);
        free(fl);
    }
    cumod_close(c);
    cr_expect_eq(th_daemon_stop(&t.d), 0, "an orderly stop");
    cr_expect(ot_gone_within(ex, 5000), "the adopted executor stopped too");
    ot_done(&t, ex);
}

/* A second cumodd started by mistake on a serving one's socket (with
 * --orphan-grace, which looks for executors to adopt) is refused at once
 * and takes nothing: the first serves on, its executor its own. */
Test(orphan, a_second_front_started_by_mistake_is_refused, .timeout = 60)
{
    th_env t;
    ot_start(&t, "30");
    pid_t ex = ot_executor(t.d.pid);
    cr_assert_gt(ex, 0);
    char log[400];
    snprintf(log, sizeof(log), "CUMOD_FAKE_LOG=%s", t.fake_log);
    const char *argv[16];
    int n = 0;
    argv[n++] = th_cumodd;
    argv[n++] = "--listen";
    argv[n++] = t.d.url;
    argv[n++] = "--kernels";
    argv[n++] = t.dir;
    argv[n++] = "--orphan-grace";
    argv[n++] = "30";
    if (!th_real_gpu()) {
        argv[n++] = "--cuda-library";
        argv[n++] = th_fakecuda;
    }
    argv[n] = NULL;
    const char *env[] = {log, NULL};
    char *err = NULL;
    int st = th_run(argv, env, NULL, &err, 20000);
    cr_expect_eq(st, 69, "the second exits 69 (EX_UNAVAILABLE): %d", st);
    cr_expect_not_null(err != NULL ? strstr(err, "Address in use") : NULL,
                       "it says why: %s", err ? err : "");
    free(err);
    const cumod_launch_params empty = {
        .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {1, 1, 1}};
    cr_expect_eq(cumod_launch(t.c, &empty, NULL, NULL), CUMOD_OK,
                 "the first serves on: %s", cumod_last_detail());
    cumod_device_info di;
    cr_assert_eq(cumod_device_info_get(t.c, &di), CUMOD_OK);
    cr_expect_eq(di.executor_pid, ex, "with its own executor");
    th_env_stop(&t);
}

/* Work held in flight when the front is killed: the cumodd that adopts the
 * executor releases the dead session's memory only once that work is
 * done (its ring's detach waits for it), and serves others meanwhile. */
Test(orphan, an_adoption_frees_nothing_under_work_in_flight, .timeout = 90)
{
    th_env t;
    if (th_real_gpu())
        cr_skip_test("work is held by the fake driver");
    ot_start(&t, "30");
    cumod_buffer b1;
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &b1), CUMOD_OK);
    uint64_t p1 = th_env_alloc_ptr(&t, 4096);
    cr_assert_eq(th_write_file(t.fake_hold, "empty\n"), 0);
    const cumod_launch_params empty = {
        .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {1, 1, 1}};
    cumod_ticket tk;
    cr_assert_eq(cumod_launch(t.c, &empty, &tk, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    char sock[400];
    pid_t ex = ot_orphan(&t, sock, sizeof(sock));
    cumod_close(t.c);
    t.c = NULL;
    char log[400], hold[400];
    snprintf(log, sizeof(log), "CUMOD_FAKE_LOG=%s", t.fake_log);
    snprintf(hold, sizeof(hold), "CUMOD_FAKE_HOLD=%s", t.fake_hold);
    const char *args[] = {"--kernels", t.dir, "--orphan-grace", "30", NULL};
    const char *env[] = {log, hold, NULL};
    cr_assert_eq(th_daemon_start_again(&t.d, args, env), 0);
    cumod_client *c;
    cr_assert_eq(cumod_open(t.d.url, 30000, &c), CUMOD_OK);
    cumod_buffer nb;
    cr_expect_eq(cumod_buffer_alloc(c, 1024, &nb), CUMOD_OK,
                 "others are served while the old work is held: %s",
                 cumod_last_detail());
    char freed[64];
    snprintf(freed, sizeof(freed), "free ptr=0x%llx", (unsigned long long)p1);
    th_sleep_ms(500);
    char *fl = th_env_fake_log_wait(&t, freed, 10);
    cr_expect_null(fl != NULL ? strstr(fl, freed) : NULL,
                   "the buffer of the held work stays while it runs");
    free(fl);
    cr_assert_eq(unlink(t.fake_hold), 0);
    fl = th_env_fake_log_wait(&t, freed, 10000);
    cr_expect_not_null(fl != NULL ? strstr(fl, freed) : NULL,
                       "freed once the work completed");
    free(fl);
    cumod_close(c);
    cr_expect_eq(th_daemon_stop(&t.d), 0);
    ot_done(&t, ex);
}
