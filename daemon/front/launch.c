/*
 * Launches and batches: every check a launch can fail is made here, before
 * anything reaches the executor, and names the argument or the limit. The
 * parameter buffer is built here (values in place, buffers turned into
 * device pointers, at the offsets cuFuncGetParamInfo gave at load), so the
 * executor only points kernelParams into it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "catalog/catalog_internal.h"
#include "cumod/errors.h"
#include "front.h"
#include "dataplane.h"
#include "log.h"

#define LAUNCH_MAX_PARAM_BYTES 32764 /* CUDA 12.1+'s kernel parameter limit */

static char *
launch_where(char *buf, size_t cap, int item)
{
    if (item >= 0)
        snprintf(buf, cap, "item %d: ", item);
    else
        buf[0] = '\0';
    return buf;
}

static const cumod_kernel *
launch_kernel(const cumod_gen *g, const char *fn)
{
    for (uint32_t i = 0; i < g->nkernels; i++)
        if (strcmp(g->kernels[i].name, fn) == 0)
            return &g->kernels[i];
    return NULL;
}

/* Checks one dimension triple against the device's limits. */
static int
launch_dims(cumod_work *w, const char *where, const char *what,
            const Cumod__Dim3 *d3, const uint32_t max[3], uint32_t out[3])
{
    static const char axis[] = "xyz";
    uint32_t v[3] = {d3 ? d3->x : 1, d3 ? d3->y : 1, d3 ? d3->z : 1};
    for (int i = 0; i < 3; i++) {
        if (v[i] == 0)
            v[i] = 1;
        if (max[i] != 0 && v[i] > max[i]) {
            cumod__server_fail(w, CUMOD_EINVAL,
                               "%s%s.%c = %u is above the device's limit %u",
                               where, what, axis[i], v[i], max[i]);
            return -1;
        }
        out[i] = v[i];
    }
    return 0;
}

