/* SPDX-License-Identifier: MIT */
#include "front/state/seg_guard.h"

#include <sys/stat.h>

#include "cumod/errors.h"
#include "common/log.h"

cumod_err
cumod__seg_intact(const cumod_session *s, cumod_seg *g, cumod_status *st)
{
    struct stat sb;
    long long now;

    if (g->fd < 0)
        return CUMOD_OK;
    /* One fstat: 1.3 us measured on the 2-core test VM (docs/security.md
     * "Hostile input"), small beside a copy's round trip through the
     * executor. */
    if (fstat(g->fd, &sb) != 0)
        now = -1;
    else
        now = (long long)sb.st_size;
    if (!g->shrunk && now >= 0 && (uint64_t)now >= g->size)
        return CUMOD_OK;
    if (!g->shrunk) {
        g->shrunk = 1;
        CUMOD_LOGW("CUMOD-SEGMENT",
                   "segment %llu (%s) of session %u (pid %d uid %d) was "
                   "truncated by its client to %lld bytes, %llu when mapped: "
                   "its copies are refused; everyone else goes on",
                   (unsigned long long)g->handle, g->name, s->id, s->pid,
                   s->uid, now, (unsigned long long)g->size);
    }
    return cumod__status_set(st, CUMOD_EPERM,
                             "copy: segment %llu (%s) was truncated by its "
                             "client to %lld bytes, %llu when it was mapped: "
                             "unmap it and map a new one",
                             (unsigned long long)g->handle, g->name, now,
                             (unsigned long long)g->size);
}
