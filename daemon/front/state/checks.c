/* SPDX-License-Identifier: MIT */
#include "front/state/checks.h"

#include <stdio.h>
#include <string.h>

#include "cumod/errors.h"
#include "front/state/seg_guard.h"

cumod_err
cumod__check_range(const cumod_session *s, const char *what, uint64_t handle,
                   uint64_t offset, uint64_t len, cumod_buf **out,
                   cumod_status *st)
{
    cumod_buf *b = cumod__session_buf(s, handle);
    if (b == NULL)
        return cumod__status_set(
            st, CUMOD_ENOENT, "%s: buffer %llu is not one of this connection's",
            what, (unsigned long long)handle);
    if (b->lost)
        return cumod__status_set(
            st, CUMOD_ECTXLOST,
            "%s: buffer %llu was lost with the CUDA context when the "
            "executor restarted%s%.300s%s: free it and allocate again",
            what, (unsigned long long)handle, s->lost_why[0] ? " (after " : "",
            s->lost_why, s->lost_why[0] ? ")" : "");
    if (offset > b->size || len > b->size - offset)
        return cumod__status_set(
            st, CUMOD_EINVAL,
            "%s: offset %llu + length %llu is past the "
            "end of buffer %llu (%llu bytes)",
            what, (unsigned long long)offset, (unsigned long long)len,
            (unsigned long long)handle, (unsigned long long)b->size);
    *out = b;
    return CUMOD_OK;
}

cumod_err
cumod__check_stream(const cumod_session *s, uint64_t handle, uint64_t *key,
                    cumod_status *st)
{
    uint64_t k = cumod__session_stream_key(s, handle);
    if (k == 0)
        return cumod__status_set(st, CUMOD_ENOENT,
                                 "stream %llu is not one of this connection's",
                                 (unsigned long long)handle);
    *key = k;
    return CUMOD_OK;
}

/* A launch's buffer argument, as the session holds it. */
static cumod_err
check_session_buf(const void *arg, const char *what, uint64_t handle,
                  uint64_t offset, uint64_t *dptr, cumod_status *st)
{
    cumod_buf *b;
    cumod_err rv = cumod__check_range(arg, what, handle, offset, 0, &b, st);
    if (rv == CUMOD_OK)
        *dptr = b->dptr;
    return rv;
}

cumod_err
cumod__check_launch(const cumod_session *s, const cumod_chan_device *dev,
                    const cumod_kernel *k, const Cumod__Launch *l,
                    const cumod_launch_opts *opts, cumod_launch_packed *out,
                    cumod_status *st)
{
    return cumod__launch_check(dev, k, l, opts, check_session_buf, s, out, st);
}

cumod_err
cumod__check_copy(const cumod_session *s, const Cumod__Copy *r,
                  cumod_work_item *it, cumod_seg **segp, cumod_status *st)
{
    cumod_buf *b, *src;
    cumod_err rv;

    memset(it, 0, sizeof(*it));
    *segp = NULL;
    if ((rv = cumod__check_range(s, "copy", r->buffer, r->buffer_offset,
                                 r->length, &b, st)))
        return rv;
    if (r->kind == CUMOD__COPY_KIND__COPY_DEVICE) {
        if ((rv = cumod__check_range(s, "copy (source)", r->src_buffer,
                                     r->src_offset, r->length, &src, st)))
            return rv;
        it->op = CUMOD_WORK_DTOD;
        it->a = b->dptr + r->buffer_offset;
        it->b = src->dptr + r->src_offset;
        it->c = r->length;
        return CUMOD_OK;
    }
    cumod_seg *g = cumod__session_seg(s, r->segment);
    if (g == NULL)
        return cumod__status_set(st, CUMOD_ENOENT,
                                 "copy: segment %llu is not one of this "
                                 "connection's",
                                 (unsigned long long)r->segment);
    if (g->lost)
        return cumod__status_set(
            st, CUMOD_ECTXLOST,
            "copy: segment %llu was lost with the CUDA context when the "
            "executor restarted%s%.300s%s: destroy it and create another",
            (unsigned long long)r->segment, s->lost_why[0] ? " (after " : "",
            s->lost_why, s->lost_why[0] ? ")" : "");
    if ((rv = cumod__seg_intact(s, g, st)) != CUMOD_OK)
        return rv;
    if (r->segment_offset > g->size || r->length > g->size - r->segment_offset)
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "copy: offset %llu + length %llu is past the "
                                 "end of segment %llu (%llu bytes)",
                                 (unsigned long long)r->segment_offset,
                                 (unsigned long long)r->length,
                                 (unsigned long long)r->segment,
                                 (unsigned long long)g->size);
    uint64_t host = g->host + r->segment_offset;
    uint64_t dev = b->dptr + r->buffer_offset;
    if (r->kind == CUMOD__COPY_KIND__COPY_TO_DEVICE) {
        it->op = CUMOD_WORK_HTOD;
        it->a = dev;
        it->b = host;
    } else if (r->kind == CUMOD__COPY_KIND__COPY_TO_HOST) {
        it->op = CUMOD_WORK_DTOH;
        it->a = host;
        it->b = dev;
    } else {
        return cumod__status_set(st, CUMOD_EINVAL, "copy: unknown kind %d",
                                 (int)r->kind);
    }
    it->c = r->length;
    *segp = g;
    return CUMOD_OK;
}

