/* SPDX-License-Identifier: MIT */
/*
 * The hostile client of shm_test: a process of its own (run as another
 * user when the suite runs as root) that makes a ring or a segment, hands
 * it to cumodd, and truncates it under the daemon. It speaks the protocol
 * raw over nng, one step at a time as the suite asks, so that the suite
 * can hold the daemon's copy in the fake driver between two steps.
 *
 * Usage: hostile_client URL. Each line on stdin is a command, answered by
 * one line on stdout: the cumod error (0: done, -1: no answer), a space,
 * and the daemon's message or what was made. Commands: ring (make a ring
 * and open it: answers its name), reopen, cut (truncate to 0 bytes), bell,
 * hello, seg (make a segment, map it, allocate a buffer: answers its
 * name), copy to|from, send to (send the copy, answer once sent), recv
 * (its answer), grow (back to the mapped size), unmap, quit. At the end of
 * stdin it removes what it made and exits 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cumod.pb-c.h"
#include "cumod_ring.h"

#define RQ ((uint64_t)64 << 10)
#define RSIZE (CUMOD_RING_HDR_SIZE + 2 * RQ)
enum { SEG = 1 << 20 };

typedef struct hostile {
    nng_socket s;
    uint64_t id;
    int fd, bell_fd;
    size_t size;
    char name[96], bell[128];
    uint64_t seg, buf;
} hostile;

static int
hostile_send(hostile *h, Cumod__Request *req)
{
    req->version = 1;
    req->id = ++h->id;
    size_t n = cumod__request__get_packed_size(req);
    uint8_t *buf = malloc(n ? n : 1);
    if (buf == NULL)
        return NNG_ENOMEM;
    cumod__request__pack(req, buf);
    int rv = nng_send(h->s, buf, n, 0);
    free(buf);
    return rv;
}

/* Receives an answer: its code, its message in msg (one line); the reply
 * in *out when out is given and it succeeded (the caller frees it). */
static int
hostile_recv(hostile *h, Cumod__Reply **out, char *msg, size_t cap)
{
    void *got;
    size_t len;
    Cumod__Reply *rep = NULL;
    if (nng_recv(h->s, &got, &len, NNG_FLAG_ALLOC) == 0) {
        rep = cumod__reply__unpack(NULL, len, got);
        nng_free(got, len);
    }
    int code = rep == NULL ? -1 : rep->status ? rep->status->code : 0;
    snprintf(msg, cap, "%s",
             rep == NULL                           ? "no answer"
             : rep->status && rep->status->message ? rep->status->message
                                                   : "");
    for (char *p = msg; *p; p++)
        if (*p == '\n')
            *p = ' ';
    if (out != NULL && code == 0)
        *out = rep;
    else if (rep != NULL)
        cumod__reply__free_unpacked(rep, NULL);
    return code;
}

static int
hostile_call(hostile *h, Cumod__Request *req, Cumod__Reply **out, char *msg,
             size_t cap)
{
    if (hostile_send(h, req) != 0) {
        snprintf(msg, cap, "send failed");
        return -1;
    }
    return hostile_recv(h, out, msg, cap);
}

/* Sends req and answers the command with the daemon's answer. */
static void
hostile_answer(hostile *h, Cumod__Request *req)
{
    char msg[1024];
    int code = hostile_call(h, req, NULL, msg, sizeof(msg));
    printf("%d %s\n", code, msg);
}

/* A shm object of len bytes filled with fill, made by this process (so
 * this user's, as cumodd wants). */
static int
hostile_shm(hostile *h, const char *what, size_t len, int fill)
{
    snprintf(h->name, sizeof(h->name), "/cumod-shmtest-%s-%d", what,
             (int)getpid());
    shm_unlink(h->name);
    h->fd = shm_open(h->name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (h->fd < 0 || ftruncate(h->fd, (off_t)len) != 0)
        return -1;
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, h->fd, 0);
    if (m == MAP_FAILED)
        return -1;
    memset(m, fill, len);
    if (len == RSIZE) {
        cumod_ring_hdr *r = m;
        r->magic = CUMOD_RING_MAGIC;
        r->version = CUMOD_RING_VERSION;
        r->hdr_size = CUMOD_RING_HDR_SIZE;
        r->sq_size = RQ;
        r->cq_size = RQ;
    }
    munmap(m, len);
    h->size = len;
    return 0;
}

