/* SPDX-License-Identifier: MIT */
/*
 * Handlers of CUMOD_CHAN_LOAD and CUMOD_CHAN_UNLOAD: load an image from
 * the memfd the front passed (never from a path: the file may change
 * under us), resolve every function and its parameter layout, put the
 * module in the table (modtab.h), and unload on request. Loads run on the
 * load lane and unloads on the reclaim lane (the dispatcher's table in
 * executor.c); PTX is compiled through cuLink* and the resulting cubin
 * loaded, because a JIT inside cuModuleLoadData holds up every launch of
 * the context for its whole length (515-648 ms for a 200 KB PTX on an
 * H100), while cuLink's does not (bench/bench_threads.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cumod/errors.h"
#include "globals.h"
#include "direct.h"
#include "handlers.h"
#include "inflight.h"
#include "common/log.h"
#include "modtab.h"
#include "reply.h"

#define EXEC_LOG_MAX (16 * 1024) /* JIT error and info logs, each */
#define EXEC_MAX_PARAMS 4096     /* more than CUDA allows (32 KiB of args) */

/* The JIT options of req (those set) after the four log options: fills
 * opt and val, returns how many. fast: with CU_JIT_FAST_COMPILE. */
static unsigned
exec_jit_options(const cumod_chan_load *req, char *errlog, char *infolog,
                 int fast, CUjit_option *opt, void **val)
{
    unsigned n = 0;
    opt[n] = CU_JIT_ERROR_LOG_BUFFER;
    val[n++] = errlog;
    opt[n] = CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
    val[n++] = (void *)(uintptr_t)EXEC_LOG_MAX;
    opt[n] = CU_JIT_INFO_LOG_BUFFER;
    val[n++] = infolog;
    opt[n] = CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES;
    val[n++] = (void *)(uintptr_t)EXEC_LOG_MAX;
    if (req->jit.opt_level >= 0) {
        opt[n] = CU_JIT_OPTIMIZATION_LEVEL;
        val[n++] = (void *)(uintptr_t)(unsigned)req->jit.opt_level;
    }
    if (req->jit.max_registers > 0) {
        opt[n] = CU_JIT_MAX_REGISTERS;
        val[n++] = (void *)(uintptr_t)(unsigned)req->jit.max_registers;
    }
    if (req->jit.line_info >= 0) {
        opt[n] = CU_JIT_GENERATE_LINE_INFO;
        val[n++] = (void *)(uintptr_t)(unsigned)req->jit.line_info;
    }
    if (fast && req->jit.fast_compile >= 0) {
        opt[n] = CU_JIT_FAST_COMPILE;
        val[n++] = (void *)(uintptr_t)(unsigned)req->jit.fast_compile;
    }
    return n;
}

/* Appends a line to the info log. */
static void
exec_log_note(char *log, const char *line)
{
    size_t n = strnlen(log, EXEC_LOG_MAX);
    snprintf(log + n, EXEC_LOG_MAX - n, "%s%s", n ? "\n" : "", line);
}

/* Loads bytes as kind. PTX is compiled by cuLink* (the JIT's logs into
 * errlog and infolog) and the cubin it makes loaded; a fatbin goes to
 * cuModuleLoadDataEx with the same options (they apply where the driver
 * JITs its PTX entry); what names the call that failed. */
