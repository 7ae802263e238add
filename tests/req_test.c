/* SPDX-License-Identifier: MIT */
/*
 * The request object (daemon/front/transport/req.c) on its own and through the
 * ring's transport (daemon/front/transport/ring.c), without a daemon: what a
 * client relies on is that each request it sends gets exactly one reply, its
 * own, and that a second answer (a bug in cumodd) never reaches anyone. A
 * debug build (NDEBUG undefined, as CMAKE_BUILD_TYPE=Debug leaves it)
 * aborts on a second answer; a release build logs CUMOD-BUG and drops it.
 * Each test asserts the behaviour of the build it runs in. The nng
 * transport's twin is in server_test.c.
 *
 * For the ring, this file stands in for the front's dispatch: the rings
 * hand their requests to the callback given to cumod__rings_init, here
 * rq_on_request.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cumod.pb-c.h"
#include "cumod/errors.h"
#include "cumod_ring.h"
#include "front/front.h"
#include "front/transport/req.h"
#include "shm_ring.h"

/* Not linked with the test harness: libcumod, which it brings, has a
 * cumod__ring_open of its own. */
static void
rq_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

#ifdef NDEBUG /* only a release build logs a second answer and goes on */
/* --- the log ------------------------------------------------------------- */

/* stderr (the daemon's log) into a file, for the test to read. */
typedef struct rq_log {
    char path[300];
    int saved, fd;
} rq_log;

static void
rq_log_start(rq_log *l)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(l->path, sizeof(l->path), "%s/cumod-req-test-XXXXXX",
             tmp && tmp[0] ? tmp : "/tmp");
    l->fd = mkstemp(l->path);
    cr_assert(l->fd >= 0, "mkstemp: %s", strerror(errno));
    l->saved = dup(2);
    dup2(l->fd, 2);
}

/* What was logged; the caller frees it. */
static char *
rq_log_stop(rq_log *l)
{
    dup2(l->saved, 2);
    close(l->saved);
    char *text = calloc(1, 1 << 16);
    cr_assert_not_null(text);
    ssize_t n = pread(l->fd, text, (1 << 16) - 1, 0);
    cr_assert_geq(n, 0);
    close(l->fd);
    unlink(l->path);
    return text;
}
#endif

static void
rq_hello_reply(Cumod__Reply *reply, Cumod__HelloReply *hello, const char *note)
{
    Cumod__Reply r0 = CUMOD__REPLY__INIT;
    Cumod__HelloReply h0 = CUMOD__HELLO_REPLY__INIT;
    *reply = r0;
    *hello = h0;
    hello->daemon_version = (char *)note;
    reply->body_case = CUMOD__REPLY__BODY_HELLO;
    reply->hello = hello;
}

/* --- a transport of the test's own --------------------------------------- */

/* Counts what the object hands its transport. */
typedef struct rq_fake {
    cumod_req r;
    int sends, drops, hooks;
    uint64_t last_id;
    int last_code;
    char last_text[200];
    int last_body;
} rq_fake;

static cumod_err
rq_fake_send(cumod_req *r, const Cumod__Reply *reply)
{
    rq_fake *f = CUMOD_CONTAINER_OF(r, rq_fake, r);
    f->sends++;
    f->last_id = reply->id;
    f->last_code = reply->status ? reply->status->code : 0;
    snprintf(f->last_text, sizeof(f->last_text), "%s",
             reply->status ? reply->status->message : "");
    f->last_body = (int)reply->body_case;
    cr_expect_eq(reply->version, CUMOD__PROTOCOL_VERSION__PROTOCOL_VERSION_1);
    return CUMOD_OK;
}

static void
rq_fake_drop(cumod_req *r)
{
    CUMOD_CONTAINER_OF(r, rq_fake, r)->drops++;
}

static cumod_err
rq_fake_peer(const cumod_req *r, int *uid, int *gid, int *pid)
{
    (void)r;
    *uid = *gid = *pid = -1;
    return CUMOD_OK;
}

static const cumod_req_ops rq_fake_ops = {
    .name = "test",
    .send = rq_fake_send,
    .drop = rq_fake_drop,
    .peer = rq_fake_peer,
};

static void
rq_fake_hook(void *arg, cumod_req *r)
{
    (void)r;
    ((rq_fake *)arg)->hooks++;
}

static void
rq_fake_begin(rq_fake *f, uint64_t id)
{
    memset(f, 0, sizeof(*f));
    cumod__req_begin(&f->r, &rq_fake_ops);
    f->r.id = id;
    f->r.pipe_id = 3;
    f->r.answered = rq_fake_hook;
    f->r.answered_arg = f;
}

