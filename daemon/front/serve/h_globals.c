/* SPDX-License-Identifier: MIT */
/*
 * Module globals by name (ReadGlobal, WriteGlobal) and a kernel's own
 * settings (KernelSettings). A global is read or written with a copy in
 * the session's stream order, on the module's current generation (loaded
 * first if it is not resident, as a launch would). A write is also kept
 * by the catalog, before the copy is sent, so every later generation gets
 * it before it serves (catalog/globals.c). Globals are the module's, shared
 * by every client.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "front/state/checks.h"
#include "front/units/direct.h"
#include "cumod/errors.h"
#include "front/serve/handlers.h"
#include "common/log.h"
#include "front/serve/work.h"

static void global_build(cumod_work_call *c);

static void
global_on_settled(cumod_waiter *w, cumod_module *m, const cumod_status *st)
{
    cumod_work_call *c = CUMOD_CONTAINER_OF(w, cumod_work_call, waiter);
    (void)m;
    if (st->code != CUMOD_OK) {
        cumod__work_refuse(c, st, -1);
        return;
    }
    global_build(c);
}

/* The global a request names, in the module's current generation. */
static int
global_resolve(cumod_work_call *c, const char *module, const char *name,
               cumod_gen **gp, cumod_rep **rp, const cumod_gen_global **out,
               cumod_status *st)
{
    cumod_gen *g;
    cumod_rep *rep;
    uint64_t handle;
    if (name == NULL || name[0] == '\0' || strlen(name) > 1000)
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "a global needs a name (1 to 1000 bytes)"),
               -1;
    switch (cumod__catalog_resolve(c->f->cat, module, 0, &c->waiter, &g, st)) {
    case CUMOD_RESOLVE_PARKED:
        return 1;
    case CUMOD_RESOLVE_REFUSED:
        return -1;
    case CUMOD_RESOLVE_READY:
        break;
    }
    /* The session's executor's own copy (with domains, each has one). */
    switch (cumod__rep_get(c->s->unit, g, &c->waiter, &handle, &rep, st)) {
    case CUMOD_RESOLVE_PARKED:
        return 1;
    case CUMOD_RESOLVE_REFUSED:
        return -1;
    case CUMOD_RESOLVE_READY:
        break;
    }
    const cumod_gen_global *gg =
        rep != NULL ? cumod__rep_global(rep, name) : cumod__gen_global(g, name);
    if (gg == NULL) {
        cumod__status_set(st, CUMOD_ENOENT,
                          "module %.128s has no global '%.200s' (cumodctl show "
                          "%.128s lists its globals)",
                          module, name, module);
        return -1;
    }
    *gp = g;
    *rp = rep;
    *out = gg;
    return 0;
}

