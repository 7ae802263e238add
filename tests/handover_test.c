/* SPDX-License-Identifier: MIT */
/*
 * Descriptors handed over: a client gives cumodd its ring's and segments'
 * memory as sealed memfds on the datagram socket its Hello names
 * (daemon/front/transport/fdpass.c), so a cumodd of another user (the service's
 * own) maps what it could not open by name. Against cumodd as a real process on
 * the fake driver: libcumod takes this way by default and stays on the
 * fast path; a token works only for the process that handed it over;
 * memory not sealed, a doorbell that is no pipe, garbage and floods on
 * the socket are refused, closed and bounded while others are served.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cumod.pb-c.h"
#include "cumod/cumod.h"
#include "cumod_ring.h"
#include "fixture.h"
#include "raw_req.h"

TH_SUITE_DRIVER(0);

#define RQ ((uint64_t)64 << 10)
#define RSIZE (CUMOD_RING_HDR_SIZE + 2 * RQ)

static void
ho_start(th_env *t, const char *const *extra)
{
    static const char *const kernels[] = {"vadd", "empty", NULL};
    th_env_init(t, kernels);
    th_env_start(t, extra, NULL);
}

/* --- a raw client: nng, and descriptors handed over by hand ------------- */

typedef struct raw {
    nng_socket s;
    uint64_t id;
    char fd_socket[108];
} raw;

static Cumod__Reply *
raw_call(raw *r, Cumod__Request *req)
{
    return th_raw_call(r->s, &r->id, req);
}

#define rcode th_rcode
#define rmsg th_rmsg

/* Connects and says Hello: r->fd_socket is where cumodd takes handovers. */
static void
raw_connect(raw *r, const char *url)
{
    memset(r, 0, sizeof(*r));
    Cumod__Reply *rep = th_raw_connect(&r->s, &r->id, url);
    cr_assert_not_null(rep, "no answer from cumodd");
    cr_assert_eq(rcode(rep), 0, "hello: %s", rmsg(rep));
    cr_assert(rep->hello != NULL && rep->hello->fd_socket != NULL &&
                  rep->hello->fd_socket[0] == '/',
              "cumodd names a socket for handovers in its Hello");
    snprintf(r->fd_socket, sizeof(r->fd_socket), "%s", rep->hello->fd_socket);
    cumod__reply__free_unpacked(rep, NULL);
}

/* One datagram to path: len bytes of msg and n descriptors; 0 or errno. */
static int
send_fds(const char *path, const void *msg, size_t len, const int *fds, int n)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    union {
        char c[CMSG_SPACE(sizeof(int) * 16)];
        struct cmsghdr align;
    } ctl;
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
    memset(&ctl, 0, sizeof(ctl));
    struct iovec iov = {.iov_base = (void *)msg, .iov_len = len};
    struct msghdr m = {.msg_name = &a,
                       .msg_namelen = sizeof(a),
                       .msg_iov = &iov,
                       .msg_iovlen = 1};
    if (n > 0) {
        m.msg_control = ctl.c;
        m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)n);
    }
    int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int rv = sendmsg(s, &m, 0) == (ssize_t)len ? 0 : errno;
    close(s);
    return rv;
}

/* A handover as libcumod makes it: "CMFD", version 1, the token. */
static int
hand_over(const char *path, const uint8_t token[16], const int *fds, int n)
{
    uint8_t msg[21];
    memcpy(msg, "CMFD", 4);
    msg[4] = 1;
    memcpy(msg + 5, token, 16);
    return send_fds(path, msg, sizeof(msg), fds, n);
}

/* A ring's memory as a memfd with a valid header (sealed or not), and a
 * pipe for its doorbell. */
typedef struct hring {
    int mem, pipe[2];
    uint8_t *map;
} hring;

