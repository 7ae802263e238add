/* SPDX-License-Identifier: MIT */
/*
 * The fast path (proto/cumod_ring.h): a shared-memory ring beside the nng
 * connection, set up over it by an OpenRing request. One call at a time
 * uses the ring (the first thread to take it); others, large messages and
 * requests whose replies can be large go over nng as before.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "client_internal.h"
#include "cumod_ring.h"

/* Each ring's size: a batch of 256 launches is about 20 KiB, and a reply
 * (replies that can be large never come this way) a few dozen bytes. */
#define RING_SQ ((uint64_t)256 << 10)
#define RING_CQ ((uint64_t)256 << 10)
/* What a message may take of its ring, and the largest read asked this
 * way. */
#define RING_MSG_MAX (RING_SQ / 4)
#define RING_READ_MAX ((uint64_t)32 << 10)
/* How long a caller spins on its reply before it sleeps on the futex:
 * 50 us busy, then to 2 ms yielding the CPU between looks (a batch of
 * short kernels answered when complete takes about a millisecond, and a
 * futex wake-up cost 50-100 us of it on the H100's host). */
#define RING_SPIN_NS 50000u
#define RING_YIELD_NS 2000000u
/* While cumodd says the host is crowded (more clients waiting than cores
 * serve spinning), a caller spins this long and then sleeps: yielding,
 * it stays runnable and takes the cores cumodd's threads and the other
 * clients need (bench/notes.md, "Crowded"). */
#define RING_CROWDED_SPIN_NS 10000u

struct cumod__ring {
    uint8_t *map;
    size_t map_len;
    cumod_ring_hdr *h;
    uint8_t *sq, *cq;
    uint64_t sq_tail, cq_head; /* ours; published to the header */
    int bell_fd;
    int bell_rd;         /* a pipe's read end, kept: a write never EPIPEs */
    pthread_mutex_t mtx; /* one call at a time */
    _Atomic int dead;    /* the connection went: use nng (and fail) */
    uint64_t calls;
    uint64_t spin_ns;  /* RING_SPIN_NS, or $CUMOD_RING_SPIN_US */
    uint64_t yield_ns; /* RING_YIELD_NS, or $CUMOD_RING_YIELD_US */
    int tuned;         /* either variable set: cumodd's hint is not taken */
    uint8_t scratch[RING_MSG_MAX]; /* a request packed, under mtx */
};

static uint64_t
ring_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void
ring_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

int
cumod__ring_wanted(const char *url)
{
    const char *off = getenv("CUMOD_NO_RING");
    if (off != NULL && off[0] != '\0' && strcmp(off, "0") != 0)
        return 0;
    return strncmp(url, "ipc://", 6) == 0;
}

static void
ring_free(cumod__ring *g)
{
    if (g->map != NULL)
        munmap(g->map, g->map_len);
    if (g->bell_fd >= 0)
        close(g->bell_fd);
    if (g->bell_rd >= 0)
        close(g->bell_rd);
    pthread_mutex_destroy(&g->mtx);
    free(g);
}

void
cumod__ring_destroy(cumod__ring *g)
{
    if (g != NULL)
        ring_free(g);
}

