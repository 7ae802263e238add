/* SPDX-License-Identifier: MIT */
#include "gemm_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t
gm_esize(cumod_gemm_type t)
{
    return t == CUMOD_GEMM_FP64 ? 8 : t == CUMOD_GEMM_FP32 ? 4 : 2;
}

const char *
gm_type_name(cumod_gemm_type t)
{
    switch (t) {
    case CUMOD_GEMM_FP32:
        return "FP32";
    case CUMOD_GEMM_FP64:
        return "FP64";
    case CUMOD_GEMM_FP16:
        return "FP16";
    case CUMOD_GEMM_BF16:
        return "BF16";
    }
    return "?";
}

static uint16_t
gm_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    float a = fabsf(f);
    if (isnan(f))
        return sign | 0x7e00;
    if (a >= 65520.0f)
        return sign | 0x7c00;
    if (a < ldexpf(1.0f, -14))
        return sign | (uint16_t)nearbyintf(a * ldexpf(1.0f, 24));
    int e;
    float q = nearbyintf(frexpf(a, &e) * 2048.0f);
    if (q >= 2048.0f) {
        q /= 2.0f;
        e++;
    }
    return sign | (uint16_t)((uint32_t)(e + 14) << 10) |
           (uint16_t)((uint32_t)q - 1024);
}

static float
gm_unhalf(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float v = e == 0      ? ldexpf((float)m, -24)
              : e == 0x1f ? (m ? NAN : INFINITY)
                          : ldexpf((float)(m | 0x400), e - 25);
    return (h & 0x8000) ? -v : v;
}

static uint16_t
gm_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    if (isnan(f))
        return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

void
gm_store(cumod_gemm_type t, void *p, size_t i, double v)
{
    char *at = (char *)p + i * gm_esize(t);
    float f = (float)v;
    uint16_t h;
    switch (t) {
    case CUMOD_GEMM_FP64:
        memcpy(at, &v, 8);
        return;
    case CUMOD_GEMM_FP32:
        memcpy(at, &f, 4);
        return;
    case CUMOD_GEMM_FP16:
        h = gm_half(f);
        memcpy(at, &h, 2);
        return;
    case CUMOD_GEMM_BF16:
        h = gm_bf16(f);
        memcpy(at, &h, 2);
        return;
    }
}

double
gm_load(cumod_gemm_type t, const void *p, size_t i)
{
    const char *at = (const char *)p + i * gm_esize(t);
    double d;
    float f;
    uint16_t h;
    uint32_t x;
    switch (t) {
    case CUMOD_GEMM_FP64:
        memcpy(&d, at, 8);
        return d;
    case CUMOD_GEMM_FP32:
        memcpy(&f, at, 4);
        return f;
    case CUMOD_GEMM_FP16:
        memcpy(&h, at, 2);
        return gm_unhalf(h);
    case CUMOD_GEMM_BF16:
        memcpy(&h, at, 2);
        x = (uint32_t)h << 16;
        memcpy(&f, &x, 4);
        return f;
    }
    return NAN;
}

/* A small multiple of 1/4 in [-2, 2], exact in every type. */
static double
gm_value(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return (double)((int)((*seed >> 16) % 17) - 8) / 4.0;
}

/* Element (i, j) of a stored matrix: its index in the buffer. */
static size_t
gm_index(cumod_gemm_order o, size_t ld, size_t i, size_t j)
{
    return o == CUMOD_GEMM_ROW_MAJOR ? i * ld + j : i + j * ld;
}

void
gm_case_name(const gm_case *k, char *out, size_t len)
{
    snprintf(out, len,
             "%s%s%s %s %s%s m %zu n %zu k %zu batch %zu alpha %g beta %g",
             gm_type_name(k->type), k->c_type ? " to " : "",
             k->c_type ? gm_type_name(k->c_type) : "",
             k->order == CUMOD_GEMM_ROW_MAJOR ? "row-major" : "column-major",
             k->transa ? "A^T" : "A", k->transb ? " B^T" : " B", k->m, k->n,
             k->k, k->batch ? k->batch : 1, k->alpha, k->beta);
}

