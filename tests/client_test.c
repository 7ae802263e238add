/* SPDX-License-Identifier: MIT */
/*
 * libcumod on its own, without cumodd: the argument helpers' bytes, the
 * errors the library catches itself (with their detail), batches, what the
 * requests look like on the wire, and segments that leave nothing in
 * /dev/shm. A scripted nng rep socket in a thread stands in for the daemon
 * where a request must go out: it records each request and answers as the
 * test says.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cumod.pb-c.h"
#include "cumod/cumod.h"
#include "harness.h"

TH_SUITE_DRIVER(0);

/* The stand-in daemon. */
typedef struct fake {
    char dir[256];
    char url[300];
    nng_socket sock;
    pthread_t thread;
    atomic_int stop;
    atomic_int requests;
    int code;             /* the status to answer with (0: success) */
    int failed_index;     /* Batch: the reply's failed_index */
    int segment_existed;  /* MapSegment: the name was there to open */
    Cumod__Request *last; /* the last request; read after a reply */
    /* Devices: SetDevice answers as cumodd does for a daemon of two
     * devices (EINVAL past them, EBUSY once the session holds a buffer);
     * Hello says the session's device. Per connection: a restart (a new
     * session) forgets them. */
    int device, holds;
    atomic_int pipes;         /* connections made to this socket */
    int kinds[64], nkinds;    /* body cases since the last restart */
    int set_device_asked[64]; /* SetDevice's device at the same index */
} fake;

static void
fake_answer(fake *f, Cumod__Request *req, Cumod__Reply *rep)
{
    static Cumod__Status st = CUMOD__STATUS__INIT;
    static Cumod__BufferReply buf = CUMOD__BUFFER_REPLY__INIT;
    static Cumod__SegmentReply seg = CUMOD__SEGMENT_REPLY__INIT;
    static Cumod__DoneReply done = CUMOD__DONE_REPLY__INIT;
    static Cumod__BatchReply batch = CUMOD__BATCH_REPLY__INIT;
    static Cumod__DataReply data = CUMOD__DATA_REPLY__INIT;
    static uint8_t bytes[4096];

    static Cumod__DeviceReply dev = CUMOD__DEVICE_REPLY__INIT;

    if (f->code != 0) {
        st.code = f->code;
        st.message = "refused by the test";
        rep->status = &st;
    }
    if (f->nkinds < 64) {
        f->set_device_asked[f->nkinds] =
            req->body_case == CUMOD__REQUEST__BODY_SET_DEVICE
                ? req->set_device->device
                : -1;
        f->kinds[f->nkinds++] = req->body_case;
    }
    switch (req->body_case) {
    case CUMOD__REQUEST__BODY_SET_DEVICE:
        if (req->set_device->device > 1) {
            st.code = CUMOD_EINVAL;
            st.message = "SetDevice: device 7 is not served (devices 0, 1)";
            rep->status = &st;
        } else if (f->holds && req->set_device->device != f->device) {
            st.code = CUMOD_EBUSY;
            st.message = "SetDevice: the session holds buffers on device 0";
            rep->status = &st;
        } else {
            f->device = req->set_device->device;
        }
        dev.device = f->device;
        dev.domain = "default";
        rep->body_case = CUMOD__REPLY__BODY_DEVICE;
        rep->device = &dev;
        break;
    case CUMOD__REQUEST__BODY_ALLOC_BUFFER:
        f->holds = 1;
        buf.handle = 5;
        rep->body_case = CUMOD__REPLY__BODY_BUFFER;
        rep->buffer = &buf;
        break;
    case CUMOD__REQUEST__BODY_MAP_SEGMENT: {
        int fd = shm_open(req->map_segment->name, O_RDONLY, 0);
        f->segment_existed = fd >= 0;
        if (fd >= 0)
            close(fd);
        seg.handle = 9;
        rep->body_case = CUMOD__REPLY__BODY_SEGMENT;
        rep->segment = &seg;
        break;
    }
    case CUMOD__REQUEST__BODY_READ_BUFFER:
        memset(bytes, 0xab, sizeof(bytes));
        data.data.data = bytes;
        data.data.len = req->read_buffer->length;
        rep->body_case = CUMOD__REPLY__BODY_DATA;
        rep->data = &data;
        break;
    case CUMOD__REQUEST__BODY_BATCH:
        batch.items = (uint32_t)req->batch->n_items;
        batch.failed_index = f->failed_index;
        batch.ticket = 43;
        rep->body_case = CUMOD__REPLY__BODY_BATCH;
        rep->batch = &batch;
        break;
    default: /* launches, copies, memsets, writes: DoneReply */
        done.ticket =
            req->body_case == CUMOD__REQUEST__BODY_LAUNCH &&
                    req->launch->when == CUMOD__REPLY_WHEN__REPLY_WHEN_ENQUEUED
                ? 42
                : 0;
        done.generation = 7;
        rep->body_case = CUMOD__REPLY__BODY_DONE;
        rep->done = &done;
    }
}

