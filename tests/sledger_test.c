/* SPDX-License-Identifier: MIT */
/*
 * The sessions' ledger (daemon/front/state/sledger.c, issue 34 piece 1):
 * the session store writes every change into it, and a replay gives back
 * the sessions as they were: buffers, segments, streams, workspaces,
 * places; closed sessions and freed handles gone. Cut at any byte it
 * replays to a consistent earlier state; compaction keeps it bounded and
 * hands the new ledger on; records that make no sense are refused with
 * where.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/ledger.h"
#include "front/state/session.h"
#include "front/state/sledger.h"

typedef struct sl {
    cumod_sessions ss;
    cumod_sledger lg;
} sl;

static void
sl_open(sl *t)
{
    cumod_status st;
    cumod__sessions_init(&t->ss);
    cr_assert_eq(cumod__sledger_open(&t->lg, &t->ss, &st), CUMOD_OK, "%s",
                 st.msg);
}

static void
sl_close(sl *t)
{
    cumod__sessions_fini(&t->ss, NULL);
    cumod__sledger_close(&t->lg);
}

static cumod_session *
sl_session(sl *t, uint32_t id, int pid, const char *domain, int device)
{
    cumod_session *s;
    cr_assert_eq(cumod__sessions_add(&t->ss, id, 1000 + (int)id, 100, pid, &s),
                 CUMOD_OK);
    snprintf(s->domain, sizeof(s->domain), "%s", domain);
    s->device = device;
    cumod__session_placed(s);
    return s;
}

/* A replay of fd into a fresh store (*out, the caller finishes it): its
 * status. */
static cumod_err
sl_replay(int fd, cumod_sessions *out, uint64_t *n, char *why, size_t wl)
{
    cumod_status st = {0};
    cumod__sessions_init(out);
    cumod_err rv = cumod__sledger_replay(fd, out, n, why, wl, &st);
    if (rv != CUMOD_OK)
        snprintf(why, wl, "%.200s", st.msg);
    return rv;
}

/* A buffer as the front makes one: its bytes reserved, then added. */
static cumod_buf *
sl_buf(cumod_session *s, uint64_t size, uint64_t dptr)
{
    cumod_status st;
    cumod_buf *b;
    cr_assert_eq(cumod__session_reserve(s, size, 0, &st), CUMOD_OK);
    cr_assert_eq(cumod__session_buf_add(s, size, dptr, &b), CUMOD_OK);
    return b;
}

static size_t
sl_count(cumod_sessions *ss)
{
    size_t cur = 0, n = 0;
    while (cumod__sessions_next(ss, &cur) != NULL)
        n++;
    return n;
}

