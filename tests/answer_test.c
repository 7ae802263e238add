/* SPDX-License-Identifier: MIT */
/*
 * Every request is answered exactly once, whatever its transport and
 * however it completes (DESIGN.md "Trust"), against cumodd as a real
 * process on the fake driver. A client written here speaks the raw
 * protocol on one connection over both transports: a raw nng req socket,
 * which hands over every reply that arrives (a cooked one drops what it
 * does not wait for), and a ring made by hand, whose completion ring shows
 * every record the daemon wrote. It counts the replies of each request id.
 *
 * Completions: success, refusal by a check, the executor lost, a
 * deadline, shutdown; and shutdown with the executor killed at several
 * points of the drain, after which cumodd still exits 0 and every request
 * in flight hears an error.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cumod.pb-c.h"
#include "cumod/cumod.h"
#include "cumod_ring.h"
#include "fixture.h"
#include "shm_ring.h"

TH_SUITE_DRIVER(0);

#define AN_IDS 2048
#define AN_SQ ((uint64_t)64 << 10)
#define AN_CQ ((uint64_t)64 << 10)

typedef enum { AN_NNG = 0, AN_RING = 1 } an_via;

/* The client: one nng connection and its session's ring. */
typedef struct an_client {
    nng_socket s;
    char name[96], bell[128];
    uint8_t *map;
    size_t len;
    cumod_ring_hdr *h;
    uint8_t *sq, *cq;
    int bell_fd;
    uint64_t next_id;
    /* By request id: replies seen, the last one's status and sentence,
     * and the transport it was sent on. */
    int count[AN_IDS];
    int code[AN_IDS];
    char msg[AN_IDS][200];
    int sent[AN_IDS]; /* 1 + an_via once sent */
    uint64_t executor_pid;
} an_client;

static void
an_record(an_client *c, const uint8_t *bytes, size_t len)
{
    Cumod__Reply *rep = cumod__reply__unpack(NULL, len, bytes);
    cr_assert_not_null(rep, "a reply that does not decode (%zu bytes)", len);
    cr_assert_lt(rep->id, AN_IDS, "a reply to id %llu, never sent",
                 (unsigned long long)rep->id);
    c->count[rep->id]++;
    c->code[rep->id] = rep->status ? rep->status->code : 0;
    snprintf(c->msg[rep->id], sizeof(c->msg[0]), "%s",
             rep->status && rep->status->message ? rep->status->message : "");
    if (rep->body_case == CUMOD__REPLY__BODY_HELLO)
        c->executor_pid = rep->hello->executor_pid;
    cumod__reply__free_unpacked(rep, NULL);
}

/* Takes every reply that has arrived, on either transport. */
static void
an_pump(an_client *c)
{
    nng_msg *m;
    while (nng_recvmsg(c->s, &m, NNG_FLAG_NONBLOCK) == 0) {
        an_record(c, nng_msg_body(m), nng_msg_len(m));
        nng_msg_free(m);
    }
    while (c->h != NULL) {
        uint64_t tail = atomic_load(&c->h->cq_tail);
        uint64_t head = atomic_load(&c->h->cq_head);
        if (tail == head)
            break;
        cumod_ring_rec rec;
        uint64_t off = head & (AN_CQ - 1);
        memcpy(&rec, c->cq + off, sizeof(rec));
        if (rec.kind == CUMOD_RING_REC_PAD) {
            atomic_store(&c->h->cq_head, head + (AN_CQ - off));
            continue;
        }
        cr_assert_eq(rec.kind, CUMOD_RING_REC_MSG);
        an_record(c, c->cq + off + sizeof(rec), rec.len);
        atomic_store(&c->h->cq_head, head + cumod_ring_rec_space(rec.len));
    }
}

/* Pumps until id has a reply, for at most ms; 1 if it came. */
static int
an_wait(an_client *c, uint64_t id, int ms)
{
    for (int i = 0; i < ms; i++) {
        an_pump(c);
        if (c->count[id] > 0)
            return 1;
        th_sleep_ms(1);
    }
    return 0;
}

