/* SPDX-License-Identifier: MIT */
/*
 * Hot reload: cumodd as a real process (on tests/fakecuda, or the real
 * driver as tests/gpu's gpu_reload_test) watching a temp
 * folder, changed the ways operators change it (copies, editor saves, slow
 * writers, deletes, renames, ConfigMap swaps, a folder that goes away),
 * checked through libcumod's module queries and the daemon's log.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cumod/cumod.h"
#include "fixture.h"

/* Built twice: here on the fake driver, and in tests/gpu on the real one
 * (each test skips with a message where there is no GPU). */
#ifdef CUMOD_TEST_REAL_GPU
TH_SUITE_DRIVER(1);
#else
TH_SUITE_DRIVER(0);
#endif

#define KDIR CUMOD_TEST_KERNEL_DIR
#define VDIR CUMOD_TEST_VARIANT_DIR

typedef th_env rt;

static void
rt_copy(const char *src, const char *dst)
{
    char *argv[] = {"/bin/cp", (char *)src, (char *)dst, NULL};
    cr_assert_eq(th_run((const char *const *)argv, NULL, NULL, NULL, 10000), 0,
                 "cp %s %s", src, dst);
}

static void
rt_write(rt *t, const char *name, const void *bytes, size_t len)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", t->dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert_geq(fd, 0, "open %s: %s", p, strerror(errno));
    cr_assert_eq(write(fd, bytes, len), (ssize_t)len);
    close(fd);
}

/* The module's record, or a zeroed one with name "" when absent. Caller
 * frees with cumod_module_result_fini. */
static cumod_module_info
rt_module(rt *t, const char *name)
{
    cumod_module_list *l;
    cumod_module_info out;
    memset(&out, 0, sizeof(out));
    cr_assert_eq(cumod_modules_list(t->c, &l), CUMOD_OK, "%s",
                 cumod_last_detail());
    for (size_t i = 0; i < l->count; i++)
        if (strcmp(l->modules[i].name, name) == 0) {
            out = l->modules[i];
            /* steal it from the list */
            memset(&l->modules[i], 0, sizeof(l->modules[i]));
        }
    cumod_module_list_free(l);
    return out;
}

static void
rt_info_fini(cumod_module_info *m)
{
    cumod_module_result r = {.module = *m};
    cumod_module_result_fini(&r);
}

/* Waits up to ms for module name to reach state with at least generation
 * gen (and, when err is 1, an error on record). */
static int
rt_wait(rt *t, const char *name, const char *state, uint64_t gen, int err,
        int ms)
{
    for (int waited = 0; waited <= ms; waited += 20) {
        cumod_module_info m = rt_module(t, name);
        int ok = strcmp(m.state, state) == 0 && m.generation >= gen &&
                 (!err || m.error != NULL);
        rt_info_fini(&m);
        if (ok)
            return 1;
        th_sleep_ms(20);
    }
    return 0;
}

static void
rt_load(rt *t, const char *name)
{
    cumod_module_result r;
    cr_assert_eq(cumod_module_load(t->c, name, &r), CUMOD_OK, "load %s: %s",
                 name, cumod_last_detail());
    cr_assert_str_eq(r.module.state, "resident");
    cumod_module_result_fini(&r);
}

static char *
rt_sha256sum(const char *path)
{
    char *out;
    const char *argv[] = {"/usr/bin/sha256sum", path, NULL};
    cr_assert_eq(th_run(argv, NULL, &out, NULL, 10000), 0);
    out[64] = '\0';
    return out;
}

Test(catalog, scan_at_start_lists_modules_and_ignores_other_names,
     .timeout = 60)
{
    rt t;
    th_env_init(&t, NULL);
    th_env_put(&t, KDIR "/vadd.cubin", "vadd.cubin");
    th_env_put(&t, KDIR "/vadd_fat.fatbin", "vadd_fat.fatbin");
    th_env_put(&t, KDIR "/scale_ptx.ptx", "scale_ptx.ptx");
    th_env_put(&t, KDIR "/scale.cubin", "notes.txt");
    th_env_put(&t, KDIR "/scale.cubin", ".hidden.cubin");
    th_env_put(&t, KDIR "/scale.cubin", "scale.cubin~");
    th_env_put(&t, KDIR "/scale.cubin", "scale.cubin.swp");
    th_env_start(&t, NULL, NULL);

    cr_assert(rt_wait(&t, "scale_ptx", "available", 0, 0, 5000));
    cumod_module_list *l;
    cr_assert_eq(cumod_modules_list(t.c, &l), CUMOD_OK);
    cr_expect_eq(l->count, 3, "three modules, not the other names");
    const char *names[] = {"scale_ptx", "vadd", "vadd_fat"};
    const char *kinds[] = {"ptx", "cubin", "fatbin"};
    const char *files[] = {KDIR "/scale_ptx.ptx", KDIR "/vadd.cubin",
                           KDIR "/vadd_fat.fatbin"};
    for (size_t i = 0; i < l->count && i < 3; i++) {
        const cumod_module_info *m = &l->modules[i];
        struct stat st;
        stat(files[i], &st);
        char *sha = rt_sha256sum(files[i]);
        cr_expect_str_eq(m->name, names[i]);
        cr_expect_str_eq(m->kind, kinds[i]);
        cr_expect_str_eq(m->state, "available", "lazy: nothing loaded");
        cr_expect_eq(m->generation, 0);
        cr_expect_eq(m->size, (uint64_t)st.st_size);
        cr_expect_str_eq(m->sha256, sha, "%s", names[i]);
        cr_expect_null(m->error);
        free(sha);
    }
    cumod_module_list_free(l);
    th_env_stop(&t);
}

