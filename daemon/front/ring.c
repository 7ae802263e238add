#include "ring.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cumod/errors.h"
#include "cumod_ring.h"
#include "decode.h"
#include "log.h"
#include "shmguard.h"

/* How many records one look takes before the loop goes on to other work.
 * A ring stays polled for --busy-poll-us after its last record. */
/* Requests this large are timed (debug level). */
#define RING_TIMED_BYTES 4096
#define RING_TAKE_MAX 64

struct cumod_ring {
    cumod_rings *rs;
    uint32_t pipe_id;
    int uid, gid, pid;
    char name[208];
    uint8_t *map;
    size_t map_len;
    int fd;                 /* the shm, kept to say what a client changed */
    cumod_shm_range *guard; /* map's SIGBUS guard (shmguard.h) */
    cumod_ring_hdr *h;
    uint8_t *sq, *cq;
    uint64_t sq_size, cq_size;
    uint64_t sq_head, cq_tail; /* ours; published to the header */
    int bell_fd;
    uv_poll_t poll;
    int poll_open;
    unsigned refs; /* the session, each request in progress, the poll */
    int closed;
    int hot;
    uint64_t last_ns;
    cumod_list_node hot_link;
};

/* A request that came through a ring. */
struct ring_req {
    cumod_req r;
    cumod_ring *g;
    Cumod__Request *req;
    cumod_decoder dec;
};
typedef struct ring_req ring_req;

static void
ring_free(cumod_ring *g)
{
    cumod__shmguard_remove(g->guard);
    if (g->map != NULL)
        munmap(g->map, g->map_len);
    if (g->fd >= 0)
        close(g->fd);
    if (g->bell_fd >= 0)
        close(g->bell_fd);
    free(g);
}

static void
ring_unref(cumod_ring *g)
{
    if (--g->refs == 0)
        ring_free(g);
}

static void
ring_on_poll_close(uv_handle_t *h)
{
    ring_unref(h->data);
}

/* The client sleeps on cq_seq: wake it (a shared futex: the word is in
 * its mapping too). */
static void
ring_wake(cumod_ring *g)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&g->h->client_waiting, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&g->h->cq_seq, 1, memory_order_release);
        syscall(SYS_futex, &g->h->cq_seq, FUTEX_WAKE, 1, NULL, NULL, 0);
    }
}

static void
ring_unhot(cumod_ring *g)
{
    if (!g->hot)
        return;
    g->hot = 0;
    cumod__list_remove(&g->hot_link);
    if (g->h != NULL)
        atomic_store_explicit(&g->h->daemon_polling, 0, memory_order_seq_cst);
}

/* Takes no more records and tells the client (through the header, also
 * if it sleeps); the session keeps its reference until it lets go. */
static void
ring_shut(cumod_ring *g)
{
    if (g->closed)
        return;
    g->closed = 1;
    g->rs->open--;
    ring_unhot(g);
    atomic_store_explicit(&g->h->closed, 1, memory_order_seq_cst);
    atomic_fetch_add_explicit(&g->h->cq_seq, 1, memory_order_release);
    syscall(SYS_futex, &g->h->cq_seq, FUTEX_WAKE, 1, NULL, NULL, 0);
    if (g->poll_open) {
        g->poll_open = 0;
        uv_poll_stop(&g->poll);
        uv_close((uv_handle_t *)&g->poll, ring_on_poll_close);
    }
}

int
cumod__ring_serving(const cumod_ring *g)
{
    return g != NULL && !g->closed;
}

void
cumod__ring_close(cumod_ring *g)
{
    if (g == NULL)
        return;
    ring_shut(g);
    ring_unref(g); /* the session's */
}

/* The client broke the ring's rules: it is given up, said once. */
static void
ring_bad(cumod_ring *g, const char *why)
{
    if (g->closed)
        return;
    g->rs->closed_bad++;
    CUMOD_LOGW("CUMOD-RING",
               "the ring %s of session %u (pid %d uid %d) is given up: %s; "
               "its client goes on over its connection",
               g->name, g->pipe_id, g->pid, g->uid, why);
    ring_shut(g);
}

/* --- answers ------------------------------------------------------------ */

