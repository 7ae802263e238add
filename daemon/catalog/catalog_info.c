/* SPDX-License-Identifier: MIT */
/*
 * Views of modules for ls and show: the ModuleInfo and ShowModuleReply
 * messages, filled from the catalog's records. Nothing here changes a
 * module.
 */
#include <stdlib.h>
#include <string.h>

#include "catalog_internal.h"
#include "cumod/errors.h"

const char *
cumod__module_name(const cumod_module *m)
{
    return m->name;
}

uint64_t
cumod__module_generation(const cumod_module *m)
{
    return m->generation;
}

int
cumod__module_resident(const cumod_module *m)
{
    return m->current != NULL;
}

void
cumod__module_view(const cumod_module *m, cumod_module_view *v)
{
    Cumod__ModuleInfo *mi = &v->mi;
    const cumod_gen *g = m->current;
    int k = cumod__mod_preferred(m);

    memset(v, 0, sizeof(*v));
    cumod__module_info__init(mi);
    mi->name = (char *)m->name;
    mi->state = (char *)cumod__mod_state_name(m->state);
    mi->generation = m->generation;
    mi->pinned = m->pinned;
    mi->error = m->error ? m->error : "";
    mi->load_us = m->load_us;
    mi->last_use_unix_ms = m->last_use_unix_ms;
    mi->faults = m->faults;
    if (m->quarantine_sha[0] != '\0') {
        /* Quarantined bytes: refused when nothing else can serve, else
         * the last good generation serves and ls says so. */
        mi->quarantined = cumod__mod_quarantined(m);
        mi->quarantine_reason =
            m->quarantine_reason ? m->quarantine_reason : "";
        mi->quarantined_sha256 = (char *)m->quarantine_sha;
        mi->quarantined_unix_ms = m->quarantine_unix_ms;
        if (mi->quarantined)
            mi->state = "quarantined";
    }
    /* What serves: the resident generation; else the file as last read. */
    if (g != NULL) {
        mi->sha256 = (char *)g->sha256;
        /* A .cu's generation is what NVRTC made of it (loaded_kind). */
        mi->kind = (char *)cumod__image_kind_name(
            m->read_valid && m->kind == CUMOD_IMAGE_CU ? CUMOD_IMAGE_CU
                                                       : g->kind);
        mi->loaded_kind = (char *)cumod__image_kind_name(g->kind);
        mi->jit_options = (char *)g->jit_from;
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
            v->images[mi->n_images++] = (char *)m->files[i].name;
    mi->images = v->images;
    mi->resident_generations = (g != NULL);
    CUMOD_LIST_FOREACH(&m->retiring, n)
    mi->resident_generations++;
    /* The loaded generation's kernels, else the image's description. */
    const cumod_kernel *ks = g ? g->kernels : m->desc_kernels;
    uint32_t nk = g ? g->nkernels : m->ndesc_kernels;
    if (nk > 0 && (v->kernels = calloc(nk, sizeof(char *))) != NULL) {
        for (uint32_t i = 0; i < nk; i++)
            v->kernels[i] = ks[i].name;
        mi->n_kernels = nk;
        mi->kernels = v->kernels;
    }
}

void
cumod__module_view_fini(cumod_module_view *v)
{
    free(v->kernels);
    v->kernels = NULL;
}

static int
info_by_name(const void *a, const void *b)
{
    const cumod_module *x = *(cumod_module *const *)a;
    const cumod_module *y = *(cumod_module *const *)b;
    return strcmp(x->name, y->name);
}

cumod_err
cumod__catalog_views(const cumod_catalog *cat, cumod_module_view **out,
                     size_t *n)
{
    cumod_module **all = calloc(cat->count + 1, sizeof(*all));
    cumod_module_view *v = calloc(cat->count + 1, sizeof(*v));
    size_t k = 0;

    if (all == NULL || v == NULL) {
        free(all);
        free(v);
        return CUMOD_ENOMEM;
    }
    for (size_t b = 0; b < cat->nbuckets; b++)
        for (cumod_module *m = cat->table[b]; m; m = m->hnext)
            all[k++] = m;
    qsort(all, k, sizeof(*all), info_by_name);
    for (size_t i = 0; i < k; i++)
        cumod__module_view(all[i], &v[i]);
    free(all);
    *out = v;
    *n = k;
    return CUMOD_OK;
}

void
cumod__catalog_views_free(cumod_module_view *v, size_t n)
{
    for (size_t i = 0; v != NULL && i < n; i++)
        cumod__module_view_fini(&v[i]);
    free(v);
}

/* What show says of the kernels of k[0..nk). */
static cumod_err
info_kernels(const cumod_module *m, const cumod_kernel *ks, uint32_t nk,
             cumod_module_show *show)
{
    size_t np = 0, at = 0;

    for (uint32_t i = 0; i < nk; i++)
        np += ks[i].nparams;
    show->ks = calloc(nk + 1, sizeof(*show->ks));
    show->kp = calloc(nk + 1, sizeof(*show->kp));
    show->cl = calloc(nk + 1, sizeof(*show->cl));
    show->ps = calloc(np + 1, sizeof(*show->ps));
    show->pp = calloc(np + 1, sizeof(*show->pp));
    if (show->ks == NULL || show->kp == NULL || show->ps == NULL ||
        show->pp == NULL || show->cl == NULL)
        return CUMOD_ENOMEM;
    for (uint32_t i = 0; i < nk; i++) {
        const cumod_kernel *k = &ks[i];
        Cumod__KernelInfo *ki = &show->ks[i];
        cumod__kernel_info__init(ki);
        ki->name = k->name;
        ki->display_name = k->display ? k->display : k->name;
        ki->signature = k->signature ? k->signature : "";
        ki->static_shared = k->static_shared;
        ki->registers = k->registers;
        ki->max_threads = k->max_threads;
        ki->carveout = cumod__module_kernel_carveout(m, k->name);
        if (k->cluster[0] != 0) {
            cumod__dim3__init(&show->cl[i]);
            show->cl[i].x = k->cluster[0];
            show->cl[i].y = k->cluster[1];
            show->cl[i].z = k->cluster[2];
            ki->cluster = &show->cl[i];
        }
        ki->n_params = k->nparams;
        ki->params = &show->pp[at];
        for (uint32_t j = 0; j < k->nparams; j++, at++) {
            cumod__param_info__init(&show->ps[at]);
            show->ps[at].offset = k->offsets[j];
            show->ps[at].size = k->sizes[j];
            if (k->ptypes != NULL && k->ptypes[j] != NULL)
                show->ps[at].type = k->ptypes[j];
            show->ps[at].indirect = k->pindirect != NULL && k->pindirect[j];
            show->pp[at] = &show->ps[at];
        }
        show->kp[i] = ki;
    }
    show->reply.n_kernels = nk;
    show->reply.kernels = show->kp;
    return CUMOD_OK;
}

/* The module's globals: the loaded generation's, else the described. */
static cumod_err
info_globals(const cumod_module *m, cumod_module_show *show)
{
    const cumod_gen *g = m->current;
    uint32_t n = g ? g->nglobals : m->ndescribed;

    show->gs = calloc(n + 1, sizeof(*show->gs));
    show->gp = calloc(n + 1, sizeof(*show->gp));
    if (show->gs == NULL || show->gp == NULL)
        return CUMOD_ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        Cumod__GlobalInfo *gi = &show->gs[i];
        cumod__global_info__init(gi);
        if (g != NULL) {
            gi->name = g->globals[i].name;
            gi->size = g->globals[i].size;
        } else {
            gi->name = m->described[i];
            gi->size = m->described_size ? m->described_size[i] : 0;
        }
        gi->constant = m->described_const != NULL &&
                       cumod__module_global_constant(m, gi->name);
        gi->kept_bytes = cumod__globals_kept_bytes(m, gi->name);
        show->gp[i] = gi;
    }
    show->reply.n_globals = n;
    show->reply.globals = show->gp;
    return CUMOD_OK;
}

