/* SPDX-License-Identifier: MIT */
/*
 * CUDA C++ sources and JIT options: a NAME.cu dropped into the folder is
 * compiled by NVRTC in a worker process, cached on disk, and served as any
 * module (generations, reload, errors); NAME.ptx.opts, the configuration
 * and `cumodctl load --jit-*` give a module's JIT options. cumodd runs as a
 * real process on tests/fakecuda with the real NVRTC (which needs no GPU)
 * and, built as tests/gpu's gpu_compile_test, on the real driver, where the
 * compiled kernels' results are checked.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cumod/cumod.h"
#include "fixture.h"

extern char **environ;

#ifndef CUMOD_TEST_REAL_GPU
TH_SUITE_DRIVER(0);
#else
TH_SUITE_DRIVER(1);
#endif

typedef th_env ct;

#define N 4096

/* x[i] = x[i] * s + BIAS (BIAS from an option, 0 without). */
static const char sq_v1[] =
    "#ifndef BIAS\n#define BIAS 0\n#endif\n"
    "extern \"C\" __global__ void axb(float *x, float s, int n) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) x[i] = x[i] * s + BIAS;\n"
    "}\n";
/* The next version: + 1 more, and a second kernel. */
static const char sq_v2[] =
    "#ifndef BIAS\n#define BIAS 0\n#endif\n"
    "extern \"C\" __global__ void axb(float *x, float s, int n) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) x[i] = x[i] * s + BIAS + 1;\n"
    "}\n"
    "extern \"C\" __global__ void zero(float *x, int n) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) x[i] = 0;\n"
    "}\n";

static const char *
ct_nvrtc(void)
{
    const char *p = CUMOD_TEST_NVRTC;
    if (p[0] == '\0')
        cr_skip_test("no libnvrtc was found at configure time (the CUDA "
                     "toolkit's lib64): the NAME.cu tests need it");
    return p;
}

/* Writes text to the folder as name: a temporary name, then rename, as
 * editors and deploy tools do. */
static void
ct_write(ct *t, const char *name, const char *text)
{
    char tmp[512], path[512];
    snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", t->dir, name);
    snprintf(path, sizeof(path), "%s/%s", t->dir, name);
    cr_assert_eq(th_write_file(tmp, text), 0, "write %s", tmp);
    cr_assert_eq(rename(tmp, path), 0, "rename to %s", path);
}