static void *
fake_main(void *arg)
{
    fake *f = arg;
    nng_msg *m;

    while (!atomic_load(&f->stop)) {
        if (nng_recvmsg(f->sock, &m, 0) != 0)
            continue; /* the receive timeout: look at stop again */
        Cumod__Request *req =
            cumod__request__unpack(NULL, nng_msg_len(m), nng_msg_body(m));
        nng_msg_free(m);
        if (req == NULL)
            continue;
        Cumod__Reply rep = CUMOD__REPLY__INIT;
        rep.id = req->id;
        rep.version = req->version;
        if (req->body_case == CUMOD__REQUEST__BODY_OPEN_RING) {
            /* As a cumodd without the fast path answers: the client goes
             * on over nng, which is what this fake sees. */
            Cumod__Status st = CUMOD__STATUS__INIT;
            st.code = CUMOD_EPROTO;
            st.message = "unknown request";
            rep.status = &st;
            cumod__request__free_unpacked(req, NULL);
            nng_msg_alloc(&m, cumod__reply__get_packed_size(&rep));
            cumod__reply__pack(&rep, nng_msg_body(m));
            if (nng_sendmsg(f->sock, m, 0) != 0)
                nng_msg_free(m);
            continue;
        }
        if (req->body_case == CUMOD__REQUEST__BODY_HELLO) {
            /* cumod_open's: answered, and not one of the test's. */
            Cumod__HelloReply h = CUMOD__HELLO_REPLY__INIT;
            Cumod__DeviceInfo d0 = CUMOD__DEVICE_INFO__INIT,
                              d1 = CUMOD__DEVICE_INFO__INIT;
            Cumod__DomainInfo m0 = CUMOD__DOMAIN_INFO__INIT;
            Cumod__DeviceInfo *devs[] = {&d0, &d1};
            Cumod__DomainInfo *doms[] = {&m0};
            h.protocol_version = 1;
            h.domain = "default";
            h.session_device = f->device;
            d0.name = d1.name = "NVIDIA H100 80GB HBM3 (fakecuda)";
            d0.uuid = "GPU-fa6ec0da-c0de-4000-8000-000000000000";
            d1.uuid = "GPU-fa6ec0da-c0de-4000-8000-000000000001";
            d1.ordinal = 1;
            d0.total_memory = d1.total_memory = 80ull << 30;
            d1.free_memory = 79ull << 30;
            d1.executors = 1;
            d1.standby = 1;
            d1.sm_major = 9;
            m0.name = "default";
            m0.device = 1;
            m0.executor_state = "serving";
            m0.executor_pid = 4242;
            m0.sessions = 3;
            m0.memory_bytes = 1 << 20;
            m0.memory_max = 1 << 30;
            m0.restarts = 2;
            m0.last_fault = "CUDA_ERROR_ILLEGAL_ADDRESS in vadd:vadd";
            m0.last_fault_unix_ms = 1764028800000ull;
            m0.resident_modules = 4;
            h.n_devices = 2;
            h.devices = devs;
            h.n_domains = 1;
            h.domains = doms;
            h.standby = 1;
            h.standby_bytes = 512ull << 20;
            h.max_message = 64u << 20;
            rep.body_case = CUMOD__REPLY__BODY_HELLO;
            rep.hello = &h;
            cumod__request__free_unpacked(req, NULL);
            nng_msg_alloc(&m, cumod__reply__get_packed_size(&rep));
            cumod__reply__pack(&rep, nng_msg_body(m));
            if (nng_sendmsg(f->sock, m, 0) != 0)
                nng_msg_free(m);
            continue;
        }
        fake_answer(f, req, &rep);
        if (f->last != NULL)
            cumod__request__free_unpacked(f->last, NULL);
        f->last = req;
        atomic_fetch_add(&f->requests, 1);
        nng_msg_alloc(&m, cumod__reply__get_packed_size(&rep));
        cumod__reply__pack(&rep, nng_msg_body(m));
        if (nng_sendmsg(f->sock, m, 0) != 0)
            nng_msg_free(m);
    }
    return NULL;
}

