/* SPDX-License-Identifier: MIT */
/*
 * Shared memory a client changes under cumodd (DESIGN.md "Trust"): a ring
 * or a segment truncated while the daemon maps it costs that client its
 * ring or its copy, with a sentence and a CUMOD-RING / CUMOD-SEGMENT log
 * line naming its pid and uid, and never the front or the executor: a
 * second client, launching and checking its results meanwhile, loses
 * nothing. The attacker is a process of its own (tests/hostile_client),
 * run as another user (nobody) when the suite runs as root. cumodd runs as
 * a real process on the fake driver, whose copies are CPU memcpys from the
 * executor's mapping (where the SIGBUS comes).
 * Built again as tests/gpu's gpu_shm_test (CUMOD_TEST_REAL_GPU) for the
 * real driver, where the segment is registered and copies are DMA: there
 * the other client checks vadd's sums, and the segment is truncated before
 * the copy is sent (no driver hold to stop it in between).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cumod.pb-c.h"
#include "cumod/cumod.h"
#include "cumod_ring.h"
#include "fixture.h"

#ifdef CUMOD_TEST_REAL_GPU
TH_SUITE_DRIVER(1);
#else
TH_SUITE_DRIVER(0);
#endif

/* --- a raw client over nng ------------------------------------------------ */

static uint64_t sh_id;

static int
sh_send(nng_socket s, Cumod__Request *req)
{
    req->version = 1;
    req->id = ++sh_id;
    size_t n = cumod__request__get_packed_size(req);
    uint8_t *buf = malloc(n ? n : 1);
    cumod__request__pack(req, buf);
    int rv = nng_send(s, buf, n, 0);
    free(buf);
    return rv;
}

static Cumod__Reply *
sh_recv(nng_socket s)
{
    void *got;
    size_t len;
    if (nng_recv(s, &got, &len, NNG_FLAG_ALLOC) != 0)
        return NULL;
    Cumod__Reply *rep = cumod__reply__unpack(NULL, len, got);
    nng_free(got, len);
    return rep;
}

static Cumod__Reply *
sh_call(nng_socket s, Cumod__Request *req)
{
    return sh_send(s, req) == 0 ? sh_recv(s) : NULL;
}

static int
sh_code(const Cumod__Reply *r)
{
    return r == NULL ? -1 : r->status ? r->status->code : 0;
}

static const char *
sh_msg(const Cumod__Reply *r)
{
    return r && r->status && r->status->message ? r->status->message : "";
}

static Cumod__Reply *
sh_hello(nng_socket s)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__Hello h = CUMOD__HELLO__INIT;
    req.body_case = CUMOD__REQUEST__BODY_HELLO;
    req.hello = &h;
    return sh_call(s, &req);
}

static nng_socket
sh_connect(const char *url)
{
    nng_socket s;
    Cumod__Reply *rep = NULL;
    /* A connection made just after another peer left may be dropped by
     * nng 1.5.2's listener (nng #1518): dial again then, as libcumod. */
    for (int tries = 0; rep == NULL && tries < 5; tries++) {
        if (tries > 0)
            nng_close(s);
        cr_assert_eq(nng_req0_open(&s), 0);
        nng_socket_set_ms(s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
        nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 2000);
        if (nng_dial(s, url, NULL, 0) != 0) {
            th_sleep_ms(200);
            continue;
        }
        rep = sh_hello(s);
    }
    cr_assert_not_null(rep, "no answer from cumodd");
    cumod__reply__free_unpacked(rep, NULL);
    nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 10000);
    return s;
}

/* A shm object of len bytes filled with fill; its fd. */
static int
sh_shm(char *name, size_t cap, const char *what, size_t len, int fill)
{
    static int counter;
    snprintf(name, cap, "/cumod-shmtest-%s-%d-%d", what, (int)getpid(),
             counter++);
    shm_unlink(name);
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    cr_assert_geq(fd, 0, "shm_open: %s", strerror(errno));
    cr_assert_eq(ftruncate(fd, (off_t)len), 0);
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    cr_assert_neq(m, MAP_FAILED);
    memset(m, fill, len);
    munmap(m, len);
    return fd;
}

/* --- another client, checking its results throughout --------------------- */

enum { SH_N = 64 };

