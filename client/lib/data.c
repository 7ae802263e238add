/* SPDX-License-Identifier: MIT */
/* Buffers, streams, tickets and copies of libcumod. */
#include <stdint.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client_internal.h"
#include "cumod_ring.h"

int
cumod__client_check_range(const char *fn, const char *what, size_t offset,
                          size_t len, size_t size, const char *whose)
{
    if (offset > size || len > size - offset)
        return cumod__client_set_error(
            CUMOD_EINVAL,
            "%s: %soffset %zu + length %zu is past the end of %s (%zu bytes)",
            fn, what, offset, len, whose, size);
    return CUMOD_OK;
}

int
cumod__client_done(cumod_client *c, Cumod__Request *req, const char *fn,
                   cumod_ticket *ticket, uint64_t *generation)
{
    Cumod__Reply *reply = NULL;
    int rv;

    if ((rv = cumod__client_call_for(c, req, CUMOD__REPLY__BODY_DONE, fn,
                                     &reply)) != CUMOD_OK)
        return rv;
    if (ticket != NULL)
        *ticket = reply->done->ticket;
    if (generation != NULL)
        *generation = reply->done->generation;
    cumod__reply__free_unpacked(reply, NULL);
    return CUMOD_OK;
}

/* A request answered by its status alone (free, unmap, destroy). */
static int
data_status_only(cumod_client *c, Cumod__Request *req)
{
    Cumod__Reply *reply = NULL;
    int rv;

    if ((rv = cumod__client_call(c, req, &reply)) != CUMOD_OK)
        return rv;
    cumod__reply__free_unpacked(reply, NULL);
    return CUMOD_OK;
}

int
cumod_buffer_alloc(cumod_client *c, size_t size, cumod_buffer *out)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__AllocBuffer ab = CUMOD__ALLOC_BUFFER__INIT;
    Cumod__Reply *reply = NULL;
    cumod_buffer handle;
    int rv;

    if (c == NULL || out == NULL)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_buffer_alloc: NULL argument");
    if (size == 0)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_buffer_alloc: size is 0");
    ab.size = size;
    req.body_case = CUMOD__REQUEST__BODY_ALLOC_BUFFER;
    req.alloc_buffer = &ab;
    if ((rv = cumod__client_call_for(c, &req, CUMOD__REPLY__BODY_BUFFER,
                                     __func__, &reply)) != CUMOD_OK)
        return rv;
    handle = reply->buffer->handle;
    cumod__reply__free_unpacked(reply, NULL);
    *out = handle;
    return CUMOD_OK;
}

int
cumod_buffer_free(cumod_client *c, cumod_buffer buf)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__FreeBuffer fb = CUMOD__FREE_BUFFER__INIT;

    if (c == NULL)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_buffer_free: the client is NULL");
    fb.handle = buf;
    req.body_case = CUMOD__REQUEST__BODY_FREE_BUFFER;
    req.free_buffer = &fb;
    return data_status_only(c, &req);
}

/* The checks that write and read share: a client, data, a length, and an
 * offset that does not wrap. */
static int
data_check_io(const char *fn, cumod_client *c, const void *data, size_t offset,
              size_t len)
{
    if (c == NULL || data == NULL)
        return cumod__client_set_error(CUMOD_EINVAL, "%s: NULL argument", fn);
    if (len == 0)
        return cumod__client_set_error(CUMOD_EINVAL, "%s: length is 0", fn);
    return cumod__client_check_range(fn, "", offset, len, SIZE_MAX,
                                     "the address space");
}

/* Transfers of any size (cumod_buffer_write, cumod_buffer_read). Up to
 * DATA_INLINE_MAX bytes travel inside their message: one round trip, the
 * fast path's ring included. Larger ones, on a local connection, go
 * through the client's staging segment: a host memcpy here into memory
 * cumodd has registered, and a DMA from it there, the two halves of the
 * segment taking turns so that the copy of one piece overlaps the DMA of
 * the other. Where no segment can be had (a remote connection, no
 * /dev/shm), in pieces each under cumodd's --max-message. The crossover
 * was measured on the H100 (bench/notes.md, "Transfers of any size":
 * staged is as fast from 1 KiB and faster from 4 KiB);
 * $CUMOD_INLINE_MAX moves it. */
