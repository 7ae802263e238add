/* SPDX-License-Identifier: MIT */
/*
 * Hostile input for the demangler, in demangle_test's suite: every
 * truncation of every name of the tables; mutated names from a fixed seed
 * (bytes replaced, inserted, deleted, slices of other names spliced in,
 * tails cut); random bytes after "_Z"; and names built to reach each bound
 * (the length cap, the parser's depth, the output budget through
 * substitutions that double at each step, template arguments that name
 * themselves, numbers too large). Each must be refused or give a result
 * that holds together; each sits in an allocation of its exact size so
 * that ASan sees any read past its NUL. Last, four threads at once.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/demangle/demangle.h"
#include "demangle_cases.h"

#define MUTATIONS 40000
#define RANDOM_NAMES 10000

/* Characters of the mangling grammar, which mutations mostly draw from
 * (random bytes alone rarely get past the first rule). */
static const char alphabet[] =
    "_0123456789ABCDEFIJKLMNOPRSTUVXYZabcdefghijlmnorstuvwxyzDpEJ";

/* xorshift64: the same names on every run. */
static uint64_t
rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Demangles len bytes of s as a string of exactly that size: 1 if
 * accepted (and then consistent), 0 if refused. */
static int
try_name(const char *s, size_t len)
{
    char *copy = malloc(len + 1);
    cumod_demangled d;
    int ok;

    cr_assert_not_null(copy);
    memcpy(copy, s, len);
    copy[len] = '\0';
    ok = cumod__demangle(copy, &d) == 0;
    if (ok) {
        cr_assert(dm_consistent(&d), "%s: inconsistent '%s'", copy,
                  d.signature);
        cumod__demangled_fini(&d);
    }
    free(copy);
    return ok;
}

/* Every mangled name of the tables. */
typedef struct corpus {
    const char **names;
    size_t n;
} corpus;

static void
corpus_add(corpus *c, const dm_case *cases, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        c->names[c->n++] = cases[i].mangled;
}

static void
corpus_init(corpus *c)
{
    c->n = 0;
    c->names = calloc(dm_nvcc_ncases + dm_cub_ncases + dm_hand_ncases,
                      sizeof(*c->names));
    cr_assert_not_null(c->names);
    corpus_add(c, dm_nvcc_cases, dm_nvcc_ncases);
    corpus_add(c, dm_cub_cases, dm_cub_ncases);
    corpus_add(c, dm_hand_cases, dm_hand_ncases);
}

Test(demangle_hostile, every_truncation_of_every_name)
{
    corpus c;
    size_t i, len, tried = 0;

    corpus_init(&c);
    for (i = 0; i < c.n; i++) {
        size_t full = strlen(c.names[i]);

        for (len = 0; len <= full; len++, tried++)
            try_name(c.names[i], len);
    }
    cr_log_info("%zu truncations", tried);
    free(c.names);
}

Test(demangle_hostile, mutated_names)
{
    enum { CAP = 8192 };
    uint64_t rng = 0x5eed0f0ddba11ull;
    char *buf = malloc(CAP + 1);
    size_t accepted = 0, it;
    corpus c;

    cr_assert_not_null(buf);
    corpus_init(&c);
    for (it = 0; it < MUTATIONS; it++) {
        const char *base = c.names[rng_next(&rng) % c.n];
        size_t len = strlen(base), m, nmut = 1 + rng_next(&rng) % 6;

        memcpy(buf, base, len + 1);
        for (m = 0; m < nmut; m++) {
            size_t pos = len ? rng_next(&rng) % len : 0;
            char ch = alphabet[rng_next(&rng) % (sizeof(alphabet) - 1)];
            const char *o;
            size_t ol, a, b;

            switch (rng_next(&rng) % 6) {
            case 0: /* replace */
                if (len)
                    buf[pos] = ch;
                break;
            case 1: /* insert */
                if (len < CAP) {
                    memmove(buf + pos + 1, buf + pos, len - pos + 1);
                    buf[pos] = ch;
                    len++;
                }
                break;
            case 2: /* delete */
                if (len) {
                    memmove(buf + pos, buf + pos + 1, len - pos);
                    len--;
                }
                break;
            case 3: /* any byte but NUL */
                if (len)
                    buf[pos] = (char)(1 + rng_next(&rng) % 255);
                break;
            case 4: /* splice in a slice of another name */
                o = c.names[rng_next(&rng) % c.n];
                ol = strlen(o);
                if (ol == 0)
                    break;
                a = rng_next(&rng) % ol;
                b = a + rng_next(&rng) % (ol - a);
                if (len + (b - a) <= CAP) {
                    memmove(buf + pos + (b - a), buf + pos, len - pos + 1);
                    memcpy(buf + pos, o + a, b - a);
                    len += b - a;
                }
                break;
            default: /* cut the tail */
                len = pos;
                buf[len] = '\0';
                break;
            }
        }
        accepted += (size_t)try_name(buf, len);
    }
    cr_log_info("%d mutated names, %zu accepted", MUTATIONS, accepted);
    /* Most mutations break a name; some must still parse (a renamed
     * identifier, another builtin), or the mutator tests nothing. */
    cr_expect_gt(accepted, MUTATIONS / 100);
    free(c.names);
    free(buf);
}

Test(demangle_hostile, random_bytes)
{
    uint64_t rng = 0xfeedfacecafebeefull;
    char buf[80];
    size_t it, i;

    for (it = 0; it < RANDOM_NAMES; it++) {
        size_t len = 2 + 1 + rng_next(&rng) % 64;

        buf[0] = '_';
        buf[1] = 'Z';
        for (i = 2; i < len; i++)
            buf[i] = it % 2 ? (char)(1 + rng_next(&rng) % 255)
                            : alphabet[rng_next(&rng) % (sizeof(alphabet) - 1)];
        try_name(buf, len);
    }
}