static void
global_build(cumod_work_call *c)
{
    const Cumod__Request *q = c->r->msg;
    int write = q->body_case == CUMOD__REQUEST__BODY_WRITE_GLOBAL;
    const char *module =
        write ? q->write_global->module : q->read_global->module;
    const char *name = write ? q->write_global->name : q->read_global->name;
    const cumod_gen_global *gg;
    cumod_work_item it;
    cumod_status st;
    cumod_gen *g;
    cumod_rep *rep;
    int rv;

    cumod__work_reset(c);
    if (c->s->closed) {
        cumod__status_set(&st, CUMOD_ECLOSED, "the session closed");
        cumod__work_refuse(c, &st, -1);
        return;
    }
    if ((rv = global_resolve(c, module ? module : "", name, &g, &rep, &gg,
                             &st)) > 0)
        return; /* parked: global_on_settled goes on */
    if (rv < 0) {
        cumod__work_refuse(c, &st, -1);
        return;
    }
    uint64_t off = write ? q->write_global->offset : q->read_global->offset;
    uint64_t len = write ? q->write_global->data.len : q->read_global->length;
    if (!write && len == 0 && off <= gg->size)
        len = gg->size - off; /* to its end */
    if (off > gg->size || len > gg->size - off) {
        cumod__status_set(&st, CUMOD_EINVAL,
                          "global %s of %s: offset %llu + length %llu is past "
                          "its %llu bytes",
                          gg->name, module, (unsigned long long)off,
                          (unsigned long long)len,
                          (unsigned long long)gg->size);
        cumod__work_refuse(c, &st, -1);
        return;
    }
    if (!write && len > c->f->cfg->max_msg - 64) {
        cumod__status_set(&st, CUMOD_ETOOBIG,
                          "global %s of %s: %llu bytes do not fit a reply",
                          gg->name, module, (unsigned long long)len);
        cumod__work_refuse(c, &st, -1);
        return;
    }
    if (write) {
        /* Kept first: a generation loading now gets it too. */
        cumod_module *m = cumod__catalog_find(c->f->cat, module, &st);
        if (m == NULL || cumod__globals_keep(m, gg->name, gg->size, off,
                                             q->write_global->data.data, len,
                                             &st) != CUMOD_OK) {
            cumod__work_refuse(c, &st, -1);
            return;
        }
        it = (cumod_work_item){
            .op = CUMOD_WORK_WRITE, .a = gg->dptr + off, .c = len};
        cumod__work_msg_item(&c->msg, &it, q->write_global->data.data, len);
    } else {
        it = (cumod_work_item){
            .op = CUMOD_WORK_READ, .b = gg->dptr + off, .c = len};
        cumod__work_msg_item(&c->msg, &it, NULL, 0);
    }
    cumod__work_hold_gen(c, g, rep);
    c->generation = cumod__gen_number(g);
    cumod__work_submit(c);
}

/* ReadGlobal and WriteGlobal. */
static void
global_start(cumod_front *f, cumod_req *r, cumod_session *s, uint64_t stream,
             int ack)
{
    cumod_work_call *c = cumod__work_call_start(f, r, s, stream, ack);

    if (c == NULL)
        return;
    c->waiter.op = CUMOD_WAIT_LAUNCH;
    c->waiter.cb = global_on_settled;
    global_build(c);
}

void
cumod__h_read_global(cumod_front *f, cumod_req *r, cumod_session *s)
{
    global_start(f, r, s, r->msg->read_global->stream, 0);
}

void
cumod__h_write_global(cumod_front *f, cumod_req *r, cumod_session *s)
{
    const Cumod__WriteGlobal *w = r->msg->write_global;
    global_start(f, r, s, w->stream,
                 w->when == CUMOD__REPLY_WHEN__REPLY_WHEN_ENQUEUED);
}

void
cumod__h_kernel_settings(cumod_front *f, cumod_req *r, cumod_session *s)
{
    const Cumod__KernelSettings *k = r->msg->kernel_settings;
    char module[129];
    const char *fn;
    cumod_status st;
    cumod_module *m;

    (void)s;
    if (cumod__check_kernel_name(k->kernel, module, &fn, &st) != CUMOD_OK ||
        (m = cumod__catalog_find(f->cat, module, &st)) == NULL) {
        cumod__req_fail(r, &st);
        return;
    }
    if (k->carveout != NULL && k->carveout->percent > 100) {
        cumod__req_failf(r, CUMOD_EINVAL,
                         "carveout %u%% is not a percentage (0-100)",
                         k->carveout->percent);
        return;
    }
    int32_t cv = k->carveout ? (int32_t)k->carveout->percent : -1;
    fn = cumod__module_kernel_name(m, fn);
    if (cumod__module_set_carveout(m, fn, cv) != CUMOD_OK) {
        cumod__req_failf(r, CUMOD_ENOMEM, "out of memory");
        return;
    }
    /* Direct launches carry the carveout they were published with. */
    cumod__fdirect_module_changed(f, module);
    if (cv < 0)
        CUMOD_LOGI("CUMOD-KERNEL-SETTINGS",
                   "%s:%.200s: carveout back to the driver's default", module,
                   fn);
    else
        CUMOD_LOGI("CUMOD-KERNEL-SETTINGS", "%s:%.200s: carveout %d%%", module,
                   fn, cv);
    cumod__req_answer(r, CUMOD_OK, NULL, NULL);
}