typedef struct other {
    const char *url;
    pthread_t thread;
    atomic_int stop, pause, paused, ready;
    int runs, failed;
    char why[512];
} other;

static void
other_fail(other *o, const char *what, int rv)
{
    if (o->failed++ == 0)
        snprintf(o->why, sizeof(o->why), "%s: %s (%s)", what, cumod_errname(rv),
                 cumod_last_detail());
}

static void *
other_main(void *arg)
{
    other *o = arg;
    cumod_client *c = NULL;
    cumod_buffer a, b, x;
    float fa[SH_N], fb[SH_N], fx[SH_N];
    int rv;

    for (int i = 0; i < SH_N; i++) {
        fa[i] = (float)i;
        fb[i] = (float)(2 * i);
    }
    if ((rv = cumod_open(o->url, 10000, &c)) != CUMOD_OK) {
        other_fail(o, "open", rv);
        atomic_store(&o->ready, 1);
        return NULL;
    }
    if ((rv = cumod_buffer_alloc(c, sizeof(fa), &a)) ||
        (rv = cumod_buffer_alloc(c, sizeof(fb), &b)) ||
        (rv = cumod_buffer_alloc(c, sizeof(fx), &x)) ||
        (rv = cumod_buffer_write(c, a, 0, fa, sizeof(fa), 0)) ||
        (rv = cumod_buffer_write(c, b, 0, fb, sizeof(fb), 0))) {
        other_fail(o, "setup", rv);
        atomic_store(&o->ready, 1);
        cumod_close(c);
        return NULL;
    }
    atomic_store(&o->ready, 1);
    while (!atomic_load(&o->stop)) {
        if (atomic_load(&o->pause)) {
            atomic_store(&o->paused, 1);
            th_sleep_ms(1);
            continue;
        }
        atomic_store(&o->paused, 0);
        cumod_arg args[4] = {cumod_arg_buffer(a, 0), cumod_arg_buffer(b, 0),
                             cumod_arg_buffer(x, 0), cumod_arg_i32(SH_N)};
        cumod_launch_params p = {.kernel = "vadd:vadd",
                                 .grid = {1, 1, 1},
                                 .block = {SH_N, 1, 1},
                                 .nargs = 4,
                                 .args = args};
        /* The fake driver runs no kernel code: the launch must succeed,
         * and bytes written must come back as written. */
        float fw[SH_N];
        for (int i = 0; i < SH_N; i++)
            fw[i] = (float)(o->runs + i);
        if ((rv = cumod_launch(c, &p, NULL, NULL)) != CUMOD_OK) {
            other_fail(o, "launch", rv);
            continue;
        }
        memset(fx, 0, sizeof(fx));
        if ((rv = cumod_buffer_write(c, x, 0, fw, sizeof(fw), 0)) != CUMOD_OK ||
            (rv = cumod_buffer_read(c, x, 0, fx, sizeof(fx), 0)) != CUMOD_OK) {
            other_fail(o, "write and read", rv);
            continue;
        }
        if (memcmp(fx, fw, sizeof(fw)) != 0)
            other_fail(o, "bytes that came back changed", CUMOD_OK);
        if (th_real_gpu()) {
            if ((rv = cumod_launch(c, &p, NULL, NULL)) != CUMOD_OK ||
                (rv = cumod_buffer_read(c, x, 0, fx, sizeof(fx), 0)) !=
                    CUMOD_OK) {
                other_fail(o, "vadd", rv);
                continue;
            }
            for (int i = 0; i < SH_N; i++)
                if (fx[i] != fa[i] + fb[i]) {
                    other_fail(o, "a wrong sum", CUMOD_OK);
                    break;
                }
        }
        o->runs++;
    }
    /* Its buffers are still the ones it wrote: the executor never
     * restarted under it. */
    memset(fx, 0, sizeof(fx));
    if ((rv = cumod_buffer_read(c, a, 0, fx, sizeof(fx), 0)) != CUMOD_OK)
        other_fail(o, "the last read", rv);
    else if (memcmp(fx, fa, sizeof(fa)) != 0)
        other_fail(o, "its first buffer changed", CUMOD_OK);
    cumod_close(c);
    return NULL;
}