Test(catalog, load_resolves_every_kernel_with_its_parameters, .timeout = 60)
{
    rt t;
    th_env_init(&t, NULL);
    th_env_put(&t, KDIR "/vadd.cubin", "vadd.cubin");
    th_env_put(&t, KDIR "/axpy.cubin", "axpy.cubin");
    th_env_put(&t, KDIR "/affine.cubin", "affine.cubin");
    th_env_start(&t, NULL, NULL);

    rt_load(&t, "vadd");
    cumod_module_detail *d;
    cr_assert_eq(cumod_module_show(t.c, "vadd", &d), CUMOD_OK);
    cr_expect_str_eq(d->module.state, "resident");
    cr_expect_eq(d->module.generation, 1);
    cr_assert_eq(d->nkernels, 1);
    cr_expect_str_eq(d->kernels[0].name, "vadd");
    cr_assert_eq(d->kernels[0].nparams, 4);
    uint32_t off[] = {0, 8, 16, 24}, sz[] = {8, 8, 8, 4};
    for (int i = 0; i < 4; i++) {
        cr_expect_eq(d->kernels[0].params[i].offset, off[i]);
        cr_expect_eq(d->kernels[0].params[i].size, sz[i]);
    }
    cumod_module_detail_free(d);

    rt_load(&t, "axpy");
    cr_assert_eq(cumod_module_show(t.c, "axpy", &d), CUMOD_OK);
    cr_assert_eq(d->nkernels, 2, "axpy<float> and axpy<double>");
    int f = strcmp(d->kernels[0].name, "_Z4axpyIfEvT_PKS0_PS0_i") == 0 ? 0 : 1;
    cr_expect_str_eq(d->kernels[f].name, "_Z4axpyIfEvT_PKS0_PS0_i");
    cr_expect_str_eq(d->kernels[1 - f].name, "_Z4axpyIdEvT_PKS0_PS0_i");
    cr_expect_eq(d->kernels[f].params[0].size, 4, "float a");
    cr_expect_eq(d->kernels[1 - f].params[0].size, 8, "double a");
    cumod_module_detail_free(d);

    rt_load(&t, "affine");
    cr_assert_eq(cumod_module_show(t.c, "affine", &d), CUMOD_OK);
    cr_assert_eq(d->nkernels, 1);
    cr_assert_eq(d->kernels[0].nparams, 3);
    cr_expect_eq(d->kernels[0].params[0].size, 24, "the struct by value");
    cr_expect_eq(d->kernels[0].params[1].offset, 24);
    cr_expect_eq(d->kernels[0].params[2].offset, 32);
    cumod_module_detail_free(d);
    th_env_stop(&t);
}

Test(reload, a_new_file_becomes_the_next_generation, .timeout = 60)
{
    rt t;
    th_env_init(&t, NULL);
    th_env_put(&t, KDIR "/vadd.cubin", "vadd.cubin");
    th_env_start(&t, NULL, NULL);
    rt_load(&t, "vadd");

    th_env_put(&t, VDIR "/vadd.cubin", "vadd.cubin");
    cr_assert(rt_wait(&t, "vadd", "resident", 2, 0, 5000),
              "generation 2 should serve after the copy");
    cumod_module_info m = rt_module(&t, "vadd");
    char *sha = rt_sha256sum(VDIR "/vadd.cubin");
    cr_expect_str_eq(m.sha256, sha);
    cr_expect_null(m.error);
    free(sha);
    rt_info_fini(&m);

    /* The same bytes again: identity is the hash, nothing happens. */
    th_env_put(&t, VDIR "/vadd.cubin", "vadd.cubin");
    th_sleep_ms(300);
    m = rt_module(&t, "vadd");
    cr_expect_eq(m.generation, 2, "unchanged bytes make no generation");
    rt_info_fini(&m);
    char *log = th_daemon_log(&t.d);
    cr_expect_eq(th_count(log, "CUMOD-RELOAD:"), 1, "%s", log);
    free(log);
    th_env_stop(&t);
}

