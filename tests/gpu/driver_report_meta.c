/* SPDX-License-Identifier: MIT */
/*
 * cumod_driver_report's part on what an image says of itself: the
 * attributes of every function that both drivers answer alike, and what
 * cumod__imeta_describe (daemon/catalog/image/image_meta.h) says of every image
 * without a driver, checked against the driver once the image is loaded.
 *
 * The "static" lines come from the describer alone, so they are the same
 * under either driver; each disagreement with the driver adds a "static
 * differs" line, so a describer or a fake that is wrong shows in the diff
 * of the two reports. The globals are checked only where the driver has
 * cuModuleGetGlobal (the fake has none yet): agreement is said on stderr,
 * a difference on stdout.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/image/image_meta.h"
#include "cumod/errors.h"
#include "driver_report.h"

typedef struct meta_check {
    report *r;
    const char *file;
    int differs;
} meta_check;

static cumod_image_kind
meta_kind(const char *path)
{
    size_t n = strlen(path);

    if (n >= 4 && strcmp(path + n - 4, ".ptx") == 0)
        return CUMOD_IMAGE_PTX;
    if (n >= 7 && strcmp(path + n - 7, ".fatbin") == 0)
        return CUMOD_IMAGE_FATBIN;
    return CUMOD_IMAGE_CUBIN;
}

static cumod_err
meta_describe(report *r, const report_image *img, cumod_imeta *m, char *msg,
              size_t msglen)
{
    return cumod__imeta_describe(img->bytes, img->size, meta_kind(img->path),
                                 report_base(img->path), (unsigned)r->sm / 10,
                                 (unsigned)r->sm % 10, m, msg, msglen);
}

report_origin
report_image_origin(report *r, const report_image *img)
{
    cumod_imeta m;
    report_origin o;

    if (meta_describe(r, img, &m, NULL, 0) != CUMOD_OK)
        return meta_kind(img->path) == CUMOD_IMAGE_PTX ? REPORT_JIT
                                                       : REPORT_SASS;
    o = m.source == CUMOD_IMETA_PTX || m.source == CUMOD_IMETA_FATBIN_PTX
            ? REPORT_JIT
            : REPORT_SASS;
    cumod__imeta_fini(&m);
    return o;
}

/* An attribute as text: its value, or the error the driver answered. */
static const char *
meta_attr(report *r, CUfunction f, CUfunction_attribute a, char *buf,
          size_t len)
{
    int v = 0;
    CUresult rc = r->d.func_get_attribute(&v, a, f);

    if (rc != CUDA_SUCCESS)
        return report_err(r, rc);
    snprintf(buf, len, "%d", v);
    return buf;
}

void
report_attributes(report *r, CUfunction f, const char *file, const char *name,
                  report_origin origin)
{
    char b[8][24];

    /* Where functions load lazily, some attributes need the function. */
    if (r->d.func_load != NULL)
        r->d.func_load(f);
    printf(
        "    attributes shared %s const %s cluster %s %s %s must-set %s",
        meta_attr(r, f, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, b[0], 24),
        meta_attr(r, f, CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, b[1], 24),
        meta_attr(r, f, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, b[2], 24),
        meta_attr(r, f, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT, b[3], 24),
        meta_attr(r, f, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH, b[4], 24),
        meta_attr(r, f, CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET, b[5], 24));
    meta_attr(r, f, CU_FUNC_ATTRIBUTE_NUM_REGS, b[6], 24);
    meta_attr(r, f, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, b[7], 24);
    if (origin == REPORT_SASS) {
        printf(" regs %s max-threads %s\n", b[6], b[7]);
        return;
    }
    /* The JIT picks the registers, and the registers bound the threads. */
    printf("\n");
    fprintf(stderr, "driver_report: %s: %s: regs %s max-threads %s (JIT)\n",
            file, name, b[6], b[7]);
}