Test(req, one_answer_builds_the_reply_once_for_its_transport)
{
    rq_fake f;
    Cumod__Reply body;
    Cumod__HelloReply hello;

    rq_fake_begin(&f, 77);
    rq_hello_reply(&body, &hello, "x");
    cr_assert_eq(cumod__req_answer(&f.r, CUMOD_OK, NULL, &body), CUMOD_OK);
    cr_expect_eq(f.sends, 1);
    cr_expect_eq(f.hooks, 1, "the session's count hears it once");
    cr_expect_eq(f.last_id, 77, "the request's own id");
    cr_expect_eq(f.last_code, 0);
    cr_expect_eq(f.last_body, CUMOD__REPLY__BODY_HELLO);

    /* A refusal carries its status (and a body when given). */
    rq_fake_begin(&f, 78);
    cr_assert_eq(cumod__req_failf(&f.r, CUMOD_EINVAL, "argument %d", 2),
                 CUMOD_OK);
    cr_expect_eq(f.sends, 1);
    cr_expect_eq(f.last_id, 78);
    cr_expect_eq(f.last_code, CUMOD_EINVAL);
    cr_expect(strstr(f.last_text, "argument 2"), "%s", f.last_text);

    /* A drop sends nothing and counts as the answer. */
    rq_fake_begin(&f, 79);
    cumod__req_drop(&f.r);
    cr_expect_eq(f.sends, 0);
    cr_expect_eq(f.drops, 1);
    cr_expect_eq(f.hooks, 1);
}

#ifdef NDEBUG
Test(req, a_second_answer_is_logged_and_never_sent)
{
    rq_fake f;
    rq_log l;

    rq_log_start(&l);
    rq_fake_begin(&f, 41);
    cr_assert_eq(cumod__req_answer(&f.r, CUMOD_OK, NULL, NULL), CUMOD_OK);
    cr_expect_eq(cumod__req_failf(&f.r, CUMOD_EIO, "the second answer"),
                 CUMOD_EINTERNAL);
    cumod__req_drop(&f.r); /* and a drop after the answer */
    /* Reused by its transport: a new request, answered once again. */
    cumod__req_begin(&f.r, &rq_fake_ops);
    f.r.id = 42;
    cr_expect_eq(cumod__req_answer(&f.r, CUMOD_OK, NULL, NULL), CUMOD_OK);
    char *log = rq_log_stop(&l);
    cr_expect_eq(f.sends, 2, "one reply per request, no more");
    cr_expect_eq(f.drops, 0);
    cr_expect_eq(f.hooks, 1);
    cr_expect_eq(f.last_id, 42);
    cr_expect(strstr(log, "CUMOD-BUG") &&
                  strstr(log, "a second answer to request 41 of connection 3 "
                              "(test) was refused") &&
                  strstr(log, "the second answer"),
              "logged, with what was refused:\n%s", log);
    cr_expect(strstr(log, "a drop of request 41"), "%s", log);
    free(log);
}
#else
Test(req, a_second_answer_aborts_a_debug_build, .signal = SIGABRT)
{
    rq_fake f;
    rq_fake_begin(&f, 41);
    cr_assert_eq(cumod__req_answer(&f.r, CUMOD_OK, NULL, NULL), CUMOD_OK);
    cumod__req_failf(&f.r, CUMOD_EIO, "the second answer");
    cr_assert_fail("a debug build stops at a second answer");
}

Test(req, a_drop_after_the_answer_aborts_a_debug_build, .signal = SIGABRT)
{
    rq_fake f;
    rq_fake_begin(&f, 41);
    cr_assert_eq(cumod__req_answer(&f.r, CUMOD_OK, NULL, NULL), CUMOD_OK);
    cumod__req_drop(&f.r);
    cr_assert_fail("a debug build stops at a drop after the answer");
}
#endif

/* --- the ring's transport ------------------------------------------------ */

/* The test's front: a loop, the rings, and what the stand-in dispatch
 * does with each request, by the Hello's client string:
 *   "park"   kept unanswered (on parked)
 *   "twice"  answered twice (the second must be refused)
 *   anything else: answered at once */
typedef struct rq_ring_env {
    cumod_front f;
    cumod_config cfg;
    cumod_ring *g;
    char name[96], bell[128];
    uint8_t *map;
    size_t len;
    cumod_ring_hdr *h;
    uint8_t *sq, *cq;
    int bell_fd;
    cumod_list parked;
    int second_rv;
    int count[64]; /* replies seen, by request id */
    int code[64];
    char note[64][32];
} rq_ring_env;

#define RQ_SQ ((uint64_t)64 << 10)
#define RQ_CQ ((uint64_t)64 << 10)

static void
rq_answer_hello(cumod_req *r, const char *note)
{
    Cumod__Reply reply;
    Cumod__HelloReply hello;
    rq_hello_reply(&reply, &hello, note);
    cumod__req_answer(r, CUMOD_OK, NULL, &reply);
}