void
cumod__ring_kill(cumod__ring *g)
{
    if (g == NULL)
        return;
    atomic_store(&g->dead, 1);
    /* A caller asleep on its reply wakes and sees it. */
    atomic_fetch_add_explicit(&g->h->cq_seq, 1, memory_order_release);
    syscall(SYS_futex, &g->h->cq_seq, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

int
cumod__ring_alive(const cumod__ring *g)
{
    return !atomic_load_explicit(&g->dead, memory_order_relaxed) &&
           !atomic_load_explicit(&g->h->closed, memory_order_relaxed);
}

int
cumod_fast_path(const cumod_client *c)
{
    const cumod__ring *g = c != NULL ? atomic_load(&c->ring) : NULL;
    return g != NULL && cumod__ring_alive(g);
}

uint64_t
cumod__ring_calls(const cumod__ring *g)
{
    return g != NULL ? g->calls : 0;
}

static void
ring_header_init(cumod__ring *g)
{
    g->h = (cumod_ring_hdr *)g->map;
    g->h->magic = CUMOD_RING_MAGIC;
    g->h->version = CUMOD_RING_VERSION;
    g->h->hdr_size = CUMOD_RING_HDR_SIZE;
    g->h->sq_size = RING_SQ;
    g->h->cq_size = RING_CQ;
    g->sq = g->map + CUMOD_RING_HDR_SIZE;
    g->cq = g->sq + RING_SQ;
}

/* The ring as a sealed memfd and its doorbell a pipe, handed to cumodd
 * (handover.c) with token: CUMOD_OK, else (cumodd takes none, or the
 * handover failed) the ring goes by name. */
static int
ring_make_handed(cumod_client *c, cumod__ring *g, uint8_t *token)
{
    int p[2], fd, rv;
    void *map;

    g->map_len = CUMOD_RING_HDR_SIZE + RING_SQ + RING_CQ;
    if ((fd = cumod__memfd_make("cumod-ring", g->map_len, &map)) < 0)
        return CUMOD_ENOTSUP; /* no memfd here: by name */
    g->map = map;
    ring_header_init(g);
    if (pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0) {
        rv = cumod__client_set_error(
            CUMOD_EIO, "cannot make a ring's doorbell: %s", strerror(errno));
        close(fd);
        return rv;
    }
    g->bell_rd = p[0];
    g->bell_fd = p[1];
    rv = cumod__handover(c, (const int[]){fd, p[0]}, 2, token);
    close(fd); /* the mapping keeps the memory; cumodd has its own */
    return rv;
}

/* The segment and its doorbell under fresh names. */
static int
ring_make(cumod__ring *g, char *name, size_t cap, char *bell, size_t bcap)
{
    static _Atomic uint64_t counter;
    int fd = -1;

    for (int tries = 0; fd < 0; tries++) {
        uint32_t r = 0;
        if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
            r = (uint32_t)ring_now_ns();
        snprintf(name, cap, "/cumod-ring-%ld-%llu-%08x", (long)getpid(),
                 (unsigned long long)atomic_fetch_add(&counter, 1),
                 (unsigned)r);
        fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
        if (fd < 0 && (errno != EEXIST || tries == 8))
            return -1;
    }
    g->map_len = CUMOD_RING_HDR_SIZE + RING_SQ + RING_CQ;
    if (ftruncate(fd, (off_t)g->map_len) != 0) {
        close(fd);
        shm_unlink(name);
        return -1;
    }
    g->map = mmap(NULL, g->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (g->map == MAP_FAILED) {
        g->map = NULL;
        shm_unlink(name);
        return -1;
    }
    ring_header_init(g);
    snprintf(bell, bcap, "/dev/shm%s.bell", name);
    /* Read and write: the client is a reader too, so a write never meets
     * a FIFO without one (no SIGPIPE), and a full FIFO says EAGAIN, which
     * means a doorbell is pending anyway. */
    if (mkfifo(bell, 0600) != 0 ||
        (g->bell_fd = open(bell, O_RDWR | O_NONBLOCK | O_CLOEXEC)) < 0) {
        unlink(bell);
        shm_unlink(name);
        return -1;
    }
    return 0;
}

/* $name in microseconds, at most RING_YIELD_NS, into *ns (dflt when
 * unset): 1 when set. */
static int
ring_env_ns(const char *name, uint64_t dflt, uint64_t *ns)
{
    const char *v = getenv(name);
    *ns = dflt;
    if (v == NULL || v[0] < '0' || v[0] > '9')
        return 0;
    unsigned long us = strtoul(v, NULL, 10);
    *ns = (us > RING_YIELD_NS / 1000u ? RING_YIELD_NS / 1000u : us) * 1000u;
    return 1;
}

static cumod__ring *
ring_new(void)
{
    cumod__ring *g = calloc(1, sizeof(*g));

    if (g == NULL)
        return NULL;
    g->bell_fd = -1;
    g->bell_rd = -1;
    /* How long a caller spins before it yields between looks, then how
     * long it yields before it sleeps on the futex: on a host with more
     * spinning clients than cores, less of either leaves the cores to
     * cumodd's threads (bench/notes.md). Either set: cumodd's crowded
     * hint is not taken. */
    g->tuned = ring_env_ns("CUMOD_RING_SPIN_US", RING_SPIN_NS, &g->spin_ns) |
               ring_env_ns("CUMOD_RING_YIELD_US", RING_YIELD_NS, &g->yield_ns);
    pthread_mutex_init(&g->mtx, NULL);
    return g;
}

/* Makes g's memory and doorbell, handed over (handed) or by name, and
 * asks cumodd to open them; CUMOD_ENOTSUP: cumodd takes no descriptors. */
static int
ring_attempt(cumod_client *c, cumod__ring *g, int handed, uint32_t *on)
{
    char name[96] = "", bell[128] = "";
    uint8_t token[CUMOD_HANDOVER_TOKEN];
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__OpenRing o = CUMOD__OPEN_RING__INIT;
    Cumod__Reply *reply = NULL;
    int rv;

    if (handed) {
        if ((rv = ring_make_handed(c, g, token)) != CUMOD_OK)
            return rv;
        o.fd_token.data = token;
        o.fd_token.len = sizeof(token);
    } else {
        if (ring_make(g, name, sizeof(name), bell, sizeof(bell)) != 0)
            return cumod__client_set_error(CUMOD_EIO,
                                           "cannot make a ring in /dev/shm: %s",
                                           strerror(errno));
        o.name = name;
    }
    o.size = g->map_len;
    req.body_case = CUMOD__REQUEST__BODY_OPEN_RING;
    req.open_ring = &o;
    rv = cumod__client_call_for(c, &req, CUMOD__REPLY__BODY_RING, "cumod_open",
                                &reply);
    *on = rv == CUMOD_OK ? cumod__client_reply_pipe() : 0;
    /* cumodd has both open now, or will never open them. */
    if (!handed) {
        unlink(bell);
        shm_unlink(name);
    }
    if (rv == CUMOD_OK &&
        (reply->ring->sq_size != RING_SQ || reply->ring->cq_size != RING_CQ))
        rv = cumod__client_set_error(CUMOD_EPROTO,
                                     "cumodd read other ring sizes");
    if (reply != NULL)
        cumod__reply__free_unpacked(reply, NULL);
    return rv;
}

int
cumod__ring_open(cumod_client *c, cumod__ring **out, uint32_t *on)
{
    cumod__ring *g = ring_new();
    int rv;

    *out = NULL;
    if (g == NULL)
        return CUMOD_ENOMEM;
    /* Handed over first (which a cumodd of another user can map), by name
     * when cumodd takes no descriptors or refused these. */
    rv = ring_attempt(c, g, 1, on);
    if (rv != CUMOD_OK && rv != CUMOD_ECLOSED && rv != CUMOD_ETIMEDOUT) {
        ring_free(g);
        if ((g = ring_new()) == NULL)
            return CUMOD_ENOMEM;
        rv = ring_attempt(c, g, 0, on);
    }
    if (rv != CUMOD_OK) {
        ring_free(g);
        return rv;
    }
    *out = g;
    return CUMOD_OK;
}

int
cumod__ring_eligible(const Cumod__Request *req)
{
    switch (req->body_case) {
    case CUMOD__REQUEST__BODY_BATCH:
        /* at least 8 bytes an item: past this it cannot fit */
        return req->batch->n_items <= RING_MSG_MAX / 8;
    case CUMOD__REQUEST__BODY_WRITE_BUFFER:
        return req->write_buffer->data.len <= RING_MSG_MAX;
    case CUMOD__REQUEST__BODY_WRITE_GLOBAL:
        return req->write_global->data.len <= RING_MSG_MAX;
    case CUMOD__REQUEST__BODY_LAUNCH:
    case CUMOD__REQUEST__BODY_GEMM:
    case CUMOD__REQUEST__BODY_WAIT:
    case CUMOD__REQUEST__BODY_SYNCHRONIZE:
    case CUMOD__REQUEST__BODY_MEMSET:
    case CUMOD__REQUEST__BODY_COPY:
    case CUMOD__REQUEST__BODY_ALLOC_BUFFER:
    case CUMOD__REQUEST__BODY_FREE_BUFFER:
    case CUMOD__REQUEST__BODY_CREATE_STREAM:
    case CUMOD__REQUEST__BODY_DESTROY_STREAM:
        return 1;
    case CUMOD__REQUEST__BODY_READ_BUFFER:
        return req->read_buffer->length <= RING_READ_MAX;
    case CUMOD__REQUEST__BODY_READ_GLOBAL:
        return req->read_global->length <= RING_READ_MAX;
    default:
        return 0; /* replies that can be large, and control */
    }
}

/* Rings the doorbell unless cumodd says it is looking anyway. */
static void
ring_bell(cumod__ring *g)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (!atomic_load_explicit(&g->h->daemon_polling, memory_order_relaxed)) {
        char b = 1;
        ssize_t n = write(g->bell_fd, &b, 1);
        (void)n; /* EAGAIN: the FIFO is full of doorbells already */
    }
}

/* Puts one request of len bytes (packed by the caller into the ring); 0, or
 * -1 when there is no room now. */
static int
ring_submit(cumod__ring *g, const uint8_t *bytes, size_t len)
{
    uint64_t head = atomic_load_explicit(&g->h->sq_head, memory_order_acquire);
    uint64_t tail = g->sq_tail, size = RING_SQ;
    uint64_t off = tail & (size - 1), need = cumod_ring_rec_space(len);
    uint64_t pad = size - off < need ? size - off : 0;

    if (tail - head > size || pad + need > size - (tail - head))
        return -1;
    if (pad) {
        cumod_ring_rec pr = {.len = 0, .kind = CUMOD_RING_REC_PAD};
        memcpy(g->sq + off, &pr, sizeof(pr));
        tail += pad;
        off = 0;
    }
    cumod_ring_rec rec = {.len = (uint32_t)len, .kind = CUMOD_RING_REC_MSG};
    memcpy(g->sq + off, &rec, sizeof(rec));
    memcpy(g->sq + off + sizeof(rec), bytes, len);
    g->sq_tail = tail + need;
    atomic_store_explicit(&g->h->sq_tail, g->sq_tail, memory_order_seq_cst);
    ring_bell(g);
    return 0;
}

/* The next reply in cq, decoded, or NULL when none is there yet (*bad set
 * when cq holds something that is not one). */
static Cumod__Reply *
ring_take(cumod__ring *g, int *bad)
{
    for (;;) {
        uint64_t tail =
            atomic_load_explicit(&g->h->cq_tail, memory_order_acquire);
        uint64_t head = g->cq_head, size = RING_CQ;
        if (tail == head)
            return NULL;
        uint64_t off = head & (size - 1), to_end = size - off;
        cumod_ring_rec rec;
        memcpy(&rec, g->cq + off, sizeof(rec));
        uint64_t step = rec.kind == CUMOD_RING_REC_PAD
                            ? to_end
                            : cumod_ring_rec_space(rec.len);
        if (tail - head > size ||
            (rec.kind != CUMOD_RING_REC_PAD &&
             rec.kind != CUMOD_RING_REC_MSG) ||
            step > to_end || step > tail - head) {
            *bad = 1;
            return NULL;
        }
        Cumod__Reply *r = NULL;
        if (rec.kind == CUMOD_RING_REC_MSG) {
            r = cumod__reply__unpack(NULL, rec.len, g->cq + off + sizeof(rec));
            if (r == NULL)
                *bad = 1;
        }
        g->cq_head = head + step;
        atomic_store_explicit(&g->h->cq_head, g->cq_head, memory_order_release);
        if (r != NULL || *bad)
            return r;
    }
}

int
cumod__ring_post(cumod__ring *g, const Cumod__Request *req, int timeout_ms)
{
    if (atomic_load(&g->dead) || atomic_load(&g->h->closed) ||
        pthread_mutex_trylock(&g->mtx) != 0)
        return CUMOD__RING_NOT_TAKEN;
    size_t len = cumod__pack_fast_size(req, NULL);
    if (len == 0 || len + sizeof(cumod_ring_rec) > RING_MSG_MAX) {
        pthread_mutex_unlock(&g->mtx);
        return CUMOD__RING_NOT_TAKEN;
    }
    (void)cumod__pack_fast(req, NULL, g->scratch);
    /* A full ring empties as cumodd reads it: wait for room (spinning,
     * then yielding), not for an answer. */
    uint64_t t0 = ring_now_ns(), until = t0 + (uint64_t)timeout_ms * 1000000u;
    int rv = CUMOD_OK;
    while (ring_submit(g, g->scratch, len) != 0) {
        uint64_t now = ring_now_ns();
        if (now >= until || atomic_load(&g->dead) ||
            atomic_load(&g->h->closed)) {
            rv = CUMOD__RING_NOT_TAKEN;
            break;
        }
        if (now - t0 < g->spin_ns)
            ring_pause();
        else
            sched_yield();
    }
    if (rv == CUMOD_OK)
        g->calls++;
    pthread_mutex_unlock(&g->mtx);
    return rv;
}

int
cumod__ring_call(cumod__ring *g, const Cumod__Request *req,
                 const cumod__pack_items *pre, int timeout_ms,
                 Cumod__Reply **out)
{
    int bad = 0;

    if (atomic_load(&g->dead) || atomic_load(&g->h->closed) ||
        pthread_mutex_trylock(&g->mtx) != 0)
        return CUMOD__RING_NOT_TAKEN;
    /* Packed once, into the ring's scratch (the caller holds the ring):
     * launches by the fast packer, the rest by protobuf-c, with no sizing
     * pass besides its own for nested messages. */
    size_t len = cumod__pack_fast_size(req, pre);
    int big;
    if (len > 0) {
        big = len + sizeof(cumod_ring_rec) > RING_MSG_MAX;
        if (!big)
            (void)cumod__pack_fast(req, pre, g->scratch);
    } else {
        ProtobufCBufferSimple sb = PROTOBUF_C_BUFFER_SIMPLE_INIT(g->scratch);
        len = protobuf_c_message_pack_to_buffer((const ProtobufCMessage *)req,
                                                &sb.base);
        big = sb.must_free_data || len + sizeof(cumod_ring_rec) > RING_MSG_MAX;
        PROTOBUF_C_BUFFER_SIMPLE_CLEAR(&sb);
    }
    if (big || ring_submit(g, g->scratch, len) != 0) {
        pthread_mutex_unlock(&g->mtx);
        return CUMOD__RING_NOT_TAKEN;
    }
    g->calls++;
    uint64_t t0 = ring_now_ns();
    uint64_t until = t0 + (uint64_t)timeout_ms * 1000000u;
    int rv = CUMOD__RING_TIMEDOUT;
    for (;;) {
        Cumod__Reply *r = ring_take(g, &bad);
        if (bad) {
            rv = CUMOD__RING_BROKEN;
            break;
        }
        if (r != NULL) {
            /* A reply to a call that timed out earlier: dropped. */
            if (r->id != req->id) {
                cumod__reply__free_unpacked(r, NULL);
                continue;
            }
            *out = r;
            rv = CUMOD_OK;
            break;
        }
        if (atomic_load(&g->dead) || atomic_load(&g->h->closed)) {
            /* cumodd answers, then closes (a drain's last answers, a
             * session's end): an answer written before the close is
             * seen now, and is this call's result. */
            while ((r = ring_take(g, &bad)) != NULL && r->id != req->id)
                cumod__reply__free_unpacked(r, NULL);
            if (r != NULL) {
                *out = r;
                rv = CUMOD_OK;
            } else
                rv = bad ? CUMOD__RING_BROKEN : CUMOD__RING_CLOSED;
            break;
        }
        uint64_t now = ring_now_ns();
        if (now >= until)
            break;
        int crowded = !g->tuned && atomic_load_explicit(&g->h->crowded,
                                                        memory_order_relaxed);
        uint64_t spin_ns = g->spin_ns;
        if (crowded && spin_ns > RING_CROWDED_SPIN_NS)
            spin_ns = RING_CROWDED_SPIN_NS;
        if (now - t0 < spin_ns) {
            ring_pause();
            continue;
        }
        if (!crowded && now - t0 < g->yield_ns) {
            sched_yield();
            continue;
        }
        /* Sleep: say so, look once more, then wait for cq_seq to move. */
        uint32_t seq =
            atomic_load_explicit(&g->h->cq_seq, memory_order_acquire);
        atomic_store_explicit(&g->h->client_waiting, 1, memory_order_seq_cst);
        atomic_thread_fence(memory_order_seq_cst);
        if (atomic_load_explicit(&g->h->cq_tail, memory_order_acquire) ==
                g->cq_head &&
            !atomic_load(&g->dead) && !atomic_load(&g->h->closed)) {
            uint64_t left = until - now;
            struct timespec ts = {.tv_sec = (time_t)(left / 1000000000u),
                                  .tv_nsec = (long)(left % 1000000000u)};
            syscall(SYS_futex, &g->h->cq_seq, FUTEX_WAIT, seq, &ts, NULL, 0);
        }
        atomic_store_explicit(&g->h->client_waiting, 0, memory_order_relaxed);
    }
    if (rv == CUMOD__RING_BROKEN || rv == CUMOD__RING_CLOSED)
        atomic_store(&g->dead, 1);
    pthread_mutex_unlock(&g->mtx);
    return rv;
}
