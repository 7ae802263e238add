/* SPDX-License-Identifier: MIT */
/*
 * Units: which executors run, for whom, and what happens when one comes
 * up, faults, dies or idles (unit.h). The catalog's side (the loader's
 * ready and lost) stays in front.c; the request side (parking while a
 * unit starts) in dispatch.c; units reach both only through
 * f->unit_ops. What a unit is and holds is unit_state.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <unistd.h>

#include "cumod/errors.h"
#include "front/units/direct.h"
#include "front/front.h"
#include "common/log.h"

/* How often a unit with replicas looks for idle ones (--idle-unload) and
 * whether its domain has been idle for --domain-idle. */
#define UNIT_TICK_MS 1000
/* Executors in one pool at most (MPS serves 48 clients a device). */
#define UNIT_POOL_MAX 48

static void unit_on_ready(void *arg, const cumod_chan_device *dev, int first);
static void unit_on_lost(void *arg, int killed);
static void unit_on_fault(void *arg, const char *message);
static void unit_on_failed(void *arg, const char *message, int code);
static void unit_on_direct(void *arg, uint32_t op, const void *payload,
                           size_t len);

static cumod_xc_hooks
unit_hooks(cumod_unit *u)
{
    return (cumod_xc_hooks){.ready = unit_on_ready,
                            .lost = unit_on_lost,
                            .fault = unit_on_fault,
                            .failed = unit_on_failed,
                            .direct = unit_on_direct,
                            .arg = u};
}

static const char *
unit_role_name(const cumod_unit *u)
{
    switch (u->role) {
    case CUMOD_UNIT_LOADER:
        return "the loader";
    case CUMOD_UNIT_STANDBY:
        return "a standby";
    default:
        return "domain";
    }
}

static void
unit_on_tick(uv_timer_t *h)
{
    cumod_unit *u = h->data;
    cumod_front *f = u->f;

    if (u->replicas_on && u->up)
        cumod__reps_sweep(u, NULL);
    /* A domain without sessions for --domain-idle stops its executor (its
     * context and memory go back to the device). */
    if (u->role == CUMOD_UNIT_SERVE && u->replicas_on && u->xc != NULL &&
        u->sessions == 0 && u->idle_since_ms != 0 && f->cfg->domain_idle_s &&
        !(u->dcfg >= 0 && f->cfg->domains[u->dcfg].start_always) &&
        uv_now(&f->loop) - u->idle_since_ms >=
            (uint64_t)f->cfg->domain_idle_s * 1000) {
        CUMOD_LOGN("CUMOD-DOMAIN",
                   "domain %s on device %d: no session for %u s "
                   "(--domain-idle): its executor stops",
                   u->domain, u->device, f->cfg->domain_idle_s);
        cumod__reps_lost(u, CUMOD_ECTXLOST, "the domain's executor stopped");
        cumod__xc_close(u->xc);
        u->xc = NULL;
        u->up = 0;
        cumod__faults_lost(&u->faults);
        cumod__gemm_gate_lost(&u->gemm);
    }
}

static cumod_unit *
unit_new(cumod_front *f, cumod_unit_role role, const char *domain, int dcfg,
         int device, uint32_t pool, uint32_t member)
{
    cumod_unit *u, **units;

    if ((u = calloc(1, sizeof(*u))) == NULL)
        return NULL;
    if ((units = realloc(f->units, (f->nunits + 1) * sizeof(*units))) == NULL) {
        free(u);
        return NULL;
    }
    f->units = units;
    u->f = f;
    u->index = f->nunits;
    u->role = role;
    u->serves = role == CUMOD_UNIT_SERVE;
    u->device = device;
    u->dcfg = dcfg;
    u->replicas_on = f->replicas;
    u->pool = pool;
    u->member = member;
    snprintf(u->domain, sizeof(u->domain), "%s", domain);
    cumod__faults_init(&u->faults, &f->loop, f->cfg, &f->cat, u);
    cumod__gemm_gate_init(&u->gemm, u);
    cumod__list_init(&u->parked);
    cumod__idmap_init(&u->reps);
    uv_timer_init(&f->loop, &u->park_timer);
    u->park_timer.data = u;
    uv_timer_init(&f->loop, &u->idle_timer);
    u->idle_timer.data = u;
    if (f->replicas)
        uv_timer_start(&u->idle_timer, unit_on_tick, UNIT_TICK_MS,
                       UNIT_TICK_MS);
    f->units[f->nunits++] = u;
    return u;
}

