/*
 * cumod_driver_report: what a CUDA driver makes of kernel images, printed in
 * a stable, diff-able form.
 *
 *   cumod_driver_report [--library PATH] [--sorted] [--attributes]
 *                       [--stale] [--foreign CUBIN]... IMAGE...
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

static void
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
    /* Optional: cuModuleGetGlobal checks the globals the image lists;
     * cuFuncLoad loads a function where the driver loads them lazily (driver
     * 580 answers MAX_THREADS_PER_BLOCK and CONST_SIZE_BYTES with
     * CUDA_ERROR_FUNCTION_NOT_LOADED until then). */
    if (gpa("cuModuleGetGlobal", (void **)&r->d.module_get_global,
            CUMOD_CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT,
            &status) != CUDA_SUCCESS ||
        status != CU_GET_PROC_ADDRESS_SUCCESS)
        r->d.module_get_global = NULL;
    if (gpa("cuFuncLoad", (void **)&r->d.func_load, CUMOD_CUDA_VERSION,
            CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS ||
        status != CU_GET_PROC_ADDRESS_SUCCESS)
        r->d.func_load = NULL;
    fprintf(stderr, "driver_report: %s: cuModuleGetGlobal %s, cuFuncLoad %s\n",
            library, r->d.module_get_global != NULL ? "found" : "absent",
            r->d.func_load != NULL ? "found" : "absent");
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

static int
report_has_suffix(const char *path, const char *suffix)
{
    size_t n = strlen(path), m = strlen(suffix);
    return n >= m && strcmp(path + n - m, suffix) == 0;
}

/* The SM a cubin is built for: ELF ABI version 8 (CUDA 13 and sm_100+) keeps
 * it in e_flags bits 8..15, older cubins in the low byte. */
static int
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
static CUresult
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
static CUresult
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
}

/* A patched copy of an image: buffer of size + REPORT_PAD, caller frees. */
static unsigned char *
report_copy(const report_image *img, size_t keep)
{
    unsigned char *p = calloc(1, img->size + REPORT_PAD);
    if (p != NULL)
        memcpy(p, img->bytes, keep < img->size ? keep : img->size);
    return p;
}

static const report_image *
report_find(report *r, const char *suffix)
{
    for (int i = 0; i < r->nimages; i++)
        if (report_has_suffix(r->images[i].path, suffix))
            return &r->images[i];
    return NULL;
}

static void
report_load_case(report *r, const char *name, const void *image)
{
    CUmodule mod = NULL;
    CUresult rc = report_load(r, &mod, image, name);
    report_case(r, name, rc);
    if (rc == CUDA_SUCCESS)
        r->d.module_unload(mod);
}

/* cuLinkAddData of malformed PTX: its result, as a case. */
static void
report_link_case(report *r, const char *name, const char *ptx)
{
    report_case(r, name, report_link(r, name, ptx, 0));
}

/* A PTX text with `from` replaced by `to` once, or NULL. */
static char *
report_ptx_patch(const report_image *ptx, const char *from, const char *to)
{
    const char *at = strstr((const char *)ptx->bytes, from);
    if (at == NULL)
        return NULL;
    size_t head = (size_t)(at - (const char *)ptx->bytes);
    char *out = calloc(1, ptx->size + strlen(to) + REPORT_PAD);
    if (out == NULL)
        return NULL;
    memcpy(out, ptx->bytes, head);
    strcpy(out + head, to);
    strcat(out + head, at + strlen(from));
    return out;
}

/* A copy of a fatbin that keeps only SASS for another major SM: no image
 * the device can run. NULL if there is none to keep. */
static unsigned char *
report_fatbin_foreign(report *r, const report_image *fat)
{
    const unsigned char *b = fat->bytes;
    uint16_t hsize;
    uint64_t size;
    memcpy(&hsize, b + 6, 2);
    memcpy(&size, b + 8, 8);
    if (fat->size < 16 || hsize < 16 || hsize > fat->size ||
        size > fat->size - hsize)
        return NULL;
    unsigned char *out = calloc(1, fat->size + REPORT_PAD);
    if (out == NULL)
        return NULL;
    memcpy(out, b, hsize);
    size_t at = hsize, kept = 0;
    for (size_t off = hsize; off + 48 <= hsize + size;) {
        uint32_t ehsize, sm;
        uint64_t psize;
        uint16_t kind;
        memcpy(&kind, b + off, 2);
        memcpy(&ehsize, b + off + 4, 4);
        memcpy(&psize, b + off + 8, 8);
        memcpy(&sm, b + off + 28, 4);
        if (ehsize < 48 || psize > hsize + size - off - ehsize)
            break;
        if (kind == 2 && (int)sm / 10 != r->sm / 10) {
            memcpy(out + at, b + off, ehsize + psize);
            at += ehsize + psize;
            kept++;
        }
        off += ehsize + psize;
    }
    size = at - hsize;
    memcpy(out + 8, &size, 8);
    if (kept == 0) {
        free(out);
        return NULL;
    }
    return out;
}

