/* SPDX-License-Identifier: MIT */
/*
 * The launch and copy checks (daemon/front/state/checks.c) from a kernel
 * description, device limits and a request, without a daemon: what a user
 * reads when a launch is refused, and the parameter bytes a good launch
 * packs.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumod.pb-c.h"
#include "front/state/checks.h"
#include "front/state/session.h"

/* An H100's limits. */
static const cumod_chan_device ck_dev = {
    .max_threads_per_block = 1024,
    .max_block = {1024, 1024, 64},
    .max_grid = {2147483647, 65535, 65535},
    .max_shared_per_block = 49152,
    .max_shared_per_block_optin = 232448,
    .cluster_launch = 1,
    .cooperative_launch = 1,
};

/* vadd(const float *a, const float *b, float *c, int n): offsets 0, 8, 16,
 * 24; sizes 8, 8, 8, 4. */
static uint32_t ck_off[] = {0, 8, 16, 24}, ck_size[] = {8, 8, 8, 4};
static const cumod_kernel ck_vadd = {.name = "vadd",
                                     .index = 0,
                                     .nparams = 4,
                                     .offsets = ck_off,
                                     .sizes = ck_size};

typedef struct ck {
    cumod_sessions ss;
    cumod_session *s;
    cumod_buf *a, *b, *c;
    Cumod__Launch l;
    Cumod__Dim3 grid, block;
    Cumod__Arg args[4];
    Cumod__Arg *argp[4];
    Cumod__BufferRef refs[3];
    int32_t n;
    cumod_launch_packed *out;
    cumod_status st;
} ck;

static void
ck_init(ck *t)
{
    memset(t, 0, sizeof(*t));
    cumod__sessions_init(&t->ss);
    cr_assert_eq(cumod__sessions_add(&t->ss, 7, 1000, 1000, 4242, &t->s),
                 CUMOD_OK);
    cr_assert_eq(cumod__session_buf_add(t->s, 4096, 0x7f0000001000ull, &t->a),
                 CUMOD_OK);
    cr_assert_eq(cumod__session_buf_add(t->s, 8192, 0x7f0000100000ull, &t->b),
                 CUMOD_OK);
    cr_assert_eq(cumod__session_buf_add(t->s, 4096, 0x7f0000200000ull, &t->c),
                 CUMOD_OK);
    cumod__launch__init(&t->l);
    cumod__dim3__init(&t->grid);
    cumod__dim3__init(&t->block);
    t->grid.x = 4;
    t->block.x = 256;
    t->l.kernel = "vadd:vadd";
    t->l.grid = &t->grid;
    t->l.block = &t->block;
    cumod_buf *bufs[3] = {t->a, t->b, t->c};
    for (int i = 0; i < 3; i++) {
        cumod__buffer_ref__init(&t->refs[i]);
        t->refs[i].handle = bufs[i]->handle;
        t->refs[i].offset = (uint64_t)i * 16;
        cumod__arg__init(&t->args[i]);
        t->args[i].kind_case = CUMOD__ARG__KIND_BUFFER;
        t->args[i].buffer = &t->refs[i];
    }
    t->n = 1000;
    cumod__arg__init(&t->args[3]);
    t->args[3].kind_case = CUMOD__ARG__KIND_VALUE;
    t->args[3].value.data = (uint8_t *)&t->n;
    t->args[3].value.len = sizeof(t->n);
    for (int i = 0; i < 4; i++)
        t->argp[i] = &t->args[i];
    t->l.n_args = 4;
    t->l.args = t->argp;
    t->out = malloc(sizeof(*t->out));
}

static void
ck_fini(ck *t)
{
    cumod_list orphans;
    cumod__list_init(&orphans);
    cumod__sessions_fini(&t->ss, &orphans);
    cr_expect(cumod__list_empty(&orphans));
    free(t->out);
}

static cumod_err
ck_launch(ck *t)
{
    return cumod__check_launch(t->s, &ck_dev, &ck_vadd, &t->l, NULL, t->out,
                               &t->st);
}

