/* SPDX-License-Identifier: MIT */
/*
 * cumod_driver_report: what a CUDA driver makes of kernel images, printed in
 * a stable, diff-able form.
 *
 *   cumod_driver_report [--library PATH] [--sorted] [--attributes]
 *                       [--stale] [--foreign CUBIN]... [--cublas LIB]
 *                       IMAGE...
 *
 * It opens the driver the way cumodd does (dlopen, then every entry point of
 * daemon/driver_syms.h through cuGetProcAddress_v2 at CUMOD_CUDA_VERSION),
 * initialises device 0, retains its primary context and prints, for each
 * image, the load result, the functions in enumeration order (--sorted: by
 * name) and each parameter's offset and size (--attributes: and each
 * function's attributes); for a PTX image, also what linking it gives
 * (cuLinkCreate, cuLinkAddData, cuLinkComplete, then cuModuleLoadData of
 * the linked image: each result, then the functions by name); then the
 * results of a fixed list of error cases. Every function's attributes that
 * both drivers answer alike are printed too, and for every image what
 * cumod__imeta_describe says of it without the driver ("static" lines),
 * checked against what the driver says once it is loaded
 * (driver_report_meta.c).
 * The case "a cubin for another SM" takes the first cubin, of the --foreign
 * ones (by default the build's vadd.sm_80.cubin) and then the images, whose
 * SM major differs from the device's. The cases on an unloaded module's
 * handles come last: driver 580 answers them CUDA_ERROR_INVALID_HANDLE but
 * may crash instead. --stale adds calls on a function of that module. Run it
 * once on tests/fakecuda's libfakecuda.so and once on the real libcuda.so.1 and
 * diff the two outputs: every difference is a place where the fake does not
 * behave like the driver.
 *
 * --cublas LIB adds what that cuBLAS (the real one, or tests/fakecuda's
 * libfakecublas.so on the fake driver) answers to the calls cumodd's GEMM
 * makes (driver_report_blas.c), after the driver's cases.
 *
 * Only values both drivers should agree on go to stdout. Things that differ
 * by nature (device name, driver version, JIT log text) go to stderr.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver_report.h"

typedef CUresult (*report_gpa_fn)(const char *, void **, int, cuuint64_t,
                                  CUdriverProcAddressQueryResult *);

const char *
report_err(report *r, CUresult rc)
{
    const char *name = NULL;
    if (r->d.get_error_name(rc, &name) != CUDA_SUCCESS || name == NULL) {
        snprintf(r->errbuf, sizeof(r->errbuf), "CUresult(%d)", (int)rc);
        return r->errbuf;
    }
    return name;
}

void
report_case(report *r, const char *name, CUresult rc)
{
    printf("case %-32s %s\n", name, report_err(r, rc));
    fflush(stdout);
}

static int
report_open(report *r, const char *library)
{
    void *lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "driver_report: dlopen %s: %s\n", library, dlerror());
        return -1;
    }
    report_gpa_fn gpa;
    *(void **)&gpa = dlsym(lib, "cuGetProcAddress_v2");
    if (gpa == NULL) {
        fprintf(stderr, "driver_report: %s has no cuGetProcAddress_v2\n",
                library);
        return -1;
    }
    CUdriverProcAddressQueryResult status;
    CUresult rc;
#define REPORT_RESOLVE(field, name, proto)                                     \
    rc = gpa(name, (void **)&r->d.field, CUMOD_CUDA_VERSION,                   \
             CU_GET_PROC_ADDRESS_DEFAULT, &status);                            \
    if (rc != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS) {         \
        fprintf(stderr, "driver_report: %s: cuGetProcAddress %d status %d\n",  \
                name, (int)rc, (int)status);                                   \
        return -1;                                                             \
    }
    CUMOD_DRIVER_SYMS(REPORT_RESOLVE)
#undef REPORT_RESOLVE
    /* cumodd does without these; both drivers are expected to have them
     * (a line says which is missing). */
#define REPORT_RESOLVE_OPTIONAL(field, name, proto, fallback)                  \
    rc = gpa(name, (void **)&r->d.field, CUMOD_CUDA_VERSION,                   \
             CU_GET_PROC_ADDRESS_DEFAULT, &status);                            \
    if (rc != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS) {         \
        r->d.field = NULL;                                                     \
        printf("optional %s missing\n", name);                                 \
    }
    CUMOD_DRIVER_OPTIONAL_SYMS(REPORT_RESOLVE_OPTIONAL)