/* What the log calls u's executor. */
static void
unit_label(const cumod_unit *u, char *label, size_t len)
{
    if (u->role == CUMOD_UNIT_SERVE && u->pool > 1)
        snprintf(label, len, "domain %.48s (pool %u/%u)", u->domain,
                 u->member + 1, u->pool);
    else if (u->role == CUMOD_UNIT_SERVE)
        snprintf(label, len, "domain %s", u->domain);
    else
        snprintf(label, len, "%s", unit_role_name(u));
}

/* Starts u's executor. */
static void
unit_start(cumod_unit *u)
{
    cumod_front *f = u->f;
    cumod_xc_hooks hooks = unit_hooks(u);
    cumod_status st;
    char label[96];

    if (u->xc != NULL || f->stopping)
        return;
    unit_label(u, label, sizeof(label));
    u->failed = 0;
    /* The lone unit (no domains, standbys or pools) takes over an
     * executor a killed front left (--orphan-grace, exec/orphan.h). */
    cumod_xc_spawn sp = {.device = u->device,
                         .adopt = !f->replicas && f->cfg->orphan_grace_s > 0};
    if (u->pool > 1) {
        /* Each an MPS client; by default the submission threads one
         * executor would have, shared among the pool (an explicit
         * --submit-threads is each executor's). */
        unsigned want = cumod__submit_threads_default() / u->pool;
        sp.mps_dir = cumod__mps_dir(&f->mps);
        sp.submit_threads = f->cfg->submit_threads ? 0 : want ? want : 1;
    }
    if (cumod__xc_open(&f->loop, &f->rings, f->cfg, f->exe, &sp, label, &hooks,
                       &u->xc, &st) != CUMOD_OK) {
        u->failed = 1;
        u->failed_ms = uv_now(&f->loop);
        snprintf(u->fail_msg, sizeof(u->fail_msg), "%s", st.msg);
        CUMOD_LOGE("CUMOD-EXEC-SPAWN", "%s: %s", label, st.msg);
    }
}

/* The executors serving domain on each device: its section's pool, or
 * --pool for the default domain; 1 for the rest (a uid's or gid's domain
 * is there to be isolated, and MPS shares a fault among its clients). */
static uint32_t
unit_pool_of(const cumod_front *f, const char *domain, int dcfg)
{
    const cumod_config *cfg = f->cfg;
    uint32_t n = dcfg >= 0                        ? cfg->domains[dcfg].pool
                 : strcmp(domain, "default") == 0 ? cfg->pool
                                                  : 1;
    if (!f->replicas || cumod__mps_dir(&f->mps) == NULL || n < 1)
        return 1;
    return n > UNIT_POOL_MAX ? UNIT_POOL_MAX : n;
}

cumod_unit *
cumod__unit_get(cumod_front *f, const char *domain, int dcfg, int device)
{
    uint32_t pool = unit_pool_of(f, domain, dcfg);
    cumod_unit *m[UNIT_POOL_MAX] = {NULL};

    for (uint32_t i = 0; i < f->nunits; i++) {
        cumod_unit *u = f->units[i];
        if (u->serves && u->device == device &&
            strcmp(u->domain, domain) == 0 && u->member < pool)
            m[u->member] = u;
    }
    for (uint32_t k = 0; k < pool; k++)
        if (m[k] == NULL && (m[k] = unit_new(f, CUMOD_UNIT_SERVE, domain, dcfg,
                                             device, pool, k)) == NULL)
            return NULL;
    if (pool == 1)
        return m[0];
    /* A pool comes up whole; a session joins the ready member with the
     * fewest sessions (any member, while none is ready). */
    cumod_unit *best = NULL;
    for (uint32_t k = 0; k < pool; k++) {
        cumod__unit_want(m[k]);
        int r = cumod__unit_ready(m[k]);
        int br = best != NULL && cumod__unit_ready(best);
        if (best == NULL || (r && !br) ||
            (r == br && m[k]->sessions < best->sessions))
            best = m[k];
    }
    return best;
}