static CUresult
exec_load_image(cumod_exec *ex, const cumod_chan_load *req, const void *bytes,
                CUmodule *mod, char *errlog, char *infolog, char *what,
                size_t whatlen, const char *name)
{
    char quiet[200];
    snprintf(quiet, sizeof(quiet), "loading %s", name);
    const cumod_driver *d = &ex->drv;
    CUlinkState ls = NULL;
    void *cubin = NULL;
    size_t cubin_len = 0;
    CUjit_option opt[8];
    void *val[8];
    unsigned nopt;
    CUresult r;

    if (req->kind == 0 /* CUMOD_IMAGE_CUBIN */) {
        /* cuModuleLoadData waits for running kernels and holds every
         * launch until they end: it goes once they have. */
        (void)cumod__exec_wait_quiet(ex, quiet);
        snprintf(what, whatlen, "cuModuleLoadData");
        return d->module_load_data(mod, bytes);
    }
    if (req->kind == 1 /* CUMOD_IMAGE_FATBIN */) {
        (void)cumod__exec_wait_quiet(ex, quiet);
        snprintf(what, whatlen, "cuModuleLoadDataEx");
        nopt = exec_jit_options(req, errlog, infolog, 1, opt, val);
        r = d->module_load_data_ex(mod, bytes, nopt, opt, val);
        if (r == CUDA_ERROR_INVALID_VALUE && req->jit.fast_compile >= 0) {
            nopt = exec_jit_options(req, errlog, infolog, 0, opt, val);
            r = d->module_load_data_ex(mod, bytes, nopt, opt, val);
            if (r == CUDA_SUCCESS)
                exec_log_note(infolog, "cumod: the driver refused "
                                       "fast-compile: loaded without it");
        }
        return r;
    }
    /* The JIT wants a NUL-terminated string; PTX files are small. */
    char *text = malloc(req->len + 1);
    if (text == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(text, bytes, req->len);
    text[req->len] = '\0';
    snprintf(what, whatlen, "cuLinkCreate (PTX JIT)");
    nopt = exec_jit_options(req, errlog, infolog, 1, opt, val);
    r = d->link_create(nopt, opt, val, &ls);
    if (r == CUDA_ERROR_INVALID_VALUE && req->jit.fast_compile >= 0) {
        /* Where the driver does not take CU_JIT_FAST_COMPILE (it is
         * documented for internal use), the rest still applies. */
        nopt = exec_jit_options(req, errlog, infolog, 0, opt, val);
        if ((r = d->link_create(nopt, opt, val, &ls)) == CUDA_SUCCESS)
            exec_log_note(infolog, "cumod: the driver refused fast-compile: "
                                   "compiled without it");
    }
    if (r != CUDA_SUCCESS)
        goto done;
    snprintf(what, whatlen, "cuLinkAddData (PTX JIT)");
    if ((r = d->link_add_data(ls, CU_JIT_INPUT_PTX, text, req->len + 1,
                              req->name, 0, NULL, NULL)) != CUDA_SUCCESS)
        goto done;
    snprintf(what, whatlen, "cuLinkComplete (PTX JIT)");
    if ((r = d->link_complete(ls, &cubin, &cubin_len)) != CUDA_SUCCESS)
        goto done;
    (void)cumod__exec_wait_quiet(ex, quiet); /* as for a cubin, above */
    snprintf(what, whatlen, "cuModuleLoadData (the JIT's cubin)");
    r = d->module_load_data(mod, cubin);
done:
    if (ls != NULL)
        (void)d->link_destroy(ls); /* frees the cubin too */
    free(text);
    return r;
}

static int32_t
exec_fattr(const cumod_driver *d, CUfunction f, CUfunction_attribute a,
           int32_t dflt)
{
    int v = 0;
    return d->func_get_attribute(&v, a, f) == CUDA_SUCCESS ? v : dflt;
}

/* What the driver says of a loaded kernel: the front checks launches
 * against it, and show reports it. */
static void
exec_kattr(const cumod_driver *d, CUfunction f, cumod_chan_kattr *k)
{
    memset(k, 0, sizeof(*k));
    /* Driver 580 loads functions lazily and answers some attributes
     * (MAX_THREADS_PER_BLOCK, MAX_DYNAMIC_SHARED_SIZE_BYTES) with
     * CUDA_ERROR_FUNCTION_NOT_LOADED until the function is loaded. */
    (void)d->func_load(f);
    k->static_shared =
        exec_fattr(d, f, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, -1);
    k->registers = exec_fattr(d, f, CU_FUNC_ATTRIBUTE_NUM_REGS, -1);
    k->max_threads =
        (uint32_t)exec_fattr(d, f, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 0);
    k->cluster[0] =
        (uint32_t)exec_fattr(d, f, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, 0);
    k->cluster[1] = (uint32_t)exec_fattr(
        d, f, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT, 0);
    k->cluster[2] =
        (uint32_t)exec_fattr(d, f, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH, 0);
    k->max_dyn_shared =
        exec_fattr(d, f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 0);
    k->cluster_must = (uint32_t)exec_fattr(
        d, f, CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET, 0);
}

/* Resolves every function and appends the kernel table to rep. */
static CUresult
exec_resolve(cumod_exec *ex, cumod_exec_module *m, cumod_exec_table *table,
             char *what, size_t whatlen)
{
    const cumod_driver *d = &ex->drv;
    unsigned count = 0;
    CUresult r;

    if ((r = d->module_get_function_count(&count, m->mod)) != CUDA_SUCCESS) {
        snprintf(what, whatlen, "cuModuleGetFunctionCount");
        return r;
    }
    CUfunction *listed = calloc(count ? count : 1, sizeof(CUfunction));
    m->funcs = calloc(count ? count : 1, sizeof(CUfunction));
    m->nparams = calloc(count ? count : 1, sizeof(uint32_t));
    m->param_off = calloc(count ? count : 1, sizeof(uint32_t *));
    m->dyn_max = calloc(count ? count : 1, sizeof(int32_t));
    m->carveout = calloc(count ? count : 1, sizeof(int32_t));
    m->nonportable = calloc(count ? count : 1, 1);
    if (listed == NULL || m->funcs == NULL || m->nparams == NULL ||
        m->param_off == NULL || m->dyn_max == NULL || m->carveout == NULL ||
        m->nonportable == NULL) {
        free(listed);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (count > 0 && (r = d->module_enumerate_functions(
                          listed, count, m->mod)) != CUDA_SUCCESS) {
        snprintf(what, whatlen, "cuModuleEnumerateFunctions");
        free(listed);
        return r;
    }
    for (unsigned i = 0; i < count; i++) {
        const char *name = NULL;
        if ((r = d->func_get_name(&name, listed[i])) != CUDA_SUCCESS ||
            name == NULL) {
            snprintf(what, whatlen, "cuFuncGetName of function %u", i);
            break;
        }
        /* cuModuleGetFunction loads the function's code now even under
         * lazy loading, so a broken image fails here, at load. */
        if ((r = d->module_get_function(&m->funcs[i], m->mod, name)) !=
            CUDA_SUCCESS) {
            snprintf(what, whatlen, "cuModuleGetFunction(%.200s)", name);
            break;
        }
        uint16_t nlen = (uint16_t)strnlen(name, 65535);
        cumod__exec_table_put(table, &nlen, sizeof(nlen));
        cumod__exec_table_put(table, name, nlen);
        uint32_t pairs[2];
        uint16_t np = 0;
        cumod_exec_table params = {0};
        for (size_t p = 0; p < EXEC_MAX_PARAMS; p++) {
            size_t off = 0, sz = 0;
            CUresult pr = d->func_get_param_info(m->funcs[i], p, &off, &sz);
            if (pr != CUDA_SUCCESS)
                break; /* CUDA_ERROR_INVALID_VALUE: past the last one */
            pairs[0] = (uint32_t)off;
            pairs[1] = (uint32_t)sz;
            cumod__exec_table_put(&params, pairs, 2 * sizeof(uint32_t));
            np++;
        }
        cumod__exec_table_put(table, &np, sizeof(np));
        cumod__exec_table_put(table, params.buf, params.len);
        table->oom |= params.oom;
        /* The offsets again, for building kernelParams at launch. */
        m->nparams[i] = np;
        m->param_off[i] = calloc(np ? np : 1, sizeof(uint32_t));
        if (m->param_off[i] == NULL)
            table->oom = 1;
        for (uint16_t j = 0; m->param_off[i] && j < np; j++)
            memcpy(&m->param_off[i][j], params.buf + 8 * j, 4);
        free(params.buf);
        cumod_chan_kattr ka;
        exec_kattr(d, m->funcs[i], &ka);
        cumod__exec_table_put(table, &ka, sizeof(ka));
        m->dyn_max[i] = ka.max_dyn_shared;
        m->carveout[i] = -2;
        m->nfunc++;
    }
    free(listed);
    if (r == CUDA_SUCCESS && table->oom)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    return r;
}

/* The load command's checks and its image's memfd mapped (req read from
 * payload); MAP_FAILED when wrong, h->status and msg saying why. logs:
 * whether the JIT's logs could be had. */
static void *
load_map(const void *payload, size_t len, int fd, int logs,
         cumod_chan_load *req, cumod_chan_hdr *h, char *msg, size_t msglen)
{
    struct stat st;
    void *map;

    if (len < sizeof(*req) || fd < 0 || !logs) {
        h->status = CUMOD_EPROTO;
        snprintf(msg, msglen, "malformed load command");
        return MAP_FAILED;
    }
    memcpy(req, payload, sizeof(*req));
    if (req->spec_len > len - sizeof(*req)) {
        h->status = CUMOD_EPROTO;
        snprintf(msg, msglen, "malformed load command (globals)");
        return MAP_FAILED;
    }
    req->name[sizeof(req->name) - 1] = '\0';
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < req->len ||
        req->len == 0) {
        h->status = CUMOD_EPROTO;
        snprintf(msg, msglen, "the image of %s is not in its memfd", req->name);
        return MAP_FAILED;
    }
    map = mmap(NULL, req->len, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        h->status = CUMOD_ENOMEM;
        snprintf(msg, msglen, "cannot map the image of %s: %s", req->name,
                 strerror(errno));
    }
    return map;
}

/* Loads req's image (at map) as a new module: its kernels resolved into
 * table, its globals (spec) applied, and it kept. h->status and msg say
 * how it went; returns the driver's failure, if any (CUDA_SUCCESS
 * otherwise). */
static CUresult
load_module(cumod_exec *ex, cumod_chan_load *req, const void *map,
            const char *spec, cumod_exec_table *table, cumod_chan_loaded *res,
            cumod_chan_hdr *h, char *errlog, char *infolog, char *msg,
            size_t msglen)
{
    char what[256] = "cuModuleLoadData";
    cumod_exec_module *m;
    CUresult r;

    if ((m = calloc(1, sizeof(*m))) == NULL) {
        h->status = CUMOD_ENOMEM;
        snprintf(msg, msglen, "out of memory loading %s", req->name);
        return CUDA_SUCCESS;
    }
    uint64_t t0 = cumod__mono_ns();
    r = exec_load_image(ex, req, map, &m->mod, errlog, infolog, what,
                        sizeof(what), req->name);
    if (r != CUDA_SUCCESS)
        m->mod = NULL; /* nothing to unload, whatever the driver wrote */
    else
        r = exec_resolve(ex, m, table, what, sizeof(what));
    if (r == CUDA_SUCCESS) {
        cumod_err gr = cumod__exec_globals_apply(
            ex, m->mod, spec, req->spec_len, req->name, table, msg, msglen);
        if (gr != CUMOD_OK) {
            h->status = gr;
            cumod__exec_module_free(ex, m);
            return CUDA_SUCCESS;
        }
    }
    res->load_ns = cumod__mono_ns() - t0;
    if (r == CUDA_SUCCESS && cumod__exec_module_insert(ex, m) != CUMOD_OK)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r != CUDA_SUCCESS) {
        char w[sizeof(what) + sizeof(req->name) + 48];
        snprintf(w, sizeof(w), "%s of %s generation %llu", what, req->name,
                 (unsigned long long)req->generation);
        h->status = cumod__cu_err(&ex->drv, r, w, msg, msglen);
        cumod__exec_module_free(ex, m);
        return r;
    }
    m->generation = req->generation;
    memcpy(m->name, req->name, sizeof(m->name));
    res->handle = m->handle;
    res->nkernels = m->nfunc;
    CUMOD_LOGD("CUMOD-EXEC-LOAD", "%s generation %llu: %u kernels in %.1f us",
               req->name, (unsigned long long)req->generation, m->nfunc,
               (double)res->load_ns / 1e3);
    return CUDA_SUCCESS;
}