cumod_err
cumod__module_show(const cumod_module *m, cumod_module_show *show)
{
    const cumod_gen *g = m->current;
    cumod_err rv;

    memset(show, 0, sizeof(*show));
    cumod__show_module_reply__init(&show->reply);
    cumod__module_view(m, &show->view);
    show->reply.module = &show->view.mi;
    show->reply.jit_log = m->jit_log ? m->jit_log : "";
    show->reply.compile_log = m->compile_log ? m->compile_log : "";
    show->reply.compile = m->compile_note ? m->compile_note : "";
    show->reply.compiles = m->compiles;
    show->reply.compile_cache_hits = m->compile_hits;
    /* A resident module as the driver gave it; another as its image
     * describes it, without loading it. */
    if (g != NULL) {
        show->reply.described_from = "loaded";
        rv = info_kernels(m, g->kernels, g->nkernels, show);
    } else {
        show->reply.described_from =
            m->desc_from ? m->desc_from : "nothing (not read yet)";
        rv = info_kernels(m, m->desc_kernels, m->ndesc_kernels, show);
    }
    if (rv == CUMOD_OK)
        rv = info_globals(m, show);
    if (rv != CUMOD_OK)
        cumod__module_show_fini(show);
    return rv;
}

void
cumod__module_show_fini(cumod_module_show *show)
{
    free(show->ks);
    free(show->kp);
    free(show->ps);
    free(show->pp);
    free(show->cl);
    free(show->gs);
    free(show->gp);
    show->ks = NULL;
    show->kp = NULL;
    show->ps = NULL;
    show->pp = NULL;
    show->cl = NULL;
    show->gs = NULL;
    show->gp = NULL;
    cumod__module_view_fini(&show->view);
}
