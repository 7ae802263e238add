/*
 * Hello and the module requests: ls, show, load, unload, pin, unpin,
 * reload. Those that must wait for a module (load, pin, reload) park a
 * waiter and are answered when the catalog tells it the outcome.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumod/errors.h"
#include "cumod/version.h"
#include "handlers.h"
#include "log.h"

/* --- Hello ---------------------------------------------------------------- */

typedef struct hello_call {
    cumod_front *f;
    cumod_req *r;
} hello_call;

static void
hello_on_meminfo(void *arg, const cumod_chan_hdr *hdr, const void *payload,
                 size_t len)
{
    hello_call *c = arg;
    cumod_front *f = c->f;
    Cumod__Reply reply = CUMOD__REPLY__INIT;
    Cumod__HelloReply hello = CUMOD__HELLO_REPLY__INIT;
    const cumod_chan_device *dev = cumod__xc_device(f->xc);
    cumod_chan_meminfo mi;

    if (hdr->status != CUMOD_OK || len < sizeof(mi)) {
        if (payload == NULL)
            cumod__req_failf(c->r, (cumod_err)hdr->status,
                             "the CUDA executor was lost: cumodd is starting "
                             "a new one; retry");
        else
            cumod__req_failf(
                c->r, hdr->status ? (cumod_err)hdr->status : CUMOD_EINTERNAL,
                "the executor could not read the device's memory "
                "use (see cumodd's log)");
        free(c);
        return;
    }
    memcpy(&mi, payload, sizeof(mi));
    hello.daemon_version = CUMOD_VERSION_STRING;
    hello.protocol_version = CUMOD__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    hello.device_ordinal = dev->ordinal;
    hello.device_name = (char *)dev->name;
    hello.sm_major = dev->sm_major;
    hello.sm_minor = dev->sm_minor;
    hello.multiprocessors = dev->multiprocessors;
    hello.driver_version = dev->driver_version;
    hello.total_memory = mi.total_memory;
    hello.free_memory = mi.free_memory;
    hello.kernel_dir = (char *)f->cfg->kernel_dir;
    hello.executor_pid = (uint64_t)cumod__xc_pid(f->xc);
    if (f->cat != NULL) {
        int degraded;
        cumod__catalog_stats(f->cat, &hello.modules, &hello.resident_modules,
                             &hello.resident_bytes, &degraded);
        hello.kernel_dir_degraded = degraded;
    }
    reply.body_case = CUMOD__REPLY__BODY_HELLO;
    reply.hello = &hello;
    cumod__req_answer(c->r, CUMOD_OK, NULL, &reply);
    free(c);
}

void
cumod__h_hello(cumod_front *f, cumod_req *r, cumod_session *s)
{
    hello_call *c = calloc(1, sizeof(*c));
    cumod_err rv;

    (void)s;
    if (c == NULL) {
        cumod__req_failf(r, CUMOD_ENOMEM, "out of memory");
        return;
    }
    c->f = f;
    c->r = r;
    rv = cumod__xc_call(f->xc, CUMOD_CHAN_MEMINFO, NULL, 0, -1,
                        hello_on_meminfo, c);
    if (rv != CUMOD_OK) {
        free(c);
        cumod__req_failf(r, rv,
                         "the CUDA executor is restarting: retry "
                         "shortly");
    }
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
    if ((pin ? cumod__catalog_pin(f->cat, m, &mw->w)
             : cumod__catalog_load(f->cat, m, &mw->w)) == 0) {
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