/* The load's answer: res, msg, the JIT's error log (what it disliked) and
 * info log, both kept, and the kernels' table when it loaded. 0 or
 * -errno; *unsent when it could not be made (out of memory). */
static int
load_reply(cumod_exec *ex, cumod_chan_hdr *h, cumod_chan_loaded *res,
           const char *msg, const char *errlog, const char *infolog,
           const cumod_exec_table *table, int *unsent)
{
    cumod_exec_table out = {0};
    char *both = NULL;
    const char *log = "";
    int rv;

    if (errlog != NULL && infolog != NULL && errlog[0] && infolog[0] &&
        asprintf(&both, "%s\n%s", errlog, infolog) >= 0)
        log = both;
    else if (errlog != NULL && errlog[0])
        log = errlog;
    else if (infolog != NULL)
        log = infolog;
    res->msg_len = (uint32_t)strlen(msg);
    res->log_len = (uint32_t)strnlen(log, 2 * EXEC_LOG_MAX);
    res->table_len = h->status == CUMOD_OK ? (uint32_t)table->len : 0;
    cumod__exec_table_put(&out, res, sizeof(*res));
    cumod__exec_table_put(&out, msg, res->msg_len);
    cumod__exec_table_put(&out, log, res->log_len);
    cumod__exec_table_put(&out, table->buf, res->table_len);
    free(both);
    if ((*unsent = out.oom) != 0) {
        free(out.buf);
        return -ENOMEM;
    }
    rv = cumod__exec_send(ex, h, out.buf, out.len);
    free(out.buf);
    return rv;
}

