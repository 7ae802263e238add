/* SPDX-License-Identifier: MIT */
/*
 * A GEMM's checks (gemm_check.h): its types, shape and every operand
 * against the session's buffers, with overflow-safe arithmetic, before
 * cuBLAS gets the figures as they come (cuBLAS checks no pointer: a GEMM
 * past a buffer's end would read and write other memory of the one
 * context, another session's too). The front runs them against the
 * session, the executor's direct path against its snapshot of it; the
 * buffers come from the caller's lookup.
 *
 * A matrix of R rows and C columns with leading dimension ld spans
 * (C - 1) * ld + R elements column-major, (R - 1) * ld + C row-major; a
 * strided batch of n spans (n - 1) * stride more. A row-major GEMM is the
 * column-major one of the transposes (C^T = op(B)^T op(A)^T): the same
 * bytes, A and B swapped, m and n swapped; the executor only ever sees
 * column-major GEMMs.
 */
#include <stdio.h>
#include <string.h>

#include "data/gemm_check.h"

#define GEMM_INT_MAX 2147483647ull

static uint32_t
gemm_esize(uint32_t t)
{
    return t == CUMOD_CHAN_GEMM_FP64 ? 8 : t == CUMOD_CHAN_GEMM_FP32 ? 4 : 2;
}

/* One operand as checked: where it lies (for the overlap check) and what
 * cuBLAS gets. */
typedef struct gemm_op {
    const char *name;
    uint64_t handle, offset, bytes;
    uint64_t dptr, ld, stride;
} gemm_op;

/* The stored matrix (rows x cols of element type t) of operand o, named
 * name: its leading dimension, its span with the batch, its place in its
 * buffer. */
static cumod_err
gemm_operand(cumod_gemm_buf_fn buf, const void *arg, const Cumod__Gemm *r,
             const char *name, const Cumod__GemmOperand *o, uint64_t rows,
             uint64_t cols, uint32_t t, int is_c, gemm_op *out,
             cumod_status *st)
{
    int row_major = r->order == CUMOD__GEMM_ORDER__GEMM_ROW_MAJOR;
    uint64_t batch = r->batch ? r->batch : 1;
    uint64_t lead = row_major ? cols : rows, outer = row_major ? rows : cols;
    uint32_t esize = gemm_esize(t);
    uint64_t one, total, bytes, dptr, size;
    cumod_err rv;

    if (o == NULL)
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "GEMM: %s is missing (its buffer, offset "
                                 "and ld)",
                                 name);
    uint64_t ld = o->ld ? o->ld : lead;
    if (ld < lead)
        return cumod__status_set(
            st, CUMOD_EINVAL, "%s: ld %llu < %llu %s%s", name,
            (unsigned long long)ld, (unsigned long long)lead,
            row_major ? "columns" : "rows",
            row_major ? " (row-major: ld is the distance between rows)" : "");
    if (ld > GEMM_INT_MAX)
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "%s: ld %llu is above cuBLAS's limit of %llu",
                                 name, (unsigned long long)ld, GEMM_INT_MAX);
    /* rows, cols <= 2^31 - 1 and ld too: no overflow here. */
    one = (outer - 1) * ld + lead;
    total = one;
    if (batch > 1) {
        if (o->stride > (uint64_t)INT64_MAX)
            return cumod__status_set(st, CUMOD_EINVAL,
                                     "%s: stride %llu is above cuBLAS's "
                                     "limit of 2^63 - 1",
                                     name, (unsigned long long)o->stride);
        /* Each matrix of C is written: they must not share elements. */
        if (is_c && o->stride < one)
            return cumod__status_set(
                st, CUMOD_EINVAL,
                "%s: stride %llu elements < %llu, the elements of one "
                "matrix (%llu x %llu, ld %llu): the batch's results would "
                "overlap",
                name, (unsigned long long)o->stride, (unsigned long long)one,
                (unsigned long long)rows, (unsigned long long)cols,
                (unsigned long long)ld);
        if (__builtin_mul_overflow(batch - 1, o->stride, &total) ||
            __builtin_add_overflow(total, one, &total))
            total = UINT64_MAX;
    }
    if (__builtin_mul_overflow(total, (uint64_t)esize, &bytes))
        bytes = UINT64_MAX;
    if (o->offset % esize != 0)
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "%s: offset %llu is not a multiple of %u, "
                                 "the size of one %s element",
                                 name, (unsigned long long)o->offset, esize,
                                 cumod__chan_gemm_type_name(t));
    /* Ownership and a lost context first, as for any buffer. */
    if ((rv = buf(arg, name, o->buffer, &dptr, &size, st)) != CUMOD_OK)
        return rv;
    if (o->offset > size || bytes > size - o->offset) {
        char what[200];
        if (batch > 1)
            snprintf(what, sizeof(what),
                     "%llu matrices of %llu x %llu %s, ld %llu, stride %llu",
                     (unsigned long long)batch, (unsigned long long)rows,
                     (unsigned long long)cols, cumod__chan_gemm_type_name(t),
                     (unsigned long long)ld, (unsigned long long)o->stride);
        else
            snprintf(what, sizeof(what), "%llu x %llu %s, ld %llu",
                     (unsigned long long)rows, (unsigned long long)cols,
                     cumod__chan_gemm_type_name(t), (unsigned long long)ld);
        if (bytes == UINT64_MAX)
            return cumod__status_set(st, CUMOD_EINVAL,
                                     "%s: %s is more bytes than any buffer "
                                     "holds",
                                     name, what);
        return cumod__status_set(
            st, CUMOD_EINVAL,
            "%s: needs %llu bytes at offset %llu (%s), buffer %llu holds "
            "%llu",
            name, (unsigned long long)bytes, (unsigned long long)o->offset,
            what, (unsigned long long)o->buffer, (unsigned long long)size);
    }
    *out = (gemm_op){.name = name,
                     .handle = o->buffer,
                     .offset = o->offset,
                     .bytes = bytes,
                     .dptr = dptr + o->offset,
                     .ld = ld,
                     .stride = batch > 1 ? o->stride : 0};
    return CUMOD_OK;
}

