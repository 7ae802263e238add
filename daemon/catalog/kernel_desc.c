/*
 * What a kernel is called in messages and `show`: for a C++ kernel, its
 * demangled name and signature and each parameter's type; for an
 * extern "C" kernel, whose image carries no types, its name.
 */
#include <stdlib.h>
#include <string.h>

#include "catalog_internal.h"

int
cumod__kernel_describe_types(cumod_kernel *k)
{
    if ((k->display = strdup(k->name)) == NULL)
        return -1;
    return 0;
}

int32_t
cumod__module_kernel_carveout(const cumod_module *m, const char *fn)
{
    for (uint32_t i = 0; m != NULL && i < m->nksets; i++)
        if (strcmp(m->ksets[i].fn, fn) == 0)
            return m->ksets[i].carveout;
    return -1;
}

int32_t
cumod__gen_kernel_carveout(const cumod_gen *g, const char *fn)
{
    return cumod__module_kernel_carveout(g ? g->mod : NULL, fn);
}

cumod_err
cumod__module_set_carveout(cumod_module *m, const char *fn, int32_t carveout)
{
    for (uint32_t i = 0; i < m->nksets; i++)
        if (strcmp(m->ksets[i].fn, fn) == 0) {
            m->ksets[i].carveout = carveout;
            return CUMOD_OK;
        }
    if (carveout < 0)
        return CUMOD_OK;
    struct cumod_kset *a = realloc(m->ksets, (m->nksets + 1) * sizeof(*a));
    if (a == NULL)
        return CUMOD_ENOMEM;
    m->ksets = a;
    if ((a[m->nksets].fn = strdup(fn)) == NULL)
        return CUMOD_ENOMEM;
    a[m->nksets++].carveout = carveout;
    return CUMOD_OK;
}

int
cumod__module_global_constant(const cumod_module *m, const char *name)
{
    for (uint32_t i = 0; m->described_const && i < m->ndescribed; i++)
        if (strcmp(m->described[i], name) == 0)
            return m->described_const[i];
    return 0;
}

void
cumod__kernel_fini(cumod_kernel *k)
{
    free(k->name);
    free(k->offsets);
    free(k->sizes);
    free(k->display);
    free(k->signature);
    for (uint32_t j = 0; k->ptypes != NULL && j < k->nparams; j++)
        free(k->ptypes[j]);
    free(k->ptypes);
    free(k->pindirect);
}

void
cumod__module_desc_fini(cumod_module *m)
{
    for (uint32_t i = 0; i < m->ndescribed; i++)
        free(m->described[i]);
    free(m->described);
    free(m->described_size);
    free(m->described_const);
    m->described = NULL;
    m->described_size = NULL;
    m->described_const = NULL;
    m->ndescribed = 0;
    for (uint32_t i = 0; i < m->ndesc_kernels; i++)
        cumod__kernel_fini(&m->desc_kernels[i]);
    free(m->desc_kernels);
    m->desc_kernels = NULL;
    m->ndesc_kernels = 0;
    free(m->desc_from);
    m->desc_from = NULL;
}
