/* SPDX-License-Identifier: MIT */
/*
 * The ledger (daemon/common/ledger.h, issue 34 piece 1) without a daemon:
 * records read back as written, across growth and a dup'd descriptor (as a
 * new front would get it from an executor); a writer killed in the middle
 * of a record (cut anywhere), a record rewritten, numbers out of order and
 * lengths past the end, each ending the replay at the last good record and
 * saying why; a ledger taken over after such an end, written on; and bytes
 * that are no ledger refused.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/ledger.h"

/* What a replay saw: each record's number, type, length and a sum of its
 * bytes. */
typedef struct seen {
    uint64_t seq[4096];
    uint16_t type[4096];
    uint32_t len[4096];
    uint32_t sum[4096];
    size_t n;
} seen;

static int
seen_add(void *arg, uint64_t seq, uint16_t type, const void *p, uint32_t len)
{
    seen *s = arg;
    if (s->n == 4096)
        return 1;
    s->seq[s->n] = seq;
    s->type[s->n] = type;
    s->len[s->n] = len;
    s->sum[s->n] = cumod__crc32c(0, p, len);
    s->n++;
    return 0;
}

/* Record i's payload: i's own bytes, of a length that varies with i (0
 * included, some past a page). */
static uint32_t
rec_len(uint32_t i)
{
    return i % 7 == 0 ? 0 : (i * 37) % (i % 5 == 0 ? 9000 : 200);
}

static void
rec_fill(uint8_t *b, uint32_t i)
{
    for (uint32_t k = 0; k < rec_len(i); k++)
        b[k] = (uint8_t)(i * 31 + k);
}

static void
write_n(cumod_ledger *l, uint32_t n)
{
    static uint8_t b[10000];
    cumod_status st;
    for (uint32_t i = 1; i <= n; i++) {
        rec_fill(b, i);
        cr_assert_eq(
            cumod__ledger_append(l, (uint16_t)(i % 3 + 1), b, rec_len(i), &st),
            CUMOD_OK, "record %u: %s", i, st.msg);
    }
}

static void
expect_first(const seen *s, uint32_t n)
{
    static uint8_t b[10000];
    cr_assert_eq(s->n, n, "%zu records read back, %u written", s->n, n);
    for (uint32_t i = 1; i <= n; i++) {
        rec_fill(b, i);
        cr_expect_eq(s->seq[i - 1], i);
        cr_expect_eq(s->type[i - 1], i % 3 + 1);
        cr_expect_eq(s->len[i - 1], rec_len(i));
        cr_expect_eq(s->sum[i - 1], cumod__crc32c(0, b, rec_len(i)),
                     "record %u's bytes", i);
    }
}

Test(ledger, records_read_back_as_written_across_growth)
{
    cumod_ledger l;
    cumod_status st;
    cr_assert_eq(cumod__ledger_create(&l, "ledger-test", 4096, &st), CUMOD_OK,
                 "%s", st.msg);
    write_n(&l, 2000); /* far past the first 4 KiB */
    cr_expect_gt(l.cap, 4096, "it grew");
    /* As a new front would get it: another descriptor of the memfd. */
    int fd = dup(l.fd);
    static seen s;
    uint64_t n;
    size_t good;
    char why[200];
    cr_assert_eq(cumod__ledger_replay(fd, seen_add, &s, &n, &good, why,
                                      sizeof(why), &st),
                 CUMOD_OK, "%s", st.msg);
    cr_expect_eq(n, 2000);
    cr_expect_eq(good, l.len, "the whole ledger is good");
    cr_expect_str_eq(why, "");
    expect_first(&s, 2000);
    /* The writer gone, the ledger lives on in the other descriptor. */
    cumod__ledger_close(&l);
    memset(&s, 0, sizeof(s));
    cr_assert_eq(cumod__ledger_replay(fd, seen_add, &s, &n, &good, why,
                                      sizeof(why), &st),
                 CUMOD_OK);
    expect_first(&s, 2000);
    close(fd);
}

/* The writer killed anywhere in its last record: every cut leaves the
 * records before it, and the replay says where it ended. */
