/* SPDX-License-Identifier: MIT */
/*
 * Hello and the module requests: ls, show, load, unload, pin, unpin,
 * reload, unquarantine. Those that must wait for a module (load, pin, reload)
 * park a waiter and are answered when the catalog tells it the outcome.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cumod/errors.h"
#include "cumod/version.h"
#include "front/transport/fdpass.h"
#include "front/serve/handlers.h"
#include "common/log.h"

/* --- Hello ---------------------------------------------------------------- */

/* Answered from the front's own state: the device as the executor described
 * it, the catalog, the executor's state (xclient.c). Free memory is asked
 * of the executor, but only for HELLO_FRESH_MS (cuMemGetInfo does not wait
 * for the GPU: 65 us behind a 200 ms kernel on an H100); past that, or when
 * no executor serves, the heartbeat's figure answers, with its age. Status
 * never waits on the executor for longer. */
#define HELLO_FRESH_MS 50

typedef struct hello_call {
    cumod_front *f;
    cumod_req *r; /* NULL once answered */
    uv_timer_t timer;
    int refs;         /* the executor's reply, and the timer's close */
    int sessions;     /* list them (Hello.sessions) */
    int uid;          /* the caller's (-1: not known): which sessions it sees */
    uint32_t pipe_id; /* the caller's connection: its own session */
} hello_call;

/* The sessions c's caller may see (SessionInfo says which: its own
 * session at least), in *infos
 * and *ptrs (the caller frees both). */
static cumod_err
hello_sessions(hello_call *c, Cumod__SessionInfo **infos,
               Cumod__SessionInfo ***ptrs, size_t *n)
{
    cumod_front *f = c->f;
    size_t cur = 0, k = 0;
    int all = c->uid == 0 || (uid_t)c->uid == geteuid();

    *n = 0;
    for (cumod_session *s; (s = cumod__sessions_next(&f->sessions, &cur));)
        k++;
    *infos = calloc(k ? k : 1, sizeof(**infos));
    *ptrs = calloc(k ? k : 1, sizeof(**ptrs));
    if (*infos == NULL || *ptrs == NULL) {
        free(*infos);
        free(*ptrs);
        *infos = NULL;
        *ptrs = NULL;
        return CUMOD_ENOMEM;
    }
    cur = 0;
    for (cumod_session *s;
         *n < k && (s = cumod__sessions_next(&f->sessions, &cur));) {
        if (!all && (c->uid < 0 || s->uid != c->uid) && s->id != c->pipe_id)
            continue;
        Cumod__SessionInfo *i = &(*infos)[*n];
        cumod__session_info__init(i);
        i->id = s->id;
        i->pid = s->pid;
        i->uid = s->uid;
        i->domain = (char *)cumod__session_domain(s);
        i->gpu_ns = s->gpu_ns;
        i->memory_bytes = s->mem_used;
        i->inflight = s->inflight;
        i->device = s->device;
        i->fast_path = cumod__ring_serving(s->ring);
        (*ptrs)[(*n)++] = i;
    }
    return CUMOD_OK;
}

/* The devices and domains of Hello (the caller sees every domain when it
 * is root or cumodd's user, else its own). */
typedef struct hello_units {
    Cumod__DeviceInfo *devs, **devp;
    Cumod__DomainInfo *doms, **domp;
    cumod_xc_status *xs;
} hello_units;

