/* SPDX-License-Identifier: MIT */
/*
 * A launch's checks (launch_check.h): its shape against the device and the
 * kernel, its arguments against the kernel's parameters, packed.
 */
#include "launch_check.h"

#include <stdio.h>
#include <string.h>

#include "cumod/errors.h"

cumod_err
cumod__check_kernel_name(const char *kernel, char module[129], const char **fn,
                         cumod_status *st)
{
    const char *colon = kernel ? strchr(kernel, ':') : NULL;
    if (colon == NULL || colon == kernel || colon[1] == '\0' ||
        (size_t)(colon - kernel) > 128)
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "kernel '%.200s' is not MODULE:FUNCTION "
                                 "(e.g. vadd:vadd)",
                                 kernel ? kernel : "");
    memcpy(module, kernel, (size_t)(colon - kernel));
    module[colon - kernel] = '\0';
    *fn = colon + 1;
    return CUMOD_OK;
}

/* One dimension triple against the device's limits (0 means 1). */
static cumod_err
check_dims(const char *what, const Cumod__Dim3 *d3, const uint32_t max[3],
           uint32_t out[3], cumod_status *st)
{
    static const char axis[] = "xyz";
    uint32_t v[3] = {d3 ? d3->x : 1, d3 ? d3->y : 1, d3 ? d3->z : 1};
    for (int i = 0; i < 3; i++) {
        if (v[i] == 0)
            v[i] = 1;
        if (max[i] != 0 && v[i] > max[i])
            return cumod__status_set(st, CUMOD_EINVAL,
                                     "%s.%c = %u is above the device's limit "
                                     "%u",
                                     what, axis[i], v[i], max[i]);
        out[i] = v[i];
    }
    return CUMOD_OK;
}

/* "argument 2 (const float*) of axpy<float>": how a message names
 * parameter i (from 0) of k. */
static void
check_arg_name(const cumod_kernel *k, uint32_t i, char *buf, size_t len)
{
    const char *name = k->display ? k->display : k->name;
    if (k->ptypes != NULL && k->ptypes[i] != NULL)
        snprintf(buf, len, "argument %u (%.120s) of %.200s", i + 1,
                 k->ptypes[i], name);
    else
        snprintf(buf, len, "argument %u of %.200s", i + 1, name);
}

/* A value's type as a message names it ("a float (f32)"), or NULL for one
 * this daemon does not know (checked by its size). */
static const char *
check_type_name(int t)
{
    switch (t) {
    case CUMOD__ARG_TYPE__ARG_TYPE_I32:
        return "an int (i32)";
    case CUMOD__ARG_TYPE__ARG_TYPE_U32:
        return "an unsigned int (u32)";
    case CUMOD__ARG_TYPE__ARG_TYPE_I64:
        return "a 64-bit integer (i64)";
    case CUMOD__ARG_TYPE__ARG_TYPE_U64:
        return "an unsigned 64-bit integer (u64)";
    case CUMOD__ARG_TYPE__ARG_TYPE_F32:
        return "a float (f32)";
    case CUMOD__ARG_TYPE__ARG_TYPE_F64:
        return "a double (f64)";
    case CUMOD__ARG_TYPE__ARG_TYPE_I16:
        return "a short (i16)";
    case CUMOD__ARG_TYPE__ARG_TYPE_U16:
        return "an unsigned short (u16)";
    case CUMOD__ARG_TYPE__ARG_TYPE_I8:
        return "a signed char (i8)";
    case CUMOD__ARG_TYPE__ARG_TYPE_U8:
        return "an unsigned char (u8)";
    default:
        return NULL;
    }
}

/* What a type is for the check: its width in bytes, and whether it is
 * floating-point (integers of one width pass for each other: the bytes of
 * a non-negative value read the same either way). */
