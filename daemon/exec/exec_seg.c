/* SPDX-License-Identifier: MIT */
/*
 * Handlers of CUMOD_CHAN_SEG_MAP (on the host lane: cuMemHostRegister of
 * 256 MiB takes 14-50 ms) and CUMOD_CHAN_SEG_UNMAP (on the submission
 * thread, which takes its place in the session's reclaim queue; the
 * unregistering itself waits for the device, on the reclaim lane:
 * reclaim.h).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cumod/errors.h"
#include "handlers.h"
#include "common/log.h"
#include "reclaim.h"
#include "reply.h"
#include "common/shmguard.h"

/* Host lane: map the segment's descriptor and register it. The client
 * may shrink it at any moment: the front checked its size, but it is
 * checked again here, on the descriptor mapped, and the mapping is
 * guarded (shmguard.h) before anything of ours touches it: a CPU copy
 * (a driver's, the fake's) of pages cut off then reads zeros instead of
 * ending the executor and every session's buffers with it. */
int
cumod__exec_on_seg_map(cumod_exec *ex, const cumod_chan_hdr *hdr, const void *p,
                       size_t len, int fd, void *aux)
{
    const cumod_driver *d = &ex->drv;
    cumod_chan_segment sg = {0};
    cumod_shm_range *guard = NULL;
    struct stat sb;
    char msg[256];
    int st;

    (void)aux;
    if (len >= sizeof(sg))
        memcpy(&sg, p, sizeof(sg));
    void *m =
        fd >= 0 && sg.size && fstat(fd, &sb) == 0 &&
                (uint64_t)sb.st_size >= sg.size
            ? mmap(NULL, sg.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
            : MAP_FAILED;
    if (fd >= 0)
        close(fd);
    if (m == MAP_FAILED) {
        st = CUMOD_EINVAL;
    } else if (cumod__shmguard_add(m, sg.size, &guard) != CUMOD_OK) {
        st = CUMOD_ENOMEM;
        munmap(m, sg.size);
    } else {
        CUresult r = d->mem_host_register(m, sg.size, 0);
        st = cumod__cu_err(d, r, "cuMemHostRegister", msg, sizeof(msg));
        if (st != CUMOD_OK) {
            CUMOD_LOGW("CUMOD-EXEC-SEGMENT", "%s", msg);
            cumod__shmguard_remove(guard);
            munmap(m, sg.size);
        } else {
            sg.host = (uint64_t)(uintptr_t)m;
        }
    }
    return cumod__exec_reply(ex, hdr, st, &sg, sizeof(sg));
}

int
cumod__exec_on_seg_unmap(cumod_exec *ex, const cumod_chan_hdr *hdr,
                         const void *payload, size_t len, int fd, void *aux)
{
    cumod_chan_segment sg = {0};

    (void)aux;
    (void)cumod__exec_payload(payload, len, fd, &sg, sizeof(sg));
    /* A closing session's segment: after what its queue holds. */
    if (sg.reclaim != 0) {
        if (cumod__exec_reclaim_push(ex, sg.reclaim, CUMOD_RECLAIM_UNMAP,
                                     sg.host, sg.size, NULL, NULL, 0,
                                     hdr) != CUMOD_OK)
            return cumod__exec_reply(ex, hdr, CUMOD_ENOMEM, NULL, 0);
        return 0;
    }
    cumod__exec_unmap_later(ex, hdr, sg.host, sg.size);
    return 0;
}