/* Requests go back to a small pool, their decoder's chunk kept: a launch
 * then takes no malloc here. */
#define RING_REQ_POOL 64

static void
ring_req_free(ring_req *rr)
{
    cumod_ring *g = rr->g;
    cumod_rings *rs = g->rs;
    if (rs->npool < RING_REQ_POOL && !rs->stopped) {
        cumod__decoder_release(&rr->dec);
        rr->req = NULL;
        rs->pool[rs->npool++] = rr;
    } else {
        cumod__decoder_fini(&rr->dec);
        free(rr);
    }
    ring_unref(g);
}

static ring_req *
ring_req_new(cumod_rings *rs)
{
    ring_req *rr;
    if (rs->npool > 0) {
        rr = rs->pool[--rs->npool];
        cumod_decoder dec = rr->dec;
        memset(rr, 0, sizeof(*rr));
        rr->dec = dec;
        return rr;
    }
    if ((rr = calloc(1, sizeof(*rr))) != NULL)
        cumod__decoder_init(&rr->dec);
    return rr;
}

/* Writes one record of len bytes into cq, packed by pack; 0, or -1 when it
 * does not fit (the client leaves its replies unread). */
static int
ring_put(cumod_ring *g, const Cumod__Reply *reply, size_t len)
{
    uint64_t head = atomic_load_explicit(&g->h->cq_head, memory_order_acquire);
    uint64_t tail = g->cq_tail, size = g->cq_size;
    if (tail - head > size || (head & 7) != 0)
        return -1; /* a head the client made up */
    uint64_t free_b = size - (tail - head);
    uint64_t off = tail & (size - 1), need = cumod_ring_rec_space(len);
    uint64_t pad = size - off < need ? size - off : 0;
    if (need > size / 2 || pad + need > free_b)
        return -1;
    if (pad) {
        cumod_ring_rec pr = {.len = 0, .kind = CUMOD_RING_REC_PAD};
        memcpy(g->cq + off, &pr, sizeof(pr));
        tail += pad;
        off = 0;
    }
    cumod_ring_rec rec = {.len = (uint32_t)len, .kind = CUMOD_RING_REC_MSG};
    memcpy(g->cq + off, &rec, sizeof(rec));
    cumod__reply__pack(reply, g->cq + off + sizeof(rec));
    tail += need;
    g->cq_tail = tail;
    atomic_store_explicit(&g->h->cq_tail, tail, memory_order_release);
    ring_wake(g);
    return 0;
}

/* The ring's send: the reply as one record of its cq, the request back
 * to the pool. A ring given up meanwhile takes nothing. */
static cumod_err
ring_send(cumod_req *r, const Cumod__Reply *reply)
{
    ring_req *rr = CUMOD_CONTAINER_OF(r, ring_req, r);
    cumod_ring *g = rr->g;

    if (!g->closed) {
        size_t len = cumod__reply__get_packed_size(reply);
        if (len > g->cq_size / 4) {
            /* Too big for the ring (a large read): said so, in its place. */
            Cumod__Reply small;
            Cumod__Status big;
            cumod__reply_build(&small, &big, reply->id, CUMOD_ETOOBIG,
                               "the reply does not fit the ring: ask over "
                               "the connection",
                               NULL);
            if (ring_put(g, &small, cumod__reply__get_packed_size(&small)))
                ring_bad(g, "its completion ring is full");
        } else if (ring_put(g, reply, len) != 0) {
            ring_bad(g, "its completion ring is full (replies left unread)");
        }
    }
    ring_req_free(rr);
    return CUMOD_OK;
}

static void
ring_drop(cumod_req *r)
{
    ring_req_free(CUMOD_CONTAINER_OF(r, ring_req, r));
}

static cumod_err
ring_peer(const cumod_req *r, int *uid, int *gid, int *pid)
{
    const ring_req *rr = CUMOD_CONTAINER_OF(r, ring_req, r);
    *uid = rr->g->uid;
    *gid = rr->g->gid;
    *pid = rr->g->pid;
    return rr->g->closed ? CUMOD_ECLOSED : CUMOD_OK;
}