int
cumod__launch_append(cumod_daemon *d, cumod_work *w, cumod_session *s,
                     const Cumod__Launch *l, int item, cumod_dp_msg *msg,
                     cumod_dp_call *c)
{
    char where[32], modname[129];
    const char *colon = l->kernel ? strchr(l->kernel, ':') : NULL;
    cumod_work_item it = {.op = CUMOD_WORK_LAUNCH};

    launch_where(where, sizeof(where), item);
    if (colon == NULL || colon == l->kernel || colon[1] == '\0' ||
        (size_t)(colon - l->kernel) > 128) {
        cumod__server_fail(w, CUMOD_EINVAL,
                           "%skernel '%.200s' is not MODULE:FUNCTION "
                           "(e.g. vadd:vadd)",
                           where, l->kernel ? l->kernel : "");
        return -1;
    }
    memcpy(modname, l->kernel, (size_t)(colon - l->kernel));
    modname[colon - l->kernel] = '\0';
    const char *fn = colon + 1;
    cumod_module *m = cumod__mod_find(d->cat, modname);
    if (m == NULL || (m->state == CUMOD_MOD_REMOVED)) {
        cumod__server_fail(w, CUMOD_ENOENT, "%sno module named '%s' in %s",
                           where, modname, d->cfg->kernel_dir);
        return -1;
    }
    m->last_use_ms = uv_now(&d->loop);
    if (m->current == NULL) {
        if (l->generation != 0 && m->retiring == NULL) {
            cumod__server_fail(w, CUMOD_ENOENT,
                               "%sgeneration %llu of %s is not loaded", where,
                               (unsigned long long)l->generation, modname);
            return -1;
        }
        /* Lazy residency: load it, then run this request again. */
        w->loop_op = CUMOD_WAIT_LAUNCH;
        w->next = m->waiters;
        m->waiters = w;
        m->want_load = 1;
        cumod__mod_refresh(m);
        return 1;
    }
    cumod_gen *g = m->current;
    if (l->generation != 0 && l->generation != g->generation) {
        for (g = m->retiring; g && g->generation != l->generation; g = g->next)
            ;
        if (g == NULL) {
            cumod__server_fail(w, CUMOD_ENOENT,
                               "%sgeneration %llu of %s is not loaded (the "
                               "current one is %llu)",
                               where, (unsigned long long)l->generation,
                               modname,
                               (unsigned long long)m->current->generation);
            return -1;
        }
    }
    const cumod_kernel *k = launch_kernel(g, fn);
    if (k == NULL) {
        char names[512] = "";
        size_t n = 0;
        for (uint32_t i = 0; i < g->nkernels && n < sizeof(names) - 1; i++)
            n += (size_t)snprintf(names + n, sizeof(names) - n, "%s%s",
                                  i ? ", " : "", g->kernels[i].name);
        cumod__server_fail(w, CUMOD_ENOENT,
                           "%smodule %s (generation %llu) has no kernel "
                           "'%.200s'; it has: %s",
                           where, modname, (unsigned long long)g->generation,
                           fn, names);
        return -1;
    }
    if (launch_dims(w, where, "grid", l->grid, d->dev.max_grid, it.grid) ||
        launch_dims(w, where, "block", l->block, d->dev.max_block, it.block))
        return -1;
    uint64_t threads = (uint64_t)it.block[0] * it.block[1] * it.block[2];
    if (d->dev.max_threads_per_block &&
        threads > d->dev.max_threads_per_block) {
        cumod__server_fail(w, CUMOD_EINVAL,
                           "%sblock %ux%ux%u has %llu threads; the device "
                           "allows %u per block",
                           where, it.block[0], it.block[1], it.block[2],
                           (unsigned long long)threads,
                           d->dev.max_threads_per_block);
        return -1;
    }
    if (d->dev.max_shared_per_block &&
        l->shared_mem > d->dev.max_shared_per_block) {
        cumod__server_fail(w, CUMOD_EINVAL,
                           "%s%u bytes of dynamic shared memory is above the "
                           "device's %u per block",
                           where, l->shared_mem, d->dev.max_shared_per_block);
        return -1;
    }
    it.shmem = l->shared_mem;
    if (l->n_args != k->nparams) {
        cumod__server_fail(
            w, CUMOD_EINVAL, "%s%s takes %u argument%s, %zu given", where,
            l->kernel, k->nparams, k->nparams == 1 ? "" : "s", l->n_args);
        return -1;
    }
    size_t blen = 0;
    for (uint32_t i = 0; i < k->nparams; i++)
        if ((size_t)k->offsets[i] + k->sizes[i] > blen)
            blen = (size_t)k->offsets[i] + k->sizes[i];
    if (blen > LAUNCH_MAX_PARAM_BYTES) {
        cumod__server_fail(w, CUMOD_EINVAL, "%sparameters too large", where);
        return -1;
    }
    unsigned char blob[LAUNCH_MAX_PARAM_BYTES];
    memset(blob, 0, blen);
    for (uint32_t i = 0; i < k->nparams; i++) {
        const Cumod__Arg *a = l->args[i];
        uint32_t sz = k->sizes[i];
        if (a->kind_case == CUMOD__ARG__KIND_VALUE) {
            if (a->value.len != sz) {
                cumod__server_fail(w, CUMOD_EINVAL,
                                   "%sargument %u of %s: %zu bytes given, the "
                                   "kernel takes %u",
                                   where, i, l->kernel, a->value.len, sz);
                return -1;
            }
            memcpy(blob + k->offsets[i], a->value.data, sz);
        } else if (a->kind_case == CUMOD__ARG__KIND_BUFFER) {
            char what[96];
            if (sz != sizeof(uint64_t)) {
                cumod__server_fail(w, CUMOD_EINVAL,
                                   "%sargument %u of %s is a buffer (a device "
                                   "pointer, 8 bytes), but the kernel takes "
                                   "%u bytes there",
                                   where, i, l->kernel, sz);
                return -1;
            }
            snprintf(what, sizeof(what), "%sargument %u of %s", where, i,
                     l->kernel);
            cumod_buf *b = cumod__dp_range(s, w, what, a->buffer->handle,
                                           a->buffer->offset, 0);
            if (b == NULL)
                return -1;
            uint64_t ptr = b->dptr + a->buffer->offset;
            memcpy(blob + k->offsets[i], &ptr, sizeof(ptr));
        } else {
            cumod__server_fail(w, CUMOD_EINVAL,
                               "%sargument %u of %s has no value", where, i,
                               l->kernel);
            return -1;
        }
    }
    if (cumod__dp_hold_gen(c, g) != 0) {
        cumod__server_fail(w, CUMOD_ENOMEM, "out of memory");
        return -1;
    }
    it.a = g->handle;
    it.b = k->index;
    c->generation = g->generation;
    cumod__dp_msg_item(msg, &it, blob, blen);
    return 0;
}

