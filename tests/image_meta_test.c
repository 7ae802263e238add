/* SPDX-License-Identifier: MIT */
/*
 * cumod__imeta_describe (daemon/catalog/image/image_meta*.c): what it says of
 * every image the build makes, which fatbin entry it describes for which
 * device, PTX it must read right, and malformed tables it must refuse.
 * image_meta_driver_test.c checks the same images against the fake driver,
 * image_meta_robust_test.c against truncation and bit flips.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/image/image_meta.h"
#include "cumod/errors.h"
#include "harness.h"
#include "image_meta_test.h"

TH_SUITE_DRIVER(0);

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define K CUMOD_TEST_KERNEL_DIR
#define F CUMOD_TEST_FAKE_IMAGE_DIR
#define M CUMOD_TEST_META_DIR

const char *const mt_dirs[] = {K, F, M, NULL};

static cumod_image_kind
mt_kind(const char *name)
{
    size_t n = strlen(name);

    if (n > 4 && strcmp(name + n - 4, ".ptx") == 0)
        return CUMOD_IMAGE_PTX;
    if (n > 7 && strcmp(name + n - 7, ".fatbin") == 0)
        return CUMOD_IMAGE_FATBIN;
    return CUMOD_IMAGE_CUBIN;
}

static int
mt_try_read(const char *dir, const char *name, mt_file *f)
{
    char path[512];
    FILE *fp;
    long len;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if ((fp = fopen(path, "rb")) == NULL)
        return -1;
    fseek(fp, 0, SEEK_END);
    len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    f->bytes = malloc(len > 0 ? (size_t)len : 1);
    cr_assert_not_null(f->bytes);
    cr_assert_eq(fread(f->bytes, 1, (size_t)len, fp), (size_t)len, "%s", path);
    fclose(fp);
    f->len = (size_t)len;
    snprintf(f->name, sizeof(f->name), "%s", name);
    f->kind = mt_kind(name);
    return 0;
}

void
mt_read(const char *dir, const char *name, mt_file *f)
{
    char alt[160];
    size_t n = strlen(name);

    if (mt_try_read(dir, name, f) == 0)
        return;
    if (n > 6 && strcmp(name + n - 6, ".cubin") == 0) {
        snprintf(alt, sizeof(alt), "%.*s.sm_90.cubin", (int)(n - 6), name);
        if (mt_try_read(dir, alt, f) == 0)
            return;
    }
    cr_assert_fail("cannot read %s/%s", dir, name);
}

static int
mt_name_cmp(const void *a, const void *b)
{
    return strcmp(((const mt_file *)a)->name, ((const mt_file *)b)->name);
}

mt_file *
mt_read_all(size_t *n)
{
    mt_file *files = NULL;
    size_t cap = 0, first;
    struct dirent *e;
    DIR *d;

    *n = 0;
    for (int i = 0; mt_dirs[i] != NULL; i++) {
        cr_assert_not_null(d = opendir(mt_dirs[i]), "%s", mt_dirs[i]);
        first = *n;
        while ((e = readdir(d)) != NULL) {
            char stem[CUMOD_IMAGE_NAME_MAX + 1];
            cumod_image_kind kind;
            if (!cumod__image_name(e->d_name, stem, &kind))
                continue;
            if (*n == cap) {
                cap = cap ? cap * 2 : 32;
                cr_assert_not_null(files =
                                       realloc(files, cap * sizeof(*files)));
            }
            memset(&files[*n], 0, sizeof(files[*n]));
            if (mt_try_read(mt_dirs[i], e->d_name, &files[*n]) == 0)
                (*n)++;
        }
        closedir(d);
        qsort(files + first, *n - first, sizeof(*files), mt_name_cmp);
    }
    cr_assert_geq(*n, 20, "the build's images: only %zu found", *n);
    return files;
}

void
mt_free_all(mt_file *files, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(files[i].bytes);
    free(files);
}

/* ---- what each image holds ------------------------------------------- */

typedef struct want_kernel {
    const char *name; /* "*tail": the name ends so (hashed names) */
    int nparams;
    uint32_t p[8][2]; /* offset, size */
    int shared;
    int max_threads;
    uint32_t reqntid[3], cluster[3];
    int explicit_cluster;
} want_kernel;