static const cumod_req_ops ring_req_ops = {
    .name = "ring",
    .send = ring_send,
    .drop = ring_drop,
    .peer = ring_peer,
};

int
cumod__ring_req(const cumod_req *r)
{
    return r->ops == &ring_req_ops;
}

/* --- requests ----------------------------------------------------------- */

/* One record's bytes (copied out of the shared memory): decoded and
 * dispatched as a request of the ring's session. */
static void
ring_request(cumod_ring *g, const uint8_t *bytes, size_t len)
{
    ring_req *rr = ring_req_new(g->rs);
    cumod_status st;

    if (rr == NULL) {
        CUMOD_LOGE("CUMOD-NOMEM", "a ring request is lost");
        return;
    }
    rr->g = g;
    g->refs++;
    cumod__req_begin(&rr->r, &ring_req_ops);
    rr->r.pipe_id = g->pipe_id;
    g->rs->records++;
    /* Big requests (batches) say at debug level where their time went. */
    uint64_t t0 = len >= RING_TIMED_BYTES ? cumod__mono_ns() : 0;
    cumod_err rv = cumod__decode_request(&rr->dec, bytes, len, &rr->req, &st);
    rr->r.id = rr->req != NULL ? rr->req->id : 0;
    if (rv != CUMOD_OK) {
        cumod__req_fail(&rr->r, &st);
        return;
    }
    rr->r.msg = rr->req;
    uint64_t t1 = t0 ? cumod__mono_ns() : 0;
    g->rs->cb(g->rs->arg, &rr->r);
    if (t0)
        CUMOD_LOGD("CUMOD-RING-TIMING",
                   "a %zu-byte request: decoded in %.1f us, checked and sent "
                   "on in %.1f us",
                   len, (double)(t1 - t0) / 1e3,
                   (double)(cumod__mono_ns() - t1) / 1e3);
}

/* The ring's memory raised SIGBUS (its client shrank it): the guard put
 * zeros in its place; the ring is given up, saying what changed. -1. */
static int
ring_gone(cumod_ring *g)
{
    struct stat sb;
    char why[256];
    if (fstat(g->fd, &sb) == 0)
        snprintf(why, sizeof(why),
                 "its shared memory was truncated under cumodd: %lld bytes "
                 "now, %zu when it was opened (a read raised SIGBUS; cumodd "
                 "reads zeros in its place)",
                 (long long)sb.st_size, g->map_len);
    else
        snprintf(why, sizeof(why),
                 "its shared memory changed under cumodd (a read raised "
                 "SIGBUS; cumodd reads zeros in its place)");
    ring_bad(g, why);
    return -1;
}

int
cumod__ring_next(const uint8_t *sq, uint64_t size, uint64_t head, uint64_t tail,
                 cumod_ring_rec *rec, uint64_t *step, const char **why)
{
    if (tail == head)
        return 0;
    if (tail - head > size || (tail & 7) != 0) {
        *why = "its submission index is out of bounds";
        return -1;
    }
    uint64_t off = head & (size - 1), to_end = size - off;
    memcpy(rec, sq + off, sizeof(*rec)); /* read once */
    if (rec->kind == CUMOD_RING_REC_PAD) {
        *step = to_end;
    } else if (rec->kind == CUMOD_RING_REC_MSG && rec->len <= size / 2) {
        *step = cumod_ring_rec_space(rec->len);
    } else {
        *why = "a record has an unknown kind or length";
        return -1;
    }
    if (*step > to_end || *step > tail - head) {
        *why = "a record runs past what was written";
        return -1;
    }
    return 1;
}

/* Takes up to RING_TAKE_MAX records; returns how many, or -1 when the
 * ring broke. Each read of the client's memory is followed by a look at
 * its guard: a SIGBUS in between left zeros, not the client's bytes. */
