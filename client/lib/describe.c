/* SPDX-License-Identifier: MIT */
/*
 * Module descriptions (cumod_module_describe) and module globals
 * (cumod_global_read, cumod_global_write), kernel settings
 * (cumod_kernel_set_carveout) of libcumod.
 */
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"

/* The description and what it points into: the reply itself. */
typedef struct describe_holder {
    cumod_module_description d; /* first: the caller's pointer */
    Cumod__Reply *reply;
    cumod_kernel_desc *ks;
    cumod_param_desc *ps;
    cumod_global_desc *gs;
} describe_holder;

void
cumod_module_description_free(cumod_module_description *d)
{
    describe_holder *h = (describe_holder *)d;
    if (h == NULL)
        return;
    cumod__module_info_fini(&h->d.module);
    free(h->ks);
    free(h->ps);
    free(h->gs);
    if (h->reply != NULL)
        cumod__reply__free_unpacked(h->reply, NULL);
    free(h);
}

int
cumod_module_describe(cumod_client *c, const char *name,
                      cumod_module_description **out)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__ModuleRequest mr = CUMOD__MODULE_REQUEST__INIT;
    describe_holder *h;
    size_t np = 0, at = 0;
    int rv;

    if (c == NULL || out == NULL)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_module_describe: NULL argument");
    if ((rv = cumod__module_check_name("cumod_module_describe", name)) !=
        CUMOD_OK)
        return rv;
    if ((h = calloc(1, sizeof(*h))) == NULL)
        return cumod__client_set_error(CUMOD_ENOMEM, "out of memory");
    mr.name = (char *)name;
    req.body_case = CUMOD__REQUEST__BODY_SHOW_MODULE;
    req.show_module = &mr;
    if ((rv = cumod__client_call_for(c, &req, CUMOD__REPLY__BODY_SHOW_MODULE,
                                     "cumod_module_describe", &h->reply)) !=
        CUMOD_OK) {
        free(h);
        return rv;
    }
    const Cumod__ShowModuleReply *s = h->reply->show_module;
    for (size_t i = 0; i < s->n_kernels; i++)
        np += s->kernels[i]->n_params;
    if (s->module == NULL ||
        cumod__module_info_copy(&h->d.module, s->module) != 0 ||
        (h->ks = calloc(s->n_kernels + 1, sizeof(*h->ks))) == NULL ||
        (h->ps = calloc(np + 1, sizeof(*h->ps))) == NULL ||
        (h->gs = calloc(s->n_globals + 1, sizeof(*h->gs))) == NULL) {
        cumod_module_description_free(&h->d);
        return cumod__client_set_error(s->module ? CUMOD_ENOMEM : CUMOD_EPROTO,
                                       "cumod_module_describe: %s",
                                       s->module ? "out of memory"
                                                 : "a reply without a module");
    }
    h->d.described_from = s->described_from;
    for (size_t i = 0; i < s->n_kernels; i++) {
        const Cumod__KernelInfo *k = s->kernels[i];
        cumod_kernel_desc *o = &h->ks[i];
        o->name = k->name;
        o->display = k->display_name[0] ? k->display_name : k->name;
        o->signature = k->signature;
        o->static_shared = k->static_shared;
        o->registers = k->registers;
        o->max_threads = k->max_threads;
        o->carveout = k->carveout;
        if (k->cluster != NULL)
            o->cluster =
                (cumod_dim3){k->cluster->x, k->cluster->y, k->cluster->z};
        o->nparams = k->n_params;
        o->params = &h->ps[at];
        for (size_t j = 0; j < k->n_params; j++, at++) {
            h->ps[at].offset = k->params[j]->offset;
            h->ps[at].size = k->params[j]->size;
            h->ps[at].type = k->params[j]->type;
            h->ps[at].indirect = k->params[j]->indirect;
        }
    }
    for (size_t i = 0; i < s->n_globals; i++) {
        const Cumod__GlobalInfo *g = s->globals[i];
        h->gs[i] = (cumod_global_desc){.name = g->name,
                                       .size = g->size,
                                       .constant = g->constant,
                                       .kept_bytes = g->kept_bytes};
    }
    h->d.nkernels = s->n_kernels;
    h->d.kernels = h->ks;
    h->d.nglobals = s->n_globals;
    h->d.globals = h->gs;
    *out = &h->d;
    return CUMOD_OK;
}

