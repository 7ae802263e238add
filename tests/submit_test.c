/* SPDX-License-Identifier: MIT */
/*
 * The executor's submission threads (daemon/exec/submit.h) with a handler
 * the test holds: a thread's queue that fills (in commands or in bytes)
 * holds the one posting until the thread takes work, loses nothing and
 * keeps each thread's order; a full queue does not stop another thread
 * from running what it was given; a stop runs what was posted first. The
 * daemon suites (many_clients_test, data_test) fill the channel behind
 * one busy thread; here one of several threads is held on purpose.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/exec.h"
#include "exec/submit.h"

#define ST_THREADS 3

typedef struct st_state {
    _Atomic int gate;     /* run() waits while set */
    _Atomic int in_run;   /* a command is inside run() */
    _Atomic uint64_t ran; /* commands run */
    _Atomic uint64_t bad; /* out of order, or bytes not as posted */
    uint64_t next;        /* the seq the next must carry */
    _Atomic uint64_t dones;
    _Atomic uint64_t ages;
} st_state;

static st_state st[ST_THREADS];

static CUresult
st_ctx_set_current(CUcontext c)
{
    (void)c;
    return CUDA_SUCCESS;
}

static void
st_nap_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* The payload of command seq: len bytes of seq's low byte. */
static int
st_run(cumod_exec *ex, const cumod_chan_hdr *hdr, const void *payload,
       size_t len, int fd, void *aux)
{
    st_state *s = aux;
    const unsigned char *p = payload;

    (void)ex;
    (void)fd;
    atomic_store(&s->in_run, 1);
    while (atomic_load(&s->gate))
        st_nap_us(200);
    atomic_store(&s->in_run, 0);
    int ok = hdr->seq == s->next && hdr->len == len;
    for (size_t i = 0; ok && i < len; i++)
        ok = p[i] == (unsigned char)hdr->seq;
    if (!ok)
        atomic_fetch_add(&s->bad, 1);
    s->next = hdr->seq + 1;
    atomic_fetch_add(&s->ran, 1);
    return 0;
}

static int
st_done(cumod_exec *ex, void *aux)
{
    (void)ex;
    atomic_fetch_add(&((st_state *)aux)->dones, 1);
    return 0;
}

static int
st_age(cumod_exec *ex, void *aux)
{
    (void)ex;
    atomic_fetch_add(&((st_state *)aux)->ages, 1);
    return 0;
}

static cumod_exec st_ex;

static cumod_submit *
st_start(void)
{
    static const cumod_submit_ops ops = {
        .run = st_run, .done = st_done, .age = st_age};
    void *aux[ST_THREADS];
    cumod_submit *sb = NULL;

    memset(st, 0, sizeof(st));
    memset(&st_ex, 0, sizeof(st_ex));
    st_ex.drv.ctx_set_current = st_ctx_set_current;
    for (int i = 0; i < ST_THREADS; i++)
        aux[i] = &st[i];
    cr_assert_eq(cumod__submit_start(&st_ex, ST_THREADS, &ops, aux, &sb),
                 CUMOD_OK);
    return sb;
}

/* One dispatcher posting n commands of len bytes to one thread. */
typedef struct st_poster {
    cumod_submit *sb;
    unsigned thread;
    uint64_t n;
    size_t len;
    _Atomic uint64_t posted;
    int err;
} st_poster;

static void *
st_post_main(void *arg)
{
    st_poster *po = arg;
    unsigned char *buf = malloc(po->len ? po->len : 1);

    for (uint64_t k = 0; k < po->n; k++) {
        cumod_chan_hdr h = {.op = 1, .seq = k, .len = po->len};
        memset(buf, (unsigned char)k, po->len);
        if (cumod__submit_post(po->sb, po->thread, &h, buf, po->len) !=
            CUMOD_OK)
            po->err++;
        atomic_store(&po->posted, k + 1);
    }
    free(buf);
    return NULL;
}

/* posted, once it has stayed the same for ms. */
static uint64_t
st_settled(st_poster *po, int ms)
{
    uint64_t last = atomic_load(&po->posted);
    for (int still = 0; still < ms; still += 10) {
        st_nap_us(10000);
        uint64_t now = atomic_load(&po->posted);
        if (now != last) {
            last = now;
            still = 0;
        }
    }
    return last;
}

static void
st_wait_in_run(unsigned i)
{
    for (int k = 0; k < 5000 && !atomic_load(&st[i].in_run); k++)
        st_nap_us(1000);
    cr_assert(atomic_load(&st[i].in_run), "thread %u took its first command",
              i);
}