static void
hring_make(hring *h, int sealed)
{
    h->mem = memfd_create("handover-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    cr_assert_geq(h->mem, 0, "memfd_create: %s", strerror(errno));
    cr_assert_eq(ftruncate(h->mem, (off_t)RSIZE), 0);
    if (sealed)
        cr_assert_eq(fcntl(h->mem, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW),
                     0);
    h->map = mmap(NULL, RSIZE, PROT_READ | PROT_WRITE, MAP_SHARED, h->mem, 0);
    cr_assert_neq(h->map, MAP_FAILED);
    cumod_ring_hdr *hd = (cumod_ring_hdr *)h->map;
    hd->magic = CUMOD_RING_MAGIC;
    hd->version = CUMOD_RING_VERSION;
    hd->hdr_size = CUMOD_RING_HDR_SIZE;
    hd->sq_size = RQ;
    hd->cq_size = RQ;
    cr_assert_eq(pipe2(h->pipe, O_NONBLOCK | O_CLOEXEC), 0);
}

static void
hring_free(hring *h)
{
    munmap(h->map, RSIZE);
    close(h->mem);
    close(h->pipe[0]);
    close(h->pipe[1]);
}

static Cumod__Reply *
raw_open_ring_token(raw *r, const uint8_t token[16])
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__OpenRing o = CUMOD__OPEN_RING__INIT;
    o.size = RSIZE;
    o.fd_token.data = (uint8_t *)token;
    o.fd_token.len = 16;
    req.body_case = CUMOD__REQUEST__BODY_OPEN_RING;
    req.open_ring = &o;
    return raw_call(r, &req);
}

static void
token_fill(uint8_t token[16], int seed)
{
    for (int i = 0; i < 16; i++)
        token[i] = (uint8_t)(seed * 31 + i * 7 + 1);
}

