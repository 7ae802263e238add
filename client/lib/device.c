/* SPDX-License-Identifier: MIT */
/*
 * Devices and fault domains: SetDevice (chosen again on a new session),
 * and the Hello's devices and domains.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"

static void
device_copy(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

/* One SetDevice round trip; on success the daemon's answer is the
 * client's device. */
static int
device_set(cumod_client *c, int device)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__SetDevice sd = CUMOD__SET_DEVICE__INIT;
    Cumod__Reply *reply = NULL;
    int rv;

    sd.device = device;
    req.body_case = CUMOD__REQUEST__BODY_SET_DEVICE;
    req.set_device = &sd;
    if ((rv = cumod__client_call_for(c, &req, CUMOD__REPLY__BODY_DEVICE,
                                     "cumod_set_device", &reply)) != CUMOD_OK)
        return rv;
    atomic_store(&c->device, reply->device->device);
    cumod__reply__free_unpacked(reply, NULL);
    return CUMOD_OK;
}

int
cumod_set_device(cumod_client *c, int device)
{
    int rv;

    if (c == NULL || device < 0)
        return cumod__client_set_error(
            CUMOD_EINVAL, "cumod_set_device: %s",
            c == NULL ? "NULL client" : "a device ordinal is 0 or more");
    if ((rv = device_set(c, device)) != CUMOD_OK)
        return rv;
    atomic_store(&c->want_device, device);
    return CUMOD_OK;
}

int
cumod_device(const cumod_client *c)
{
    return c != NULL ? atomic_load(&c->device) : -1;
}

int
cumod__device_env(int *device)
{
    const char *v = getenv("CUMOD_DEVICE");
    char *end;
    long n;

    *device = -1;
    if (v == NULL || v[0] == '\0')
        return CUMOD_OK;
    errno = 0;
    n = strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || n < 0 || n > INT_MAX)
        return cumod__client_set_error(
            CUMOD_EINVAL,
            "CUMOD_DEVICE is '%s': not a device ordinal (0, 1, ...; "
            "cumodctl status lists the devices)",
            v);
    *device = (int)n;
    return CUMOD_OK;
}

int
cumod__device_again(cumod_client *c, const Cumod__Request *req)
{
    int want = atomic_load(&c->want_device), again, rv;

    if (want < 0 || req->body_case == CUMOD__REQUEST__BODY_SET_DEVICE)
        return CUMOD_OK;
    /* The connection that heard the choice ended, or calls go over
     * another one (a redial). A connection not yet known here (its add
     * callback still to run) counts as the one that heard, so a session
     * is never asked twice for nothing. */
    nng_mtx_lock(c->mtx);
    again =
        c->device_lost || (c->connected && nng_pipe_id(c->pipe) > 0 &&
                           (uint32_t)nng_pipe_id(c->pipe) != c->device_pipe);
    nng_mtx_unlock(c->mtx);
    if (!again)
        return CUMOD_OK;
    if ((rv = device_set(c, want)) != CUMOD_OK) {
        char detail[768];
        snprintf(detail, sizeof(detail), "%s", cumod_last_detail());
        return cumod__client_set_error(
            rv,
            "the connection to cumodd was made again (a new session), and "
            "choosing device %d for it failed, so the call was not sent: %s",
            want, detail);
    }
    return CUMOD_OK;
}

int
cumod__device_replied(cumod_client *c, const Cumod__Request *req,
                      uint32_t pipe_id)
{
    int mismatch = 0;

    if (pipe_id == 0)
        return CUMOD_OK;
    nng_mtx_lock(c->mtx);
    if (req->body_case == CUMOD__REQUEST__BODY_SET_DEVICE) {
        c->device_pipe = pipe_id;
        c->device_lost = 0;
    } else if (atomic_load(&c->want_device) >= 0 && pipe_id != c->device_pipe) {
        /* Sent after the choice was made again, answered by yet another
         * session: the next call chooses again. */
        c->device_lost = 1;
        mismatch = req->body_case != CUMOD__REQUEST__BODY_HELLO;
    }
    nng_mtx_unlock(c->mtx);
    if (!mismatch)
        return CUMOD_OK;
    return cumod__client_set_error(
        CUMOD_ECLOSED,
        "the connection to cumodd was made again while the call was sent: "
        "a new session, which had not chosen device %d, answered it (it "
        "may have run on another device); this connection's buffers, "
        "segments and streams are gone",
        atomic_load(&c->want_device));
}

