/* Buffers, streams, tickets and copies of libcumod. */
#include <stdint.h>
#include <string.h>

#include "client_internal.h"

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

int
cumod_buffer_write(cumod_client *c, cumod_buffer buf, size_t offset,
                   const void *data, size_t len, cumod_stream stream)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__WriteBuffer wb = CUMOD__WRITE_BUFFER__INIT;
    int rv;

    if ((rv = data_check_io("cumod_buffer_write", c, data, offset, len)) !=
        CUMOD_OK)
        return rv;
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

int
cumod_buffer_read(cumod_client *c, cumod_buffer buf, size_t offset, void *data,
                  size_t len, cumod_stream stream)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__ReadBuffer rb = CUMOD__READ_BUFFER__INIT;
    Cumod__Reply *reply = NULL;
    int rv;

    if ((rv = data_check_io("cumod_buffer_read", c, data, offset, len)) !=
        CUMOD_OK)
        return rv;
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
    w.ticket = ticket;
    req.body_case = CUMOD__REQUEST__BODY_WAIT;
    req.wait = &w;
    return cumod__client_done(c, &req, "cumod_wait", NULL, NULL);
}