/* C is written while A and B are read: no byte of C may be one of
 * theirs. */
static cumod_err
gemm_overlap(const gemm_op *c, const gemm_op *x, cumod_status *st)
{
    if (c->handle != x->handle || c->offset >= x->offset + x->bytes ||
        x->offset >= c->offset + c->bytes)
        return CUMOD_OK;
    return cumod__status_set(
        st, CUMOD_EINVAL,
        "C overlaps %s in buffer %llu (bytes %llu-%llu and %llu-%llu): "
        "cuBLAS would read %s while it writes C",
        x->name, (unsigned long long)c->handle, (unsigned long long)c->offset,
        (unsigned long long)(c->offset + c->bytes - 1),
        (unsigned long long)x->offset,
        (unsigned long long)(x->offset + x->bytes - 1), x->name);
}

static cumod_err
gemm_dim(const char *name, uint64_t v, cumod_status *st)
{
    if (v == 0)
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "GEMM: %s is 0; m, n and k must be at least "
                                 "1",
                                 name);
    if (v > GEMM_INT_MAX)
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "GEMM: %s = %llu is above cuBLAS's limit of "
                                 "%llu",
                                 name, (unsigned long long)v, GEMM_INT_MAX);
    return CUMOD_OK;
}

cumod_err
cumod__gemm_check(const Cumod__Gemm *r, cumod_gemm_buf_fn buf, const void *arg,
                  cumod_chan_gemm *out, cumod_status *st)
{
    uint32_t t = (uint32_t)r->type;
    uint32_t ct = r->c_type ? (uint32_t)r->c_type : t;
    gemm_op a, b, c;
    cumod_err rv;

    if (r->type == CUMOD__GEMM_TYPE__GEMM_TYPE_UNSPECIFIED)
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "GEMM: no type given (FP32, FP64, FP16 or "
                                 "BF16)");
    if (cumod__chan_gemm_type_name(t) == NULL)
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "GEMM: type %d is not FP32, FP64, FP16 or "
                                 "BF16",
                                 (int)r->type);
    if (cumod__chan_gemm_type_name(ct) == NULL)
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "GEMM: C's type %d is not FP32, FP64, FP16 "
                                 "or BF16",
                                 (int)r->c_type);
    /* What cublasGemmEx computes: C of the inputs' type, or FP32 from FP16
     * and BF16 inputs (FP32 accumulation either way). */
    if (ct != t && !(ct == CUMOD_CHAN_GEMM_FP32 &&
                     (t == CUMOD_CHAN_GEMM_FP16 || t == CUMOD_CHAN_GEMM_BF16)))
        return cumod__status_set(st, CUMOD_ENOTSUP,
                                 "GEMM: %s inputs with a C of %s are not "
                                 "supported (C takes the inputs' type, or "
                                 "FP32 for FP16 and BF16 inputs)",
                                 cumod__chan_gemm_type_name(t),
                                 cumod__chan_gemm_type_name(ct));
    if (r->order != CUMOD__GEMM_ORDER__GEMM_ROW_MAJOR &&
        r->order != CUMOD__GEMM_ORDER__GEMM_COL_MAJOR)
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "GEMM: order %d is neither row-major (0) "
                                 "nor column-major (1)",
                                 (int)r->order);
    if ((rv = gemm_dim("m", r->m, st)) || (rv = gemm_dim("n", r->n, st)) ||
        (rv = gemm_dim("k", r->k, st)))
        return rv;
    if (r->batch > GEMM_INT_MAX)
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "GEMM: a batch of %u is above cuBLAS's "
                                 "limit",
                                 r->batch);
    /* The stored matrices: op(A) is m x k, op(B) k x n. */
    if ((rv = gemm_operand(buf, arg, r, "A", r->a, r->transa ? r->k : r->m,
                           r->transa ? r->m : r->k, t, 0, &a, st)) ||
        (rv = gemm_operand(buf, arg, r, "B", r->b, r->transb ? r->n : r->k,
                           r->transb ? r->k : r->n, t, 0, &b, st)) ||
        (rv =
             gemm_operand(buf, arg, r, "C", r->c, r->m, r->n, ct, 1, &c, st)) ||
        (rv = gemm_overlap(&c, &a, st)) || (rv = gemm_overlap(&c, &b, st)))
        return rv;

    int row_major = r->order == CUMOD__GEMM_ORDER__GEMM_ROW_MAJOR;
    const gemm_op *x = row_major ? &b : &a, *y = row_major ? &a : &b;
    *out = (cumod_chan_gemm){
        .type = t,
        .c_type = ct,
        .row_major = (uint32_t)row_major,
        .transa = row_major ? r->transb : r->transa,
        .transb = row_major ? r->transa : r->transb,
        .m = (int32_t)(row_major ? r->n : r->m),
        .n = (int32_t)(row_major ? r->m : r->n),
        .k = (int32_t)r->k,
        .batch = r->batch ? (int32_t)r->batch : 1,
        .lda = (int32_t)x->ld,
        .ldb = (int32_t)y->ld,
        .ldc = (int32_t)c.ld,
        .a = x->dptr,
        .b = y->dptr,
        .c = c.dptr,
        .stride_a = (int64_t)x->stride,
        .stride_b = (int64_t)y->stride,
        .stride_c = (int64_t)c.stride,
        .alpha = r->alpha,
        .beta = r->beta,
    };
    return CUMOD_OK;
}