#define DATA_INLINE_MAX ((size_t)2 << 10)
/* Making the staging segment costs cumodd a host registration (about a
 * millisecond): a client makes it for its first transfer of this size or
 * more; smaller ones go inline until it has one (a client's first 16 KiB
 * write then costs ~35 us, not a registration). */
#define STAGE_FIRST_MIN ((size_t)64 << 10)
#define STAGE_MIN ((size_t)1 << 20)
#define STAGE_MAX ((size_t)32 << 20)
/* A staged piece at least this large is copied by several threads. */
#define COPY_SPLIT_MIN ((size_t)2 << 20)
#define COPY_THREADS_MAX 8

/* The threads that copy large pieces into and out of the staging segment
 * (one thread's memcpy, ~10 GB/s, was the limit; the DMA runs at ~54):
 * started on the first large piece, stopped with the segment. The caller
 * copies a part too. */
struct cumod__copy_pool {
    pthread_mutex_t m;
    pthread_cond_t go, done;
    pthread_t t[COPY_THREADS_MAX];
    unsigned n; /* helper threads */
    int stop;
    uint8_t *dst;
    const uint8_t *src;
    size_t len, part;
    unsigned parts, next, left;
};

/* Takes and copies parts of the pool's job until none is left to take;
 * m is held on entry and exit. */
static void
copy_parts(cumod__copy_pool *p)
{
    while (p->next < p->parts) {
        size_t i = p->next++, at = i * p->part;
        size_t n = p->len - at < p->part ? p->len - at : p->part;
        pthread_mutex_unlock(&p->m);
        memcpy(p->dst + at, p->src + at, n);
        pthread_mutex_lock(&p->m);
        if (--p->left == 0)
            pthread_cond_signal(&p->done);
    }
}

static void *
copy_thread(void *arg)
{
    cumod__copy_pool *p = arg;

    pthread_mutex_lock(&p->m);
    while (!p->stop) {
        copy_parts(p);
        if (!p->stop)
            pthread_cond_wait(&p->go, &p->m);
    }
    pthread_mutex_unlock(&p->m);
    return NULL;
}

/* How many threads copy a large piece: $CUMOD_COPY_THREADS, else half the
 * cores, 1 to 8 (the caller's thread included). They run only while a
 * large transfer does. A read into new memory (to_numpy's array) is
 * bounded by its page faults, which scale with threads: 1 GiB down at 4
 * threads 6.5-10.5 GB/s, at 8 10.4-16.7 (bench/notes.md, "Transfers of
 * any size"). */
static unsigned
copy_threads(void)
{
    const char *e = getenv("CUMOD_COPY_THREADS");
    long n;

    if (e != NULL && e[0] >= '0' && e[0] <= '9')
        n = strtol(e, NULL, 10);
    else
        n = sysconf(_SC_NPROCESSORS_ONLN) / 2;
    if (n < 1)
        n = 1;
    return n > COPY_THREADS_MAX ? COPY_THREADS_MAX : (unsigned)n;
}

static void
copy_pool_stop(cumod__copy_pool *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->m);
    p->stop = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->m);
    for (unsigned i = 0; i < p->n; i++)
        pthread_join(p->t[i], NULL);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->m);
    free(p);
}