Test(checks, a_good_launch_packs_pointers_and_values_at_their_offsets)
{
    ck t;
    ck_init(&t);
    cr_assert_eq(ck_launch(&t), CUMOD_OK, "%s", t.st.msg);
    cr_expect_eq(t.out->it.op, CUMOD_WORK_LAUNCH);
    cr_expect_eq(t.out->it.grid[0], 4);
    cr_expect_eq(t.out->it.grid[1], 1, "an absent dimension counts as 1");
    cr_expect_eq(t.out->it.block[0], 256);
    cr_expect_eq(t.out->nparams, 28);
    uint64_t p;
    int32_t n;
    memcpy(&p, t.out->params + 0, 8);
    cr_expect_eq(p, 0x7f0000001000ull, "a's device pointer");
    memcpy(&p, t.out->params + 8, 8);
    cr_expect_eq(p, 0x7f0000100000ull + 16, "b's pointer plus its offset");
    memcpy(&p, t.out->params + 16, 8);
    cr_expect_eq(p, 0x7f0000200000ull + 32);
    memcpy(&n, t.out->params + 24, 4);
    cr_expect_eq(n, 1000, "the value in place");
    ck_fini(&t);
}

Test(checks, launch_errors_name_the_argument_or_the_limit)
{
    ck t;
    ck_init(&t);

    t.l.n_args = 3;
    cr_expect_eq(ck_launch(&t), CUMOD_EINVAL);
    cr_expect_str_eq(t.st.msg, "vadd takes 4 arguments, 3 given");
    t.l.n_args = 4;

    t.args[3].value.len = 8;
    cr_expect_eq(ck_launch(&t), CUMOD_EINVAL);
    cr_expect_str_eq(t.st.msg, "argument 4 of vadd: 8 bytes given, the kernel "
                               "takes 4");
    t.args[3].value.len = 4;

    t.refs[1].handle = 999;
    cr_expect_eq(ck_launch(&t), CUMOD_ENOENT);
    cr_expect_str_eq(t.st.msg, "argument 2 of vadd: buffer 999 is not "
                               "one of this connection's");
    t.refs[1].handle = t.b->handle;

    t.refs[2].offset = 4097;
    cr_expect_eq(ck_launch(&t), CUMOD_EINVAL);
    cr_expect(strstr(t.st.msg, "past the end of buffer") != NULL, "%s",
              t.st.msg);
    t.refs[2].offset = 0;

    t.args[3].kind_case = CUMOD__ARG__KIND_BUFFER;
    t.args[3].buffer = &t.refs[0];
    cr_expect_eq(ck_launch(&t), CUMOD_EINVAL);
    cr_expect(strstr(t.st.msg, "argument 4 of vadd is not pointer-sized (4 "
                               "bytes): a buffer reference") != NULL,
              "%s", t.st.msg);
    t.args[3].kind_case = CUMOD__ARG__KIND_VALUE;
    t.args[3].value.data = (uint8_t *)&t.n;
    t.args[3].value.len = sizeof(t.n);

    t.block.x = 2048;
    cr_expect_eq(ck_launch(&t), CUMOD_EINVAL);
    cr_expect_str_eq(t.st.msg, "block.x = 2048 is above the device's limit "
                               "1024");
    t.block.x = 512;
    t.block.y = 4;
    cr_expect_eq(ck_launch(&t), CUMOD_EINVAL);
    cr_expect_str_eq(t.st.msg, "block 512x4x1 has 2048 threads; the device "
                               "allows 1024 per block");
    t.block.y = 1;

    t.grid.y = 70000;
    cr_expect_eq(ck_launch(&t), CUMOD_EINVAL);
    cr_expect(strstr(t.st.msg, "grid.y = 70000") != NULL, "%s", t.st.msg);
    t.grid.y = 1;

    t.l.shared_mem = 240000;
    cr_expect_eq(ck_launch(&t), CUMOD_EINVAL);
    cr_expect_str_eq(t.st.msg,
                     "vadd: 240000 bytes of dynamic shared memory and its 0 "
                     "static are above the device's 232448 per block (the "
                     "most a kernel may opt into): at most 232448 dynamic");
    t.l.shared_mem = 102400;
    cr_expect_eq(ck_launch(&t), CUMOD_OK, "past 48 KiB, opted in: %s",
                 t.st.msg);
    cr_expect_eq(t.out->it.shmem, 102400);
    t.l.shared_mem = 0;

    cr_expect_eq(ck_launch(&t), CUMOD_OK, "good again: %s", t.st.msg);
    ck_fini(&t);
}