Test(reload, an_editor_save_by_rename_reloads_once, .timeout = 60)
{
    rt t;
    th_env_init(&t, NULL);
    th_env_put(&t, KDIR "/vadd.cubin", "vadd.cubin");
    th_env_start(&t, NULL, NULL);
    rt_load(&t, "vadd");
    th_env_put(&t, VDIR "/vadd.cubin", ".vadd.cubin.swp");
    char a[512], b[512];
    snprintf(a, sizeof(a), "%s/.vadd.cubin.swp", t.dir);
    snprintf(b, sizeof(b), "%s/vadd.cubin", t.dir);
    cr_assert_eq(rename(a, b), 0);
    cr_assert(rt_wait(&t, "vadd", "resident", 2, 0, 5000));
    th_sleep_ms(200);
    cumod_module_info m = rt_module(&t, "vadd");
    cr_expect_eq(m.generation, 2);
    rt_info_fini(&m);
    th_env_stop(&t);
}

Test(reload, a_slow_writer_gives_exactly_one_reload_after_close, .timeout = 60)
{
    rt t;
    th_env_init(&t, NULL);
    th_env_put(&t, KDIR "/vadd.cubin", "vadd.cubin");
    th_env_start(&t, NULL, NULL);
    rt_load(&t, "vadd");

    char *img = th_read_file(VDIR "/vadd.cubin");
    struct stat st;
    stat(VDIR "/vadd.cubin", &st);
    char p[512];
    snprintf(p, sizeof(p), "%s/vadd.cubin", t.dir);
    int fd = open(p, O_WRONLY | O_TRUNC);
    cr_assert_geq(fd, 0);
    for (off_t at = 0; at < st.st_size; at += 4096) {
        size_t n = (size_t)(st.st_size - at < 4096 ? st.st_size - at : 4096);
        cr_assert_eq(write(fd, img + at, n), (ssize_t)n);
        th_sleep_ms(50);
        cumod_module_info m = rt_module(&t, "vadd");
        cr_expect_eq(m.generation, 1, "nothing happens before close");
        rt_info_fini(&m);
    }
    close(fd);
    free(img);
    cr_assert(rt_wait(&t, "vadd", "resident", 2, 0, 5000));
    th_sleep_ms(300);
    cumod_module_info m = rt_module(&t, "vadd");
    cr_expect_eq(m.generation, 2, "exactly one reload");
    cr_expect_null(m.error);
    rt_info_fini(&m);
    char *log = th_daemon_log(&t.d);
    cr_expect_eq(th_count(log, "CUMOD-RELOAD-FAIL"), 0, "%s", log);
    cr_expect_eq(th_count(log, "CUMOD-IMAGE-BAD"), 0, "%s", log);
    free(log);
    th_env_stop(&t);
}

/* Writes a bad file over a serving vadd and checks that generation 1 goes
 * on serving with the error on record. */
static void
rt_bad_file(const char *what, void (*make)(rt *t), const char *needle,
            const char *const *extra)
{
    rt t;
    th_env_init(&t, NULL);
    th_env_put(&t, KDIR "/vadd.cubin", "vadd.cubin");
    th_env_start(&t, extra, NULL);
    rt_load(&t, "vadd");
    make(&t);
    cr_assert(rt_wait(&t, "vadd", "resident", 1, 1, 5000),
              "%s: the error should be on record", what);
    cumod_module_info m = rt_module(&t, "vadd");
    cr_expect_eq(m.generation, 1, "%s: generation 1 keeps serving", what);
    cr_expect_str_eq(m.state, "resident");
    cr_expect(m.error && strstr(m.error, needle), "%s: error '%s' lacks '%s'",
              what, m.error ? m.error : "(none)", needle);
    rt_info_fini(&m);
    /* Still serving: the module's kernels are there and the daemon up. */
    cumod_module_detail *d;
    cr_expect_eq(cumod_module_show(t.c, "vadd", &d), CUMOD_OK);
    cr_expect_eq(d->nkernels, 1);
    cumod_module_detail_free(d);
    th_env_stop(&t);
}