static int
ring_take(cumod_ring *g)
{
    uint8_t stackbuf[4096];
    int n = 0;

    while (!g->closed && n < RING_TAKE_MAX) {
        uint64_t tail =
            atomic_load_explicit(&g->h->sq_tail, memory_order_acquire);
        uint64_t head = g->sq_head, size = g->sq_size, step = 0;
        const char *why = NULL;
        cumod_ring_rec rec;
        if (cumod__shmguard_bad(g->guard))
            return ring_gone(g);
        int got = cumod__ring_next(g->sq, size, head, tail, &rec, &step, &why);
        if (cumod__shmguard_bad(g->guard))
            return ring_gone(g);
        if (got == 0)
            break;
        if (got < 0) {
            ring_bad(g, why);
            return -1;
        }
        uint64_t off = head & (size - 1);
        if (rec.kind == CUMOD_RING_REC_MSG) {
            /* Out of the shared memory first: the client could change the
             * bytes while they are decoded. */
            uint8_t *buf =
                rec.len <= sizeof(stackbuf) ? stackbuf : malloc(rec.len);
            if (buf == NULL) {
                ring_bad(g, "out of memory for a record");
                return -1;
            }
            memcpy(buf, g->sq + off + sizeof(rec), rec.len);
            if (cumod__shmguard_bad(g->guard)) {
                if (buf != stackbuf)
                    free(buf);
                return ring_gone(g);
            }
            g->sq_head = head + step;
            atomic_store_explicit(&g->h->sq_head, g->sq_head,
                                  memory_order_release);
            g->refs++; /* the request may close the ring */
            ring_request(g, buf, rec.len);
            if (buf != stackbuf)
                free(buf);
            int closed = g->closed;
            ring_unref(g);
            if (closed)
                return -1;
            n++;
        } else {
            g->sq_head = head + step;
            atomic_store_explicit(&g->h->sq_head, g->sq_head,
                                  memory_order_release);
        }
    }
    return n;
}

/* --- polling ------------------------------------------------------------ */

/* One callback of the idle handle spins this long at most before libuv
 * looks at its descriptors and timers again: before, every look at the
 * rings was one turn of the loop, an epoll_wait and two clock reads, and
 * at 8 clients on the H100 those were half the front's time (perf). */
#define RINGS_SPIN_NS 20000
/* ...and gives the loop back sooner once it has done something, so that
 * what came meanwhile on a socket (nng, the executor's) waits little. */
#define RINGS_SPIN_BUSY_NS 5000

static void rings_on_idle(uv_idle_t *h);

/* The pollers are told the loop spins (0) or sleeps (1); what they found
 * while saying so. */
static int
rings_pollers_sleep(cumod_rings *rs, int sleeping)
{
    int found = 0;
    for (cumod_list_node *n = cumod__list_first(&rs->pollers); n != NULL;) {
        cumod_rings_poller *p = CUMOD_CONTAINER_OF(n, cumod_rings_poller, link);
        uint64_t gen = rs->pollers_gen;
        n = cumod__list_next(&rs->pollers, n);
        found += p->sleep(p->arg, sleeping);
        if (gen != rs->pollers_gen)
            break; /* the list changed under us: enough for this time */
    }
    return found;
}

static void
rings_idle_start(cumod_rings *rs)
{
    if (rs->idle_on || rs->stopped)
        return;
    rs->idle_on = 1;
    uv_idle_start(&rs->idle, rings_on_idle);
    (void)rings_pollers_sleep(rs, 0);
}

/* g had records: poll it without doorbells for a while. */
static void
ring_heat(cumod_ring *g)
{
    cumod_rings *rs = g->rs;
    g->last_ns = cumod__mono_ns();
    if (g->hot || g->closed)
        return;
    g->hot = 1;
    cumod__list_append(&rs->hot, &g->hot_link);
    atomic_store_explicit(&g->h->daemon_polling, 1, memory_order_seq_cst);
    rings_idle_start(rs);
}