int
cumod__exec_on_load(cumod_exec *ex, const cumod_chan_hdr *hdr,
                    const void *payload, size_t len, int fd, void *aux)
{
    cumod_chan_hdr h = {.op = CUMOD_CHAN_LOAD, .seq = hdr->seq};
    cumod_chan_loaded res = {0};
    cumod_chan_load req = {0};
    cumod_exec_table table = {0};
    char msg[1024] = "";
    char *errlog = calloc(1, EXEC_LOG_MAX), *infolog = calloc(1, EXEC_LOG_MAX);
    CUresult r = CUDA_SUCCESS;
    int rv, unsent;

    (void)aux;
    void *map = load_map(payload, len, fd, errlog != NULL && infolog != NULL,
                         &req, &h, msg, sizeof(msg));
    if (map != MAP_FAILED)
        r = load_module(ex, &req, map, (const char *)payload + sizeof(req),
                        &table, &res, &h, errlog, infolog, msg, sizeof(msg));
    if (map != MAP_FAILED)
        munmap(map, req.len);
    if (fd >= 0)
        close(fd);
    rv = load_reply(ex, &h, &res, msg, errlog, infolog, &table, &unsent);
    free(table.buf);
    free(errlog);
    free(infolog);
    if (unsent)
        return rv;
    if (cumod__cu_context_lost(r)) /* after the reply: the load hears why */
        cumod__exec_context_lost(ex, r);
    return rv;
}

