/* SPDX-License-Identifier: MIT */
/*
 * A GEMM's checks (daemon/data/gemm_check.c, through the front's
 * cumod__check_gemm) without a daemon: what
 * cuBLAS is handed for a row-major GEMM (turned around) and a column-major
 * one (as is), and what only a raw request can say, which libcumod never
 * sends: unknown enums, a batch past cuBLAS's int, a missing operand, sums
 * that would wrap, a lost buffer.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "cumod.pb-c.h"
#include "front/state/checks.h"
#include "front/state/session.h"

typedef struct gk {
    cumod_sessions ss;
    cumod_session *s;
    cumod_buf *a, *b, *c;
    Cumod__Gemm g;
    Cumod__GemmOperand oa, ob, oc;
    cumod_chan_gemm out;
    cumod_status st;
} gk;

/* Row-major FP32, m 3, n 5, k 4, on three buffers of 4 KiB. */
static void
gk_init(gk *t)
{
    memset(t, 0, sizeof(*t));
    cumod__sessions_init(&t->ss);
    cr_assert_eq(cumod__sessions_add(&t->ss, 7, 1000, 1000, 4242, &t->s),
                 CUMOD_OK);
    cr_assert_eq(cumod__session_buf_add(t->s, 4096, 0x7f0000001000ull, &t->a),
                 CUMOD_OK);
    cr_assert_eq(cumod__session_buf_add(t->s, 4096, 0x7f0000100000ull, &t->b),
                 CUMOD_OK);
    cr_assert_eq(cumod__session_buf_add(t->s, 4096, 0x7f0000200000ull, &t->c),
                 CUMOD_OK);
    cumod__gemm__init(&t->g);
    cumod__gemm_operand__init(&t->oa);
    cumod__gemm_operand__init(&t->ob);
    cumod__gemm_operand__init(&t->oc);
    t->oa.buffer = t->a->handle;
    t->ob.buffer = t->b->handle;
    t->oc.buffer = t->c->handle;
    t->g.type = CUMOD__GEMM_TYPE__GEMM_FP32;
    t->g.m = 3;
    t->g.n = 5;
    t->g.k = 4;
    t->g.alpha = 2;
    t->g.beta = 0.5;
    t->g.a = &t->oa;
    t->g.b = &t->ob;
    t->g.c = &t->oc;
}

static void
gk_fini(gk *t)
{
    cumod_list orphans;
    cumod__list_init(&orphans);
    cumod__sessions_fini(&t->ss, &orphans);
}

static void
gk_refused(gk *t, int code, const char *needle)
{
    int rv = cumod__check_gemm(t->s, &t->g, &t->out, &t->st);
    cr_expect_eq(rv, code, "'%s': got %d (%s)", needle, rv, t->st.msg);
    cr_expect(strstr(t->st.msg, needle) != NULL, "'%s' lacks '%s'", t->st.msg,
              needle);
}

Test(gemm_checks, a_row_major_gemm_is_turned_around_for_cublas)
{
    gk t;
    gk_init(&t);
    t.g.transa = 1; /* A is stored k x m = 4 x 3: ld 3 packed */
    t.oa.offset = 16;
    t.oc.ld = 7;
    cr_assert_eq(cumod__check_gemm(t.s, &t.g, &t.out, &t.st), CUMOD_OK, "%s",
                 t.st.msg);
    /* C^T (5 x 3) = B^T (5 x 4) A^T^T (4 x 3): B first, m and n swapped,
     * the transposes swapped with them. */
    cr_expect_eq(t.out.m, 5);
    cr_expect_eq(t.out.n, 3);
    cr_expect_eq(t.out.k, 4);
    cr_expect_eq(t.out.a, t.b->dptr);
    cr_expect_eq(t.out.lda, 5, "B's rows are 5 long");
    cr_expect_eq(t.out.transa, 0);
    cr_expect_eq(t.out.b, t.a->dptr + 16);
    cr_expect_eq(t.out.ldb, 3);
    cr_expect_eq(t.out.transb, 1);
    cr_expect_eq(t.out.c, t.c->dptr);
    cr_expect_eq(t.out.ldc, 7);
    cr_expect_eq(t.out.batch, 1);
    cr_expect_eq(t.out.row_major, 1);
    cr_expect(t.out.alpha == 2 && t.out.beta == 0.5);
    cr_expect_eq(t.out.c_type, CUMOD_CHAN_GEMM_FP32, "C of the inputs' type");

    /* Column-major: as asked, lds of the rows. */
    t.g.order = CUMOD__GEMM_ORDER__GEMM_COL_MAJOR;
    t.oc.ld = 0;
    cr_assert_eq(cumod__check_gemm(t.s, &t.g, &t.out, &t.st), CUMOD_OK, "%s",
                 t.st.msg);
    cr_expect(t.out.m == 3 && t.out.n == 5 && t.out.transa == 1 &&
              t.out.transb == 0);
    cr_expect(t.out.a == t.a->dptr + 16 && t.out.lda == 4 && t.out.ldb == 4 &&
              t.out.ldc == 3);
    gk_fini(&t);
}