static void
report_image_cases(report *r)
{
    static const unsigned char junk_bin[16] = {
        0x8d, 0x3f, 0x00, 0x91, 0xfe, 0x12, 0x77, 0x05,
        0xa0, 0x00, 0x00, 0xc3, 0x19, 0x4e, 0x00, 0x01};
    unsigned char *buf = calloc(1, REPORT_PAD);
    if (buf == NULL)
        return;
    CUmodule mod = NULL;
    report_case(r, "load-null-image", r->d.module_load_data(&mod, NULL));
    report_load_case(r, "load-empty-image", buf);
    memcpy(buf, "cumod junk bytes", 16);
    report_load_case(r, "load-junk-text-16", buf);
    memcpy(buf, junk_bin, sizeof(junk_bin));
    report_load_case(r, "load-junk-binary-16", buf);
    free(buf);

    char *p;
    const report_image *cubin = report_find(r, ".cubin");
    if (cubin != NULL && (buf = report_copy(cubin, 100)) != NULL) {
        report_load_case(r, "load-cubin-first-100-bytes", buf);
        free(buf);
    }
    if (cubin != NULL && (buf = report_copy(cubin, cubin->size)) != NULL) {
        buf[18] = 62; /* e_machine EM_X86_64 */
        report_load_case(r, "load-elf-not-cuda", buf);
        free(buf);
    }
    const report_image *other = NULL;
    for (int i = 0; i < r->nforeign + r->nimages && other == NULL; i++) {
        const report_image *c =
            i < r->nforeign ? &r->foreign[i] : &r->images[i - r->nforeign];
        int sm = report_cubin_sm(c);
        if (sm > 0 && sm / 10 != r->sm / 10)
            other = c;
    }
    if (other != NULL) {
        fprintf(stderr, "driver_report: foreign cubin %s\n", other->path);
        report_load_case(r, "load-cubin-other-sm", other->bytes);
    } else {
        printf("case %-32s skipped (no cubin for another SM)\n",
               "load-cubin-other-sm");
    }

    /* No truncated fatbin here: driver 580 never returns from loading one
     * whose next entry header reads as zeros (a header size of 0). */
    const report_image *fat = report_find(r, ".fatbin");
    if (fat != NULL && (buf = report_fatbin_foreign(r, fat)) != NULL) {
        report_load_case(r, "load-fatbin-other-sm-only", buf);
        free(buf);
    }

    const report_image *ptx = report_find(r, ".ptx");
    if (ptx == NULL)
        return;
    if ((p = report_ptx_patch(ptx, ".version ", "junk\n.version ")) != NULL) {
        /* Not through the linker: the driver may hand text it was told is
         * PTX to ptxas (CUDA_ERROR_INVALID_PTX) where the fake, like
         * cuModuleLoadDataEx, answers CUDA_ERROR_INVALID_IMAGE. */
        report_load_case(r, "load-ptx-leading-junk", p);
        free(p);
    }
    report_load_case(r, "load-ptx-version-only", ".version 9.0\n");
    report_link_case(r, "link-ptx-version-only", ".version 9.0\n");
    char target[32];
    snprintf(target, sizeof(target), ".target sm_%d\n", (r->sm / 10 + 1) * 10);
    if ((p = report_ptx_patch(ptx, ".target sm_", target)) != NULL) {
        /* keep only the patched line: drop the old value that follows */
        char *nl = strstr(p, target) + strlen(target);
        char *eol = strchr(nl, '\n');
        if (eol != NULL)
            memmove(nl, eol + 1, strlen(eol + 1) + 1);
        report_load_case(r, "load-ptx-newer-target", p);
        report_link_case(r, "link-ptx-newer-target", p);
        free(p);
    }
    if ((p = report_ptx_patch(ptx, ".version ", ".version 99.9\n//")) != NULL) {
        /* Not through the linker: cuModuleLoadDataEx maps ptxas's
         * "Unsupported .version" to CUDA_ERROR_UNSUPPORTED_PTX_VERSION, but
         * whether cuLinkAddData maps it so too (or answers
         * CUDA_ERROR_INVALID_PTX) has not been seen on a real driver. */
        report_load_case(r, "load-ptx-newer-version", p);
        free(p);
    }
    if ((p = report_ptx_patch(ptx, ".address_size 64",
                              ".address_size 64\nthis is not ptx;")) != NULL) {
        report_load_case(r, "load-ptx-syntax-error", p);
        report_link_case(r, "link-ptx-syntax-error", p);
        free(p);
    }
    /* No link case for PTX without an entry: whether nvlink keeps a module
     * of functions only, and what it answers if not, is not known. */
    if ((p = report_ptx_patch(ptx, ".entry ", ".func ")) != NULL) {
        CUresult rc = report_load(r, &mod, p, "load-ptx-no-entry");
        report_case(r, "load-ptx-no-entry", rc);
        unsigned n = 99;
        if (rc == CUDA_SUCCESS) {
            report_case(r, "ptx-no-entry-function-count",
                        r->d.module_get_function_count(&n, mod));
            printf("  count %u\n", n);
            r->d.module_unload(mod);
        }
        free(p);
    }
}

