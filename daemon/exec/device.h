/* SPDX-License-Identifier: MIT */
/*
 * What the executor says of a device (a service: the dispatcher's READY
 * and the DEVICES handler use it). Needs the driver initialised, not a
 * context: the attributes, name, UUID and total memory of any device can
 * be read without one.
 */
#ifndef CUMOD_EXEC_DEVICE_H
#define CUMOD_EXEC_DEVICE_H

#include "common/channel.h"
#include "driver.h"

/* Fills out for device ordinal (free_memory 0: it needs a context).
 * CUMOD_OK, or CUMOD_ENODEVICE when the driver has no such device. */
int cumod__exec_describe_device(const cumod_driver *d, int ordinal,
                                cumod_chan_device *out);

#endif