Test(sledger, a_replay_gives_back_what_the_sessions_hold)
{
    sl t;
    sl_open(&t);
    cumod_session *a = sl_session(&t, 7, 4242, "tenant-a", 1);
    cumod_session *b = sl_session(&t, 9, 4343, "default", 0);
    cumod_buf *b1 = sl_buf(a, 4096, 0x7000000000),
              *b2 = sl_buf(a, 8192, 0x7000010000),
              *b3 = sl_buf(a, 512, 0x7000020000);
    uint64_t h1 = b1->handle, h3 = b3->handle;
    cumod__session_buf_remove(a, b2); /* freed: not replayed */
    cumod_seg *g;
    cr_assert_eq(cumod__session_seg_add(a, 1 << 20, 0x600000000000ull,
                                        "/cumod-seg-x", &g),
                 CUMOD_OK);
    cumod_sstream *s1, *s2;
    cr_assert_eq(cumod__session_stream_add(a, &s1), CUMOD_OK);
    cr_assert_eq(cumod__session_stream_add(a, &s2), CUMOD_OK);
    uint64_t key2 = s2->key, sh2 = s2->handle;
    cumod_status st;
    cr_assert_eq(cumod__session_reserve(a, 36 << 20, 0, &st), CUMOD_OK);
    s2->ws_bytes = 32 << 20;
    cumod__session_ws_charged(a, s2);
    a->default_ws_bytes = 4 << 20;
    cumod__session_ws_charged(a, NULL);
    cumod__session_stream_remove(a, s1);
    (void)sl_buf(b, 100, 0x7100000000);
    cumod__session_free(cumod__sessions_take(&t.ss, 9), NULL); /* closed */
    (void)b;

    cumod_sessions r;
    uint64_t n = 0;
    char why[256] = "";
    cr_assert_eq(sl_replay(t.lg.l.fd, &r, &n, why, sizeof(why)), CUMOD_OK, "%s",
                 why);
    cr_expect_str_empty(why, "every record good: %s", why);
    cr_expect_eq(sl_count(&r), 1, "the closed session is gone");
    cumod_session *x = cumod__sessions_get(&r, 7);
    cr_assert_not_null(x);
    cr_expect_eq(x->pid, 4242);
    cr_expect_eq(x->uid, 1007);
    cr_expect_eq(x->gid, 100);
    cr_expect_str_eq(x->domain, "tenant-a");
    cr_expect_eq(x->device, 1);
    cr_expect_eq(cumod__idmap_count(&x->bufs), 2, "two buffers live");
    cumod_buf *y = cumod__session_buf(x, h1);
    cr_assert_not_null(y);
    cr_expect_eq(y->size, 4096);
    cr_expect_eq(y->dptr, 0x7000000000);
    cr_expect_not_null(cumod__session_buf(x, h3));
    cumod_seg *yg = cumod__session_seg(x, g->handle);
    cr_assert_not_null(yg);
    cr_expect_str_eq(yg->name, "/cumod-seg-x");
    cr_expect_eq(yg->host, 0x600000000000ull);
    cr_expect_eq(cumod__idmap_count(&x->streams), 1, "one stream live");
    cumod_sstream *ys = cumod__session_stream(x, sh2);
    cr_assert_not_null(ys);
    cr_expect_eq(ys->key, key2, "the executor's key kept");
    cr_expect_eq(ys->ws_bytes, 32 << 20);
    cr_expect_eq(x->default_ws_bytes, 4 << 20);
    cr_expect_eq(x->mem_used, a->mem_used, "accounting: %llu against %llu",
                 (unsigned long long)x->mem_used,
                 (unsigned long long)a->mem_used);
    /* New handles never reuse a replayed one. */
    cumod_buf *nb = sl_buf(x, 1, 0x1);
    cr_expect_gt(nb->handle, sh2, "handle %llu after %llu",
                 (unsigned long long)nb->handle, (unsigned long long)sh2);
    cumod_sstream *ns;
    cr_assert_eq(cumod__session_stream_add(x, &ns), CUMOD_OK);
    cr_expect_neq(ns->key, key2, "a new stream gets a new key");
    cumod__sessions_fini(&r, NULL);
    sl_close(&t);
}

/* A front killed at any byte of a record leaves a ledger that replays to
 * the sessions as they were at some earlier record. */
Test(sledger, cut_anywhere_it_replays_an_earlier_state)
{
    sl t;
    sl_open(&t);
    cumod_session *a = sl_session(&t, 3, 11, "default", 0);
    for (int i = 0; i < 6; i++)
        (void)sl_buf(a, 256u << i, 0x9000 + i);
    size_t len = t.lg.l.len;
    const uint8_t *all = t.lg.l.map;
    size_t prev_bufs = 0, cuts = 0;
    for (size_t cut = 0; cut <= len; cut++) {
        int fd = memfd_create("sledger-cut", MFD_CLOEXEC);
        cr_assert_geq(fd, 0);
        cr_assert_eq(write(fd, all, cut), (ssize_t)cut);
        cumod_sessions r;
        uint64_t n = 0;
        char why[256] = "";
        cumod_err rv = sl_replay(fd, &r, &n, why, sizeof(why));
        if (rv == CUMOD_OK) {
            cumod_session *x = cumod__sessions_get(&r, 3);
            size_t nb = x ? cumod__idmap_count(&x->bufs) : 0;
            cr_expect_geq(nb, prev_bufs, "cut at %zu: no going back", cut);
            prev_bufs = nb;
            cuts++;
        } else {
            cr_expect_lt(cut, 64, "only a cut header is no ledger (%zu): %s",
                         cut, why);
        }
        cumod__sessions_fini(&r, NULL);
        close(fd);
    }
    cr_expect_eq(prev_bufs, 6, "the whole ledger: every buffer");
    cr_expect_gt(cuts, len / 2);
    sl_close(&t);
}

static int sl_new_calls, sl_new_fd = -1;

static void
sl_on_new(void *arg, int fd)
{
    (void)arg;
    sl_new_calls++;
    sl_new_fd = fd;
}

/* Buffers made and freed for ever: the ledger is compacted, stays small,
 * and the new one (handed on) holds the live sessions only. */
