/*
 * The catalog's requests: ls, show, load, unload, pin, unpin, reload. Each
 * answers its work exactly once: at once, or (load, pin, reload) when the
 * module's operation settles, as a parked waiter.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog_internal.h"
#include "cumod/errors.h"
#include "front/front.h"
#include "log.h"

/* Strings a ModuleInfo points at while it is packed. */
typedef struct req_info {
    Cumod__ModuleInfo mi;
    char *images[CUMOD_IMAGE_KINDS];
    char **kernels;
    char kind[8];
} req_info;

static void
req_info_fill(const cumod_module *m, req_info *ri)
{
    Cumod__ModuleInfo *mi = &ri->mi;
    const cumod_gen *g = m->current;
    int k = cumod__mod_preferred(m);

    cumod__module_info__init(mi);
    mi->name = (char *)m->name;
    mi->state = (char *)cumod__mod_state_name(m->state);
    mi->generation = m->generation;
    mi->pinned = m->pinned;
    mi->error = m->error ? m->error : "";
    mi->load_us = m->load_us;
    mi->last_use_unix_ms = m->last_use_unix_ms;
    /* What serves: the resident generation; else the file as last read. */
    if (g != NULL) {
        mi->sha256 = (char *)g->sha256;
        mi->kind = (char *)cumod__image_kind_name(g->kind);
        mi->size = g->size;
        mi->inflight = g->inflight;
    } else {
        mi->sha256 = (char *)m->sha256;
        mi->kind =
            m->read_valid || m->error
                ? (char *)cumod__image_kind_name(m->kind)
                : (k >= 0 ? (char *)cumod__image_kind_name((cumod_image_kind)k)
                          : "");
        mi->size = m->size;
    }
    mi->file = k >= 0 ? (char *)m->files[k].name : "";
    for (int i = 0; i < CUMOD_IMAGE_KINDS; i++)
        if (m->files[i].present)
            ri->images[mi->n_images++] = (char *)m->files[i].name;
    mi->images = ri->images;
    mi->resident_generations = (g != NULL);
    for (const cumod_gen *r = m->retiring; r; r = r->next)
        mi->resident_generations++;
    ri->kernels = NULL;
    if (g != NULL && g->nkernels > 0 &&
        (ri->kernels = calloc(g->nkernels, sizeof(char *))) != NULL) {
        for (uint32_t i = 0; i < g->nkernels; i++)
            ri->kernels[i] = g->kernels[i].name;
        mi->n_kernels = g->nkernels;
        mi->kernels = ri->kernels;
    }
}

static void
req_info_fini(req_info *ri)
{
    free(ri->kernels);
}

static void
req_module_reply(cumod_module *m, struct cumod_work *w, const char *note)
{
    Cumod__Reply reply = CUMOD__REPLY__INIT;
    Cumod__ModuleReply mr = CUMOD__MODULE_REPLY__INIT;
    req_info ri;

    req_info_fill(m, &ri);
    mr.module = &ri.mi;
    mr.note = (char *)note;
    reply.body_case = CUMOD__REPLY__BODY_MODULE;
    reply.module = &mr;
    cumod__server_reply(w, &reply);
    req_info_fini(&ri);
}

void
cumod__mod_fail_waiters(cumod_module *m, int code, const char *msg)
{
    struct cumod_work *w = m->waiters;
    m->waiters = NULL;
    while (w != NULL) {
        struct cumod_work *next = w->next;
        w->next = NULL;
        cumod__server_fail(w, code, "%s: %s", m->name, msg);
        w = next;
    }
}

void
cumod__mod_answer_waiters(cumod_module *m)
{
    struct cumod_work *w = m->waiters;
    char note[256];

    if (m->op != CUMOD_OP_IDLE)
        return;
    m->waiters = NULL;
    while (w != NULL) {
        struct cumod_work *next = w->next;
        w->next = NULL;
        if (w->loop_op == CUMOD_WAIT_LAUNCH && m->current != NULL) {
            /* The launch that waited for the load runs now, checked
             * again from the start. */
            cumod__daemon_on_request(m->cat->d, w);
        } else if (w->loop_op == CUMOD_WAIT_LAUNCH) {
            cumod__server_fail(
                w, m->state == CUMOD_MOD_FAILED ? CUMOD_EIMAGE : CUMOD_EBUSY,
                "%s could not be loaded: %s", m->name,
                m->error ? m->error : "unknown reason");
        } else if (w->loop_op == CUMOD_WAIT_RELOAD && m->error != NULL) {
            if (m->current != NULL)
                cumod__server_fail(w, CUMOD_EIMAGE,
                                   "%s: the file was refused, generation %llu "
                                   "keeps serving: %s",
                                   m->name,
                                   (unsigned long long)m->current->generation,
                                   m->error);
            else
                cumod__server_fail(w, CUMOD_EIMAGE, "%s: %s", m->name,
                                   m->error);
        } else if (w->loop_op == CUMOD_WAIT_RELOAD || m->current != NULL) {
            snprintf(note, sizeof(note), "%s generation %llu",
                     m->current ? "resident," : "not resident,",
                     (unsigned long long)m->generation);
            req_module_reply(m, w, note);
        } else if (m->state == CUMOD_MOD_REMOVED) {
            cumod__server_fail(w, CUMOD_ENOENT, "%s: its files are gone",
                               m->name);
        } else {
            int code =
                m->state == CUMOD_MOD_FAILED ? CUMOD_EIMAGE : CUMOD_EBUSY;
            cumod__server_fail(w, code, "%s: not loaded: %s", m->name,
                               m->error ? m->error : "unknown reason");
        }
        w = next;
    }
}