typedef struct want_global {
    const char *name;
    uint64_t size;
    int constant;
} want_global;

typedef struct want_image {
    const char *dir, *file;
    cumod_imeta_source source;
    uint64_t const_bytes;
    int nkernels;
    want_kernel k[5];
    int nglobals;
    want_global g[4];
} want_image;

/* The tables below leave what is 0 unsaid. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define P4_8884                                                                \
    4,                                                                         \
    {                                                                          \
        {0, 8}, {8, 8}, {16, 8},                                               \
        {                                                                      \
            24, 4                                                              \
        }                                                                      \
    }
#define P4_8844                                                                \
    4,                                                                         \
    {                                                                          \
        {0, 8}, {8, 8}, {16, 4},                                               \
        {                                                                      \
            20, 4                                                              \
        }                                                                      \
    }

/* The expected kernels, as initializers: clang (the fuzz build) takes no
 * const object in a static initializer. */
#define VADD_K                                                                 \
    {                                                                          \
        "vadd", P4_8884                                                        \
    }
#define SCALE_K                                                                \
    {                                                                          \
        "scale", 3,                                                            \
        {                                                                      \
            {0, 8}, {8, 4},                                                    \
            {                                                                  \
                12, 4                                                          \
            }                                                                  \
        }                                                                      \
    }
#define BOUNDS_K0                                                              \
    {                                                                          \
        "bounded256", 2, {{0, 8}, {8, 4}}, .max_threads = 256                  \
    }
#define BOUNDS_K1                                                              \
    {                                                                          \
        "quad", 3, {{0, 8}, {8, 1}, {10, 2}},                                  \
            .shared = 64, .cluster = {2, 2, 1}, .explicit_cluster = 1          \
    }
#define LAUNCH_K0                                                              \
    {                                                                          \
        "fixed", 5, {{0, 1}, {16, 20}, {36, 2}, {40, 8}, {48, 4}},             \
            .shared = 160, .reqntid = {64, 2, 1}, .cluster = {                 \
                4,                                                             \
                1,                                                             \
                1                                                              \
            }                                                                  \
    }
#define LAUNCH_K1                                                              \
    {                                                                          \
        "capped", 1, {{0, 8}}, .max_threads = 512, .explicit_cluster = 1       \
    }
#define WIDE_K                                                                 \
    {                                                                          \
        "wide", 5,                                                             \
        {                                                                      \
            {0, 1}, {1, 5000}, {5008, 8}, {5016, 8},                           \
            {                                                                  \
                5024, 2                                                        \
            }                                                                  \
        }                                                                      \
    }
#define MULTI_K                                                                \
    {"zeta", 7, {{0, 1}, {2, 2}, {4, 4}, {8, 8}, {16, 4}, {24, 8}, {32, 8}}},  \
        {"alpha", 5, {{0, 3}, {8, 16}, {24, 1}, {32, 32}, {64, 8}}},           \
        {"middle", 2, {{0, 8}, {8, 4}}, .shared = 1024},                       \
        {"big", 2, {{0, 4000}, {4000, 8}}},                                    \
    {                                                                          \
        "bounded", 1, {{0, 8}}, .max_threads = 128                             \
    }

static const want_kernel multi_k[5] = {MULTI_K};