static void
other_start(other *o, const char *url)
{
    memset(o, 0, sizeof(*o));
    o->url = url;
    cr_assert_eq(pthread_create(&o->thread, NULL, other_main, o), 0);
    while (!atomic_load(&o->ready))
        th_sleep_ms(1);
    /* Some rounds before the attack. */
    for (int i = 0; i < 2000 && o->runs < 5 && o->failed == 0; i++)
        th_sleep_ms(1);
}

static void
other_pause(other *o, int on)
{
    atomic_store(&o->pause, on);
    while (on && !atomic_load(&o->paused) && !atomic_load(&o->stop))
        th_sleep_ms(1);
}

/* Stops the other client and checks it lost nothing; what names the
 * attack in the line printed for the GPU run's log. */
static void
other_stop(other *o, const char *what)
{
    int before = o->runs;
    for (int i = 0; i < 2000 && o->runs < before + 5 && o->failed == 0; i++)
        th_sleep_ms(1);
    atomic_store(&o->stop, 1);
    pthread_join(o->thread, NULL);
    if (th_real_gpu())
        printf("  %s: the other session's rounds (vadd checked on the GPU, "
               "bytes written and read back): %d right, %d failed\n",
               what, o->runs, o->failed);
    cr_expect_eq(o->failed, 0, "the other client lost %d requests: %s",
                 o->failed, o->why);
    cr_expect_gt(o->runs, before, "the other client went on after");
}

static void
sh_start(th_env *t, const char *const *extra)
{
    static const char *const kernels[] = {"vadd", NULL};
    th_env_init(t, kernels);
    th_env_start(t, extra, NULL);
}

/* The daemon is up and no executor was lost or restarted. */
static void
sh_expect_alive(th_env *t, const char *log)
{
    cr_expect_eq(th_daemon_wait(&t->d, 0), -1, "cumodd is still running");
    cr_expect_eq(th_count(log, "CUMOD-EXEC-LOST"), 0, "%s", log);
    cr_expect_eq(th_count(log, "CUMOD-EXEC-RESTARTED"), 0, "%s", log);
}

/* --- the hostile client ----------------------------------------------------
 */

/* tests/hostile_client, a process of its own that makes the shared memory
 * and truncates it as this suite asks (one command line, one answer
 * line). As root it runs as nobody (uid 65534), who cumodd serves through
 * --socket-mode 0666 and whose shm objects are its own; otherwise as this
 * user, saying so. */
typedef struct hostile {
    pid_t pid;
    int uid, other_user;
    FILE *to, *from;
    char client[400], supp[400];
} hostile;

enum { SH_NOBODY = 65534 };

extern char **environ;

static void
hostile_start(hostile *h, th_env *t)
{
    char cmd[2400], opt[1024], lsan[1100];
    int in[2], out[2];
    const char *env[256];
    size_t n = 0;

    memset(h, 0, sizeof(*h));
    h->other_user = geteuid() == 0;
    h->uid = h->other_user ? SH_NOBODY : (int)getuid();
    if (!h->other_user)
        fprintf(stderr,
                "shm: not root, so no second uid: the hostile client runs "
                "as this user (uid %d), in a process of its own\n",
                h->uid);
    /* The other user may not reach the build folder (a checkout in a 0700
     * folder): the copy in the daemon's folder, opened to all, runs. */
    cr_assert_eq(chmod(t->d.dir, 0755), 0);
    snprintf(h->client, sizeof(h->client), "%s/hostile_client", t->d.dir);
    snprintf(h->supp, sizeof(h->supp), "%s/lsan-nng.supp", t->d.dir);
    snprintf(cmd, sizeof(cmd),
             "cp '%s' '%s' && cp '%s' '%s' && chmod 0755 '%s' && "
             "chmod 0644 '%s'",
             CUMOD_TEST_HOSTILE_CLIENT, h->client, CUMOD_TEST_NNG_SUPP, h->supp,
             h->client, h->supp);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    /* Its environment is made before the fork: the child only execs. */
    const char *was = getenv("LSAN_OPTIONS");
    snprintf(opt, sizeof(opt), "%s%ssuppressions=%s", was ? was : "",
             was && was[0] ? ":" : "", h->supp);
    snprintf(lsan, sizeof(lsan), "LSAN_OPTIONS=%s", opt);
    env[n++] = lsan;
    for (char **e = environ; *e && n < 255; e++)
        if (strncmp(*e, "LSAN_OPTIONS=", 13) != 0)
            env[n++] = *e;
    env[n] = NULL;
    cr_assert_eq(pipe2(in, O_CLOEXEC), 0);
    cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
    fflush(NULL);
    h->pid = fork();
    cr_assert_geq(h->pid, 0);
    if (h->pid == 0) {
        if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0)
            _exit(119);
        if (h->other_user && (setgroups(0, NULL) != 0 ||
                              setgid(SH_NOBODY) != 0 || setuid(SH_NOBODY) != 0))
            _exit(120);
        execve(h->client, (char *const[]){h->client, t->d.url, NULL},
               (char *const *)env);
        _exit(121);
    }
    close(in[0]);
    close(out[1]);
    h->to = fdopen(in[1], "w");
    h->from = fdopen(out[0], "r");
    cr_assert(h->to != NULL && h->from != NULL);
}

