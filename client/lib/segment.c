/* SPDX-License-Identifier: MIT */
/* POSIX shared-memory segments shared with cumodd: bulk data without
 * copying it through messages. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "client_internal.h"

/* Segment names are unique per process across all its clients: shm names
 * share one namespace on the machine, so the counter is the process's, not
 * a client's. The random part keeps a reused pid (another container, a
 * process that died before unlinking) from colliding; O_EXCL does the
 * rest. */
static _Atomic uint64_t segment_counter;

static void
segment_name(char *buf, size_t cap)
{
    uint32_t r;

    if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        r = (uint32_t)ts.tv_nsec ^ (uint32_t)ts.tv_sec;
    }
    snprintf(buf, cap, "/cumod-%ld-%llu-%08x", (long)getpid(),
             (unsigned long long)atomic_fetch_add(&segment_counter, 1),
             (unsigned)r);
}

/* Creates and maps a fresh segment of size bytes under a new name (in
 * name). On success *data is the mapping and the name exists; the fd is
 * closed: the mapping keeps the memory. */
static int
segment_make(char *name, size_t cap, size_t size, void **data)
{
    int fd = -1, err;
    void *p;

    for (int tries = 0; fd < 0; tries++) {
        segment_name(name, cap);
        fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
        if (fd < 0 && (errno != EEXIST || tries == 8)) {
            err = errno;
            return cumod__client_set_error(
                err == ENOMEM || err == ENOSPC ? CUMOD_ENOMEM : CUMOD_EIO,
                "cumod_segment_create: shm_open %s: %s", name, strerror(err));
        }
    }
    if (ftruncate(fd, (off_t)size) != 0) {
        err = errno;
        close(fd);
        shm_unlink(name);
        return cumod__client_set_error(
            CUMOD_ENOMEM,
            "cumod_segment_create: cannot size %s to %zu bytes: %s", name, size,
            strerror(err));
    }
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    err = errno;
    close(fd);
    if (p == MAP_FAILED) {
        shm_unlink(name);
        return cumod__client_set_error(
            CUMOD_ENOMEM, "cumod_segment_create: cannot map %s (%zu bytes): %s",
            name, size, strerror(err));
    }
    *data = p;
    return CUMOD_OK;
}

/* Maps size bytes in cumodd: a sealed memfd handed over (handover.c),
 * which a cumodd of another user can map (handed), or a name in /dev/shm;
 * *data is the memory (unmapped on failure), *handle cumodd's. */
static int
segment_attempt(cumod_client *c, size_t size, int handed, void **data,
                uint64_t *handle)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__MapSegment ms = CUMOD__MAP_SEGMENT__INIT;
    Cumod__Reply *reply = NULL;
    uint8_t token[CUMOD_HANDOVER_TOKEN];
    char name[64] = "";
    int rv;

    *data = NULL;
    if (handed) {
        int fd = cumod__memfd_make("cumod-segment", size, data);
        if (fd < 0)
            return CUMOD_ENOTSUP; /* no memfd here: by name */
        rv = cumod__handover(c, &fd, 1, token);
        close(fd); /* the mapping keeps the memory; cumodd has its own */
        if (rv != CUMOD_OK) {
            munmap(*data, size);
            *data = NULL;
            return rv;
        }
        ms.fd_token.data = token;
        ms.fd_token.len = sizeof(token);
    } else {
        if ((rv = segment_make(name, sizeof(name), size, data)) != CUMOD_OK)
            return rv;
        ms.name = name;
    }
    ms.size = size;
    req.body_case = CUMOD__REQUEST__BODY_MAP_SEGMENT;
    req.map_segment = &ms;
    rv = cumod__client_call(c, &req, &reply);
    /* The daemon has it mapped now (or never will): either way the name has
     * served its purpose, and unlinking it leaves nothing behind if either
     * process dies. The mappings keep the memory. */
    if (!handed)
        shm_unlink(name);
    if (rv == CUMOD_OK && reply->body_case != CUMOD__REPLY__BODY_SEGMENT)
        rv = cumod__client_set_error(CUMOD_EPROTO,
                                     "cumod_segment_create: cumodd answered "
                                     "with another kind of reply");
    if (rv == CUMOD_OK)
        *handle = reply->segment->handle;
    if (reply != NULL)
        cumod__reply__free_unpacked(reply, NULL);
    if (rv != CUMOD_OK) {
        munmap(*data, size);
        *data = NULL;
    }
    return rv;
}

int
cumod_segment_create(cumod_client *c, size_t size, cumod_segment **out)
{
    cumod_segment *seg;
    void *data = NULL;
    uint64_t handle = 0;
    int rv;

    if (c == NULL || out == NULL)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_segment_create: NULL argument");
    if (size == 0)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_segment_create: size is 0");
    if ((seg = calloc(1, sizeof(*seg))) == NULL)
        return cumod__client_set_error(CUMOD_ENOMEM, "out of memory");
    /* Handed over first; by name when cumodd takes no descriptors or
     * refused these. */
    rv = segment_attempt(c, size, 1, &data, &handle);
    if (rv != CUMOD_OK && rv != CUMOD_ECLOSED && rv != CUMOD_ETIMEDOUT &&
        rv != CUMOD_ELIMIT)
        rv = segment_attempt(c, size, 0, &data, &handle);
    if (rv != CUMOD_OK) {
        free(seg);
        return rv;
    }
    seg->handle = handle;
    seg->data = data;
    seg->size = size;
    *out = seg;
    return CUMOD_OK;
}

void *
cumod_segment_data(const cumod_segment *seg)
{
    return seg != NULL ? seg->data : NULL;
}

size_t
cumod_segment_size(const cumod_segment *seg)
{
    return seg != NULL ? seg->size : 0;
}

int
cumod_segment_destroy(cumod_client *c, cumod_segment *seg)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__UnmapSegment us = CUMOD__UNMAP_SEGMENT__INIT;
    Cumod__Reply *reply;
    int rv;

    if (seg == NULL)
        return CUMOD_OK;
    if (c == NULL) {
        rv = cumod__client_set_error(CUMOD_EINVAL,
                                     "cumod_segment_destroy: the client is "
                                     "NULL (the segment is freed here, but "
                                     "stays mapped in cumodd until the "
                                     "session closes)");
    } else {
        us.handle = seg->handle;
        req.body_case = CUMOD__REQUEST__BODY_UNMAP_SEGMENT;
        req.unmap_segment = &us;
        if ((rv = cumod__client_call(c, &req, &reply)) == CUMOD_OK)
            cumod__reply__free_unpacked(reply, NULL);
    }
    /* Freed here whatever the daemon said: the caller cannot retry with a
     * segment it no longer owns, and the session's end unmaps it there. */
    munmap(seg->data, seg->size);
    free(seg);
    return rv;
}