static int
check_type_class(int t)
{
    switch (t) {
    case CUMOD__ARG_TYPE__ARG_TYPE_I8:
    case CUMOD__ARG_TYPE__ARG_TYPE_U8:
        return 1;
    case CUMOD__ARG_TYPE__ARG_TYPE_I16:
    case CUMOD__ARG_TYPE__ARG_TYPE_U16:
        return 2;
    case CUMOD__ARG_TYPE__ARG_TYPE_I32:
    case CUMOD__ARG_TYPE__ARG_TYPE_U32:
        return 4;
    case CUMOD__ARG_TYPE__ARG_TYPE_I64:
    case CUMOD__ARG_TYPE__ARG_TYPE_U64:
        return 8;
    case CUMOD__ARG_TYPE__ARG_TYPE_F32:
        return 0x100 | 4;
    case CUMOD__ARG_TYPE__ARG_TYPE_F64:
        return 0x100 | 8;
    default:
        return 0;
    }
}

/* "argument 2 of scale(float*, float, int): a float (f32) where the kernel
 * takes int": argument i (from 0) of a kernel whose signature is known,
 * given what where the kernel takes another type. */
static cumod_err
check_type_refused(const cumod_kernel *k, uint32_t i, const char *what,
                   cumod_status *st)
{
    const char *sig = k->signature ? k->signature
                      : k->display ? k->display
                                   : k->name;
    int ptr = k->pindirect != NULL && k->pindirect[i];
    const char *type = k->ptypes != NULL && k->ptypes[i] != NULL ? k->ptypes[i]
                       : ptr                                     ? "a pointer"
                                                                 : "a value";
    return cumod__status_set(st, CUMOD_EINVAL,
                             "argument %u of %.300s: %s where the kernel "
                             "takes %.120s%s",
                             i + 1, sig, what, type, ptr ? " (a buffer)" : "");
}

/* The cluster shape of a launch, or the kernel's compiled one, against the
 * grid and the device. */
static cumod_err
check_cluster(const cumod_chan_device *dev, const cumod_kernel *k,
              const Cumod__Launch *l, cumod_work_item *it, cumod_status *st)
{
    static const char axis[] = "xyz";
    const char *name = k->display ? k->display : k->name;
    int asked =
        l->cluster != NULL && (l->cluster->x || l->cluster->y || l->cluster->z);
    uint32_t c[3];

    if (!asked && k->cluster[0] == 0)
        return CUMOD_OK;
    if (!dev->cluster_launch)
        return cumod__status_set(
            st, CUMOD_ENOTSUP,
            "%s: thread block clusters need an sm_90 or later device; this "
            "one is sm_%u%u",
            name, dev->sm_major, dev->sm_minor);
    if (asked) {
        c[0] = l->cluster->x ? l->cluster->x : 1;
        c[1] = l->cluster->y ? l->cluster->y : 1;
        c[2] = l->cluster->z ? l->cluster->z : 1;
        if (k->cluster[0] != 0 &&
            (c[0] != k->cluster[0] || c[1] != k->cluster[1] ||
             c[2] != k->cluster[2]))
            return cumod__status_set(
                st, CUMOD_EINVAL,
                "%s was compiled for clusters of %ux%ux%u (__cluster_dims__); "
                "the launch asks %ux%ux%u",
                name, k->cluster[0], k->cluster[1], k->cluster[2], c[0], c[1],
                c[2]);
    } else {
        memcpy(c, k->cluster, sizeof(c));
    }
    for (int a = 0; a < 3; a++)
        if (it->grid[a] % c[a] != 0)
            return cumod__status_set(
                st, CUMOD_EINVAL,
                "%s: cluster.%c = %u does not divide grid.%c = %u (a grid is "
                "made of whole clusters)",
                name, axis[a], c[a], axis[a], it->grid[a]);
    uint64_t size = (uint64_t)c[0] * c[1] * c[2];
    if (size > CUMOD_MAX_CLUSTER)
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "%s: a cluster of %llu blocks is above the "
                                 "device's %d (8 portable, %d with "
                                 "non-portable sizes)",
                                 name, (unsigned long long)size,
                                 CUMOD_MAX_CLUSTER, CUMOD_MAX_CLUSTER);
    if (asked)
        memcpy(it->cluster, c, sizeof(c));
    return CUMOD_OK;
}