cumod_unit *
cumod__unit_for_session(cumod_front *f, int listener, int uid, int gid,
                        int device)
{
    const cumod_config *cfg = f->cfg;
    char name[64] = "default";
    int dcfg = -1;

    if (!f->replicas) /* the lone unit serves everyone */
        return f->units[0];
    if (listener > 0 && listener <= f->nlisteners)
        dcfg = f->listener_dcfg[listener - 1];
    for (int i = 0; dcfg < 0 && uid >= 0 && i < cfg->ndomains; i++)
        for (int k = 0; k < cfg->domains[i].nuids; k++)
            if (cfg->domains[i].uids[k] == (uint32_t)uid) {
                dcfg = i;
                break;
            }
    for (int i = 0; dcfg < 0 && gid >= 0 && i < cfg->ndomains; i++)
        for (int k = 0; k < cfg->domains[i].ngids; k++)
            if (cfg->domains[i].gids[k] == (uint32_t)gid) {
                dcfg = i;
                break;
            }
    if (dcfg >= 0)
        snprintf(name, sizeof(name), "%s", cfg->domains[dcfg].name);
    else if (cfg->domains_by == CUMOD_DOMAINS_UID && uid >= 0)
        snprintf(name, sizeof(name), "uid-%d", uid);
    else if (cfg->domains_by == CUMOD_DOMAINS_GID && gid >= 0)
        snprintf(name, sizeof(name), "gid-%d", gid);
    if (device < 0)
        device = dcfg >= 0 && cfg->domains[dcfg].device >= 0
                     ? cfg->domains[dcfg].device
                     : cfg->device;
    return cumod__unit_get(f, name, dcfg, device);
}

void
cumod__unit_want(cumod_unit *u)
{
    if (u->xc == NULL)
        unit_start(u);
}

/* --- What the executor client tells ----------------------------------------
 */

/* Remembers what an executor said of its device (status, Hello). */
static void
unit_note_device(cumod_front *f, const cumod_chan_device *dev)
{
    for (uint32_t i = 0; i < f->ndevs; i++)
        if (f->devs[i].ordinal == dev->ordinal) {
            f->devs[i] = *dev;
            return;
        }
    if (f->ndevs < CUMOD_CONFIG_MAX_DEVICES)
        f->devs[f->ndevs++] = *dev;
}

/* Every device the driver lists, as the loader's executor describes them
 * (no context needed): status names the devices no executor runs on. */
static void
unit_on_devices(void *arg, const cumod_chan_hdr *hdr, const void *payload,
                size_t len)
{
    cumod_front *f = arg;
    const cumod_chan_device *all = payload;
    if (payload == NULL || hdr->status != CUMOD_OK || f->stopped)
        return;
    for (size_t i = 0; i < len / sizeof(*all); i++) {
        cumod_chan_device d;
        memcpy(&d, &all[i], sizeof(d));
        d.name[sizeof(d.name) - 1] = '\0';
        d.uuid[sizeof(d.uuid) - 1] = '\0';
        int known = 0;
        for (uint32_t k = 0; k < f->ndevs; k++)
            known |= f->devs[k].ordinal == d.ordinal;
        if (!known && cumod__device_served(f, d.ordinal))
            unit_note_device(f, &d);
    }
}