Test(gemm_checks, what_only_a_raw_request_can_get_wrong)
{
    gk t;
    gk_init(&t);
    t.g.type = CUMOD__GEMM_TYPE__GEMM_TYPE_UNSPECIFIED;
    gk_refused(&t, CUMOD_EINVAL, "GEMM: no type given");
    t.g.type = (Cumod__GemmType)9;
    gk_refused(&t, CUMOD_EINVAL, "GEMM: type 9 is not FP32");
    t.g.type = CUMOD__GEMM_TYPE__GEMM_BF16;
    t.g.c_type = (Cumod__GemmType)77;
    gk_refused(&t, CUMOD_EINVAL, "GEMM: C's type 77");
    t.g.c_type = CUMOD__GEMM_TYPE__GEMM_FP32; /* allowed */
    cr_expect_eq(cumod__check_gemm(t.s, &t.g, &t.out, &t.st), CUMOD_OK, "%s",
                 t.st.msg);
    t.g.order = (Cumod__GemmOrder)3;
    gk_refused(&t, CUMOD_EINVAL, "GEMM: order 3 is neither");
    t.g.order = CUMOD__GEMM_ORDER__GEMM_ROW_MAJOR;
    t.g.batch = 0x80000000u;
    gk_refused(&t, CUMOD_EINVAL, "a batch of 2147483648 is above");
    t.g.batch = 0;
    t.g.b = NULL;
    gk_refused(&t, CUMOD_EINVAL, "GEMM: B is missing");
    gk_fini(&t);
}

Test(gemm_checks, sums_that_would_wrap_are_refused_not_wrapped)
{
    gk t;
    gk_init(&t);
    /* Every figure at cuBLAS's limits: 2^31-1 rows of ld 2^31-1. */
    t.g.m = t.g.n = t.g.k = 2147483647;
    t.oa.ld = 2147483647;
    gk_refused(&t, CUMOD_EINVAL, "A: needs");
    gk_fini(&t);
    gk_init(&t);
    t.g.batch = 3;
    t.ob.stride = (1ull << 63) - 1;
    gk_refused(&t, CUMOD_EINVAL, "B: 3 matrices of 4 x 5 FP32");
    t.ob.stride = 1ull << 63;
    gk_refused(&t, CUMOD_EINVAL, "B: stride 9223372036854775808 is above");
    gk_fini(&t);
    /* An offset past the end, with a matrix that would fit before it. */
    gk_init(&t);
    t.oc.offset = UINT64_MAX - 3;
    gk_refused(&t, CUMOD_EINVAL, "C: needs 60 bytes at offset");
    gk_fini(&t);
}

Test(gemm_checks, a_buffer_lost_with_the_context_says_so)
{
    gk t;
    gk_init(&t);
    t.b->lost = 1;
    gk_refused(&t, CUMOD_ECTXLOST, "B: buffer");
    cr_expect(strstr(t.st.msg, "lost with the CUDA context") != NULL, "%s",
              t.st.msg);
    gk_fini(&t);
}
