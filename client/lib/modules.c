/* SPDX-License-Identifier: MIT */
/* Module queries and commands of libcumod. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"

void
cumod__module_info_fini(cumod_module_info *m)
{
    for (size_t k = 0; k < m->nkernels; k++)
        free(m->kernels[k]);
    free(m->kernels);
    free(m->error);
    free(m->quarantine_reason);
    free(m->jit_options);
    memset(m, 0, sizeof(*m));
}

void
cumod_module_list_free(cumod_module_list *list)
{
    if (list == NULL)
        return;
    for (size_t i = 0; i < list->count; i++)
        cumod__module_info_fini(&list->modules[i]);
    free(list->modules);
    free(list);
}

void
cumod_module_result_fini(cumod_module_result *r)
{
    cumod__module_info_fini(&r->module);
}

void
cumod_module_detail_free(cumod_module_detail *d)
{
    if (d == NULL)
        return;
    cumod__module_info_fini(&d->module);
    for (size_t i = 0; i < d->nkernels; i++) {
        free(d->kernels[i].name);
        free(d->kernels[i].params);
    }
    free(d->kernels);
    free(d->jit_log);
    free(d->compile);
    free(d->compile_log);
    free(d);
}

int
cumod__module_info_copy(cumod_module_info *m, const Cumod__ModuleInfo *src)
{
    memset(m, 0, sizeof(*m));
    snprintf(m->name, sizeof(m->name), "%s", src->name);
    snprintf(m->state, sizeof(m->state), "%s", src->state);
    snprintf(m->sha256, sizeof(m->sha256), "%s", src->sha256);
    snprintf(m->kind, sizeof(m->kind), "%s", src->kind);
    snprintf(m->file, sizeof(m->file), "%s", src->file);
    m->generation = src->generation;
    m->size = src->size;
    m->pinned = src->pinned;
    m->inflight = src->inflight;
    m->resident_generations = src->resident_generations;
    m->last_use_unix_ms = src->last_use_unix_ms;
    m->load_us = src->load_us;
    snprintf(m->loaded_kind, sizeof(m->loaded_kind), "%s",
             src->loaded_kind ? src->loaded_kind : "");
    for (size_t i = 0; i < src->n_images && i < 4; i++)
        snprintf(m->images[m->nimages++], sizeof(m->images[0]), "%s",
                 src->images[i]);
    m->quarantined = src->quarantined;
    m->quarantined_unix_ms = src->quarantined_unix_ms;
    m->faults = src->faults;
    snprintf(m->quarantined_sha256, sizeof(m->quarantined_sha256), "%s",
             src->quarantined_sha256);
    if (src->error != NULL && src->error[0] != '\0' &&
        (m->error = strdup(src->error)) == NULL)
        return -1;
    if (src->quarantine_reason != NULL && src->quarantine_reason[0] != '\0' &&
        (m->quarantine_reason = strdup(src->quarantine_reason)) == NULL)
        return -1;
    if (src->jit_options != NULL && src->jit_options[0] != '\0' &&
        (m->jit_options = strdup(src->jit_options)) == NULL)
        return -1;
    if (src->n_kernels > 0 &&
        (m->kernels = calloc(src->n_kernels, sizeof(char *))) == NULL)
        return -1;
    for (size_t k = 0; k < src->n_kernels; k++) {
        if ((m->kernels[k] = strdup(src->kernels[k])) == NULL)
            return -1;
        m->nkernels++;
    }
    return 0;
}

int
cumod__module_check_name(const char *fn, const char *name)
{
    if (name == NULL || name[0] == '\0')
        return cumod__client_set_error(CUMOD_EINVAL, "%s: no module name", fn);
    return CUMOD_OK;
}

int
cumod_modules_list(cumod_client *c, cumod_module_list **out)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__ListModules lm = CUMOD__LIST_MODULES__INIT;
    Cumod__Reply *reply;
    cumod_module_list *list = NULL;
    int rv;

    if (c == NULL || out == NULL)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_modules_list: NULL argument");
    req.body_case = CUMOD__REQUEST__BODY_LIST_MODULES;
    req.list_modules = &lm;
    if ((rv = cumod__client_call(c, &req, &reply)) != CUMOD_OK)
        return rv;
    if (reply->body_case != CUMOD__REPLY__BODY_LIST_MODULES) {
        rv = cumod__client_set_error(CUMOD_EPROTO,
                                     "cumodd answered ListModules with "
                                     "another kind of reply");
        goto fail;
    }
    const Cumod__ListModulesReply *r = reply->list_modules;
    if ((list = calloc(1, sizeof(*list))) == NULL ||
        (r->n_modules > 0 &&
         (list->modules = calloc(r->n_modules, sizeof(cumod_module_info))) ==
             NULL))
        goto nomem;
    for (size_t i = 0; i < r->n_modules; i++) {
        list->count++;
        if (cumod__module_info_copy(&list->modules[i], r->modules[i]) != 0)
            goto nomem;
    }
    cumod__reply__free_unpacked(reply, NULL);
    *out = list;
    return CUMOD_OK;

nomem:
    rv = cumod__client_set_error(CUMOD_ENOMEM, "out of memory");
fail:
    cumod_module_list_free(list);
    cumod__reply__free_unpacked(reply, NULL);
    return rv;
}

/* One module command: body_case picks which; all answer a ModuleReply. */
static int
modules_command_jit(cumod_client *c, Cumod__Request__BodyCase which,
                    const char *fn, const char *name,
                    const cumod_jit_options *jit, cumod_module_result *out)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__ModuleRequest mr = CUMOD__MODULE_REQUEST__INIT;
    Cumod__JitOptions jo = CUMOD__JIT_OPTIONS__INIT;
    Cumod__JitValue jv[4] = {CUMOD__JIT_VALUE__INIT, CUMOD__JIT_VALUE__INIT,
                             CUMOD__JIT_VALUE__INIT, CUMOD__JIT_VALUE__INIT};
    Cumod__Reply *reply;
    cumod_module_result res;
    int rv;

    if (c == NULL || out == NULL)
        return cumod__client_set_error(CUMOD_EINVAL, "%s: NULL argument", fn);
    if ((rv = cumod__module_check_name(fn, name)) != CUMOD_OK)
        return rv;
    mr.name = (char *)name;
    if (jit != NULL) {
        const int in[4] = {jit->opt_level, jit->max_registers, jit->line_info,
                           jit->fast_compile};
        Cumod__JitValue **to[4] = {&jo.opt_level, &jo.max_registers,
                                   &jo.line_info, &jo.fast_compile};
        static const char *const names[4] = {"opt_level", "max_registers",
                                             "line_info", "fast_compile"};
        for (int i = 0; i < 4; i++) {
            if (in[i] == CUMOD_JIT_UNSET)
                continue;
            if (in[i] < CUMOD_JIT_CLEAR)
                return cumod__client_set_error(
                    CUMOD_EINVAL,
                    "%s: jit.%s: %d is not a value, "
                    "CUMOD_JIT_UNSET or CUMOD_JIT_CLEAR",
                    fn, names[i], in[i]);
            jv[i].value = in[i] == CUMOD_JIT_CLEAR ? -1 : in[i];
            *to[i] = &jv[i];
        }
        mr.jit = &jo;
    }
    req.body_case = which;
    /* Every module command's body is a ModuleRequest in the same oneof:
     * protobuf-c lays the members out as one union. */
    req.load_module = &mr;
    if ((rv = cumod__client_call(c, &req, &reply)) != CUMOD_OK)
        return rv;
    if (reply->body_case != CUMOD__REPLY__BODY_MODULE ||
        reply->module->module == NULL) {
        cumod__reply__free_unpacked(reply, NULL);
        return cumod__client_set_error(CUMOD_EPROTO,
                                       "%s: cumodd answered with another "
                                       "kind of reply",
                                       fn);
    }
    memset(&res, 0, sizeof(res));
    if (cumod__module_info_copy(&res.module, reply->module->module) != 0) {
        cumod__module_info_fini(&res.module);
        cumod__reply__free_unpacked(reply, NULL);
        return cumod__client_set_error(CUMOD_ENOMEM, "out of memory");
    }
    snprintf(res.note, sizeof(res.note), "%s", reply->module->note);
    cumod__reply__free_unpacked(reply, NULL);
    *out = res;
    return CUMOD_OK;
}

