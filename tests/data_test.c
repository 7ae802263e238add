/* SPDX-License-Identifier: MIT */
/*
 * The data plane on the fake driver: sessions, buffers, segments, launches
 * and batches, through libcumod against cumodd as a real process. The fake
 * records what reached the driver in its log (CUMOD_FAKE_LOG), so the tests
 * check the packed parameter bytes and that a refused launch launched
 * nothing.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cumod/cumod.h"
#include "fixture.h"

extern char **environ;

TH_SUITE_DRIVER(0);

#define KDIR CUMOD_TEST_KERNEL_DIR

typedef th_env dt;

/* cumodd on a folder with vadd, scale, empty and affine; fault, if not NULL,
 * is the fake driver's CUMOD_FAKE_FAULT. */
static void
dt_start(dt *t, const char *const *extra, const char *fault)
{
    static const char *const kernels[] = {"vadd", "scale", "empty", "affine",
                                          NULL};
    char env_fault[200];
    snprintf(env_fault, sizeof(env_fault), "CUMOD_FAKE_FAULT=%s",
             fault ? fault : "");
    const char *env[] = {fault ? env_fault : NULL, NULL};
    th_env_init(t, kernels);
    th_env_start(t, extra, env);
}

static int
dt_launches(dt *t)
{
    char *log = th_read_file(t->fake_log);
    int n = log ? th_count(log, "\nlaunch ") + (strncmp(log, "launch ", 7) == 0)
                : 0;
    free(log);
    return n;
}

static void
hex_le(char *out, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", (unsigned)((v >> (8 * i)) & 0xff));
}

static cumod_launch_params
dt_params(const char *kernel, unsigned grid, unsigned block,
          const cumod_arg *args, size_t nargs)
{
    cumod_launch_params p = {.kernel = kernel,
                             .grid = {grid, 1, 1},
                             .block = {block, 1, 1},
                             .nargs = nargs,
                             .args = args};
    return p;
}