/* A growing string for building names. */
static char *
repeat(const char *head, const char *unit, size_t n, const char *tail)
{
    size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail), i;
    char *s = malloc(hl + ul * n + tl + 1), *p = s;

    cr_assert_not_null(s);
    memcpy(p, head, hl);
    p += hl;
    for (i = 0; i < n; i++, p += ul)
        memcpy(p, unit, ul);
    memcpy(p, tail, tl + 1);
    return s;
}

static int
demangles(const char *s, cumod_demangled *d)
{
    int rc = cumod__demangle(s, d);

    if (rc == 0)
        cr_assert(dm_consistent(d));
    return rc;
}

Test(demangle_hostile, bounds)
{
    cumod_demangled d;
    char *s, *t, ref[16];
    size_t i, n;

    /* The length cap: a name of exactly CUMOD_DM_MANGLED_MAX bytes (all
     * int parameters) is read whole; one byte more is refused unread. */
    n = CUMOD_DM_MANGLED_MAX - 4;
    s = repeat("_Z1f", "i", n, "");
    cr_assert_eq(demangles(s, &d), 0);
    cr_expect_eq(d.nparams, n);
    cumod__demangled_fini(&d);
    free(s);
    s = repeat("_Z1f", "i", n + 1, "");
    cr_expect_eq(demangles(s, &d), -1);
    free(s);

    /* Depth: 200 pointers deep is a type, 300 is refused; so are 100
     * nested template argument lists, where 40 are fine. */
    s = repeat("_Z1f", "P", 200, "f");
    cr_assert_eq(demangles(s, &d), 0);
    t = repeat("float", "*", 200, "");
    cr_expect_str_eq(d.params[0].type, t);
    cumod__demangled_fini(&d);
    free(t);
    free(s);
    s = repeat("_Z1f", "P", 300, "f");
    cr_expect_eq(demangles(s, &d), -1);
    free(s);
    s = repeat("_Z1f", "1AI", 40, "i");
    t = repeat(s, "E", 40, "");
    cr_expect_eq(demangles(t, &d), 0);
    cumod__demangled_fini(&d);
    free(t);
    free(s);
    s = repeat("_Z1f", "1AI", 100, "i");
    t = repeat(s, "E", 100, "");
    cr_expect_eq(demangles(t, &d), -1);
    free(t);
    free(s);

    /* Output: X, Y<X, X>, Y<Y<X, X>, Y<X, X>>, ... each parameter twice
     * the last. Forty of them would print a terabyte; the budget refuses
     * the name at once. */
    s = malloc(64 * 24);
    cr_assert_not_null(s);
    strcpy(s, "_Z1f1X1YIS_S_E");
    for (i = 1; i < 40; i++) {
        size_t k = i, j = 0; /* S<i in base 36>_ names substitution i + 1 */
        char digits[8];

        do {
            size_t v = k % 36;
            digits[j++] = (char)(v < 10 ? '0' + v : 'A' + v - 10);
            k /= 36;
        } while (k > 0);
        ref[0] = 'S';
        for (k = 0; k < j; k++)
            ref[1 + k] = digits[j - 1 - k];
        ref[1 + j] = '_';
        ref[2 + j] = '\0';
        strcat(s, "S0_I");
        strcat(s, ref);
        strcat(s, ref);
        strcat(s, "E");
    }
    cr_expect_eq(demangles(s, &d), -1);
    /* Ten doublings fit: Y<...> of 1024 X's. */
    s[strlen("_Z1f1X1YIS_S_E") + 9 * strlen("S0_IS1_S1_E")] = '\0';
    cr_assert_eq(demangles(s, &d), 0, "%s", s);
    cr_expect_eq(d.nparams, 11);
    cumod__demangled_fini(&d);
    free(s);

    /* Template arguments that name themselves or nothing; numbers past
     * what any length or index can be. */
    static const char *const refused[] = {
        "_Z1fIT_EvT_",          "_Z1fIJT_EEvDpT_",       "_Z1fIPT_EvT_",
        "_Z999999999999f",      "_Z4294967297f",         "_Z1fIiEvS4294967296_",
        "_Z1fIiEvT4294967296_", "_Z1fSZZZZZZZZZZZZZZZ_",
    };
    for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
        cr_expect_eq(demangles(refused[i], &d), -1, "%s", refused[i]);
}

/* No state is shared between calls: four threads demangle the tables at
 * once and get the expected signatures every time. */
static void *
thread_main(void *arg)
{
    size_t *bad = arg, round, i;

    for (round = 0; round < 50; round++) {
        for (i = 0; i < dm_nvcc_ncases + dm_cub_ncases; i++) {
            const dm_case *c = i < dm_nvcc_ncases
                                   ? &dm_nvcc_cases[i]
                                   : &dm_cub_cases[i - dm_nvcc_ncases];
            cumod_demangled d;
            int rc = cumod__demangle(c->mangled, &d);

            if (c->signature == NULL) {
                *bad += rc != -1;
                continue;
            }
            *bad += rc != 0 || strcmp(d.signature, c->signature) != 0;
            if (rc == 0)
                cumod__demangled_fini(&d);
        }
    }
    return NULL;
}

Test(demangle_hostile, threads_at_once)
{
    pthread_t th[4];
    size_t bad[4] = {0}, i;

    for (i = 0; i < 4; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, thread_main, &bad[i]), 0);
    for (i = 0; i < 4; i++) {
        cr_assert_eq(pthread_join(th[i], NULL), 0);
        cr_expect_eq(bad[i], 0, "thread %zu: %zu wrong results", i, bad[i]);
    }
}