/* Runs a command in the hostile client; its code, its answer in ans. */
static int
hostile_do(hostile *h, const char *cmd, char *ans, size_t cap)
{
    char line[1200];
    int code;
    cr_assert_geq(fprintf(h->to, "%s\n", cmd), 0);
    fflush(h->to);
    if (fgets(line, sizeof(line), h->from) == NULL) {
        int st = 0;
        waitpid(h->pid, &st, 0);
        cr_assert_fail("the hostile client died at %s (status %d)", cmd, st);
    }
    line[strcspn(line, "\n")] = '\0';
    char *sp = strchr(line, ' ');
    code = atoi(line);
    snprintf(ans, cap, "%s", sp ? sp + 1 : "");
    return code;
}

/* The hostile client removes what it made and exits. */
static void
hostile_stop(hostile *h)
{
    int st;
    fclose(h->to);
    while (waitpid(h->pid, &st, 0) < 0 && errno == EINTR)
        ;
    fclose(h->from);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "the hostile client ended with status %d", st);
}

/* How the log names it: its pid and uid. */
static void
hostile_who(const hostile *h, char *who, size_t cap)
{
    snprintf(who, cap, "(pid %d uid %d)", (int)h->pid, h->uid);
}

/* --- a truncated ring ------------------------------------------------------
 */

Test(shm, a_truncated_ring_costs_its_client_the_ring_and_no_one_else,
     .timeout = 120)
{
    th_env t;
    other o;
    hostile h;
    char name[96], ans[1024], who[64], uid[32];

    sh_start(&t, (const char *const[]){"--socket-mode", "0666", NULL});
    other_start(&o, t.d.url);

    /* A ring the hostile client made by hand, opened, then cut to
     * nothing: the daemon's next look at it touches pages that are gone. */
    hostile_start(&h, &t);
    cr_assert_eq(hostile_do(&h, "ring", name, sizeof(name)), 0, "open: %s",
                 name);
    cr_assert_eq(hostile_do(&h, "cut", ans, sizeof(ans)), 0, "%s", ans);
    cr_assert_eq(hostile_do(&h, "bell", ans, sizeof(ans)), 0, "%s", ans);

    /* The front says why, naming the client: its pid and its uid. */
    hostile_who(&h, who, sizeof(who));
    snprintf(uid, sizeof(uid), "uid %d)", h.uid);
    char *log = NULL;
    for (int i = 0; i < 500; i++) {
        free(log);
        log = th_daemon_log(&t.d);
        if (strstr(log, "truncated under cumodd") || t.d.exited ||
            th_daemon_wait(&t.d, 0) != -1)
            break;
        th_sleep_ms(10);
    }
    sh_expect_alive(&t, log);
    const char *line = strstr(log, "truncated under cumodd");
    cr_expect_not_null(line, "a CUMOD-RING line says what changed:\n%s", log);
    cr_expect(strstr(log, who) != NULL, "it names %s:\n%s", who, log);
    cr_expect(strstr(log, uid) != NULL, "its %s:\n%s", uid, log);
    cr_expect(strstr(log, name) != NULL, "it names the ring %s", name);
    cr_expect(strstr(log, "0 bytes now") != NULL, "and its size:\n%s", log);
    free(log);

    /* Its connection still serves; the ring, still cut short, is refused
     * with what is wrong with it. */
    cr_expect_eq(hostile_do(&h, "hello", ans, sizeof(ans)), 0,
                 "the connection still serves: %s", ans);
    cr_expect_eq(hostile_do(&h, "reopen", ans, sizeof(ans)), CUMOD_EPERM, "%s",
                 ans);
    cr_expect(strstr(ans, "has 0 bytes") != NULL, "%s", ans);
    cr_expect(strstr(ans, name) != NULL, "%s", ans);

    other_stop(&o, "truncated ring");
    hostile_stop(&h);
    th_env_stop(&t);
}

