/*
 * Segments, streams, synchronize and wait: the data-plane requests that
 * manage rather than move data.
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
#include "front.h"
#include "dataplane.h"
#include "log.h"

static void
dp_on_segment(cumod_daemon *d, void *arg, const cumod_chan_hdr *hdr,
              const void *payload, size_t len)
{
    cumod_dp_simple *x = arg;
    cumod_chan_segment sg = {0};
    (void)d;
    if (payload != NULL && len >= sizeof(sg))
        memcpy(&sg, payload, sizeof(sg));
    if (hdr->status != CUMOD_OK || sg.host == 0) {
        cumod__server_fail(
            x->w, hdr->status ? hdr->status : CUMOD_EIO,
            "the executor could not map and register the "
            "segment (%s)",
            cumod_strerror(hdr->status ? hdr->status : CUMOD_EIO));
    } else {
        cumod_seg *g = calloc(1, sizeof(*g));
        if (g == NULL) {
            cumod__server_fail(x->w, CUMOD_ENOMEM, "out of memory");
        } else {
            g->handle = x->s->next_handle++;
            g->size = sg.size;
            g->host = sg.host;
            g->next = x->s->segs;
            x->s->segs = g;
            Cumod__Reply reply = CUMOD__REPLY__INIT;
            Cumod__SegmentReply sr = CUMOD__SEGMENT_REPLY__INIT;
            sr.handle = g->handle;
            sr.size = g->size;
            reply.body_case = CUMOD__REPLY__BODY_SEGMENT;
            reply.segment = &sr;
            cumod__server_reply(x->w, &reply);
        }
    }
    cumod__session_call_done(x->s);
    free(x);
}

/* Opens a client's POSIX shared-memory segment by name, as the client:
 * the name must be a plain shm name, the object a regular file owned by
 * the peer's uid and at least size bytes long. */
void
cumod__dp_map(cumod_daemon *d, cumod_work *w, cumod_session *s)
{
    const Cumod__MapSegment *r = w->req->map_segment;
    struct stat st;
    int fd;

    if (r->name == NULL || r->name[0] != '/' || strchr(r->name + 1, '/') ||
        strlen(r->name) > 200 || r->size == 0) {
        cumod__server_fail(w, CUMOD_EINVAL,
                           "map: '%.200s' is not a shared-memory name "
                           "(\"/name\") or the size is 0",
                           r->name ? r->name : "");
        return;
    }
    fd = shm_open(r->name, O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0);
    if (fd < 0) {
        cumod__server_fail(w, errno == ENOENT ? CUMOD_ENOENT : CUMOD_EPERM,
                           "map: cannot open shared memory %s: %s", r->name,
                           strerror(errno));
        return;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        (s->uid >= 0 && st.st_uid != (uid_t)s->uid)) {
        close(fd);
        cumod__server_fail(w, CUMOD_EPERM,
                           "map: shared memory %s is not owned by the "
                           "connecting user (uid %d)",
                           r->name, s->uid);
        return;
    }
    if ((uint64_t)st.st_size < r->size) {
        close(fd);
        cumod__server_fail(w, CUMOD_EINVAL,
                           "map: shared memory %s has %lld bytes, fewer than "
                           "the %llu asked",
                           r->name, (long long)st.st_size,
                           (unsigned long long)r->size);
        return;
    }
    cumod_chan_segment sg = {.size = r->size};
    cumod__dp_call_simple(d, w, s, CUMOD_CHAN_SEG_MAP, &sg, sizeof(sg), fd,
                          dp_on_segment, 0);
    close(fd); /* the executor has its own now */
}