Test(submit, a_full_queue_holds_the_poster_and_loses_nothing, .timeout = 60)
{
    enum { EXTRA = 300 };
    cumod_submit *sb = st_start();
    pthread_t th;

    /* Thread 0 is held in its first command; the poster fills its queue. */
    atomic_store(&st[0].gate, 1);
    st_poster po = {
        .sb = sb, .thread = 0, .n = CUMOD_SUBMIT_QUEUE_JOBS + EXTRA, .len = 16};
    cr_assert_eq(pthread_create(&th, NULL, st_post_main, &po), 0);
    st_wait_in_run(0);
    uint64_t held = st_settled(&po, 300);
    cr_expect_eq(held, CUMOD_SUBMIT_QUEUE_JOBS + 1,
                 "one command taken and %d queued, then the poster waits "
                 "(%llu posted)",
                 CUMOD_SUBMIT_QUEUE_JOBS, (unsigned long long)held);
    cr_expect_eq(atomic_load(&st[0].ran), 0);

    /* Another thread's queue is its own: its commands run meanwhile. */
    st_poster other = {.sb = sb, .thread = 1, .n = 500, .len = 100};
    st_post_main(&other);
    for (int k = 0; k < 5000 && atomic_load(&st[1].ran) < 500; k++)
        st_nap_us(1000);
    cr_expect_eq(atomic_load(&st[1].ran), 500,
                 "thread 1 ran its commands while thread 0's queue was full");

    /* Let go: every command runs, in the order posted, bytes intact. */
    atomic_store(&st[0].gate, 0);
    pthread_join(th, NULL);
    cr_expect_eq(po.err, 0);
    cumod__submit_quiesce(sb);
    cr_expect_eq(atomic_load(&st[0].ran), CUMOD_SUBMIT_QUEUE_JOBS + EXTRA);
    cr_expect_eq(atomic_load(&st[0].bad), 0, "in order and as posted");
    cr_expect_eq(atomic_load(&st[1].bad), 0);
    cr_expect_eq(atomic_load(&st[0].ages), CUMOD_SUBMIT_QUEUE_JOBS + EXTRA,
                 "aged after each command");
    cr_expect_geq(atomic_load(&st[0].dones), 1, "done() once it ran dry");
    cr_expect_eq(atomic_load(&st[2].ran), 0, "thread 2 was given nothing");
    cumod__submit_stop(sb);
}

Test(submit, a_queue_full_of_bytes_holds_the_poster, .timeout = 60)
{
    enum { MIB = 1 << 20 };
    cumod_submit *sb = st_start();
    pthread_t th;

    /* 1 MiB commands: the first taken, then four fill the 4 MiB bound. */
    atomic_store(&st[0].gate, 1);
    st_poster po = {.sb = sb, .thread = 0, .n = 12, .len = MIB};
    cr_assert_eq(pthread_create(&th, NULL, st_post_main, &po), 0);
    st_wait_in_run(0);
    uint64_t held = st_settled(&po, 300);
    cr_expect_eq(held, 1 + CUMOD_SUBMIT_QUEUE_BYTES / MIB,
                 "one taken and %zu MiB queued, then the poster waits (%llu "
                 "posted)",
                 CUMOD_SUBMIT_QUEUE_BYTES / MIB, (unsigned long long)held);

    /* An empty queue takes one command over the bound. */
    st_poster big = {
        .sb = sb, .thread = 1, .n = 2, .len = CUMOD_SUBMIT_QUEUE_BYTES + MIB};
    st_post_main(&big);
    for (int k = 0; k < 5000 && atomic_load(&st[1].ran) < 2; k++)
        st_nap_us(1000);
    cr_expect_eq(atomic_load(&st[1].ran), 2,
                 "commands larger than the bound, one at a time");

    atomic_store(&st[0].gate, 0);
    pthread_join(th, NULL);
    cumod__submit_quiesce(sb);
    cr_expect_eq(atomic_load(&st[0].ran), 12);
    cr_expect_eq(atomic_load(&st[0].bad), 0);
    cr_expect_eq(atomic_load(&st[1].bad), 0);
    cumod__submit_stop(sb);
}

Test(submit, every_thread_keeps_its_order_under_one_dispatcher, .timeout = 60)
{
    enum { N = 60000 };
    cumod_submit *sb = st_start();
    uint64_t seq[ST_THREADS] = {0};
    unsigned char byte[ST_THREADS][64];

    /* One dispatcher, as the executor's: commands spread over the threads
     * in a pattern that changes, queues filling and draining. */
    srand(7);
    for (int k = 0; k < N; k++) {
        unsigned i = (unsigned)rand() % ST_THREADS;
        size_t len = (size_t)(rand() % 64);
        cumod_chan_hdr h = {.op = 1, .seq = seq[i], .len = len};
        memset(byte[i], (unsigned char)seq[i], len);
        cr_assert_eq(cumod__submit_post(sb, i, &h, byte[i], len), CUMOD_OK);
        seq[i]++;
        if (k % 5000 == 0)
            cumod__submit_quiesce(sb);
    }
    cumod__submit_quiesce(sb);
    for (unsigned i = 0; i < ST_THREADS; i++) {
        cr_expect_eq(atomic_load(&st[i].ran), seq[i], "thread %u ran all", i);
        cr_expect_eq(atomic_load(&st[i].bad), 0, "thread %u in order", i);
    }
    cumod__submit_stop(sb);
}

Test(submit, a_stop_runs_what_was_posted_first, .timeout = 60)
{
    cumod_submit *sb = st_start();
    pthread_t th;

    atomic_store(&st[0].gate, 1);
    st_poster po = {.sb = sb, .thread = 0, .n = 1000, .len = 8};
    cr_assert_eq(pthread_create(&th, NULL, st_post_main, &po), 0);
    st_wait_in_run(0);
    pthread_join(th, NULL);
    atomic_store(&st[0].gate, 0);
    cumod__submit_stop(sb);
    cr_expect_eq(atomic_load(&st[0].ran), 1000);
    cr_expect_eq(atomic_load(&st[0].bad), 0);
    cr_expect_geq(atomic_load(&st[0].dones), 1, "done() ran last");
}