/* Sends req with the next id over via; returns the id. */
static uint64_t
an_send(an_client *c, an_via via, Cumod__Request *req)
{
    uint64_t id = ++c->next_id;
    cr_assert_lt(id, AN_IDS);
    req->version = CUMOD__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    req->id = id;
    size_t n = cumod__request__get_packed_size(req);
    if (via == AN_NNG) {
        nng_msg *m;
        cr_assert_eq(nng_msg_alloc(&m, n), 0);
        cumod__request__pack(req, nng_msg_body(m));
        /* A raw socket's messages carry nng's own request id (high bit
         * set); the daemon echoes it with the reply. */
        cr_assert_eq(nng_msg_header_append_u32(m, (uint32_t)id | 0x80000000u),
                     0);
        int rv = nng_sendmsg(c->s, m, 0);
        cr_assert_eq(rv, 0, "send: %s", nng_strerror(rv));
    } else {
        uint64_t tail = atomic_load(&c->h->sq_tail);
        uint64_t off = tail & (AN_SQ - 1), need = cumod_ring_rec_space(n);
        if (AN_SQ - off < need) { /* pad to the end */
            cumod_ring_rec pad = {.len = 0, .kind = CUMOD_RING_REC_PAD};
            memcpy(c->sq + off, &pad, sizeof(pad));
            tail += AN_SQ - off;
            off = 0;
        }
        cumod_ring_rec rec = {.len = (uint32_t)n, .kind = CUMOD_RING_REC_MSG};
        memcpy(c->sq + off, &rec, sizeof(rec));
        cumod__request__pack(req, c->sq + off + sizeof(rec));
        atomic_store(&c->h->sq_tail, tail + need);
        char b = 1;
        if (write(c->bell_fd, &b, 1) != 1)
            cr_log_warn("doorbell: %s", strerror(errno));
    }
    c->sent[id] = 1 + (int)via;
    return id;
}

static uint64_t
an_hello(an_client *c, an_via via)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__Hello h = CUMOD__HELLO__INIT;
    h.client = "answer_test";
    req.body_case = CUMOD__REQUEST__BODY_HELLO;
    req.hello = &h;
    return an_send(c, via, &req);
}

/* A launch of kernel (one thread), answered when complete. */
static uint64_t
an_launch(an_client *c, an_via via, const char *kernel, unsigned deadline_ms)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__Launch l = CUMOD__LAUNCH__INIT;
    Cumod__Dim3 one = CUMOD__DIM3__INIT;
    one.x = one.y = one.z = 1;
    l.kernel = (char *)kernel;
    l.grid = &one;
    l.block = &one;
    l.when = CUMOD__REPLY_WHEN__REPLY_WHEN_COMPLETE;
    l.deadline_ms = deadline_ms;
    req.body_case = CUMOD__REQUEST__BODY_LAUNCH;
    req.launch = &l;
    return an_send(c, via, &req);
}

/* Connects to url and says hello (dialling again if nng 1.5.2's listener
 * dropped the first connection: nng #1518). */
static void
an_connect(an_client *c, const th_daemon *d)
{
    for (int tries = 0; tries < 5; tries++) {
        if (tries > 0)
            nng_close(c->s);
        memset(c, 0, sizeof(*c));
        c->bell_fd = -1;
        cr_assert_eq(nng_req0_open_raw(&c->s), 0);
        nng_socket_set_ms(c->s, NNG_OPT_SENDTIMEO, 5000);
        /* A raw socket queues one reply (nng's default); the next waits
         * in the connection and goes with it. The shutdown cases read the
         * replies after cumodd has exited: they must all be queued here
         * by then (libcumod's contexts each keep their own). */
        nng_socket_set_int(c->s, NNG_OPT_RECVBUF, AN_IDS / 8);
        if (nng_dial(c->s, d->url, NULL, 0) != 0) {
            th_sleep_ms(200);
            continue;
        }
        if (an_wait(c, an_hello(c, AN_NNG), 2000))
            return;
    }
    char *log = th_daemon_log(d);
    cr_assert_fail("no answer from cumodd; its log:\n%s", log ? log : "");
}