Test(checks, kernel_names_are_module_colon_function)
{
    char module[129];
    const char *fn;
    cumod_status st;
    cr_expect_eq(cumod__check_kernel_name("vadd:vadd", module, &fn, &st),
                 CUMOD_OK);
    cr_expect_str_eq(module, "vadd");
    cr_expect_str_eq(fn, "vadd");
    cr_expect_eq(cumod__check_kernel_name("axpy:_Z4axpyIfEvT_PKS0_PS0_i",
                                          module, &fn, &st),
                 CUMOD_OK);
    cr_expect_str_eq(fn, "_Z4axpyIfEvT_PKS0_PS0_i");
    const char *bad[] = {"vadd", ":vadd", "vadd:", "", NULL};
    for (int i = 0; bad[i]; i++) {
        cr_expect_eq(cumod__check_kernel_name(bad[i], module, &fn, &st),
                     CUMOD_EINVAL, "'%s' refused", bad[i]);
        cr_expect(strstr(st.msg, "is not MODULE:FUNCTION") != NULL, "%s",
                  st.msg);
    }
    char longname[200];
    memset(longname, 'm', 129);
    strcpy(longname + 129, ":f");
    cr_expect_eq(cumod__check_kernel_name(longname, module, &fn, &st),
                 CUMOD_EINVAL, "a module name over 128 characters");
}

Test(checks, copies_check_both_sides_and_say_which)
{
    ck t;
    cumod_work_item it;
    cumod_seg *g, *seg;
    ck_init(&t);
    cr_assert_eq(
        cumod__session_seg_add(t.s, 1 << 20, 0x600000000000ull, "/seg", &seg),
        CUMOD_OK);
    Cumod__Copy c = CUMOD__COPY__INIT;
    c.kind = CUMOD__COPY_KIND__COPY_TO_DEVICE;
    c.buffer = t.b->handle;
    c.buffer_offset = 64;
    c.segment = seg->handle;
    c.segment_offset = 128;
    c.length = 1024;
    cr_assert_eq(cumod__check_copy(t.s, &c, &it, &g, &t.st), CUMOD_OK, "%s",
                 t.st.msg);
    cr_expect_eq(it.op, CUMOD_WORK_HTOD);
    cr_expect_eq(it.a, 0x7f0000100000ull + 64, "to the buffer");
    cr_expect_eq(it.b, 0x600000000000ull + 128, "from the segment");
    cr_expect_eq(it.c, 1024);
    cr_expect_eq(g, seg, "the segment to hold in flight");

    c.kind = CUMOD__COPY_KIND__COPY_TO_HOST;
    cr_assert_eq(cumod__check_copy(t.s, &c, &it, &g, &t.st), CUMOD_OK);
    cr_expect_eq(it.op, CUMOD_WORK_DTOH);
    cr_expect_eq(it.a, 0x600000000000ull + 128, "to the segment");

    c.segment_offset = (1 << 20) - 10;
    cr_expect_eq(cumod__check_copy(t.s, &c, &it, &g, &t.st), CUMOD_EINVAL);
    cr_expect(strstr(t.st.msg, "past the end of segment") != NULL, "%s",
              t.st.msg);
    c.segment_offset = 0;
    c.segment = 12345;
    cr_expect_eq(cumod__check_copy(t.s, &c, &it, &g, &t.st), CUMOD_ENOENT);
    cr_expect_str_eq(t.st.msg, "copy: segment 12345 is not one of this "
                               "connection's");

    c.kind = CUMOD__COPY_KIND__COPY_DEVICE;
    c.src_buffer = t.a->handle;
    c.src_offset = 4000;
    c.length = 200;
    cr_expect_eq(cumod__check_copy(t.s, &c, &it, &g, &t.st), CUMOD_EINVAL);
    cr_expect(strstr(t.st.msg, "copy (source): offset 4000 + length 200") !=
                  NULL,
              "%s", t.st.msg);
    c.src_offset = 0;
    cr_assert_eq(cumod__check_copy(t.s, &c, &it, &g, &t.st), CUMOD_OK);
    cr_expect_eq(it.op, CUMOD_WORK_DTOD);
    cr_expect_null(g, "no segment for a device-to-device copy");
    ck_fini(&t);
}