/* --- segments --------------------------------------------------------------
 */

enum { SEG = 1 << 20 };

/* Maps shm name (SEG bytes) on connection s; its handle. */
static uint64_t
sh_map(nng_socket s, const char *name)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__MapSegment m = CUMOD__MAP_SEGMENT__INIT;
    m.name = (char *)name;
    m.size = SEG;
    req.body_case = CUMOD__REQUEST__BODY_MAP_SEGMENT;
    req.map_segment = &m;
    Cumod__Reply *rep = sh_call(s, &req);
    cr_assert_eq(sh_code(rep), 0, "map: %s", sh_msg(rep));
    uint64_t h = rep->segment->handle;
    cumod__reply__free_unpacked(rep, NULL);
    return h;
}

static uint64_t
sh_alloc(nng_socket s)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__AllocBuffer a = CUMOD__ALLOC_BUFFER__INIT;
    a.size = SEG;
    req.body_case = CUMOD__REQUEST__BODY_ALLOC_BUFFER;
    req.alloc_buffer = &a;
    Cumod__Reply *rep = sh_call(s, &req);
    cr_assert_eq(sh_code(rep), 0, "alloc: %s", sh_msg(rep));
    uint64_t h = rep->buffer->handle;
    cumod__reply__free_unpacked(rep, NULL);
    return h;
}

/* A Copy request of the whole segment, answered once complete. */
static void
sh_copy_req(Cumod__Request *req, Cumod__Copy *c, Cumod__CopyKind kind,
            uint64_t seg, uint64_t buf)
{
    cumod__request__init(req);
    cumod__copy__init(c);
    c->kind = kind;
    c->segment = seg;
    c->buffer = buf;
    c->length = SEG;
    c->when = CUMOD__REPLY_WHEN__REPLY_WHEN_COMPLETE;
    req->body_case = CUMOD__REQUEST__BODY_COPY;
    req->copy = c;
}