static const want_image wants[] = {
    {K, "vadd.cubin", CUMOD_IMETA_CUBIN, 0, 1, {VADD_K}},
    {K,
     "affine.cubin",
     CUMOD_IMETA_CUBIN,
     0,
     1,
     {{"affine", 3, {{0, 24}, {24, 8}, {32, 8}}}}},
    {K,
     "axpy.cubin",
     CUMOD_IMETA_CUBIN,
     0,
     2,
     {{"_Z4axpyIfEvT_PKS0_PS0_i", 4, {{0, 4}, {8, 8}, {16, 8}, {24, 4}}},
      {"_Z4axpyIdEvT_PKS0_PS0_i", P4_8884}}},
    {K,
     "linalg.cubin",
     CUMOD_IMETA_CUBIN,
     0,
     3,
     {{"_ZN6linalg4gemvIfLi4EEEvPKT_S3_PS1_ii",
       5,
       {{0, 8}, {8, 8}, {16, 8}, {24, 4}, {28, 4}}},
      {"_ZN6linalg7saxpy_vENS_4pairEPKfPfi", P4_8884},
      {"_ZN6linalg6detail5clampERKfPfi", 3, {{0, 8}, {8, 8}, {16, 4}}}}},
    {K, "bigshared.cubin", CUMOD_IMETA_CUBIN, 0, 1, {{"tile_sum", P4_8844}}},
    {K, "coop.cubin", CUMOD_IMETA_CUBIN, 0, 1, {{"grid_sum", P4_8884}}},
    {K,
     "cluster.cubin",
     CUMOD_IMETA_CUBIN,
     0,
     2,
     {{"cluster_pair",
       1,
       {{0, 8}},
       .shared = 4,
       .cluster = {2, 1, 1},
       .explicit_cluster = 1},
      {"cluster_any", 1, {{0, 8}}}}},
    {K,
     "table.cubin",
     CUMOD_IMETA_CUBIN,
     64,
     1,
     {{"lookup", P4_8844}},
     3,
     {{"table", 64, 1}, {"scale", 4, 0}, {"calls", 4, 0}}},
    {K, "empty.cubin", CUMOD_IMETA_CUBIN, 0, 1, {{"empty", 0}}},
    {K, "scale.cubin", CUMOD_IMETA_CUBIN, 0, 1, {SCALE_K}},
    {K, "scale_ptx.ptx", CUMOD_IMETA_PTX, 0, 1, {SCALE_K}},
    {K, "vadd_fat.fatbin", CUMOD_IMETA_FATBIN_CUBIN, 0, 1, {VADD_K}},
    {M,
     "bounds.cubin",
     CUMOD_IMETA_CUBIN,
     116,
     2,
     {BOUNDS_K0, BOUNDS_K1},
     4,
     {{"cfg", 16, 1}, {"banner", 100, 1}, {"hist", 264, 0}, {"hits", 4, 0}}},
    {M,
     "bounds.ptx",
     CUMOD_IMETA_PTX,
     116,
     2,
     {BOUNDS_K0, BOUNDS_K1},
     4,
     {{"cfg", 16, 1}, {"banner", 100, 1}, {"hist", 264, 0}, {"hits", 4, 0}}},
    {M,
     "launch.cubin",
     CUMOD_IMETA_CUBIN,
     40,
     2,
     {LAUNCH_K0, LAUNCH_K1},
     4,
     {{"coeffs", 40, 1}, {"flags", 10, 0}, {"counter", 8, 0}, {"lut", 48, 0}}},
    {M,
     "launch.ptx",
     CUMOD_IMETA_PTX,
     40,
     2,
     {LAUNCH_K0, LAUNCH_K1},
     4,
     {{"counter", 8, 0}, {"lut", 48, 0}, {"coeffs", 40, 1}, {"flags", 10, 0}}},
    {M, "bigparam.cubin", CUMOD_IMETA_CUBIN, 0, 1, {WIDE_K}},
    {M, "bigparam.ptx", CUMOD_IMETA_PTX, 0, 1, {WIDE_K}},
    {M,
     "linkage.cubin",
     CUMOD_IMETA_CUBIN,
     0,
     3,
     {{"shown", 1, {{0, 8}}},
      {"*__Z6hiddenPf", 1, {{0, 8}}},
      {"*7unnamedEPfi", 2, {{0, 8}, {8, 4}}}}},
    {F, "fake_multi.cubin", CUMOD_IMETA_CUBIN, 0, 5, {MULTI_K}},
    {F, "fake_multi.ptx", CUMOD_IMETA_PTX, 0, 5, {MULTI_K}},
    {F, "fake_multi.fatbin", CUMOD_IMETA_FATBIN_CUBIN, 0, 5, {MULTI_K}},
    {F, "vadd.sm_90a.cubin", CUMOD_IMETA_CUBIN, 0, 1, {VADD_K}},
};