#undef REPORT_RESOLVE_OPTIONAL
    return 0;
}

static int
report_read(const char *path, report_image *img)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return -1;
    }
    unsigned char *buf = NULL;
    if (fseek(f, 0, SEEK_END) != 0)
        goto fail;
    long len = ftell(f);
    if (len < 0 || fseek(f, 0, SEEK_SET) != 0)
        goto fail;
    buf = calloc(1, (size_t)len + REPORT_PAD);
    if (buf == NULL || fread(buf, 1, (size_t)len, f) != (size_t)len)
        goto fail;
    fclose(f);
    img->path = path;
    img->bytes = buf;
    img->size = (size_t)len;
    return 0;
fail:
    fprintf(stderr, "driver_report: cannot read %s\n", path);
    free(buf);
    fclose(f);
    return -1;
}

const char *
report_base(const char *path)
{
    const char *s = strrchr(path, '/');
    return s != NULL ? s + 1 : path;
}

int
report_has_suffix(const char *path, const char *suffix)
{
    size_t n = strlen(path), m = strlen(suffix);
    return n >= m && strcmp(path + n - m, suffix) == 0;
}

/* The SM a cubin is built for: ELF ABI version 8 (CUDA 13 and sm_100+) keeps
 * it in e_flags bits 8..15, older cubins in the low byte. */
int
report_cubin_sm(const report_image *img)
{
    if (img->size < 64 || memcmp(img->bytes, "\177ELF", 4) != 0)
        return -1;
    uint32_t flags;
    memcpy(&flags, img->bytes + 48, sizeof(flags));
    return img->bytes[8] >= 8 ? (int)((flags >> 8) & 0xff)
                              : (int)(flags & 0xff);
}

/* Loads an image, with a JIT error log: the text goes to stderr. */
CUresult
report_load(report *r, CUmodule *mod, const void *image, const char *what)
{
    char log[REPORT_LOG] = "";
    CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[2] = {log, (void *)(uintptr_t)sizeof(log)};
    CUresult rc = r->d.module_load_data_ex(mod, image, 2, opts, vals);
    if (log[0] != '\0')
        fprintf(stderr, "driver_report: %s: JIT log: %s\n", what, log);
    return rc;
}

static int
report_name_cmp(const void *a, const void *b)
{
    const char *const *x = a, *const *y = b;
    return strcmp(*x, *y);
}

static void
report_function(report *r, CUfunction f, const char *file, const char *name,
                report_origin origin)
{
    printf("  function %s\n", name);
    for (size_t i = 0;; i++) {
        size_t off = 0, size = 0;
        CUresult rc = r->d.func_get_param_info(f, i, &off, &size);
        if (rc != CUDA_SUCCESS) {
            printf("    params %zu (then %s)\n", i, report_err(r, rc));
            break;
        }
        printf("    param %zu offset %zu size %zu\n", i, off, size);
    }
    if (origin != REPORT_LINKED)
        report_attributes(r, f, file, name, origin);
    if (!r->attributes)
        return;
    static const struct {
        CUfunction_attribute a;
        const char *name;
    } attrs[] = {
#define REPORT_FN(x) {CU_FUNC_ATTRIBUTE_##x, #x}
        REPORT_FN(MAX_THREADS_PER_BLOCK),
        REPORT_FN(SHARED_SIZE_BYTES),
        REPORT_FN(CONST_SIZE_BYTES),
        REPORT_FN(LOCAL_SIZE_BYTES),
        REPORT_FN(NUM_REGS),
        REPORT_FN(PTX_VERSION),
        REPORT_FN(BINARY_VERSION),
        REPORT_FN(MAX_DYNAMIC_SHARED_SIZE_BYTES),
#undef REPORT_FN
    };
    for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
        int v = -1;
        CUresult rc = r->d.func_get_attribute(&v, attrs[i].a, f);
        printf("    attribute %s %d (%s)\n", attrs[i].name, v,
               report_err(r, rc));
    }
}

/* Links PTX text with cuLink*, printing each step's result as "PREFIX STEP
 * RESULT"; the JIT error log goes to stderr. With `functions`, loads the
 * image and prints its functions, sorted by name: whether nvlink keeps the
 * order the JIT of the same PTX gives is not known, so only the set is
 * compared. No attributes: a linked cubin's are not known to match the
 * fake's guesses for PTX. A failed input ends it (what cuLinkComplete does
 * with no inputs is not compared). Returns cuLinkAddData's result. */