int
cumod__exec_on_unload(cumod_exec *ex, const cumod_chan_hdr *hdr,
                      const void *payload, size_t len, int fd, void *aux)
{
    cumod_chan_hdr h = {.op = CUMOD_CHAN_UNLOAD, .seq = hdr->seq};
    cumod_chan_unload req;
    cumod_exec_module *m;

    (void)aux;
    if (cumod__exec_payload(payload, len, fd, &req, sizeof(req)) != 0) {
        h.status = CUMOD_EPROTO;
    } else {
        if ((m = cumod__exec_module_take(ex, req.handle)) == NULL) {
            h.status = CUMOD_ENOENT;
        } else {
            /* Direct launches of it that are still running finish on it
             * (the front took it out of their snapshot before this). */
            cumod__direct_module_quiet(ex, m);
            /* Waits for the device (for work of other modules too): on the
             * reclaim lane, where only unloads and unmaps wait behind it. */
            CUresult r = ex->drv.module_unload(m->mod);
            char msg[256];
            m->mod = NULL;
            h.status =
                cumod__cu_err(&ex->drv, r, "cuModuleUnload", msg, sizeof(msg));
            if (h.status != CUMOD_OK)
                CUMOD_LOGW("CUMOD-EXEC-UNLOAD", "%s generation %llu: %s",
                           m->name, (unsigned long long)m->generation, msg);
            cumod__exec_module_free(ex, m);
            if (cumod__cu_context_lost(r)) {
                (void)cumod__exec_send(ex, &h, NULL, 0);
                cumod__exec_context_lost(ex, r);
            }
        }
    }
    return cumod__exec_send(ex, &h, NULL, 0);
}

int
cumod__exec_on_forget(cumod_exec *ex, const cumod_chan_hdr *hdr,
                      const void *payload, size_t len, int fd, void *aux)
{
    cumod_chan_hdr h = {.op = CUMOD_CHAN_FORGET, .seq = hdr->seq};
    uint64_t n = 0;

    (void)payload, (void)len, (void)aux;
    if (fd >= 0)
        close(fd);
    for (uint32_t slot = 0; ex->adopt_tag != 0; slot++) {
        cumod_exec_module *m = NULL;
        pthread_mutex_lock(&ex->mods_mtx);
        if (slot >= ex->nmods) {
            pthread_mutex_unlock(&ex->mods_mtx);
            break;
        }
        m = ex->mods[slot];
        if (m != NULL && (uint32_t)(m->handle >> 32) <= ex->adopt_tag)
            ex->mods[slot] = NULL;
        else
            m = NULL;
        pthread_mutex_unlock(&ex->mods_mtx);
        if (m == NULL)
            continue;
        /* As an UNLOAD: what still runs of it finishes on it. */
        cumod__direct_module_quiet(ex, m);
        CUresult r = ex->drv.module_unload(m->mod);
        m->mod = NULL;
        cumod__exec_module_free(ex, m);
        n++;
        if (cumod__cu_context_lost(r)) {
            (void)cumod__exec_reply(ex, &h, CUMOD_EDRIVER, NULL, 0);
            cumod__exec_context_lost(ex, r);
        }
    }
    CUMOD_LOGN("CUMOD-EXEC-ORPHAN",
               "the front that adopted this executor let %llu modules of "
               "the old front go",
               (unsigned long long)n);
    return cumod__exec_reply(ex, &h, CUMOD_OK, &n, sizeof(n));
}