static int
modules_command(cumod_client *c, Cumod__Request__BodyCase which, const char *fn,
                const char *name, cumod_module_result *out)
{
    return modules_command_jit(c, which, fn, name, NULL, out);
}

int
cumod_module_load_jit(cumod_client *c, const char *name,
                      const cumod_jit_options *jit, cumod_module_result *out)
{
    return modules_command_jit(c, CUMOD__REQUEST__BODY_LOAD_MODULE,
                               "cumod_module_load_jit", name, jit, out);
}

int
cumod_module_load(cumod_client *c, const char *name, cumod_module_result *out)
{
    return modules_command(c, CUMOD__REQUEST__BODY_LOAD_MODULE,
                           "cumod_module_load", name, out);
}

int
cumod_module_unload(cumod_client *c, const char *name, cumod_module_result *out)
{
    return modules_command(c, CUMOD__REQUEST__BODY_UNLOAD_MODULE,
                           "cumod_module_unload", name, out);
}

int
cumod_module_pin(cumod_client *c, const char *name, cumod_module_result *out)
{
    return modules_command(c, CUMOD__REQUEST__BODY_PIN_MODULE,
                           "cumod_module_pin", name, out);
}

int
cumod_module_unpin(cumod_client *c, const char *name, cumod_module_result *out)
{
    return modules_command(c, CUMOD__REQUEST__BODY_UNPIN_MODULE,
                           "cumod_module_unpin", name, out);
}