static int
hostile_open_ring(hostile *h, char *msg, size_t cap)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__OpenRing orq = CUMOD__OPEN_RING__INIT;
    orq.name = h->name;
    orq.size = RSIZE;
    req.body_case = CUMOD__REQUEST__BODY_OPEN_RING;
    req.open_ring = &orq;
    return hostile_call(h, &req, NULL, msg, cap);
}

static void
hostile_ring(hostile *h)
{
    char msg[1024];
    if (hostile_shm(h, "ring", RSIZE, 0) != 0) {
        printf("-1 shm: %s\n", strerror(errno));
        return;
    }
    snprintf(h->bell, sizeof(h->bell), "/dev/shm%s.bell", h->name);
    unlink(h->bell);
    if (mkfifo(h->bell, 0600) != 0 ||
        (h->bell_fd = open(h->bell, O_RDWR | O_NONBLOCK)) < 0) {
        printf("-1 bell: %s\n", strerror(errno));
        return;
    }
    int code = hostile_open_ring(h, msg, sizeof(msg));
    printf("%d %s\n", code, code == 0 ? h->name : msg);
}

static void
hostile_seg(hostile *h)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__MapSegment m = CUMOD__MAP_SEGMENT__INIT;
    Cumod__AllocBuffer a = CUMOD__ALLOC_BUFFER__INIT;
    Cumod__Reply *rep = NULL;
    if (hostile_shm(h, "seg", SEG, 0x5a) != 0) {
        printf("-1 shm: %s\n", strerror(errno));
        return;
    }
    char msg[1024];
    m.name = h->name;
    m.size = SEG;
    req.body_case = CUMOD__REQUEST__BODY_MAP_SEGMENT;
    req.map_segment = &m;
    int code = hostile_call(h, &req, &rep, msg, sizeof(msg));
    if (code == 0) {
        h->seg = rep->segment->handle;
        cumod__reply__free_unpacked(rep, NULL);
        cumod__request__init(&req);
        a.size = SEG;
        req.body_case = CUMOD__REQUEST__BODY_ALLOC_BUFFER;
        req.alloc_buffer = &a;
        rep = NULL;
        if ((code = hostile_call(h, &req, &rep, msg, sizeof(msg))) == 0) {
            h->buf = rep->buffer->handle;
            cumod__reply__free_unpacked(rep, NULL);
        }
    }
    printf("%d %s\n", code, code == 0 ? h->name : msg);
}

/* A Copy request of the whole segment, answered once complete. */
static void
hostile_copy_req(hostile *h, Cumod__Request *req, Cumod__Copy *c,
                 const char *dir)
{
    cumod__request__init(req);
    cumod__copy__init(c);
    c->kind = strcmp(dir, "from") == 0 ? CUMOD__COPY_KIND__COPY_TO_HOST
                                       : CUMOD__COPY_KIND__COPY_TO_DEVICE;
    c->segment = h->seg;
    c->buffer = h->buf;
    c->length = SEG;
    c->when = CUMOD__REPLY_WHEN__REPLY_WHEN_COMPLETE;
    req->body_case = CUMOD__REQUEST__BODY_COPY;
    req->copy = c;
}

