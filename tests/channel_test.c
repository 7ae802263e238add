/* SPDX-License-Identifier: MIT */
/*
 * The front-executor channel (daemon/common/channel.c): packets of every size,
 * with and without a command's own descriptor, arrive whole, and a payload
 * too big for a packet travels in a memfd beside that descriptor.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/channel.h"

static void
ch_roundtrip(size_t len, int with_fd)
{
    int sv[2], img = -1;
    cr_assert_eq(cumod__chan_pair(sv), 0);
    unsigned char *payload = malloc(len + 1);
    for (size_t i = 0; i < len; i++)
        payload[i] = (unsigned char)(i * 31 + 7);
    if (with_fd) {
        img = memfd_create("ch-test-image", MFD_CLOEXEC);
        cr_assert_eq(write(img, "image", 5), 5);
    }
    cumod_chan_hdr h = {.op = 7, .seq = 42};
    cr_assert_eq(cumod__chan_send_any_fd(sv[0], &h, payload, len, img), 0,
                 "send %zu bytes", len);
    char *buf = malloc(CUMOD_CHAN_MAX);
    int fds[2];
    long n = cumod__chan_recv2(sv[1], buf, CUMOD_CHAN_MAX, fds, 0);
    cr_assert_geq(n, (long)sizeof(cumod_chan_hdr), "%zu bytes: %ld", len, n);
    cumod_chan_hdr got;
    memcpy(&got, buf, sizeof(got));
    cr_expect_eq(got.seq, 42);
    int big = sizeof(h) + len > CUMOD_CHAN_MAX;
    cr_expect_eq((got.flags & CUMOD_CHAN_F_MEMFD) != 0, big);
    cr_expect_eq((got.flags & CUMOD_CHAN_F_FD2) != 0, big && with_fd);
    int memfd = big ? fds[0] : -1;
    int cmd = big ? (with_fd ? fds[1] : -1) : fds[0];
    cr_expect_eq(cmd >= 0, with_fd, "the command's descriptor came");
    if (with_fd && cmd >= 0) {
        struct stat a, b;
        fstat(img, &a);
        fstat(cmd, &b);
        cr_expect(a.st_ino == b.st_ino && a.st_dev == b.st_dev,
                  "the same file");
        close(cmd);
    }
    cumod_chan_payload pl;
    cr_assert_eq(cumod__chan_payload(buf, (size_t)n, memfd, &pl), 0);
    cr_expect_eq(pl.len, len);
    cr_expect(len == 0 || memcmp(pl.data, payload, len) == 0,
              "%zu bytes arrived whole", len);
    cumod__chan_payload_fini(&pl);
    if (img >= 0)
        close(img);
    free(buf);
    free(payload);
    close(sv[0]);
    close(sv[1]);
}

Test(channel, payloads_of_every_size_with_and_without_a_descriptor)
{
    static const size_t sizes[] = {0,
                                   1,
                                   4096,
                                   CUMOD_CHAN_MAX - 64,
                                   CUMOD_CHAN_MAX,
                                   3 * CUMOD_CHAN_MAX + 5};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        for (int fd = 0; fd < 2; fd++)
            ch_roundtrip(sizes[i], fd);
}

static int
ch_open_fds(void)
{
    int n = 0;
    for (int i = 0; i < 4096; i++)
        n += fcntl(i, F_GETFD) != -1;
    return n;
}

Test(channel, a_one_descriptor_receiver_closes_a_second_one)
{
    int sv[2];
    cr_assert_eq(cumod__chan_pair(sv), 0);
    int img = memfd_create("ch-test-image", MFD_CLOEXEC);
    size_t len = 2 * CUMOD_CHAN_MAX;
    char *payload = calloc(1, len), *buf = malloc(CUMOD_CHAN_MAX);
    cumod_chan_hdr h = {.op = 1};
    cr_assert_eq(cumod__chan_send_any_fd(sv[0], &h, payload, len, img), 0);
    int before = ch_open_fds();
    int fd = -1;
    long n = cumod__chan_recv(sv[1], buf, CUMOD_CHAN_MAX, &fd);
    cr_assert_gt(n, 0);
    cr_expect_geq(fd, 0, "the payload's memfd");
    cr_expect_eq(ch_open_fds(), before + 1,
                 "the memfd came; the second descriptor was closed");
    close(fd);
    close(img);
    close(sv[0]);
    close(sv[1]);
    free(payload);
    free(buf);
}
