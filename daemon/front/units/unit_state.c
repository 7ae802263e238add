/* SPDX-License-Identifier: MIT */
/*
 * What a unit is and holds, as the rest of the front asks it (unit.h):
 * whether its executor serves, its state and refusal, its device, its
 * memory and the sessions joining and leaving it. Reads only: the unit's
 * life (starting, losing, taking over) is unit.c's, which calls these and
 * is never called from here, so that the services under the units
 * (replicas, the cuBLAS gate, work) can ask without reaching up.
 */
#include <stdio.h>
#include <string.h>

#include "cumod/errors.h"
#include "front/front.h"

void
cumod__unit_join(cumod_unit *u, cumod_session *s)
{
    s->unit = u;
    snprintf(s->domain, sizeof(s->domain), "%s", u->domain);
    s->device = u->device;
    cumod__session_placed(s);
    u->sessions++;
    u->idle_since_ms = 0;
}

void
cumod__unit_leave(cumod_unit *u, cumod_session *s)
{
    (void)s;
    if (--u->sessions == 0)
        u->idle_since_ms = uv_now(&u->f->loop);
}

int
cumod__unit_ready(const cumod_unit *u)
{
    return u->xc != NULL && u->up && cumod__xc_ready(u->xc);
}

const char *
cumod__unit_state(const cumod_unit *u)
{
    cumod_xc_status xs;
    if (u->failed)
        return "failed";
    if (u->xc == NULL)
        return "stopped";
    cumod__xc_status(u->xc, &xs);
    return xs.state;
}

void
cumod__unit_refusal(const cumod_unit *u, cumod_err rv, cumod_status *st)
{
    if (u->failed) {
        cumod__status_set(st, CUMOD_ENODEVICE, "%s", u->fail_msg);
        return;
    }
    if (u->xc == NULL) {
        cumod__status_set(st, CUMOD_ECTXLOST,
                          "the executor of domain %s is not running: retry",
                          u->domain);
        return;
    }
    cumod__xc_refusal(u->xc, rv, st);
}

const cumod_chan_device *
cumod__unit_device(const cumod_unit *u)
{
    const cumod_front *f = u->f;
    if (u->xc != NULL && cumod__xc_device(u->xc)->name[0] != '\0')
        return cumod__xc_device(u->xc);
    for (uint32_t i = 0; i < f->ndevs; i++)
        if (f->devs[i].ordinal == u->device && f->devs[i].name[0] != '\0')
            return &f->devs[i];
    return &f->nodev;
}

uint64_t
cumod__unit_mem_used(const cumod_unit *u)
{
    uint64_t sum = 0;
    size_t cur = 0;
    cumod_session *s;
    cumod_sessions *ss = &u->f->sessions;
    /* The domain's on this device: a pool's members hold it together. */
    while ((s = cumod__sessions_next(ss, &cur)) != NULL)
        if (s->unit == u ||
            (s->unit != NULL && u->pool > 1 && s->unit->pool > 1 &&
             s->unit->device == u->device &&
             strcmp(s->unit->domain, u->domain) == 0))
            sum += s->mem_used;
    return sum;
}

uint64_t
cumod__unit_mem_max(const cumod_unit *u)
{
    const cumod_config *cfg = u->f->cfg;
    if (u->dcfg >= 0 && cfg->domains[u->dcfg].memory_max != 0)
        return cfg->domains[u->dcfg].memory_max;
    return u->replicas_on ? cfg->domain_mem_limit : 0;
}

cumod_err
cumod__unit_reserve(cumod_unit *u, cumod_session *s, uint64_t size,
                    cumod_status *st)
{
    uint64_t max = cumod__unit_mem_max(u);
    if (max != 0) {
        uint64_t used = cumod__unit_mem_used(u);
        if (used + size > max || used + size < used)
            return cumod__status_set(
                st, CUMOD_EDEVMEM,
                "%llu more bytes would take domain %s to %llu bytes, over "
                "its limit of %llu (%s)",
                (unsigned long long)size, u->domain,
                (unsigned long long)(used + size), (unsigned long long)max,
                u->dcfg >= 0 && u->f->cfg->domains[u->dcfg].memory_max
                    ? "memory-max of its [domain] section"
                    : "--domain-memory-max");
    }
    return cumod__session_reserve(s, size, u->f->cfg->session_mem_limit, st);
}

int
cumod__device_served(const cumod_front *f, int device)
{
    for (int i = 0; i < f->ndevices; i++)
        if (f->devices[i] == device)
            return 1;
    return 0;
}