CUresult
report_link(report *r, const char *prefix, const char *ptx, int functions)
{
    char log[REPORT_LOG] = "";
    CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[2] = {log, (void *)(uintptr_t)sizeof(log)};
    CUlinkState ls = NULL;
    CUresult rc = r->d.link_create(2, opts, vals, &ls);
    if (functions)
        printf("%s create %s\n", prefix, report_err(r, rc));
    if (rc != CUDA_SUCCESS)
        return rc;
    CUresult add =
        r->d.link_add_data(ls, CU_JIT_INPUT_PTX, (void *)ptx, strlen(ptx) + 1,
                           "report.ptx", 0, NULL, NULL);
    if (log[0] != '\0')
        fprintf(stderr, "driver_report: %s: link log: %s\n", prefix, log);
    if (!functions || add != CUDA_SUCCESS) {
        if (functions)
            printf("%s add %s\n", prefix, report_err(r, add));
        r->d.link_destroy(ls);
        return add;
    }
    printf("%s add %s\n", prefix, report_err(r, add));
    void *image = NULL;
    size_t size = 0;
    rc = r->d.link_complete(ls, &image, &size);
    printf("%s complete %s\n", prefix, report_err(r, rc));
    CUmodule mod = NULL;
    if (rc == CUDA_SUCCESS) {
        rc = r->d.module_load_data(&mod, image);
        printf("%s load %s\n", prefix, report_err(r, rc));
    }
    if (rc == CUDA_SUCCESS) {
        unsigned n = 0;
        rc = r->d.module_get_function_count(&n, mod);
        printf("%s functions %u (%s)\n", prefix, n, report_err(r, rc));
        CUfunction *fs = calloc(n + 1, sizeof(*fs));
        const char **names = calloc(n + 1, sizeof(*names));
        if (fs != NULL && names != NULL &&
            r->d.module_enumerate_functions(fs, n, mod) == CUDA_SUCCESS) {
            for (unsigned i = 0; i < n; i++)
                if (r->d.func_get_name(&names[i], fs[i]) != CUDA_SUCCESS ||
                    names[i] == NULL)
                    names[i] = "?";
            qsort(names, n, sizeof(*names), report_name_cmp);
            int attributes = r->attributes;
            r->attributes = 0;
            for (unsigned i = 0; i < n; i++) {
                CUfunction f = NULL;
                rc = r->d.module_get_function(&f, mod, names[i]);
                if (rc != CUDA_SUCCESS)
                    printf("  function %s: get %s\n", names[i],
                           report_err(r, rc));
                else
                    report_function(r, f, prefix, names[i], REPORT_LINKED);
            }
            r->attributes = attributes;
        }
        free(fs);
        free(names);
        r->d.module_unload(mod);
    }
    printf("%s destroy %s\n", prefix, report_err(r, r->d.link_destroy(ls)));
    return add;
}

static void
report_image_functions(report *r, const report_image *img)
{
    CUmodule mod = NULL;
    report_origin origin = report_image_origin(r, img);
    printf("file %s\n", report_base(img->path));
    CUresult rc = report_load(r, &mod, img->bytes, report_base(img->path));
    printf("  load %s\n", report_err(r, rc));
    if (rc != CUDA_SUCCESS) {
        report_static(r, img, NULL);
        return;
    }
    unsigned n = 0;
    rc = r->d.module_get_function_count(&n, mod);
    printf("  functions %u (%s)\n", n, report_err(r, rc));
    CUfunction *fs = calloc(n + 1, sizeof(*fs));
    const char **names = calloc(n + 1, sizeof(*names));
    if (fs == NULL || names == NULL)
        goto fail;
    rc = r->d.module_enumerate_functions(fs, n, mod);
    if (rc != CUDA_SUCCESS) {
        printf("  enumerate %s\n", report_err(r, rc));
        goto fail;
    }
    for (unsigned i = 0; i < n; i++)
        if (r->d.func_get_name(&names[i], fs[i]) != CUDA_SUCCESS ||
            names[i] == NULL)
            names[i] = "?";
    if (r->sorted)
        qsort(names, n, sizeof(*names), report_name_cmp);
    for (unsigned i = 0; i < n; i++) {
        CUfunction f = NULL;
        rc = r->d.module_get_function(&f, mod, names[i]);
        if (rc != CUDA_SUCCESS)
            printf("  function %s: get %s\n", names[i], report_err(r, rc));
        else
            report_function(r, f, report_base(img->path), names[i], origin);
    }
    report_static(r, img, mod);
fail: /* and the way out when all went well */
    free(fs);
    free(names);
    r->d.module_unload(mod);
    if (report_has_suffix(img->path, ".ptx"))
        report_link(r, "  link", (const char *)img->bytes, 1);
}