static void
mk_empty(rt *t)
{
    rt_write(t, "vadd.cubin", "", 0);
}
static void
mk_junk(rt *t)
{
    rt_write(t, "vadd.cubin", "this is not an ELF file at all\n", 31);
}
static void
mk_truncated(rt *t)
{
    char *img = th_read_file(VDIR "/vadd.cubin");
    rt_write(t, "vadd.cubin", img, 700);
    free(img);
}
static void
mk_wrong_sm(rt *t)
{
    th_env_put(t, CUMOD_TEST_IMAGE_DIR "/vadd.sm_80.cubin", "vadd.cubin");
}
static void
mk_big(rt *t)
{
    th_env_put(t, KDIR "/axpy.cubin", "vadd.cubin"); /* 6 KiB, over the cap */
}
static void
mk_fifo(rt *t)
{
    char p[512], q[512];
    snprintf(p, sizeof(p), "%s/.fifo", t->dir);
    snprintf(q, sizeof(q), "%s/vadd.cubin", t->dir);
    cr_assert_eq(mkfifo(p, 0644), 0);
    cr_assert_eq(rename(p, q), 0);
}
static void
mk_symlink_out(rt *t)
{
    char p[512], q[512];
    snprintf(p, sizeof(p), "%s/.link", t->dir);
    snprintf(q, sizeof(q), "%s/vadd.cubin", t->dir);
    cr_assert_eq(symlink(VDIR "/vadd.cubin", p), 0);
    cr_assert_eq(rename(p, q), 0);
}

Test(bad_files, empty, .timeout = 60)
{
    rt_bad_file("empty", mk_empty, "empty", NULL);
}
Test(bad_files, junk, .timeout = 60)
{
    rt_bad_file("junk", mk_junk, "vadd.cubin", NULL);
}
Test(bad_files, truncated, .timeout = 60)
{
    rt_bad_file("truncated", mk_truncated, "vadd.cubin", NULL);
}
Test(bad_files, wrong_sm, .timeout = 60)
{
    rt_bad_file("wrong SM", mk_wrong_sm, "sm_80", NULL);
}
Test(bad_files, oversized, .timeout = 60)
{
    rt_bad_file("oversized", mk_big, "4096",
                (const char *[]){"--max-image-size", "4096", NULL});
}
Test(bad_files, fifo, .timeout = 60)
{
    rt_bad_file("FIFO", mk_fifo, "FIFO", NULL);
}
Test(bad_files, symlink_leading_out, .timeout = 60)
{
    rt_bad_file("symlink out", mk_symlink_out, "outside", NULL);
}

Test(events, delete_then_recreate, .timeout = 60)
{
    rt t;
    th_env_init(&t, NULL);
    th_env_put(&t, KDIR "/vadd.cubin", "vadd.cubin");
    th_env_put(&t, KDIR "/scale.cubin", "scale.cubin");
    th_env_start(&t, NULL, NULL);
    rt_load(&t, "vadd");
    char p[512];
    snprintf(p, sizeof(p), "%s/vadd.cubin", t.dir);
    cr_assert_eq(unlink(p), 0);
    int gone = 0;
    for (int i = 0; i < 250 && !gone; i++) {
        cumod_module_info m = rt_module(&t, "vadd");
        gone = m.name[0] == '\0';
        rt_info_fini(&m);
        th_sleep_ms(20);
    }
    cr_expect(gone, "a deleted module leaves the catalog once unloaded");
    cumod_module_result r;
    cr_expect_eq(cumod_module_load(t.c, "vadd", &r), CUMOD_ENOENT);
    cr_expect(strstr(cumod_last_detail(), "no module named 'vadd'"), "%s",
              cumod_last_detail());
    /* Moved in: new content. */
    char src[512];
    snprintf(src, sizeof(src), "%s/.incoming", t.dir);
    rt_copy(KDIR "/vadd.cubin", src);
    cr_assert_eq(rename(src, p), 0);
    cr_expect(rt_wait(&t, "vadd", "available", 0, 0, 5000));
    /* Moved out: gone. */
    char out[512];
    snprintf(out, sizeof(out), "%s/scale.cubin", t.dir);
    snprintf(src, sizeof(src), "%s.moved", t.dir);
    cr_assert_eq(rename(out, src), 0);
    gone = 0;
    for (int i = 0; i < 250 && !gone; i++) {
        cumod_module_info m = rt_module(&t, "scale");
        gone = m.name[0] == '\0';
        rt_info_fini(&m);
        th_sleep_ms(20);
    }
    cr_expect(gone, "a module moved out of the folder is gone");
    unlink(src);
    th_env_stop(&t);
}