/* Descriptors open in process pid. */
static int
fd_count(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    int n = 0;
    cr_assert_not_null(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Descriptors of process pid whose link starts with prefix. */
static int
fd_links(pid_t pid, const char *prefix)
{
    char path[64], link[400], target[300];
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    int n = 0;
    cr_assert_not_null(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(link, sizeof(link), "%s/%s", path, e->d_name);
        ssize_t k = readlink(link, target, sizeof(target) - 1);
        if (k <= 0)
            continue;
        target[k] = '\0';
        if (strncmp(target, prefix, strlen(prefix)) == 0) {
            cr_log_info("cumodd holds %s", target);
            n++;
        }
    }
    closedir(d);
    return n;
}

/* A vector add through client c: 0 when right. */
static int
vadd_ok(cumod_client *c)
{
    enum { N = 4096 };
    static float a[N], b[N], out[N];
    cumod_buffer da, db, dc;
    for (int i = 0; i < N; i++) {
        a[i] = (float)i;
        b[i] = 2.0f * (float)i;
    }
    if (cumod_buffer_alloc(c, sizeof(a), &da) ||
        cumod_buffer_alloc(c, sizeof(a), &db) ||
        cumod_buffer_alloc(c, sizeof(a), &dc) ||
        cumod_buffer_write(c, da, 0, a, sizeof(a), 0) ||
        cumod_buffer_write(c, db, 0, b, sizeof(b), 0))
        return -1;
    cumod_arg args[] = {cumod_arg_buffer(da, 0), cumod_arg_buffer(db, 0),
                        cumod_arg_buffer(dc, 0), cumod_arg_i32(N)};
    cumod_launch_params p = {.kernel = "vadd:vadd",
                             .grid = {N / 256, 1, 1},
                             .block = {256, 1, 1},
                             .nargs = 4,
                             .args = args};
    if (cumod_launch(c, &p, NULL, NULL) ||
        cumod_buffer_read(c, dc, 0, out, sizeof(out), 0))
        return -1;
    (void)cumod_buffer_free(c, da);
    (void)cumod_buffer_free(c, db);
    (void)cumod_buffer_free(c, dc);
    return 0;
}

/* --- libcumod takes this way ------------------------------------------- */

Test(handover, libcumod_hands_its_ring_and_segments_over_and_leaves_no_names,
     .timeout = 60)
{
    th_env t;
    ho_start(&t, NULL);
    cr_assert(cumod_fast_path(t.c), "the client is on the fast path");
    /* A segment of its own, and a large transfer (the staging segment). */
    cumod_segment *seg = NULL;
    cr_assert_eq(cumod_segment_create(t.c, 1 << 20, &seg), CUMOD_OK, "%s",
                 cumod_last_detail());
    size_t n = (size_t)4 << 20;
    uint8_t *in = malloc(n), *back = malloc(n);
    for (size_t i = 0; i < n; i++)
        in[i] = (uint8_t)(i * 13 + 5);
    cumod_buffer b;
    cr_assert_eq(cumod_buffer_alloc(t.c, n, &b), CUMOD_OK);
    cr_assert_eq(cumod_buffer_write(t.c, b, 0, in, n, 0), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_buffer_read(t.c, b, 0, back, n, 0), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(memcmp(in, back, n), 0, "4 MiB came back as they went");
    cr_assert(cumod_fast_path(t.c), "still on the fast path");
    /* cumodd holds them as this process's memfds, not names in /dev/shm. */
    cr_assert_geq(fd_links(t.d.pid, "/memfd:cumod-ring"), 1,
                  "cumodd holds the ring's memfd");
    cr_assert_geq(fd_links(t.d.pid, "/memfd:cumod-segment"), 2,
                  "cumodd holds both segments' memfds");
    cr_assert_eq(fd_links(t.d.pid, "/dev/shm/cumod"), 0,
                 "cumodd holds nothing opened by name");
    cr_assert_eq(cumod_segment_destroy(t.c, seg), CUMOD_OK);
    free(in);
    free(back);
    th_env_stop(&t);
}

/* --- what a token is worth -------------------------------------------- */

Test(handover, an_unknown_token_is_refused_and_says_where_to_hand_over,
     .timeout = 60)
{
    th_env t;
    raw r;
    uint8_t token[16];
    ho_start(&t, NULL);
    raw_connect(&r, t.d.url);
    token_fill(token, 1);
    Cumod__Reply *rep = raw_open_ring_token(&r, token);
    cr_assert_eq(rcode(rep), CUMOD_ENOENT, "%s", rmsg(rep));
    cr_assert(strstr(rmsg(rep), r.fd_socket) != NULL, "%s", rmsg(rep));
    cumod__reply__free_unpacked(rep, NULL);
    nng_close(r.s);
    th_env_stop(&t);
}

Test(handover, a_token_is_taken_only_by_the_process_that_handed_it_over,
     .timeout = 60)
{
    th_env t;
    raw r;
    hring h;
    uint8_t token[16];
    ho_start(&t, NULL);
    raw_connect(&r, t.d.url);
    hring_make(&h, 1);
    token_fill(token, 2);
    /* Another process hands it over; this one names the token. */
    pid_t pid = fork();
    if (pid == 0)
        _exit(hand_over(r.fd_socket, token, (int[]){h.mem, h.pipe[0]}, 2));
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child handed over");
    Cumod__Reply *rep = raw_open_ring_token(&r, token);
    cr_assert_eq(rcode(rep), CUMOD_EPERM, "%s", rmsg(rep));
    cr_assert(strstr(rmsg(rep), "handed over by pid") != NULL, "%s", rmsg(rep));
    cumod__reply__free_unpacked(rep, NULL);
    /* Handed over by this process, the same memory opens. */
    token_fill(token, 3);
    cr_assert_eq(hand_over(r.fd_socket, token, (int[]){h.mem, h.pipe[0]}, 2),
                 0);
    rep = raw_open_ring_token(&r, token);
    cr_assert_eq(rcode(rep), 0, "%s", rmsg(rep));
    cumod__reply__free_unpacked(rep, NULL);
    /* A token serves once. */
    rep = raw_open_ring_token(&r, token);
    cr_assert_eq(rcode(rep), CUMOD_ENOENT, "%s", rmsg(rep));
    cumod__reply__free_unpacked(rep, NULL);
    nng_close(r.s);
    hring_free(&h);
    th_env_stop(&t);
}

Test(handover, memory_not_sealed_and_a_doorbell_that_is_no_pipe_are_refused,
     .timeout = 60)
{
    th_env t;
    raw r;
    hring h, sealed;
    uint8_t token[16];
    ho_start(&t, NULL);
    raw_connect(&r, t.d.url);
    /* Not sealed: the client could shrink it under cumodd. */
    hring_make(&h, 0);
    token_fill(token, 4);
    cr_assert_eq(hand_over(r.fd_socket, token, (int[]){h.mem, h.pipe[0]}, 2),
                 0);
    Cumod__Reply *rep = raw_open_ring_token(&r, token);
    cr_assert_eq(rcode(rep), CUMOD_EPERM, "%s", rmsg(rep));
    cr_assert(strstr(rmsg(rep), "sealed") != NULL, "%s", rmsg(rep));
    cumod__reply__free_unpacked(rep, NULL);
    /* The doorbell: the memory itself, a regular file. */
    hring_make(&sealed, 1);
    token_fill(token, 5);
    cr_assert_eq(
        hand_over(r.fd_socket, token, (int[]){sealed.mem, sealed.mem}, 2), 0);
    rep = raw_open_ring_token(&r, token);
    cr_assert_eq(rcode(rep), CUMOD_EPERM, "%s", rmsg(rep));
    cr_assert(strstr(rmsg(rep), "doorbell") != NULL, "%s", rmsg(rep));
    cumod__reply__free_unpacked(rep, NULL);
    /* One descriptor where a ring takes two. */
    token_fill(token, 6);
    cr_assert_eq(hand_over(r.fd_socket, token, (int[]){sealed.mem}, 1), 0);
    rep = raw_open_ring_token(&r, token);
    cr_assert_eq(rcode(rep), CUMOD_EINVAL, "%s", rmsg(rep));
    cumod__reply__free_unpacked(rep, NULL);
    /* A token of the wrong length. */
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__OpenRing o = CUMOD__OPEN_RING__INIT;
    o.size = RSIZE;
    o.fd_token.data = token;
    o.fd_token.len = 5;
    req.body_case = CUMOD__REQUEST__BODY_OPEN_RING;
    req.open_ring = &o;
    rep = raw_call(&r, &req);
    cr_assert_eq(rcode(rep), CUMOD_EINVAL, "%s", rmsg(rep));
    cumod__reply__free_unpacked(rep, NULL);
    /* A segment not sealed either. */
    token_fill(token, 7);
    cr_assert_eq(hand_over(r.fd_socket, token, (int[]){h.mem}, 1), 0);
    Cumod__MapSegment ms = CUMOD__MAP_SEGMENT__INIT;
    ms.size = RSIZE;
    ms.fd_token.data = token;
    ms.fd_token.len = 16;
    Cumod__Request mreq = CUMOD__REQUEST__INIT;
    mreq.body_case = CUMOD__REQUEST__BODY_MAP_SEGMENT;
    mreq.map_segment = &ms;
    rep = raw_call(&r, &mreq);
    cr_assert_eq(rcode(rep), CUMOD_EPERM, "%s", rmsg(rep));
    cr_assert(strstr(rmsg(rep), "sealed") != NULL, "%s", rmsg(rep));
    cumod__reply__free_unpacked(rep, NULL);
    /* Sealed against writing too (no writable mapping can be made): a
     * ring and a segment refused, not a crash. */
    hring ro;
    hring_make(&ro, 1);
    munmap(ro.map, RSIZE); /* F_SEAL_WRITE needs no shared mapping */
    ro.map = NULL;
    cr_assert_eq(fcntl(ro.mem, F_ADD_SEALS, F_SEAL_WRITE), 0, "%s",
                 strerror(errno));
    token_fill(token, 10);
    cr_assert_eq(hand_over(r.fd_socket, token, (int[]){ro.mem, ro.pipe[0]}, 2),
                 0);
    rep = raw_open_ring_token(&r, token);
    cr_assert_eq(rcode(rep), CUMOD_EPERM, "%s", rmsg(rep));
    cumod__reply__free_unpacked(rep, NULL);
    token_fill(token, 11);
    cr_assert_eq(hand_over(r.fd_socket, token, (int[]){ro.mem}, 1), 0);
    rep = raw_call(&r, &mreq);
    cr_assert_neq(rcode(rep), 0, "a segment cumodd cannot write is refused");
    cr_assert_neq(rcode(rep), -1, "and answered: %s", rmsg(rep));
    cumod__reply__free_unpacked(rep, NULL);
    hring_free(&ro);
    /* Sealed, it maps. */
    token_fill(token, 8);
    cr_assert_eq(hand_over(r.fd_socket, token, (int[]){sealed.mem}, 1), 0);
    rep = raw_call(&r, &mreq);
    cr_assert_eq(rcode(rep), 0, "%s", rmsg(rep));
    cumod__reply__free_unpacked(rep, NULL);
    cr_assert_eq(vadd_ok(t.c), 0, "another client is served: %s",
                 cumod_last_detail());
    nng_close(r.s);
    hring_free(&h);
    hring_free(&sealed);
    th_env_stop(&t);
}

/* The value of metric series prefix ("name{labels} "), or -1. */
static double
metric(int port, const char *prefix)
{
    char *m = th_metrics_get(port);
    cr_assert_not_null(m, "no answer from --metrics-listen");
    const char *at = strstr(m, prefix);
    double v = at != NULL ? strtod(at + strlen(prefix), NULL) : -1;
    free(m);
    return v;
}

Test(handover, garbage_and_floods_are_closed_bounded_and_others_served,
     .timeout = 120)
{
    th_env t;
    raw r;
    hring h;
    uint8_t token[16];
    char listen[64];
    int port = th_free_port();
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
    ho_start(&t, (const char *const[]){"--metrics-listen", listen, NULL});
    raw_connect(&r, t.d.url);
    hring_make(&h, 1);
    int base = fd_count(t.d.pid);
    /* Garbage: no magic, a short one, too many descriptors, none. */
    int many[12];
    for (int i = 0; i < 12; i++)
        many[i] = h.mem;
    for (int i = 0; i < 200; i++) {
        (void)send_fds(r.fd_socket, "nonsense, not a handover", 24,
                       (int[]){h.mem, h.pipe[0]}, 2);
        (void)send_fds(r.fd_socket, "CMFD", 4, (int[]){h.mem}, 1);
        token_fill(token, 100 + i);
        uint8_t msg[21];
        memcpy(msg, "CMFD", 4);
        msg[4] = 1;
        memcpy(msg + 5, token, 16);
        (void)send_fds(r.fd_socket, msg, sizeof(msg), many, 12);
        (void)send_fds(r.fd_socket, msg, sizeof(msg), NULL, 0);
    }
    /* A flood of well-formed handovers never taken: 2,000 of them. */
    for (int i = 0; i < 2000; i++) {
        token_fill(token, 1000 + i);
        if (hand_over(r.fd_socket, token, (int[]){h.mem, h.pipe[0]}, 2) != 0)
            th_sleep_ms(1); /* its queue is full: let cumodd read */
    }
    /* cumodd read them all, closed the garbage and keeps a bounded
     * number of the flood's (256 handovers of one user, 2 each). */
    th_sleep_ms(300);
    cr_assert_eq(vadd_ok(t.c), 0, "another client is served: %s",
                 cumod_last_detail());
    int now = fd_count(t.d.pid);
    cr_assert_leq(now, base + 2 * 256 + 16,
                  "cumodd holds %d descriptors, %d before the flood", now,
                  base);
    /* Counted for the operator: the 800 datagrams of garbage refused (no
     * magic, too short, 12 descriptors, none), the flood's 2,000 received
     * and all but 256 of them dropped. */
    double refused = metric(port, "cumod_handovers_total{result=\"refused\"} ");
    double received =
        metric(port, "cumod_handovers_total{result=\"received\"} ");
    double dropped = metric(port, "cumod_handovers_total{result=\"dropped\"} ");
    cr_log_info("handovers: %.0f received, %.0f refused, %.0f dropped",
                received, refused, dropped);
    /* t.c's own (its ring) came this way too, and were taken. */
    cr_assert_eq(refused, 800, "every datagram of garbage was refused");
    cr_assert(received >= 2000 && received <= 2004,
              "every handover of the flood was read (%.0f)", received);
    cr_assert_geq(dropped, 2000 - 256, "the flood's evicted its own");
    /* And a handover made now still works. */
    token_fill(token, 9);
    cr_assert_eq(hand_over(r.fd_socket, token, (int[]){h.mem, h.pipe[0]}, 2),
                 0);
    Cumod__Reply *rep = raw_open_ring_token(&r, token);
    cr_assert_eq(rcode(rep), 0, "%s", rmsg(rep));
    cumod__reply__free_unpacked(rep, NULL);
    cumod_client *c = NULL;
    cr_assert_eq(cumod_open(t.d.url, 10000, &c), CUMOD_OK);
    cr_assert(cumod_fast_path(c), "a new client is on the fast path");
    cumod_close(c);
    nng_close(r.s);
    hring_free(&h);
    th_env_stop(&t);
}
