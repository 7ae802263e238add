/* SPDX-License-Identifier: MIT */
/*
 * Handler of CUMOD_CHAN_DEVICES, on the submission thread: every device
 * the driver lists, as READY describes its own (device.h), so that status
 * names devices no executor has come up on yet.
 */
#include <stdlib.h>

#include "cumod/errors.h"
#include "device.h"
#include "exec.h"
#include "handlers.h"
#include "reply.h"

#define DEVICES_MAX 64

int
cumod__exec_on_devices(cumod_exec *ex, const cumod_chan_hdr *hdr,
                       const void *payload, size_t len, int fd, void *aux)
{
    cumod_chan_device *all;
    int count = 0;

    (void)aux;
    (void)cumod__exec_payload(payload, len, fd, NULL, 0);
    if (ex->drv.device_get_count(&count) != CUDA_SUCCESS || count < 0)
        count = 0;
    if (count > DEVICES_MAX)
        count = DEVICES_MAX;
    if ((all = calloc(count ? (size_t)count : 1, sizeof(*all))) == NULL)
        return cumod__exec_reply(ex, hdr, CUMOD_ENOMEM, NULL, 0);
    for (int i = 0; i < count; i++)
        (void)cumod__exec_describe_device(&ex->drv, i, &all[i]);
    int rv =
        cumod__exec_reply(ex, hdr, CUMOD_OK, all, (size_t)count * sizeof(*all));
    free(all);
    return rv;
}