Test(events, the_preferred_image_wins_and_says_which, .timeout = 60)
{
    rt t;
    th_env_init(&t, NULL);
    th_env_put(&t, KDIR "/scale_ptx.ptx", "scale.ptx");
    th_env_start(&t, NULL, NULL);
    cr_assert(rt_wait(&t, "scale", "available", 0, 0, 5000));
    cumod_module_info m = rt_module(&t, "scale");
    cr_expect_str_eq(m.kind, "ptx");
    rt_info_fini(&m);
    rt_load(&t, "scale");
    /* A cubin beside the PTX is preferred: the module reloads from it. */
    th_env_put(&t, KDIR "/scale.cubin", "scale.cubin");
    cr_assert(rt_wait(&t, "scale", "resident", 2, 0, 5000));
    m = rt_module(&t, "scale");
    cr_expect_str_eq(m.kind, "cubin");
    cr_expect_str_eq(m.file, "scale.cubin");
    cr_expect_eq(m.nimages, 2, "both files are listed");
    rt_info_fini(&m);
    /* The cubin goes: back to the PTX, as generation 3. */
    char p[512];
    snprintf(p, sizeof(p), "%s/scale.cubin", t.dir);
    unlink(p);
    cr_assert(rt_wait(&t, "scale", "resident", 3, 0, 5000));
    m = rt_module(&t, "scale");
    cr_expect_str_eq(m.kind, "ptx");
    rt_info_fini(&m);
    th_env_stop(&t);
}

Test(events, the_folder_removed_and_recreated_is_watched_again, .timeout = 60)
{
    rt t;
    th_env_init(&t, NULL);
    th_env_put(&t, KDIR "/vadd.cubin", "vadd.cubin");
    th_env_start(&t, NULL, NULL);
    rt_load(&t, "vadd");
    th_rmtree(t.dir);
    cumod_device_info di;
    int degraded = 0;
    for (int i = 0; i < 250 && !degraded; i++) {
        cr_assert_eq(cumod_device_info_get(t.c, &di), CUMOD_OK);
        degraded = di.kernel_dir_degraded;
        th_sleep_ms(20);
    }
    cr_expect(degraded, "status reports the folder as degraded");
    cr_assert_eq(mkdir(t.dir, 0755), 0);
    th_env_put(&t, KDIR "/scale.cubin", "scale.cubin");
    cr_expect(rt_wait(&t, "scale", "available", 0, 0, 10000),
              "the folder is rescanned when it is back");
    cr_assert_eq(cumod_device_info_get(t.c, &di), CUMOD_OK);
    cr_expect_eq(di.kernel_dir_degraded, 0);
    cumod_module_info m = rt_module(&t, "vadd");
    cr_expect_eq(m.name[0], '\0', "vadd is not in the new folder");
    rt_info_fini(&m);
    char *log = th_daemon_log(&t.d);
    cr_expect(strstr(log, "CUMOD-DIR-GONE") != NULL, "%s", log);
    free(log);
    th_env_stop(&t);
}

Test(events, a_configmap_data_swap_rescans, .timeout = 60)
{
    rt t;
    char p[512], q[512];
    th_env_init(&t, NULL);
    /* The Kubernetes volume layout: name -> ..data/name, ..data -> ..v1 */
    snprintf(p, sizeof(p), "%s/..v1", t.dir);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/..v1/vadd.cubin", t.dir);
    rt_copy(KDIR "/vadd.cubin", p);
    snprintf(p, sizeof(p), "%s/..data", t.dir);
    cr_assert_eq(symlink("..v1", p), 0);
    snprintf(p, sizeof(p), "%s/vadd.cubin", t.dir);
    cr_assert_eq(symlink("..data/vadd.cubin", p), 0);
    th_env_start(&t, NULL, NULL);
    rt_load(&t, "vadd");
    /* The update: a new timestamped folder, ..data swapped atomically. */
    snprintf(p, sizeof(p), "%s/..v2", t.dir);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/..v2/vadd.cubin", t.dir);
    rt_copy(VDIR "/vadd.cubin", p);
    snprintf(p, sizeof(p), "%s/..data_tmp", t.dir);
    cr_assert_eq(symlink("..v2", p), 0);
    snprintf(q, sizeof(q), "%s/..data", t.dir);
    cr_assert_eq(rename(p, q), 0);
    cr_expect(rt_wait(&t, "vadd", "resident", 2, 0, 5000),
              "the ..data swap reloads vadd");
    cumod_module_info m = rt_module(&t, "vadd");
    char *sha = rt_sha256sum(VDIR "/vadd.cubin");
    cr_expect_str_eq(m.sha256, sha);
    free(sha);
    rt_info_fini(&m);
    th_env_stop(&t);
}
