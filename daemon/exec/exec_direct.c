/* SPDX-License-Identifier: MIT */
/*
 * Handlers of the direct launches' commands (direct.h): RING_STATE,
 * RING_ATTACH, RING_BELL, RING_DETACH, RING_RESUME and SNAP on the
 * serving thread, where module snapshots are applied and the rest posted
 * to the thread of the session's ring; and those posted commands there.
 */
#include <unistd.h>

#include "direct.h"
#include "handlers.h"

int
cumod__exec_on_direct(cumod_exec *ex, const cumod_chan_hdr *hdr,
                      const void *payload, size_t len, int fd, void *aux)
{
    (void)aux;
    return cumod__direct_command(ex, hdr, payload, len, fd);
}

int
cumod__exec_on_direct_run(cumod_exec *ex, const cumod_chan_hdr *hdr,
                          const void *payload, size_t len, int fd, void *aux)
{
    (void)aux;
    if (fd >= 0)
        close(fd);
    return cumod__direct_run(ex, hdr, payload, len);
}