/* The spare executors each served device keeps (--standby). */
static void
unit_fill_standbys(cumod_front *f)
{
    if (f->stopping || f->cfg->standby == 0)
        return;
    for (int d = 0; d < f->ndevices; d++) {
        uint32_t have = 0;
        for (uint32_t i = 0; i < f->nunits; i++)
            if (f->units[i]->role == CUMOD_UNIT_STANDBY &&
                f->units[i]->device == f->devices[d] && f->units[i]->xc)
                have++;
        for (; have < f->cfg->standby; have++) {
            cumod_unit *u = NULL;
            for (uint32_t i = 0; i < f->nunits && u == NULL; i++)
                if (f->units[i]->role == CUMOD_UNIT_STANDBY &&
                    f->units[i]->device == f->devices[d] &&
                    f->units[i]->xc == NULL)
                    u = f->units[i];
            if (u == NULL && (u = unit_new(f, CUMOD_UNIT_STANDBY, "", -1,
                                           f->devices[d], 1, 0)) == NULL)
                return;
            unit_start(u);
        }
    }
}

void
cumod__units_config_changed(cumod_front *f)
{
    /* Deadlines, --allow-pointer-values: what direct launches check. */
    for (uint32_t i = 0; i < f->nunits; i++)
        cumod__fdirect_unit_update(f->units[i]);
    if (!f->replicas || f->loader == NULL || !f->loader->up)
        return;
    /* --standby changed: more are started, the extra ones stopped. */
    for (int d = 0; d < f->ndevices; d++) {
        uint32_t have = 0;
        for (uint32_t i = 0; i < f->nunits; i++) {
            cumod_unit *u = f->units[i];
            if (u->role != CUMOD_UNIT_STANDBY || u->device != f->devices[d] ||
                u->xc == NULL)
                continue;
            if (++have > f->cfg->standby) {
                cumod__reps_lost(u, CUMOD_ESHUTDOWN, "the standby stopped");
                cumod__xc_close(u->xc);
                u->xc = NULL;
                u->up = 0;
            }
        }
    }
    unit_fill_standbys(f);
}

/* The domains of [domain] sections with start = always. */
static void
unit_start_always(cumod_front *f)
{
    const cumod_config *cfg = f->cfg;
    for (int i = 0; i < cfg->ndomains; i++) {
        if (!cfg->domains[i].start_always)
            continue;
        int dev =
            cfg->domains[i].device >= 0 ? cfg->domains[i].device : cfg->device;
        cumod_unit *u = cumod__unit_get(f, cfg->domains[i].name, i, dev);
        if (u != NULL)
            cumod__unit_want(u);
    }
}

static void
unit_on_ready(void *arg, const cumod_chan_device *dev, int first)
{
    cumod_unit *u = arg;
    cumod_front *f = u->f;

    u->up = 1;
    u->mps = dev->mps != 0;
    u->ready_free = dev->free_memory;
    /* Adopted: what the old front's sessions held goes (before anything
     * of this front's is sent, in channel order). */
    int old = cumod__xc_take_adopted_ledger(u->xc);
    if (old >= 0 && f->unit_ops.adopted != NULL)
        f->unit_ops.adopted(u, old);
    else if (old >= 0)
        close(old);
    /* It holds the sessions' ledger from now on (orphan.h). */
    cumod__front_ledger_give(f, u->xc);
    unit_note_device(f, dev);
    /* Its sessions' rings go to it (direct.h). */
    cumod__fdirect_unit_ready(u);
    if (u->role == CUMOD_UNIT_LOADER || !u->replicas_on) {
        /* The catalog's executor (which may serve too: the lone unit). */
        if (first) {
            cumod__devices_known(f, dev);
            (void)cumod__xc_call(u->xc, CUMOD_CHAN_DEVICES, NULL, 0, -1,
                                 unit_on_devices, f);
        }
        f->unit_ops.loader_ready(f, dev, first);
        if (u->role == CUMOD_UNIT_LOADER && first) {
            unit_fill_standbys(f);
            unit_start_always(f);
        }
        if (!u->replicas_on)
            f->unit_ops.unpark(u);
        return;
    }
    cumod__reps_pinned(u);
    if (u->role == CUMOD_UNIT_STANDBY) {
        CUMOD_LOGI("CUMOD-STANDBY",
                   "a standby executor (pid %d) is ready on device %d",
                   cumod__xc_pid(u->xc), u->device);
        return;
    }
    CUMOD_LOGN("CUMOD-DOMAIN", "domain %s is served on device %d (pid %d)%s",
               u->domain, u->device, cumod__xc_pid(u->xc),
               first ? "" : " again");
    f->unit_ops.unpark(u);
}