/* c's pool, started now if it is not (NULL: one thread copies). */
static cumod__copy_pool *
copy_pool(cumod_client *c)
{
    cumod__copy_pool *p;

    if (c->copy_pool != NULL)
        return c->copy_pool;
    if (c->copy_threads == 0) /* once: sysconf reads /sys */
        c->copy_threads = copy_threads();
    unsigned want = c->copy_threads;
    if (want < 2)
        return NULL;
    if ((p = calloc(1, sizeof(*p))) == NULL)
        return NULL;
    pthread_mutex_init(&p->m, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    for (unsigned i = 0; i + 1 < want; i++) {
        if (pthread_create(&p->t[p->n], NULL, copy_thread, p) != 0)
            break;
        p->n++;
    }
    if (p->n == 0) {
        copy_pool_stop(p);
        return NULL;
    }
    return c->copy_pool = p;
}

/* memcpy, split over c's copy threads when n is large. */
static void
data_copy_bytes(cumod_client *c, void *dst, const void *src, size_t n)
{
    cumod__copy_pool *p = n >= COPY_SPLIT_MIN ? copy_pool(c) : NULL;

    if (p == NULL) {
        memcpy(dst, src, n);
        return;
    }
    pthread_mutex_lock(&p->m);
    p->dst = dst;
    p->src = src;
    p->len = n;
    /* Parts of whole pages, about two per thread. */
    p->part = (n / (2 * (p->n + 1)) + 4095) & ~(size_t)4095;
    p->parts = (unsigned)((n + p->part - 1) / p->part);
    p->next = 0;
    p->left = p->parts;
    pthread_cond_broadcast(&p->go);
    copy_parts(p);
    while (p->left > 0)
        pthread_cond_wait(&p->done, &p->m);
    pthread_mutex_unlock(&p->m);
}

/* Room left in a message for what is not data (its header fields). */
#define DATA_MSG_SLACK 1024

static size_t
data_inline_max(void)
{
    const char *e = getenv("CUMOD_INLINE_MAX");
    if (e != NULL && e[0] >= '0' && e[0] <= '9')
        return (size_t)strtoull(e, NULL, 10);
    return DATA_INLINE_MAX;
}

/* The most data one message may carry to or from this daemon. */
static size_t
data_piece_max(cumod_client *c)
{
    uint32_t max = atomic_load(&c->max_message);
    if (max == 0)
        return (size_t)16 << 20; /* an older cumodd: its default is 64 MiB */
    return max > 2 * DATA_MSG_SLACK ? max - DATA_MSG_SLACK : DATA_MSG_SLACK;
}

void
cumod__stage_free(cumod_client *c)
{
    copy_pool_stop(c->copy_pool);
    c->copy_pool = NULL;
    if (c->stage != NULL) {
        munmap(c->stage->data, c->stage->size);
        free(c->stage);
        c->stage = NULL;
    }
}

/* c's staging segment, at least big enough for two pieces of a len-byte
 * transfer up to STAGE_MAX, on this connection's session; stage_mtx is
 * held. CUMOD_OK, or the error (the caller goes in pieces instead). */
static int
data_stage(cumod_client *c, size_t len)
{
    uint32_t pipe = cumod__client_pipe(c);
    size_t want = STAGE_MIN;
    int rv;

    while (want < 2 * len && want < STAGE_MAX)
        want <<= 1;
    /* A segment of an earlier connection's session: cumodd unmapped it
     * when that session ended, and its handle is not ours any more. */
    if (c->stage != NULL && c->stage_pipe != pipe)
        cumod__stage_free(c);
    if (c->stage != NULL && c->stage->size < want) {
        (void)cumod_segment_destroy(c, c->stage);
        c->stage = NULL;
    }
    if (c->stage == NULL) {
        if ((rv = cumod_segment_create(c, want, &c->stage)) != CUMOD_OK) {
            c->stage = NULL;
            return rv;
        }
        c->stage_pipe = pipe;
    }
    return CUMOD_OK;
}

/* The detail of a failed piece, said as the public call's. */
static int
data_fail(const char *fn, const char *how, int rv)
{
    char detail[1024];
    snprintf(detail, sizeof(detail), "%s", cumod_last_detail());
    return cumod__client_set_error(rv, "%s (%s): %s", fn, how, detail);
}

/* Waits for t (0: nothing) and keeps the first error in *rv. */
static void
data_wait(cumod_client *c, cumod_ticket *t, int *rv)
{
    int w;
    /* After a timeout the other piece is not waited for too (a hang would
     * cost the caller its timeout twice): the segment is dropped instead
     * (data_staged), so nothing still in flight lands in a reused half. */
    if (*t != 0 && *rv != CUMOD_ETIMEDOUT &&
        (w = cumod_wait(c, *t)) != CUMOD_OK && *rv == CUMOD_OK)
        *rv = w;
    *t = 0;
}

static int
data_write_staged(cumod_client *c, cumod_buffer buf, size_t offset,
                  const uint8_t *data, size_t len, cumod_stream stream)
{
    cumod_segment *seg = c->stage;
    size_t half = seg->size / 2, n;
    cumod_ticket t[2] = {0, 0};
    int rv = CUMOD_OK;

    for (size_t done = 0, i = 0; done < len && rv == CUMOD_OK;
         done += n, i ^= 1) {
        n = len - done < half ? len - done : half;
        data_wait(c, &t[i], &rv); /* this half's last DMA is done */
        if (rv != CUMOD_OK)
            break;
        data_copy_bytes(c, (uint8_t *)seg->data + i * half, data + done, n);
        /* The last piece is answered when complete: one round trip less
         * (the only one, for a transfer of one piece). */
        rv = cumod_copy_to_device(c, buf, offset + done, seg, i * half, n,
                                  stream, done + n == len ? NULL : &t[i]);
    }
    /* Nothing of the caller's is read after this returns. */
    data_wait(c, &t[0], &rv);
    data_wait(c, &t[1], &rv);
    return rv;
}

/* Asks for the piece of a staged read at byte at of the transfer into
 * half h of the segment (n[h] bytes from at[h]). */
static int
data_read_ask(cumod_client *c, cumod_buffer buf, size_t offset, size_t len,
              cumod_stream stream, size_t h, size_t at, size_t *at_h,
              size_t *n_h, cumod_ticket *t_h)
{
    cumod_segment *seg = c->stage;
    size_t half = seg->size / 2;

    *at_h = at;
    *n_h = len - at < half ? len - at : half;
    return cumod_copy_to_host(c, seg, h * half, buf, offset + at, *n_h, stream,
                              t_h);
}

static int
data_read_staged(cumod_client *c, cumod_buffer buf, size_t offset,
                 uint8_t *data, size_t len, cumod_stream stream)
{
    cumod_segment *seg = c->stage;
    size_t half = seg->size / 2, asked, at[2] = {0, 0}, n[2] = {0, 0};
    cumod_ticket t[2] = {0, 0};
    int rv;

    if (len <= half) { /* one piece: answered when it has landed */
        rv = cumod_copy_to_host(c, seg, 0, buf, offset, len, stream, NULL);
        if (rv == CUMOD_OK)
            data_copy_bytes(c, data, seg->data, len);
        return rv;
    }
    /* Piece k lands in half k % 2; piece k + 1 is asked for before piece
     * k is copied out, so one's DMA overlaps the other's copy. */
    rv = data_read_ask(c, buf, offset, len, stream, 0, 0, &at[0], &n[0], &t[0]);
    asked = n[0];
    for (size_t k = 0, landed = 0; landed < len && rv == CUMOD_OK; k++) {
        size_t h = k & 1, o = h ^ 1;
        if (asked < len) { /* half o's last piece was copied out */
            rv = data_read_ask(c, buf, offset, len, stream, o, asked, &at[o],
                               &n[o], &t[o]);
            asked += n[o];
        }
        data_wait(c, &t[h], &rv);
        if (rv != CUMOD_OK)
            break;
        data_copy_bytes(c, data + at[h], (uint8_t *)seg->data + h * half, n[h]);
        landed += n[h];
    }
    data_wait(c, &t[0], &rv);
    data_wait(c, &t[1], &rv);
    return rv;
}

static int
data_write_inline(cumod_client *c, cumod_buffer buf, size_t offset,
                  const void *data, size_t len, cumod_stream stream)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__WriteBuffer wb = CUMOD__WRITE_BUFFER__INIT;

    wb.handle = buf;
    wb.offset = offset;
    wb.data.data = (uint8_t *)data; /* only read: packed, never freed */
    wb.data.len = len;
    wb.stream = stream;
    wb.when = CUMOD__REPLY_WHEN__REPLY_WHEN_COMPLETE;
    req.body_case = CUMOD__REQUEST__BODY_WRITE_BUFFER;
    req.write_buffer = &wb;
    return cumod__client_done(c, &req, "cumod_buffer_write", NULL, NULL);
}