Test(ledger, a_record_cut_anywhere_ends_the_replay_before_it)
{
    cumod_ledger l;
    cumod_status st;
    cr_assert_eq(cumod__ledger_create(&l, "ledger-test", 1 << 16, &st),
                 CUMOD_OK);
    write_n(&l, 10);
    size_t ten = l.len;
    uint8_t last[300];
    memset(last, 0x5a, sizeof(last));
    cr_assert_eq(cumod__ledger_append(&l, 9, last, sizeof(last), &st),
                 CUMOD_OK);
    size_t eleven = l.len;
    uint8_t *copy = malloc(eleven);
    memcpy(copy, l.map, eleven);
    for (size_t cut = ten + 1; cut < eleven; cut += 7) {
        /* What a killed writer leaves: the published length covering a
         * record whose bytes stop at cut (the rest never written). */
        memcpy(l.map, copy, eleven);
        memset(l.map + cut, 0, eleven - cut);
        static seen s;
        memset(&s, 0, sizeof(s));
        uint64_t n;
        size_t good;
        char why[200];
        cr_assert_eq(cumod__ledger_replay(l.fd, seen_add, &s, &n, &good, why,
                                          sizeof(why), &st),
                     CUMOD_OK, "cut at %zu: %s", cut, st.msg);
        cr_expect_eq(n, 10, "cut at %zu: %llu records", cut,
                     (unsigned long long)n);
        cr_expect_eq(good, ten);
        cr_expect_neq(why[0], '\0', "cut at %zu: it says why", cut);
        expect_first(&s, 10);
    }
    free(copy);
    cumod__ledger_close(&l);
}

/* A record rewritten, renumbered, or given a length past the end: the
 * replay keeps what came before and names the record. */
Test(ledger, a_bad_record_keeps_what_came_before_and_says_which)
{
    static const struct {
        size_t off; /* into record 4's header */
        uint8_t byte;
        const char *says;
    } cases[] = {
        {30, 0x01, "checksum"}, /* its payload */
        {0, 0x00, "no record"}, /* its magic */
        {8, 0xff, "past the"},  /* its length */
        {16, 0x09, "numbered"}, /* its number */
        {6, 0x02, "checksum"},  /* its flags */
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        cumod_ledger l;
        cumod_status st;
        cr_assert_eq(cumod__ledger_create(&l, "ledger-test", 1 << 16, &st),
                     CUMOD_OK);
        write_n(&l, 3);
        size_t three = l.len;
        uint8_t p[64];
        memset(p, 7, sizeof(p));
        for (int i = 0; i < 4; i++)
            cr_assert_eq(cumod__ledger_append(&l, 5, p, sizeof(p), &st),
                         CUMOD_OK);
        l.map[three + cases[c].off] = cases[c].byte;
        if (cases[c].off == 8) /* past everything */
            l.map[three + 11] = 0x7f;
        static seen s;
        memset(&s, 0, sizeof(s));
        uint64_t n;
        size_t good;
        char why[200];
        cr_assert_eq(cumod__ledger_replay(l.fd, seen_add, &s, &n, &good, why,
                                          sizeof(why), &st),
                     CUMOD_OK);
        cr_expect_eq(n, 3, "case %zu: %llu records", c, (unsigned long long)n);
        cr_expect_eq(good, three);
        cr_expect_not_null(strstr(why, "record 4"), "case %zu: %s", c, why);
        cr_expect_not_null(strstr(why, cases[c].says), "case %zu: %s", c, why);
        expect_first(&s, 3);
        cumod__ledger_close(&l);
    }
}

/* A new writer takes over after a cut: the tail is dropped, numbering
 * goes on from the good prefix, and a replay reads one ledger. */