static void
fake_on_pipe(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    (void)p;
    (void)ev;
    atomic_fetch_add(&((fake *)arg)->pipes, 1);
}

/* The socket, on f->url, and its thread. */
static void
fake_listen(fake *f)
{
    atomic_store(&f->stop, 0);
    cr_assert_eq(nng_rep0_open(&f->sock), 0);
    nng_pipe_notify(f->sock, NNG_PIPE_EV_ADD_POST, fake_on_pipe, f);
    nng_socket_set_ms(f->sock, NNG_OPT_RECVTIMEO, 20);
    cr_assert_eq(nng_listen(f->sock, f->url, NULL, 0), 0);
    cr_assert_eq(pthread_create(&f->thread, NULL, fake_main, f), 0);
}

static void
fake_start(fake *f)
{
    memset(f, 0, sizeof(*f));
    f->failed_index = -1;
    th_tmpdir(f->dir, sizeof(f->dir));
    snprintf(f->url, sizeof(f->url), "ipc://%s/s.sock", f->dir);
    fake_listen(f);
}

/* As cumodd restarting: the connection ends, and the client's next one is
 * a new session. Returns once the client has connected again. */
static void
fake_restart(fake *f)
{
    atomic_store(&f->stop, 1);
    pthread_join(f->thread, NULL);
    nng_close(f->sock);
    f->device = f->holds = f->nkinds = 0;
    atomic_store(&f->pipes, 0);
    fake_listen(f);
    for (int i = 0; i < 1000 && atomic_load(&f->pipes) == 0; i++)
        th_sleep_ms(10);
    cr_assert_gt(atomic_load(&f->pipes), 0, "the client connected again");
}

/* Stops the thread before closing the socket: never close under a blocked
 * receive (nng #1543). */
static void
fake_stop(fake *f)
{
    atomic_store(&f->stop, 1);
    pthread_join(f->thread, NULL);
    nng_close(f->sock);
    if (f->last != NULL)
        cumod__request__free_unpacked(f->last, NULL);
    f->last = NULL;
    th_rmtree(f->dir);
}

/* /dev/shm entries of this process's segments. */
static int
shm_leftovers(void)
{
    char prefix[64];
    struct dirent *e;
    int n = 0;
    DIR *d = opendir("/dev/shm");

    snprintf(prefix, sizeof(prefix), "cumod-%ld-", (long)getpid());
    while (d != NULL && (e = readdir(d)) != NULL)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (d != NULL)
        closedir(d);
    return n;
}