/* The launch's shape on dev for k: grid, block, threads, shared memory,
 * cluster, cooperation and carveout, into it. */
static cumod_err
check_launch_shape(const cumod_chan_device *dev, const cumod_kernel *k,
                   const Cumod__Launch *l, const cumod_launch_opts *opts,
                   const char *name, cumod_work_item *it, cumod_status *st)
{
    cumod_err rv;

    if ((rv = check_dims("grid", l->grid, dev->max_grid, it->grid, st)) ||
        (rv = check_dims("block", l->block, dev->max_block, it->block, st)))
        return rv;
    uint64_t threads = (uint64_t)it->block[0] * it->block[1] * it->block[2];
    if (dev->max_threads_per_block && threads > dev->max_threads_per_block)
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "block %ux%ux%u has %llu threads; the device "
                                 "allows %u per block",
                                 it->block[0], it->block[1], it->block[2],
                                 (unsigned long long)threads,
                                 dev->max_threads_per_block);
    if (k->max_threads && threads > k->max_threads)
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "block %ux%ux%u has %llu threads; %s allows "
                                 "%u per block (its launch bounds and "
                                 "registers)",
                                 it->block[0], it->block[1], it->block[2],
                                 (unsigned long long)threads, name,
                                 k->max_threads);
    /* Past 48 KiB, as far as the kernel may opt in: the executor raises
     * its attribute before the launch. */
    uint32_t optin = dev->max_shared_per_block_optin
                         ? dev->max_shared_per_block_optin
                         : dev->max_shared_per_block;
    uint32_t stat = k->static_shared > 0 ? (uint32_t)k->static_shared : 0;
    if (optin && (uint64_t)l->shared_mem + stat > optin)
        return cumod__status_set(
            st, CUMOD_EINVAL,
            "%s: %u bytes of dynamic shared memory and its %u static are "
            "above the device's %u per block (the most a kernel may opt "
            "into): at most %u dynamic",
            name, l->shared_mem, stat, optin, optin > stat ? optin - stat : 0);
    it->shmem = l->shared_mem;
    if ((rv = check_cluster(dev, k, l, it, st)) != CUMOD_OK)
        return rv;
    if (l->cooperative) {
        if (!dev->cooperative_launch)
            return cumod__status_set(st, CUMOD_ENOTSUP,
                                     "%s: the device has no cooperative "
                                     "launches",
                                     name);
        it->flags |= CUMOD_WORK_F_COOPERATIVE;
    }
    if (l->carveout != NULL) {
        if (l->carveout->percent > 100)
            return cumod__status_set(st, CUMOD_EINVAL,
                                     "%s: carveout %u%% is not a percentage "
                                     "(0-100)",
                                     name, l->carveout->percent);
        it->flags |= CUMOD_WORK_F_CARVEOUT;
        it->carveout = (int32_t)l->carveout->percent;
    } else if (opts != NULL && opts->carveout >= 0) {
        it->flags |= CUMOD_WORK_F_CARVEOUT;
        it->carveout = opts->carveout;
    }
    return CUMOD_OK;
}

/* Argument i of l, packed into out->params where k's table puts it; a
 * buffer's address from buf. */