Test(ledger, taken_over_after_a_cut_it_is_written_on)
{
    cumod_ledger l, m;
    cumod_status st;
    cr_assert_eq(cumod__ledger_create(&l, "ledger-test", 1 << 16, &st),
                 CUMOD_OK);
    write_n(&l, 5);
    size_t five = l.len;
    uint8_t p[100];
    memset(p, 1, sizeof(p));
    cr_assert_eq(cumod__ledger_append(&l, 3, p, sizeof(p), &st), CUMOD_OK);
    l.map[five + 40] ^= 0xff; /* the sixth, half written */
    cr_assert_eq(cumod__ledger_adopt(&m, l.fd, &st), CUMOD_OK, "%s", st.msg);
    cumod__ledger_close(&l); /* the old writer is gone */
    cr_expect_eq(m.len, five);
    cr_expect_eq(m.next, 6);
    uint8_t b[10000];
    for (uint32_t i = 6; i <= 8; i++) {
        rec_fill(b, i);
        cr_assert_eq(
            cumod__ledger_append(&m, (uint16_t)(i % 3 + 1), b, rec_len(i), &st),
            CUMOD_OK);
    }
    static seen s;
    memset(&s, 0, sizeof(s));
    uint64_t n;
    size_t good;
    char why[200];
    cr_assert_eq(cumod__ledger_replay(m.fd, seen_add, &s, &n, &good, why,
                                      sizeof(why), &st),
                 CUMOD_OK);
    cr_expect_str_eq(why, "");
    expect_first(&s, 8);
    cumod__ledger_close(&m);
}

/* Bytes that are no ledger, a record over the limit, type 0, and a
 * replay that its reader stops. */
Test(ledger, what_is_no_ledger_or_no_record_is_refused)
{
    cumod_status st;
    char why[200];
    uint64_t n;
    size_t good;
    int fd = memfd_create("not-a-ledger", MFD_CLOEXEC);
    cr_assert_geq(fd, 0);
    cr_expect_eq(
        cumod__ledger_replay(fd, NULL, NULL, &n, &good, why, sizeof(why), &st),
        CUMOD_EPROTO, "an empty file");
    uint8_t junk[4096];
    memset(junk, 0xab, sizeof(junk));
    cr_assert_eq(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
    cr_expect_eq(
        cumod__ledger_replay(fd, NULL, NULL, &n, &good, why, sizeof(why), &st),
        CUMOD_EPROTO);
    cr_expect_not_null(strstr(st.msg, "not a ledger"), "%s", st.msg);
    cumod_ledger m;
    cr_expect_eq(cumod__ledger_adopt(&m, fd, &st), CUMOD_EPROTO,
                 "no ledger is taken over");
    close(fd);

    cumod_ledger l;
    cr_assert_eq(cumod__ledger_create(&l, "ledger-test", 4096, &st), CUMOD_OK);
    cr_expect_eq(cumod__ledger_append(&l, 0, junk, 8, &st), CUMOD_EINVAL);
    cr_expect_eq(
        cumod__ledger_append(&l, 1, junk, CUMOD_LEDGER_REC_MAX + 1, &st),
        CUMOD_EINVAL);
    cr_expect_eq(l.records, 0, "nothing was written for them");
    write_n(&l, 20);
    static seen s;
    memset(&s, 0, sizeof(s));
    cr_expect_eq(cumod__ledger_replay(l.fd, seen_add, &s, &n, &good, why,
                                      sizeof(why), &st),
                 CUMOD_OK);
    expect_first(&s, 20);
    /* The published length past the file's end (truncated under it). */
    cr_assert_eq(ftruncate(l.fd, (off_t)(l.len - 10)), 0);
    memset(&s, 0, sizeof(s));
    cr_expect_eq(cumod__ledger_replay(l.fd, seen_add, &s, &n, &good, why,
                                      sizeof(why), &st),
                 CUMOD_OK);
    cr_expect_eq(n, 19, "the record cut by the truncation is dropped");
    cr_expect_neq(why[0], '\0');
    cumod__ledger_close(&l);
}

Test(ledger, crc32c_is_castagnolis)
{
    /* The standard check value of CRC-32C over "123456789". */
    cr_expect_eq(cumod__crc32c(0, "123456789", 9), 0xe3069283u);
    cr_expect_eq(cumod__crc32c(cumod__crc32c(0, "1234", 4), "56789", 5),
                 0xe3069283u, "continued over two calls");
}