static void
report_handle_cases(report *r)
{
    const report_image *img = NULL;
    for (int i = 0; i < r->nimages && img == NULL; i++)
        if (report_cubin_sm(&r->images[i]) == r->sm)
            img = &r->images[i];
    CUmodule mod = NULL;
    CUfunction f = NULL;
    const char *name = NULL;
    if (img == NULL ||
        r->d.module_load_data(&mod, img->bytes) != CUDA_SUCCESS ||
        r->d.module_enumerate_functions(&f, 1, mod) != CUDA_SUCCESS ||
        r->d.func_get_name(&name, f) != CUDA_SUCCESS) {
        printf("case handles skipped (no loadable cubin)\n");
        return;
    }
    CUfunction g = NULL;
    size_t off, size;
    report_case(r, "get-function-unknown-name",
                r->d.module_get_function(&g, mod, "no_such_kernel"));
    size_t np = 0;
    while (r->d.func_get_param_info(f, np, &off, &size) == CUDA_SUCCESS)
        np++;
    report_case(r, "param-info-past-end",
                r->d.func_get_param_info(f, np, &off, &size));
    report_case(r, "param-info-far-past-end",
                r->d.func_get_param_info(f, 1000, &off, &size));
    report_case(r, "enumerate-too-few",
                r->d.module_enumerate_functions(&g, 0, mod));
    snprintf(r->stale_name, sizeof(r->stale_name), "%s", name);
    r->stale_mod = mod;
    r->stale_fn = f;
    report_case(r, "unload", r->d.module_unload(mod));
}

/* Handles of the module report_handle_cases unloaded. Driver 580 answers
 * these CUDA_ERROR_INVALID_HANDLE, but not reliably: in one run of four the
 * second cuModuleUnload crashed (SIGSEGV; it reads freed memory), so they
 * run last, and the function's only with --stale. */