static cumod_err
hello_units_fill(hello_call *c, const cumod_unit *mine, Cumod__HelloReply *h,
                 hello_units *hu)
{
    cumod_front *f = c->f;
    int all = c->uid == 0 || (uid_t)c->uid == geteuid();
    size_t nd = (size_t)f->ndevices, nu = f->nunits;

    hu->devs = calloc(nd ? nd : 1, sizeof(*hu->devs));
    hu->devp = calloc(nd ? nd : 1, sizeof(*hu->devp));
    hu->doms = calloc(nu ? nu : 1, sizeof(*hu->doms));
    hu->domp = calloc(nu ? nu : 1, sizeof(*hu->domp));
    hu->xs = calloc(nu ? nu : 1, sizeof(*hu->xs));
    if (!hu->devs || !hu->devp || !hu->doms || !hu->domp || !hu->xs)
        return CUMOD_ENOMEM;
    for (size_t d = 0; d < nd; d++) {
        Cumod__DeviceInfo *di = &hu->devs[d];
        cumod__device_info__init(di);
        di->ordinal = f->devices[d];
        for (uint32_t k = 0; k < f->ndevs; k++)
            if (f->devs[k].ordinal == di->ordinal) {
                di->name = f->devs[k].name;
                di->uuid = f->devs[k].uuid;
                di->total_memory = f->devs[k].total_memory;
                di->free_memory = f->devs[k].free_memory;
                di->sm_major = f->devs[k].sm_major;
                di->sm_minor = f->devs[k].sm_minor;
            }
        for (uint32_t k = 0; k < nu; k++) {
            const cumod_unit *u = f->units[k];
            if (u->device != di->ordinal || u->xc == NULL)
                continue;
            if (u->role == CUMOD_UNIT_STANDBY)
                di->standby += cumod__unit_ready(u);
            else if (u->serves)
                di->executors++;
            if (cumod__unit_ready(u) &&
                (di->free_memory == 0 ||
                 cumod__xc_device(u->xc)->free_memory < di->free_memory)) {
                cumod_xc_status xs;
                cumod__xc_status(u->xc, &xs);
                if (xs.free_memory != 0)
                    di->free_memory = xs.free_memory;
            }
        }
        hu->devp[h->n_devices++] = di;
    }
    for (uint32_t k = 0; k < nu; k++) {
        const cumod_unit *u = f->units[k];
        if (u->role == CUMOD_UNIT_STANDBY && cumod__unit_ready(u)) {
            h->standby++;
            /* What its context took: the device's free memory before it
             * (as the loader found it) less what it found. */
            uint64_t before = f->loader ? f->loader->ready_free : 0;
            if (before > u->ready_free)
                h->standby_bytes += before - u->ready_free;
        }
        if (!u->serves || (!all && u != mine))
            continue;
        Cumod__DomainInfo *di = &hu->doms[h->n_domains];
        cumod__domain_info__init(di);
        di->name = (char *)u->domain;
        di->device = u->device;
        di->executor_state = (char *)cumod__unit_state(u);
        di->executor_pid = u->xc ? (uint64_t)cumod__xc_pid(u->xc) : 0;
        di->sessions = u->sessions;
        di->memory_bytes = cumod__unit_mem_used(u);
        di->memory_max = cumod__unit_mem_max(u);
        di->restarts = u->restarts;
        di->pool_member = u->member;
        di->pool_size = u->pool > 0 ? u->pool : 1;
        di->mps = u->mps && cumod__unit_ready(u);
        if (u->xc != NULL) {
            cumod__xc_status(u->xc, &hu->xs[k]);
            di->last_fault = (char *)hu->xs[k].last_fault;
            di->last_fault_unix_ms = hu->xs[k].last_fault_unix_ms;
        }
        if (u->replicas_on)
            di->resident_modules = cumod__reps_count(u);
        else if (f->cat != NULL) {
            uint64_t b;
            int deg;
            uint32_t mods;
            cumod__catalog_stats(f->cat, &mods, &di->resident_modules, &b,
                                 &deg);
        }
        hu->domp[h->n_domains++] = di;
    }
    h->devices = hu->devp;
    h->domains = hu->domp;
    return CUMOD_OK;
}

static void
hello_units_free(hello_units *hu)
{
    free(hu->devs);
    free(hu->devp);
    free(hu->doms);
    free(hu->domp);
    free(hu->xs);
}

/* The unit whose executor Hello describes: the caller's, else the
 * loader's (its own has not started). */
static cumod_unit *
hello_unit(cumod_front *f, uint32_t pipe_id, cumod_unit **mine)
{
    cumod_session *s = cumod__sessions_get(&f->sessions, pipe_id);
    *mine = s != NULL ? s->unit : NULL;
    if (*mine != NULL && (*mine)->xc != NULL)
        return *mine;
    return f->loader;
}