static void
ct_start(ct *t, const char *const *extra)
{
    const char *args[24];
    char cache[400];
    int n = 0;
    snprintf(cache, sizeof(cache), "%s/.cache", t->dir);
    args[n++] = "--nvrtc-library";
    args[n++] = ct_nvrtc();
    args[n++] = "--compile-cache";
    args[n++] = cache;
    for (int i = 0; extra && extra[i] && n < 23; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    th_env_start(t, args, NULL);
}

/* The module's detail once pred holds (polled for 60 s), else fails. */
typedef int (*ct_pred)(const cumod_module_detail *d, const void *arg);

static cumod_module_detail *
ct_wait(ct *t, const char *name, ct_pred pred, const void *arg,
        const char *what)
{
    cumod_module_detail *d = NULL;
    double end = th_now_ms() + 60000;
    while (th_now_ms() < end) {
        cumod_module_detail_free(d);
        d = NULL;
        if (cumod_module_show(t->c, name, &d) == CUMOD_OK && pred(d, arg))
            return d;
        th_sleep_ms(30);
    }
    cr_assert_fail("%s: never %s (last: state %s, generation %llu, error %s)",
                   name, what, d ? d->module.state : "?",
                   d ? (unsigned long long)d->module.generation : 0ull,
                   d && d->module.error ? d->module.error : "none");
    return NULL;
}

static int
ct_is_gen(const cumod_module_detail *d, const void *arg)
{
    return d->module.generation >= *(const uint64_t *)arg &&
           strcmp(d->module.state, "resident") == 0;
}

static int
ct_has_error(const cumod_module_detail *d, const void *arg)
{
    (void)arg;
    return d->module.error != NULL;
}

static int
ct_error_has(const cumod_module_detail *d, const void *arg)
{
    return d->module.error != NULL && strstr(d->module.error, arg) != NULL;
}

/* Loads name and waits for generation gen. */
static cumod_module_detail *
ct_load(ct *t, const char *name, uint64_t gen)
{
    cumod_module_result r;
    cr_assert_eq(cumod_module_load(t->c, name, &r), CUMOD_OK, "load %s: %s",
                 name, cumod_last_detail());
    cumod_module_result_fini(&r);
    return ct_wait(t, name, ct_is_gen, &gen, "resident");
}

/* Runs kernel on x (N floats, x[i] = i) with s, and checks on the real
 * driver that x[i] * s + add came back. */
static void
ct_run(ct *t, const char *kernel, float s, float add)
{
    static float x[N];
    cumod_buffer b;
    for (int i = 0; i < N; i++)
        x[i] = (float)i;
    cr_assert_eq(cumod_buffer_alloc(t->c, sizeof(x), &b), CUMOD_OK);
    cr_assert_eq(cumod_buffer_write(t->c, b, 0, x, sizeof(x), 0), CUMOD_OK);
    cumod_arg args[] = {cumod_arg_buffer(b, 0), cumod_arg_f32(s),
                        cumod_arg_i32(N)};
    cumod_launch_params p = {.kernel = kernel,
                             .grid = {N / 256, 1, 1},
                             .block = {256, 1, 1},
                             .nargs = 3,
                             .args = args};
    cr_assert_eq(cumod_launch(t->c, &p, NULL, NULL), CUMOD_OK, "%s: %s", kernel,
                 cumod_last_detail());
    if (th_real_gpu()) {
        cr_assert_eq(cumod_buffer_read(t->c, b, 0, x, sizeof(x), 0), CUMOD_OK);
        for (int i = 0; i < N; i++)
            if (fabsf(x[i] - ((float)i * s + add)) >
                1e-3f * fabsf(x[i]) + 1e-3f)
                cr_assert_fail("%s: x[%d] = %f, want %f", kernel, i, x[i],
                               (float)i * s + add);
    }
    cr_assert_eq(cumod_buffer_free(t->c, b), CUMOD_OK);
}

Test(compile, a_dropped_cu_compiles_loads_runs_and_reloads_on_change,
     .timeout = 240)
{
    ct t;
    th_env_init(&t, NULL);
    ct_write(&t, "sq.cu", sq_v1);
    ct_start(&t, NULL);
    cumod_module_detail *d = ct_load(&t, "sq", 1);
    cr_expect_str_eq(d->module.kind, "cu");
    cr_expect_str_eq(d->module.loaded_kind, "cubin",
                     "NVRTC compiles for the device's SM");
    cr_expect_str_eq(d->module.file, "sq.cu");
    cr_expect(d->compile && strstr(d->compile, "NVRTC ") &&
                  strstr(d->compile, "--gpu-architecture=sm_") &&
                  strstr(d->compile, "-std=c++17") &&
                  strstr(d->compile, "-default-device") &&
                  strstr(d->compile, "--include-path="),
              "show says how it was compiled: %s", d->compile);
    cr_expect_eq(d->compiles, 1);
    cr_expect_eq(d->nkernels, 1);
    cr_expect_str_eq(d->kernels[0].name, "axb");
    cumod_module_detail_free(d);
    ct_run(&t, "sq:axb", 2.0f, 0.0f);

    /* A new version: a new generation, the next launch runs it. */
    ct_write(&t, "sq.cu", sq_v2);
    uint64_t two = 2;
    d = ct_wait(&t, "sq", ct_is_gen, &two, "reloaded to generation 2");
    cr_expect_eq(d->nkernels, 2, "the new kernel is there");
    cr_expect_eq(d->compiles, 2, "compiles: %llu",
                 (unsigned long long)d->compiles);
    cumod_module_detail_free(d);
    ct_run(&t, "sq:axb", 3.0f, 1.0f);
    th_env_stop(&t);
}

Test(compile, a_cu_that_does_not_compile_leaves_the_old_generation_serving,
     .timeout = 240)
{
    ct t;
    th_env_init(&t, NULL);
    ct_write(&t, "sq.cu", sq_v1);
    ct_start(&t, NULL);
    cumod_module_detail_free(ct_load(&t, "sq", 1));
    ct_write(&t, "sq.cu",
             "extern \"C\" __global__ void axb(float *x, float s, int n) {\n"
             "    x[0] = undeclared_thing;\n}\n");
    cumod_module_detail *d =
        ct_wait(&t, "sq", ct_has_error, NULL, "refused the broken source");
    cr_expect_eq(d->module.generation, 1);
    cr_expect_str_eq(d->module.state, "resident");
    cr_expect(strstr(d->module.error, "sq.cu does not compile") &&
                  strstr(d->module.error, "undeclared_thing"),
              "the error names the file and NVRTC's complaint: %s",
              d->module.error);
    cr_expect(d->compile_log && strstr(d->compile_log, "sq.cu(2): error"),
              "show keeps NVRTC's log: %s", d->compile_log);
    cumod_module_detail_free(d);
    ct_run(&t, "sq:axb", 2.0f, 0.0f); /* generation 1 still serves */

    /* Fixed: it compiles and serves again. */
    ct_write(&t, "sq.cu", sq_v2);
    uint64_t two = 2;
    d = ct_wait(&t, "sq", ct_is_gen, &two, "loaded the fixed source");
    cr_expect_null(d->module.error, "%s", d->module.error);
    cumod_module_detail_free(d);
    ct_run(&t, "sq:axb", 2.0f, 1.0f);
    th_env_stop(&t);
}

Test(compile, the_cache_spares_a_second_compile_across_a_restart,
     .timeout = 240)
{
    ct t;
    char cache[400], sha[65];
    th_env_init(&t, NULL);
    snprintf(cache, sizeof(cache), "%s/.cache", t.dir);
    ct_write(&t, "sq.cu", sq_v1);
    ct_start(&t, NULL);
    cumod_module_detail *d = ct_load(&t, "sq", 1);
    cr_expect_eq(d->compiles, 1, "compiled once (then read from the cache)");
    snprintf(sha, sizeof(sha), "%s", d->module.sha256);
    cumod_module_detail_free(d);
    /* A second cumodd on the same folder and cache: nothing compiled. */
    cumod_close(t.c);
    t.c = NULL;
    cr_assert_eq(th_daemon_stop(&t.d), 0, "cumodd stopped cleanly");
    ct_start(&t, NULL);
    d = ct_load(&t, "sq", 1);
    cr_expect_eq(d->compiles, 0, "restarted: no compile");
    cr_expect_geq(d->compile_cache_hits, 1);
    cr_expect(strstr(d->compile, "from the cache"), "%s", d->compile);
    cr_expect_str_eq(d->module.sha256, sha, "the same image");
    cumod_module_detail_free(d);
    ct_run(&t, "sq:axb", 2.0f, 0.0f);
    /* Other options are another key: compiled again. */
    ct_write(&t, "sq.cu.opts", "# the bias\n-DBIAS=5\n");
    uint64_t two = 2;
    d = ct_wait(&t, "sq", ct_is_gen, &two, "rebuilt with the new option");
    cr_expect_eq(d->compiles, 1);
    cr_expect(strstr(d->compile, "-DBIAS=5"), "%s", d->compile);
    cumod_module_detail_free(d);
    ct_run(&t, "sq:axb", 2.0f, 5.0f);
    th_env_stop(&t);
}

Test(compile, options_from_the_configuration_the_module_and_its_sidecar,
     .timeout = 240)
{
    ct t;
    char conf[400];
    th_env_init(&t, NULL);
    /* Needs SCALE (a [module] option) and the folder's header. */
    ct_write(&t, "common.cuh", "#define TWICE(v) ((v) * 2)\n");
    ct_write(&t, "opt.cu",
             "#include \"common.cuh\"\n"
             "#ifndef SCALE\n#error SCALE is not defined\n#endif\n"
             "extern \"C\" __global__ void axb(float *x, float s, int n) {\n"
             "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
             "    if (i < n) x[i] = x[i] * s + TWICE(SCALE) + BIAS;\n"
             "}\n");
    snprintf(conf, sizeof(conf), "%s/.cumodd.conf", t.dir);
    cr_assert_eq(th_write_file(conf, "[module opt]\n"
                                     "nvrtc-option = -DSCALE=3\n"),
                 0);
    ct_start(&t, (const char *const[]){"--config", conf, NULL});
    /* BIAS is missing: the compile fails, saying so. */
    cumod_module_result r;
    cr_expect_neq(cumod_module_load(t.c, "opt", &r), CUMOD_OK);
    cr_expect(strstr(cumod_last_detail(), "BIAS"), "%s", cumod_last_detail());
    /* The sidecar gives it. */
    ct_write(&t, "opt.cu.opts", "-DBIAS=1\n");
    cumod_module_detail *d = ct_load(&t, "opt", 1);
    cr_expect(strstr(d->compile, "-DSCALE=3 -DBIAS=1"), "%s", d->compile);
    cumod_module_detail_free(d);
    ct_run(&t, "opt:axb", 2.0f, 7.0f);
    th_env_stop(&t);
}

/* A source that includes a header of the folder: x * s + ADD. */
static const char hdr_cu[] =
    "#include \"add.cuh\"\n"
    "extern \"C\" __global__ void axb(float *x, float s, int n) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) x[i] = x[i] * s + ADD;\n"
    "}\n";

/* A header changed in the folder compiles the sources that include it
 * again (a new generation running the new code), leaves the others alone,
 * and is part of the cache's key: a header changed while cumodd was down
 * is not served from the cache's stale image. */
Test(compile, a_changed_header_compiles_its_sources_again, .timeout = 240)
{
    ct t;
    char sha[65];
    th_env_init(&t, NULL);
    ct_write(&t, "add.cuh", "#define ADD 1\n");
    ct_write(&t, "hdr.cu", hdr_cu);
    ct_write(&t, "sq.cu", sq_v1);
    ct_start(&t, NULL);
    cumod_module_detail *d = ct_load(&t, "hdr", 1);
    cr_expect(strstr(d->compile, "with 1 included header"), "%s", d->compile);
    snprintf(sha, sizeof(sha), "%s", d->module.sha256);
    cumod_module_detail_free(d);
    ct_run(&t, "hdr:axb", 2.0f, 1.0f);
    d = ct_load(&t, "sq", 1);
    cr_expect(strstr(d->compile, "with 0 included headers"), "%s", d->compile);
    uint64_t sq_compiles = d->compiles;
    cumod_module_detail_free(d);

    ct_write(&t, "add.cuh", "#define ADD 4\n");
    uint64_t two = 2;
    d = ct_wait(&t, "hdr", ct_is_gen, &two, "rebuilt with the new header");
    cr_expect_str_neq(d->module.sha256, sha, "new code");
    cr_expect(strstr(d->compile, "compiled"), "%s", d->compile);
    cumod_module_detail_free(d);
    ct_run(&t, "hdr:axb", 2.0f, 4.0f);
    /* The source that does not include it: read again, the same image. */
    cr_assert_eq(cumod_module_show(t.c, "sq", &d), CUMOD_OK);
    cr_expect_eq(d->module.generation, 1, "sq keeps its generation");
    cr_expect_eq(d->compiles, sq_compiles, "sq is not compiled again");
    cumod_module_detail_free(d);

    /* Changed while cumodd is down: the cache holds ADD 4's image under
     * the old key, and must not serve it. */
    cumod_close(t.c);
    t.c = NULL;
    cr_assert_eq(th_daemon_stop(&t.d), 0, "cumodd stopped cleanly");
    ct_write(&t, "add.cuh", "#define ADD 6\n");
    ct_start(&t, NULL);
    d = ct_load(&t, "hdr", 1);
    cr_expect_eq(d->compiles, 1, "compiled, not the cache's stale image");
    cumod_module_detail_free(d);
    ct_run(&t, "hdr:axb", 2.0f, 6.0f);
    /* And back to ADD 4: that one is in the cache. */
    ct_write(&t, "add.cuh", "#define ADD 4\n");
    d = ct_wait(&t, "hdr", ct_is_gen, &two, "rebuilt with the header");
    cr_expect_geq(d->compile_cache_hits, 1, "ADD 4 from the cache");
    cr_expect(strstr(d->compile, "from the cache"), "%s", d->compile);
    cumod_module_detail_free(d);
    ct_run(&t, "hdr:axb", 2.0f, 4.0f);
    th_env_stop(&t);
}

typedef struct ct_client {
    const char *url;
    int rv;
    uint64_t generation;
    char detail[512];
} ct_client;

/* One client: connects, launches sq:axb (which loads the module), and
 * notes what it heard. */
static void *
ct_client_run(void *arg)
{
    ct_client *k = arg;
    cumod_client *c;
    cumod_buffer b;
    if ((k->rv = cumod_open(k->url, 60000, &c)) != CUMOD_OK)
        return NULL;
    if ((k->rv = cumod_buffer_alloc(c, N * sizeof(float), &b)) == CUMOD_OK) {
        cumod_arg args[] = {cumod_arg_buffer(b, 0), cumod_arg_f32(2.0f),
                            cumod_arg_i32(N)};
        cumod_launch_params p = {.kernel = "sq:axb",
                                 .grid = {N / 256, 1, 1},
                                 .block = {256, 1, 1},
                                 .nargs = 3,
                                 .args = args};
        k->rv = cumod_launch(c, &p, NULL, &k->generation);
    }
    snprintf(k->detail, sizeof(k->detail), "%s", cumod_last_detail());
    cumod_close(c);
    return NULL;
}

/* Clients launching a kernel of a .cu nobody loaded yet, all at once,
 * with no cache: each launch waits for the one compile and load, and the
 * load after the catalogue's read takes the image that read compiled. */
Test(compile, clients_at_once_on_a_fresh_cu_share_one_compile, .timeout = 240)
{
    enum { K = 6 };
    ct t;
    pthread_t th[K];
    ct_client k[K];
    th_env_init(&t, NULL);
    ct_write(&t, "sq.cu", sq_v1);
    th_env_start(&t,
                 (const char *const[]){"--nvrtc-library", ct_nvrtc(),
                                       "--compile-cache", "none", NULL},
                 NULL);
    for (int i = 0; i < K; i++) {
        k[i] = (ct_client){.url = t.d.url};
        cr_assert_eq(pthread_create(&th[i], NULL, ct_client_run, &k[i]), 0);
    }
    for (int i = 0; i < K; i++) {
        pthread_join(th[i], NULL);
        cr_expect_eq(k[i].rv, CUMOD_OK, "client %d: %s", i, k[i].detail);
        cr_expect_eq(k[i].generation, 1, "client %d ran generation 1", i);
    }
    uint64_t one = 1;
    cumod_module_detail *d = ct_wait(&t, "sq", ct_is_gen, &one, "resident");
    cr_expect_eq(d->compiles, 1, "compiled once for everyone: %llu",
                 (unsigned long long)d->compiles);
    cr_expect_eq(d->compile_cache_hits, 0);
    cumod_module_detail_free(d);
    th_env_stop(&t);
}

/* A module with thousands of globals (as -default-device makes of
 * libcu++'s headers): its load command outgrows a channel packet and
 * travels in a memfd beside the image's. */
Test(compile, a_module_with_thousands_of_globals_loads, .timeout = 240)
{
    ct t;
    enum { NG = 3000 };
    size_t cap = NG * 96 + 512, at = 0;
    char *src = malloc(cap);
    cr_assert_not_null(src);
    for (int i = 0; i < NG; i++)
        at += (size_t)snprintf(src + at, cap - at,
                               "__device__ int a_rather_long_global_name_"
                               "for_the_load_command_%04d = %d;\n",
                               i, i);
    snprintf(src + at, cap - at,
             "extern \"C\" __global__ void axb(float *x, float s, int n) {\n"
             "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
             "    if (i < n) x[i] = x[i] * s + "
             "a_rather_long_global_name_for_the_load_command_0007 - 7;\n"
             "}\n");
    th_env_init(&t, NULL);
    ct_write(&t, "many.cu", src);
    free(src);
    ct_start(&t, NULL);
    cumod_module_detail_free(ct_load(&t, "many", 1));
    cumod_module_description *desc;
    cr_assert_eq(cumod_module_describe(t.c, "many", &desc), CUMOD_OK);
    cr_expect_eq(desc->nglobals, NG, "every global listed");
    cumod_module_description_free(desc);
    ct_run(&t, "many:axb", 2.0f, 0.0f);
    char *log = th_daemon_log(&t.d);
    cr_expect(strstr(log, "CUMOD-EXEC-LOST") == NULL,
              "the executor never died:\n%s", log);
    free(log);
    th_env_stop(&t);
}

/* The toolkit's headers are there (NVRTC carries none of them), and C++
 * template kernels are named as nvcc's are. */
Test(compile, a_cu_with_the_toolkits_headers_and_templates, .timeout = 240)
{
    ct t;
    th_env_init(&t, NULL);
    ct_write(&t, "tk.cu",
             "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
             "#include <cooperative_groups.h>\n"
             "#include <cuda/std/cstdint>\n"
             "template <typename T> __global__ void scale(T *x, float s, "
             "int n) {\n"
             "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
             "    if (i < n) x[i] = (T)((float)x[i] * s + "
             "(cuda::std::int32_t)0);\n"
             "}\n"
             "template __global__ void scale<float>(float *, float, int);\n"
             "template __global__ void scale<__half>(__half *, float, "
             "int);\n");
    ct_start(&t, NULL);
    cumod_module_detail *d = ct_load(&t, "tk", 1);
    cr_expect_eq(d->nkernels, 2);
    cumod_module_detail_free(d);
    cumod_module_description *desc;
    cr_assert_eq(cumod_module_describe(t.c, "tk", &desc), CUMOD_OK);
    int f = 0, h = 0;
    for (size_t i = 0; i < desc->nkernels; i++) {
        f |= strcmp(desc->kernels[i].signature,
                    "scale<float>(float*, float, int)") == 0;
        h |= strcmp(desc->kernels[i].signature,
                    "scale<__half>(__half*, float, int)") == 0;
    }
    cr_expect(f && h, "both instantiations, demangled");
    cumod_module_description_free(desc);
    ct_run(&t, "tk:_Z5scaleIfEvPT_fi", 2.0f, 0.0f);
    th_env_stop(&t);
}

Test(compile, images_of_one_module_cubin_then_fatbin_then_cu_then_ptx,
     .timeout = 240)
{
    ct t;
    char src[512];
    th_env_init(&t, NULL);
    snprintf(src, sizeof(src), "%s/scale_ptx.ptx", th_kernel_dir);
    th_env_put(&t, src, "pp.ptx");
    ct_write(&t, "pp.cu", sq_v1);
    ct_start(&t, NULL);
    cumod_module_detail *d = ct_load(&t, "pp", 1);
    cr_expect_str_eq(d->module.file, "pp.cu", "a .cu wins over PTX");
    cumod_module_detail_free(d);
    snprintf(src, sizeof(src), "%s/scale.cubin", th_kernel_dir);
    th_env_put(&t, src, "pp.cubin");
    uint64_t two = 2;
    d = ct_wait(&t, "pp", ct_is_gen, &two, "switched to the cubin");
    cr_expect_str_eq(d->module.file, "pp.cubin", "a cubin wins over a .cu");
    cr_expect_str_eq(d->module.loaded_kind, "cubin");
    cumod_module_detail_free(d);
    char path[512];
    snprintf(path, sizeof(path), "%s/pp.cubin", t.dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/pp.cu", t.dir);
    unlink(path);
    uint64_t three = 3;
    d = ct_wait(&t, "pp", ct_is_gen, &three, "fell back to the PTX");
    cr_expect_str_eq(d->module.file, "pp.ptx");
    cumod_module_detail_free(d);
    ct_run(&t, "pp:scale", 2.0f, 0.0f);
    th_env_stop(&t);
}

static int
ct_jit_is(const cumod_module_detail *d, const void *arg)
{
    return d->module.jit_options != NULL &&
           strstr(d->module.jit_options, arg) != NULL &&
           strcmp(d->module.state, "resident") == 0;
}

Test(compile, jit_options_per_module_reach_the_driver, .timeout = 240)
{
    ct t;
    char src[512], conf[400];
    th_env_init(&t, NULL);
    snprintf(src, sizeof(src), "%s/scale_ptx.ptx", th_kernel_dir);
    th_env_put(&t, src, "sp.ptx");
    snprintf(conf, sizeof(conf), "%s/.cumodd.conf", t.dir);
    cr_assert_eq(th_write_file(conf, "jit-opt-level = 2\n"
                                     "[module sp]\n"
                                     "jit-max-registers = 32\n"),
                 0);
    ct_start(&t, (const char *const[]){"--config", conf, NULL});
    cumod_module_detail *d = ct_load(&t, "sp", 1);
    cr_expect_str_eq(d->module.jit_options,
                     "opt-level 2 (configuration), max-registers 32 "
                     "([module sp])");
    if (!th_real_gpu())
        cr_expect(d->jit_log &&
                      strstr(d->jit_log, "CU_JIT_OPTIMIZATION_LEVEL=2 "
                                         "CU_JIT_MAX_REGISTERS=32"),
                  "the options reached the driver's JIT: %s", d->jit_log);
    cumod_module_detail_free(d);

    /* The sidecar: a new generation with its options. */
    ct_write(&t, "sp.ptx.opts",
             "# faster to build\nopt-level 0\n"
             "max-registers=16\nline-info\n");
    d = ct_wait(&t, "sp", ct_jit_is, "opt-level 0 (sp.ptx.opts)",
                "took the sidecar's options");
    cr_expect_eq(d->module.generation, 2);
    cr_expect_str_eq(d->module.jit_options,
                     "opt-level 0 (sp.ptx.opts), max-registers 16 "
                     "(sp.ptx.opts), line-info 1 (sp.ptx.opts)");
    cr_expect_leq(d->nkernels, 1);
    cumod_module_detail_free(d);
    cumod_module_description *desc;
    cr_assert_eq(cumod_module_describe(t.c, "sp", &desc), CUMOD_OK);
    cr_expect_leq(desc->kernels[0].registers, 16, "the register cap holds: %d",
                  desc->kernels[0].registers);
    cumod_module_description_free(desc);
    ct_run(&t, "sp:scale", 2.0f, 0.0f);

    /* A load's own options: a new generation; then cleared again. */
    cumod_jit_options j = CUMOD_JIT_OPTIONS_INIT;
    j.opt_level = 4;
    cumod_module_result r;
    cr_assert_eq(cumod_module_load_jit(t.c, "sp", &j, &r), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect_eq(r.module.generation, 3);
    cr_expect(strstr(r.module.jit_options, "opt-level 4 (cumodctl load)"), "%s",
              r.module.jit_options);
    cumod_module_result_fini(&r);
    cr_assert_eq(cumod_module_load_jit(t.c, "sp", &j, &r), CUMOD_OK);
    cr_expect_eq(r.module.generation, 3, "the same options: no new one");
    cumod_module_result_fini(&r);
    j.opt_level = CUMOD_JIT_CLEAR;
    cr_assert_eq(cumod_module_load_jit(t.c, "sp", &j, &r), CUMOD_OK);
    cr_expect_eq(r.module.generation, 4);
    cr_expect(strstr(r.module.jit_options, "opt-level 0 (sp.ptx.opts)"), "%s",
              r.module.jit_options);
    cumod_module_result_fini(&r);
    j.opt_level = 9;
    cr_expect_eq(cumod_module_load_jit(t.c, "sp", &j, &r), CUMOD_EINVAL);
    cr_expect(strstr(cumod_last_detail(), "jit.opt_level: 9 is not from 0 "
                                          "to 4"),
              "%s", cumod_last_detail());

    /* cumodctl says the same. */
    char *out = NULL, *err = NULL;
    cr_expect_eq(th_ctl(&t.d,
                        (const char *const[]){"load", "sp", "--jit-opt-level",
                                              "3", NULL},
                        &out, &err),
                 0, "%s", err);
    cr_expect(out && strstr(out, "opt-level 3 (cumodctl load)"), "%s", out);
    free(out);
    free(err);

    /* A bad sidecar: refused with its line, the generation serving stays. */
    ct_write(&t, "sp.ptx.opts", "opt-level 1\nmax-registers 900\n");
    d = ct_wait(&t, "sp", ct_error_has, "sp.ptx.opts:2: max-registers",
                "refused the bad sidecar");
    cr_expect_eq(d->module.generation, 5);
    cr_expect_str_eq(d->module.state, "resident");
    cumod_module_detail_free(d);
    ct_run(&t, "sp:scale", 2.0f, 0.0f);
    th_env_stop(&t);
}

#ifndef CUMOD_TEST_REAL_GPU
/* A fatbin's options go to cuModuleLoadDataEx (where the driver JITs its
 * PTX entry when no cubin fits). */
Test(compile, jit_options_of_a_fatbin_reach_cu_module_load_data_ex,
     .timeout = 120)
{
    ct t;
    char src[512];
    th_env_init(&t, NULL);
    snprintf(src, sizeof(src), "%s/vadd_fat.fatbin", th_kernel_dir);
    th_env_put(&t, src, "vf.fatbin");
    ct_write(&t, "vf.ptx.opts", "opt-level 1\nfast-compile 1\n");
    ct_start(&t, NULL);
    cumod_module_detail *d = ct_load(&t, "vf", 1);
    cr_expect_str_eq(d->module.jit_options,
                     "opt-level 1 (vf.ptx.opts), fast-compile 1 "
                     "(vf.ptx.opts)");
    cr_expect(d->jit_log && strstr(d->jit_log, "CU_JIT_OPTIMIZATION_LEVEL=1 "
                                               "CU_JIT_FAST_COMPILE=1"),
              "%s", d->jit_log);
    cumod_module_detail_free(d);
    th_env_stop(&t);
}

/* The compiler's faults stay in its worker: an NVRTC that crashes, hangs or
 * exits (tests/fakecuda's libfakenvrtc) costs only that module's compile,
 * while the daemon answers and other modules launch. */
Test(compile, a_crashing_or_hanging_compiler_costs_only_its_compile,
     .timeout = 240)
{
    ct t;
    th_env_init(&t, (const char *const[]){"vadd", NULL});
    ct_write(&t, "crash.cu", "// FAKE_NVRTC_CRASH\n");
    ct_write(&t, "hang.cu", "// FAKE_NVRTC_HANG\n");
    ct_write(&t, "gone.cu", "// FAKE_NVRTC_EXIT\n");
    /* Before the start: cumodd begins compiling hang.cu while it starts
     * (taken after, a slow start made the hang look killed early). */
    double t0 = th_now_ms();
    th_env_start(&t,
                 (const char *const[]){"--nvrtc-library", CUMOD_TEST_FAKENVRTC,
                                       "--compile-timeout", "2",
                                       "--compile-cache", "none", NULL},
                 NULL);
    /* While the hang compiles, everything else answers. */
    cumod_module_detail *d =
        ct_wait(&t, "crash", ct_has_error, NULL, "reported the crash");
    cr_expect(strstr(d->module.error, "the NVRTC worker died (Segmentation "
                                      "fault) while compiling it"),
              "%s", d->module.error);
    cumod_module_detail_free(d);
    d = ct_wait(&t, "gone", ct_has_error, NULL, "reported the exit");
    cr_expect(strstr(d->module.error, "the NVRTC worker failed (status 42)"),
              "%s", d->module.error);
    cumod_module_detail_free(d);
    cumod_module_list *l;
    cr_expect_eq(cumod_modules_list(t.c, &l), CUMOD_OK);
    cumod_module_list_free(l);
    cumod_module_detail_free(ct_load(&t, "vadd", 1));
    d = ct_wait(&t, "hang", ct_has_error, NULL, "gave up on the hang");
    cr_expect(strstr(d->module.error, "the compile ran past its limit of "
                                      "2000 ms and was killed"),
              "%s", d->module.error);
    cr_expect_geq(th_now_ms() - t0, 1900);
    cumod_module_detail_free(d);
    char *out = NULL;
    cr_expect_eq(
        th_ctl(&t.d, (const char *const[]){"status", NULL}, &out, NULL), 0);
    free(out);
    th_env_stop(&t);
}

/* 1 if a process's command line holds "--nvrtc-worker" and needle. */
static int
ct_worker_running(const char *needle)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    int found = 0;
    while (d != NULL && !found && (e = readdir(d)) != NULL) {
        char path[300], buf[4096];
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        int worker = 0, named = 0;
        for (size_t at = 0; at < n; at += strlen(buf + at) + 1) {
            buf[n] = '\0';
            worker |= strcmp(buf + at, "--nvrtc-worker") == 0;
            named |= strcmp(buf + at, needle) == 0;
        }
        found = worker && named;
    }
    if (d != NULL)
        closedir(d);
    return found;
}

/* A stopping cumodd does not wait out a compile's time limit, and leaves
 * no worker behind. */
Test(compile, a_stop_during_a_compile_kills_the_worker_at_once, .timeout = 120)
{
    ct t;
    char name[64];
    th_env_init(&t, NULL);
    snprintf(name, sizeof(name), "hang%d.cu", (int)getpid());
    ct_write(&t, name, "// FAKE_NVRTC_HANG\n");
    th_env_start(&t,
                 (const char *const[]){"--nvrtc-library", CUMOD_TEST_FAKENVRTC,
                                       "--compile-timeout", "60",
                                       "--compile-cache", "none", NULL},
                 NULL);
    double end = th_now_ms() + 20000;
    while (!ct_worker_running(name) && th_now_ms() < end)
        th_sleep_ms(20);
    cr_assert(ct_worker_running(name), "the compile started");
    double t0 = th_now_ms();
    cumod_close(t.c);
    t.c = NULL;
    cr_expect_eq(th_daemon_stop(&t.d), 0, "stopped cleanly");
    cr_expect_lt(th_now_ms() - t0, 10000, "did not wait for the compile");
    end = th_now_ms() + 5000;
    while (ct_worker_running(name) && th_now_ms() < end)
        th_sleep_ms(20);
    cr_expect(!ct_worker_running(name), "no worker left behind");
    th_rmtree(t.dir);
}

Test(compile, no_nvrtc_is_a_clear_error_and_nothing_else_fails, .timeout = 120)
{
    ct t;
    th_env_init(&t, (const char *const[]){"vadd", NULL});
    ct_write(&t, "sq.cu", sq_v1);
    th_env_start(&t,
                 (const char *const[]){"--nvrtc-library",
                                       "/nonexistent/libnvrtc.so.13", NULL},
                 NULL);
    cumod_module_detail *d =
        ct_wait(&t, "sq", ct_has_error, NULL, "said NVRTC is missing");
    cr_expect(strstr(d->module.error, "cannot be compiled: cannot load NVRTC "
                                      "(set --nvrtc-library or "
                                      "CUMOD_NVRTC_LIBRARY"),
              "%s", d->module.error);
    cr_expect(strstr(d->module.error, "/nonexistent/libnvrtc.so.13"), "%s",
              d->module.error);
    cumod_module_detail_free(d);
    cumod_module_detail_free(ct_load(&t, "vadd", 1));
    th_env_stop(&t);
}
#endif

/* ---- What a NAME.cu may read (the worker's sandbox) ---- */

/* 1 if this kernel offers Landlock (the worker's enforcement). */
static int
ct_landlock(void)
{
    return syscall(444 /* landlock_create_ruleset */, NULL, 0, 1U) > 0;
}

/* Fails if any marker occurs in text (what names where it was seen). */
static void
ct_clean(const char *what, const char *text, const char *const *markers)
{
    cr_assert_not_null(text, "%s: nothing read", what);
    for (int i = 0; markers[i] != NULL; i++)
        cr_expect(strstr(text, markers[i]) == NULL,
                  "%s holds \"%s\", a byte of a refused file:\n%s", what,
                  markers[i], text);
}

/* No marker in ls, any show, the log, the events, the metrics or any file
 * of the compile cache. */
static void
ct_nothing_leaked(ct *t, int port, const char *const *names,
                  const char *const *markers)
{
    char *out = NULL, *err = NULL;
    cr_expect_eq(th_ctl(&t->d, (const char *const[]){"ls", NULL}, &out, &err),
                 0, "%s", err);
    ct_clean("cumodctl ls", out, markers);
    free(out);
    free(err);
    for (int i = 0; names[i] != NULL; i++) {
        out = err = NULL;
        th_ctl(&t->d, (const char *const[]){"show", names[i], NULL}, &out,
               &err);
        ct_clean("cumodctl show", out, markers);
        ct_clean("cumodctl show (stderr)", err, markers);
        free(out);
        free(err);
    }
    char *log = th_daemon_log(&t->d);
    ct_clean("the daemon's log", log, markers);
    free(log);
    uint64_t after = 0;
    cumod_event evs[64];
    size_t n = 0;
    do {
        cr_assert_eq(cumod_events_wait(t->c, &after, 0, evs, 64, &n, NULL),
                     CUMOD_OK, "%s", cumod_last_detail());
        for (size_t i = 0; i < n; i++)
            ct_clean("an event", evs[i].detail, markers);
    } while (n == 64);
    if (port != 0) {
        char *m = th_metrics_get(port);
        ct_clean("the metrics", m, markers);
        free(m);
    }
    char cache[400];
    snprintf(cache, sizeof(cache), "%s/.cache", t->dir);
    DIR *d = opendir(cache);
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        char path[700];
        if (e->d_name[0] == '.' &&
            (e->d_name[1] == '\0' || strcmp(e->d_name, "..") == 0))
            continue;
        snprintf(path, sizeof(path), "%s/%s", cache, e->d_name);
        char *bytes = th_read_file(path);
        if (bytes != NULL)
            ct_clean(path, bytes, markers);
        free(bytes);
    }
    if (d != NULL)
        closedir(d);
}

typedef struct ct_evil {
    const char *name;  /* the module */
    char include[600]; /* what line 2 includes, as written */
    const char *why;   /* what the error says of it */
} ct_evil;

#ifndef CUMOD_TEST_REAL_GPU
/* The includes that must not be read, each in its module's line 2: the
 * issue's three, the secret by its path and by ../, a link in the folder
 * pointing out, a FIFO and /dev/zero. secret is outside the folder. */
static size_t
ct_evils(ct *t, const char *secret, ct_evil *ev)
{
    size_t n = 0;
    char path[600];
    static const char out[] = "outside the kernel folder, the include "
                              "folders and the toolkit's headers";
    ev[n++] = (ct_evil){"shadow", "\"/etc/shadow\"", out};
    ev[n++] = (ct_evil){
        "passwd", "\"../../../../../../../../../../../../etc/passwd\"", out};
    ev[n++] = (ct_evil){"environ", "\"/proc/self/environ\"", out};
    ev[n] = (ct_evil){"abs", "", out};
    snprintf(ev[n++].include, sizeof(ev[0].include), "\"%s\"", secret);
    ev[n] = (ct_evil){"rel", "", out};
    snprintf(ev[n++].include, sizeof(ev[0].include),
             "\"../../../../../../../../../../../..%s\"", secret);
    snprintf(path, sizeof(path), "%s/evil.h", t->dir);
    cr_assert_eq(symlink(secret, path), 0);
    ev[n++] = (ct_evil){"link", "\"evil.h\"", out};
    snprintf(path, sizeof(path), "%s/pipe.h", t->dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    ev[n++] = (ct_evil){"fifo", "\"pipe.h\"", "not a regular file"};
    ev[n++] = (ct_evil){"zero", "\"/dev/zero\"", out};
    for (size_t i = 0; i < n; i++) {
        char file[300], src[800];
        snprintf(file, sizeof(file), "%s.cu", ev[i].name);
        snprintf(src, sizeof(src), "// reaches out\n#include %s\n",
                 ev[i].include);
        ct_write(t, file, src);
    }
    return n;
}
#endif

/* Runs the evil modules' checks on a started daemon: each fails naming
 * its include line, and nothing of the files reaches anyone. */
static void
ct_evils_refused(ct *t, const ct_evil *ev, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char want[800];
        snprintf(want, sizeof(want), "%s.cu:2: #include %s: %s", ev[i].name,
                 ev[i].include, ev[i].why);
        cumod_module_detail *d =
            ct_wait(t, ev[i].name, ct_has_error, NULL, "refused its include");
        cr_expect(strstr(d->module.error, want),
                  "the error names the include line: %s (want %s)",
                  d->module.error, want);
        cumod_module_detail_free(d);
    }
}

/* A secret file outside the folder, its one line a marker that is not
 * C++ (a compiler quoting it would show it). */
static void
ct_secret(char *dir, size_t dlen, char *path, size_t plen, char *marker,
          size_t mlen)
{
    th_tmpdir(dir, dlen);
    snprintf(marker, mlen, "CUMOD_SECRET_%d_%d_MARK", (int)getpid(),
             rand() % 100000);
    snprintf(path, plen, "%s/secret.h", dir);
    char text[128];
    snprintf(text, sizeof(text), "%s is not C++\n", marker);
    cr_assert_eq(th_write_file(path, text), 0);
}

#ifndef CUMOD_TEST_REAL_GPU
/* An include reaching out of the folder (by path, by .., by a link in it,
 * /proc, a FIFO, a device) fails the compile naming its line, and no byte
 * of the file reaches ls, show, the log, the events, the metrics or the
 * cache; one the text check cannot see (a macro's) is refused by the
 * kernel where it has Landlock. NVRTC here is the fake, which opens
 * includes with open(2) and quotes a bad first line as the real one
 * does. */
Test(compile, an_include_outside_the_folder_is_refused_and_never_read,
     .timeout = 240)
{
    ct t;
    ct_evil ev[12];
    char sdir[256], secret[300], marker[64], envmark[128], port[32];
    th_env_init(&t, NULL);
    ct_secret(sdir, sizeof(sdir), secret, sizeof(secret), marker,
              sizeof(marker));
    snprintf(envmark, sizeof(envmark), "CUMOD_TEST_ENV_SECRET=%s_ENV", marker);
    size_t n = ct_evils(&t, secret, ev);
    char macro[400];
    snprintf(macro, sizeof(macro), "// FAKE_NVRTC_OPEN %s\n", secret);
    ct_write(&t, "macro.cu", macro);
    int p = th_free_port();
    snprintf(port, sizeof(port), "127.0.0.1:%d", p);
    char cache[400];
    snprintf(cache, sizeof(cache), "%s/.cache", t.dir);
    th_env_start(&t,
                 (const char *const[]){"--nvrtc-library", CUMOD_TEST_FAKENVRTC,
                                       "--compile-cache", cache,
                                       "--metrics-listen", port, NULL},
                 (const char *const[]){envmark, NULL});
    ct_evils_refused(&t, ev, n);
    if (ct_landlock()) {
        cumod_module_detail *d =
            ct_wait(&t, "macro", ct_has_error, NULL, "failed");
        cr_expect(d->compile_log &&
                      strstr(d->compile_log, "cannot open source file") &&
                      strstr(d->compile_log, "Permission denied"),
                  "the kernel refused what no text check saw: %s",
                  d->compile_log);
        cumod_module_detail_free(d);
    } else {
        cr_log_warn("no Landlock in this kernel: the macro include is not "
                    "refused (the log says: fallback: path check)");
    }
    char *log = th_daemon_log(&t.d);
    cr_expect(strstr(log, "CUMOD-COMPILE-SANDBOX") &&
                  strstr(log, ct_landlock() ? "landlock ABI "
                                            : "fallback: path check"),
              "the log says which protection is active:\n%s", log);
    free(log);
    ct_nothing_leaked(
        &t, p,
        (const char *const[]){"shadow", "passwd", "environ", "abs", "rel",
                              "link", "fifo", "zero", "macro", NULL},
        (const char *const[]){marker, "root:x:0:0", "root:", NULL});
    th_env_stop(&t);
    th_rmtree(sdir);
}
#endif

/* The same with the real NVRTC, which quotes a bad line of an included
 * file in its log: the refused includes, and a macro's, which only the
 * kernel's Landlock rules stop. A toolkit header still compiles. */
Test(compile, the_real_nvrtc_reads_nothing_outside_the_folder, .timeout = 240)
{
    ct t;
    char sdir[256], secret[300], marker[64], src[800];
    th_env_init(&t, NULL);
    ct_secret(sdir, sizeof(sdir), secret, sizeof(secret), marker,
              sizeof(marker));
    char link[400];
    snprintf(link, sizeof(link), "%s/evil.h", t.dir);
    cr_assert_eq(symlink(secret, link), 0);
    ct_write(&t, "link.cu", "// reaches out\n#include \"evil.h\"\n");
    snprintf(src, sizeof(src), "// reaches out\n#include \"%s\"\n", secret);
    ct_write(&t, "abs.cu", src);
    snprintf(src, sizeof(src),
             "#include <cuda_fp16.h>\n#define F \"%s\"\n#include F\n"
             "extern \"C\" __global__ void k(float *x) { x[0] = 1; }\n",
             secret);
    ct_write(&t, "macro.cu", src);
    ct_start(&t, NULL);
    ct_evil ev[] = {{"link", "\"evil.h\"", "outside the kernel folder"},
                    {"abs", "", "outside the kernel folder"}};
    snprintf(ev[1].include, sizeof(ev[1].include), "\"%s\"", secret);
    ct_evils_refused(&t, ev, 2);
    if (ct_landlock()) {
        cumod_module_detail *d =
            ct_wait(&t, "macro", ct_has_error, NULL, "failed");
        cr_expect(d->compile_log &&
                      strstr(d->compile_log, "cannot open source file"),
                  "NVRTC could not open it: %s", d->compile_log);
        cumod_module_detail_free(d);
    }
    ct_nothing_leaked(&t, 0,
                      (const char *const[]){"link", "abs", "macro", NULL},
                      (const char *const[]){marker, NULL});
    th_env_stop(&t);
    th_rmtree(sdir);
}

/* The pid of the first child of process pid (its /proc children), or 0. */
static pid_t
ct_child_of(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid,
             (int)pid);
    char *text = th_read_file(path);
    pid_t c = text != NULL ? (pid_t)atoi(text) : 0;
    free(text);
    return c;
}

