/*
 * Request handlers: run on the loop thread, one per request body. Each
 * answers its work exactly once, now or when the executor replies.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cumod/errors.h"
#include "cumod/version.h"
#include "front.h"
#include "dataplane.h"
#include "log.h"

static void
handle_hello_reply(cumod_daemon *d, void *arg, const cumod_chan_hdr *hdr,
                   const void *payload, size_t len)
{
    cumod_work *w = arg;
    Cumod__Reply reply = CUMOD__REPLY__INIT;
    Cumod__HelloReply hello = CUMOD__HELLO_REPLY__INIT;
    cumod_chan_meminfo mi;

    if (hdr->status != CUMOD_OK || len < sizeof(mi)) {
        if (payload == NULL)
            cumod__server_fail(w, hdr->status,
                               "the CUDA executor was lost: cumodd is "
                               "starting a new one; retry");
        else
            cumod__server_fail(w, hdr->status ? hdr->status : CUMOD_EINTERNAL,
                               "the executor could not read the device's "
                               "memory use (see cumodd's log)");
        return;
    }
    memcpy(&mi, payload, sizeof(mi));
    hello.daemon_version = CUMOD_VERSION_STRING;
    hello.protocol_version = CUMOD__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    hello.device_ordinal = d->dev.ordinal;
    hello.device_name = d->dev.name;
    hello.sm_major = d->dev.sm_major;
    hello.sm_minor = d->dev.sm_minor;
    hello.multiprocessors = d->dev.multiprocessors;
    hello.driver_version = d->dev.driver_version;
    hello.total_memory = mi.total_memory;
    hello.free_memory = mi.free_memory;
    hello.kernel_dir = (char *)d->cfg->kernel_dir;
    hello.executor_pid = (uint64_t)d->proc.pid;
    if (d->cat != NULL) {
        int degraded;
        cumod__catalog_stats(d->cat, &hello.modules, &hello.resident_modules,
                             &hello.resident_bytes, &degraded);
        hello.kernel_dir_degraded = degraded;
    }
    reply.body_case = CUMOD__REPLY__BODY_HELLO;
    reply.hello = &hello;
    cumod__server_reply(w, &reply);
}

static void
handle_hello(cumod_daemon *d, cumod_work *w)
{
    int rv = cumod__exec_call(d, CUMOD_CHAN_MEMINFO, NULL, 0, -1,
                              handle_hello_reply, w);
    if (rv != CUMOD_OK)
        cumod__server_fail(w, rv,
                           "the CUDA executor is restarting: retry shortly");
}

void
cumod__daemon_on_request(void *arg, cumod_work *w)
{
    cumod_daemon *d = arg;

    if (d->stopping) {
        cumod__server_fail(w, CUMOD_ESHUTDOWN, "cumodd is shutting down");
        return;
    }
    if (cumod__dp_on_request(d, w))
        return;
    switch (w->req->body_case) {
    case CUMOD__REQUEST__BODY_HELLO:
        handle_hello(d, w);
        return;
    case CUMOD__REQUEST__BODY_LIST_MODULES:
        cumod__catalog_list(d->cat, w);
        return;
    case CUMOD__REQUEST__BODY_SHOW_MODULE:
        cumod__catalog_show(d->cat, w, w->req->show_module->name);
        return;
    case CUMOD__REQUEST__BODY_LOAD_MODULE:
        cumod__catalog_load(d->cat, w, w->req->load_module->name);
        return;
    case CUMOD__REQUEST__BODY_UNLOAD_MODULE:
        cumod__catalog_unload(d->cat, w, w->req->unload_module->name);
        return;
    case CUMOD__REQUEST__BODY_PIN_MODULE:
        cumod__catalog_pin(d->cat, w, w->req->pin_module->name, 1);
        return;
    case CUMOD__REQUEST__BODY_UNPIN_MODULE:
        cumod__catalog_pin(d->cat, w, w->req->unpin_module->name, 0);
        return;
    case CUMOD__REQUEST__BODY_RELOAD_MODULE:
        cumod__catalog_reload(d->cat, w, w->req->reload_module->name);
        return;
    case CUMOD__REQUEST__BODY__NOT_SET:
        cumod__server_fail(w, CUMOD_EINVAL, "the request has no body");
        return;
    default:
        cumod__server_fail(w, CUMOD_ENOTSUP,
                           "request type %d is not supported by cumodd %s",
                           (int)w->req->body_case, CUMOD_VERSION_STRING);
        return;
    }
}