static int
data_read_inline(cumod_client *c, cumod_buffer buf, size_t offset, void *data,
                 size_t len, cumod_stream stream)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__ReadBuffer rb = CUMOD__READ_BUFFER__INIT;
    Cumod__Reply *reply = NULL;
    int rv;

    rb.handle = buf;
    rb.offset = offset;
    rb.length = len;
    rb.stream = stream;
    req.body_case = CUMOD__REQUEST__BODY_READ_BUFFER;
    req.read_buffer = &rb;
    if ((rv = cumod__client_call(c, &req, &reply)) != CUMOD_OK)
        return rv;
    if (reply->body_case != CUMOD__REPLY__BODY_DATA ||
        reply->data->data.len != len) {
        rv = cumod__client_set_error(
            CUMOD_EPROTO,
            "cumod_buffer_read: cumodd answered a read of %zu bytes with %s",
            len,
            reply->body_case == CUMOD__REPLY__BODY_DATA
                ? "another length"
                : "another kind of reply");
        cumod__reply__free_unpacked(reply, NULL);
        return rv;
    }
    memcpy(data, reply->data->data.data, len);
    cumod__reply__free_unpacked(reply, NULL);
    return CUMOD_OK;
}

/* One staged transfer (stage_mtx held, c->stage made). A failure may
 * leave pieces in flight in the segment's halves (a timeout, a lost
 * context): the segment is given back then (cumodd unmaps it once the
 * session's work before the unmap is done), and the next transfer makes
 * another, so that no late DMA meets a reused half. */