/* In a container cumodd is PID 1 (deploy/container's exec-form
 * ENTRYPOINT, the Kubernetes DaemonSet's command). Its helpers took a
 * parent of PID 1 for init having adopted them (the front gone) and
 * exited: the executor before its context came up, so cumodd never
 * served ("the executor exited (status 70) before the CUDA context came
 * up"), and the NVRTC worker, so no NAME.cu compiled. Here cumodd runs as
 * PID 1 of a new PID namespace (unshare(1), as root); skipped, with the
 * reason, where the machine does not allow one. */
Test(compile, a_cumodd_that_is_pid_1_serves_and_compiles, .timeout = 240)
{
    ct t;
    char cache[400], *out = NULL, *err = NULL;
    const char *probe[] = {"/usr/bin/unshare", "--pid",     "--fork",
                           "--mount-proc",     "/bin/true", NULL};

    th_env_init(&t, (const char *const[]){"empty", NULL});
    if (access(probe[0], X_OK) != 0)
        cr_skip_test("no %s (Debian: util-linux)", probe[0]);
    int prc = th_run(probe, NULL, &out, &err, 10000);
    if (prc != 0) {
        char why[300];
        snprintf(why, sizeof(why), "%s", err ? err : "");
        free(out);
        free(err);
        th_rmtree(t.dir);
        cr_skip_test("this machine gives no new PID namespace (unshare "
                     "--pid: %d, %s): cumodd cannot be PID 1 here",
                     prc, why);
    }
    free(out);
    free(err);
    ct_write(&t, "sq.cu", sq_v1);
    snprintf(cache, sizeof(cache), "%s/.cache", t.dir);
    th_tmpdir(t.d.dir, sizeof(t.d.dir));
    snprintf(t.d.url, sizeof(t.d.url), "ipc://%s/cumodd.sock", t.d.dir);
    snprintf(t.d.log, sizeof(t.d.log), "%s/cumodd.log", t.d.dir);
    const char *argv[32];
    int n = 0;
    argv[n++] = probe[0];
    argv[n++] = "--pid";
    argv[n++] = "--fork";
    argv[n++] = "--mount-proc";
    argv[n++] = "--kill-child=SIGKILL"; /* the test failing: none left */
    argv[n++] = th_cumodd;
    argv[n++] = "--listen";
    argv[n++] = t.d.url;
    argv[n++] = "--kernels";
    argv[n++] = t.dir;
    argv[n++] = "--nvrtc-library";
    argv[n++] = ct_nvrtc();
    argv[n++] = "--compile-cache";
    argv[n++] = cache;
    if (!th_real_gpu()) {
        argv[n++] = "--cuda-library";
        argv[n++] = th_fakecuda;
        argv[n++] = "--cublas-library";
        argv[n++] = th_fakecublas;
    }
    argv[n] = NULL;
    int fd = open(t.d.log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fd, 1);
    posix_spawn_file_actions_adddup2(&fa, fd, 2);
    pid_t u;
    cr_assert_eq(
        posix_spawn(&u, argv[0], &fa, NULL, (char *const *)argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(fd);

    /* Serving: the executor came up under a PID 1 front. */
    int rv = CUMOD_ECONNREFUSED;
    for (int i = 0; i < 400 && rv != CUMOD_OK; i++) {
        cumod_device_info di;
        if ((rv = cumod_open(t.d.url, 2000, &t.c)) == CUMOD_OK &&
            (rv = cumod_device_info_get(t.c, &di)) != CUMOD_OK) {
            cumod_close(t.c);
            t.c = NULL;
        }
        if (rv != CUMOD_OK)
            th_sleep_ms(50);
        if (waitpid(u, NULL, WNOHANG) == u)
            break;
    }
    char *log = th_daemon_log(&t.d);
    cr_assert_eq(rv, CUMOD_OK, "cumodd as PID 1 serves; its log:\n%s", log);
    free(log);
    cr_expect(strstr(log = th_daemon_log(&t.d), "cumodd[1]") != NULL,
              "the front is PID 1 in its namespace:\n%s", log);
    free(log);
    cumod_launch_params e = {
        .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {1, 1, 1}};
    cr_expect_eq(cumod_launch(t.c, &e, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    /* A NAME.cu: the NVRTC worker did not take itself for an orphan. */
    cumod_module_detail *d = ct_load(&t, "sq", 1);
    cumod_module_detail_free(d);
    ct_run(&t, "sq:axb", 2.0f, 0.0f);

    cumod_close(t.c);
    t.c = NULL;
    pid_t front = ct_child_of(u);
    cr_assert_gt(front, 0, "cumodd's pid outside its namespace");
    cr_assert_eq(kill(front, SIGTERM), 0);
    int status = 0;
    cr_assert_eq(waitpid(u, &status, 0), u);
    log = th_daemon_log(&t.d);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "cumodd exits 0 at SIGTERM (wait status %d); log:\n%s", status,
              log);
    free(log);
    th_rmtree(t.d.dir);
    th_rmtree(t.dir);
}