/* One look at every hot ring and every poller: how much was taken. */
static int
rings_pass(cumod_rings *rs, uint64_t now)
{
    int found = 0;
    cumod_list_node *n = cumod__list_first(&rs->hot);

    while (n != NULL) {
        cumod_ring *g = CUMOD_CONTAINER_OF(n, cumod_ring, hot_link);
        n = cumod__list_next(&rs->hot, n);
        g->refs++;
        int got = ring_take(g);
        if (got > 0) {
            g->last_ns = now;
            found += got;
        } else if (got == 0 &&
                   now - g->last_ns > (uint64_t)rs->cfg->busy_poll_us * 1000u) {
            /* Cold: tell the client to ring again, then look once more
             * (it may have written just before it saw the flag drop). */
            ring_unhot(g);
            if (ring_take(g) > 0)
                ring_heat(g);
        }
        ring_unref(g);
    }
    for (n = cumod__list_first(&rs->pollers); n != NULL && !rs->stopped;) {
        cumod_rings_poller *p = CUMOD_CONTAINER_OF(n, cumod_rings_poller, link);
        uint64_t gen = rs->pollers_gen;
        n = cumod__list_next(&rs->pollers, n);
        found += p->poll(p->arg);
        if (gen != rs->pollers_gen)
            break;
    }
    return found;
}

static void
rings_on_idle(uv_idle_t *h)
{
    cumod_rings *rs = h->data;
    uint64_t start = cumod__mono_ns(), now = start;
    int found = 0;

    /* No sched_yield() when a look finds nothing: measured on the H100
     * (three runs each, same machine), yielding here put the fast path's
     * p99 at 34-102 us, not yielding at 33-40 us; a yield can hand the
     * core away for a whole time slice. */
    for (unsigned pass = 1; rs->idle_on && !rs->stopped; pass++) {
        found += rings_pass(rs, now);
        /* The clock every few passes: it was a tenth of the front's time
         * read on every one. */
        if (found == 0 && (pass & 7) != 0)
            continue;
        now = cumod__mono_ns();
        if (now - start >= (found ? RINGS_SPIN_BUSY_NS : RINGS_SPIN_NS))
            break;
        if (cumod__list_empty(&rs->hot) && now >= rs->spin_until_ns)
            break;
    }
    if (!rs->idle_on || rs->stopped)
        return;
    if (cumod__list_empty(&rs->hot) && now >= rs->spin_until_ns) {
        /* To sleep in epoll: the pollers say how to be woken, and look
         * once more. */
        if (rings_pollers_sleep(rs, 1) > 0) {
            (void)rings_pollers_sleep(rs, 0);
            return;
        }
        rs->idle_on = 0;
        uv_idle_stop(&rs->idle);
    }
}

void
cumod__rings_spin(cumod_rings *rs, unsigned us)
{
    if (us == 0)
        return;
    uint64_t until = cumod__mono_ns() + (uint64_t)us * 1000u;
    if (until > rs->spin_until_ns)
        rs->spin_until_ns = until;
    rings_idle_start(rs);
}

void
cumod__rings_poller_add(cumod_rings *rs, cumod_rings_poller *p)
{
    cumod__list_append(&rs->pollers, &p->link);
    p->rs = rs;
    rs->pollers_gen++;
    (void)p->sleep(p->arg, !rs->idle_on);
}

void
cumod__rings_poller_remove(cumod_rings_poller *p)
{
    if (!cumod__list_node_active(&p->link))
        return;
    cumod__list_remove(&p->link);
    /* A walk of the list in progress stops at its next step. */
    p->rs->pollers_gen++;
}

static void
ring_on_bell(uv_poll_t *h, int status, int events)
{
    cumod_ring *g = h->data;
    char drain[256];
    (void)events;
    if (status < 0) {
        ring_bad(g, "its doorbell failed");
        return;
    }
    while (read(g->bell_fd, drain, sizeof(drain)) > 0)
        ;
    g->refs++;
    if (ring_take(g) >= 0)
        ring_heat(g);
    ring_unref(g);
}

void
cumod__rings_init(cumod_rings *rs, uv_loop_t *loop, const cumod_config *cfg,
                  void (*cb)(void *arg, cumod_req *r), void *arg)
{
    memset(rs, 0, sizeof(*rs));
    rs->loop = loop;
    rs->cfg = cfg;
    rs->cb = cb;
    rs->arg = arg;
    cumod__list_init(&rs->hot);
    cumod__list_init(&rs->pollers);
    uv_idle_init(loop, &rs->idle);
    rs->idle.data = rs;
}