static void
hostile_do(hostile *h, const char *cmd, const char *arg)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__Copy cp;
    if (strcmp(cmd, "ring") == 0) {
        hostile_ring(h);
    } else if (strcmp(cmd, "reopen") == 0) {
        char msg[1024];
        int code = hostile_open_ring(h, msg, sizeof(msg));
        printf("%d %s\n", code, msg);
    } else if (strcmp(cmd, "cut") == 0 || strcmp(cmd, "grow") == 0) {
        off_t len = strcmp(cmd, "cut") == 0 ? 0 : (off_t)h->size;
        int rv = ftruncate(h->fd, len);
        printf("%d %s\n", rv, rv ? strerror(errno) : cmd);
    } else if (strcmp(cmd, "bell") == 0) {
        char b = 1;
        int rv = write(h->bell_fd, &b, 1) == 1 ? 0 : -1;
        printf("%d rang\n", rv);
    } else if (strcmp(cmd, "hello") == 0) {
        Cumod__Hello hl = CUMOD__HELLO__INIT;
        req.body_case = CUMOD__REQUEST__BODY_HELLO;
        req.hello = &hl;
        hostile_answer(h, &req);
    } else if (strcmp(cmd, "seg") == 0) {
        hostile_seg(h);
    } else if (strcmp(cmd, "copy") == 0) {
        hostile_copy_req(h, &req, &cp, arg);
        hostile_answer(h, &req);
    } else if (strcmp(cmd, "send") == 0) {
        hostile_copy_req(h, &req, &cp, arg);
        printf("%d sent\n", hostile_send(h, &req) == 0 ? 0 : -1);
    } else if (strcmp(cmd, "recv") == 0) {
        char msg[1024];
        int code = hostile_recv(h, NULL, msg, sizeof(msg));
        printf("%d %s\n", code, msg);
    } else if (strcmp(cmd, "unmap") == 0) {
        Cumod__UnmapSegment um = CUMOD__UNMAP_SEGMENT__INIT;
        um.handle = h->seg;
        req.body_case = CUMOD__REQUEST__BODY_UNMAP_SEGMENT;
        req.unmap_segment = &um;
        hostile_answer(h, &req);
    } else {
        printf("-1 unknown command %s\n", cmd);
    }
}

/* Dials url and says hello; a connection made just after another peer
 * left may be dropped by nng 1.5.2's listener (nng #1518): dials again
 * then, as libcumod. */
static int
hostile_connect(hostile *h, const char *url)
{
    for (int tries = 0; tries < 5; tries++) {
        Cumod__Request req = CUMOD__REQUEST__INIT;
        Cumod__Hello hl = CUMOD__HELLO__INIT;
        char msg[256];
        if (tries > 0) {
            nng_close(h->s);
            usleep(200 * 1000);
        }
        if (nng_req0_open(&h->s) != 0)
            return -1;
        nng_socket_set_ms(h->s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
        nng_socket_set_ms(h->s, NNG_OPT_RECVTIMEO, 2000);
        if (nng_dial(h->s, url, NULL, 0) != 0)
            continue;
        req.body_case = CUMOD__REQUEST__BODY_HELLO;
        req.hello = &hl;
        if (hostile_call(h, &req, NULL, msg, sizeof(msg)) == 0) {
            nng_socket_set_ms(h->s, NNG_OPT_RECVTIMEO, 20000);
            return 0;
        }
    }
    nng_close(h->s);
    return -1;
}

int
main(int argc, char **argv)
{
    hostile h = {.fd = -1, .bell_fd = -1};
    char line[256];

    if (argc < 2) {
        fprintf(stderr, "usage: hostile_client URL\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (hostile_connect(&h, argv[1]) != 0) {
        fprintf(stderr, "hostile_client: no answer from %s\n", argv[1]);
        return 4;
    }
    while (fgets(line, sizeof(line), stdin) != NULL) {
        char cmd[32] = "", arg[32] = "";
        if (sscanf(line, "%31s %31s", cmd, arg) < 1)
            continue;
        if (strcmp(cmd, "quit") == 0)
            break;
        hostile_do(&h, cmd, arg);
        fflush(stdout);
    }
    nng_close(h.s);
    if (h.bell_fd >= 0)
        close(h.bell_fd);
    if (h.bell[0])
        unlink(h.bell);
    if (h.fd >= 0)
        close(h.fd);
    if (h.name[0])
        shm_unlink(h.name);
    return 0;
}