static int
name_is(const char *want, const char *got)
{
    size_t n = strlen(got), m;

    if (want[0] != '*')
        return strcmp(want, got) == 0;
    m = strlen(want + 1);
    return n >= m && strcmp(got + n - m, want + 1) == 0;
}

static void
expect_image(const want_image *w, const cumod_imeta *m)
{
    int ptx =
        m->source == CUMOD_IMETA_PTX || m->source == CUMOD_IMETA_FATBIN_PTX;

    cr_expect_eq(m->source, w->source, "%s: source %s", w->file,
                 cumod__imeta_source_name(m->source));
    cr_expect_eq(m->source_sm, 90, "%s: sm %u", w->file, m->source_sm);
    cr_expect_eq(m->const_bytes, w->const_bytes, "%s: const %llu", w->file,
                 (unsigned long long)m->const_bytes);
    cr_assert_eq(m->nkernels, (size_t)w->nkernels, "%s: %zu kernels", w->file,
                 m->nkernels);
    for (int i = 0; i < w->nkernels; i++) {
        const want_kernel *wk = &w->k[i];
        const cumod_kdesc *k = &m->kernels[i];
        cr_expect(name_is(wk->name, k->name), "%s: kernel %d is %s, not %s",
                  w->file, i, k->name, wk->name);
        cr_assert_eq(k->nparams, (uint32_t)wk->nparams, "%s: %s: %u params",
                     w->file, k->name, k->nparams);
        for (int j = 0; j < wk->nparams; j++)
            cr_expect(k->params[j].offset == wk->p[j][0] &&
                          k->params[j].size == wk->p[j][1],
                      "%s: %s: param %d at %u size %u, not %u size %u", w->file,
                      k->name, j, k->params[j].offset, k->params[j].size,
                      wk->p[j][0], wk->p[j][1]);
        cr_expect_eq(k->static_shared, wk->shared, "%s: %s: shared %d", w->file,
                     k->name, k->static_shared);
        /* The register counts are ptxas's choice: only whether known. */
        if (ptx)
            cr_expect_eq(k->registers, -1, "%s: %s", w->file, k->name);
        else
            cr_expect_gt(k->registers, 0, "%s: %s", w->file, k->name);
        cr_expect_eq(k->max_threads, wk->max_threads, "%s: %s: max %d", w->file,
                     k->name, k->max_threads);
        cr_expect_arr_eq(k->reqntid, wk->reqntid, sizeof(k->reqntid),
                         "%s: %s: reqntid %u %u %u", w->file, k->name,
                         k->reqntid[0], k->reqntid[1], k->reqntid[2]);
        cr_expect_arr_eq(k->cluster, wk->cluster, sizeof(k->cluster),
                         "%s: %s: cluster %u %u %u", w->file, k->name,
                         k->cluster[0], k->cluster[1], k->cluster[2]);
        cr_expect_eq(k->cluster_explicit, wk->explicit_cluster, "%s: %s",
                     w->file, k->name);
    }
    cr_assert_eq(m->nglobals, (size_t)w->nglobals, "%s: %zu globals", w->file,
                 m->nglobals);
    for (int i = 0; i < w->nglobals; i++)
        cr_expect(strcmp(m->globals[i].name, w->g[i].name) == 0 &&
                      m->globals[i].size == w->g[i].size &&
                      m->globals[i].constant == w->g[i].constant,
                  "%s: global %d is %s (%llu bytes, constant %d), not %s",
                  w->file, i, m->globals[i].name,
                  (unsigned long long)m->globals[i].size,
                  m->globals[i].constant, w->g[i].name);
}

Test(image_meta, every_image_described_as_built)
{
    for (size_t i = 0; i < N(wants); i++) {
        mt_file f;
        cumod_imeta m;
        char msg[512] = "";
        mt_read(wants[i].dir, wants[i].file, &f);
        cr_assert_eq(cumod__imeta_describe(f.bytes, f.len, f.kind, f.name, 9, 0,
                                           &m, msg, sizeof(msg)),
                     CUMOD_OK, "%s: %s", f.name, msg);
        expect_image(&wants[i], &m);
        cumod__imeta_fini(&m);
        cr_expect_eq(m.nkernels, 0);
        cr_expect_null(m.kernels);
        free(f.bytes);
    }
}