void
cumod__rings_close(cumod_rings *rs)
{
    rs->stopped = 1;
    while (rs->npool > 0) {
        ring_req *rr = rs->pool[--rs->npool];
        cumod__decoder_fini(&rr->dec);
        free(rr);
    }
    while (!cumod__list_empty(&rs->hot))
        ring_unhot(CUMOD_CONTAINER_OF(cumod__list_first(&rs->hot), cumod_ring,
                                      hot_link));
    rs->idle_on = 0;
    uv_idle_stop(&rs->idle);
    uv_close((uv_handle_t *)&rs->idle, NULL);
}

/* --- opening ------------------------------------------------------------ */

static int
ring_pow2(uint64_t v)
{
    return v >= CUMOD_RING_MIN && v <= CUMOD_RING_MAX && (v & (v - 1)) == 0;
}

/* OpenRing's name, connection and size, before anything is opened. */
static cumod_err
ring_check(const char *name, int uid, uint64_t size, cumod_status *st)
{
    size_t n = name ? strlen(name) : 0;
    uint64_t want = (uint64_t)CUMOD_RING_HDR_SIZE + 2 * CUMOD_RING_MAX;

    if (n < 2 || n > 200 || name[0] != '/' ||
        strspn(name + 1, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                         "abcdefghijklmnopqrstuvwxyz0123456789_.-") != n - 1 ||
        strcmp(name, "/.") == 0 || strcmp(name, "/..") == 0)
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "ring: '%.200s' is not a shared-memory name "
                                 "(\"/name\")",
                                 name ? name : "");
    if (uid < 0)
        return cumod__status_set(st, CUMOD_EPERM,
                                 "ring: needs a local (ipc://) connection, "
                                 "whose owner cumodd can check");
    if (size < CUMOD_RING_HDR_SIZE + 2 * CUMOD_RING_MIN || size > want)
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "ring: %llu bytes is not a ring's size",
                                 (unsigned long long)size);
    return CUMOD_OK;
}

/* Maps g's shared memory name (size bytes), a file of uid's, guarded. */
static cumod_err
ring_map(cumod_ring *g, const char *name, int uid, uint64_t size,
         cumod_status *st)
{
    struct stat sb;
    int fd = shm_open(name, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0);
    if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) ||
        sb.st_uid != (uid_t)uid) {
        cumod__status_set(st, fd < 0 ? CUMOD_ENOENT : CUMOD_EPERM,
                          "ring: shared memory %s %s", name,
                          fd < 0 ? "cannot be opened"
                                 : "is not a file of the connecting user's");
        if (fd >= 0)
            close(fd);
        return st->code;
    }
    if ((uint64_t)sb.st_size < size) {
        cumod__status_set(st, CUMOD_EPERM,
                          "ring: shared memory %s has %lld bytes, fewer than "
                          "the %llu given",
                          name, (long long)sb.st_size,
                          (unsigned long long)size);
        close(fd);
        return st->code;
    }
    g->map_len = size;
    g->map = mmap(NULL, g->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    g->fd = fd;
    if (g->map == MAP_FAILED) {
        g->map = NULL;
        cumod__status_set(st, CUMOD_ENOMEM, "ring: cannot map %s: %s", name,
                          strerror(errno));
        return st->code;
    }
    /* The client may shrink it from now on: every touch is guarded. */
    if (cumod__shmguard_add(g->map, g->map_len, &g->guard) != CUMOD_OK) {
        cumod__status_set(st, CUMOD_ENOMEM, "ring: cannot guard %s", name);
        return st->code;
    }
    return CUMOD_OK;
}