/* Makes a ring and opens it for the connection's session. */
static void
an_ring_open(an_client *c)
{
    tr_ring g;
    tr_make(&g, "cumod-answertest", CUMOD_RING_HDR_SIZE + AN_SQ + AN_CQ, AN_SQ,
            AN_CQ, 1);
    TR_ADOPT(c, g);
    c->h = NULL; /* not read until the ring is open */

    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__OpenRing o = CUMOD__OPEN_RING__INIT;
    o.name = c->name;
    o.size = c->len;
    req.body_case = CUMOD__REQUEST__BODY_OPEN_RING;
    req.open_ring = &o;
    uint64_t id = an_send(c, AN_NNG, &req);
    cr_assert(an_wait(c, id, 10000), "OpenRing answered");
    cr_assert_eq(c->code[id], 0, "OpenRing: %s", c->msg[id]);
    c->h = g.h; /* its replies are read from now on */
}

static void
an_close(an_client *c)
{
    if (c->map != NULL)
        munmap(c->map, c->len);
    if (c->bell_fd >= 0)
        close(c->bell_fd);
    if (c->name[0]) {
        shm_unlink(c->name);
        unlink(c->bell);
    }
    nng_close(c->s);
}

/* A Hello on each transport and its answer: the replies of what came
 * before have had their turn (a second answer would leave with or before
 * them). Also learns the executor's pid. */
static void
an_fence(an_client *c)
{
    uint64_t a = an_hello(c, AN_NNG);
    uint64_t b = c->h != NULL ? an_hello(c, AN_RING) : 0;
    cr_assert(an_wait(c, a, 10000), "the nng fence is answered");
    cr_assert(b == 0 || an_wait(c, b, 10000), "the ring's fence is answered");
    th_sleep_ms(50);
    an_pump(c);
}

/* Each request sent so far has exactly one reply. */
static void
an_expect_each_once(const an_client *c)
{
    for (uint64_t id = 1; id <= c->next_id; id++)
        cr_expect_eq(c->count[id], 1,
                     "request %llu (over %s) has %d replies; the last: %s",
                     (unsigned long long)id,
                     c->sent[id] == 1 + AN_RING ? "the ring" : "nng",
                     c->count[id], c->msg[id]);
}

static void
an_start_env(th_env *t, const char *const *extra, const char *const *env)
{
    static const char *const kernels[] = {"vadd", "empty", NULL};
    th_env_init(t, kernels);
    th_env_start(t, extra, env);
}

static void
an_start(th_env *t, const char *const *extra)
{
    an_start_env(t, extra, NULL);
}

/* Every request is answered until the executor is killed during a hang. */
static pid_t
an_executor(an_client *c)
{
    an_fence(c);
    cr_assert_gt(c->executor_pid, 0, "the executor's pid");
    return (pid_t)c->executor_pid;
}

/* Launches of empty on both transports until both succeed: an executor is
 * serving again. */
static void
an_served_again(an_client *c)
{
    for (int w = 0; w < 400; w++) {
        uint64_t a = an_launch(c, AN_NNG, "empty:empty", 0);
        uint64_t b = an_launch(c, AN_RING, "empty:empty", 0);
        cr_assert(an_wait(c, a, 10000) && an_wait(c, b, 10000));
        if (c->code[a] == 0 && c->code[b] == 0)
            return;
        th_sleep_ms(50);
    }
    cr_assert_fail("not served again: %s", c->msg[c->next_id]);
}