/* The description of image name on device major.minor: its code, and its
 * source and SM where described. */
static cumod_err
describe_on(const char *dir, const char *name, unsigned major, unsigned minor,
            cumod_imeta *m, char *msg, size_t msglen)
{
    mt_file f;
    cumod_err rc;

    mt_read(dir, name, &f);
    memset(m, 0, sizeof(*m));
    rc = cumod__imeta_describe(f.bytes, f.len, f.kind, f.name, major, minor, m,
                               msg, msglen);
    free(f.bytes);
    return rc;
}

Test(image_meta, fatbin_entry_picked_as_the_driver_picks)
{
    static const struct {
        const char *dir, *file;
        unsigned major, minor;
        cumod_err rc;
        cumod_imeta_source source;
        unsigned sm;
    } cases[] = {
        /* SASS of the device's major SM, the highest minor not above. */
        {K, "vadd_fat.fatbin", 9, 0, CUMOD_OK, CUMOD_IMETA_FATBIN_CUBIN, 90},
        {K, "vadd_fat.fatbin", 8, 0, CUMOD_OK, CUMOD_IMETA_FATBIN_CUBIN, 80},
        {K, "vadd_fat.fatbin", 8, 6, CUMOD_OK, CUMOD_IMETA_FATBIN_CUBIN, 80},
        /* No SASS for the major SM: the PTX, compiled by the JIT. */
        {K, "vadd_fat.fatbin", 10, 0, CUMOD_OK, CUMOD_IMETA_FATBIN_PTX, 90},
        {K, "vadd_fat.fatbin", 12, 0, CUMOD_OK, CUMOD_IMETA_FATBIN_PTX, 90},
        {F, "fake_multi.fatbin", 10, 0, CUMOD_OK, CUMOD_IMETA_FATBIN_PTX, 90},
        /* Nothing for an older device; a fatbin needs to know the device. */
        {K, "vadd_fat.fatbin", 7, 5, CUMOD_EIMAGE, 0, 0},
        {K, "vadd_fat.fatbin", 0, 0, CUMOD_EINVAL, 0, 0},
        /* nvcc's default compresses the PTX: the SASS is still read. */
        {F, "vadd_zstd.fatbin", 9, 0, CUMOD_OK, CUMOD_IMETA_FATBIN_CUBIN, 90},
        {F, "vadd_zstd.fatbin", 10, 0, CUMOD_ENOTSUP, 0, 0},
        /* Cubins: the image check's rules. */
        {F, "vadd.sm_80.cubin", 9, 0, CUMOD_EIMAGE, 0, 0},
        {F, "vadd.sm_80.cubin", 8, 6, CUMOD_OK, CUMOD_IMETA_CUBIN, 80},
        {F, "vadd.sm_90a.cubin", 10, 0, CUMOD_EIMAGE, 0, 0},
        {F, "vadd.sm_90a.cubin", 0, 0, CUMOD_OK, CUMOD_IMETA_CUBIN, 90},
        {F, "vadd.sm_100.cubin", 10, 3, CUMOD_OK, CUMOD_IMETA_CUBIN, 100},
    };
    for (size_t i = 0; i < N(cases); i++) {
        cumod_imeta m;
        char msg[512] = "";
        cumod_err rc = describe_on(cases[i].dir, cases[i].file, cases[i].major,
                                   cases[i].minor, &m, msg, sizeof(msg));
        cr_expect_eq(rc, cases[i].rc, "%s on %u.%u: %s: %s", cases[i].file,
                     cases[i].major, cases[i].minor, cumod_errname(rc), msg);
        if (rc == CUMOD_OK) {
            cr_expect_eq(m.source, cases[i].source, "%s on %u.%u: %s",
                         cases[i].file, cases[i].major, cases[i].minor,
                         cumod__imeta_source_name(m.source));
            cr_expect_eq(m.source_sm, cases[i].sm, "%s on %u.%u: sm %u",
                         cases[i].file, cases[i].major, cases[i].minor,
                         m.source_sm);
            cr_expect_geq(m.nkernels, 1);
            cr_expect(m.source == CUMOD_IMETA_FATBIN_CUBIN ||
                              m.source == CUMOD_IMETA_FATBIN_PTX
                          ? m.source_offset >= 16
                          : m.source_offset == 0);
        } else {
            cr_expect_eq(strncmp(msg, cases[i].file, strlen(cases[i].file)), 0,
                         "the message names the image: %s", msg);
        }
        cumod__imeta_fini(&m);
    }
    cumod_imeta m;
    char msg[512];
    cr_expect_eq(
        describe_on(F, "vadd_zstd.fatbin", 10, 0, &m, msg, sizeof(msg)),
        CUMOD_ENOTSUP);
    cr_expect_not_null(strstr(msg, "not described: compressed"), "%s", msg);
    cr_expect_not_null(strstr(msg, "compute_90 PTX"), "%s", msg);
}

