/* SPDX-License-Identifier: MIT */
/*
 * The kernels people ship, end to end on the fake driver (and, compiled
 * as tests/gpu/gpu_kernels_test, on the real one, where the numbers are
 * checked): more than 48 KiB of dynamic shared memory, thread block
 * clusters, cooperative launches, carveouts, module globals kept across
 * hot reloads, and C++ signatures in messages and in `show`.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumod/cumod.h"
#include "fixture.h"

#ifndef CUMOD_TEST_REAL_GPU
TH_SUITE_DRIVER(0);
#else
TH_SUITE_DRIVER(1);
#endif

typedef th_env kt;

static void
kt_start(kt *t, const char *const *kernels)
{
    th_env_init(t, kernels);
    th_env_start(t, NULL, NULL);
}

/* A fake-driver log check (skipped on the real driver). */
static int
kt_log_has(kt *t, const char *needle)
{
    if (th_real_gpu())
        return 1;
    char *fl = th_read_file(t->fake_log);
    int in = fl && strstr(fl, needle);
    free(fl);
    return in;
}

static cumod_buffer
kt_alloc(kt *t, size_t bytes, const void *init)
{
    cumod_buffer b;
    cr_assert_eq(cumod_buffer_alloc(t->c, bytes, &b), CUMOD_OK, "%s",
                 cumod_last_detail());
    if (init != NULL)
        cr_assert_eq(cumod_buffer_write(t->c, b, 0, init, bytes, 0), CUMOD_OK,
                     "%s", cumod_last_detail());
    else
        cr_assert_eq(cumod_buffer_memset(t->c, b, 0, bytes, 0, 0, NULL),
                     CUMOD_OK);
    return b;
}