/* A standby of u's device, ready, or NULL. */
static cumod_unit *
unit_standby(cumod_front *f, int device)
{
    for (uint32_t i = 0; i < f->nunits; i++) {
        cumod_unit *s = f->units[i];
        if (s->role == CUMOD_UNIT_STANDBY && s->device == device &&
            cumod__unit_ready(s))
            return s;
    }
    return NULL;
}

static void
unit_on_lost(void *arg, int killed)
{
    cumod_unit *u = arg;
    cumod_front *f = u->f;
    cumod_xc_status xs;

    if (f->stopped)
        return;
    u->up = 0;
    cumod__xc_status(u->xc, &xs);
    if (u->role == CUMOD_UNIT_STANDBY) {
        cumod__reps_lost(u, CUMOD_ECTXLOST, "the standby executor died");
        cumod__fdirect_unit_lost(u);
        return;
    }
    u->restarts++;
    /* Its rings come back first, their direct launches answered with what
     * the faults found (before they are reset). */
    cumod__fdirect_unit_lost(u);
    int explained = cumod__faults_lost(&u->faults) || killed;
    if (u->serves)
        f->unit_ops.sessions_lost(f, u, xs.last_fault);
    cumod__reps_lost(u, CUMOD_ECTXLOST,
                     xs.last_fault[0] ? xs.last_fault
                                      : "the CUDA executor was lost");
    cumod__gemm_gate_lost(&u->gemm);
    if (u->role == CUMOD_UNIT_LOADER || !u->replicas_on)
        f->unit_ops.loader_lost(f, explained, xs.last_fault);
    if (u->role != CUMOD_UNIT_SERVE)
        return;
    /* A pool's executor restarts as an MPS client: a standby (outside
     * MPS) would time-slice beside the pool. */
    cumod_unit *sb = u->pool > 1 ? NULL : unit_standby(f, u->device);
    if (sb == NULL)
        return; /* its own executor restarts (xclient.c's backoff) */
    /* The standby takes its place now; the executor that died restarts as
     * the new standby. */
    cumod_xc *dead = u->xc;
    u->xc = sb->xc;
    sb->xc = dead;
    sb->up = 0;
    cumod_xc_hooks hu = unit_hooks(u), hs = unit_hooks(sb);
    char lu[96], ls[96];
    unit_label(u, lu, sizeof(lu));
    unit_label(sb, ls, sizeof(ls));
    cumod__xc_set_hooks(u->xc, &hu, lu);
    cumod__xc_set_hooks(sb->xc, &hs, ls);
    cumod__reps_swap(u, sb);
    u->up = 1;
    u->takeovers++;
    cumod__fdirect_unit_ready(u);
    CUMOD_LOGN("CUMOD-STANDBY",
               "domain %s on device %d: the standby executor (pid %d) takes "
               "over after: %.300s",
               u->domain, u->device, cumod__xc_pid(u->xc),
               xs.last_fault[0] ? xs.last_fault : "its executor's exit");
    cumod_catalog_event ev = {.kind =
                                  CUMOD__EVENT_KIND__EVENT_EXECUTOR_RESTARTED,
                              .detail = "a standby executor took over"};
    cumod__events_add(&f->events, &ev);
    f->unit_ops.unpark(u);
}

static void
unit_on_direct(void *arg, uint32_t op, const void *payload, size_t len)
{
    cumod__fdirect_packet(arg, op, payload, len);
}

static void
unit_on_fault(void *arg, const char *message)
{
    cumod_unit *u = arg;
    cumod__metrics_fault(u->f, 0);
    cumod__faults_reported(&u->faults, message);
    if (u->role == CUMOD_UNIT_LOADER || !u->replicas_on)
        cumod__notify_status(&u->f->notify, "a fault: %.400s", message);
}