Test(launch, packs_pointers_from_handles_and_values_in_place, .timeout = 60)
{
    dt t;
    cumod_buffer a, b, c;
    dt_start(&t, NULL, NULL);
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &a), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, 8192, &b), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, 12288, &c), CUMOD_OK);
    cumod_arg args[] = {cumod_arg_buffer(a, 0), cumod_arg_buffer(b, 16),
                        cumod_arg_buffer(c, 32), cumod_arg_i32(1000)};
    cumod_launch_params p = dt_params("vadd:vadd", 4, 256, args, 4);
    uint64_t gen = 0;
    cr_assert_eq(cumod_launch(t.c, &p, NULL, &gen), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect_eq(gen, 1, "lazily loaded as generation 1");

    char want[200] = "params=";
    hex_le(want + 7, th_env_alloc_ptr(&t, 4096), 8);
    hex_le(want + 23, th_env_alloc_ptr(&t, 8192) + 16, 8);
    hex_le(want + 39, th_env_alloc_ptr(&t, 12288) + 32, 8);
    hex_le(want + 55, 1000, 4);
    char *log = th_read_file(t.fake_log);
    cr_expect(strstr(log, "launch fn=vadd ") != NULL, "%s", log);
    cr_expect(strstr(log, "grid=4,1,1 block=256,1,1 shmem=0") != NULL, "%s",
              log);
    cr_expect(strstr(log, want) != NULL, "want %s in:\n%s", want, log);
    free(log);

    /* A struct by value: its 24 bytes in place, then two pointers. */
    struct {
        float a;
        double b;
        int n;
        char tag;
    } ap = {2.0f, 0.5, 77, 'q'};
    cumod_arg aargs[] = {cumod_arg_bytes(&ap, sizeof(ap)),
                         cumod_arg_buffer(a, 0), cumod_arg_buffer(b, 8)};
    p = dt_params("affine:affine", 1, 64, aargs, 3);
    cr_assert_eq(cumod_launch(t.c, &p, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    char want2[200] = "params=";
    for (size_t i = 0; i < sizeof(ap); i++)
        sprintf(want2 + 7 + 2 * i, "%02x", ((unsigned char *)&ap)[i]);
    hex_le(want2 + 7 + 48, th_env_alloc_ptr(&t, 4096), 8);
    hex_le(want2 + 7 + 64, th_env_alloc_ptr(&t, 8192) + 8, 8);
    log = th_read_file(t.fake_log);
    cr_expect(strstr(log, want2) != NULL, "want %s in:\n%s", want2, log);
    free(log);
    th_env_stop(&t);
}

/* Each bad launch is refused with a message naming what was wrong, and
 * reaches no driver. */
static void
dt_refused(dt *t, cumod_launch_params *p, int code, const char *needle)
{
    int before = dt_launches(t);
    int rv = cumod_launch(t->c, p, NULL, NULL);
    cr_expect_eq(rv, code, "%s: got %d (%s)", needle, rv, cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(), needle) != NULL,
              "detail '%s' lacks '%s'", cumod_last_detail(), needle);
    cr_expect_eq(dt_launches(t), before, "%s: nothing may be launched", needle);
}

Test(launch, every_validation_error_names_its_cause, .timeout = 60)
{
    dt t;
    cumod_buffer x;
    dt_start(&t, NULL, NULL);
    cr_assert_eq(cumod_buffer_alloc(t.c, 1024, &x), CUMOD_OK);
    cumod_arg ok[] = {cumod_arg_buffer(x, 0), cumod_arg_f32(2.0f),
                      cumod_arg_i32(256)};
    cumod_launch_params p = dt_params("scale:scale", 1, 256, ok, 3);
    cr_assert_eq(cumod_launch(t.c, &p, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());

    p.nargs = 2;
    dt_refused(&t, &p, CUMOD_EINVAL, "takes 3 arguments, 2 given");
    p.nargs = 3;
    cumod_arg wrong_size[] = {cumod_arg_buffer(x, 0), cumod_arg_f64(2.0),
                              cumod_arg_i32(256)};
    p.args = wrong_size;
    dt_refused(&t, &p, CUMOD_EINVAL,
               "argument 2 of scale: 8 bytes given, the kernel takes 4");
    cumod_arg buf_for_value[] = {cumod_arg_buffer(x, 0), cumod_arg_buffer(x, 0),
                                 cumod_arg_i32(256)};
    p.args = buf_for_value;
    dt_refused(&t, &p, CUMOD_EINVAL,
               "argument 2 of scale is not pointer-sized (4 bytes): a buffer "
               "reference (a device pointer) cannot go there");
    cumod_arg not_mine[] = {cumod_arg_buffer(x + 1000, 0), cumod_arg_f32(1),
                            cumod_arg_i32(1)};
    p.args = not_mine;
    dt_refused(&t, &p, CUMOD_ENOENT, "is not one of this connection's");
    cumod_arg past_end[] = {cumod_arg_buffer(x, 2048), cumod_arg_f32(1),
                            cumod_arg_i32(1)};
    p.args = past_end;
    dt_refused(&t, &p, CUMOD_EINVAL, "past the end of buffer");
    p.args = ok;
    p.grid.y = 70000;
    dt_refused(&t, &p, CUMOD_EINVAL,
               "grid.y = 70000 is above the device's limit 65535");
    p.grid.y = 1;
    p.block.x = 2048;
    dt_refused(&t, &p, CUMOD_EINVAL,
               "block.x = 2048 is above the device's limit 1024");
    p.block.x = 512;
    p.block.y = 4;
    dt_refused(&t, &p, CUMOD_EINVAL,
               "has 2048 threads; the device allows 1024");
    p.block.y = 1;
    p.shared_mem = 1 << 20;
    dt_refused(&t, &p, CUMOD_EINVAL, "dynamic shared memory");
    p.shared_mem = 0;
    p.kernel = "scale:nosuch";
    dt_refused(&t, &p, CUMOD_ENOENT, "has no kernel 'nosuch'; it has: scale");
    p.kernel = "nosuch:scale";
    dt_refused(&t, &p, CUMOD_ENOENT, "no module named 'nosuch'");
    p.kernel = "scale";
    dt_refused(&t, &p, CUMOD_EINVAL, "'scale' is not");
    p.kernel = "scale:scale";
    p.generation = 7;
    dt_refused(&t, &p, CUMOD_ENOENT, "generation 7 of scale is not loaded");
    th_env_stop(&t);
}

Test(buffers, writes_reads_and_bounds, .timeout = 60)
{
    dt t;
    cumod_buffer x, other;
    unsigned char in[256], out[256];
    dt_start(&t, NULL, NULL);
    cr_assert_eq(cumod_buffer_alloc(t.c, 256, &x), CUMOD_OK);
    for (int i = 0; i < 256; i++)
        in[i] = (unsigned char)(i * 7);
    cr_assert_eq(cumod_buffer_write(t.c, x, 0, in, 256, 0), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_buffer_read(t.c, x, 0, out, 256, 0), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect(memcmp(in, out, 256) == 0, "the bytes come back");
    cr_assert_eq(cumod_buffer_memset(t.c, x, 16, 32, 0xab, 0, NULL), CUMOD_OK);
    cr_assert_eq(cumod_buffer_read(t.c, x, 0, out, 64, 0), CUMOD_OK);
    cr_expect_eq(out[15], in[15]);
    cr_expect_eq(out[16], 0xab);
    cr_expect_eq(out[47], 0xab);
    cr_expect_eq(out[48], in[48]);

    cr_expect_eq(cumod_buffer_write(t.c, x, 250, in, 8, 0), CUMOD_EINVAL);
    cr_expect(strstr(cumod_last_detail(),
                     "offset 250 + length 8 is past the end of buffer"),
              "%s", cumod_last_detail());
    cr_expect_eq(cumod_buffer_read(t.c, x, 0, out, 257, 0), CUMOD_EINVAL);
    cr_expect_eq(cumod_buffer_memset(t.c, x, 255, 2, 0, 0, NULL), CUMOD_EINVAL);
    cr_expect_eq(cumod_buffer_read(t.c, x + 99, 0, out, 1, 0), CUMOD_ENOENT);

    /* Another connection's handle is not found. */
    cumod_client *c2;
    cr_assert_eq(cumod_open(t.d.url, 10000, &c2), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(c2, 64, &other), CUMOD_OK);
    cr_expect_eq(cumod_buffer_read(c2, x == other ? x + 1 : x, 0, out, 1, 0),
                 CUMOD_ENOENT, "a handle of another session is not found");
    cumod_close(c2);
    cr_expect_eq(cumod_buffer_free(t.c, x), CUMOD_OK);
    cr_expect_eq(cumod_buffer_free(t.c, x), CUMOD_ENOENT, "freed twice");
    th_env_stop(&t);
}

Test(segments, copies_both_ways_with_bounds, .timeout = 60)
{
    dt t;
    cumod_segment *seg;
    cumod_buffer x, y;
    dt_start(&t, NULL, NULL);
    cr_assert_eq(cumod_segment_create(t.c, 1 << 20, &seg), CUMOD_OK, "%s",
                 cumod_last_detail());
    unsigned char *m = cumod_segment_data(seg);
    for (int i = 0; i < (1 << 20); i++)
        m[i] = (unsigned char)(i % 251);
    cr_assert_eq(cumod_buffer_alloc(t.c, 1 << 19, &x), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, 1 << 19, &y), CUMOD_OK);
    cr_assert_eq(cumod_copy_to_device(t.c, x, 0, seg, 4096, 1 << 19, 0, NULL),
                 CUMOD_OK, "%s", cumod_last_detail());
    cr_assert_eq(cumod_copy_device(t.c, y, 0, x, 0, 1 << 19, 0, NULL), CUMOD_OK,
                 "%s", cumod_last_detail());
    memset(m, 0, 1 << 20);
    cumod_ticket tk;
    cr_assert_eq(cumod_copy_to_host(t.c, seg, 0, y, 0, 1 << 19, 0, &tk),
                 CUMOD_OK, "%s", cumod_last_detail());
    cr_assert_eq(cumod_wait(t.c, tk), CUMOD_OK, "%s", cumod_last_detail());
    int bad = 0;
    for (int i = 0; i < (1 << 19); i++)
        bad += m[i] != (unsigned char)((i + 4096) % 251);
    cr_expect_eq(bad, 0, "the data came back through both copies");
    cr_expect_eq(
        cumod_copy_to_device(t.c, x, 0, seg, (1 << 20) - 10, 20, 0, NULL),
        CUMOD_EINVAL);
    cr_expect(strstr(cumod_last_detail(), "past the end of"), "%s",
              cumod_last_detail());
    cr_expect_eq(cumod_copy_to_host(t.c, seg, 0, x, (1 << 19) - 1, 2, 0, NULL),
                 CUMOD_EINVAL);
    cr_expect(strstr(cumod_last_detail(), "past the end of buffer"), "%s",
              cumod_last_detail());
    cr_expect_eq(cumod_copy_device(t.c, y, 1, x, 0, 1 << 19, 0, NULL),
                 CUMOD_EINVAL, "device to device: the destination's end");
    cr_expect_eq(cumod_copy_device(t.c, y, 0, x, 8, 1 << 19, 0, NULL),
                 CUMOD_EINVAL, "device to device: the source's end");
    cr_expect(strstr(cumod_last_detail(), "past the end of buffer"), "%s",
              cumod_last_detail());
    cr_expect_eq(cumod_segment_destroy(t.c, seg), CUMOD_OK);
    /* The executor unregisters it once the device is idle, after the
     * answer (cuMemHostUnregister waits for the device). */
    char *log = th_env_fake_log_wait(&t, "unregister ptr=", 5000);
    cr_expect(strstr(log, "register ptr=") && strstr(log, "unregister ptr="),
              "registered with the driver once, unregistered at the end");
    cr_expect(strstr(log, "kind=htod") && strstr(log, "kind=dtoh") &&
                  strstr(log, "kind=dtod"),
              "%s", log);
    free(log);
    th_env_stop(&t);
}

/* Free device memory as the daemon reports it. */
static uint64_t
dt_free_mem(cumod_client *c)
{
    cumod_device_info di;
    cr_assert_eq(cumod_device_info_get(c, &di), CUMOD_OK);
    return di.free_memory;
}

Test(sessions, a_closed_connection_gives_its_memory_back, .timeout = 60)
{
    dt t;
    dt_start(&t, NULL, NULL);
    uint64_t before = dt_free_mem(t.c);
    cumod_client *c2;
    cumod_buffer b;
    cumod_segment *seg;
    cr_assert_eq(cumod_open(t.d.url, 10000, &c2), CUMOD_OK);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(cumod_buffer_alloc(c2, 1 << 20, &b), CUMOD_OK);
    cr_assert_eq(cumod_segment_create(c2, 65536, &seg), CUMOD_OK);
    cr_expect_eq(dt_free_mem(t.c), before - 3 * (1 << 20));
    cumod_close(c2);
    /* Its connection is gone: freed here only (the session's end unmaps it
     * in the daemon, which is what this test checks). */
    cr_expect_eq(cumod_segment_destroy(NULL, seg), CUMOD_EINVAL);
    uint64_t now = 0;
    for (int i = 0; i < 250 && now != before; i++) {
        th_sleep_ms(20);
        now = dt_free_mem(t.c);
    }
    cr_expect_eq(now, before, "device memory returns to where it was");
    /* The segment goes on the executor's reclaim lane, apart from the
     * buffers' frees: its unregister can come after the memory is back. */
    char *log = th_env_fake_log_wait(&t, "unregister ptr=", 5000);
    cr_expect(log && strstr(log, "unregister ptr=") != NULL,
              "segment released");
    free(log);
    th_env_stop(&t);
}

/* What cumodd made in the driver it gives back before its context goes:
 * fakecuda logs what a context still held when it was released. */
Test(sessions, a_clean_stop_leaves_nothing_in_the_driver, .timeout = 60)
{
    dt t;
    cumod_client *c2;
    cumod_buffer b;
    cumod_segment *seg;
    cumod_stream s;
    dt_start(&t, NULL, NULL);
    cr_assert_eq(cumod_open(t.d.url, 10000, &c2), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(c2, 4096, &b), CUMOD_OK);
    cr_assert_eq(cumod_segment_create(c2, 65536, &seg), CUMOD_OK);
    cr_assert_eq(cumod_stream_create(c2, &s), CUMOD_OK);
    cumod_arg args[] = {cumod_arg_buffer(b, 0), cumod_arg_f32(2.0f),
                        cumod_arg_i32(16)};
    cumod_launch_params p = dt_params("scale:scale", 1, 32, args, 3);
    p.stream = s;
    cr_assert_eq(cumod_launch(c2, &p, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_stream_synchronize(c2, s), CUMOD_OK);
    /* One client leaves tidily, the other with all it holds. */
    cumod_close(c2);
    cr_expect_eq(cumod_segment_destroy(NULL, seg), CUMOD_EINVAL); /* freed */
    cr_assert_eq(cumod_buffer_alloc(t.c, 8192, &b), CUMOD_OK);
    cumod_close(t.c);
    t.c = NULL;
    /* Memory and segments given back before the stop are freed; those
     * still on their way at exit go with the context, by design, so the
     * test waits for them (streams are destroyed either way). */
    char *log = NULL;
    for (int w = 0; w < 500; w++) {
        free(log);
        log = th_read_file(t.fake_log);
        if (log && th_count(log, "free ptr=") >= 2 &&
            th_count(log, "unregister ptr=") >= 1)
            break;
        th_sleep_ms(10);
    }
    free(log);
    kill(t.d.pid, SIGTERM);
    cr_assert_geq(th_daemon_wait(&t.d, 10000), 0, "cumodd stops");
    log = th_read_file(t.fake_log);
    cr_assert(log != NULL);
    cr_expect_eq(th_count(log, "teardown device=0 left streams=0 events=0 "
                               "modules=0 allocations=0 registrations=0"),
                 1, "every context's last release finds it empty:\n%s",
                 strstr(log, "teardown") ? strstr(log, "teardown") : log);
    free(log);
    th_env_stop(&t);
}

Test(sessions, a_killed_client_gives_its_memory_back, .timeout = 60)
{
    dt t;
    int out[2];
    posix_spawn_file_actions_t fa;
    pid_t pid;
    char ready[8] = "";

    dt_start(&t, NULL, NULL);
    uint64_t before = dt_free_mem(t.c);
    cr_assert_eq(pipe(out), 0);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    char *argv[] = {(char *)CUMOD_TEST_HOLD_CLIENT, t.d.url, "2097152", NULL};
    cr_assert_eq(posix_spawn(&pid, argv[0], &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    cr_assert_gt(read(out[0], ready, sizeof(ready) - 1), 0,
                 "the client should allocate and say so");
    close(out[0]);
    cr_expect_eq(dt_free_mem(t.c), before - (1 << 21));
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    uint64_t now = 0;
    for (int i = 0; i < 250 && now != before; i++) {
        th_sleep_ms(20);
        now = dt_free_mem(t.c);
    }
    cr_expect_eq(now, before, "kill -9 of a client frees what it held");
    th_env_stop(&t);
}

Test(sessions, a_memory_limit_per_connection, .timeout = 60)
{
    dt t;
    cumod_buffer b;
    dt_start(&t, (const char *[]){"--session-memory-limit", "1000000", NULL},
             NULL);
    cr_assert_eq(cumod_buffer_alloc(t.c, 600000, &b), CUMOD_OK);
    cr_expect_eq(cumod_buffer_alloc(t.c, 600000, &b), CUMOD_EDEVMEM);
    cr_expect(strstr(cumod_last_detail(), "--session-memory-limit"), "%s",
              cumod_last_detail());
    th_env_stop(&t);
}

Test(batches, a_thousand_items_run_in_one_request, .timeout = 60)
{
    dt t;
    cumod_batch *b;
    cumod_buffer x;
    dt_start(&t, NULL, NULL);
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &x), CUMOD_OK);
    cr_assert_eq(cumod_batch_alloc(&b), CUMOD_OK);
    cumod_launch_params p = dt_params("empty:empty", 1, 32, NULL, 0);
    for (int i = 0; i < 1000; i++) {
        if (i % 10 == 0)
            cr_assert_eq(cumod_batch_memset(b, x, (size_t)i, 4, (uint8_t)i),
                         CUMOD_OK);
        else
            cr_assert_eq(cumod_batch_launch(b, &p), CUMOD_OK);
    }
    int before = dt_launches(&t), failed = -2;
    cr_assert_eq(cumod_batch_submit(t.c, b, 0, NULL, &failed), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect_eq(dt_launches(&t) - before, 900, "900 launches ran");

    /* Item 500 is refused: nothing of the batch runs. */
    cumod_batch_reset(b);
    cumod_arg bad[] = {cumod_arg_i32(1)};
    cumod_launch_params pb = dt_params("empty:empty", 1, 32, bad, 1);
    for (int i = 0; i < 1000; i++)
        cr_assert_eq(cumod_batch_launch(b, i == 500 ? &pb : &p), CUMOD_OK);
    before = dt_launches(&t);
    cr_expect_eq(cumod_batch_submit(t.c, b, 0, NULL, &failed), CUMOD_EINVAL);
    cr_expect_eq(failed, 500);
    cr_expect(strstr(cumod_last_detail(), "item 500"), "%s",
              cumod_last_detail());
    cr_expect_eq(dt_launches(&t), before, "nothing ran");
    cumod_batch_free(b);
    th_env_stop(&t);
}

Test(batches, a_batch_submitted_again_and_grown_runs_what_it_holds,
     .timeout = 60)
{
    dt t;
    cumod_batch *b;
    cumod_buffer x;
    int failed;
    dt_start(&t, NULL, NULL);
    cr_assert_eq(cumod_buffer_alloc(t.c, 1024, &x), CUMOD_OK);
    cr_assert_eq(cumod_batch_alloc(&b), CUMOD_OK);
    /* A batch of launches keeps its items packed between submits
     * (batch.c): what it holds must still be what runs. */
    cumod_arg two[] = {cumod_arg_buffer(x, 0), cumod_arg_f32(2.0f),
                       cumod_arg_i32(256)};
    cumod_arg three[] = {cumod_arg_buffer(x, 0), cumod_arg_f32(3.0f),
                         cumod_arg_i32(7)};
    cumod_launch_params p2 = dt_params("scale:scale", 1, 256, two, 3);
    cumod_launch_params p3 = dt_params("scale:scale", 1, 7, three, 3);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(cumod_batch_launch(b, &p2), CUMOD_OK);
    int before = dt_launches(&t);
    cr_assert_eq(cumod_batch_submit(t.c, b, 0, NULL, &failed), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_batch_submit(t.c, b, 0, NULL, &failed), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect_eq(dt_launches(&t) - before, 6);
    cr_assert_eq(cumod_batch_launch(b, &p3), CUMOD_OK);
    cr_assert_eq(cumod_batch_submit(t.c, b, 0, NULL, &failed), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect_eq(dt_launches(&t) - before, 10);
    char *log = th_read_file(t.fake_log);
    char want[64] = "params=";
    hex_le(want + 7, th_env_alloc_ptr(&t, 1024), 8);
    hex_le(want + 23, 0x40400000u, 4); /* 3.0f */
    hex_le(want + 31, 7, 4);
    cr_expect_eq(th_count(log, want), 1, "the added launch ran once: %s in\n%s",
                 want, log);
    cr_expect_eq(th_count(log, "block=7,1,1"), 1, "%s", log);
    free(log);
    /* A memset added: the batch is packed whole from then on. */
    cr_assert_eq(cumod_batch_memset(b, x, 0, 4, 0), CUMOD_OK);
    cr_assert_eq(cumod_batch_submit(t.c, b, 0, NULL, &failed), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect_eq(dt_launches(&t) - before, 14);
    cumod_batch_free(b);
    th_env_stop(&t);
}

Test(streams, work_on_a_created_stream_and_waits, .timeout = 60)
{
    dt t;
    cumod_stream s;
    cumod_ticket tk;
    dt_start(&t, NULL, NULL);
    cr_assert_eq(cumod_stream_create(t.c, &s), CUMOD_OK);
    cumod_launch_params p = dt_params("empty:empty", 1, 1, NULL, 0);
    p.stream = s;
    cr_assert_eq(cumod_launch(t.c, &p, &tk, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect_gt(tk, 0);
    cr_expect_eq(cumod_wait(t.c, tk), CUMOD_OK);
    cr_expect_eq(cumod_stream_synchronize(t.c, s), CUMOD_OK);
    cr_expect_eq(cumod_stream_destroy(t.c, s), CUMOD_OK);
    cr_expect_eq(cumod_stream_synchronize(t.c, s), CUMOD_ENOENT);
    cr_expect_eq(cumod_wait(t.c, 9999), CUMOD_ENOENT);
    char *log = th_read_file(t.fake_log);
    cr_expect(th_count(log, "launch fn=empty") == 1, "%s", log);
    free(log);
    th_env_stop(&t);
}

Test(faults, a_faulting_kernel_costs_its_requests_not_the_service,
     .timeout = 60)
{
    dt t;
    dt_start(&t, NULL, "launch:scale");
    cumod_buffer x;
    cr_assert_eq(cumod_buffer_alloc(t.c, 1024, &x), CUMOD_OK);
    cumod_arg args[] = {cumod_arg_buffer(x, 0), cumod_arg_f32(2.0f),
                        cumod_arg_i32(256)};
    cumod_launch_params p = dt_params("scale:scale", 1, 256, args, 3);
    int rv = cumod_launch(t.c, &p, NULL, NULL);
    cr_expect_eq(rv, CUMOD_ECTXLOST, "%d %s", rv, cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(), "CUDA_ERROR_ILLEGAL_ADDRESS"), "%s",
              cumod_last_detail());
    /* Another client is served again within a second or so. */
    cumod_client *c2;
    cr_assert_eq(cumod_open(t.d.url, 10000, &c2), CUMOD_OK);
    cumod_buffer y;
    int ok = 0;
    for (int i = 0; i < 100 && !ok; i++) {
        ok = cumod_buffer_alloc(c2, 64, &y) == CUMOD_OK;
        if (!ok)
            th_sleep_ms(50);
    }
    cr_expect(ok, "served again after the fault: %s", cumod_last_detail());
    /* The first connection's handles died with the context. */
    int mrv = cumod_buffer_memset(t.c, x, 0, 4, 0, 0, NULL);
    cr_expect_eq(mrv, CUMOD_ECTXLOST, "%s: %s", cumod_errname(mrv),
                 cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(), "was lost with the CUDA context"),
              "%s", cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(), "(after ") &&
                  strstr(cumod_last_detail(), "CUDA_ERROR_ILLEGAL_ADDRESS"),
              "it says what the context was lost to: %s", cumod_last_detail());
    cr_log_info("a lost buffer: %s", cumod_last_detail());
    /* The session stays connected: the lost buffer is freed at once, and
     * new memory works. */
    cr_expect_eq(cumod_buffer_free(t.c, x), CUMOD_OK, "%s",
                 cumod_last_detail());
    cumod_buffer x2;
    cr_expect_eq(cumod_buffer_alloc(t.c, 1024, &x2), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect_eq(cumod_buffer_memset(t.c, x2, 0, 4, 0, 0, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    cumod_close(c2);
    th_env_stop(&t);
}

Test(reload, the_old_generation_stays_until_its_launches_complete,
     .timeout = 60)
{
    dt t;
    cumod_ticket tk;
    char load_hold[320], env_load[400];
    static const char *const kernels[] = {"vadd", "scale", "empty", "affine",
                                          NULL};
    th_env_init(&t, kernels);
    snprintf(load_hold, sizeof(load_hold), "%s/.load-hold", t.dir);
    snprintf(env_load, sizeof(env_load), "CUMOD_FAKE_LOAD_HOLD=%s", load_hold);
    const char *env[] = {env_load, NULL};
    th_env_start(&t, NULL, env);
    cumod_launch_params p = dt_params("empty:empty", 1, 1, NULL, 0);
    cr_assert_eq(cumod_launch(t.c, &p, NULL, NULL), CUMOD_OK);
    /* The new bytes' load waits in the driver (CUMOD_FAKE_LOAD_HOLD), so
     * that a launch of generation 1 is in flight when generation 2 comes:
     * a load goes once the work in flight when it was asked for is done
     * (a load holds every launch until running kernels end). */
    FILE *f = fopen(load_hold, "w");
    fclose(f);
    th_env_put(&t, KDIR "/empty.cubin", ".x");
    char tmp[512], dst[512];
    snprintf(tmp, sizeof(tmp), "%s/.x", t.dir);
    snprintf(dst, sizeof(dst), "%s/empty.cubin", t.dir);
    /* Different bytes with the same kernel: append a byte (still an ELF
     * whose section table is intact). */
    f = fopen(tmp, "a");
    fputc(0, f);
    fclose(f);
    cr_assert_eq(rename(tmp, dst), 0);
    char *waiting = NULL;
    for (int i = 0; i < 250; i++) {
        free(waiting);
        waiting = th_read_file(t.fake_log);
        if (waiting && strstr(waiting, "load-waiting"))
            break;
        th_sleep_ms(20);
    }
    cr_assert(waiting && strstr(waiting, "load-waiting"),
              "generation 2's load reached the driver");
    free(waiting);
    /* Hold completions, launch generation 1, then let the load go. */
    f = fopen(t.fake_hold, "w");
    fclose(f);
    cr_assert_eq(cumod_launch(t.c, &p, &tk, NULL), CUMOD_OK);
    remove(load_hold);
    cumod_module_list *l;
    uint64_t gen = 0, loaded = 0;
    for (int i = 0; i < 250 && gen < 2; i++) {
        th_sleep_ms(20);
        cr_assert_eq(cumod_modules_list(t.c, &l), CUMOD_OK);
        for (size_t k = 0; k < l->count; k++)
            if (strcmp(l->modules[k].name, "empty") == 0) {
                gen = l->modules[k].generation;
                loaded = l->modules[k].resident_generations;
            }
        cumod_module_list_free(l);
    }
    cr_assert_eq(gen, 2, "generation 2 takes new launches");
    cr_expect_eq(loaded, 2, "generation 1 stays loaded while held");
    char *log = th_read_file(t.fake_log);
    cr_expect_eq(th_count(log, "unload module="), 0, "nothing unloaded:\n%s",
                 log);
    free(log);
    /* New launches run generation 2 even while 1 is busy. */
    uint64_t g2 = 0;
    cumod_ticket tk2;
    cr_assert_eq(cumod_launch(t.c, &p, &tk2, &g2), CUMOD_OK);
    cr_expect_eq(g2, 2);
    remove(t.fake_hold);
    cr_expect_eq(cumod_wait(t.c, tk), CUMOD_OK, "%s", cumod_last_detail());
    cr_expect_eq(cumod_wait(t.c, tk2), CUMOD_OK);
    int unloaded = 0;
    for (int i = 0; i < 250 && !unloaded; i++) {
        th_sleep_ms(20);
        log = th_read_file(t.fake_log);
        unloaded = th_count(log, "unload module=") == 1;
        free(log);
    }
    cr_expect(unloaded, "generation 1 unloads after its launch completed");
    th_env_stop(&t);
}

Test(backpressure, a_stalled_executor_queues_work_in_order_and_loses_none,
     .timeout = 90)
{
    static const char *const kernels[] = {"empty", NULL};
    dt t;
    cumod_buffer x;
    char hold[320], env_hold[360];

    /* The executor's serving thread stops in the first copy while the
     * hold file exists (the fake's CUMOD_FAKE_COPY_HOLD), so nothing it
     * is sent is taken: the channel's ring and then its socket fill. */
    th_env_init(&t, kernels);
    snprintf(hold, sizeof(hold), "%s/.copyhold", t.dir);
    snprintf(env_hold, sizeof(env_hold), "CUMOD_FAKE_COPY_HOLD=%s", hold);
    /* The front's queue behind its executor: with direct launches, the
     * ring's own thread would be the one held, and the client would wait
     * there instead (direct_test covers that). */
    th_env_start(&t,
                 (const char *[]){"--log-level", "debug", "--direct-launches",
                                  "no", NULL},
                 (const char *[]){env_hold, NULL});
    cr_assert_eq(cumod_buffer_alloc(t.c, 32768, &x), CUMOD_OK);
    cr_assert_eq(th_write_file(hold, ""), 0);

    /* 32 MiB of writes: far more than the channel's ring (4 MiB) and
     * socket buffer hold while nobody reads them. */
    static unsigned char chunk[32768];
    cumod_ticket last = 0;
    int errors = 0;
    for (int i = 0; i < 1024; i++) {
        memset(chunk, i & 0xff, sizeof(chunk));
        cumod_batch *b;
        cumod_batch_alloc(&b);
        cumod_batch_write(b, x, 0, chunk, sizeof(chunk));
        errors += cumod_batch_submit(t.c, b, 0, &last, NULL) != CUMOD_OK;
        cumod_batch_free(b);
    }
    cr_expect_eq(errors, 0, "every write is taken: %s", cumod_last_detail());
    char *log = th_daemon_log(&t.d);
    cr_expect(strstr(log, " error ") == NULL, "%s", log);
    cr_expect(strstr(log, "the channel is full") != NULL,
              "the test should have filled the channel; the log ends:\n%s",
              strlen(log) > 3000 ? log + strlen(log) - 3000 : log);
    free(log);
    remove(hold);
    cr_expect_eq(cumod_wait(t.c, last), CUMOD_OK, "%s", cumod_last_detail());
    unsigned char back[16];
    cr_assert_eq(cumod_buffer_read(t.c, x, 0, back, sizeof(back), 0), CUMOD_OK);
    cr_expect_eq(back[0], 1023 & 0xff,
                 "the writes ran in order, the last last");
    th_env_stop(&t);
}

Test(backpressure, work_queued_behind_the_executor_is_answered_each,
     .timeout = 90)
{
    static const char *const kernels[] = {"empty", NULL};
    dt t;
    cumod_buffer x;
    char hold[320], env_hold[360];
    enum { N = 150 };
    cumod_ticket tk[N];

    /* The serving thread stops in a copy while the hold file exists; the
     * launches sent meanwhile queue in the channel, and when it goes on it
     * finds them back to back: one event answers many (exec_work.c). Each
     * must still be answered, in order, and each ticket waitable. */
    th_env_init(&t, kernels);
    snprintf(hold, sizeof(hold), "%s/.copyhold", t.dir);
    snprintf(env_hold, sizeof(env_hold), "CUMOD_FAKE_COPY_HOLD=%s", hold);
    /* The front's queue behind its executor: with direct launches, the
     * ring's own thread would be the one held, and the client would wait
     * there instead (direct_test covers that). */
    th_env_start(&t,
                 (const char *[]){"--log-level", "debug", "--direct-launches",
                                  "no", NULL},
                 (const char *[]){env_hold, NULL});
    cr_assert_eq(cumod_buffer_alloc(t.c, 64, &x), CUMOD_OK);
    cumod_launch_params p = dt_params("empty:empty", 1, 32, NULL, 0);
    cr_assert_eq(cumod_launch(t.c, &p, NULL, NULL), CUMOD_OK,
                 "loaded first: %s", cumod_last_detail());
    cr_assert_eq(th_write_file(hold, ""), 0);
    static const unsigned char bytes[64];
    cumod_batch *b;
    cumod_ticket wt;
    cumod_batch_alloc(&b);
    cumod_batch_write(b, x, 0, bytes, sizeof(bytes));
    cr_assert_eq(cumod_batch_submit(t.c, b, 0, &wt, NULL), CUMOD_OK);
    cumod_batch_free(b);
    for (int i = 0; i < N; i++)
        cr_assert_eq(cumod_launch(t.c, &p, &tk[i], NULL), CUMOD_OK, "%d: %s", i,
                     cumod_last_detail());
    cr_expect_eq(dt_launches(&t), 1, "nothing ran while the copy held");
    remove(hold);
    /* Any one of them, the first, one inside, the last. */
    cr_expect_eq(cumod_wait(t.c, tk[N / 2]), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect_eq(cumod_wait(t.c, tk[0]), CUMOD_OK, "%s", cumod_last_detail());
    cr_expect_eq(cumod_wait(t.c, tk[N - 1]), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect_eq(cumod_wait(t.c, wt), CUMOD_OK, "%s", cumod_last_detail());
    cr_expect_eq(dt_launches(&t), 1 + N);
    /* A launch answered when complete right after still is. */
    cr_expect_eq(cumod_launch(t.c, &p, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    char *log = th_daemon_log(&t.d);
    cr_expect(strstr(log, "CUMOD-EXEC-GROUP") != NULL,
              "the queued launches should have shared events; the log "
              "ends:\n%s",
              strlen(log) > 3000 ? log + strlen(log) - 3000 : log);
    cr_expect(strstr(log, " error ") == NULL, "%s", log);
    free(log);
    th_env_stop(&t);
}

typedef struct dt_bg_launch {
    const char *url;
    unsigned deadline_ms;
    int rv;
    char detail[512];
} dt_bg_launch;

static void *
dt_bg_launch_main(void *arg)
{
    dt_bg_launch *b = arg;
    cumod_client *c;
    cumod_launch_params p = dt_params("empty:empty", 1, 32, NULL, 0);
    p.deadline_ms = b->deadline_ms;
    if ((b->rv = cumod_open(b->url, 30000, &c)) != CUMOD_OK)
        return NULL;
    b->rv = cumod_launch(c, &p, NULL, NULL); /* answered when complete */
    snprintf(b->detail, sizeof(b->detail), "%s", cumod_last_detail());
    cumod_close(c);
    return NULL;
}

Test(backpressure, several_clients_queued_behind_the_executor_each_answered,
     .timeout = 90)
{
    static const char *const kernels[] = {"empty", NULL};
    dt t;
    cumod_buffer x;
    cumod_client *c2;
    cumod_stream s2;
    char hold[320], env_hold[360];
    enum { N = 60 };
    cumod_ticket ta[N], tb[N];
    pthread_t th;

    /* Two clients' launches answered when enqueued (grouped per stream,
     * one on a stream of its own) queue behind a held copy together with
     * a third client's launch that has a deadline and is waited for (never
     * grouped). Each is answered, each ticket is waitable, and the waited
     * launch completes within its deadline once the copy goes on. */
    th_env_init(&t, kernels);
    snprintf(hold, sizeof(hold), "%s/.copyhold", t.dir);
    snprintf(env_hold, sizeof(env_hold), "CUMOD_FAKE_COPY_HOLD=%s", hold);
    /* The front's queue behind its executor: with direct launches, the
     * ring's own thread would be the one held, and the client would wait
     * there instead (direct_test covers that). */
    th_env_start(&t,
                 (const char *[]){"--log-level", "debug", "--direct-launches",
                                  "no", NULL},
                 (const char *[]){env_hold, NULL});
    cr_assert_eq(cumod_open(t.d.url, 30000, &c2), CUMOD_OK);
    cr_assert_eq(cumod_stream_create(c2, &s2), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, 64, &x), CUMOD_OK);
    cumod_launch_params p = dt_params("empty:empty", 1, 32, NULL, 0);
    cr_assert_eq(cumod_launch(t.c, &p, NULL, NULL), CUMOD_OK);
    cr_assert_eq(th_write_file(hold, ""), 0);
    static const unsigned char bytes[64];
    cumod_batch *b;
    cumod_ticket wt;
    cumod_batch_alloc(&b);
    cumod_batch_write(b, x, 0, bytes, sizeof(bytes));
    cr_assert_eq(cumod_batch_submit(t.c, b, 0, &wt, NULL), CUMOD_OK);
    cumod_batch_free(b);
    dt_bg_launch bg = {.url = t.d.url, .deadline_ms = 30000};
    for (int i = 0; i < N; i++) {
        cr_assert_eq(cumod_launch(t.c, &p, &ta[i], NULL), CUMOD_OK);
        cumod_launch_params p2 = p;
        p2.stream = s2;
        cr_assert_eq(cumod_launch(c2, &p2, &tb[i], NULL), CUMOD_OK, "%s",
                     cumod_last_detail());
        if (i == N / 2)
            cr_assert_eq(pthread_create(&th, NULL, dt_bg_launch_main, &bg), 0);
    }
    th_sleep_ms(200);
    remove(hold);
    pthread_join(th, NULL);
    cr_expect_eq(bg.rv, CUMOD_OK, "the waited launch with a deadline: %s",
                 bg.detail);
    cr_expect_eq(cumod_wait(c2, tb[N / 3]), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect_eq(cumod_wait(t.c, ta[N - 1]), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect_eq(cumod_wait(c2, tb[N - 1]), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect_eq(cumod_wait(t.c, ta[0]), CUMOD_OK, "%s", cumod_last_detail());
    cr_expect_eq(cumod_wait(t.c, wt), CUMOD_OK, "%s", cumod_last_detail());
    cr_expect_eq(dt_launches(&t), 1 + 2 * N + 1);
    cumod_close(c2);
    char *log = th_daemon_log(&t.d);
    cr_expect(strstr(log, "CUMOD-EXEC-GROUP") != NULL, "no shared events");
    cr_expect(strstr(log, " error ") == NULL, "%s", log);
    free(log);
    th_env_stop(&t);
}

typedef struct dt_flood {
    const char *url;
    volatile int *stop;
    long launches, limited;
    int rv;
    char detail[256];
} dt_flood;

/* Launches answered when enqueued, back to back until told to stop, then
 * one wait: a client that keeps the executor's submission thread busy. */
static void *
dt_flood_main(void *arg)
{
    dt_flood *f = arg;
    cumod_client *c;
    cumod_ticket tk = 0;
    cumod_launch_params p = dt_params("empty:empty", 1, 32, NULL, 0);
    if ((f->rv = cumod_open(f->url, 30000, &c)) != CUMOD_OK)
        return NULL;
    while (!*f->stop && f->rv == CUMOD_OK) {
        f->rv = cumod_launch(c, &p, &tk, NULL);
        if (f->rv == CUMOD_ELIMIT && tk != 0) {
            /* Over --session-max-inflight: the daemon said so instead of
             * queueing without bound; wait for the last one and go on,
             * as a client should. */
            f->limited++;
            f->rv = cumod_wait(c, tk);
            continue;
        }
        f->launches++;
    }
    if (f->rv == CUMOD_OK)
        f->rv = cumod_wait(c, tk);
    if (f->rv != CUMOD_OK)
        snprintf(f->detail, sizeof(f->detail), "%s after %ld launches: %s",
                 cumod_strerror(f->rv), f->launches, cumod_last_detail());
    cumod_close(c);
    return NULL;
}

/* A client's launch answered when enqueued and then waited for is
 * answered while other clients keep the executor busy with launches of
 * their own (grouped per stream, one event for many): its group is
 * recorded once it is old, not when the others pause. */
Test(backpressure, a_waiting_client_is_answered_while_others_keep_it_busy,
     .timeout = 120)
{
    static const char *const kernels[] = {"empty", NULL};
    enum { FLOODERS = 3, ROUNDS = 200 };
    dt t;
    volatile int stop = 0;
    dt_flood f[FLOODERS];
    pthread_t th[FLOODERS];

    th_env_init(&t, kernels);
    th_env_start(&t, NULL, NULL);
    cumod_launch_params p = dt_params("empty:empty", 1, 32, NULL, 0);
    cr_assert_eq(cumod_launch(t.c, &p, NULL, NULL), CUMOD_OK);
    for (int i = 0; i < FLOODERS; i++) {
        f[i] = (dt_flood){.url = t.d.url, .stop = &stop};
        cr_assert_eq(pthread_create(&th[i], NULL, dt_flood_main, &f[i]), 0);
    }
    th_sleep_ms(300);
    double worst = 0;
    for (int i = 0; i < ROUNDS; i++) {
        cumod_ticket tk;
        double t0 = th_now_ms();
        cr_assert_eq(cumod_launch(t.c, &p, &tk, NULL), CUMOD_OK);
        cr_assert_eq(cumod_wait(t.c, tk), CUMOD_OK, "%s", cumod_last_detail());
        double ms = th_now_ms() - t0;
        worst = ms > worst ? ms : worst;
    }
    long busy = 0;
    for (int i = 0; i < FLOODERS; i++)
        busy += f[i].launches;
    stop = 1;
    for (int i = 0; i < FLOODERS; i++) {
        pthread_join(th[i], NULL);
        cr_expect_eq(f[i].rv, CUMOD_OK, "flooder %d: %s", i, f[i].detail);
    }
    cr_expect_gt(busy, ROUNDS, "the others launched throughout");
    /* Not a timing target: every wait was answered while the others went
     * on (a starved one would wait until they stopped, past the test's
     * timeout). */
    long limited = 0;
    for (int i = 0; i < FLOODERS; i++)
        limited += f[i].limited;
    cr_log_info("%d launch-and-wait rounds beside %ld launches of %d other "
                "clients (%ld times over their in-flight limit): the slowest "
                "took %.1f ms",
                ROUNDS, busy, FLOODERS, limited, worst);
    th_env_stop(&t);
}