Test(answer, every_completion_is_answered_once_on_nng_and_the_ring,
     .timeout = 120)
{
    static const char *const extra[] = {"--pin", "empty", NULL};
    th_env t;
    an_client c;
    uint64_t n, r;

    an_start(&t, extra);
    an_connect(&c, &t.d);
    an_ring_open(&c);

    /* Success. */
    n = an_launch(&c, AN_NNG, "empty:empty", 0);
    r = an_launch(&c, AN_RING, "empty:empty", 0);
    cr_assert(an_wait(&c, n, 10000) && an_wait(&c, r, 10000));
    cr_expect_eq(c.code[n], 0, "%s", c.msg[n]);
    cr_expect_eq(c.code[r], 0, "%s", c.msg[r]);

    /* Refusal by a check: no such kernel; arguments missing. */
    uint64_t refused[4] = {an_launch(&c, AN_NNG, "empty:nosuch", 0),
                           an_launch(&c, AN_RING, "empty:nosuch", 0),
                           an_launch(&c, AN_NNG, "vadd:vadd", 0),
                           an_launch(&c, AN_RING, "vadd:vadd", 0)};
    for (int i = 0; i < 4; i++) {
        cr_assert(an_wait(&c, refused[i], 10000));
        cr_expect_neq(c.code[refused[i]], 0, "refused");
    }
    an_fence(&c);
    an_expect_each_once(&c);

    /* The executor lost with work in flight on both transports. */
    pid_t exec = an_executor(&c);
    cr_assert_eq(th_write_file(t.fake_hold, "empty\n"), 0);
    n = an_launch(&c, AN_NNG, "empty:empty", 0);
    r = an_launch(&c, AN_RING, "empty:empty", 0);
    th_sleep_ms(200); /* in the executor, held */
    an_pump(&c);
    cr_expect_eq(c.count[n] + c.count[r], 0, "held launches wait");
    cr_assert_eq(kill(exec, SIGKILL), 0);
    cr_assert(an_wait(&c, n, 10000) && an_wait(&c, r, 10000));
    cr_expect_eq(c.code[n], CUMOD_ECTXLOST, "%s", c.msg[n]);
    cr_expect_eq(c.code[r], CUMOD_ECTXLOST, "%s", c.msg[r]);
    unlink(t.fake_hold);
    an_served_again(&c);
    an_fence(&c);
    an_expect_each_once(&c);

    /* A deadline: the late launch hears ETIMEDOUT, the one queued behind
     * it on the session's stream ECTXLOST (its executor was killed). */
    cr_assert_eq(th_write_file(t.fake_hold, "empty\n"), 0);
    n = an_launch(&c, AN_NNG, "empty:empty", 300);
    r = an_launch(&c, AN_RING, "empty:empty", 300);
    cr_assert(an_wait(&c, n, 10000) && an_wait(&c, r, 10000));
    cr_expect(c.code[n] == CUMOD_ETIMEDOUT || c.code[n] == CUMOD_ECTXLOST,
              "%d: %s", c.code[n], c.msg[n]);
    cr_expect(c.code[r] == CUMOD_ETIMEDOUT || c.code[r] == CUMOD_ECTXLOST,
              "%d: %s", c.code[r], c.msg[r]);
    cr_expect(c.code[n] == CUMOD_ETIMEDOUT || c.code[r] == CUMOD_ETIMEDOUT,
              "one of them ran past its deadline");
    unlink(t.fake_hold);
    an_fence(&c);
    an_expect_each_once(&c);
    an_close(&c);
    th_env_stop(&t);
}

Test(answer, a_fault_answers_each_request_in_flight_once, .timeout = 120)
{
    static const char *const extra[] = {"--pin", "empty", NULL};
    /* Every executor's first launch faults its context. */
    static const char *const env[] = {"CUMOD_FAKE_FAULT=launch:1", NULL};
    th_env t;
    an_client c;

    an_start_env(&t, extra, env);
    an_connect(&c, &t.d);
    an_ring_open(&c);
    uint64_t n = an_launch(&c, AN_NNG, "empty:empty", 0);
    uint64_t r = an_launch(&c, AN_RING, "empty:empty", 0);
    cr_assert(an_wait(&c, n, 10000) && an_wait(&c, r, 10000));
    cr_expect_neq(c.code[n], 0, "the faulting launch fails: %s", c.msg[n]);
    an_fence(&c);
    an_expect_each_once(&c);
    an_close(&c);
    th_env_stop(&t);
}

/* How the executor goes while cumodd drains its work at SIGTERM. */
typedef enum an_end {
    AN_END_NONE,         /* it does not: the drain times out */
    AN_END_AT_SIGTERM,   /* killed right after SIGTERM */
    AN_END_IN_DRAIN,     /* killed while the drain waits */
    AN_END_STUCK,        /* stopped, then killed by --stuck-timeout */
    AN_END_DEADLINE,     /* killed by the front at a launch's deadline */
    AN_END_EXITS_ITSELF, /* a fault ends it: it exits on its own */
} an_end;

/* Work held in flight on both transports, SIGTERM, the executor's end as
 * said: cumodd exits 0 and each launch hears one error. */
