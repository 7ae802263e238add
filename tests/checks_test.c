/*
 * The launch and copy checks (daemon/front/checks.c) from a kernel
 * description, device limits and a request, without a daemon: what a user
 * reads when a launch is refused, and the parameter bytes a good launch
 * packs.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumod.pb-c.h"
#include "front/checks.h"
#include "front/session.h"

/* An H100's limits. */
static const cumod_chan_device ck_dev = {
    .sm_major = 9,
    .max_threads_per_block = 1024,
    .max_block = {1024, 1024, 64},
    .max_grid = {2147483647, 65535, 65535},
    .max_shared_per_block = 49152,
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
    return cumod__check_launch(t->s, &ck_dev, &ck_vadd, &t->l, t->out, &t->st);
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
    cr_expect_str_eq(t.st.msg, "vadd:vadd takes 4 arguments, 3 given");
    t.l.n_args = 4;

    t.args[3].value.len = 8;
    cr_expect_eq(ck_launch(&t), CUMOD_EINVAL);
    cr_expect_str_eq(t.st.msg,
                     "argument 3 of vadd:vadd: 8 bytes given, the kernel "
                     "takes 4");
    t.args[3].value.len = 4;

    t.refs[1].handle = 999;
    cr_expect_eq(ck_launch(&t), CUMOD_ENOENT);
    cr_expect_str_eq(t.st.msg, "argument 1 of vadd:vadd: buffer 999 is not "
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
    cr_expect(strstr(t.st.msg, "argument 3 of vadd:vadd is a buffer") != NULL,
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

    t.l.shared_mem = 100000;
    cr_expect_eq(ck_launch(&t), CUMOD_EINVAL);
    cr_expect(strstr(t.st.msg, "100000 bytes of dynamic shared memory") != NULL,
              "%s", t.st.msg);
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
    cr_assert_eq(cumod__session_seg_add(t.s, 1 << 20, 0x600000000000ull, &seg),
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