Test(checks, memset_reads_and_writes_stay_inside_their_buffer)
{
    ck t;
    cumod_work_item it;
    ck_init(&t);
    Cumod__Memset m = CUMOD__MEMSET__INIT;
    m.handle = t.a->handle;
    m.offset = 96;
    m.length = 4000;
    m.value = 0xab;
    cr_assert_eq(cumod__check_memset(t.s, &m, &it, &t.st), CUMOD_OK);
    cr_expect_eq(it.op, CUMOD_WORK_MEMSET);
    cr_expect_eq(it.a, 0x7f0000001000ull + 96);
    cr_expect_eq(it.b, 0xab);
    m.value = 256;
    cr_expect_eq(cumod__check_memset(t.s, &m, &it, &t.st), CUMOD_EINVAL);
    cr_expect_str_eq(t.st.msg, "memset: value 256 is not a byte (0-255)");
    m.value = 1;
    m.length = 4001;
    cr_expect_eq(cumod__check_memset(t.s, &m, &it, &t.st), CUMOD_EINVAL);

    Cumod__ReadBuffer rd = CUMOD__READ_BUFFER__INIT;
    rd.handle = t.b->handle;
    rd.length = 8192;
    cr_expect_eq(cumod__check_read(t.s, &rd, 1 << 20, &it, &t.st), CUMOD_OK);
    cr_expect_eq(cumod__check_read(t.s, &rd, 4096, &it, &t.st), CUMOD_ETOOBIG);
    cr_expect(strstr(t.st.msg, "use a shared segment") != NULL, "%s", t.st.msg);

    Cumod__WriteBuffer wr = CUMOD__WRITE_BUFFER__INIT;
    uint8_t bytes[16] = {0};
    wr.handle = t.c->handle;
    wr.offset = 4090;
    wr.data.data = bytes;
    wr.data.len = sizeof(bytes);
    cr_expect_eq(cumod__check_write(t.s, &wr, &it, &t.st), CUMOD_EINVAL);
    cr_expect_str_eq(t.st.msg,
                     "write: offset 4090 + length 16 is past the end of "
                     "buffer 3 (4096 bytes)");
    ck_fini(&t);
}

