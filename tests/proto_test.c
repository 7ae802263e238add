/* SPDX-License-Identifier: MIT */
/*
 * The protocol: the shared error list, the messages, and how cumodd answers
 * what is not a valid request (on the fake driver, as a real process).
 */
#include <criterion/criterion.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumod.pb-c.h"
#include "cumod/cumod.h"
#include "harness.h"

TH_SUITE_DRIVER(0);

Test(errors, every_code_has_a_distinct_name_and_sentence)
{
    const char *names[64] = {0};
    int n = 0;
#define CHECK(name, num, msg)                                                  \
    cr_expect_str_eq(cumod_errname(num), "CUMOD_" #name);                      \
    cr_expect_str_eq(cumod_strerror(num), msg);                                \
    cr_expect_eq((int)CUMOD_##name, num);                                      \
    names[n++] = "CUMOD_" #name;
    CUMOD_ERRNO_MAP(CHECK)
#undef CHECK
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            cr_expect(strcmp(names[i], names[j]) != 0, "%s twice", names[i]);
    cr_expect_eq(CUMOD_OK, 0);
    cr_expect_str_eq(cumod_strerror(0), "success");
    cr_expect_str_eq(cumod_strerror(-5), "unknown error");
    cr_expect_str_eq(cumod_errname(100000), "CUMOD_E?");
}

Test(messages, request_and_reply_round_trip)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__Hello hello = CUMOD__HELLO__INIT;
    uint8_t buf[256];

    hello.client = "test";
    req.version = 1;
    req.id = 0x1234567890ULL;
    req.body_case = CUMOD__REQUEST__BODY_HELLO;
    req.hello = &hello;
    size_t n = cumod__request__pack(&req, buf);
    cr_assert_eq(n, cumod__request__get_packed_size(&req));
    Cumod__Request *back = cumod__request__unpack(NULL, n, buf);
    cr_assert_not_null(back);
    cr_expect_eq(back->id, 0x1234567890ULL);
    cr_expect_eq(back->body_case, CUMOD__REQUEST__BODY_HELLO);
    cr_expect_str_eq(back->hello->client, "test");
    cumod__request__free_unpacked(back, NULL);
    /* Truncated bytes are refused, not misread. */
    cr_expect_null(cumod__request__unpack(NULL, n - 3, buf));
}

/* Sends raw bytes to the daemon and decodes its reply. */
static Cumod__Reply *
raw_call(const char *url, const void *bytes, size_t len)
{
    nng_socket s;
    nng_msg *m;
    cr_assert_eq(nng_req0_open(&s), 0);
    nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 10000);
    cr_assert_eq(nng_dial(s, url, NULL, 0), 0);
    cr_assert_eq(nng_msg_alloc(&m, 0), 0);
    nng_msg_append(m, bytes, len);
    cr_assert_eq(nng_sendmsg(s, m, 0), 0);
    cr_assert_eq(nng_recvmsg(s, &m, 0), 0, "no reply to the raw request");
    Cumod__Reply *r =
        cumod__reply__unpack(NULL, nng_msg_len(m), nng_msg_body(m));
    nng_msg_free(m);
    nng_close(s);
    cr_assert_not_null(r, "the reply is not a cumod.Reply");
    return r;
}

static Cumod__Reply *
call_req(const char *url, Cumod__Request *req)
{
    uint8_t buf[512];
    size_t n = cumod__request__pack(req, buf);
    return raw_call(url, buf, n);
}

static const char *const kargs[] = {"--kernels", CUMOD_TEST_KERNEL_DIR, NULL};

