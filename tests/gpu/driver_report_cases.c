/* SPDX-License-Identifier: MIT */
/*
 * cumod_driver_report's fixed list of cases (see driver_report.c): what a
 * driver answers for malformed images, handles past their use, memory,
 * the stream-ordered allocator, launches outside the limits and copies
 * that overrun. Each prints "case NAME RESULT".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver_report.h"

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

void
report_cases(report *r)
{
    report_image_cases(r);
    report_handle_cases(r);
    report_memory_cases(r);
    report_pool_cases(r);
    report_launch_cases(r);
    report_overrun_cases(r);
    report_stale_cases(r);
}