static void meta_differs(meta_check *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
meta_differs(meta_check *c, const char *fmt, ...)
{
    va_list ap;

    printf("  static differs: ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    c->differs++;
}

/* An attribute the image says (want), where the driver answers one. */
static void
meta_expect(meta_check *c, CUfunction f, const char *kernel,
            CUfunction_attribute a, const char *what, long long want)
{
    int v = 0;
    CUresult rc = c->r->d.func_get_attribute(&v, a, f);

    if (rc != CUDA_SUCCESS)
        fprintf(stderr, "driver_report: %s: %s: %s not compared (%s)\n",
                c->file, kernel, what, report_err(c->r, rc));
    else if (v != want)
        meta_differs(c, "%s: %s is %d to the driver, %lld to the image", kernel,
                     what, v, want);
}

static void
meta_kernel(meta_check *c, CUmodule mod, const cumod_imeta *m,
            const cumod_kdesc *k)
{
    report *r = c->r;
    CUfunction f = NULL;
    size_t off, size;
    CUresult rc;
    uint32_t i;
    int v = 0;

    if ((rc = r->d.module_get_function(&f, mod, k->name)) != CUDA_SUCCESS) {
        meta_differs(c, "%s: cuModuleGetFunction %s", k->name,
                     report_err(r, rc));
        return;
    }
    for (i = 0; i <= k->nparams; i++) {
        rc = r->d.func_get_param_info(f, i, &off, &size);
        if (i == k->nparams && rc == CUDA_SUCCESS)
            meta_differs(c, "%s: the driver has more than %u parameters",
                         k->name, k->nparams);
        else if (i < k->nparams &&
                 (rc != CUDA_SUCCESS || off != k->params[i].offset ||
                  size != k->params[i].size))
            meta_differs(c,
                         "%s: parameter %u is %zu+%zu to the driver (%s), "
                         "%u+%u to the image",
                         k->name, i, off, size, report_err(r, rc),
                         k->params[i].offset, k->params[i].size);
    }
    if (r->d.func_load != NULL)
        r->d.func_load(f);
    if (k->static_shared >= 0)
        meta_expect(c, f, k->name, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                    "static shared memory", k->static_shared);
    if (k->registers >= 0)
        meta_expect(c, f, k->name, CU_FUNC_ATTRIBUTE_NUM_REGS, "registers",
                    k->registers);
    meta_expect(c, f, k->name, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
                "cluster width", k->cluster[0]);
    meta_expect(c, f, k->name, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT,
                "cluster height", k->cluster[1]);
    meta_expect(c, f, k->name, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH,
                "cluster depth", k->cluster[2]);
    meta_expect(c, f, k->name, CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET,
                "cluster-must-be-set", k->cluster_explicit);
    meta_expect(c, f, k->name, CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES,
                "constant memory", (long long)m->const_bytes);
    /* Launch bounds cap the threads; the registers may cap them lower. */
    rc =
        r->d.func_get_attribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f);
    if (k->max_threads > 0 && rc == CUDA_SUCCESS && v > k->max_threads)
        meta_differs(c,
                     "%s: the driver allows %d threads, the launch bounds "
                     "%d",
                     k->name, v, k->max_threads);
}

/* The functions the driver lists, in its order, against the kernels. */
static void
meta_functions(meta_check *c, CUmodule mod, const cumod_imeta *m)
{
    report *r = c->r;
    CUfunction *fs = NULL;
    const char *name = "?";
    unsigned n = 0, i;

    if (r->d.module_get_function_count(&n, mod) != CUDA_SUCCESS ||
        n != m->nkernels) {
        meta_differs(c,
                     "the driver lists %u functions, the image %zu "
                     "kernels",
                     n, m->nkernels);
        return;
    }
    fs = calloc(n + 1, sizeof(*fs));
    if (fs == NULL || r->d.module_enumerate_functions(fs, n, mod) != 0) {
        free(fs);
        return;
    }
    for (i = 0; i < n; i++)
        if (r->d.func_get_name(&name, fs[i]) != CUDA_SUCCESS || name == NULL ||
            strcmp(name, m->kernels[i].name) != 0)
            meta_differs(c,
                         "function %u is %s to the driver, %s to the "
                         "image",
                         i, name, m->kernels[i].name);
    free(fs);
}

static void
meta_globals(meta_check *c, CUmodule mod, const cumod_imeta *m)
{
    report *r = c->r;
    CUdeviceptr p;
    size_t i, size;
    CUresult rc;

    if (r->d.module_get_global == NULL) {
        if (m->nglobals > 0)
            fprintf(stderr,
                    "driver_report: %s: %zu globals not checked: the "
                    "driver has no cuModuleGetGlobal\n",
                    c->file, m->nglobals);
        return;
    }
    for (i = 0; i < m->nglobals; i++) {
        size = 0;
        rc = r->d.module_get_global(&p, &size, mod, m->globals[i].name);
        if (rc != CUDA_SUCCESS || size != m->globals[i].size)
            meta_differs(c,
                         "global %s is %zu bytes to the driver (%s), %llu "
                         "to the image",
                         m->globals[i].name, size, report_err(r, rc),
                         (unsigned long long)m->globals[i].size);
        else
            fprintf(stderr,
                    "driver_report: %s: global %s: %zu bytes, as "
                    "the image says\n",
                    c->file, m->globals[i].name, size);
    }
}

void
report_static(report *r, const report_image *img, CUmodule mod)
{
    meta_check c = {.r = r, .file = report_base(img->path)};
    const cumod_kdesc *k;
    cumod_imeta m;
    char msg[512];
    cumod_err rc;
    size_t i;
    uint32_t j;

    rc = meta_describe(r, img, &m, msg, sizeof(msg));
    if (rc != CUMOD_OK) {
        printf("  static %s: %s\n", cumod_errname(rc), msg);
        return;
    }
    printf("  static %s sm %u const %llu kernels %zu globals %zu\n",
           cumod__imeta_source_name(m.source), m.source_sm,
           (unsigned long long)m.const_bytes, m.nkernels, m.nglobals);
    for (i = 0; i < m.nkernels; i++) {
        k = &m.kernels[i];
        printf("  static kernel %s params", k->name);
        for (j = 0; j < k->nparams; j++)
            printf(" %u+%u", k->params[j].offset, k->params[j].size);
        printf("\n  static   shared %d regs %d max-threads %d reqntid %u %u "
               "%u cluster %u %u %u explicit %d\n",
               k->static_shared, k->registers, k->max_threads, k->reqntid[0],
               k->reqntid[1], k->reqntid[2], k->cluster[0], k->cluster[1],
               k->cluster[2], k->cluster_explicit);
    }
    for (i = 0; i < m.nglobals; i++)
        printf("  static global %s size %llu %s\n", m.globals[i].name,
               (unsigned long long)m.globals[i].size,
               m.globals[i].constant ? "constant" : "device");
    if (mod != NULL) {
        meta_functions(&c, mod, &m);
        for (i = 0; i < m.nkernels; i++)
            meta_kernel(&c, mod, &m, &m.kernels[i]);
        meta_globals(&c, mod, &m);
        if (c.differs == 0)
            printf("  static agrees with the driver\n");
    }
    cumod__imeta_fini(&m);
}