#define EXPECT_ERR(call, code, text)                                           \
    do {                                                                       \
        cr_expect_eq((call), (code), "%s", #call);                             \
        cr_expect_str_eq(cumod_last_detail(), (text), "%s", #call);            \
    } while (0)

Test(args, values_are_little_endian_host_bytes)
{
    cumod_arg a = cumod_arg_i32(-2);
    cr_expect_eq(a.kind, CUMOD_ARG_VALUE);
    cr_expect_eq(a.len, 4);
    cr_expect_arr_eq(a.v.bytes, ((unsigned char[]){0xfe, 0xff, 0xff, 0xff}), 4);
    a = cumod_arg_u32(0x01020304u);
    cr_expect_eq(a.len, 4);
    cr_expect_arr_eq(a.v.bytes, ((unsigned char[]){4, 3, 2, 1}), 4);
    a = cumod_arg_i64(-2);
    cr_expect_eq(a.len, 8);
    cr_expect_arr_eq(
        a.v.bytes,
        ((unsigned char[]){0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}), 8);
    a = cumod_arg_u64(0x0102030405060708ull);
    cr_expect_eq(a.len, 8);
    cr_expect_arr_eq(a.v.bytes, ((unsigned char[]){8, 7, 6, 5, 4, 3, 2, 1}), 8);
    a = cumod_arg_f32(1.5f); /* 0x3fc00000 */
    cr_expect_eq(a.len, 4);
    cr_expect_arr_eq(a.v.bytes, ((unsigned char[]){0, 0, 0xc0, 0x3f}), 4);
    a = cumod_arg_f64(1.5); /* 0x3ff8000000000000 */
    cr_expect_eq(a.len, 8);
    cr_expect_arr_eq(a.v.bytes,
                     ((unsigned char[]){0, 0, 0, 0, 0, 0, 0xf8, 0x3f}), 8);
}

Test(args, buffers_and_raw_bytes)
{
    struct {
        float x, y;
        int n;
    } s = {1, 2, 3};
    cumod_arg a = cumod_arg_buffer(17, 256);
    cr_expect_eq(a.kind, CUMOD_ARG_BUFFER);
    cr_expect_eq(a.len, 8, "a buffer is a device pointer to the kernel");
    cr_expect_eq(a.v.buffer.handle, 17);
    cr_expect_eq(a.v.buffer.offset, 256);
    a = cumod_arg_bytes(&s, sizeof(s));
    cr_expect_eq(a.kind, CUMOD_ARG_RAW);
    cr_expect_eq(a.len, sizeof(s));
    cr_expect_eq(a.v.raw, &s, "raw bytes are borrowed, not copied");
}

Test(errors, null_and_zero_arguments_are_caught_here, .timeout = 30)
{
    fake f;
    cumod_client *c;
    cumod_buffer b;
    cumod_segment *s = NULL;
    cumod_batch *bt;
    char data[8] = {0};

    EXPECT_ERR(cumod_buffer_alloc(NULL, 8, &b), CUMOD_EINVAL,
               "cumod_buffer_alloc: NULL argument");
    EXPECT_ERR(cumod_launch(NULL, NULL, NULL, NULL), CUMOD_EINVAL,
               "cumod_launch: the client is NULL");
    EXPECT_ERR(cumod_batch_alloc(NULL), CUMOD_EINVAL,
               "cumod_batch_alloc: out is NULL");
    fake_start(&f);
    cr_assert_eq(cumod_open(f.url, 2000, &c), CUMOD_OK, "%s",
                 cumod_last_detail());
    EXPECT_ERR(cumod_buffer_alloc(c, 0, &b), CUMOD_EINVAL,
               "cumod_buffer_alloc: size is 0");
    EXPECT_ERR(cumod_buffer_write(c, 1, 0, NULL, 8, 0), CUMOD_EINVAL,
               "cumod_buffer_write: NULL argument");
    EXPECT_ERR(cumod_buffer_read(c, 1, 0, data, 0, 0), CUMOD_EINVAL,
               "cumod_buffer_read: length is 0");
    EXPECT_ERR(cumod_buffer_memset(c, 1, 0, 0, 0, 0, NULL), CUMOD_EINVAL,
               "cumod_buffer_memset: length is 0");
    EXPECT_ERR(cumod_segment_create(c, 0, &s), CUMOD_EINVAL,
               "cumod_segment_create: size is 0");
    EXPECT_ERR(cumod_copy_to_device(c, 1, 0, NULL, 0, 8, 0, NULL), CUMOD_EINVAL,
               "cumod_copy_to_device: NULL argument");
    EXPECT_ERR(cumod_stream_destroy(c, 0), CUMOD_EINVAL,
               "cumod_stream_destroy: stream 0 is the session's default "
               "stream; it cannot be destroyed");

    cumod_arg args[CUMOD_MAX_ARGS + 1];
    cumod_launch_params p = {.kernel = "vadd", .nargs = 0};
    EXPECT_ERR(cumod_launch(c, &p, NULL, NULL), CUMOD_EINVAL,
               "cumod_launch: kernel 'vadd' is not \"module:function\"");
    p.kernel = "vadd:vadd";
    p.nargs = 2;
    EXPECT_ERR(cumod_launch(c, &p, NULL, NULL), CUMOD_EINVAL,
               "cumod_launch: nargs is 2 but args is NULL");
    for (size_t i = 0; i <= CUMOD_MAX_ARGS; i++)
        args[i] = cumod_arg_i32((int32_t)i);
    p.args = args;
    p.nargs = CUMOD_MAX_ARGS + 1;
    EXPECT_ERR(cumod_launch(c, &p, NULL, NULL), CUMOD_EINVAL,
               "cumod_launch: 1025 arguments, more than 1024");
    p.nargs = 3;
    args[1] = cumod_arg_bytes(NULL, 4);
    EXPECT_ERR(cumod_launch(c, &p, NULL, NULL), CUMOD_EINVAL,
               "cumod_launch: argument 2: its bytes are NULL");
    args[1] = cumod_arg_bytes(data, CUMOD_MAX_ARG_BYTES + 1);
    EXPECT_ERR(cumod_launch(c, &p, NULL, NULL), CUMOD_EINVAL,
               "cumod_launch: argument 2: 32765 bytes (1 to 32764)");
    args[1].kind = CUMOD_ARG_VALUE;
    args[1].len = 17;
    EXPECT_ERR(cumod_launch(c, &p, NULL, NULL), CUMOD_EINVAL,
               "cumod_launch: argument 2: a value of 17 bytes (1 to 16; "
               "cumod_arg_bytes takes more)");
    cr_assert_eq(cumod_batch_alloc(&bt), CUMOD_OK);
    EXPECT_ERR(cumod_batch_launch(bt, &p), CUMOD_EINVAL,
               "cumod_batch_launch: argument 2: a value of 17 bytes (1 to "
               "16; cumod_arg_bytes takes more)");
    EXPECT_ERR(cumod_batch_write(bt, 1, 0, NULL, 4), CUMOD_EINVAL,
               "cumod_batch_write: NULL argument");
    EXPECT_ERR(cumod_batch_submit(c, bt, 0, NULL, NULL), CUMOD_EINVAL,
               "cumod_batch_submit: the batch is empty");
    cr_expect_eq(cumod_batch_count(bt), 0, "nothing failed was added");
    cr_expect_eq(atomic_load(&f.requests), 0, "nothing reached the daemon");
    cr_expect_null(s);
    cumod_batch_free(bt);
    cumod_close(c);
    fake_stop(&f);
}

Test(wire, a_launch_packs_its_arguments_and_asks_for_a_ticket, .timeout = 30)
{
    fake f;
    cumod_client *c;
    cumod_ticket t = 0;
    uint64_t gen = 0;
    struct {
        int a, b;
    } raw = {0x11223344, 0x55667788};
    cumod_arg args[100];

    fake_start(&f);
    cr_assert_eq(cumod_open(f.url, 2000, &c), CUMOD_OK);
    args[0] = cumod_arg_buffer(5, 64);
    args[1] = cumod_arg_f32(1.5f);
    args[2] = cumod_arg_bytes(&raw, sizeof(raw));
    cumod_launch_params p = {.kernel = "vadd:vadd",
                             .generation = 3,
                             .grid = {2, 0, 0},
                             .block = {256, 1, 1},
                             .shared_mem = 128,
                             .stream = 4,
                             .nargs = 3,
                             .args = args};
    cr_assert_eq(cumod_launch(c, &p, &t, &gen), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect_eq(t, 42);
    cr_expect_eq(gen, 7);
    const Cumod__Launch *l = f.last->launch;
    cr_assert_eq(f.last->body_case, CUMOD__REQUEST__BODY_LAUNCH);
    cr_expect_str_eq(l->kernel, "vadd:vadd");
    cr_expect_eq(l->generation, 3);
    cr_expect(l->grid->x == 2 && l->grid->y == 0 && l->block->x == 256);
    cr_expect(l->shared_mem == 128 && l->stream == 4);
    cr_expect_eq(l->when, CUMOD__REPLY_WHEN__REPLY_WHEN_ENQUEUED);
    cr_assert_eq(l->n_args, 3);
    cr_expect_eq(l->args[0]->kind_case, CUMOD__ARG__KIND_BUFFER);
    cr_expect(l->args[0]->buffer->handle == 5 &&
              l->args[0]->buffer->offset == 64);
    cr_expect_eq(l->args[1]->value.len, 4);
    cr_expect_arr_eq(l->args[1]->value.data,
                     ((unsigned char[]){0, 0, 0xc0, 0x3f}), 4);
    cr_expect_eq(l->args[2]->value.len, sizeof(raw));
    cr_expect_arr_eq(l->args[2]->value.data, &raw, sizeof(raw));

    /* No ticket: answered when complete. More args than fit the stack. */
    for (int i = 0; i < 100; i++)
        args[i] = cumod_arg_u64((uint64_t)i << 32);
    p.nargs = 100;
    cr_assert_eq(cumod_launch(c, &p, NULL, NULL), CUMOD_OK);
    l = f.last->launch;
    cr_expect_eq(l->when, CUMOD__REPLY_WHEN__REPLY_WHEN_COMPLETE);
    cr_assert_eq(l->n_args, 100);
    uint64_t v;
    memcpy(&v, l->args[99]->value.data, 8);
    cr_expect_eq(v, 99ull << 32);

    unsigned char got[16];
    cr_assert_eq(cumod_buffer_read(c, 5, 8, got, sizeof(got), 4), CUMOD_OK);
    cr_expect_eq(got[15], 0xab);
    cr_expect(f.last->read_buffer->offset == 8 &&
              f.last->read_buffer->length == 16 &&
              f.last->read_buffer->stream == 4);
    cumod_close(c);
    fake_stop(&f);
}

Test(batch, a_thousand_items_build_reset_and_report_the_failed_one,
     .timeout = 30)
{
    fake f;
    cumod_client *c;
    cumod_batch *b;
    cumod_ticket t = 0;
    int failed = 99;
    float x = 2.5f;
    cumod_arg args[2] = {cumod_arg_buffer(1, 0), cumod_arg_bytes(&x, 4)};
    cumod_launch_params p = {
        .kernel = "scale:scale", .stream = 9, .nargs = 2, .args = args};

    cr_assert_eq(cumod_batch_alloc(&b), CUMOD_OK);
    for (int i = 0; i < 1000; i++) {
        x = (float)i; /* copied at once: later changes do not show */
        cr_assert_eq(cumod_batch_launch(b, &p), CUMOD_OK);
    }
    cr_expect_eq(cumod_batch_write(b, 1, 4, "abcd", 4), CUMOD_OK);
    cr_expect_eq(cumod_batch_memset(b, 1, 0, 64, 7), CUMOD_OK);
    cr_expect_eq(cumod_batch_count(b), 1002);
    cumod_batch_reset(b);
    cr_expect_eq(cumod_batch_count(b), 0);
    for (int i = 0; i < 1000; i++) {
        x = (float)i;
        cr_assert_eq(cumod_batch_launch(b, &p), CUMOD_OK);
    }

    fake_start(&f);
    cr_assert_eq(cumod_open(f.url, 5000, &c), CUMOD_OK);
    cr_assert_eq(cumod_batch_submit(c, b, 2, &t, &failed), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect_eq(t, 43);
    cr_expect_eq(failed, -1);
    const Cumod__Batch *m = f.last->batch;
    cr_assert_eq(m->n_items, 1000);
    cr_expect(m->stream == 2 &&
              m->when == CUMOD__REPLY_WHEN__REPLY_WHEN_ENQUEUED);
    const Cumod__Launch *l = m->items[999]->launch;
    cr_expect_str_eq(l->kernel, "scale:scale");
    cr_expect_eq(l->stream, 0, "an item's stream is the batch's");
    float got;
    memcpy(&got, l->args[1]->value.data, 4);
    cr_expect_eq(got, 999.0f);

    /* A refused batch still says which item failed. */
    f.code = CUMOD_EINVAL;
    f.failed_index = 3;
    cr_expect_eq(cumod_batch_submit(c, b, 0, NULL, &failed), CUMOD_EINVAL);
    cr_expect_eq(failed, 3);
    cr_expect_str_eq(cumod_last_detail(), "refused by the test");
    cumod_batch_free(b);
    cumod_close(c);
    fake_stop(&f);
}

Test(segments, unlinked_once_mapped_and_never_left_behind, .timeout = 30)
{
    fake f;
    cumod_client *c;
    cumod_segment *s = NULL;

    fake_start(&f);
    cr_assert_eq(cumod_open(f.url, 300, &c), CUMOD_OK);
    cr_assert_eq(cumod_segment_create(c, 1 << 20, &s), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect(f.segment_existed, "the daemon could open it by name");
    cr_expect_eq(strncmp(f.last->map_segment->name, "/cumod-", 7), 0);
    cr_expect_eq(f.last->map_segment->size, 1 << 20);
    cr_expect_eq(cumod_segment_size(s), 1 << 20);
    memset(cumod_segment_data(s), 1, 1 << 20);
    cr_expect_eq(shm_leftovers(), 0, "unlinked once the daemon has it");
    EXPECT_ERR(cumod_copy_to_host(c, s, 1 << 20, 1, 0, 1, 0, NULL),
               CUMOD_EINVAL,
               "cumod_copy_to_host: segment offset 1048576 + length 1 is past "
               "the end of the segment (1048576 bytes)");
    cr_expect_eq(cumod_segment_destroy(c, s), CUMOD_OK);
    cr_expect_eq(f.last->unmap_segment->handle, 9);

    /* The daemon refuses: nothing is left. */
    f.code = CUMOD_EPERM;
    s = NULL;
    cr_expect_eq(cumod_segment_create(c, 4096, &s), CUMOD_EPERM);
    cr_expect_null(s);
    cr_expect_eq(shm_leftovers(), 0);

    /* No daemon at all any more: the request times out; nothing is left. */
    fake_stop(&f);
    cr_expect_neq(cumod_segment_create(c, 4096, &s), CUMOD_OK);
    cr_expect_null(s);
    cr_expect_neq(cumod_last_detail()[0], '\0');
    cr_expect_eq(shm_leftovers(), 0);
    cumod_close(c);
}

/* ---- devices ---------------------------------------------------------------
 */

/* The request kinds the stand-in saw, as "SET_DEVICE(1) ALLOC_BUFFER". */
static void
device_kinds(const fake *f, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; i < f->nkinds && n < cap; i++) {
        if (f->kinds[i] == CUMOD__REQUEST__BODY_SET_DEVICE)
            n += (size_t)snprintf(out + n, cap - n, "%sSET_DEVICE(%d)",
                                  i ? " " : "", f->set_device_asked[i]);
        else if (f->kinds[i] == CUMOD__REQUEST__BODY_ALLOC_BUFFER)
            n += (size_t)snprintf(out + n, cap - n, "%sALLOC_BUFFER",
                                  i ? " " : "");
        else
            n += (size_t)snprintf(out + n, cap - n, "%s%d", i ? " " : "",
                                  f->kinds[i]);
    }
}

Test(device, set_device_asks_cumodd_and_says_its_refusals, .timeout = 30)
{
    fake f;
    cumod_client *c;
    cumod_buffer b;
    char kinds[256];

    EXPECT_ERR(cumod_set_device(NULL, 0), CUMOD_EINVAL,
               "cumod_set_device: NULL client");
    cr_expect_eq(cumod_device(NULL), -1);
    fake_start(&f);
    cr_assert_eq(cumod_open(f.url, 2000, &c), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect_eq(cumod_device(c), 0, "Hello's device, before any choice");
    EXPECT_ERR(cumod_set_device(c, -1), CUMOD_EINVAL,
               "cumod_set_device: a device ordinal is 0 or more");
    cr_assert_eq(cumod_set_device(c, 1), CUMOD_OK, "%s", cumod_last_detail());
    cr_expect_eq(cumod_device(c), 1);
    cr_assert_eq(f.last->body_case, CUMOD__REQUEST__BODY_SET_DEVICE);
    cr_expect_eq(f.last->set_device->device, 1);
    /* cumodd's refusals, with its words, leave the choice as it was. */
    EXPECT_ERR(cumod_set_device(c, 7), CUMOD_EINVAL,
               "SetDevice: device 7 is not served (devices 0, 1)");
    cr_expect_eq(cumod_device(c), 1);
    cr_assert_eq(cumod_buffer_alloc(c, 64, &b), CUMOD_OK, "%s",
                 cumod_last_detail());
    EXPECT_ERR(cumod_set_device(c, 0), CUMOD_EBUSY,
               "SetDevice: the session holds buffers on device 0");
    cr_expect_eq(cumod_device(c), 1);
    /* One SetDevice per call: never sent again on the same connection. */
    cr_assert_eq(cumod_buffer_alloc(c, 64, &b), CUMOD_OK);
    device_kinds(&f, kinds, sizeof(kinds));
    cr_expect_str_eq(kinds, "SET_DEVICE(1) SET_DEVICE(7) ALLOC_BUFFER "
                            "SET_DEVICE(0) ALLOC_BUFFER");
    cumod_close(c);
    fake_stop(&f);
}

Test(device, cumod_device_env_chooses_at_open, .timeout = 30)
{
    fake f;
    cumod_client *c = NULL;
    char kinds[256];

    /* Not a number: refused before connecting (nothing listens there). */
    setenv("CUMOD_DEVICE", "one", 1);
    EXPECT_ERR(cumod_open("ipc:///nonexistent/cumodd.sock", 2000, &c),
               CUMOD_EINVAL,
               "CUMOD_DEVICE is 'one': not a device ordinal (0, 1, ...; "
               "cumodctl status lists the devices)");
    setenv("CUMOD_DEVICE", "-1", 1);
    cr_expect_eq(cumod_open("ipc:///nonexistent/cumodd.sock", 2000, &c),
                 CUMOD_EINVAL);
    cr_expect_null(c);
    fake_start(&f);
    setenv("CUMOD_DEVICE", "7", 1);
    EXPECT_ERR(cumod_open(f.url, 2000, &c), CUMOD_EINVAL,
               "SetDevice: device 7 is not served (devices 0, 1)");
    cr_expect_null(c);
    setenv("CUMOD_DEVICE", "1", 1);
    cr_assert_eq(cumod_open(f.url, 2000, &c), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect_eq(cumod_device(c), 1);
    device_kinds(&f, kinds, sizeof(kinds));
    cr_expect_str_eq(kinds, "SET_DEVICE(7) SET_DEVICE(1)");
    cumod_close(c);
    /* Empty is unset. */
    setenv("CUMOD_DEVICE", "", 1);
    f.nkinds = 0;
    cr_assert_eq(cumod_open(f.url, 2000, &c), CUMOD_OK);
    cr_expect_eq(f.nkinds, 0, "no SetDevice");
    cumod_close(c);
    unsetenv("CUMOD_DEVICE");
    fake_stop(&f);
}

Test(device, chosen_again_when_the_connection_is_made_again, .timeout = 60)
{
    fake f;
    cumod_client *c;
    cumod_buffer b;
    char kinds[256];

    fake_start(&f);
    cr_assert_eq(cumod_open(f.url, 5000, &c), CUMOD_OK);
    cr_assert_eq(cumod_set_device(c, 1), CUMOD_OK, "%s", cumod_last_detail());
    cr_assert_eq(cumod_buffer_alloc(c, 64, &b), CUMOD_OK);
    /* cumodd restarts: the next call's session must be on device 1 too. */
    fake_restart(&f);
    cr_assert_eq(cumod_buffer_alloc(c, 64, &b), CUMOD_OK, "%s",
                 cumod_last_detail());
    device_kinds(&f, kinds, sizeof(kinds));
    cr_expect_str_eq(kinds, "SET_DEVICE(1) ALLOC_BUFFER");
    cr_expect_eq(cumod_device(c), 1);
    /* Refused on the new session: the call is not sent, and says why. */
    fake_restart(&f);
    f.holds = 1;
    f.code = 0;
    cr_expect_eq(cumod_buffer_alloc(c, 64, &b), CUMOD_EBUSY);
    cr_expect(strstr(cumod_last_detail(),
                     "the connection to cumodd was made again (a new "
                     "session), and choosing device 1 for it failed, so the "
                     "call was not sent: SetDevice: the session holds") != NULL,
              "%s", cumod_last_detail());
    device_kinds(&f, kinds, sizeof(kinds));
    cr_expect_str_eq(kinds, "SET_DEVICE(1)");
    cumod_close(c);
    fake_stop(&f);
}

Test(device, domains_copies_every_device_and_domain, .timeout = 30)
{
    fake f;
    cumod_client *c;
    cumod_domains *d = NULL;

    EXPECT_ERR(cumod_domains_get(NULL, &d), CUMOD_EINVAL,
               "cumod_domains_get: NULL argument");
    cumod_domains_free(NULL);
    fake_start(&f);
    cr_assert_eq(cumod_open(f.url, 2000, &c), CUMOD_OK);
    cr_assert_eq(cumod_set_device(c, 1), CUMOD_OK);
    cr_assert_eq(cumod_domains_get(c, &d), CUMOD_OK, "%s", cumod_last_detail());
    cr_expect_str_eq(d->domain, "default");
    cr_expect_eq(d->device, 1);
    cr_expect(d->standby == 1 && d->standby_bytes == 512ull << 20 &&
              d->max_message == 64u << 20);
    cr_assert_eq(d->ndevices, 2);
    cr_expect_eq(d->devices[1].ordinal, 1);
    cr_expect_str_eq(d->devices[0].uuid,
                     "GPU-fa6ec0da-c0de-4000-8000-000000000000");
    cr_expect_str_eq(d->devices[1].uuid,
                     "GPU-fa6ec0da-c0de-4000-8000-000000000001");
    cr_expect_str_eq(d->devices[1].name, "NVIDIA H100 80GB HBM3 (fakecuda)");
    cr_expect(d->devices[1].total_memory == 80ull << 30 &&
              d->devices[1].free_memory == 79ull << 30 &&
              d->devices[1].executors == 1 && d->devices[1].standby == 1 &&
              d->devices[1].sm_major == 9);
    cr_assert_eq(d->ndomains, 1);
    const cumod_domain_info *m = &d->domains[0];
    cr_expect_str_eq(m->name, "default");
    cr_expect_str_eq(m->executor_state, "serving");
    cr_expect_str_eq(m->last_fault, "CUDA_ERROR_ILLEGAL_ADDRESS in vadd:vadd");
    cr_expect(m->device == 1 && m->executor_pid == 4242 && m->sessions == 3 &&
              m->memory_bytes == 1 << 20 && m->memory_max == 1 << 30 &&
              m->restarts == 2 && m->last_fault_unix_ms == 1764028800000ull &&
              m->resident_modules == 4);
    cumod_domains_free(d);
    cumod_close(c);
    fake_stop(&f);
}