/* Reads g's header once, and its positions: a ring this cumodd knows. */
static cumod_err
ring_header(cumod_ring *g, const char *name, cumod_status *st)
{
    /* The header, read once. */
    g->h = (cumod_ring_hdr *)g->map;
    uint64_t magic = g->h->magic, sq = g->h->sq_size, cq = g->h->cq_size;
    uint32_t version = g->h->version, hdr = g->h->hdr_size;
    if (cumod__shmguard_bad(g->guard)) {
        cumod__status_set(st, CUMOD_EPERM,
                          "ring: %s was truncated while cumodd read its header",
                          name);
        return st->code;
    }
    if (magic != CUMOD_RING_MAGIC || version != CUMOD_RING_VERSION ||
        hdr != CUMOD_RING_HDR_SIZE || !ring_pow2(sq) || !ring_pow2(cq) ||
        hdr + sq + cq > g->map_len) {
        cumod__status_set(st, CUMOD_EINVAL,
                          "ring: %s has no ring header this cumodd knows "
                          "(version %u, rings %llu and %llu bytes)",
                          name, version, (unsigned long long)sq,
                          (unsigned long long)cq);
        return st->code;
    }
    g->sq_size = sq;
    g->cq_size = cq;
    g->sq = g->map + hdr;
    g->cq = g->sq + sq;
    g->sq_head = atomic_load(&g->h->sq_head);
    g->cq_tail = atomic_load(&g->h->cq_tail);
    if (cumod__shmguard_bad(g->guard)) {
        cumod__status_set(st, CUMOD_EPERM,
                          "ring: %s was truncated while cumodd read its header",
                          name);
        return st->code;
    }
    if ((g->sq_head & 7) || (g->cq_tail & 7)) {
        cumod__status_set(st, CUMOD_EINVAL, "ring: %s has odd positions", name);
        return st->code;
    }
    return CUMOD_OK;
}

/* Opens and polls g's doorbell, a FIFO of uid's beside its memory. */
static cumod_err
ring_bell(cumod_rings *rs, cumod_ring *g, const char *name, int uid,
          cumod_status *st)
{
    char bell[256];
    struct stat sb;

    /* The doorbell: a FIFO beside it, the user's too. */
    snprintf(bell, sizeof(bell), "/dev/shm%s.bell", name);
    g->bell_fd = open(bell, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (g->bell_fd < 0 || fstat(g->bell_fd, &sb) != 0 ||
        !S_ISFIFO(sb.st_mode) || sb.st_uid != (uid_t)uid) {
        cumod__status_set(st, CUMOD_EPERM,
                          "ring: its doorbell %s is not a FIFO of the "
                          "connecting user's",
                          bell);
        return st->code;
    }
    if (uv_poll_init(rs->loop, &g->poll, g->bell_fd) != 0) {
        cumod__status_set(st, CUMOD_EIO, "ring: cannot poll its doorbell");
        return st->code;
    }
    g->poll.data = g;
    g->poll_open = 1;
    g->refs++; /* the poll handle's, given back in its close callback */
    uv_poll_start(&g->poll, UV_READABLE, ring_on_bell);
    return CUMOD_OK;
}

cumod_err
cumod__ring_open(cumod_rings *rs, const Cumod__OpenRing *q, uint32_t pipe_id,
                 int uid, int gid, int pid, cumod_ring **out, cumod_status *st)
{
    const char *name = q->name;

    if (ring_check(name, uid, q->size, st) != CUMOD_OK)
        return st->code;
    cumod_ring *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return cumod__status_set(st, CUMOD_ENOMEM, "out of memory");
    g->bell_fd = -1;
    g->fd = -1;
    g->rs = rs;
    g->refs = 1;
    g->pipe_id = pipe_id;
    g->uid = uid;
    g->gid = gid;
    g->pid = pid;
    snprintf(g->name, sizeof(g->name), "%s", name);
    cumod__list_node_init(&g->hot_link);
    if (ring_map(g, name, uid, q->size, st) != CUMOD_OK ||
        ring_header(g, name, st) != CUMOD_OK ||
        ring_bell(rs, g, name, uid, st) != CUMOD_OK) {
        ring_free(g);
        return st->code;
    }
    atomic_store(&g->h->closed, 0);
    rs->opened++;
    rs->open++;
    CUMOD_LOGD("CUMOD-RING",
               "session %u (pid %d): ring %s open, %llu + %llu "
               "bytes",
               pipe_id, pid, name, (unsigned long long)g->sq_size,
               (unsigned long long)g->cq_size);
    *out = g;
    /* What came before the open was answered already: look now. */
    if (ring_take(g) > 0)
        ring_heat(g);
    return CUMOD_OK;
}

void
cumod__ring_sizes(const cumod_ring *g, uint64_t *sq, uint64_t *cq)
{
    *sq = g->sq_size;
    *cq = g->cq_size;
}