void
cumod__dp_unmap(cumod_daemon *d, cumod_work *w, cumod_session *s)
{
    uint64_t h = w->req->unmap_segment->handle;
    cumod_seg **pp = &s->segs;
    while (*pp != NULL && (*pp)->handle != h)
        pp = &(*pp)->next;
    if (*pp == NULL) {
        cumod__server_fail(w, CUMOD_ENOENT,
                           "unmap: segment %llu is not one of this "
                           "connection's",
                           (unsigned long long)h);
        return;
    }
    if ((*pp)->inflight > 0) {
        cumod__server_fail(w, CUMOD_EBUSY,
                           "unmap: segment %llu has %u copies in flight",
                           (unsigned long long)h, (*pp)->inflight);
        return;
    }
    cumod_seg *g = *pp;
    *pp = g->next;
    cumod_chan_segment sg = {.size = g->size, .host = g->host};
    free(g);
    cumod__dp_call_simple(d, w, s, CUMOD_CHAN_SEG_UNMAP, &sg, sizeof(sg), -1,
                          cumod__dp_on_simple, 0);
}

void
cumod__dp_stream_create(cumod_daemon *d, cumod_work *w, cumod_session *s)
{
    cumod_sstream *t = calloc(1, sizeof(*t));
    (void)d;
    if (t == NULL || s->next_stream >= (1u << 20)) {
        free(t);
        cumod__server_fail(w, CUMOD_ENOMEM, "no more streams");
        return;
    }
    /* Created by the executor on first use. */
    t->handle = s->next_handle++;
    t->key = cumod__session_stream_key(s, 0) | s->next_stream++;
    t->next = s->streams;
    s->streams = t;
    Cumod__Reply reply = CUMOD__REPLY__INIT;
    Cumod__StreamReply sr = CUMOD__STREAM_REPLY__INIT;
    sr.handle = t->handle;
    reply.body_case = CUMOD__REPLY__BODY_STREAM;
    reply.stream = &sr;
    cumod__server_reply(w, &reply);
}

void
cumod__dp_stream_destroy(cumod_daemon *d, cumod_work *w, cumod_session *s)
{
    uint64_t h = w->req->destroy_stream->handle;
    cumod_sstream **pp = &s->streams;
    while (*pp != NULL && (*pp)->handle != h)
        pp = &(*pp)->next;
    if (h == 0 || *pp == NULL) {
        cumod__server_fail(w, h == 0 ? CUMOD_EINVAL : CUMOD_ENOENT,
                           h == 0 ? "the default stream cannot be destroyed"
                                  : "stream %llu is not one of this "
                                    "connection's",
                           (unsigned long long)h);
        return;
    }
    cumod_sstream *t = *pp;
    *pp = t->next;
    cumod_chan_stream st = {.key = t->key};
    free(t);
    cumod__dp_call_simple(d, w, s, CUMOD_CHAN_STREAM_DESTROY, &st, sizeof(st),
                          -1, cumod__dp_on_simple, 0);
}

void
cumod__dp_sync(cumod_daemon *d, cumod_work *w, cumod_session *s)
{
    uint64_t key = cumod__dp_stream(s, w, w->req->synchronize->stream);
    cumod_dp_msg m;
    cumod_dp_call *c;
    if (key == 0 || (c = cumod__dp_call_new(w, s, 0)) == NULL)
        return;
    /* An empty WORK: its event completes after everything before it. */
    cumod__dp_msg_init(&m, key);
    cumod__dp_submit(d, c, &m);
    cumod__dp_msg_fini(&m);
}

void
cumod__dp_wait(cumod_daemon *d, cumod_work *w, cumod_session *s)
{
    uint64_t ticket = w->req->wait->ticket;
    cumod_ticket_rec *t = cumod__session_ticket(s, ticket);
    (void)d;
    if (t == NULL) {
        if (ticket == 0 || ticket >= s->next_ticket)
            cumod__server_fail(w, CUMOD_ENOENT,
                               "ticket %llu was never given to this "
                               "connection",
                               (unsigned long long)ticket);
        else
            cumod__dp_reply_done(w, 0, 0); /* completed and forgotten */
        return;
    }
    if (!t->done) {
        w->next = t->waiters;
        t->waiters = w;
        return;
    }
    int st = t->status;
    char *err = t->error;
    t->error = NULL;
    cumod__server_fail(w, st, "ticket %llu: %s", (unsigned long long)ticket,
                       err ? err : cumod_strerror(st));
    free(err);
}