static void
hello_answer(hello_call *c)
{
    cumod_front *f = c->f;
    Cumod__Reply reply = CUMOD__REPLY__INIT;
    Cumod__HelloReply hello = CUMOD__HELLO_REPLY__INIT;
    cumod_unit *mine, *u;
    cumod_xc_status xs = {.state = "stopping", .last_fault = ""};
    hello_units hu = {0};

    if (c->r == NULL)
        return;
    u = hello_unit(f, c->pipe_id, &mine);
    const cumod_chan_device *dev = cumod__unit_device(mine != NULL ? mine : u);
    if (u != NULL && u->xc != NULL)
        cumod__xc_status(u->xc, &xs);
    hello.daemon_version = CUMOD_VERSION_STRING;
    hello.protocol_version = CUMOD__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    hello.device_ordinal = dev->ordinal;
    hello.device_name = (char *)dev->name;
    hello.sm_major = dev->sm_major;
    hello.sm_minor = dev->sm_minor;
    hello.multiprocessors = dev->multiprocessors;
    hello.driver_version = dev->driver_version;
    hello.total_memory = xs.total_memory;
    hello.free_memory = xs.free_memory;
    hello.free_memory_age_ms = xs.memory_age_ms;
    hello.kernel_dir = (char *)f->cfg->kernel_dir;
    hello.executor_pid =
        u != NULL && u->xc != NULL ? (uint64_t)cumod__xc_pid(u->xc) : 0;
    hello.executor_state =
        (char *)(mine != NULL ? cumod__unit_state(mine) : xs.state);
    hello.executor_state_since_unix_ms = xs.since_unix_ms;
    hello.executor_restarts = xs.restarts;
    hello.last_fault = (char *)xs.last_fault;
    hello.last_fault_unix_ms = xs.last_fault_unix_ms;
    hello.launch_deadline_ms = f->cfg->launch_deadline_ms;
    hello.max_launch_deadline_ms = f->cfg->max_launch_deadline_ms;
    hello.max_shared_per_block_optin = dev->max_shared_per_block_optin;
    hello.max_cluster_size = dev->cluster_launch ? 16 : 0;
    hello.cooperative_launch = dev->cooperative_launch != 0;
    hello.rings_open = f->rings.open;
    hello.ring_requests = f->rings.records;
    hello.max_message = (uint32_t)f->cfg->max_msg;
    hello.fd_socket = (char *)cumod__fdpass_path(f->fdpass);
    hello.domain = mine != NULL ? mine->domain : "default";
    hello.session_device = mine != NULL ? mine->device : dev->ordinal;
    if (f->cat != NULL) {
        int degraded;
        cumod__catalog_stats(f->cat, &hello.modules, &hello.resident_modules,
                             &hello.resident_bytes, &degraded);
        hello.kernel_dir_degraded = degraded;
    }
    Cumod__SessionInfo *infos = NULL, **ptrs = NULL;
    if ((c->sessions &&
         hello_sessions(c, &infos, &ptrs, &hello.n_sessions) != CUMOD_OK) ||
        hello_units_fill(c, mine, &hello, &hu) != CUMOD_OK) {
        cumod__req_failf(c->r, CUMOD_ENOMEM, "out of memory");
        c->r = NULL;
        free(infos);
        free(ptrs);
        hello_units_free(&hu);
        return;
    }
    hello.sessions = ptrs;
    hello.sessions_mono_ns = cumod__mono_ns();
    reply.body_case = CUMOD__REPLY__BODY_HELLO;
    reply.hello = &hello;
    cumod__req_answer(c->r, CUMOD_OK, NULL, &reply);
    c->r = NULL;
    free(infos);
    free(ptrs);
    hello_units_free(&hu);
}

static void
hello_unref(hello_call *c)
{
    if (--c->refs == 0)
        free(c);
}

static void
hello_on_timer_close(uv_handle_t *h)
{
    hello_unref(h->data);
}

static void
hello_on_timer(uv_timer_t *h)
{
    hello_call *c = h->data;
    hello_answer(c); /* from the heartbeat's figures */
    uv_close((uv_handle_t *)h, hello_on_timer_close);
}