Test(checks, streams_and_segment_names)
{
    ck t;
    uint64_t key;
    cumod_sstream *st;
    ck_init(&t);
    cr_expect_eq(cumod__check_stream(t.s, 0, &key, &t.st), CUMOD_OK);
    cr_expect_eq(key, (uint64_t)7 << 20, "the default stream: index 0");
    cr_assert_eq(cumod__session_stream_add(t.s, &st), CUMOD_OK);
    cr_expect_eq(cumod__check_stream(t.s, st->handle, &key, &t.st), CUMOD_OK);
    cr_expect_eq(key, ((uint64_t)7 << 20) | 1);
    cr_expect_eq(cumod__check_stream(t.s, 555, &key, &t.st), CUMOD_ENOENT);
    cr_expect_str_eq(t.st.msg, "stream 555 is not one of this connection's");

    Cumod__MapSegment ms = CUMOD__MAP_SEGMENT__INIT;
    ms.size = 4096;
    const char *bad[] = {"seg", "/a/b", "/", "", NULL};
    for (int i = 0; bad[i]; i++) {
        ms.name = (char *)bad[i];
        cr_expect_eq(cumod__check_segment_name(&ms, &t.st), CUMOD_EINVAL,
                     "'%s' refused", bad[i]);
    }
    ms.name = "/cumod-seg-1";
    cr_expect_eq(cumod__check_segment_name(&ms, &t.st), CUMOD_OK);
    ms.size = 0;
    cr_expect_eq(cumod__check_segment_name(&ms, &t.st), CUMOD_EINVAL);
    ck_fini(&t);
}

/* linalg::detail::clamp(const float&, float*, int), as the catalog
 * describes a C++ kernel from its demangled name, with 1 KiB of static
 * shared memory and launch bounds of 256 threads. */
static uint32_t ck_coff[] = {0, 8, 16}, ck_csize[] = {8, 8, 4};
static char *ck_ctypes[] = {"const float&", "float*", "int"};
static uint8_t ck_cind[] = {1, 1, 0};
static uint8_t ck_cval[] = {0, 0, CUMOD__ARG_TYPE__ARG_TYPE_I32};
static const cumod_kernel ck_clamp = {
    .name = "_ZN6linalg6detail5clampERKfPfi",
    .nparams = 3,
    .offsets = ck_coff,
    .sizes = ck_csize,
    .static_shared = 1024,
    .max_threads = 256,
    .display = "linalg::detail::clamp",
    .signature = "linalg::detail::clamp(const float&, float*, int)",
    .ptypes = ck_ctypes,
    .pindirect = ck_cind,
    .pvalue = ck_cval,
};

/* A launch of clamp with args 0 and 1 buffers, 2 a value. */
static cumod_err
ck_clamp_launch(ck *t, const cumod_launch_opts *o)
{
    t->l.kernel = "linalg:_ZN6linalg6detail5clampERKfPfi";
    t->l.n_args = 3;
    return cumod__check_launch(t->s, &ck_dev, &ck_clamp, &t->l, o, t->out,
                               &t->st);
}

