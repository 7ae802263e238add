/* SPDX-License-Identifier: MIT */
/*
 * Opening a ring (ring.h): OpenRing's name and size checked, the client's
 * shared memory opened and mapped (a file of the connecting user's, under
 * a SIGBUS guard), its header read once, its doorbell FIFO opened and
 * polled; then the ring runs (ring.c). Or, with a token, the memfd and
 * doorbell pipe the client handed over at fdpass.c's socket, taken there
 * for the connection's own process.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cumod/errors.h"
#include "cumod_ring.h"
#include "common/log.h"
#include "front/transport/fdpass.h"
#include "front/transport/ring_impl.h"

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

/* Maps fd (what is called label in messages; size bytes), a file of
 * uid's, guarded; g owns fd from here. Handed over (sealed), it must be
 * sealed against shrinking: then no one can truncate it under cumodd. */
static cumod_err
ring_map_fd(cumod_ring *g, int fd, const char *label, int uid, uint64_t size,
            int sealed, cumod_status *st)
{
    g->fd = fd;
    g->sealed = sealed;
    /* Short, a ring is refused as not permitted (the client cut it). */
    if (cumod__fdpass_check_memory(fd, uid, size, sealed, "ring", label,
                                   CUMOD_EPERM, st) != CUMOD_OK)
        return st->code;
    g->map_len = size;
    g->map = mmap(NULL, g->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (g->map == MAP_FAILED) {
        int e = errno;
        g->map = NULL;
        /* Not permitted: the client's doing (sealed against writing). */
        return cumod__status_set(
            st, e == EPERM || e == EACCES ? CUMOD_EPERM : CUMOD_ENOMEM,
            "ring: cannot map %s for writing: %s", label, strerror(e));
    }
    /* The client may shrink it from now on: every touch is guarded. */
    if (cumod__shmguard_add(g->map, g->map_len, &g->guard) != CUMOD_OK)
        return cumod__status_set(st, CUMOD_ENOMEM, "ring: cannot guard %s",
                                 label);
    return CUMOD_OK;
}

/* Maps g's shared memory name (size bytes), a file of uid's, guarded. */
static cumod_err
ring_map(cumod_ring *g, const char *name, int uid, uint64_t size,
         cumod_status *st)
{
    int fd = shm_open(name, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0);
    if (fd < 0)
        return cumod__status_set(st, CUMOD_ENOENT,
                                 "ring: shared memory %s cannot be opened: %s",
                                 name, strerror(errno));
    return ring_map_fd(g, fd, name, uid, size, 0, st);
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

/* Polls g's doorbell fd (g owns it), a FIFO or pipe of uid's. */
static cumod_err
ring_bell_fd(cumod_rings *rs, cumod_ring *g, int fd, const char *label, int uid,
             cumod_status *st)
{
    struct stat sb;

    g->bell_fd = fd;
    if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISFIFO(sb.st_mode) ||
        sb.st_uid != (uid_t)uid)
        return cumod__status_set(st, CUMOD_EPERM,
                                 "ring: its doorbell %s is not a FIFO or pipe "
                                 "of the connecting user's",
                                 label);
    /* Never block on it, whoever made it. */
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
        return cumod__status_set(st, CUMOD_EIO,
                                 "ring: cannot make its doorbell non-blocking");
    if (uv_poll_init(rs->loop, &g->poll, g->bell_fd) != 0) {
        cumod__status_set(st, CUMOD_EIO, "ring: cannot poll its doorbell");
        return st->code;
    }
    g->poll.data = g;
    g->poll_open = 1;
    g->refs++; /* the poll handle's, given back in its close callback */
    uv_poll_start(&g->poll, UV_READABLE, cumod__ring_on_bell);
    return CUMOD_OK;
}

/* Opens and polls g's doorbell, a FIFO of uid's beside its memory. */
static cumod_err
ring_bell(cumod_rings *rs, cumod_ring *g, const char *name, int uid,
          cumod_status *st)
{
    char bell[256];

    /* The doorbell: a FIFO beside it, the user's too. */
    snprintf(bell, sizeof(bell), "/dev/shm%s.bell", name);
    int fd = open(bell, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    return ring_bell_fd(rs, g, fd, bell, uid, st);
}

/* OpenRing with a token: its memfd and doorbell, handed over at fp. */
static cumod_err
ring_open_handed(cumod_rings *rs, cumod_ring *g, struct cumod_fdpass *fp,
                 const Cumod__OpenRing *q, cumod_status *st)
{
    int fds[2];

    if (cumod__fdpass_take(fp, q->fd_token.data, q->fd_token.len, g->pid,
                           g->uid, fds, 2, st) != CUMOD_OK) {
        /* Its own words, as the ring's. */
        char why[sizeof(st->msg)];
        snprintf(why, sizeof(why), "%s", st->msg);
        return cumod__status_set(st, st->code, "ring: %s", why);
    }
    if (ring_map_fd(g, fds[0], g->name, g->uid, q->size, 1, st) != CUMOD_OK) {
        close(fds[1]);
        return st->code;
    }
    if (ring_header(g, g->name, st) != CUMOD_OK) {
        close(fds[1]);
        return st->code;
    }
    return ring_bell_fd(rs, g, fds[1], "handed over", g->uid, st);
}

cumod_err
cumod__ring_open(cumod_rings *rs, struct cumod_fdpass *fp,
                 const Cumod__OpenRing *q, uint32_t pipe_id, int uid, int gid,
                 int pid, cumod_ring **out, cumod_status *st)
{
    int handed = q->fd_token.len > 0;
    const char *name = handed ? "(a memfd handed over)" : q->name;

    if (handed ? ring_check("/memfd", uid, q->size, st) != CUMOD_OK
               : ring_check(name, uid, q->size, st) != CUMOD_OK)
        return st->code;
    cumod_ring *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return cumod__status_set(st, CUMOD_ENOMEM, "out of memory");
    g->bell_fd = -1;
    g->fd = -1;
    g->st_fd = -1;
    g->rs = rs;
    g->refs = 1;
    g->pipe_id = pipe_id;
    g->uid = uid;
    g->gid = gid;
    g->pid = pid;
    snprintf(g->name, sizeof(g->name), "%s", name);
    cumod__list_node_init(&g->hot_link);
    if (handed ? ring_open_handed(rs, g, fp, q, st) != CUMOD_OK
               : (ring_map(g, name, uid, q->size, st) != CUMOD_OK ||
                  ring_header(g, name, st) != CUMOD_OK ||
                  ring_bell(rs, g, name, uid, st) != CUMOD_OK)) {
        cumod__ring_free(g);
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
    if (cumod__ring_take(g) > 0)
        cumod__ring_heat(g);
    return CUMOD_OK;
}

int
cumod__ring_sealed(const cumod_ring *g)
{
    return g->sealed;
}

void
cumod__ring_sizes(const cumod_ring *g, uint64_t *sq, uint64_t *cq)
{
    *sq = g->sq_size;
    *cq = g->cq_size;
}