static void report_uuid(report *r);

static void
report_device(report *r)
{
    static const struct {
        CUdevice_attribute a;
        const char *name;
    } attrs[] = {
#define REPORT_DEV(x) {CU_DEVICE_ATTRIBUTE_##x, #x}
        REPORT_DEV(COMPUTE_CAPABILITY_MAJOR),
        REPORT_DEV(COMPUTE_CAPABILITY_MINOR),
        REPORT_DEV(MULTIPROCESSOR_COUNT),
        REPORT_DEV(MAX_THREADS_PER_BLOCK),
        REPORT_DEV(MAX_BLOCK_DIM_X),
        REPORT_DEV(MAX_BLOCK_DIM_Y),
        REPORT_DEV(MAX_BLOCK_DIM_Z),
        REPORT_DEV(MAX_GRID_DIM_X),
        REPORT_DEV(MAX_GRID_DIM_Y),
        REPORT_DEV(MAX_GRID_DIM_Z),
        REPORT_DEV(MAX_SHARED_MEMORY_PER_BLOCK),
        REPORT_DEV(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
        REPORT_DEV(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
        REPORT_DEV(WARP_SIZE),
        REPORT_DEV(MAX_REGISTERS_PER_BLOCK),
        REPORT_DEV(MAX_THREADS_PER_MULTIPROCESSOR),
        REPORT_DEV(TOTAL_CONSTANT_MEMORY),
        REPORT_DEV(UNIFIED_ADDRESSING),
        REPORT_DEV(CONCURRENT_KERNELS),
        REPORT_DEV(ASYNC_ENGINE_COUNT),
        REPORT_DEV(HOST_REGISTER_SUPPORTED),
        REPORT_DEV(COOPERATIVE_LAUNCH),
        REPORT_DEV(CLUSTER_LAUNCH),
        REPORT_DEV(MEMORY_POOLS_SUPPORTED),
#undef REPORT_DEV
    };
    for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
        int v = -1;
        CUresult rc = r->d.device_get_attribute(&v, attrs[i].a, 0);
        printf("device attribute %s %d (%s)\n", attrs[i].name, v,
               report_err(r, rc));
    }
    int v = -1;
    report_case(r, "device-attribute-unknown",
                r->d.device_get_attribute(&v, (CUdevice_attribute)0x7fff, 0));
    char name[256] = "";
    size_t total = 0;
    r->d.device_get_name(name, (int)sizeof(name), 0);
    r->d.device_total_mem(&total, 0);
    fprintf(stderr, "driver_report: device 0: %s, %zu bytes\n", name, total);
    report_uuid(r);
}

/* cuDeviceGetUuid (the executor puts it on the channel, cumodctl status
 * shows it): the value differs by nature (stderr); that it is answered,
 * not all zeros and the same twice, and the errors, are compared. */
static void
report_uuid(report *r)
{
    CUuuid a, b;
    int count = 0;
    static const char zero[16];
    if (r->d.device_get_uuid == NULL)
        return;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    report_case(r, "device-get-uuid", r->d.device_get_uuid(&a, 0));
    report_case(r, "device-get-uuid-again", r->d.device_get_uuid(&b, 0));
    printf("case %-32s %s\n", "device-uuid-set",
           memcmp(a.bytes, zero, 16) != 0 ? "yes" : "all zeros");
    printf("case %-32s %s\n", "device-uuid-stable",
           memcmp(a.bytes, b.bytes, 16) == 0 ? "same" : "differs");
    r->d.device_get_count(&count);
    report_case(r, "device-get-uuid-out-of-range",
                r->d.device_get_uuid(&b, count));
    report_case(r, "device-get-uuid-null", r->d.device_get_uuid(NULL, 0));
    fprintf(stderr, "driver_report: device 0: uuid ");
    for (int i = 0; i < 16; i++)
        fprintf(stderr, "%02x", (unsigned char)a.bytes[i]);
    fprintf(stderr, "\n");
}

static int
report_usage(void)
{
    fprintf(
        stderr,
        "usage: cumod_driver_report [--library PATH] [--sorted] "
        "[--attributes]\n"
        "                           [--stale] [--foreign CUBIN]... [--cublas "
        "LIB] IMAGE...\n");
    return 2;
}

int
main(int argc, char **argv)
{
    report r = {.sorted = 0};
    const char *library = "libcuda.so.1", *cublas = NULL;
    r.images = calloc((size_t)argc, sizeof(*r.images));
    r.foreign = calloc((size_t)argc, sizeof(*r.foreign));
    if (r.images == NULL || r.foreign == NULL)
        return 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--library") == 0 && i + 1 < argc)
            library = argv[++i];
        else if (strcmp(argv[i], "--sorted") == 0)
            r.sorted = 1;
        else if (strcmp(argv[i], "--attributes") == 0)
            r.attributes = 1;
        else if (strcmp(argv[i], "--stale") == 0)
            r.stale = 1;
        else if (strcmp(argv[i], "--cublas") == 0 && i + 1 < argc)
            cublas = argv[++i];
        else if (strcmp(argv[i], "--foreign") == 0 && i + 1 < argc) {
            if (report_read(argv[++i], &r.foreign[r.nforeign++]) != 0)
                return 1;
        } else if (argv[i][0] == '-')
            return report_usage();
        else if (report_read(argv[i], &r.images[r.nimages++]) != 0)
            return 1;
    }
#ifdef CUMOD_REPORT_FOREIGN_CUBIN
    /* The build's sm_80 cubin, where it is: the default foreign image. */
    FILE *probe =
        r.nforeign == 0 ? fopen(CUMOD_REPORT_FOREIGN_CUBIN, "rb") : NULL;
    if (probe != NULL) {
        fclose(probe);
        if (report_read(CUMOD_REPORT_FOREIGN_CUBIN, &r.foreign[r.nforeign++]) !=
            0)
            return 1;
    }
#endif
    if (report_open(&r, library) != 0)
        return 1;

    int count = -1, major = 0, minor = 0, version = 0;
    CUcontext ctx = NULL;
    CUmodule mod = NULL;
    CUdeviceptr dp = 0;
    CUdevice dev = 0;
    report_case(&r, "before-init-device-count", r.d.device_get_count(&count));
    CUresult rc = r.d.init(0);
    report_case(&r, "init", rc);
    if (rc != CUDA_SUCCESS)
        return 1;
    report_case(&r, "init-bad-flags", r.d.init(1));
    r.d.driver_get_version(&version);
    fprintf(stderr, "driver_report: %s: driver version %d\n", library, version);
    report_case(&r, "device-count", r.d.device_get_count(&count));
    printf("device count %d\n", count);
    report_case(&r, "device-get-out-of-range", r.d.device_get(&dev, count));
    report_case(&r, "device-get-negative", r.d.device_get(&dev, -1));
    report_case(&r, "device-get-0", r.d.device_get(&dev, 0));
    r.d.device_get_attribute(&major,
                             CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    r.d.device_get_attribute(&minor,
                             CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    r.sm = major * 10 + minor;
    report_device(&r);
    if (r.images != NULL && r.nimages > 0)
        report_case(&r, "load-without-context",
                    r.d.module_load_data(&mod, r.images[0].bytes));
    report_case(&r, "alloc-without-context", r.d.mem_alloc(&dp, 256));
    report_case(&r, "primary-ctx-retain", r.d.primary_ctx_retain(&ctx, dev));
    report_case(&r, "ctx-set-current", r.d.ctx_set_current(ctx));

    for (int i = 0; i < r.nimages; i++)
        report_image_functions(&r, &r.images[i]);
    report_cases(&r);
    /* After the driver's cases: cuBLAS initialises a runtime in this
     * process, whose memory would show in the pool's figures. */
    if (cublas != NULL)
        report_blas(&r, cublas);

    report_case(&r, "primary-ctx-release", r.d.primary_ctx_release(dev));
    for (int i = 0; i < r.nimages; i++)
        free(r.images[i].bytes);
    for (int i = 0; i < r.nforeign; i++)
        free(r.foreign[i].bytes);
    free(r.images);
    free(r.foreign);
    return 0;
}