/* The stand-in for dispatch.c (see the top of the file). */
static void
rq_on_request(void *arg, cumod_req *r)
{
    rq_ring_env *e = CUMOD_CONTAINER_OF((cumod_front *)arg, rq_ring_env, f);
    const char *what =
        r->msg->body_case == CUMOD__REQUEST__BODY_HELLO && r->msg->hello->client
            ? r->msg->hello->client
            : "";
    if (strcmp(what, "park") == 0) {
        cumod__list_append(&e->parked, &r->link);
    } else if (strcmp(what, "twice") == 0) {
        rq_answer_hello(r, "first");
        e->second_rv = cumod__req_failf(r, CUMOD_EIO, "the second answer");
    } else {
        rq_answer_hello(r, "at once");
    }
}

static void
rq_ring_start(rq_ring_env *e)
{
    cumod_status st;

    memset(e, 0, sizeof(*e));
    cumod__list_init(&e->parked);
    e->cfg.busy_poll_us = 0;
    e->f.cfg = &e->cfg;
    cr_assert_eq(uv_loop_init(&e->f.loop), 0);
    cumod__rings_init(&e->f.rings, &e->f.loop, &e->cfg, rq_on_request, &e->f);

    tr_ring rg;
    tr_make(&rg, "cumod-reqtest", CUMOD_RING_HDR_SIZE + RQ_SQ + RQ_CQ, RQ_SQ,
            RQ_CQ, 1);
    TR_ADOPT(e, rg);

    Cumod__OpenRing q = CUMOD__OPEN_RING__INIT;
    q.name = e->name;
    q.size = e->len;
    cr_assert_eq(cumod__ring_open(&e->f.rings, NULL, &q, 5, (int)getuid(),
                                  (int)getgid(), (int)getpid(), &e->g, &st),
                 CUMOD_OK, "%s", st.msg);
}

/* A Hello with client string what, id id, into sq; the doorbell rung. */
static void
rq_ring_send(rq_ring_env *e, uint64_t id, const char *what)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__Hello hello = CUMOD__HELLO__INIT;
    hello.client = (char *)what;
    req.version = CUMOD__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    req.id = id;
    req.body_case = CUMOD__REQUEST__BODY_HELLO;
    req.hello = &hello;
    size_t n = cumod__request__get_packed_size(&req);
    uint64_t tail = atomic_load(&e->h->sq_tail);
    uint64_t off = tail & (RQ_SQ - 1);
    cr_assert_geq(RQ_SQ - off, cumod_ring_rec_space(n), "no wrap here");
    cumod_ring_rec rec = {.len = (uint32_t)n, .kind = CUMOD_RING_REC_MSG};
    memcpy(e->sq + off, &rec, sizeof(rec));
    cumod__request__pack(&req, e->sq + off + sizeof(rec));
    atomic_store(&e->h->sq_tail, tail + cumod_ring_rec_space(n));
    char b = 1;
    cr_assert_eq(write(e->bell_fd, &b, 1), 1);
}

/* Reads every record in cq into the counts. */
static void
rq_ring_read(rq_ring_env *e)
{
    for (;;) {
        uint64_t tail = atomic_load(&e->h->cq_tail);
        uint64_t head = atomic_load(&e->h->cq_head);
        if (tail == head)
            return;
        cumod_ring_rec rec;
        uint64_t off = head & (RQ_CQ - 1);
        memcpy(&rec, e->cq + off, sizeof(rec));
        cr_assert_eq(rec.kind, CUMOD_RING_REC_MSG);
        Cumod__Reply *rep =
            cumod__reply__unpack(NULL, rec.len, e->cq + off + sizeof(rec));
        cr_assert_not_null(rep);
        cr_assert_lt(rep->id, 64, "a reply to id %llu, never sent",
                     (unsigned long long)rep->id);
        e->count[rep->id]++;
        e->code[rep->id] = rep->status ? rep->status->code : 0;
        snprintf(e->note[rep->id], sizeof(e->note[0]), "%s",
                 rep->hello ? rep->hello->daemon_version : "");
        cumod__reply__free_unpacked(rep, NULL);
        atomic_store(&e->h->cq_head, head + cumod_ring_rec_space(rec.len));
    }
}

/* Runs the loop until the ring has taken everything written to sq. */
static void
rq_ring_turn(rq_ring_env *e)
{
    for (int i = 0; i < 5000; i++) {
        uv_run(&e->f.loop, UV_RUN_NOWAIT);
        if (atomic_load(&e->h->sq_head) == atomic_load(&e->h->sq_tail))
            break;
        rq_sleep_ms(1);
    }
    cr_assert_eq(atomic_load(&e->h->sq_head), atomic_load(&e->h->sq_tail),
                 "the ring took its records");
    uv_run(&e->f.loop, UV_RUN_NOWAIT);
    rq_ring_read(e);
}