static int
data_staged(cumod_client *c, int write, cumod_buffer buf, size_t offset,
            uint8_t *data, size_t len, cumod_stream stream)
{
    int rv = write ? data_write_staged(c, buf, offset, data, len, stream)
                   : data_read_staged(c, buf, offset, data, len, stream);
    if (rv != CUMOD_OK) {
        char detail[1024];
        snprintf(detail, sizeof(detail), "%s", cumod_last_detail());
        (void)cumod_segment_destroy(c, c->stage);
        c->stage = NULL;
        cumod__client_set_error(rv, "%s", detail);
    }
    return rv;
}

/* A transfer too large for one message: staged where a segment can be
 * had, else in pieces under --max-message (write: 1, read: 0). */
static int
data_large(cumod_client *c, int write, cumod_buffer buf, size_t offset,
           uint8_t *data, size_t len, cumod_stream stream)
{
    const char *fn = write ? "cumod_buffer_write" : "cumod_buffer_read";
    size_t piece = data_piece_max(c), n;
    int rv = CUMOD_ENOTSUP;

    if (strncmp(c->url, "ipc://", 6) == 0) {
        nng_mtx_lock(c->stage_mtx);
        if (data_stage(c, len) == CUMOD_OK) {
            rv = data_staged(c, write, buf, offset, data, len, stream);
            /* A segment of a context the executor lost answers
             * CUMOD_ECTXLOST until it is freed: the staging segment may be
             * what was lost, not the caller's buffer. Once with a new one
             * (the buffer's own loss then says so again). */
            if (rv == CUMOD_ECTXLOST)
                rv = data_stage(c, len) == CUMOD_OK
                         ? data_staged(c, write, buf, offset, data, len, stream)
                         : CUMOD_ECTXLOST;
            nng_mtx_unlock(c->stage_mtx);
            return rv == CUMOD_OK
                       ? rv
                       : data_fail(fn, "staged through a shared segment", rv);
        }
        nng_mtx_unlock(c->stage_mtx);
    }
    for (size_t done = 0; done < len; done += n) {
        n = len - done < piece ? len - done : piece;
        rv = write ? data_write_inline(c, buf, offset + done, data + done, n,
                                       stream)
                   : data_read_inline(c, buf, offset + done, data + done, n,
                                      stream);
        if (rv != CUMOD_OK) {
            char how[96];
            snprintf(how, sizeof(how), "the piece at byte %zu of %zu", done,
                     len);
            return data_fail(fn, how, rv);
        }
    }
    return CUMOD_OK;
}