Test(daemon, answers_malformed_requests_with_a_status, .timeout = 60)
{
    th_daemon d;
    cr_assert_eq(th_daemon_start(&d, kargs, NULL), 0);

    Cumod__Reply *r = raw_call(d.url, "\xff\xff\xff garbage", 12);
    cr_expect_not_null(r->status);
    cr_expect_eq(r->status->code, CUMOD_EPROTO);
    cr_expect(strstr(r->status->message, "not a valid cumod.Request"), "%s",
              r->status->message);
    cumod__reply__free_unpacked(r, NULL);

    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__Hello hello = CUMOD__HELLO__INIT;
    req.version = 99;
    req.id = 42;
    req.body_case = CUMOD__REQUEST__BODY_HELLO;
    req.hello = &hello;
    r = call_req(d.url, &req);
    cr_expect_eq(r->id, 42, "the reply names the request");
    cr_expect_eq(r->status->code, CUMOD_EVERSION);
    cr_expect(strstr(r->status->message, "version 99 is not supported"), "%s",
              r->status->message);
    cumod__reply__free_unpacked(r, NULL);

    Cumod__Request empty = CUMOD__REQUEST__INIT;
    empty.version = 1;
    empty.id = 7;
    r = call_req(d.url, &empty);
    cr_expect_eq(r->id, 7);
    cr_expect_eq(r->status->code, CUMOD_EINVAL);
    cumod__reply__free_unpacked(r, NULL);

    req.version = 1;
    req.id = 43;
    r = call_req(d.url, &req);
    cr_expect_eq(r->id, 43);
    cr_expect(r->status == NULL || r->status->code == CUMOD_OK);
    cr_expect_eq(r->body_case, CUMOD__REPLY__BODY_HELLO);
    cumod__reply__free_unpacked(r, NULL);
    cr_expect_eq(th_daemon_stop(&d), 0);
}

Test(daemon, an_oversized_message_is_dropped_and_service_goes_on, .timeout = 60)
{
    th_daemon d;
    cr_assert_eq(
        th_daemon_start(&d,
                        (const char *[]){"--kernels", CUMOD_TEST_KERNEL_DIR,
                                         "--max-message", "1024", NULL},
                        NULL),
        0);
    nng_socket s;
    nng_msg *m;
    cr_assert_eq(nng_req0_open(&s), 0);
    nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 1000);
    nng_socket_set_ms(s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    cr_assert_eq(nng_dial(s, d.url, NULL, 0), 0);
    nng_msg_alloc(&m, 8192);
    memset(nng_msg_body(m), 0, 8192);
    cr_assert_eq(nng_sendmsg(s, m, 0), 0);
    cr_expect_neq(nng_recvmsg(s, &m, 0), 0, "an 8 KiB request was answered");
    nng_close(s);

    cumod_client *c;
    cumod_device_info di;
    cr_assert_eq(cumod_open(d.url, 5000, &c), CUMOD_OK);
    cr_expect_eq(cumod_device_info_get(c, &di), CUMOD_OK, "%s",
                 cumod_last_detail());
    cumod_close(c);
    cr_expect_eq(th_daemon_stop(&d), 0);
}

typedef struct hammer {
    cumod_client *c;
    int ok;
} hammer;

static void *
hammer_run(void *arg)
{
    hammer *h = arg;
    for (int i = 0; i < 50; i++) {
        cumod_device_info di;
        if (cumod_device_info_get(h->c, &di) == CUMOD_OK && di.total_memory > 0)
            h->ok++;
    }
    return NULL;
}

Test(libcumod, one_client_serves_many_threads_at_once, .timeout = 60)
{
    th_daemon d;
    cumod_client *c;
    pthread_t t[8];
    hammer h[8];

    cr_assert_eq(th_daemon_start(&d, kargs, NULL), 0);
    cr_assert_eq(cumod_open(d.url, 10000, &c), CUMOD_OK);
    for (int i = 0; i < 8; i++) {
        h[i] = (hammer){.c = c};
        pthread_create(&t[i], NULL, hammer_run, &h[i]);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        cr_expect_eq(h[i].ok, 50, "thread %d: %d of 50 answered", i, h[i].ok);
    }
    cumod_close(c);
    cr_expect_eq(th_daemon_stop(&d), 0);
}

Test(libcumod, errors_carry_a_detail_message)
{
    cumod_client *c = NULL;
    int rv = cumod_open("ipc:///nonexistent/dir/x.sock", 1000, &c);
    cr_expect_eq(rv, CUMOD_ECONNREFUSED);
    cr_expect_null(c, "no client on failure");
    cr_expect(strstr(cumod_last_detail(), "ipc:///nonexistent/dir/x.sock"),
              "%s", cumod_last_detail());
    cr_expect_eq(cumod_open("ipc:///x", -1, &c), CUMOD_EINVAL);
}