Test(kernels, more_than_48k_of_dynamic_shared_memory_up_to_the_optin_limit,
     .timeout = 120)
{
    kt t;
    cumod_device_info di;
    enum { THREADS = 256, PER = 100, N = THREADS * PER * 4 };
    kt_start(&t, (const char *const[]){"bigshared", NULL});
    cr_assert_eq(cumod_device_info_get(t.c, &di), CUMOD_OK);
    float *in = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++)
        in[i] = (float)(i % 7);
    cumod_buffer bin = kt_alloc(&t, N * sizeof(float), in);
    cumod_buffer bpart = kt_alloc(&t, 4 * sizeof(float), NULL);
    cumod_arg args[] = {cumod_arg_buffer(bin, 0), cumod_arg_buffer(bpart, 0),
                        cumod_arg_i32(N), cumod_arg_i32(PER)};
    /* A tile of 256 x 100 floats: 102400 bytes, past 48 KiB. */
    cumod_launch_params p = {.kernel = "bigshared:tile_sum",
                             .grid = {4, 1, 1},
                             .block = {THREADS, 1, 1},
                             .shared_mem = THREADS * PER * sizeof(float),
                             .nargs = 4,
                             .args = args};
    cr_assert_eq(cumod_launch(t.c, &p, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect(kt_log_has(&t, "setattr fn=tile_sum attr=8 value=102400"),
              "the executor raised the kernel's limit first");
    cr_expect(kt_log_has(&t, "launch fn=tile_sum module="), "and launched it");
    if (th_real_gpu()) {
        float part[4];
        cr_assert_eq(cumod_buffer_read(t.c, bpart, 0, part, sizeof(part), 0),
                     CUMOD_OK);
        for (int b = 0; b < 4; b++) {
            double want = 0;
            for (int i = b * THREADS * PER; i < (b + 1) * THREADS * PER; i++)
                want += in[i];
            cr_expect(fabs(part[b] - want) < 1e-3 * want + 1,
                      "block %d: %f, "
                      "want %f",
                      b, part[b], want);
        }
    }
    /* The most the device allows: its opt-in limit (less no static). */
    p.shared_mem = di.total_memory ? 232448 : 232448;
    args[3] = cumod_arg_i32((int)(232448 / sizeof(float) / THREADS));
    cr_expect_eq(cumod_launch(t.c, &p, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    /* Past it: refused with the figures, and nothing launched. */
    p.shared_mem = 232448 + 4;
    cr_expect_eq(cumod_launch(t.c, &p, NULL, NULL), CUMOD_EINVAL);
    cr_expect(strstr(cumod_last_detail(),
                     "tile_sum: 232452 bytes of dynamic shared memory and its "
                     "0 static are above the device's 232448 per block"),
              "%s", cumod_last_detail());
    free(in);
    th_env_stop(&t);
}

Test(kernels, clusters_compiled_and_asked_at_launch, .timeout = 120)
{
    kt t;
    kt_start(&t, (const char *const[]){"cluster", NULL});
    cumod_buffer out = kt_alloc(&t, 64 * 3 * sizeof(int), NULL);
    cumod_arg args[] = {cumod_arg_buffer(out, 0)};
    /* cluster_pair is compiled for clusters of 2: it launches so. */
    cumod_launch_params p = {.kernel = "cluster:cluster_pair",
                             .grid = {8, 1, 1},
                             .block = {32, 1, 1},
                             .nargs = 1,
                             .args = args};
    cr_assert_eq(cumod_launch(t.c, &p, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    if (th_real_gpu()) {
        int got[8 * 3];
        cr_assert_eq(cumod_buffer_read(t.c, out, 0, got, sizeof(got), 0),
                     CUMOD_OK);
        for (int b = 0; b < 8; b++) {
            cr_expect_eq(got[3 * b], b % 2, "block %d's rank", b);
            cr_expect_eq(got[3 * b + 1], 2, "clusters of 2");
            cr_expect_eq(got[3 * b + 2], (b ^ 1) * 10,
                         "block %d read its partner's shared memory", b);
        }
    }
    cumod_launch_attrs at = {.cluster = {4, 1, 1}, .carveout = -1};
    cr_expect_eq(cumod_launch_v2(t.c, &p, &at, NULL, NULL), CUMOD_EINVAL);
    cr_expect(strstr(cumod_last_detail(),
                     "cluster_pair was compiled for clusters of 2x1x1 "
                     "(__cluster_dims__); the launch asks 4x1x1"),
              "%s", cumod_last_detail());
    p.grid.x = 7;
    cr_expect_eq(cumod_launch(t.c, &p, NULL, NULL), CUMOD_EINVAL);
    cr_expect(strstr(cumod_last_detail(), "cluster.x = 2 does not divide "
                                          "grid.x = 7"),
              "%s", cumod_last_detail());

    /* cluster_any takes its shape at launch, up to 16 (non-portable). */
    p.kernel = "cluster:cluster_any";
    p.grid.x = 16;
    at.cluster = (cumod_dim3){4, 1, 1};
    cr_assert_eq(cumod_launch_v2(t.c, &p, &at, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect(kt_log_has(&t, "launch fn=cluster_any") &&
                  kt_log_has(&t, " cluster=4,1,1"),
              "cuLaunchKernelEx with the cluster");
    if (th_real_gpu()) {
        int got[16 * 2];
        cr_assert_eq(cumod_buffer_read(t.c, out, 0, got, sizeof(got), 0),
                     CUMOD_OK);
        for (int b = 0; b < 16; b++) {
            cr_expect_eq(got[2 * b], b % 4);
            cr_expect_eq(got[2 * b + 1], 4);
        }
    }
    at.cluster = (cumod_dim3){16, 1, 1};
    cr_expect_eq(cumod_launch_v2(t.c, &p, &at, NULL, NULL), CUMOD_OK,
                 "a non-portable cluster of 16: %s", cumod_last_detail());
    cr_expect(kt_log_has(&t, "setattr fn=cluster_any attr=") &&
                  kt_log_has(&t, " cluster=16,1,1"),
              "non-portable sizes allowed for it first");
    at.cluster = (cumod_dim3){32, 1, 1};
    p.grid.x = 32;
    cr_expect_eq(cumod_launch_v2(t.c, &p, &at, NULL, NULL), CUMOD_EINVAL);
    cr_expect(strstr(cumod_last_detail(), "a cluster of 32 blocks is above"),
              "%s", cumod_last_detail());
    th_env_stop(&t);
}

Test(kernels, a_cooperative_launch_synchronizes_its_grid_or_is_refused,
     .timeout = 120)
{
    kt t;
    cumod_device_info di;
    enum { N = 100000 };
    kt_start(&t, (const char *const[]){"coop", NULL});
    cr_assert_eq(cumod_device_info_get(t.c, &di), CUMOD_OK);
    int *in = malloc(N * sizeof(int));
    long long want = 0;
    for (int i = 0; i < N; i++) {
        in[i] = i % 13;
        want += in[i];
    }
    cumod_buffer bin = kt_alloc(&t, N * sizeof(int), in);
    cumod_buffer parts = kt_alloc(&t, 4096 * sizeof(int), NULL);
    cumod_buffer out = kt_alloc(&t, sizeof(int), NULL);
    cumod_arg args[] = {cumod_arg_buffer(bin, 0), cumod_arg_buffer(parts, 0),
                        cumod_arg_buffer(out, 0), cumod_arg_i32(N)};
    cumod_launch_params p = {.kernel = "coop:grid_sum",
                             .grid = {di.multiprocessors, 1, 1},
                             .block = {256, 1, 1},
                             .nargs = 4,
                             .args = args};
    cumod_launch_attrs at = {.cooperative = 1, .carveout = -1};
    cr_assert_eq(cumod_launch_v2(t.c, &p, &at, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect(kt_log_has(&t, " cooperative=1"));
    if (th_real_gpu()) {
        int got = 0;
        cr_assert_eq(cumod_buffer_read(t.c, out, 0, &got, sizeof(got), 0),
                     CUMOD_OK);
        cr_expect_eq(got, (int)want, "the grid-wide sum");
    }
    /* A grid larger than can be resident at once. */
    p.grid.x = di.multiprocessors * 64;
    cr_expect_eq(cumod_launch_v2(t.c, &p, &at, NULL, NULL), CUMOD_EINVAL);
    cr_expect(strstr(cumod_last_detail(), "a cooperative launch of") &&
                  strstr(cumod_last_detail(), "can be resident at once") &&
                  strstr(cumod_last_detail(), "per multiprocessor x"),
              "%s", cumod_last_detail());
    /* The session goes on. */
    p.grid.x = 1;
    cr_expect_eq(cumod_launch_v2(t.c, &p, &at, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    free(in);
    th_env_stop(&t);
}

Test(kernels, carveouts_per_launch_and_per_kernel, .timeout = 60)
{
    kt t;
    kt_start(&t, (const char *const[]){"empty", NULL});
    cumod_launch_params p = {
        .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {32, 1, 1}};
    cumod_launch_attrs at = {.carveout = 50};
    cr_assert_eq(cumod_launch_v2(t.c, &p, &at, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect(kt_log_has(&t, "setattr fn=empty attr=9 value=50"), "per launch");
    cr_assert_eq(cumod_kernel_set_carveout(t.c, "empty:empty", 25), CUMOD_OK,
                 "%s", cumod_last_detail());
    cr_assert_eq(cumod_launch(t.c, &p, NULL, NULL), CUMOD_OK);
    cr_expect(kt_log_has(&t, "setattr fn=empty attr=9 value=25"),
              "the kernel's own, for launches that give none");
    cumod_module_description *d;
    cr_assert_eq(cumod_module_describe(t.c, "empty", &d), CUMOD_OK);
    cr_expect_eq(d->nkernels, 1);
    cr_expect_eq(d->kernels[0].carveout, 25);
    cumod_module_description_free(d);
    cr_expect_eq(cumod_kernel_set_carveout(t.c, "empty:empty", 101),
                 CUMOD_EINVAL);
    th_env_stop(&t);
}

/* table:lookup over in[0..16) into out, with bias 0; returns out. */
static void
kt_lookup(kt *t, cumod_buffer in, cumod_buffer out, float got[16])
{
    cumod_arg args[] = {cumod_arg_buffer(in, 0), cumod_arg_buffer(out, 0),
                        cumod_arg_i32(16), cumod_arg_f32(0.0f)};
    cumod_launch_params p = {.kernel = "table:lookup",
                             .grid = {1, 1, 1},
                             .block = {16, 1, 1},
                             .nargs = 4,
                             .args = args};
    cr_assert_eq(cumod_launch(t->c, &p, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_buffer_read(t->c, out, 0, got, 16 * sizeof(float), 0),
                 CUMOD_OK);
}

/* Waits until module's generation is at least gen. */
static int
kt_wait_generation(kt *t, const char *module, uint64_t gen)
{
    for (int i = 0; i < 500; i++) {
        cumod_module_description *d;
        if (cumod_module_describe(t->c, module, &d) == CUMOD_OK) {
            uint64_t g = d->module.generation;
            cumod_module_description_free(d);
            if (g >= gen)
                return 1;
        }
        th_sleep_ms(20);
    }
    return 0;
}

Test(kernels, globals_by_name_kept_across_a_hot_reload, .timeout = 120)
{
    kt t;
    float table[16], scale = 3.0f, got[16];
    int idx[16];
    kt_start(&t, (const char *const[]){"table", NULL});
    for (int i = 0; i < 16; i++) {
        table[i] = (float)(i * i);
        idx[i] = i;
    }
    cumod_buffer in = kt_alloc(&t, sizeof(idx), idx);
    cumod_buffer out = kt_alloc(&t, sizeof(got), NULL);

    /* The module is described before it is loaded: its globals too. */
    cumod_module_description *d;
    cr_assert_eq(cumod_module_describe(t.c, "table", &d), CUMOD_OK);
    cumod_module_description_free(d);

    cr_assert_eq(
        cumod_global_write(t.c, "table", "table", 0, table, sizeof(table), 0),
        CUMOD_OK, "%s", cumod_last_detail());
    cr_assert_eq(
        cumod_global_write(t.c, "table", "scale", 0, &scale, sizeof(scale), 0),
        CUMOD_OK, "%s", cumod_last_detail());
    float back[16] = {0};
    cr_assert_eq(
        cumod_global_read(t.c, "table", "table", 0, back, sizeof(back), 0),
        CUMOD_OK, "%s", cumod_last_detail());
    cr_expect_eq(memcmp(back, table, sizeof(table)), 0, "read back");
    if (th_real_gpu()) {
        kt_lookup(&t, in, out, got);
        for (int i = 0; i < 16; i++)
            cr_expect_eq(got[i], table[i] * scale, "out[%d] = %f", i, got[i]);
    }
    /* Bounds, names. */
    cr_expect_eq(cumod_global_write(t.c, "table", "table", 60, table, 8, 0),
                 CUMOD_EINVAL);
    cr_expect(strstr(cumod_last_detail(), "offset 60 + length 8 is past its 64 "
                                          "bytes"),
              "%s", cumod_last_detail());
    cr_expect_eq(cumod_global_read(t.c, "table", "nosuch", 0, back, 4, 0),
                 CUMOD_ENOENT);
    cr_expect(strstr(cumod_last_detail(), "has no global 'nosuch'"), "%s",
              cumod_last_detail());

    /* A hot reload to new code with the same globals: the writes hold. */
    th_env_put(&t, CUMOD_TEST_VARIANT_DIR "/table.cubin", "table.cubin");
    cr_assert(kt_wait_generation(&t, "table", 2), "generation 2 loaded");
    memset(back, 0, sizeof(back));
    cr_assert_eq(
        cumod_global_read(t.c, "table", "table", 0, back, sizeof(back), 0),
        CUMOD_OK, "%s", cumod_last_detail());
    cr_expect_eq(memcmp(back, table, sizeof(table)), 0,
                 "generation 2 got the kept table");
    float s2 = 0;
    cr_assert_eq(cumod_global_read(t.c, "table", "scale", 0, &s2, 4, 0),
                 CUMOD_OK);
    cr_expect_eq(s2, scale, "and the kept scale, not its initial 1.0");
    if (th_real_gpu()) {
        kt_lookup(&t, in, out, got);
        for (int i = 0; i < 16; i++)
            cr_expect_eq(got[i], 2 * table[i] * scale,
                         "new code, kept "
                         "values: out[%d] = %f",
                         i, got[i]);
    }
    cr_assert_eq(cumod_module_describe(t.c, "table", &d), CUMOD_OK);
    int kept_ok = 0;
    for (size_t i = 0; i < d->nglobals; i++)
        if (strcmp(d->globals[i].name, "scale") == 0)
            kept_ok = d->globals[i].kept_bytes == 4 && !d->globals[i].constant;
    cr_expect(kept_ok, "show says scale's 4 bytes are kept");
    cumod_module_description_free(d);

    /* A new image without scale: its reload fails; generation 2 serves. */
    th_env_put(&t, CUMOD_TEST_VARIANT_DIR "/table_noscale.cubin",
               "table.cubin");
    int failed = 0;
    for (int i = 0; i < 500 && !failed; i++) {
        char *log = th_daemon_log(&t.d);
        failed = strstr(log, "global scale of table has writes kept for it, "
                             "but this image has no such global") != NULL;
        free(log);
        th_sleep_ms(20);
    }
    cr_expect(failed, "the reload failed, saying why");
    cr_assert_eq(cumod_module_describe(t.c, "table", &d), CUMOD_OK);
    cr_expect_eq(d->module.generation, 2, "generation 2 still serves");
    cumod_module_description_free(d);
    cr_expect_eq(cumod_global_read(t.c, "table", "scale", 0, &s2, 4, 0),
                 CUMOD_OK);
    th_env_stop(&t);
}

Test(kernels, cpp_kernels_by_their_signatures, .timeout = 60)
{
    kt t;
    kt_start(&t, (const char *const[]){"axpy", "linalg", NULL});
    /* Described before it is loaded, demangled. */
    cumod_module_description *d;
    cr_assert_eq(cumod_module_describe(t.c, "axpy", &d), CUMOD_OK);
    cr_expect_str_eq(d->module.state, "available", "not loaded to say so");
    int found = 0;
    for (size_t i = 0; i < d->nkernels; i++)
        if (strcmp(d->kernels[i].signature,
                   "axpy<float>(float, const float*, float*, int)") == 0) {
            found = 1;
            cr_expect_str_eq(d->kernels[i].display, "axpy<float>");
            cr_expect_str_eq(d->kernels[i].name, "_Z4axpyIfEvT_PKS0_PS0_i");
            cr_expect_eq(d->kernels[i].nparams, 4);
            cr_expect_str_eq(d->kernels[i].params[1].type, "const float*");
            cr_expect(d->kernels[i].params[1].indirect);
            cr_expect(!d->kernels[i].params[0].indirect);
        }
    cr_expect(found, "axpy<float>'s signature");
    cumod_module_description_free(d);

    cumod_buffer x = kt_alloc(&t, 64, NULL), y = kt_alloc(&t, 64, NULL);
    cumod_arg good[] = {cumod_arg_f32(2.0f), cumod_arg_buffer(x, 0),
                        cumod_arg_buffer(y, 0), cumod_arg_i32(16)};
    /* By its display name, as people read it. */
    cumod_launch_params p = {.kernel = "axpy:axpy<float>",
                             .grid = {1, 1, 1},
                             .block = {16, 1, 1},
                             .nargs = 4,
                             .args = good};
    cr_expect_eq(cumod_launch(t.c, &p, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    /* Untyped bytes (cumod_arg_bytes, or an older client): sizes only. */
    uint64_t addr = 0x1000;
    cumod_arg value_for_pointer[] = {cumod_arg_f32(2.0f),
                                     cumod_arg_bytes(&addr, sizeof(addr)),
                                     cumod_arg_buffer(y, 0), cumod_arg_i32(16)};
    p.args = value_for_pointer;
    cr_expect_eq(cumod_launch(t.c, &p, NULL, NULL), CUMOD_EINVAL);
    cr_expect_str_eq(cumod_last_detail(),
                     "argument 2 (const float*) of axpy<float>: a buffer "
                     "reference is needed, 8 bytes of value given");
    int64_t n64 = 16;
    cumod_arg wrong_int[] = {cumod_arg_f32(2.0f), cumod_arg_buffer(x, 0),
                             cumod_arg_buffer(y, 0),
                             cumod_arg_bytes(&n64, sizeof(n64))};
    p.args = wrong_int;
    cr_expect_eq(cumod_launch(t.c, &p, NULL, NULL), CUMOD_EINVAL);
    cr_expect_str_eq(cumod_last_detail(),
                     "argument 4 (int) of axpy<float>: 8 bytes given, the "
                     "kernel takes 4");
    /* A reference parameter takes a buffer too. */
    cumod_arg clamp_args[] = {cumod_arg_f32(1.0f), cumod_arg_buffer(y, 0),
                              cumod_arg_i32(16)};
    p = (cumod_launch_params){.kernel = "linalg:linalg::detail::clamp",
                              .grid = {1, 1, 1},
                              .block = {16, 1, 1},
                              .nargs = 3,
                              .args = clamp_args};
    cr_expect_eq(cumod_launch(t.c, &p, NULL, NULL), CUMOD_EINVAL);
    cr_expect(strstr(cumod_last_detail(),
                     "argument 1 of linalg::detail::clamp(const float&, "
                     "float*, int): a float (f32) where the kernel takes "
                     "const float& (a buffer)"),
              "%s", cumod_last_detail());
    th_env_stop(&t);
}

/* axpy<float>(float a, const float* x, float* y, int n), launched with
 * args (a client's own buffers x and y first). */
static int
kt_axpy(cumod_client *c, cumod_arg *args)
{
    cumod_launch_params p = {.kernel = "axpy:axpy<float>",
                             .grid = {1, 1, 1},
                             .block = {16, 1, 1},
                             .nargs = 4,
                             .args = args};
    return cumod_launch(c, &p, NULL, NULL);
}

Test(kernels, typed_arguments_must_match_a_cpp_signature_on_either_path,
     .timeout = 60)
{
    kt t;
    kt_start(&t, (const char *const[]){"axpy", NULL});
    setenv("CUMOD_NO_RING", "1", 1);
    cumod_client *nng = NULL;
    int rv = cumod_open(t.d.url, 10000, &nng);
    unsetenv("CUMOD_NO_RING");
    cr_assert_eq(rv, CUMOD_OK, "%s", cumod_last_detail());
    cr_assert(cumod_fast_path(t.c), "the default client takes the ring");
    cr_assert(!cumod_fast_path(nng), "CUMOD_NO_RING=1: nng only");
    static const char sig[] = "axpy<float>(float, const float*, float*, int)";
    char want[512];

    for (int path = 0; path < 2; path++) {
        cumod_client *c = path == 0 ? t.c : nng;
        const char *pn = path == 0 ? "ring" : "nng";
        cumod_buffer x, y;
        cr_assert_eq(cumod_buffer_alloc(c, 64, &x), CUMOD_OK);
        cr_assert_eq(cumod_buffer_alloc(c, 64, &y), CUMOD_OK);
        cumod_arg args[4] = {cumod_arg_f32(2.0f), cumod_arg_buffer(x, 0),
                             cumod_arg_buffer(y, 0), cumod_arg_i32(16)};
        cr_expect_eq(kt_axpy(c, args), CUMOD_OK, "%s: %s", pn,
                     cumod_last_detail());
        /* An unsigned int of int's width passes. */
        args[3] = cumod_arg_u32(16);
        cr_expect_eq(kt_axpy(c, args), CUMOD_OK, "%s: %s", pn,
                     cumod_last_detail());

        /* An f32 where the kernel takes int: the same 4 bytes, refused. */
        args[3] = cumod_arg_f32(16.0f);
        cr_expect_eq(kt_axpy(c, args), CUMOD_EINVAL, "%s", pn);
        snprintf(want, sizeof(want),
                 "argument 4 of %s: a float (f32) where the kernel takes int",
                 sig);
        cr_expect_str_eq(cumod_last_detail(), want, "%s", pn);
        args[3] = cumod_arg_i32(16);

        /* An int where it takes float, a buffer where it takes float. */
        args[0] = cumod_arg_i32(2);
        cr_expect_eq(kt_axpy(c, args), CUMOD_EINVAL, "%s", pn);
        snprintf(want, sizeof(want),
                 "argument 1 of %s: an int (i32) where the kernel takes float",
                 sig);
        cr_expect_str_eq(cumod_last_detail(), want, "%s", pn);
        args[0] = cumod_arg_buffer(x, 0);
        cr_expect_eq(kt_axpy(c, args), CUMOD_EINVAL, "%s", pn);
        snprintf(want, sizeof(want),
                 "argument 1 of %s: a buffer (a device pointer) where the "
                 "kernel takes float",
                 sig);
        cr_expect_str_eq(cumod_last_detail(), want, "%s", pn);
        args[0] = cumod_arg_f32(2.0f);

        /* A scalar where it takes a pointer. */
        args[1] = cumod_arg_u64(0x1000);
        cr_expect_eq(kt_axpy(c, args), CUMOD_EINVAL, "%s", pn);
        snprintf(want, sizeof(want),
                 "argument 2 of %s: an unsigned 64-bit integer (u64) where "
                 "the kernel takes const float* (a buffer)",
                 sig);
        cr_expect_str_eq(cumod_last_detail(), want, "%s", pn);
        args[1] = cumod_arg_buffer(x, 0);

        /* Untyped bytes are checked by size, as an older client's are. */
        float f = 16.0f;
        args[3] = cumod_arg_bytes(&f, sizeof(f));
        cr_expect_eq(kt_axpy(c, args), CUMOD_OK, "%s: %s", pn,
                     cumod_last_detail());

        /* A batch's launches are checked alike. */
        cumod_batch *b;
        args[3] = cumod_arg_f64(16.0);
        cumod_launch_params p = {.kernel = "axpy:axpy<float>",
                                 .grid = {1, 1, 1},
                                 .block = {16, 1, 1},
                                 .nargs = 4,
                                 .args = args};
        cr_assert_eq(cumod_batch_alloc(&b), CUMOD_OK);
        cr_assert_eq(cumod_batch_launch(b, &p), CUMOD_OK);
        cr_expect_eq(cumod_batch_submit(c, b, 0, NULL, NULL), CUMOD_EINVAL,
                     "%s", pn);
        cr_expect(strstr(cumod_last_detail(),
                         "argument 4 of axpy<float>(float, const float*, "
                         "float*, int): a double (f64) where the kernel "
                         "takes int"),
                  "%s: %s", pn, cumod_last_detail());
        cumod_batch_free(b);
    }
    cumod_close(nng);
    th_env_stop(&t);
}

Test(kernels, allow_pointer_values_lets_a_value_through, .timeout = 60)
{
    kt t;
    th_env_init(&t, (const char *const[]){"axpy", NULL});
    th_env_start(&t, (const char *const[]){"--allow-pointer-values", NULL},
                 NULL);
    cumod_buffer y = kt_alloc(&t, 64, NULL);
    cumod_arg args[] = {cumod_arg_f32(2.0f), cumod_arg_u64(0),
                        cumod_arg_buffer(y, 0), cumod_arg_i32(0)};
    cumod_launch_params p = {.kernel = "axpy:axpy<float>",
                             .grid = {1, 1, 1},
                             .block = {1, 1, 1},
                             .nargs = 4,
                             .args = args};
    cr_expect_eq(cumod_launch(t.c, &p, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    th_env_stop(&t);
}

Test(kernels, batches_carry_clusters_and_cooperative_launches, .timeout = 60)
{
    kt t;
    kt_start(&t, (const char *const[]){"cluster", NULL});
    cumod_buffer out = kt_alloc(&t, 16 * 2 * sizeof(int), NULL);
    cumod_arg args[] = {cumod_arg_buffer(out, 0)};
    cumod_launch_params p = {.kernel = "cluster:cluster_any",
                             .grid = {16, 1, 1},
                             .block = {32, 1, 1},
                             .nargs = 1,
                             .args = args};
    cumod_launch_attrs at = {.cluster = {8, 1, 1}, .carveout = -1};
    cumod_batch *b;
    int failed = -2;
    cr_assert_eq(cumod_batch_alloc(&b), CUMOD_OK);
    cr_assert_eq(cumod_batch_launch_v2(b, &p, &at), CUMOD_OK);
    at.cluster = (cumod_dim3){3, 1, 1};
    cr_assert_eq(cumod_batch_launch_v2(b, &p, &at), CUMOD_OK);
    cr_expect_eq(cumod_batch_submit(t.c, b, 0, NULL, &failed), CUMOD_EINVAL);
    cr_expect_eq(failed, 1, "the second item's cluster does not divide");
    cr_expect(strstr(cumod_last_detail(), "item 1: cluster_any: cluster.x = 3 "
                                          "does not divide grid.x = 16"),
              "%s", cumod_last_detail());
    cumod_batch_reset(b);
    at.cluster = (cumod_dim3){8, 1, 1};
    cr_assert_eq(cumod_batch_launch_v2(b, &p, &at), CUMOD_OK);
    cr_expect_eq(cumod_batch_submit(t.c, b, 0, NULL, &failed), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect(kt_log_has(&t, " cluster=8,1,1"));
    if (th_real_gpu()) {
        int got[16 * 2];
        cr_assert_eq(cumod_buffer_read(t.c, out, 0, got, sizeof(got), 0),
                     CUMOD_OK);
        for (int i = 0; i < 16; i++)
            cr_expect_eq(got[2 * i + 1], 8, "clusters of 8");
    }
    at.carveout = 200;
    cr_expect_eq(cumod_batch_launch_v2(b, &p, &at), CUMOD_EINVAL);
    cumod_batch_free(b);
    th_env_stop(&t);
}