static cumod_err
check_launch_arg(const cumod_kernel *k, const Cumod__Launch *l, uint32_t i,
                 const cumod_launch_opts *opts, cumod_launch_buf_fn buf,
                 const void *buf_arg, cumod_launch_packed *out,
                 cumod_status *st)
{
    cumod_err rv;
    const Cumod__Arg *a = l->args[i];
    uint32_t sz = k->sizes[i];
    int typed = k->pindirect != NULL;
    int indirect = typed && k->pindirect[i];
    /* The value's type where both sides say it: 0 when either
     * does not (an untyped argument, a class parameter). */
    int given = a->kind_case == CUMOD__ARG__KIND_VALUE
                    ? check_type_class((int)a->type)
                    : 0;
    char what[400];
    check_arg_name(k, i, what, sizeof(what));
    if (a->kind_case == CUMOD__ARG__KIND_VALUE) {
        /* A typed value where the signature says pointer: an address
         * only as a 64-bit integer, and only where the daemon allows
         * pointer values. */
        if (given && indirect &&
            !(opts && opts->allow_pointer_values && given == 8))
            return check_type_refused(k, i, check_type_name((int)a->type), st);
        if (given && typed && !indirect && k->pvalue != NULL &&
            k->pvalue[i] != 0 && check_type_class(k->pvalue[i]) != given)
            return check_type_refused(k, i, check_type_name((int)a->type), st);
        if (indirect && !(opts && opts->allow_pointer_values))
            return cumod__status_set(
                st, CUMOD_EINVAL,
                "%s: a buffer reference is needed, %zu bytes of value "
                "given",
                what, a->value.len);
        if (a->value.len != sz)
            return cumod__status_set(st, CUMOD_EINVAL,
                                     "%s: %zu bytes given, the kernel "
                                     "takes %u",
                                     what, a->value.len, sz);
        memcpy(out->params + k->offsets[i], a->value.data, sz);
    } else if (a->kind_case == CUMOD__ARG__KIND_BUFFER && a->buffer != NULL) {
        uint64_t base;
        if (typed && !indirect)
            return check_type_refused(k, i, "a buffer (a device pointer)", st);
        if (sz != sizeof(uint64_t))
            return cumod__status_set(
                st, CUMOD_EINVAL,
                "%s is not pointer-sized (%u bytes): a buffer reference "
                "(a device pointer) cannot go there",
                what, sz);
        if ((rv = buf(buf_arg, what, a->buffer->handle, a->buffer->offset,
                      &base, st)))
            return rv;
        uint64_t ptr = base + a->buffer->offset;
        memcpy(out->params + k->offsets[i], &ptr, sizeof(ptr));
    } else {
        return cumod__status_set(st, CUMOD_EINVAL, "%s has no value", what);
    }
    return CUMOD_OK;
}

cumod_err
cumod__launch_check(const cumod_chan_device *dev, const cumod_kernel *k,
                    const Cumod__Launch *l, const cumod_launch_opts *opts,
                    cumod_launch_buf_fn buf, const void *buf_arg,
                    cumod_launch_packed *out, cumod_status *st)
{
    cumod_work_item *it = &out->it;
    const char *name = k->display ? k->display : k->name;
    size_t blen = 0;
    cumod_err rv;

    memset(it, 0, sizeof(*it));
    it->op = CUMOD_WORK_LAUNCH;
    if ((rv = check_launch_shape(dev, k, l, opts, name, it, st)) != CUMOD_OK)
        return rv;
    if (l->n_args != k->nparams)
        return cumod__status_set(
            st, CUMOD_EINVAL, "%s takes %u argument%s, %zu given%s%s", name,
            k->nparams, k->nparams == 1 ? "" : "s", l->n_args,
            k->signature ? ": " : "", k->signature ? k->signature : "");
    for (uint32_t i = 0; i < k->nparams; i++)
        if ((size_t)k->offsets[i] + k->sizes[i] > blen)
            blen = (size_t)k->offsets[i] + k->sizes[i];
    if (blen > CUMOD_MAX_PARAM_BYTES)
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "%s: its parameters take %zu bytes, more "
                                 "than CUDA's %d",
                                 name, blen, CUMOD_MAX_PARAM_BYTES);
    memset(out->params, 0, blen);
    for (uint32_t i = 0; i < k->nparams; i++)
        if ((rv = check_launch_arg(k, l, i, opts, buf, buf_arg, out, st)) !=
            CUMOD_OK)
            return rv;
    out->nparams = blen;
    return CUMOD_OK;
}