static void
report_stale_cases(report *r)
{
    CUfunction g = NULL;
    size_t off, size;
    unsigned n = 0;
    if (r->stale_mod == NULL)
        return;
    report_case(r, "unload-again", r->d.module_unload(r->stale_mod));
    report_case(r, "get-function-unloaded-module",
                r->d.module_get_function(&g, r->stale_mod, r->stale_name));
    report_case(r, "function-count-unloaded-module",
                r->d.module_get_function_count(&n, r->stale_mod));
    if (!r->stale)
        return;
    report_case(r, "param-info-stale-function",
                r->d.func_get_param_info(r->stale_fn, 0, &off, &size));
    report_case(
        r, "launch-stale-function",
        r->d.launch_kernel(r->stale_fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
}

static void
report_memory_cases(report *r)
{
    CUdeviceptr p = 0, q = 0;
    unsigned char host[512] = {0}, back[512] = {0};
    for (size_t i = 0; i < sizeof(host); i++)
        host[i] = (unsigned char)(i * 7 + 1);
    report_case(r, "mem-alloc-zero", r->d.mem_alloc(&q, 0));
    report_case(r, "mem-free-null", r->d.mem_free(0));
    report_case(r, "mem-alloc-256", r->d.mem_alloc(&p, 256));
    report_case(r, "memcpy-htod", r->d.memcpy_htod(p, host, 256));
    report_case(r, "memcpy-dtoh", r->d.memcpy_dtoh(back, p, 256));
    printf("case %-32s %s\n", "memcpy-round-trip",
           memcmp(host, back, 256) == 0 ? "same" : "differs");
    report_case(r, "memset-d8", r->d.memset_d8(p, 0x5a, 256));
    report_case(r, "mem-free-interior", r->d.mem_free(p + 8));
    report_case(r, "mem-free", r->d.mem_free(p));
    report_case(r, "mem-free-again", r->d.mem_free(p));
    void *page = aligned_alloc(4096, 8192);
    if (page == NULL)
        return;
    report_case(r, "host-unregister-unregistered",
                r->d.mem_host_unregister(page));
    report_case(r, "host-register-bad-flags",
                r->d.mem_host_register(page, 8192, 0x80));
    report_case(r, "host-register", r->d.mem_host_register(page, 8192, 0));
    report_case(r, "host-register-again",
                r->d.mem_host_register(page, 8192, 0));
    report_case(r, "host-unregister-interior",
                r->d.mem_host_unregister((char *)page + 4096));
    report_case(r, "host-unregister", r->d.mem_host_unregister(page));
    free(page);
}

/* The stream-ordered allocator, as the executor uses it: the default pool,
 * its reuse attribute, allocations and frees in stream order. Only answers
 * the documentation fixes are compared (no sizes: a pool may round them). */
static void
report_pool_cases(report *r)
{
    CUmemoryPool pool = NULL;
    CUdeviceptr p = 0, q = 0;
    int v = -1;
    report_case(r, "pool-get-default",
                r->d.device_get_default_mem_pool(&pool, 0));
    report_case(
        r, "pool-get-reuse-internal-deps",
        r->d.mem_pool_get_attribute(
            pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, &v));
    printf("  value %d\n", v);
    int off = 0;
    report_case(
        r, "pool-set-reuse-internal-deps-0",
        r->d.mem_pool_set_attribute(
            pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, &off));
    v = -1;
    r->d.mem_pool_get_attribute(
        pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, &v);
    printf("  value %d\n", v);
    cuuint64_t threshold = 99;
    report_case(r, "pool-get-release-threshold",
                r->d.mem_pool_get_attribute(
                    pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
    printf("  value %llu\n", (unsigned long long)threshold);
    cuuint64_t one = 1;
    report_case(r, "pool-set-reserved-high-nonzero",
                r->d.mem_pool_set_attribute(
                    pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &one));
    CUstream s = NULL;
    r->d.stream_create(&s, CU_STREAM_NON_BLOCKING);
    report_case(r, "mem-alloc-async-256", r->d.mem_alloc_async(&p, 256, s));
    report_case(r, "stream-synchronize-after-alloc",
                r->d.stream_synchronize(s));
    unsigned char host[256], back[256] = {0};
    memset(host, 0x6b, sizeof(host));
    report_case(r, "memcpy-htod-async-memory",
                r->d.memcpy_htod(p, host, sizeof(host)));
    report_case(r, "memcpy-dtoh-async-memory",
                r->d.memcpy_dtoh(back, p, sizeof(back)));
    printf("case %-32s %s\n", "async-memory-round-trip",
           memcmp(host, back, sizeof(host)) == 0 ? "same" : "differs");
    report_case(r, "mem-free-async", r->d.mem_free_async(p, s));
    report_case(r, "stream-synchronize-after-free", r->d.stream_synchronize(s));
    /* Either kind of memory may be freed either way (the programming
     * guide's stream-ordered allocator section says so). */
    report_case(r, "mem-alloc-256-for-free-async", r->d.mem_alloc(&q, 256));
    report_case(r, "mem-free-async-of-mem-alloc", r->d.mem_free_async(q, s));
    report_case(r, "mem-alloc-async-for-mem-free",
                r->d.mem_alloc_async(&q, 256, s));
    report_case(r, "stream-synchronize-before-free",
                r->d.stream_synchronize(s));
    report_case(r, "mem-free-of-alloc-async", r->d.mem_free(q));
    r->d.stream_destroy(s);
    int on = 1;
    r->d.mem_pool_set_attribute(
        pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, &on);
}

/* Kernel `name` of the image whose file ends in `file`, loaded; or NULL. */
static CUfunction
report_kernel(report *r, const char *file, const char *name, CUmodule *mod)
{
    const report_image *img = report_find(r, file);
    CUfunction f = NULL;
    if (img == NULL || r->d.module_load_data(mod, img->bytes) != CUDA_SUCCESS)
        return NULL;
    if (r->d.module_get_function(&f, *mod, name) != CUDA_SUCCESS)
        f = NULL;
    return f;
}

static void
report_launch_cases(report *r)
{
    CUmodule mods[2] = {NULL, NULL};
    /* A kernel without parameters, and one with. */
    CUfunction none = report_kernel(r, "empty.cubin", "empty", &mods[0]);
    CUfunction some = report_kernel(r, "vadd.cubin", "vadd", &mods[1]);
    if (none == NULL) {
        printf("case launches skipped (no empty.cubin)\n");
    } else {
        static const struct {
            const char *name;
            unsigned g[3], b[3], shmem;
        } cfg[] = {
            {"launch-block-x-1025", {1, 1, 1}, {1025, 1, 1}, 0},
            {"launch-block-z-65", {1, 1, 1}, {1, 1, 65}, 0},
            {"launch-block-2048-threads", {1, 1, 1}, {32, 32, 2}, 0},
            {"launch-block-zero", {1, 1, 1}, {0, 1, 1}, 0},
            {"launch-grid-y-65536", {1, 65536, 1}, {1, 1, 1}, 0},
            {"launch-grid-zero", {0, 1, 1}, {1, 1, 1}, 0},
            {"launch-shmem-48k-plus-1", {1, 1, 1}, {1, 1, 1}, 49153},
            {"launch-shmem-48k", {1, 1, 1}, {1, 1, 1}, 49152},
            {"launch-ok", {1, 1, 1}, {32, 1, 1}, 0},
        };
        for (size_t i = 0; i < sizeof(cfg) / sizeof(cfg[0]); i++)
            report_case(r, cfg[i].name,
                        r->d.launch_kernel(none, cfg[i].g[0], cfg[i].g[1],
                                           cfg[i].g[2], cfg[i].b[0],
                                           cfg[i].b[1], cfg[i].b[2],
                                           cfg[i].shmem, NULL, NULL, NULL));
        CUevent ev = NULL;
        CUstream s = NULL;
        report_case(r, "stream-create",
                    r->d.stream_create(&s, CU_STREAM_NON_BLOCKING));
        report_case(r, "event-create",
                    r->d.event_create(&ev, CU_EVENT_DISABLE_TIMING));
        report_case(r, "event-query-unrecorded", r->d.event_query(ev));
        report_case(
            r, "launch-on-stream",
            r->d.launch_kernel(none, 2, 1, 1, 64, 1, 1, 0, s, NULL, NULL));
        report_case(r, "event-record", r->d.event_record(ev, s));
        report_case(r, "event-synchronize", r->d.event_synchronize(ev));
        report_case(r, "event-query", r->d.event_query(ev));
        report_case(r, "stream-query", r->d.stream_query(s));
        report_case(r, "stream-destroy", r->d.stream_destroy(s));
        report_case(r, "event-destroy", r->d.event_destroy(ev));
    }
    if (some != NULL)
        report_case(
            r, "launch-null-params",
            r->d.launch_kernel(some, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    report_case(r, "ctx-synchronize", r->d.ctx_synchronize());
    for (int i = 0; i < 2; i++)
        if (mods[i] != NULL)
            r->d.module_unload(mods[i]);
}

/* Copies that overrun their allocation: last, since a driver that does not
 * check them could fault the context. */
static void
report_overrun_cases(report *r)
{
    CUdeviceptr p = 0;
    unsigned char host[1024] = {0};
    if (r->d.mem_alloc(&p, 256) != CUDA_SUCCESS)
        return;
    report_case(r, "memcpy-htod-overrun", r->d.memcpy_htod(p, host, 512));
    report_case(r, "memcpy-dtoh-overrun", r->d.memcpy_dtoh(host, p + 128, 256));
    report_case(r, "memset-d8-overrun", r->d.memset_d8(p + 200, 0, 100));
    report_case(r, "memcpy-dtod-overrun", r->d.memcpy_dtod(p, p + 64, 256));
    report_case(r, "ctx-synchronize-after-overruns", r->d.ctx_synchronize());
    r->d.mem_free(p);
}

static int
report_usage(void)
{
    fprintf(
        stderr,
        "usage: cumod_driver_report [--library PATH] [--sorted] "
        "[--attributes]\n"
        "                           [--stale] [--foreign CUBIN]... IMAGE...\n");
    return 2;
}

int
main(int argc, char **argv)
{
    report r = {.sorted = 0};
    const char *library = "libcuda.so.1";
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
    report_image_cases(&r);
    report_handle_cases(&r);
    report_memory_cases(&r);
    report_pool_cases(&r);
    report_launch_cases(&r);
    report_overrun_cases(&r);
    report_stale_cases(&r);

    report_case(&r, "primary-ctx-release", r.d.primary_ctx_release(dev));
    for (int i = 0; i < r.nimages; i++)
        free(r.images[i].bytes);
    for (int i = 0; i < r.nforeign; i++)
        free(r.foreign[i].bytes);
    free(r.images);
    free(r.foreign);
    return 0;
}
