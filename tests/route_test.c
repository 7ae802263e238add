/* SPDX-License-Identifier: MIT */
/*
 * Which submission thread owns a stream (daemon/exec/route.h): the
 * streams in use spread evenly over the threads however their keys fall,
 * a stream stays on its thread, and a closed stream's place is taken by
 * the next new one.
 */
#include <criterion/criterion.h>

#include "common/channel.h"
#include "exec/route.h"

/* The default stream's key of session id (session.c). */
static uint64_t
key_of(uint64_t id, uint32_t index)
{
    return (id << CUMOD_CHAN_STREAM_BITS) | index;
}

static unsigned
most(const cumod_route *rt)
{
    unsigned m = 0;
    for (unsigned i = 0; i < rt->n; i++)
        if (cumod__route_owned(rt, i) > m)
            m = cumod__route_owned(rt, i);
    return m;
}

static unsigned
fewest(const cumod_route *rt)
{
    unsigned m = ~0u;
    for (unsigned i = 0; i < rt->n; i++)
        if (cumod__route_owned(rt, i) < m)
            m = cumod__route_owned(rt, i);
    return m;
}

Test(route, eight_clients_take_all_four_threads_whatever_their_ids)
{
    /* nng gives pipe ids a few apart (a client's own sockets between);
     * the old hash put eight of these on two threads. */
    static const uint64_t bases[] = {1, 1000, 123457, 0x7fffffff};
    for (unsigned b = 0; b < sizeof(bases) / sizeof(bases[0]); b++) {
        for (uint64_t step = 1; step <= 4; step++) {
            cumod_route rt;
            cumod__route_init(&rt, 4);
            unsigned seen[8];
            for (uint64_t c = 0; c < 8; c++)
                seen[c] =
                    cumod__route_thread(&rt, key_of(bases[b] + c * step, 0));
            for (unsigned i = 0; i < 4; i++)
                cr_expect_eq(cumod__route_owned(&rt, i), 2,
                             "ids from %llu step %llu: thread %u owns %u "
                             "streams of 8 (2 each expected)",
                             (unsigned long long)bases[b],
                             (unsigned long long)step, i,
                             cumod__route_owned(&rt, i));
            /* and each keeps its thread */
            for (uint64_t c = 0; c < 8; c++)
                cr_expect_eq(
                    cumod__route_thread(&rt, key_of(bases[b] + c * step, 0)),
                    seen[c], "a stream moved to another thread");
            cumod__route_fini(&rt);
        }
    }
}

Test(route, a_closed_stream_s_place_goes_to_the_next_new_one)
{
    cumod_route rt;
    cumod__route_init(&rt, 4);
    for (uint64_t c = 0; c < 4; c++)
        (void)cumod__route_thread(&rt, key_of(77 + c, 0));
    cr_assert_eq(most(&rt), 1);
    unsigned freed = cumod__route_thread(&rt, key_of(78, 0));
    cumod__route_forget(&rt, key_of(78, 0));
    cr_expect_eq(cumod__route_owned(&rt, freed), 0);
    cumod__route_forget(&rt, key_of(78, 0));  /* twice: nothing more */
    cumod__route_forget(&rt, key_of(999, 3)); /* never seen: nothing */
    cr_expect_eq(fewest(&rt), 0);
    cr_expect_eq(cumod__route_thread(&rt, key_of(5000, 0)), freed,
                 "the new stream goes where the closed one was");
    cr_expect_eq(most(&rt), 1);
    cumod__route_fini(&rt);
}

Test(route, a_session_s_streams_spread_and_the_counts_stay_even_under_churn)
{
    cumod_route rt;
    cumod__route_init(&rt, 3);
    /* 30 sessions of 1 to 4 streams come and go; at every point the
     * threads' counts differ by at most one more than closings made. */
    uint64_t open_keys[200];
    unsigned nopen = 0;
    for (uint64_t s = 1; s <= 30; s++) {
        for (uint32_t i = 0; i < 1 + s % 4; i++) {
            open_keys[nopen++] = key_of(s * 2, i);
            (void)cumod__route_thread(&rt, open_keys[nopen - 1]);
        }
        cr_expect_leq(most(&rt) - fewest(&rt), 1,
                      "only opens so far: counts %u to %u", fewest(&rt),
                      most(&rt));
    }
    unsigned total = 0;
    for (unsigned i = 0; i < 3; i++)
        total += cumod__route_owned(&rt, i);
    cr_expect_eq(total, nopen);
    for (unsigned k = 0; k < nopen; k++)
        cumod__route_forget(&rt, open_keys[k]);
    cr_expect_eq(most(&rt), 0, "every stream closed, none owned");
    cumod__route_fini(&rt);
}

Test(route, one_thread_takes_everything_and_limits_hold)
{
    cumod_route rt;
    cumod__route_init(&rt, 1);
    for (uint64_t c = 0; c < 100; c++)
        cr_expect_eq(cumod__route_thread(&rt, key_of(c, 0)), 0);
    cumod__route_fini(&rt);
    cumod__route_init(&rt, 0);
    cr_expect_eq(rt.n, 1, "0 threads asked: 1");
    cumod__route_fini(&rt);
    cumod__route_init(&rt, 1000);
    cr_expect_eq(rt.n, CUMOD_ROUTE_MAX_THREADS);
    cr_expect_lt(cumod__route_thread(&rt, 42), CUMOD_ROUTE_MAX_THREADS);
    cr_expect_eq(cumod__route_owned(&rt, 5000), 0);
    cumod__route_fini(&rt);
}