int
gm_host_make(gm_host *h, const gm_case *k, unsigned seed)
{
    size_t batch = k->batch ? k->batch : 1;
    cumod_gemm_type ct = k->c_type ? k->c_type : k->type;
    cumod_gemm_type types[3] = {k->type, k->type, ct};
    int row = k->order == CUMOD_GEMM_ROW_MAJOR;
    /* Stored rows and columns of A, B, C. */
    size_t rows[3] = {k->transa ? k->k : k->m, k->transb ? k->n : k->k, k->m};
    size_t cols[3] = {k->transa ? k->m : k->k, k->transb ? k->k : k->n, k->n};
    size_t pad[3] = {k->pad_a, k->pad_b, k->pad_c};
    size_t off[3] = {k->off_a, k->off_b, k->off_c};
    size_t gap[3] = {k->gap_a, k->gap_b, k->gap_c};
    int share[3] = {k->share_a, k->share_b, 0};

    memset(h, 0, sizeof(*h));
    h->k = *k;
    for (int x = 0; x < 3; x++) {
        size_t lead = row ? cols[x] : rows[x], outer = row ? rows[x] : cols[x];
        size_t one = (outer - 1) * (lead + pad[x]) + lead;
        h->ld[x] = lead + pad[x];
        h->stride[x] = batch > 1 && !share[x] ? one + gap[x] : 0;
        h->elems[x] = off[x] + (batch - 1) * h->stride[x] + one;
        if ((h->bytes[x] = calloc(h->elems[x], gm_esize(types[x]))) == NULL)
            return -1;
        /* Everything gets a value; C's matrices are overwritten below,
         * the rest of C's buffer must stay. */
        for (size_t i = 0; i < h->elems[x]; i++)
            gm_store(types[x], h->bytes[x], i, gm_value(&seed));
    }
    h->want = calloc(h->elems[2], sizeof(double));
    h->scale = calloc(h->elems[2], sizeof(double));
    if (h->want == NULL || h->scale == NULL)
        return -1;
    for (size_t i = 0; i < h->elems[2]; i++)
        h->want[i] = gm_load(ct, h->bytes[2], i);
    for (size_t b = 0; b < batch; b++) {
        size_t base[3];
        for (int x = 0; x < 3; x++)
            base[x] = off[x] + b * h->stride[x];
        for (size_t i = 0; i < k->m; i++)
            for (size_t j = 0; j < k->n; j++) {
                double acc = 0, mag = 0;
                for (size_t p = 0; p < k->k; p++) {
                    size_t ai = k->transa ? gm_index(k->order, h->ld[0], p, i)
                                          : gm_index(k->order, h->ld[0], i, p);
                    size_t bi = k->transb ? gm_index(k->order, h->ld[1], j, p)
                                          : gm_index(k->order, h->ld[1], p, j);
                    double av = gm_load(k->type, h->bytes[0], base[0] + ai);
                    double bv = gm_load(k->type, h->bytes[1], base[1] + bi);
                    acc += av * bv;
                    mag += fabs(av * bv);
                }
                size_t ci = base[2] + gm_index(k->order, h->ld[2], i, j);
                double cv = gm_load(ct, h->bytes[2], ci);
                h->want[ci] =
                    k->alpha * acc + (k->beta != 0 ? k->beta * cv : 0);
                h->scale[ci] = fabs(k->alpha) * mag +
                               (k->beta != 0 ? fabs(k->beta * cv) : 0) + 1e-30;
            }
    }
    return 0;
}

void
gm_host_free(gm_host *h)
{
    for (int x = 0; x < 3; x++)
        free(h->bytes[x]);
    free(h->want);
    free(h->scale);
    memset(h, 0, sizeof(*h));
}