static void
rq_ring_stop(rq_ring_env *e)
{
    for (cumod_list_node *n; (n = cumod__list_pop(&e->parked)) != NULL;)
        rq_answer_hello(CUMOD_CONTAINER_OF(n, cumod_req, link), "released");
    cumod__ring_close(e->g);
    cumod__rings_close(&e->f.rings);
    uv_run(&e->f.loop, UV_RUN_DEFAULT);
    cr_expect_eq(uv_loop_close(&e->f.loop), 0, "no handle left open");
    munmap(e->map, e->len);
    close(e->bell_fd);
    shm_unlink(e->name);
    unlink(e->bell);
}

Test(req, each_ring_request_gets_its_own_reply_once)
{
    rq_ring_env e;

    rq_ring_start(&e);
    rq_ring_send(&e, 1, "hello");
    rq_ring_send(&e, 2, "park");
    rq_ring_send(&e, 3, "park");
    rq_ring_send(&e, 4, "hello");
    rq_ring_turn(&e);
    cr_expect_eq(e.count[1], 1);
    cr_expect_eq(e.count[4], 1);
    cr_expect_eq(e.count[2] + e.count[3], 0, "parked ones wait");
    /* Answered later, in another order; the pool hands their memory to
     * the next requests, which get their own replies. */
    cumod_req *p2 =
        CUMOD_CONTAINER_OF(cumod__list_pop(&e.parked), cumod_req, link);
    cumod_req *p3 =
        CUMOD_CONTAINER_OF(cumod__list_pop(&e.parked), cumod_req, link);
    cr_assert_eq(p2->msg->id, 2);
    cr_assert_eq(p3->msg->id, 3);
    rq_answer_hello(p3, "third");
    rq_answer_hello(p2, "second");
    rq_ring_send(&e, 5, "hello");
    rq_ring_send(&e, 6, "hello");
    rq_ring_turn(&e);
    for (int id = 1; id <= 6; id++)
        cr_expect_eq(e.count[id], 1, "request %d: %d replies", id, e.count[id]);
    cr_expect_str_eq(e.note[2], "second");
    cr_expect_str_eq(e.note[3], "third");
    rq_ring_stop(&e);
}

#ifdef NDEBUG
Test(req, a_second_answer_on_the_ring_is_logged_and_never_sent)
{
    rq_ring_env e;
    rq_log l;

    rq_ring_start(&e);
    rq_log_start(&l);
    rq_ring_send(&e, 1, "twice");
    rq_ring_turn(&e);
    /* The request that takes its pooled memory next gets its own reply;
     * so does a stale answer to one already answered, never. */
    rq_ring_send(&e, 2, "park");
    rq_ring_turn(&e);
    cumod_req *p =
        CUMOD_CONTAINER_OF(cumod__list_pop(&e.parked), cumod_req, link);
    rq_answer_hello(p, "parked");
    cr_expect_eq(cumod__req_failf(p, CUMOD_EIO, "stale"), CUMOD_EINTERNAL);
    rq_ring_send(&e, 3, "hello");
    rq_ring_turn(&e);
    char *log = rq_log_stop(&l);
    cr_expect_eq(e.second_rv, CUMOD_EINTERNAL);
    cr_expect_eq(e.count[1], 1, "one reply: %d", e.count[1]);
    cr_expect_eq(e.code[1], 0, "the first answer is the one sent");
    cr_expect_str_eq(e.note[1], "first");
    cr_expect_eq(e.count[0], 0, "no reply without its request's id");
    cr_expect_eq(e.count[2], 1);
    cr_expect_str_eq(e.note[2], "parked");
    cr_expect_eq(e.count[3], 1);
    cr_expect(strstr(log, "CUMOD-BUG") &&
                  strstr(log, "a second answer to request 1 of connection 5 "
                              "(ring) was refused"),
              "%s", log);
    cr_expect(strstr(log, "request 2 of connection 5 (ring)"), "%s", log);
    free(log);
    rq_ring_stop(&e);
}
#else
Test(req, a_second_answer_on_the_ring_aborts_a_debug_build, .signal = SIGABRT)
{
    rq_ring_env e;

    rq_ring_start(&e);
    /* This process ends in abort(), never in rq_ring_stop: its ring's
     * names go now (both ends hold what they opened). */
    shm_unlink(e.name);
    unlink(e.bell);
    rq_ring_send(&e, 1, "twice");
    rq_ring_turn(&e);
    cr_assert_fail("a debug build stops at a second answer");
}
#endif