Test(shm, a_segment_truncated_during_a_copy_fails_that_copy_alone,
     .timeout = 120)
{
    th_env t;
    other o;
    hostile h;
    char name[96], hold[320], env_hold[360], who[64], uid[32], ans[1024];

    th_env_init(&t, (const char *const[]){"vadd", NULL});
    snprintf(hold, sizeof(hold), "%s/.copyhold", t.dir);
    snprintf(env_hold, sizeof(env_hold), "CUMOD_FAKE_COPY_HOLD=%s", hold);
    th_env_start(&t, (const char *const[]){"--socket-mode", "0666", NULL},
                 (const char *[]){env_hold, NULL});
    other_start(&o, t.d.url);

    hostile_start(&h, &t);
    cr_assert_eq(hostile_do(&h, "seg", name, sizeof(name)), 0,
                 "map and alloc: %s", name);
    cr_assert_eq(hostile_do(&h, "copy to", ans, sizeof(ans)), 0,
                 "a copy of the whole segment: %s", ans);

    /* The next copy passes the front's checks and stops in the driver
     * (the fake's copy hold, the other client paused meanwhile so that
     * the held copy is this one); the segment is cut to nothing there, and
     * the copy, let go, reads pages that are gone. */
    int code;
    if (th_real_gpu()) {
        /* The real driver: no hold; the registered pages stay pinned. */
        cr_assert_eq(hostile_do(&h, "cut", ans, sizeof(ans)), 0, "%s", ans);
        code = hostile_do(&h, "copy to", ans, sizeof(ans));
    } else {
        other_pause(&o, 1);
        cr_assert_eq(th_write_file(hold, ""), 0);
        cr_assert_eq(hostile_do(&h, "send to", ans, sizeof(ans)), 0, "%s", ans);
        int waiting = 0;
        for (int i = 0; i < 1000 && !waiting; i++) {
            char *flog = th_read_file(t.fake_log);
            waiting = flog && th_count(flog, "copy-waiting") > 0;
            free(flog);
            if (!waiting)
                th_sleep_ms(5);
        }
        cr_assert(waiting, "the copy should be held in the driver");
        cr_assert_eq(hostile_do(&h, "cut", ans, sizeof(ans)), 0, "%s", ans);
        remove(hold);
        code = hostile_do(&h, "recv", ans, sizeof(ans));
        other_pause(&o, 0);
    }
    cr_expect_eq(code, CUMOD_EPERM, "the copy fails: %s", ans);
    cr_expect(strstr(ans, name) != NULL, "naming the segment: %s", ans);
    cr_expect(strstr(ans, "truncated") != NULL, "%s", ans);

    /* Later copies of it are refused before they run, also once the
     * client grew it back (cumodd's mapping of it holds zeros since). */
    cr_assert_eq(hostile_do(&h, "grow", ans, sizeof(ans)), 0, "%s", ans);
    cr_expect_eq(hostile_do(&h, "copy from", ans, sizeof(ans)), CUMOD_EPERM,
                 "%s", ans);
    /* Its connection still serves, and can let the segment go. */
    cr_expect_eq(hostile_do(&h, "unmap", ans, sizeof(ans)), 0, "unmap: %s",
                 ans);

    other_stop(&o, "truncated segment");
    char *log = th_daemon_log(&t.d);
    sh_expect_alive(&t, log);
    hostile_who(&h, who, sizeof(who));
    snprintf(uid, sizeof(uid), "uid %d)", h.uid);
    const char *line = strstr(log, "CUMOD-SEGMENT");
    cr_expect_not_null(line, "a CUMOD-SEGMENT line:\n%s", log);
    cr_expect(line && strstr(line, who) != NULL, "naming %s:\n%s", who, log);
    cr_expect(line && strstr(line, uid) != NULL, "its %s:\n%s", uid, log);
    cr_expect(line && strstr(line, name) != NULL, "and %s:\n%s", name, log);
    free(log);
    hostile_stop(&h);
    th_env_stop(&t);
}

Test(shm, a_segment_grown_or_rewritten_by_its_client_still_copies,
     .timeout = 60)
{
    th_env t;
    char name[96];
    Cumod__Request req;
    Cumod__Copy cp;

    sh_start(&t, NULL);
    nng_socket s = sh_connect(t.d.url);
    int fd = sh_shm(name, sizeof(name), "grow", SEG, 0x11);
    uint64_t seg = sh_map(s, name);
    uint64_t buf = sh_alloc(s);
    /* Grown past what was mapped, rewritten: the mapped part copies as it
     * reads now. */
    cr_assert_eq(ftruncate(fd, 2 * SEG), 0);
    uint8_t *m = mmap(NULL, SEG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    cr_assert_neq(m, MAP_FAILED);
    memset(m, 0x77, SEG);
    sh_copy_req(&req, &cp, CUMOD__COPY_KIND__COPY_TO_DEVICE, seg, buf);
    Cumod__Reply *rep = sh_call(s, &req);
    cr_expect_eq(sh_code(rep), 0, "%s", sh_msg(rep));
    cumod__reply__free_unpacked(rep, NULL);
    memset(m, 0, SEG);
    sh_copy_req(&req, &cp, CUMOD__COPY_KIND__COPY_TO_HOST, seg, buf);
    rep = sh_call(s, &req);
    cr_expect_eq(sh_code(rep), 0, "%s", sh_msg(rep));
    cumod__reply__free_unpacked(rep, NULL);
    cr_expect_eq(m[0], 0x77, "the rewritten bytes went and came back");
    cr_expect_eq(m[SEG - 1], 0x77);
    munmap(m, SEG);
    char *log = th_daemon_log(&t.d);
    cr_expect_eq(th_count(log, "CUMOD-SEGMENT"), 0, "%s", log);
    free(log);
    nng_close(s);
    close(fd);
    shm_unlink(name);
    th_env_stop(&t);
}