static int
launch_batch_item(cumod_daemon *d, cumod_work *w, cumod_session *s,
                  const Cumod__BatchItem *bi, int i, cumod_dp_msg *m,
                  cumod_dp_call *c)
{
    cumod_work_item it;
    cumod_seg *g;
    char what[48];

    snprintf(what, sizeof(what), "item %d: ", i);
    switch (bi->item_case) {
    case CUMOD__BATCH_ITEM__ITEM_LAUNCH:
        return cumod__launch_append(d, w, s, bi->launch, i, m, c);
    case CUMOD__BATCH_ITEM__ITEM_COPY:
        if (cumod__dp_copy_item(s, w, bi->copy, &it, &g) != 0)
            return -1;
        if (g != NULL && cumod__dp_hold_seg(c, g) != 0)
            goto nomem;
        cumod__dp_msg_item(m, &it, NULL, 0);
        return 0;
    case CUMOD__BATCH_ITEM__ITEM_MEMSET: {
        const Cumod__Memset *r = bi->memset;
        cumod_buf *b =
            cumod__dp_range(s, w, what, r->handle, r->offset, r->length);
        if (b == NULL)
            return -1;
        it = (cumod_work_item){.op = CUMOD_WORK_MEMSET,
                               .a = b->dptr + r->offset,
                               .b = r->value & 0xff,
                               .c = r->length};
        cumod__dp_msg_item(m, &it, NULL, 0);
        return 0;
    }
    case CUMOD__BATCH_ITEM__ITEM_WRITE: {
        const Cumod__WriteBuffer *r = bi->write;
        cumod_buf *b =
            cumod__dp_range(s, w, what, r->handle, r->offset, r->data.len);
        if (b == NULL)
            return -1;
        it = (cumod_work_item){
            .op = CUMOD_WORK_WRITE, .a = b->dptr + r->offset, .c = r->data.len};
        cumod__dp_msg_item(m, &it, r->data.data, r->data.len);
        return 0;
    }
    default:
        cumod__server_fail(w, CUMOD_EINVAL, "item %d is empty", i);
        return -1;
    }
nomem:
    cumod__server_fail(w, CUMOD_ENOMEM, "out of memory");
    return -1;
}

void
cumod__launch_request(cumod_daemon *d, cumod_work *w, cumod_session *s)
{
    const Cumod__Launch *l = NULL;
    const Cumod__Batch *b = NULL;
    uint64_t stream;
    int ack;

    if (w->req->body_case == CUMOD__REQUEST__BODY_LAUNCH) {
        l = w->req->launch;
        stream = l->stream;
        ack = l->when == CUMOD__REPLY_WHEN__REPLY_WHEN_ENQUEUED;
    } else {
        b = w->req->batch;
        stream = b->stream;
        ack = b->when == CUMOD__REPLY_WHEN__REPLY_WHEN_ENQUEUED;
        if (b->n_items == 0) {
            cumod__server_fail(w, CUMOD_EINVAL, "an empty batch");
            return;
        }
    }
    uint64_t key = cumod__dp_stream(s, w, stream);
    cumod_dp_call *c;
    cumod_dp_msg m;
    if (key == 0 || (c = cumod__dp_call_new(w, s, ack)) == NULL)
        return;
    cumod__dp_msg_init(&m, key);
    if (l != NULL) {
        if (cumod__launch_append(d, w, s, l, -1, &m, c) != 0) {
            cumod__dp_call_abort(c);
            cumod__dp_msg_fini(&m);
            return;
        }
    } else {
        c->batch_items = (uint32_t)b->n_items;
        for (size_t i = 0; i < b->n_items; i++) {
            w->batch_item = (int)i;
            int rv = launch_batch_item(d, w, s, b->items[i], (int)i, &m, c);
            if (rv != 0) {
                /* Answered (an error names the item), or parked for a
                 * module load and run again whole. */
                cumod__dp_call_abort(c);
                cumod__dp_msg_fini(&m);
                return;
            }
        }
    }
    w->batch_item = -1;
    cumod__dp_submit(d, c, &m);
    cumod__dp_msg_fini(&m);
}
