/* SPDX-License-Identifier: MIT */
/*
 * Handler of CUMOD_CHAN_GLOBALS, on the load lane (after the load it
 * follows): the kept writes of a module's globals applied again to a
 * loaded generation (globals.h).
 */
#include <string.h>

#include "reply.h"
#include "cumod/errors.h"
#include "globals.h"
#include "handlers.h"
#include "modtab.h"

int
cumod__exec_on_globals(cumod_exec *ex, const cumod_chan_hdr *hdr,
                       const void *payload, size_t len, int fd, void *aux)
{
    cumod_chan_hdr h = {.op = CUMOD_CHAN_GLOBALS, .seq = hdr->seq};
    cumod_chan_unload req;
    cumod_exec_module *m;
    char msg[1024] = "";

    (void)aux;
    if (cumod__exec_payload(payload, len, fd, &req, sizeof(req)) != 0) {
        h.status = CUMOD_EPROTO;
    } else {
        if ((m = cumod__exec_module(ex, req.handle)) == NULL)
            h.status = CUMOD_ENOENT;
        else
            h.status = cumod__exec_globals_apply(
                ex, m->mod, (const char *)payload + sizeof(req),
                len - sizeof(req), m->name, NULL, msg, sizeof(msg));
    }
    return cumod__exec_send(ex, &h, msg, strlen(msg));
}