static int
device_copy_lists(cumod_domains *d, const Cumod__HelloReply *h)
{
    if (h->n_devices > 0 &&
        (d->devices = calloc(h->n_devices, sizeof(*d->devices))) == NULL)
        return CUMOD_ENOMEM;
    if (h->n_domains > 0 &&
        (d->domains = calloc(h->n_domains, sizeof(*d->domains))) == NULL)
        return CUMOD_ENOMEM;
    for (size_t i = 0; i < h->n_devices; i++) {
        const Cumod__DeviceInfo *s = h->devices[i];
        cumod_gpu_info *g = &d->devices[i];
        g->ordinal = s->ordinal;
        device_copy(g->name, sizeof(g->name), s->name);
        device_copy(g->uuid, sizeof(g->uuid), s->uuid);
        g->total_memory = s->total_memory;
        g->free_memory = s->free_memory;
        g->executors = s->executors;
        g->standby = s->standby;
        g->sm_major = s->sm_major;
        g->sm_minor = s->sm_minor;
    }
    d->ndevices = h->n_devices;
    for (size_t i = 0; i < h->n_domains; i++) {
        const Cumod__DomainInfo *s = h->domains[i];
        cumod_domain_info *m = &d->domains[i];
        device_copy(m->name, sizeof(m->name), s->name);
        m->device = s->device;
        device_copy(m->executor_state, sizeof(m->executor_state),
                    s->executor_state);
        m->executor_pid = (int64_t)s->executor_pid;
        m->sessions = s->sessions;
        m->memory_bytes = s->memory_bytes;
        m->memory_max = s->memory_max;
        m->restarts = s->restarts;
        device_copy(m->last_fault, sizeof(m->last_fault), s->last_fault);
        m->last_fault_unix_ms = s->last_fault_unix_ms;
        m->resident_modules = s->resident_modules;
        m->pool_member = s->pool_member;
        m->pool_size = s->pool_size ? s->pool_size : 1;
        m->mps = s->mps;
    }
    d->ndomains = h->n_domains;
    return CUMOD_OK;
}

int
cumod_domains_get(cumod_client *c, cumod_domains **out)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__Hello hello = CUMOD__HELLO__INIT;
    Cumod__Reply *reply = NULL;
    cumod_domains *d;
    int rv;

    if (c == NULL || out == NULL)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_domains_get: NULL argument");
    hello.client = "libcumod " CUMOD_VERSION_STRING;
    req.body_case = CUMOD__REQUEST__BODY_HELLO;
    req.hello = &hello;
    if ((rv = cumod__client_call_for(c, &req, CUMOD__REPLY__BODY_HELLO,
                                     __func__, &reply)) != CUMOD_OK)
        return rv;
    const Cumod__HelloReply *h = reply->hello;
    if ((d = calloc(1, sizeof(*d))) == NULL ||
        device_copy_lists(d, h) != CUMOD_OK) {
        cumod_domains_free(d);
        cumod__reply__free_unpacked(reply, NULL);
        return cumod__client_set_error(CUMOD_ENOMEM, "out of memory");
    }
    device_copy(d->domain, sizeof(d->domain), h->domain);
    d->device = h->session_device;
    d->standby = h->standby;
    d->standby_bytes = h->standby_bytes;
    d->max_message = h->max_message;
    atomic_store(&c->device, h->session_device);
    cumod__reply__free_unpacked(reply, NULL);
    *out = d;
    return CUMOD_OK;
}

void
cumod_domains_free(cumod_domains *d)
{
    if (d == NULL)
        return;
    free(d->devices);
    free(d->domains);
    free(d);
}