static void
hello_on_meminfo(void *arg, const cumod_chan_hdr *hdr, const void *payload,
                 size_t len)
{
    hello_call *c = arg;
    cumod_chan_meminfo mi;

    if (hdr->status == CUMOD_OK && payload != NULL && len >= sizeof(mi)) {
        memcpy(&mi, payload, sizeof(mi));
        cumod_unit *mine, *u = hello_unit(c->f, c->pipe_id, &mine);
        if (u != NULL && u->xc != NULL)
            cumod__xc_meminfo(u->xc, mi.free_memory, mi.total_memory);
    }
    hello_answer(c);
    if (!uv_is_closing((uv_handle_t *)&c->timer)) {
        uv_timer_stop(&c->timer);
        uv_close((uv_handle_t *)&c->timer, hello_on_timer_close);
    }
    hello_unref(c);
}

void
cumod__h_hello(cumod_front *f, cumod_req *r, cumod_session *s)
{
    hello_call *c = calloc(1, sizeof(*c));

    (void)s; /* NULL: Hello needs none */
    if (c == NULL) {
        cumod__req_failf(r, CUMOD_ENOMEM, "out of memory");
        return;
    }
    c->f = f;
    c->r = r;
    c->sessions =
        r->msg != NULL && r->msg->hello != NULL && r->msg->hello->sessions;
    /* The peer's credentials say who asks. */
    int gid, pid;
    c->uid = -1;
    c->pipe_id = r->pipe_id;
    if (r->ops->peer == NULL || r->ops->peer(r, &c->uid, &gid, &pid) != 0)
        c->uid = -1;
    cumod_unit *mine, *u = hello_unit(f, r->pipe_id, &mine);
    if (u == NULL || cumod__xc_call(u->xc, CUMOD_CHAN_MEMINFO, NULL, 0, -1,
                                    hello_on_meminfo, c) != CUMOD_OK) {
        hello_answer(c); /* no executor serves: what the front knows */
        free(c);
        return;
    }
    c->refs = 2;
    uv_timer_init(&f->loop, &c->timer);
    c->timer.data = c;
    uv_timer_start(&c->timer, hello_on_timer, HELLO_FRESH_MS, 0);
}

/* --- SetDevice --------------------------------------------------------------
 */

void
cumod__h_set_device(cumod_front *f, cumod_req *r, cumod_session *s)
{
    int dev = r->msg->set_device->device;
    Cumod__Reply reply = CUMOD__REPLY__INIT;
    Cumod__DeviceReply dr = CUMOD__DEVICE_REPLY__INIT;

    if ((s = cumod__sessions_get(&f->sessions, r->pipe_id)) == NULL) {
        cumod__req_failf(r, CUMOD_ECLOSED, "the connection is closed");
        return;
    }
    if (!cumod__device_served(f, dev)) {
        char list[256] = "";
        size_t n = 0;
        for (int i = 0; i < f->ndevices && n < sizeof(list) - 16; i++)
            n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%d",
                                  i ? ", " : "", f->devices[i]);
        cumod__req_failf(r, CUMOD_EINVAL,
                         "device %d is not served by this cumodd (--device): "
                         "it serves %s",
                         dev, list);
        return;
    }
    if (dev != s->device) {
        if (cumod__session_holds_device_state(s) || s->inflight > 0 ||
            cumod__idmap_count(&s->streams) > 0 || s->mem_used > 0) {
            cumod__req_failf(r, CUMOD_EBUSY,
                             "this session holds buffers, segments, streams "
                             "or work on device %d: choose the device before "
                             "the first of them",
                             s->device);
            return;
        }
        int uid = s->uid, gid = s->gid;
        int listener = f->srv != NULL && !cumod__ring_req(r)
                           ? cumod__server_pipe_listener(f->srv, r->pipe_id)
                           : 0;
        cumod_unit *u = cumod__unit_for_session(f, listener, uid, gid, dev);
        if (u == NULL) {
            cumod__req_failf(r, CUMOD_ENOMEM, "out of memory");
            return;
        }
        if (u != s->unit) {
            cumod__unit_leave(s->unit, s);
            cumod__unit_join(u, s);
        }
        s->device = dev;
        cumod__session_placed(s);
    }
    dr.device = s->device;
    dr.domain = s->domain;
    reply.body_case = CUMOD__REPLY__BODY_DEVICE;
    reply.device = &dr;
    cumod__req_answer(r, CUMOD_OK, NULL, &reply);
}