/* The module a request names, or NULL after answering w. */
static cumod_module *
req_find(cumod_catalog *cat, struct cumod_work *w, const char *name)
{
    char stem[129];
    size_t n = name ? strlen(name) : 0;
    cumod_module *m;

    if (n == 0 || n > 128 ||
        strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     "abcdefghijklmnopqrstuvwxyz"
                     "0123456789_.-") != n) {
        cumod__server_fail(w, CUMOD_EINVAL,
                           "'%.200s' is not a module name (1 to 128 of "
                           "A-Z a-z 0-9 _ . -)",
                           name ? name : "");
        return NULL;
    }
    snprintf(stem, sizeof(stem), "%s", name);
    m = cumod__mod_find(cat, stem);
    if (m == NULL ||
        (m->state == CUMOD_MOD_REMOVED && m->current == NULL && !m->pinned)) {
        cumod__server_fail(w, CUMOD_ENOENT,
                           "no module named '%s' in %s (cumodctl ls lists "
                           "them)",
                           stem, cat->dir);
        return NULL;
    }
    return m;
}

static void
req_park(cumod_module *m, struct cumod_work *w, int op)
{
    w->loop_op = op;
    w->next = m->waiters;
    m->waiters = w;
}

static int
req_by_name(const void *a, const void *b)
{
    const cumod_module *x = *(cumod_module *const *)a;
    const cumod_module *y = *(cumod_module *const *)b;
    return strcmp(x->name, y->name);
}

void
cumod__catalog_list(cumod_catalog *cat, struct cumod_work *w)
{
    Cumod__Reply reply = CUMOD__REPLY__INIT;
    Cumod__ListModulesReply list = CUMOD__LIST_MODULES_REPLY__INIT;
    size_t n = 0;
    cumod_module **all = calloc(cat->count + 1, sizeof(*all));
    req_info *ri = calloc(cat->count + 1, sizeof(*ri));
    Cumod__ModuleInfo **mis = calloc(cat->count + 1, sizeof(*mis));

    if (all == NULL || ri == NULL || mis == NULL) {
        free(all);
        free(ri);
        free(mis);
        cumod__server_fail(w, CUMOD_ENOMEM, "out of memory listing modules");
        return;
    }
    for (size_t b = 0; b < cat->nbuckets; b++)
        for (cumod_module *m = cat->table[b]; m; m = m->hnext)
            all[n++] = m;
    qsort(all, n, sizeof(*all), req_by_name);
    for (size_t i = 0; i < n; i++) {
        req_info_fill(all[i], &ri[i]);
        mis[i] = &ri[i].mi;
    }
    list.n_modules = n;
    list.modules = mis;
    reply.body_case = CUMOD__REPLY__BODY_LIST_MODULES;
    reply.list_modules = &list;
    cumod__server_reply(w, &reply);
    for (size_t i = 0; i < n; i++)
        req_info_fini(&ri[i]);
    free(all);
    free(ri);
    free(mis);
}