Test(checks, cpp_arguments_are_named_by_their_type_and_pointers_need_buffers)
{
    ck t;
    ck_init(&t);
    t.block.x = 128;
    t.args[2] = t.args[3]; /* clamp's third argument is vadd's fourth */
    cr_assert_eq(ck_clamp_launch(&t, NULL), CUMOD_OK, "%s", t.st.msg);

    /* A value where the signature says reference. */
    float hi = 1.0f;
    uint64_t addr = 0x1234;
    Cumod__Arg saved = t.args[0];
    t.args[0].kind_case = CUMOD__ARG__KIND_VALUE;
    t.args[0].value.data = (uint8_t *)&addr;
    t.args[0].value.len = 8;
    cr_expect_eq(ck_clamp_launch(&t, NULL), CUMOD_EINVAL);
    cr_expect_str_eq(t.st.msg,
                     "argument 1 (const float&) of linalg::detail::clamp: a "
                     "buffer reference is needed, 8 bytes of value given");
    cumod_launch_opts loose = {.allow_pointer_values = 1, .carveout = -1};
    cr_expect_eq(ck_clamp_launch(&t, &loose), CUMOD_OK,
                 "allowed by --allow-pointer-values: %s", t.st.msg);
    t.args[0].value.data = (uint8_t *)&hi;
    t.args[0].value.len = 4;
    cr_expect_eq(ck_clamp_launch(&t, &loose), CUMOD_EINVAL);
    cr_expect_str_eq(t.st.msg,
                     "argument 1 (const float&) of linalg::detail::clamp: 4 "
                     "bytes given, the kernel takes 8");
    t.args[0] = saved;

    /* A buffer where the signature says int. */
    t.args[2].kind_case = CUMOD__ARG__KIND_BUFFER;
    t.args[2].buffer = &t.refs[0];
    cr_expect_eq(ck_clamp_launch(&t, NULL), CUMOD_EINVAL);
    cr_expect_str_eq(t.st.msg,
                     "argument 3 of linalg::detail::clamp(const float&, "
                     "float*, int): a buffer (a device pointer) where the "
                     "kernel takes int");
    t.args[2] = t.args[3];

    t.l.n_args = 2;
    cr_expect_eq(
        cumod__check_launch(t.s, &ck_dev, &ck_clamp, &t.l, NULL, t.out, &t.st),
        CUMOD_EINVAL);
    cr_expect_str_eq(t.st.msg,
                     "linalg::detail::clamp takes 3 arguments, 2 given: "
                     "linalg::detail::clamp(const float&, float*, int)");

    /* Its launch bounds and its static shared memory count. */
    t.block.x = 512;
    cr_expect_eq(ck_clamp_launch(&t, NULL), CUMOD_EINVAL);
    cr_expect(strstr(t.st.msg, "linalg::detail::clamp allows 256 per block"),
              "%s", t.st.msg);
    t.block.x = 128;
    t.l.shared_mem = 232448;
    cr_expect_eq(ck_clamp_launch(&t, NULL), CUMOD_EINVAL);
    cr_expect(strstr(t.st.msg, "its 1024 static are above the device's "
                               "232448 per block (the most a kernel may opt "
                               "into): at most 231424 dynamic"),
              "%s", t.st.msg);
    t.l.shared_mem = 231424;
    cr_expect_eq(ck_clamp_launch(&t, NULL), CUMOD_OK, "%s", t.st.msg);
    ck_fini(&t);
}

Test(checks, clusters_divide_the_grid_and_match_the_compiled_shape)
{
    ck t;
    Cumod__Dim3 cl = CUMOD__DIM3__INIT;
    cumod_kernel pair = ck_vadd;
    ck_init(&t);
    t.grid.x = 8;
    t.l.cluster = &cl;
    cl.x = 4;
    cr_assert_eq(ck_launch(&t), CUMOD_OK, "%s", t.st.msg);
    cr_expect_eq(t.out->it.cluster[0], 4);
    cr_expect_eq(t.out->it.cluster[1], 1, "0 reads as 1");
    cl.x = 3;
    cr_expect_eq(ck_launch(&t), CUMOD_EINVAL);
    cr_expect_str_eq(t.st.msg, "vadd: cluster.x = 3 does not divide grid.x = "
                               "8 (a grid is made of whole clusters)");
    t.grid.x = 32;
    cl.x = 32;
    cr_expect_eq(ck_launch(&t), CUMOD_EINVAL);
    cr_expect(strstr(t.st.msg, "a cluster of 32 blocks is above the "
                               "device's 16"),
              "%s", t.st.msg);
    cl.x = 16;
    cr_expect_eq(ck_launch(&t), CUMOD_OK, "non-portable 16: %s", t.st.msg);

    /* A kernel compiled for clusters of 2. */
    pair.cluster[0] = 2;
    pair.cluster[1] = pair.cluster[2] = 1;
    cl.x = 4;
    cr_expect_eq(
        cumod__check_launch(t.s, &ck_dev, &pair, &t.l, NULL, t.out, &t.st),
        CUMOD_EINVAL);
    cr_expect_str_eq(t.st.msg, "vadd was compiled for clusters of 2x1x1 "
                               "(__cluster_dims__); the launch asks 4x1x1");
    t.l.cluster = NULL;
    t.grid.x = 7;
    cr_expect_eq(
        cumod__check_launch(t.s, &ck_dev, &pair, &t.l, NULL, t.out, &t.st),
        CUMOD_EINVAL, "its compiled shape must divide the grid too");
    t.grid.x = 8;
    cr_expect_eq(
        cumod__check_launch(t.s, &ck_dev, &pair, &t.l, NULL, t.out, &t.st),
        CUMOD_OK, "%s", t.st.msg);

    /* A device without clusters. */
    cumod_chan_device old = ck_dev;
    old.cluster_launch = 0;
    old.sm_major = 8;
    t.l.cluster = &cl;
    cl.x = 2;
    cr_expect_eq(
        cumod__check_launch(t.s, &old, &ck_vadd, &t.l, NULL, t.out, &t.st),
        CUMOD_ENOTSUP);
    cr_expect(strstr(t.st.msg, "need an sm_90 or later device; this one is "
                               "sm_80"),
              "%s", t.st.msg);
    ck_fini(&t);
}

