/* SPDX-License-Identifier: MIT */
/*
 * The session store (daemon/front/state/session.c) on its own: handles, memory
 * accounting against a limit, stream keys, tickets and the requests that
 * wait on them, and that freeing a session hands back every waiting
 * request so the front can answer it. Also the id map and the intrusive
 * list the store is built on.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "front/transport/server.h"
#include "front/state/session.h"
#include "common/idmap.h"
#include "common/list.h"

Test(idmap, survives_many_ids_and_removals)
{
    cumod_idmap m;
    enum { N = 20000 };
    static int vals[N];
    cumod__idmap_init(&m);
    for (int i = 0; i < N; i++)
        cr_assert_eq(cumod__idmap_set(&m, (uint64_t)i * 7919 + 1, &vals[i]),
                     CUMOD_OK);
    cr_expect_eq(cumod__idmap_count(&m), N);
    for (int i = 0; i < N; i += 2)
        cr_assert_eq(cumod__idmap_remove(&m, (uint64_t)i * 7919 + 1), &vals[i]);
    for (int i = 0; i < N; i++)
        cr_assert_eq(cumod__idmap_get(&m, (uint64_t)i * 7919 + 1),
                     i % 2 ? &vals[i] : NULL, "id %d", i);
    size_t cur = 0, seen = 0;
    uint64_t id;
    while (cumod__idmap_next(&m, &cur, &id) != NULL)
        seen++;
    cr_expect_eq(seen, N / 2);
    cr_expect_null(cumod__idmap_remove(&m, 3), "an absent id");
    cr_expect_eq(cumod__idmap_set(&m, 5, NULL), CUMOD_EINVAL);
    cumod__idmap_fini(&m);
    cr_expect_null(cumod__idmap_get(&m, 1));
}

typedef struct item {
    int v;
    cumod_list_node link;
} item;

Test(list, keeps_order_and_removes_from_anywhere)
{
    cumod_list l, other;
    item it[5];
    cumod__list_init(&l);
    cumod__list_init(&other);
    for (int i = 0; i < 5; i++) {
        it[i].v = i;
        cumod__list_node_init(&it[i].link);
        cr_expect(!cumod__list_node_active(&it[i].link));
        cumod__list_append(&l, &it[i].link);
    }
    cumod__list_remove(&it[2].link);
    cr_expect(!cumod__list_node_active(&it[2].link));
    cumod__list_prepend(&other, &it[2].link);
    cumod__list_splice(&other, &l);
    cr_expect(cumod__list_empty(&l));
    int want[] = {2, 0, 1, 3, 4}, k = 0;
    CUMOD_LIST_FOREACH_SAFE(&other, n)
    {
        item *x = CUMOD_CONTAINER_OF(n, item, link);
        cr_expect_eq(x->v, want[k], "position %d", k);
        k++;
        cumod__list_remove(n);
    }
    cr_expect_eq(k, 5);
    cr_expect(cumod__list_empty(&other));
}

static cumod_session *
st_session(cumod_sessions *ss, uint32_t id)
{
    cumod_session *s;
    cr_assert_eq(cumod__sessions_add(ss, id, 1000, 1000, 99, &s), CUMOD_OK);
    return s;
}

Test(session, handles_are_the_sessions_own)
{
    cumod_sessions ss;
    cumod_list orphans;
    cumod_buf *a, *b;
    cumod_seg *g;
    cumod__sessions_init(&ss);
    cumod__list_init(&orphans);
    cumod_session *s1 = st_session(&ss, 1), *s2 = st_session(&ss, 2);
    cr_expect_eq(cumod__sessions_get(&ss, 1), s1);
    cr_expect_eq(cumod__sessions_get(&ss, 2), s2);
    cr_expect_null(cumod__sessions_get(&ss, 3));

    cr_assert_eq(cumod__session_reserve(s1, 100, 0, NULL), CUMOD_OK);
    cr_assert_eq(cumod__session_buf_add(s1, 100, 0x1000, &a), CUMOD_OK);
    cr_assert_eq(cumod__session_seg_add(s1, 4096, 0x2000, "/g", &g), CUMOD_OK);
    cr_assert_eq(cumod__session_reserve(s2, 50, 0, NULL), CUMOD_OK);
    cr_assert_eq(cumod__session_buf_add(s2, 50, 0x3000, &b), CUMOD_OK);
    cr_expect_neq(a->handle, g->handle, "one counter for all handles");
    cr_expect_eq(cumod__session_buf(s1, a->handle), a);
    cr_expect_null(cumod__session_buf(s2, g->handle),
                   "another session's handle is unknown here");
    cr_expect_null(cumod__session_buf(s1, g->handle),
                   "a segment's handle is no buffer's");
    cr_expect_eq(s1->mem_used, 100);
    cr_expect(cumod__session_holds_device_state(s1));
    cumod__session_buf_remove(s1, a);
    cr_expect_eq(s1->mem_used, 0);
    cumod__session_seg_remove(s1, g);
    cr_expect(!cumod__session_holds_device_state(s1));

    cr_expect_eq(cumod__sessions_take(&ss, 1), s1);
    cr_expect_null(cumod__sessions_get(&ss, 1));
    cumod__session_free(s1, &orphans);
    cumod__sessions_fini(&ss, &orphans);
    cr_expect(cumod__list_empty(&orphans));
}

Test(session, the_memory_limit_counts_reservations)
{
    cumod_sessions ss;
    cumod_list orphans;
    cumod_status st;
    cumod__sessions_init(&ss);
    cumod__list_init(&orphans);
    cumod_session *s = st_session(&ss, 9);
    cr_expect_eq(cumod__session_reserve(s, 600, 1000, &st), CUMOD_OK);
    cr_expect_eq(cumod__session_reserve(s, 500, 1000, &st), CUMOD_EDEVMEM,
                 "two allocations in flight cannot pass the limit together");
    cr_expect_str_eq(st.msg, "cannot allocate 500 bytes: this connection "
                             "holds 600 bytes and its limit "
                             "(--session-memory-limit) is 1000");
    cumod__session_unreserve(s, 600);
    cr_expect_eq(cumod__session_reserve(s, 1000, 1000, &st), CUMOD_OK);
    cr_expect_eq(cumod__session_reserve(s, 1, 0, &st), CUMOD_OK, "0: no limit");
    cumod__sessions_fini(&ss, &orphans);
}

Test(session, stream_keys_name_the_session_and_the_index)
{
    cumod_sessions ss;
    cumod_list orphans;
    cumod_sstream *t1, *t2;
    uint64_t *keys;
    size_t n;
    cumod__sessions_init(&ss);
    cumod__list_init(&orphans);
    cumod_session *s = st_session(&ss, 5);
    cr_assert_eq(cumod__session_stream_add(s, &t1), CUMOD_OK);
    cr_assert_eq(cumod__session_stream_add(s, &t2), CUMOD_OK);
    cr_expect_eq(t1->key, (5ull << 20) | 1);
    cr_expect_eq(t2->key, (5ull << 20) | 2);
    cr_expect_eq(cumod__session_key(s, CUMOD_CHAN_RECLAIM),
                 (5ull << 20) | 0xFFFFF, "the reclaim stream");
    cr_assert_eq(cumod__session_stream_keys(s, &keys, &n), CUMOD_OK);
    cr_expect_eq(n, 3);
    cr_expect_eq(keys[0], 5ull << 20, "the default stream first");
    free(keys);
    uint64_t h1 = t1->handle;
    cumod__session_stream_remove(s, t1);
    cr_expect_eq(cumod__session_stream_key(s, h1), 0, "destroyed: unknown");
    cr_expect_eq(cumod__session_stream_key(s, t2->handle), t2->key);
    /* The index runs out before the reclaim stream's. */
    s->next_stream = CUMOD_CHAN_RECLAIM;
    cr_expect_eq(cumod__session_stream_add(s, &t1), CUMOD_EBUSY);
    cumod__sessions_fini(&ss, &orphans);
}