/* 1 when a transfer of len bytes goes inside one message. */
static int
data_inline(cumod_client *c, size_t len)
{
    int staged;

    if (len > data_piece_max(c))
        return 0;
    if (len <= data_inline_max())
        return 1;
    if (len >= STAGE_FIRST_MIN)
        return 0;
    nng_mtx_lock(c->stage_mtx);
    staged = c->stage != NULL;
    nng_mtx_unlock(c->stage_mtx);
    return !staged;
}

int
cumod_buffer_write(cumod_client *c, cumod_buffer buf, size_t offset,
                   const void *data, size_t len, cumod_stream stream)
{
    int rv;

    if ((rv = data_check_io("cumod_buffer_write", c, data, offset, len)) !=
        CUMOD_OK)
        return rv;
    if (data_inline(c, len))
        return data_write_inline(c, buf, offset, data, len, stream);
    return data_large(c, 1, buf, offset, (uint8_t *)data, len, stream);
}

int
cumod_buffer_read(cumod_client *c, cumod_buffer buf, size_t offset, void *data,
                  size_t len, cumod_stream stream)
{
    int rv;

    if ((rv = data_check_io("cumod_buffer_read", c, data, offset, len)) !=
        CUMOD_OK)
        return rv;
    if (data_inline(c, len))
        return data_read_inline(c, buf, offset, data, len, stream);
    return data_large(c, 0, buf, offset, data, len, stream);
}

int
cumod_buffer_memset(cumod_client *c, cumod_buffer buf, size_t offset,
                    size_t len, uint8_t value, cumod_stream stream,
                    cumod_ticket *ticket)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__Memset ms = CUMOD__MEMSET__INIT;

    if (c == NULL)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_buffer_memset: the client is "
                                       "NULL");
    if (len == 0)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_buffer_memset: length is 0");
    ms.handle = buf;
    ms.offset = offset;
    ms.length = len;
    ms.value = value;
    ms.stream = stream;
    ms.when = CUMOD__WHEN(ticket);
    req.body_case = CUMOD__REQUEST__BODY_MEMSET;
    req.memset = &ms;
    return cumod__client_done(c, &req, "cumod_buffer_memset", ticket, NULL);
}

/* One Copy request; seg is NULL for device-to-device copies. */
static int
data_copy(cumod_client *c, const char *fn, Cumod__CopyKind kind,
          const cumod_segment *seg, size_t seg_offset, cumod_buffer buf,
          size_t buf_offset, cumod_buffer src, size_t src_offset, size_t len,
          cumod_stream stream, cumod_ticket *ticket)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__Copy cp = CUMOD__COPY__INIT;
    int rv;

    if (c == NULL || (kind != CUMOD__COPY_KIND__COPY_DEVICE && seg == NULL))
        return cumod__client_set_error(CUMOD_EINVAL, "%s: NULL argument", fn);
    if (len == 0)
        return cumod__client_set_error(CUMOD_EINVAL, "%s: length is 0", fn);
    if (seg != NULL &&
        (rv = cumod__client_check_range(fn, "segment ", seg_offset, len,
                                        seg->size, "the segment")) != CUMOD_OK)
        return rv;
    cp.kind = kind;
    cp.segment = seg != NULL ? seg->handle : 0;
    cp.segment_offset = seg_offset;
    cp.buffer = buf;
    cp.buffer_offset = buf_offset;
    cp.length = len;
    cp.src_buffer = src;
    cp.src_offset = src_offset;
    cp.stream = stream;
    cp.when = CUMOD__WHEN(ticket);
    req.body_case = CUMOD__REQUEST__BODY_COPY;
    req.copy = &cp;
    return cumod__client_done(c, &req, fn, ticket, NULL);
}