Test(image_meta, fatbin_ptx_entry_described_as_ptx)
{
    cumod_imeta m;
    char msg[512] = "";

    cr_assert_eq(
        describe_on(F, "fake_multi.fatbin", 10, 0, &m, msg, sizeof(msg)),
        CUMOD_OK, "%s", msg);
    cr_assert_eq(m.nkernels, 5);
    for (size_t i = 0; i < m.nkernels; i++) {
        cr_expect_eq(m.kernels[i].registers, -1, "%s", m.kernels[i].name);
        cr_expect_eq(m.kernels[i].static_shared, multi_k[i].shared, "%s",
                     m.kernels[i].name);
    }
    cumod__imeta_fini(&m);
}

Test(image_meta, refuses_what_it_cannot_describe)
{
    cumod_imeta m;
    char msg[256];
    const uint8_t b[1] = {0};

    cr_expect_eq(cumod__imeta_describe(NULL, 10, CUMOD_IMAGE_CUBIN, "x", 9, 0,
                                       &m, msg, sizeof(msg)),
                 CUMOD_EINVAL);
    cr_expect_eq(cumod__imeta_describe(b, 1, CUMOD_IMAGE_CUBIN, "x", 9, 0, NULL,
                                       msg, sizeof(msg)),
                 CUMOD_EINVAL);
    cr_expect_eq(cumod__imeta_describe(b, 0, CUMOD_IMAGE_CUBIN, "x", 9, 0, &m,
                                       msg, sizeof(msg)),
                 CUMOD_EIMAGE);
    cr_expect_eq(strncmp(msg, "x is empty", 10), 0, "%s", msg);
    cr_expect_eq(cumod__imeta_describe(b, 1, (cumod_image_kind)7, "x", 9, 0, &m,
                                       msg, sizeof(msg)),
                 CUMOD_EINVAL);
    /* msg may be NULL when msglen is 0; a NULL name reads "the image". */
    cr_expect_eq(
        cumod__imeta_describe(b, 1, CUMOD_IMAGE_CUBIN, NULL, 9, 0, &m, NULL, 0),
        CUMOD_EIMAGE);
    cr_expect_eq(cumod__imeta_describe(b, 1, CUMOD_IMAGE_CUBIN, NULL, 9, 0, &m,
                                       msg, sizeof(msg)),
                 CUMOD_EIMAGE);
    cr_expect_eq(strncmp(msg, "the image", 9), 0, "%s", msg);
    cumod__imeta_fini(NULL);
    memset(&m, 0, sizeof(m));
    cumod__imeta_fini(&m);
}

Test(image_meta, names_of_sources)
{
    cr_expect_str_eq(cumod__imeta_source_name(CUMOD_IMETA_CUBIN), "cubin");
    cr_expect_str_eq(cumod__imeta_source_name(CUMOD_IMETA_PTX), "ptx");
    cr_expect_str_eq(cumod__imeta_source_name(CUMOD_IMETA_FATBIN_CUBIN),
                     "fatbin cubin");
    cr_expect_str_eq(cumod__imeta_source_name(CUMOD_IMETA_FATBIN_PTX),
                     "fatbin ptx");
    cr_expect_str_eq(cumod__imeta_source_name((cumod_imeta_source)9), "?");
}