Test(session, tickets_hand_their_waiters_back)
{
    cumod_sessions ss;
    cumod_list waiters, orphans;
    cumod_ticket *t1, *t2, *t3;
    cumod_req r1 = {0}, r2 = {0}, r3 = {0};
    cumod__sessions_init(&ss);
    cumod__list_init(&waiters);
    cumod__list_init(&orphans);
    cumod__list_node_init(&r1.link);
    cumod__list_node_init(&r2.link);
    cumod__list_node_init(&r3.link);
    cumod_session *s = st_session(&ss, 3);
    cr_assert_eq(cumod__session_ticket_new(s, &t1), CUMOD_OK);
    cr_assert_eq(cumod__session_ticket_new(s, &t2), CUMOD_OK);
    cr_assert_eq(cumod__session_ticket_new(s, &t3), CUMOD_OK);
    uint64_t id1 = t1->ticket, id2 = t2->ticket;
    cumod__list_append(&t1->waiters, &r1.link);
    cumod__list_append(&t2->waiters, &r2.link);
    cumod__list_append(&t3->waiters, &r3.link);

    cumod__session_ticket_done(s, id1, CUMOD_OK, NULL, &waiters);
    cr_expect_eq(cumod__list_first(&waiters), &r1.link);
    cr_expect_null(cumod__session_ticket(s, id1),
                   "a ticket done well is forgotten");
    cumod__list_pop(&waiters);

    cumod__session_ticket_done(s, id2, CUMOD_ECTXLOST, "it faulted", &waiters);
    cr_expect_eq(cumod__list_first(&waiters), &r2.link);
    cumod__list_pop(&waiters);
    cumod_ticket *kept = cumod__session_ticket(s, id2);
    cr_assert_not_null(kept, "a failed ticket is kept for a later wait");
    cr_expect_eq(kept->status, CUMOD_ECTXLOST);
    cr_expect_str_eq(kept->error, "it faulted");
    cr_expect_eq(s->nfailed_tickets, 1);

    /* The session goes: the request still waiting is handed back. */
    cumod__sessions_fini(&ss, &orphans);
    cr_expect_eq(cumod__list_first(&orphans), &r3.link);
}

Test(session, failed_tickets_are_kept_up_to_a_limit)
{
    cumod_sessions ss;
    cumod_list waiters, orphans;
    cumod_ticket *t;
    cumod__sessions_init(&ss);
    cumod__list_init(&waiters);
    cumod__list_init(&orphans);
    cumod_session *s = st_session(&ss, 4);
    for (int i = 0; i < CUMOD_SESSION_FAILED_TICKETS + 10; i++) {
        cr_assert_eq(cumod__session_ticket_new(s, &t), CUMOD_OK);
        cumod__session_ticket_done(s, t->ticket, CUMOD_EDRIVER, "x", &waiters);
    }
    cr_expect_eq(s->nfailed_tickets, CUMOD_SESSION_FAILED_TICKETS);
    cr_expect_null(cumod__session_ticket(s, 1), "the oldest went first");
    cr_expect_not_null(
        cumod__session_ticket(s, CUMOD_SESSION_FAILED_TICKETS + 10));
    cumod__sessions_fini(&ss, &orphans);
}
