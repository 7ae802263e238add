/* SPDX-License-Identifier: MIT */
/*
 * What a kernel is called in messages and `show`: for a C++ kernel, its
 * demangled name and signature and each parameter's type; for an
 * extern "C" kernel, whose image carries no types, its name.
 */
#include <stdlib.h>
#include <string.h>

#include "catalog_internal.h"
#include "catalog/demangle/demangle.h"

/* The ArgType a value for a parameter of type t must have: its builtin
 * arithmetic types as the demangler prints them (long is 64-bit on every
 * host cumod runs on; plain char's sign is the compiler's, so it is left
 * to its size). 0 for any other type. */
static uint8_t
kernel_value_type(const char *t)
{
    static const struct {
        const char *name;
        Cumod__ArgType type;
    } builtin[] = {
        {"int", CUMOD__ARG_TYPE__ARG_TYPE_I32},
        {"unsigned int", CUMOD__ARG_TYPE__ARG_TYPE_U32},
        {"long", CUMOD__ARG_TYPE__ARG_TYPE_I64},
        {"unsigned long", CUMOD__ARG_TYPE__ARG_TYPE_U64},
        {"long long", CUMOD__ARG_TYPE__ARG_TYPE_I64},
        {"unsigned long long", CUMOD__ARG_TYPE__ARG_TYPE_U64},
        {"float", CUMOD__ARG_TYPE__ARG_TYPE_F32},
        {"double", CUMOD__ARG_TYPE__ARG_TYPE_F64},
        {"short", CUMOD__ARG_TYPE__ARG_TYPE_I16},
        {"unsigned short", CUMOD__ARG_TYPE__ARG_TYPE_U16},
        {"signed char", CUMOD__ARG_TYPE__ARG_TYPE_I8},
        {"unsigned char", CUMOD__ARG_TYPE__ARG_TYPE_U8},
    };
    for (size_t i = 0; i < sizeof(builtin) / sizeof(builtin[0]); i++)
        if (strcmp(t, builtin[i].name) == 0)
            return (uint8_t)builtin[i].type;
    return 0;
}

int
cumod__kernel_describe_types(cumod_kernel *k)
{
    cumod_demangled d;

    /* extern "C" names, and C++ ones the demangler does not take (lambdas,
     * local names): the name as it is, sizes checked without types. */
    if (cumod__demangle(k->name, &d) != 0) {
        k->display = strdup(k->name);
        return k->display != NULL ? 0 : -1;
    }
    /* A signature whose parameter count differs from the image's (the
     * image is the truth) gives no types, only the names. */
    int typed = d.nparams == k->nparams;
    k->display = strdup(d.name);
    k->signature = strdup(d.signature);
    if (typed && k->nparams > 0) {
        k->ptypes = calloc(k->nparams, sizeof(char *));
        k->pindirect = calloc(k->nparams, 1);
        k->pvalue = calloc(k->nparams, 1);
    } else if (typed) {
        k->pindirect = calloc(1, 1); /* typed, with no parameters */
    }
    int bad = k->display == NULL || k->signature == NULL ||
              (typed &&
               (k->pindirect == NULL ||
                (k->nparams > 0 && (k->ptypes == NULL || k->pvalue == NULL))));
    for (uint32_t i = 0; !bad && typed && i < k->nparams; i++) {
        if ((k->ptypes[i] = strdup(d.params[i].type)) == NULL)
            bad = 1;
        /* A pointer or reference takes a buffer; so does an 8-byte
         * parameter the image says is 8 bytes only if the type says so. */
        k->pindirect[i] = (uint8_t)(d.params[i].indirect != 0);
        if (!k->pindirect[i])
            k->pvalue[i] = kernel_value_type(d.params[i].type);
    }
    cumod__demangled_fini(&d);
    return bad ? -1 : 0;
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
    free(k->pvalue);
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

const char *
cumod__module_kernel_name(const cumod_module *m, const char *fn)
{
    const cumod_kernel *ks = m->current ? m->current->kernels : m->desc_kernels;
    uint32_t n = m->current ? m->current->nkernels : m->ndesc_kernels;
    const char *found = NULL;
    for (uint32_t i = 0; i < n; i++) {
        if (strcmp(ks[i].name, fn) == 0)
            return ks[i].name;
        if (ks[i].display != NULL && strcmp(ks[i].display, fn) == 0)
            found = found == NULL ? ks[i].name : fn; /* two: ambiguous */
    }
    return found != NULL ? found : fn;
}