static void
an_shutdown(an_end end)
{
    const char *extra[] = {"--pin", "empty", "--drain-timeout", "5000", NULL,
                           NULL,    NULL};
    th_env t;
    an_client c;

    if (end == AN_END_NONE)
        extra[3] = "500"; /* the drain ends it */
    if (end == AN_END_STUCK) {
        extra[4] = "--stuck-timeout";
        extra[5] = "1000";
    }
    an_start(&t, extra);
    cr_assert_eq(th_write_file(t.fake_hold, "empty\n"), 0);
    an_connect(&c, &t.d);
    an_ring_open(&c);
    pid_t exec = an_executor(&c);
    unsigned deadline = end == AN_END_DEADLINE ? 1500 : 0;
    uint64_t n = an_launch(&c, AN_NNG, "empty:empty", deadline);
    uint64_t r = an_launch(&c, AN_RING, "empty:empty", deadline);
    uint64_t n2 = an_launch(&c, AN_NNG, "empty:empty", 0);
    /* More over nng: replies that arrive while this thread waits for
     * cumodd to exit, read only after. */
    enum { MORE = 6 };
    uint64_t more[MORE];
    for (int i = 0; i < MORE; i++)
        more[i] = an_launch(&c, AN_NNG, "empty:empty", 0);
    th_sleep_ms(200); /* in the executor, held */
    an_pump(&c);
    cr_assert_eq(c.count[n] + c.count[r] + c.count[n2], 0,
                 "held launches wait");
    for (int i = 0; i < MORE; i++)
        cr_assert_eq(c.count[more[i]], 0, "held launches wait");
    if (end == AN_END_STUCK)
        cr_assert_eq(kill(exec, SIGSTOP), 0);
    cr_assert_eq(kill(t.d.pid, SIGTERM), 0);
    switch (end) {
    case AN_END_AT_SIGTERM:
        cr_assert_eq(kill(exec, SIGKILL), 0);
        break;
    case AN_END_IN_DRAIN:
        th_sleep_ms(300);
        cr_assert_eq(kill(exec, SIGKILL), 0);
        break;
    case AN_END_EXITS_ITSELF:
        th_sleep_ms(300);
        cr_assert_eq(kill(exec, SIGSEGV), 0);
        break;
    default:
        break;
    }
    int rc = th_daemon_wait(&t.d, 20000);
    char *log = th_daemon_log(&t.d);
    cr_expect_eq(rc, 0, "cumodd exits 0 (got %d); its log:\n%s", rc,
                 log ? log : "");
    for (int i = 0; i < 3 + MORE; i++) {
        uint64_t id = i == 0 ? n : i == 1 ? r : i == 2 ? n2 : more[i - 3];
        cr_expect(an_wait(&c, id, 5000), "launch %d was answered; log:\n%s", i,
                  log ? log : "");
        cr_expect(c.code[id] == CUMOD_ESHUTDOWN ||
                      c.code[id] == CUMOD_ECTXLOST ||
                      c.code[id] == CUMOD_ETIMEDOUT,
                  "launch %d hears an error: %d %s", i, c.code[id], c.msg[id]);
    }
    free(log);
    if (end == AN_END_NONE)
        for (int i = 0; i < 3; i++) {
            uint64_t id = i == 0 ? n : i == 1 ? r : n2;
            cr_expect_eq(c.code[id], CUMOD_ESHUTDOWN, "%s", c.msg[id]);
        }
    th_sleep_ms(50);
    an_pump(&c);
    an_expect_each_once(&c);
    kill(exec, SIGKILL); /* in case it is still there */
    an_close(&c);
    cumod_close(t.c);
    t.c = NULL;
    th_daemon_stop(&t.d);
    th_rmtree(t.dir);
}

Test(answer, shutdown_answers_work_in_flight_once, .timeout = 60)
{
    an_shutdown(AN_END_NONE);
}

Test(answer, executor_killed_right_after_sigterm_exits_0, .timeout = 60)
{
    an_shutdown(AN_END_AT_SIGTERM);
}

Test(answer, executor_killed_during_the_drain_exits_0, .timeout = 60)
{
    an_shutdown(AN_END_IN_DRAIN);
}

Test(answer, executor_killed_by_stuck_timeout_during_the_drain_exits_0,
     .timeout = 60)
{
    an_shutdown(AN_END_STUCK);
}

Test(answer, executor_killed_at_a_deadline_during_the_drain_exits_0,
     .timeout = 60)
{
    an_shutdown(AN_END_DEADLINE);
}

Test(answer, executor_crashing_during_the_drain_exits_0, .timeout = 60)
{
    an_shutdown(AN_END_EXITS_ITSELF);
}