int
cumod_module_reload(cumod_client *c, const char *name, cumod_module_result *out)
{
    return modules_command(c, CUMOD__REQUEST__BODY_RELOAD_MODULE,
                           "cumod_module_reload", name, out);
}

int
cumod_module_unquarantine(cumod_client *c, const char *name,
                          cumod_module_result *out)
{
    return modules_command(c, CUMOD__REQUEST__BODY_UNQUARANTINE_MODULE,
                           "cumod_module_unquarantine", name, out);
}

int
cumod_module_show(cumod_client *c, const char *name, cumod_module_detail **out)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__ModuleRequest mr = CUMOD__MODULE_REQUEST__INIT;
    Cumod__Reply *reply;
    cumod_module_detail *d = NULL;
    int rv;

    if (c == NULL || out == NULL)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_module_show: NULL argument");
    if ((rv = cumod__module_check_name("cumod_module_show", name)) != CUMOD_OK)
        return rv;
    mr.name = (char *)name;
    req.body_case = CUMOD__REQUEST__BODY_SHOW_MODULE;
    req.show_module = &mr;
    if ((rv = cumod__client_call(c, &req, &reply)) != CUMOD_OK)
        return rv;
    const Cumod__ShowModuleReply *s = reply->show_module;
    if (reply->body_case != CUMOD__REPLY__BODY_SHOW_MODULE ||
        s->module == NULL) {
        rv = cumod__client_set_error(CUMOD_EPROTO,
                                     "cumodd answered show with another kind "
                                     "of reply");
        goto fail;
    }
    if ((d = calloc(1, sizeof(*d))) == NULL ||
        cumod__module_info_copy(&d->module, s->module) != 0 ||
        (s->n_kernels > 0 &&
         (d->kernels = calloc(s->n_kernels, sizeof(*d->kernels))) == NULL) ||
        (s->jit_log[0] != '\0' && (d->jit_log = strdup(s->jit_log)) == NULL) ||
        (s->compile[0] != '\0' && (d->compile = strdup(s->compile)) == NULL) ||
        (s->compile_log[0] != '\0' &&
         (d->compile_log = strdup(s->compile_log)) == NULL))
        goto nomem;
    d->compiles = s->compiles;
    d->compile_cache_hits = s->compile_cache_hits;
    for (size_t i = 0; i < s->n_kernels; i++) {
        const Cumod__KernelInfo *k = s->kernels[i];
        cumod_kernel_info *o = &d->kernels[i];
        d->nkernels++;
        if ((o->name = strdup(k->name)) == NULL ||
            (o->params = calloc(k->n_params + 1, sizeof(*o->params))) == NULL)
            goto nomem;
        for (size_t j = 0; j < k->n_params; j++) {
            o->params[j].offset = k->params[j]->offset;
            o->params[j].size = k->params[j]->size;
        }
        o->nparams = k->n_params;
    }
    cumod__reply__free_unpacked(reply, NULL);
    *out = d;
    return CUMOD_OK;

nomem:
    rv = cumod__client_set_error(CUMOD_ENOMEM, "out of memory");
fail:
    cumod_module_detail_free(d);
    cumod__reply__free_unpacked(reply, NULL);
    return rv;
}