static int
global_check(const char *fn, cumod_client *c, const char *module,
             const char *name, const void *data, size_t len)
{
    int rv;
    if (c == NULL || name == NULL || name[0] == '\0' ||
        (data == NULL && len > 0))
        return cumod__client_set_error(CUMOD_EINVAL, "%s: NULL argument", fn);
    if ((rv = cumod__module_check_name(fn, module)) != CUMOD_OK)
        return rv;
    if (len == 0)
        return cumod__client_set_error(CUMOD_EINVAL, "%s: length is 0", fn);
    return CUMOD_OK;
}

int
cumod_global_read(cumod_client *c, const char *module, const char *name,
                  size_t offset, void *data, size_t len, cumod_stream stream)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__ReadGlobal rg = CUMOD__READ_GLOBAL__INIT;
    Cumod__Reply *reply = NULL;
    int rv;

    if ((rv = global_check("cumod_global_read", c, module, name, data, len)) !=
        CUMOD_OK)
        return rv;
    rg.module = (char *)module;
    rg.name = (char *)name;
    rg.offset = offset;
    rg.length = len;
    rg.stream = stream;
    req.body_case = CUMOD__REQUEST__BODY_READ_GLOBAL;
    req.read_global = &rg;
    if ((rv = cumod__client_call_for(c, &req, CUMOD__REPLY__BODY_DATA,
                                     "cumod_global_read", &reply)) != CUMOD_OK)
        return rv;
    if (reply->data->data.len != len) {
        cumod__reply__free_unpacked(reply, NULL);
        return cumod__client_set_error(CUMOD_EPROTO,
                                       "cumod_global_read: cumodd answered a "
                                       "read of %zu bytes with another length",
                                       len);
    }
    memcpy(data, reply->data->data.data, len);
    cumod__reply__free_unpacked(reply, NULL);
    return CUMOD_OK;
}

int
cumod_global_write(cumod_client *c, const char *module, const char *name,
                   size_t offset, const void *data, size_t len,
                   cumod_stream stream)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__WriteGlobal wg = CUMOD__WRITE_GLOBAL__INIT;
    int rv;

    if ((rv = global_check("cumod_global_write", c, module, name, data, len)) !=
        CUMOD_OK)
        return rv;
    wg.module = (char *)module;
    wg.name = (char *)name;
    wg.offset = offset;
    wg.data.data = (uint8_t *)data;
    wg.data.len = len;
    wg.stream = stream;
    wg.when = CUMOD__REPLY_WHEN__REPLY_WHEN_COMPLETE;
    req.body_case = CUMOD__REQUEST__BODY_WRITE_GLOBAL;
    req.write_global = &wg;
    return cumod__client_done(c, &req, "cumod_global_write", NULL, NULL);
}

int
cumod_kernel_set_carveout(cumod_client *c, const char *kernel, int percent)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__KernelSettings ks = CUMOD__KERNEL_SETTINGS__INIT;
    Cumod__Carveout cv = CUMOD__CARVEOUT__INIT;
    Cumod__Reply *reply = NULL;
    int rv;

    if (c == NULL || kernel == NULL || strchr(kernel, ':') == NULL)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_kernel_set_carveout: a kernel "
                                       "is \"module:function\"");
    if (percent < -1 || percent > 100)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_kernel_set_carveout: %d is not "
                                       "a percentage (0-100, or -1)",
                                       percent);
    ks.kernel = (char *)kernel;
    if (percent >= 0) {
        cv.percent = (uint32_t)percent;
        ks.carveout = &cv;
    }
    req.body_case = CUMOD__REQUEST__BODY_KERNEL_SETTINGS;
    req.kernel_settings = &ks;
    if ((rv = cumod__client_call(c, &req, &reply)) != CUMOD_OK)
        return rv;
    cumod__reply__free_unpacked(reply, NULL);
    return CUMOD_OK;
}