cumod_err
cumod__check_memset(const cumod_session *s, const Cumod__Memset *r,
                    cumod_work_item *it, cumod_status *st)
{
    cumod_buf *b;
    cumod_err rv;

    if ((rv = cumod__check_range(s, "memset", r->handle, r->offset, r->length,
                                 &b, st)))
        return rv;
    if (r->value > 255)
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "memset: value %u is not a byte (0-255)",
                                 r->value);
    *it = (cumod_work_item){.op = CUMOD_WORK_MEMSET,
                            .a = b->dptr + r->offset,
                            .b = r->value,
                            .c = r->length};
    return CUMOD_OK;
}

cumod_err
cumod__check_write(const cumod_session *s, const Cumod__WriteBuffer *r,
                   cumod_work_item *it, cumod_status *st)
{
    cumod_buf *b;
    cumod_err rv;

    if ((rv = cumod__check_range(s, "write", r->handle, r->offset, r->data.len,
                                 &b, st)))
        return rv;
    *it = (cumod_work_item){
        .op = CUMOD_WORK_WRITE, .a = b->dptr + r->offset, .c = r->data.len};
    return CUMOD_OK;
}

cumod_err
cumod__check_read(const cumod_session *s, const Cumod__ReadBuffer *r,
                  size_t max_reply, cumod_work_item *it, cumod_status *st)
{
    cumod_buf *b;
    cumod_err rv;

    if ((rv = cumod__check_range(s, "read", r->handle, r->offset, r->length, &b,
                                 st)))
        return rv;
    if (r->length > max_reply)
        return cumod__status_set(st, CUMOD_ETOOBIG,
                                 "read: %llu bytes do not fit a reply (at most "
                                 "%zu): use a shared segment",
                                 (unsigned long long)r->length, max_reply);
    *it = (cumod_work_item){
        .op = CUMOD_WORK_READ, .b = b->dptr + r->offset, .c = r->length};
    return CUMOD_OK;
}

cumod_err
cumod__check_segment_name(const Cumod__MapSegment *r, cumod_status *st)
{
    size_t n = r->name ? strlen(r->name) : 0;
    /* One component of [A-Za-z0-9_.-], not "." or "..": a name in
     * /dev/shm and nowhere else. */
    if (n < 2 || n > 200 || r->name[0] != '/' ||
        strspn(r->name + 1, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                            "abcdefghijklmnopqrstuvwxyz"
                            "0123456789_.-") != n - 1 ||
        strcmp(r->name, "/.") == 0 || strcmp(r->name, "/..") == 0 ||
        r->size == 0)
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "map: '%.200s' is not a shared-memory name "
                                 "(\"/name\") or the size is 0",
                                 r->name ? r->name : "");
    return CUMOD_OK;
}

static cumod_err
check_gemm_buf(const void *arg, const char *what, uint64_t handle,
               uint64_t *dptr, uint64_t *size, cumod_status *st)
{
    cumod_buf *b;
    cumod_err rv = cumod__check_range(arg, what, handle, 0, 0, &b, st);
    if (rv == CUMOD_OK) {
        *dptr = b->dptr;
        *size = b->size;
    }
    return rv;
}

cumod_err
cumod__check_gemm(const cumod_session *s, const Cumod__Gemm *r,
                  cumod_chan_gemm *out, cumod_status *st)
{
    return cumod__gemm_check(r, check_gemm_buf, s, out, st);
}