/* --- ls and show ---------------------------------------------------------- */

void
cumod__h_list(cumod_front *f, cumod_req *r, cumod_session *s)
{
    Cumod__Reply reply = CUMOD__REPLY__INIT;
    Cumod__ListModulesReply list = CUMOD__LIST_MODULES_REPLY__INIT;
    cumod_module_view *v = NULL;
    Cumod__ModuleInfo **mis;
    size_t n = 0;

    (void)s;
    if (cumod__catalog_views(f->cat, &v, &n) != CUMOD_OK ||
        (mis = calloc(n + 1, sizeof(*mis))) == NULL) {
        cumod__catalog_views_free(v, n);
        cumod__req_failf(r, CUMOD_ENOMEM, "out of memory listing modules");
        return;
    }
    for (size_t i = 0; i < n; i++)
        mis[i] = &v[i].mi;
    list.n_modules = n;
    list.modules = mis;
    reply.body_case = CUMOD__REPLY__BODY_LIST_MODULES;
    reply.list_modules = &list;
    cumod__req_answer(r, CUMOD_OK, NULL, &reply);
    free(mis);
    cumod__catalog_views_free(v, n);
}

void
cumod__h_show(cumod_front *f, cumod_req *r, cumod_session *s)
{
    Cumod__Reply reply = CUMOD__REPLY__INIT;
    cumod_module_show show;
    cumod_status st;
    cumod_module *m;

    (void)s;
    m = cumod__catalog_find(f->cat, r->msg->show_module->name, &st);
    if (m == NULL) {
        cumod__req_fail(r, &st);
        return;
    }
    if (cumod__module_show(m, &show) != CUMOD_OK) {
        cumod__req_failf(r, CUMOD_ENOMEM, "out of memory");
        return;
    }
    reply.body_case = CUMOD__REPLY__BODY_SHOW_MODULE;
    reply.show_module = &show.reply;
    cumod__req_answer(r, CUMOD_OK, NULL, &reply);
    cumod__module_show_fini(&show);
}

/* --- load, unload, pin, unpin, reload ------------------------------------ */

static void
mod_reply(cumod_req *r, const cumod_module *m, const char *note)
{
    Cumod__Reply reply = CUMOD__REPLY__INIT;
    Cumod__ModuleReply mr = CUMOD__MODULE_REPLY__INIT;
    cumod_module_view v;

    cumod__module_view(m, &v);
    mr.module = &v.mi;
    mr.note = (char *)note;
    reply.body_case = CUMOD__REPLY__BODY_MODULE;
    reply.module = &mr;
    cumod__req_answer(r, CUMOD_OK, NULL, &reply);
    cumod__module_view_fini(&v);
}

/* A module request waiting for its module to settle. */
typedef struct mod_wait {
    cumod_waiter w;
    cumod_req *r;
} mod_wait;

static void
mod_on_settled(cumod_waiter *w, cumod_module *m, const cumod_status *st)
{
    mod_wait *mw = CUMOD_CONTAINER_OF(w, mod_wait, w);
    char note[256];

    if (st->code != CUMOD_OK) {
        cumod__req_fail(mw->r, st);
    } else {
        snprintf(note, sizeof(note), "%s generation %llu",
                 cumod__module_resident(m) ? "resident," : "not resident,",
                 (unsigned long long)cumod__module_generation(m));
        mod_reply(mw->r, m, note);
    }
    free(mw);
}

static mod_wait *
mod_wait_new(cumod_req *r)
{
    mod_wait *mw = calloc(1, sizeof(*mw));
    if (mw == NULL) {
        cumod__req_failf(r, CUMOD_ENOMEM, "out of memory");
        return NULL;
    }
    mw->r = r;
    mw->w.cb = mod_on_settled;
    return mw;
}

/* The module r names, or NULL after answering r. */
static cumod_module *
mod_find(cumod_front *f, cumod_req *r, const Cumod__ModuleRequest *mr)
{
    cumod_status st;
    cumod_module *m = cumod__catalog_find(f->cat, mr ? mr->name : NULL, &st);
    if (m == NULL)
        cumod__req_fail(r, &st);
    return m;
}