Test(sledger, compaction_keeps_it_bounded_and_hands_it_on)
{
    sl t;
    sl_open(&t);
    t.lg.min = 4096;
    t.lg.on_new = sl_on_new;
    cumod_session *a = sl_session(&t, 5, 55, "default", 0);
    cumod_buf *keep, *b;
    cr_assert_eq(cumod__session_buf_add(a, 1 << 20, 0xabc000, &keep), CUMOD_OK);
    size_t most = 0;
    for (int i = 0; i < 20000; i++) {
        cr_assert_eq(cumod__session_buf_add(a, 64, 0x100000 + i, &b), CUMOD_OK);
        cumod__session_buf_remove(a, b);
        most = t.lg.l.len > most ? t.lg.l.len : most;
    }
    cr_expect_gt(t.lg.compactions, 10, "compacted %llu times",
                 (unsigned long long)t.lg.compactions);
    cr_expect_eq(sl_new_calls, (int)t.lg.compactions);
    cr_expect_eq(sl_new_fd, t.lg.l.fd, "the new ledger was handed on");
    cr_expect_lt(most, 64 << 10, "at most %zu bytes", most);
    cumod_sessions r;
    uint64_t n = 0;
    char why[256] = "";
    cr_assert_eq(sl_replay(t.lg.l.fd, &r, &n, why, sizeof(why)), CUMOD_OK, "%s",
                 why);
    cumod_session *x = cumod__sessions_get(&r, 5);
    cr_assert_not_null(x);
    cr_expect_eq(cumod__idmap_count(&x->bufs), 1, "only the kept buffer");
    cr_expect_not_null(cumod__session_buf(x, keep->handle));
    cumod__sessions_fini(&r, NULL);
    sl_close(&t);
}

/* Records that make no sense: a buffer of a session never opened, a
 * buffer freed twice. Refused, saying which record. */
Test(sledger, records_that_make_no_sense_are_refused_with_where)
{
    cumod_ledger l;
    cumod_status st;
    cr_assert_eq(cumod__ledger_create(&l, "sledger-bad", 4096, &st), CUMOD_OK);
    cumod_slr_buf bu = {.id = 77, .handle = 1, .size = 8, .dptr = 1};
    cr_assert_eq(cumod__ledger_append(&l, CUMOD_SLR_BUF, &bu, sizeof(bu), &st),
                 CUMOD_OK);
    cumod_sessions r;
    uint64_t n;
    char why[256] = "";
    cr_expect_eq(sl_replay(l.fd, &r, &n, why, sizeof(why)), CUMOD_EPROTO);
    cr_expect_not_null(strstr(why, "record 1: a session never opened"), "%s",
                       why);
    cumod__sessions_fini(&r, NULL);
    cumod__ledger_close(&l);

    cr_assert_eq(cumod__ledger_create(&l, "sledger-bad", 4096, &st), CUMOD_OK);
    cumod_slr_open op = {.id = 77, .uid = 1, .gid = 1, .pid = 1};
    cumod_slr_handle del = {.id = 77, .handle = 1};
    cr_assert_eq(cumod__ledger_append(&l, CUMOD_SLR_OPEN, &op, sizeof(op), &st),
                 CUMOD_OK);
    cr_assert_eq(cumod__ledger_append(&l, CUMOD_SLR_BUF, &bu, sizeof(bu), &st),
                 CUMOD_OK);
    cr_assert_eq(
        cumod__ledger_append(&l, CUMOD_SLR_BUF_DEL, &del, sizeof(del), &st),
        CUMOD_OK);
    cr_assert_eq(
        cumod__ledger_append(&l, CUMOD_SLR_BUF_DEL, &del, sizeof(del), &st),
        CUMOD_OK);
    cr_expect_eq(sl_replay(l.fd, &r, &n, why, sizeof(why)), CUMOD_EPROTO);
    cr_expect_not_null(strstr(why, "record 4: a buffer freed twice"), "%s",
                       why);
    cumod__sessions_fini(&r, NULL);
    /* A record of the wrong size for its type. */
    cumod__ledger_close(&l);
    cr_assert_eq(cumod__ledger_create(&l, "sledger-bad", 4096, &st), CUMOD_OK);
    cr_assert_eq(cumod__ledger_append(&l, CUMOD_SLR_OPEN, &op, 8, &st),
                 CUMOD_OK);
    cr_expect_eq(sl_replay(l.fd, &r, &n, why, sizeof(why)), CUMOD_EPROTO);
    cr_expect_not_null(strstr(why, "the wrong size"), "%s", why);
    cumod__sessions_fini(&r, NULL);
    cumod__ledger_close(&l);
}