static void
unit_on_failed(void *arg, const char *message, int code)
{
    cumod_unit *u = arg;
    cumod_front *f = u->f;

    if (u->role == CUMOD_UNIT_LOADER || !u->replicas_on) {
        f->unit_ops.start_failed(f, message, code);
        return;
    }
    /* A domain's executor that cannot start (a device that does not
     * exist): its requests are refused saying why; the next one tries
     * again. */
    CUMOD_LOGE("CUMOD-DOMAIN", "%s %s on device %d cannot start: %s",
               unit_role_name(u), u->domain, u->device, message);
    u->failed = 1;
    u->failed_ms = uv_now(&f->loop);
    snprintf(u->fail_msg, sizeof(u->fail_msg), "device %d: %.500s", u->device,
             message);
    cumod__xc_close(u->xc);
    u->xc = NULL;
    u->up = 0;
    f->unit_ops.park_fail(u, CUMOD_ENODEVICE, u->fail_msg);
}

/* --- Start and stop ---------------------------------------------------------
 */

cumod_err
cumod__units_start(cumod_front *f, cumod_status *st)
{
    const cumod_config *cfg = f->cfg;
    f->replicas = cfg->domains_by != CUMOD_DOMAINS_NONE || cfg->ndomains > 0 ||
                  cfg->ndevices > 1 || cfg->devices_all || cfg->standby > 0 ||
                  cfg->pool > 1;
    cumod_unit *u =
        unit_new(f, f->replicas ? CUMOD_UNIT_LOADER : CUMOD_UNIT_SERVE,
                 f->replicas ? "" : "default", -1, cfg->device, 1, 0);
    if (u == NULL)
        return cumod__status_set(st, CUMOD_ENOMEM, "out of memory");
    /* The loader loads the catalog's generations themselves; the lone
     * unit also serves them. */
    u->replicas_on = 0;
    if (!f->replicas)
        u->serves = 1;
    f->loader = u;
    unit_start(u);
    if (u->failed)
        return cumod__status_set(st, CUMOD_EIO, "%s", u->fail_msg);
    return CUMOD_OK;
}

void
cumod__units_stop(cumod_front *f, cumod_err code, const char *msg)
{
    for (uint32_t i = 0; i < f->nunits; i++)
        f->unit_ops.park_fail(f->units[i], code, msg);
    for (uint32_t i = 0; i < f->nunits; i++) {
        cumod_unit *u = f->units[i];
        cumod__xc_close(u->xc);
        u->xc = NULL;
        cumod__reps_lost(u, code, msg);
        cumod__idmap_fini(&u->reps);
        cumod__faults_close(&u->faults);
    }
    for (uint32_t i = 0; i < f->nunits; i++) {
        cumod_unit *u = f->units[i];
        u->up = 0;
        uv_close((uv_handle_t *)&u->park_timer, NULL);
        uv_close((uv_handle_t *)&u->idle_timer, NULL);
    }
}

void
cumod__units_free(cumod_front *f)
{
    for (uint32_t i = 0; i < f->nunits; i++) {
        cumod__fdirect_unit_free(f->units[i]);
        free(f->units[i]);
    }
    free(f->units);
    f->units = NULL;
    f->nunits = 0;
    f->loader = NULL;
}

void
cumod__devices_known(cumod_front *f, const cumod_chan_device *dev)
{
    const cumod_config *cfg = f->cfg;
    f->ndevices = 0;
    if (cfg->devices_all) {
        for (uint32_t d = 0;
             d < dev->device_count && f->ndevices < CUMOD_CONFIG_MAX_DEVICES;
             d++)
            f->devices[f->ndevices++] = (int)d;
        if (f->ndevices == 0)
            f->devices[f->ndevices++] = cfg->device;
        return;
    }
    for (int i = 0; i < cfg->ndevices; i++)
        f->devices[f->ndevices++] = cfg->devices[i];
    if (f->ndevices == 0)
        f->devices[f->ndevices++] = cfg->device;
}