cumod_gemm_desc
gm_desc(const gm_host *h, cumod_buffer a, cumod_buffer b, cumod_buffer c)
{
    const gm_case *k = &h->k;
    cumod_gemm_type ct = k->c_type ? k->c_type : k->type;
    cumod_gemm_desc d = {
        .type = k->type,
        .c_type = k->c_type,
        .order = k->order,
        .transa = k->transa,
        .transb = k->transb,
        .m = k->m,
        .n = k->n,
        .k = k->k,
        .alpha = k->alpha,
        .beta = k->beta,
        .a = {a, k->off_a * gm_esize(k->type), h->ld[0], h->stride[0]},
        .b = {b, k->off_b * gm_esize(k->type), h->ld[1], h->stride[1]},
        .c = {c, k->off_c * gm_esize(ct), h->ld[2], h->stride[2]},
        .batch = k->batch,
    };
    return d;
}

double
gm_tolerance(cumod_gemm_type c_type, int real_gpu)
{
    /* One rounding to C's type after FP32 (FP64) sums, against the size of
     * the terms; a GPU sums in its own order, on tensor cores. */
    switch (c_type) {
    case CUMOD_GEMM_FP64:
        return 1e-12;
    case CUMOD_GEMM_FP32:
        return real_gpu ? 1e-4 : 1e-6;
    case CUMOD_GEMM_FP16:
        return real_gpu ? 2e-3 : 1e-3;
    case CUMOD_GEMM_BF16:
        return real_gpu ? 1.6e-2 : 8e-3;
    }
    return 0;
}

size_t
gm_compare(const gm_host *h, const void *got, double rel, char *why,
           size_t whylen)
{
    cumod_gemm_type ct = h->k.c_type ? h->k.c_type : h->k.type;
    size_t bad = 0, at = 0;
    if (why != NULL && whylen > 0)
        why[0] = '\0';
    for (size_t i = 0; i < h->elems[2]; i++) {
        double g = gm_load(ct, got, i);
        int in = h->scale[i] != 0;
        int ok =
            in ? fabs(g - h->want[i]) <= rel * h->scale[i] : g == h->want[i];
        if (ok)
            continue;
        if (bad++ < 4 && why != NULL && at < whylen)
            at += (size_t)snprintf(
                why + at, whylen - at, "%s[%zu] %s: %g, want %g; ",
                bad == 1 ? "C" : "", i, in ? "in C" : "outside C's matrices", g,
                h->want[i]);
    }
    return bad;
}

long
gm_run(cumod_client *c, const gm_case *k, unsigned seed, cumod_stream stream,
       double rel, char *why, size_t whylen)
{
    cumod_gemm_type ct = k->c_type ? k->c_type : k->type;
    size_t esz[3] = {gm_esize(k->type), gm_esize(k->type), gm_esize(ct)};
    cumod_buffer buf[3] = {0, 0, 0};
    const char *failed = NULL;
    void *got = NULL;
    long bad = -1;
    gm_host h;

    if (gm_host_make(&h, k, seed) != 0) {
        snprintf(why, whylen, "out of host memory");
        gm_host_free(&h);
        return -1;
    }
    for (int x = 0; x < 3 && failed == NULL; x++)
        if (cumod_buffer_alloc(c, h.elems[x] * esz[x], &buf[x]) != CUMOD_OK ||
            cumod_buffer_write(c, buf[x], 0, h.bytes[x], h.elems[x] * esz[x],
                               stream) != CUMOD_OK)
            failed = "uploading";
    cumod_gemm_desc d = gm_desc(&h, buf[0], buf[1], buf[2]);
    d.stream = stream;
    if (failed == NULL && cumod_gemm(c, &d, NULL) != CUMOD_OK)
        failed = "cumod_gemm";
    if (failed == NULL &&
        ((got = malloc(h.elems[2] * esz[2])) == NULL ||
         cumod_buffer_read(c, buf[2], 0, got, h.elems[2] * esz[2], stream) !=
             CUMOD_OK))
        failed = "reading C";
    if (failed != NULL)
        snprintf(why, whylen, "%s: %s", failed, cumod_last_detail());
    else
        bad = (long)gm_compare(&h, got, rel, why, whylen);
    for (int x = 0; x < 3; x++)
        if (buf[x] != 0)
            (void)cumod_buffer_free(c, buf[x]);
    free(got);
    gm_host_free(&h);
    return bad;
}