Test(checks, cooperative_and_carveout_become_the_items_flags)
{
    ck t;
    Cumod__Carveout cv = CUMOD__CARVEOUT__INIT;
    ck_init(&t);
    t.l.cooperative = 1;
    cr_assert_eq(ck_launch(&t), CUMOD_OK, "%s", t.st.msg);
    cr_expect(t.out->it.flags & CUMOD_WORK_F_COOPERATIVE);
    cr_expect(!(t.out->it.flags & CUMOD_WORK_F_CARVEOUT));
    cumod_chan_device no = ck_dev;
    no.cooperative_launch = 0;
    cr_expect_eq(
        cumod__check_launch(t.s, &no, &ck_vadd, &t.l, NULL, t.out, &t.st),
        CUMOD_ENOTSUP);
    t.l.cooperative = 0;
    t.l.carveout = &cv;
    cv.percent = 50;
    cr_assert_eq(ck_launch(&t), CUMOD_OK, "%s", t.st.msg);
    cr_expect(t.out->it.flags & CUMOD_WORK_F_CARVEOUT);
    cr_expect_eq(t.out->it.carveout, 50);
    cv.percent = 101;
    cr_expect_eq(ck_launch(&t), CUMOD_EINVAL);
    cr_expect(strstr(t.st.msg, "carveout 101% is not a percentage"), "%s",
              t.st.msg);
    /* The kernel's own setting, when the launch gives none. */
    t.l.carveout = NULL;
    cumod_launch_opts o = {.carveout = 25};
    cr_assert_eq(
        cumod__check_launch(t.s, &ck_dev, &ck_vadd, &t.l, &o, t.out, &t.st),
        CUMOD_OK);
    cr_expect_eq(t.out->it.carveout, 25);
    cr_expect(t.out->it.flags & CUMOD_WORK_F_CARVEOUT);
    ck_fini(&t);
}