int
cumod_copy_to_device(cumod_client *c, cumod_buffer dst, size_t dst_offset,
                     const cumod_segment *src, size_t src_offset, size_t len,
                     cumod_stream stream, cumod_ticket *ticket)
{
    return data_copy(c, "cumod_copy_to_device",
                     CUMOD__COPY_KIND__COPY_TO_DEVICE, src, src_offset, dst,
                     dst_offset, 0, 0, len, stream, ticket);
}

int
cumod_copy_to_host(cumod_client *c, const cumod_segment *dst, size_t dst_offset,
                   cumod_buffer src, size_t src_offset, size_t len,
                   cumod_stream stream, cumod_ticket *ticket)
{
    return data_copy(c, "cumod_copy_to_host", CUMOD__COPY_KIND__COPY_TO_HOST,
                     dst, dst_offset, src, src_offset, 0, 0, len, stream,
                     ticket);
}

int
cumod_copy_device(cumod_client *c, cumod_buffer dst, size_t dst_offset,
                  cumod_buffer src, size_t src_offset, size_t len,
                  cumod_stream stream, cumod_ticket *ticket)
{
    return data_copy(c, "cumod_copy_device", CUMOD__COPY_KIND__COPY_DEVICE,
                     NULL, 0, dst, dst_offset, src, src_offset, len, stream,
                     ticket);
}

int
cumod_stream_create(cumod_client *c, cumod_stream *out)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__CreateStream cs = CUMOD__CREATE_STREAM__INIT;
    Cumod__Reply *reply = NULL;
    cumod_stream handle;
    int rv;

    if (c == NULL || out == NULL)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_stream_create: NULL argument");
    req.body_case = CUMOD__REQUEST__BODY_CREATE_STREAM;
    req.create_stream = &cs;
    if ((rv = cumod__client_call_for(c, &req, CUMOD__REPLY__BODY_STREAM,
                                     __func__, &reply)) != CUMOD_OK)
        return rv;
    handle = reply->stream->handle;
    cumod__reply__free_unpacked(reply, NULL);
    *out = handle;
    return CUMOD_OK;
}

int
cumod_stream_destroy(cumod_client *c, cumod_stream stream)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__DestroyStream ds = CUMOD__DESTROY_STREAM__INIT;

    if (c == NULL)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_stream_destroy: the client is "
                                       "NULL");
    if (stream == 0)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_stream_destroy: stream 0 is the "
                                       "session's default stream; it cannot "
                                       "be destroyed");
    ds.handle = stream;
    req.body_case = CUMOD__REQUEST__BODY_DESTROY_STREAM;
    req.destroy_stream = &ds;
    return data_status_only(c, &req);
}

int
cumod_stream_synchronize(cumod_client *c, cumod_stream stream)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__Synchronize sy = CUMOD__SYNCHRONIZE__INIT;

    if (c == NULL)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_stream_synchronize: the client "
                                       "is NULL");
    sy.stream = stream;
    req.body_case = CUMOD__REQUEST__BODY_SYNCHRONIZE;
    req.synchronize = &sy;
    return cumod__client_done(c, &req, "cumod_stream_synchronize", NULL, NULL);
}

int
cumod_wait(cumod_client *c, cumod_ticket ticket)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__Wait w = CUMOD__WAIT__INIT;

    if (c == NULL)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_wait: the client is NULL");
    /* Ticket 0 is what the daemon hands out for work already complete. */
    if (ticket == 0) {
        cumod__client_set_error(CUMOD_OK, "%s", "");
        return CUMOD_OK;
    }
    /* A posted launch's ticket is its request id: one past this client's
     * ids was never given (the daemon cannot tell: it never saw it). */
    if ((ticket & CUMOD_TICKET_POSTED) &&
        !(ticket & (CUMOD_TICKET_POSTED << 1)) &&
        (ticket & ~CUMOD_TICKET_POSTED) > atomic_load(&c->next_id))
        return cumod__client_set_error(
            CUMOD_ENOENT,
            "cumod_wait: ticket %llu was never given to this "
            "connection",
            (unsigned long long)ticket);
    w.ticket = ticket;
    req.body_case = CUMOD__REQUEST__BODY_WAIT;
    req.wait = &w;
    return cumod__client_done(c, &req, "cumod_wait", NULL, NULL);
}