void
cumod__catalog_show(cumod_catalog *cat, struct cumod_work *w, const char *name)
{
    Cumod__Reply reply = CUMOD__REPLY__INIT;
    Cumod__ShowModuleReply sr = CUMOD__SHOW_MODULE_REPLY__INIT;
    cumod_module *m = req_find(cat, w, name);
    req_info ri;

    if (m == NULL)
        return;
    req_info_fill(m, &ri);
    sr.module = &ri.mi;
    sr.jit_log = m->jit_log ? m->jit_log : "";
    const cumod_gen *g = m->current;
    uint32_t nk = g ? g->nkernels : 0;
    Cumod__KernelInfo *ks = calloc(nk + 1, sizeof(*ks));
    Cumod__KernelInfo **kp = calloc(nk + 1, sizeof(*kp));
    size_t np = 0;
    for (uint32_t i = 0; i < nk; i++)
        np += g->kernels[i].nparams;
    Cumod__ParamInfo *ps = calloc(np + 1, sizeof(*ps));
    Cumod__ParamInfo **pp = calloc(np + 1, sizeof(*pp));
    if (ks == NULL || kp == NULL || ps == NULL || pp == NULL) {
        cumod__server_fail(w, CUMOD_ENOMEM, "out of memory");
        goto done;
    }
    size_t at = 0;
    for (uint32_t i = 0; i < nk; i++) {
        const cumod_kernel *k = &g->kernels[i];
        cumod__kernel_info__init(&ks[i]);
        ks[i].name = k->name;
        ks[i].n_params = k->nparams;
        ks[i].params = &pp[at];
        for (uint32_t j = 0; j < k->nparams; j++, at++) {
            cumod__param_info__init(&ps[at]);
            ps[at].offset = k->offsets[j];
            ps[at].size = k->sizes[j];
            pp[at] = &ps[at];
        }
        kp[i] = &ks[i];
    }
    sr.n_kernels = nk;
    sr.kernels = kp;
    reply.body_case = CUMOD__REPLY__BODY_SHOW_MODULE;
    reply.show_module = &sr;
    cumod__server_reply(w, &reply);
done:
    free(ks);
    free(kp);
    free(ps);
    free(pp);
    req_info_fini(&ri);
}

void
cumod__catalog_load(cumod_catalog *cat, struct cumod_work *w, const char *name)
{
    cumod_module *m = req_find(cat, w, name);
    if (m == NULL)
        return;
    m->last_use_ms = uv_now(cat->loop);
    if (m->current != NULL && m->op == CUMOD_OP_IDLE && !m->dirty) {
        req_module_reply(m, w, "already resident");
        return;
    }
    m->want_load = 1;
    req_park(m, w, CUMOD_WAIT_LOAD);
    cumod__mod_refresh(m);
}

void
cumod__catalog_pin(cumod_catalog *cat, struct cumod_work *w, const char *name,
                   int pin)
{
    cumod_module *m = req_find(cat, w, name);
    if (m == NULL)
        return;
    if (!pin) {
        m->pinned = 0;
        req_module_reply(m, w, "unpinned");
        return;
    }
    m->pinned = 1;
    CUMOD_LOGI("CUMOD-PIN", "%s: pinned", m->name);
    if (m->current != NULL && m->op == CUMOD_OP_IDLE && !m->dirty) {
        req_module_reply(m, w, "pinned, resident");
        return;
    }
    m->want_load = 1;
    req_park(m, w, CUMOD_WAIT_LOAD);
    cumod__mod_refresh(m);
}

void
cumod__catalog_unload(cumod_catalog *cat, struct cumod_work *w,
                      const char *name)
{
    cumod_module *m = req_find(cat, w, name);
    char note[128];

    if (m == NULL)
        return;
    if (m->pinned) {
        cumod__server_fail(w, CUMOD_EPERM,
                           "%s is pinned: unpin it first (cumodctl unpin %s)",
                           m->name, m->name);
        return;
    }
    if (m->op == CUMOD_OP_LOADING) {
        cumod__server_fail(w, CUMOD_EBUSY,
                           "%s is being loaded right now: retry", m->name);
        return;
    }
    if (m->current == NULL) {
        req_module_reply(m, w, "not resident");
        return;
    }
    uint32_t inflight = m->current->inflight;
    m->want_load = 0;
    cumod__res_retire_current(m);
    if (inflight > 0)
        snprintf(note, sizeof(note),
                 "unloads when its %u launches in flight complete", inflight);
    else
        snprintf(note, sizeof(note), "unloaded");
    CUMOD_LOGI("CUMOD-UNLOAD", "%s: %s (asked)", m->name, note);
    req_module_reply(m, w, note);
}

void
cumod__catalog_reload(cumod_catalog *cat, struct cumod_work *w,
                      const char *name)
{
    cumod_module *m = req_find(cat, w, name);
    if (m == NULL)
        return;
    m->force_read = 1;
    /* A module whose load failed is retried with the same bytes: that is
     * what an operator asks for after fixing the cause elsewhere. */
    if (m->failed_sha[0] != '\0' && m->current == NULL)
        m->want_load = 1;
    m->failed_sha[0] = '\0';
    req_park(m, w, CUMOD_WAIT_RELOAD);
    cumod__mod_refresh(m);
}