Test(checks, typed_values_must_have_the_type_a_cpp_signature_gives)
{
    ck t;
    ck_init(&t);
    t.block.x = 128;
    t.args[2] = t.args[3]; /* clamp's int n: 4 bytes */
    float f = 2.0f;
    double d = 2.0;
    int64_t big = 1000;

    /* The int parameter: an int, or an unsigned int of its width. */
    t.args[2].type = CUMOD__ARG_TYPE__ARG_TYPE_I32;
    cr_expect_eq(ck_clamp_launch(&t, NULL), CUMOD_OK, "%s", t.st.msg);
    t.args[2].type = CUMOD__ARG_TYPE__ARG_TYPE_U32;
    cr_expect_eq(ck_clamp_launch(&t, NULL), CUMOD_OK, "%s", t.st.msg);

    /* A float of the same size is refused, both types named. */
    t.args[2].type = CUMOD__ARG_TYPE__ARG_TYPE_F32;
    t.args[2].value.data = (uint8_t *)&f;
    cr_expect_eq(ck_clamp_launch(&t, NULL), CUMOD_EINVAL);
    cr_expect_str_eq(t.st.msg,
                     "argument 3 of linalg::detail::clamp(const float&, "
                     "float*, int): a float (f32) where the kernel takes "
                     "int");
    /* A wider integer: its type, not only its size. */
    t.args[2].type = CUMOD__ARG_TYPE__ARG_TYPE_I64;
    t.args[2].value.data = (uint8_t *)&big;
    t.args[2].value.len = 8;
    cr_expect_eq(ck_clamp_launch(&t, NULL), CUMOD_EINVAL);
    cr_expect_str_eq(t.st.msg,
                     "argument 3 of linalg::detail::clamp(const float&, "
                     "float*, int): a 64-bit integer (i64) where the kernel "
                     "takes int");

    /* Untyped (an older client, raw bytes), or a type this daemon does
     * not know (a newer client): by size, as before. */
    t.args[2].value.data = (uint8_t *)&f;
    t.args[2].value.len = 4;
    t.args[2].type = CUMOD__ARG_TYPE__ARG_TYPE_UNSPECIFIED;
    cr_expect_eq(ck_clamp_launch(&t, NULL), CUMOD_OK, "%s", t.st.msg);
    t.args[2].type = (Cumod__ArgType)42;
    cr_expect_eq(ck_clamp_launch(&t, NULL), CUMOD_OK, "%s", t.st.msg);
    t.args[2].type = CUMOD__ARG_TYPE__ARG_TYPE_I32;

    /* A typed value where the signature says reference: refused, and
     * with --allow-pointer-values only a 64-bit integer passes. */
    uint64_t addr = 0x1234;
    t.args[0].kind_case = CUMOD__ARG__KIND_VALUE;
    t.args[0].value.data = (uint8_t *)&addr;
    t.args[0].value.len = 8;
    t.args[0].type = CUMOD__ARG_TYPE__ARG_TYPE_U64;
    cr_expect_eq(ck_clamp_launch(&t, NULL), CUMOD_EINVAL);
    cr_expect_str_eq(t.st.msg,
                     "argument 1 of linalg::detail::clamp(const float&, "
                     "float*, int): an unsigned 64-bit integer (u64) where "
                     "the kernel takes const float& (a buffer)");
    cumod_launch_opts loose = {.allow_pointer_values = 1, .carveout = -1};
    cr_expect_eq(ck_clamp_launch(&t, &loose), CUMOD_OK, "%s", t.st.msg);
    t.args[0].value.data = (uint8_t *)&d;
    t.args[0].type = CUMOD__ARG_TYPE__ARG_TYPE_F64;
    cr_expect_eq(ck_clamp_launch(&t, &loose), CUMOD_EINVAL);
    cr_expect_str_eq(t.st.msg,
                     "argument 1 of linalg::detail::clamp(const float&, "
                     "float*, int): a double (f64) where the kernel takes "
                     "const float& (a buffer)");
    ck_fini(&t);
}

Test(checks, types_are_not_checked_where_the_kernel_gives_none)
{
    ck t;
    ck_init(&t);
    /* extern "C" vadd: no signature, so an f32 for its int n goes by its
     * size. */
    float f = 2.0f;
    t.args[3].type = CUMOD__ARG_TYPE__ARG_TYPE_F32;
    t.args[3].value.data = (uint8_t *)&f;
    cr_expect_eq(ck_launch(&t), CUMOD_OK, "%s", t.st.msg);

    /* A C++ parameter of a class type: its size only. */
    static char *types[] = {"const float&", "float*", "linalg::pair"};
    static uint8_t values[] = {0, 0, 0};
    cumod_kernel k = ck_clamp;
    k.ptypes = types;
    k.pvalue = values;
    k.signature = "linalg::detail::clamp(const float&, float*, linalg::pair)";
    t.block.x = 128;
    t.args[2] = t.args[3];
    t.l.n_args = 3;
    cr_expect_eq(
        cumod__check_launch(t.s, &ck_dev, &k, &t.l, NULL, t.out, &t.st),
        CUMOD_OK, "%s", t.st.msg);
    ck_fini(&t);
}