static void
mod_load_or_pin(cumod_front *f, cumod_req *r, const Cumod__ModuleRequest *q,
                int pin)
{
    cumod_module *m = mod_find(f, r, q);
    mod_wait *mw;

    if (m == NULL || (mw = mod_wait_new(r)) == NULL)
        return;
    const Cumod__JitOptions *jo = q->jit;
    int rv;
    if (!pin && jo != NULL) {
        /* The load's own JIT options: checked here, kept by the module. */
        cumod_jit_opts j = CUMOD_JIT_OPTS_UNSET;
        struct {
            const Cumod__JitValue *v;
            int32_t *to;
            const char *name;
            int32_t lo, hi;
        } in[] = {
            {jo->opt_level, &j.opt_level, "opt_level", 0, 4},
            {jo->max_registers, &j.max_registers, "max_registers", 1, 255},
            {jo->line_info, &j.line_info, "line_info", 0, 1},
            {jo->fast_compile, &j.fast_compile, "fast_compile", 0, 3},
        };
        for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
            if (in[i].v == NULL)
                continue;
            int32_t v = in[i].v->value;
            if (v != -1 && (v < in[i].lo || v > in[i].hi)) {
                free(mw);
                cumod__req_failf(r, CUMOD_EINVAL,
                                 "jit.%s: %d is not from %d to %d (or -1 to "
                                 "clear it)",
                                 in[i].name, v, in[i].lo, in[i].hi);
                return;
            }
            *in[i].to = v == -1 ? -2 : v;
        }
        rv = cumod__catalog_load_jit(f->cat, m, &j, &mw->w);
    } else {
        rv = pin ? cumod__catalog_pin(f->cat, m, &mw->w)
                 : cumod__catalog_load(f->cat, m, &mw->w);
    }
    if (rv == 0) {
        free(mw);
        mod_reply(r, m, pin ? "pinned, resident" : "already resident");
    }
}

void
cumod__h_load(cumod_front *f, cumod_req *r, cumod_session *s)
{
    (void)s;
    mod_load_or_pin(f, r, r->msg->load_module, 0);
}

void
cumod__h_pin(cumod_front *f, cumod_req *r, cumod_session *s)
{
    (void)s;
    mod_load_or_pin(f, r, r->msg->pin_module, 1);
}

void
cumod__h_unpin(cumod_front *f, cumod_req *r, cumod_session *s)
{
    cumod_module *m = mod_find(f, r, r->msg->unpin_module);
    (void)s;
    if (m == NULL)
        return;
    cumod__catalog_unpin(m);
    mod_reply(r, m, "unpinned");
}

void
cumod__h_unload(cumod_front *f, cumod_req *r, cumod_session *s)
{
    cumod_module *m = mod_find(f, r, r->msg->unload_module);
    cumod_status st;
    char note[128];

    (void)s;
    if (m == NULL)
        return;
    if (cumod__catalog_unload(f->cat, m, note, sizeof(note), &st) != CUMOD_OK)
        cumod__req_fail(r, &st);
    else
        mod_reply(r, m, note);
}

void
cumod__h_reload(cumod_front *f, cumod_req *r, cumod_session *s)
{
    cumod_module *m = mod_find(f, r, r->msg->reload_module);
    mod_wait *mw;

    (void)s;
    if (m == NULL || (mw = mod_wait_new(r)) == NULL)
        return;
    cumod__catalog_reload(f->cat, m, &mw->w);
}

/* Lifts a quarantine: answered at once; the file's bytes are read and
 * loaded again in the background where the module is resident. */
void
cumod__h_unquarantine(cumod_front *f, cumod_req *r, cumod_session *s)
{
    cumod_module *m = mod_find(f, r, r->msg->unquarantine_module);
    char note[128];

    (void)s;
    if (m == NULL)
        return;
    (void)cumod__catalog_unquarantine(f->cat, m, note, sizeof(note));
    mod_reply(r, m, note);
}

void
cumod__h_watch(cumod_front *f, cumod_req *r, cumod_session *s)
{
    (void)s;
    cumod__events_watch(&f->events, r, f->cfg->max_watch_wait_ms);
}
