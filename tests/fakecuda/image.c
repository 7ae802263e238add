/* SPDX-License-Identifier: MIT */
/*
 * Module images: from the caller's pointer to a parsed fake_image.
 *
 * cuModuleLoadData takes a pointer and no length; the driver learns the
 * extent from the image's own headers (an ELF's section table, a fatbin's
 * size field, a PTX text's NUL). The fake does the same, but it never trusts
 * the pointer: it copies through process_vm_readv, which reports unreadable
 * memory instead of faulting, so a truncated or corrupt image in a short
 * buffer is an error code, not a crash. The parsers then work on the copy
 * with its exact length.
 */
#include "fake.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

enum {
    IMAGE_PAGE = 4096,
    IMAGE_MAX = 256 << 20, /* larger claims are corrupt, not read */
};

/* What the real driver writes to the error log for an unknown format. */
const char fake_unknown_format_log[] =
    "error   : Binary format for key='0', ident='' is not recognized";

/* Copies n bytes from src; returns how many leading bytes were readable.
 * Reads go page by page, so a short count is exact to the page. Where the
 * system forbids process_vm_readv (some seccomp profiles), it trusts the
 * caller and copies directly. */
static size_t
image_read(void *dst, const void *src, size_t n)
{
    size_t done = 0;
    while (done < n) {
        uintptr_t at = (uintptr_t)src + done;
        size_t chunk = IMAGE_PAGE - (at % IMAGE_PAGE);
        if (chunk > n - done)
            chunk = n - done;
        /* Whole pages at once where possible: fewer system calls. */
        if (chunk == IMAGE_PAGE && n - done >= IMAGE_PAGE)
            chunk = (n - done) / IMAGE_PAGE * IMAGE_PAGE;
        struct iovec local = {(char *)dst + done, chunk};
        struct iovec remote = {(void *)at, chunk};
        ssize_t r = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
        if (r < 0 && (errno == ENOSYS || errno == EPERM)) {
            memcpy((char *)dst + done, (const void *)at, chunk);
            r = (ssize_t)chunk;
        }
        if (r <= 0)
            break;
        done += (size_t)r;
        if ((size_t)r < chunk)
            break;
    }
    return done;
}

static uint32_t
image_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static uint64_t
image_le64(const uint8_t *p)
{
    return (uint64_t)image_le32(p) | (uint64_t)image_le32(p + 4) << 32;
}

/* max(*end, off + len), or -1 past IMAGE_MAX. */
static int
image_extend(uint64_t *end, uint64_t off, uint64_t len)
{
    if (off > IMAGE_MAX || len > IMAGE_MAX - off)
        return -1;
    if (off + len > *end)
        *end = off + len;
    return 0;
}

/* Copies [0, len) of image into a new buffer, or NULL if not all readable. */
static uint8_t *
image_copy(const void *image, uint64_t len)
{
    uint8_t *buf = malloc(len ? (size_t)len : 1);
    if (buf != NULL && image_read(buf, image, (size_t)len) != len) {
        free(buf);
        buf = NULL;
    }
    return buf;
}

/* An ELF's extent: its header, section table and every section's bytes. */
static int
image_elf_extent(const void *image, const uint8_t *eh, uint64_t *end)
{
    uint64_t shoff = image_le64(eh + 40), phoff = image_le64(eh + 32);
    uint32_t shent = eh[58] | (uint32_t)eh[59] << 8,
             shnum = eh[60] | (uint32_t)eh[61] << 8;
    uint32_t phent = eh[54] | (uint32_t)eh[55] << 8,
             phnum = eh[56] | (uint32_t)eh[57] << 8;
    *end = 64;
    if (shent != 64 || image_extend(end, shoff, 64) != 0 ||
        image_extend(end, phoff, (uint64_t)phent * phnum) != 0)
        return -1;
    uint8_t sh[64];
    if (shnum == 0) { /* more than 0xff00 sections: the count is in section 0 */
        if (image_read(sh, (const char *)image + shoff, 64) != 64)
            return -1;
        uint64_t n = image_le64(sh + 32);
        shnum = n > 0xffffff ? 0xffffff : (uint32_t)n;
    }
    if (image_extend(end, shoff, (uint64_t)shnum * 64) != 0)
        return -1;
    uint8_t *table =
        image_copy((const char *)image + shoff, (uint64_t)shnum * 64);
    if (table == NULL)
        return -1;
    int rc = 0;
    for (uint32_t i = 0; i < shnum && rc == 0; i++) {
        const uint8_t *s = table + (size_t)i * 64;
        if (image_le32(s + 4) != 8 /* SHT_NOBITS */)
            rc = image_extend(end, image_le64(s + 24), image_le64(s + 32));
    }
    free(table);
    return rc;
}

CUresult
fake_text_copy(const void *image, size_t max, char **out, size_t *out_len)
{
    /* Read up to the NUL, page by page; unreadable memory ends the text. */
    size_t cap = 0, len = 0;
    char *text = NULL;
    if (max == 0 || max > IMAGE_MAX)
        max = IMAGE_MAX;
    for (;;) {
        if (fake_grow(&text, &cap, len + IMAGE_PAGE + 1, 1) != 0) {
            free(text);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        size_t want = IMAGE_PAGE - ((uintptr_t)image + len) % IMAGE_PAGE;
        if (want > max - len)
            want = max - len;
        size_t got = image_read(text + len, (const char *)image + len, want);
        char *nul = memchr(text + len, '\0', got);
        if (nul != NULL) {
            len = (size_t)(nul - text);
            break;
        }
        len += got;
        if (got < want || len >= max)
            break;
    }
    text[len] = '\0';
    *out = text;
    *out_len = len;
    return CUDA_SUCCESS;
}

static CUresult
image_text(const void *image, int sm, fake_image *img, fake_jitlog *log)
{
    char *text;
    size_t len;
    CUresult rc = fake_text_copy(image, 0, &text, &len);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = fake_ptx_parse(text, len, sm, img, log);
    free(text);
    return rc;
}

CUresult
fake_image_load(const void *image, int sm, fake_image *img, fake_jitlog *log)
{
    uint8_t head[64];
    size_t got = image_read(head, image, sizeof(head));
    uint64_t end = 0;
    uint8_t *copy = NULL;
    CUresult rc;

    if (got >= 4 && memcmp(head, "\177ELF", 4) == 0) {
        int arch_specific;
        rc = CUDA_ERROR_INVALID_IMAGE;
        if (fake_cubin_sm(head, got, &arch_specific) < 0) {
            fake_jitlog_printf(log, 1, "%s", fake_unknown_format_log);
            goto fail;
        }
        if (image_elf_extent(image, head, &end) != 0 ||
            (copy = image_copy(image, end)) == NULL) {
            fake_jitlog_printf(log, 1,
                               "fakecuda: the cubin's sections reach past the "
                               "readable image (truncated?)");
            goto fail;
        }
        rc = fake_cubin_parse(copy, (size_t)end, sm, img, log);
    } else if (got >= 16 && image_le32(head) == 0xba55ed50u) {
        rc = CUDA_ERROR_INVALID_IMAGE;
        uint32_t hsize = head[6] | (uint32_t)head[7] << 8;
        if (image_extend(&end, hsize, image_le64(head + 8)) != 0 ||
            (copy = image_copy(image, end)) == NULL) {
            fake_jitlog_printf(log, 1,
                               "fakecuda: the fatbin reaches past the readable "
                               "image (truncated?)");
            goto fail;
        }
        rc = fake_fatbin_parse(copy, (size_t)end, sm, img, log);
    } else if (fake_link_image_size(head, got, &end)) {
        rc = CUDA_ERROR_INVALID_IMAGE;
        if (end > IMAGE_MAX || (copy = image_copy(image, end)) == NULL) {
            fake_jitlog_printf(log, 1,
                               "fakecuda: the linked image reaches past the "
                               "readable image (truncated?)");
            goto fail;
        }
        rc = fake_link_image_parse(copy, (size_t)end, sm, img, log);
    } else {
        rc = image_text(image, sm, img, log);
    }
    free(copy); /* the parsed image keeps nothing of it */
    return rc;
fail:
    free(copy);
    return rc;
}

/* Reads the options of cuModuleLoadDataEx or cuLinkCreate; the size slots
 * are written back (how much of each log was filled) by fake_jit_done. */
CUresult
fake_jit_options(fake_jitlog *log, unsigned n, const CUjit_option *opts,
                 void **vals)
{
    if (n > 0 && (opts == NULL || vals == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n; i++) {
        uintptr_t v = (uintptr_t)vals[i];
        switch (opts[i]) {
        case CU_JIT_INFO_LOG_BUFFER:
            log->buf[0] = vals[i];
            break;
        case CU_JIT_ERROR_LOG_BUFFER:
            log->buf[1] = vals[i];
            break;
        case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
            log->cap[0] = (unsigned)v;
            break;
        case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
            log->cap[1] = (unsigned)v;
            break;
        case CU_JIT_LOG_VERBOSE:
            log->verbose = (int)v;
            break;
        case CU_JIT_OPTIMIZATION_LEVEL:
            log->jit[0] = (int)v + 1;
            break;
        case CU_JIT_MAX_REGISTERS:
            log->jit[1] = (int)v + 1;
            break;
        case CU_JIT_GENERATE_LINE_INFO:
            log->jit[2] = (int)v + 1;
            break;
        case CU_JIT_FAST_COMPILE:
            log->jit[3] = (int)v + 1;
            break;
        default:
            if ((unsigned)opts[i] >= CU_JIT_NUM_OPTIONS)
                return CUDA_ERROR_INVALID_VALUE;
        }
    }
    for (int i = 0; i < 2; i++)
        if (log->buf[i] != NULL && log->cap[i] > 0)
            log->buf[i][0] = '\0';
    return CUDA_SUCCESS;
}

void
fake_jit_report(fake_jitlog *log)
{
    static const char *const names[4] = {
        "CU_JIT_OPTIMIZATION_LEVEL", "CU_JIT_MAX_REGISTERS",
        "CU_JIT_GENERATE_LINE_INFO", "CU_JIT_FAST_COMPILE"};
    char line[256];
    size_t at = 0;
    for (int i = 0; i < 4; i++)
        if (log->jit[i] > 0)
            at += (size_t)snprintf(line + at, sizeof(line) - at, " %s=%d",
                                   names[i], log->jit[i] - 1);
    if (at > 0)
        fake_jitlog_printf(log, 0, "fakecuda: JIT options:%s", line);
}

void
fake_jit_done(const fake_jitlog *log, unsigned n, const CUjit_option *opts,
              void **vals)
{
    for (unsigned i = 0; i < n; i++) {
        if (opts[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES && log->buf[0] != NULL)
            vals[i] = (void *)(uintptr_t)(log->len[0] + (log->len[0] > 0));
        else if (opts[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES &&
                 log->buf[1] != NULL)
            vals[i] = (void *)(uintptr_t)(log->len[1] + (log->len[1] > 0));
    }
}

void
fake_jitlog_printf(fake_jitlog *log, int error, const char *fmt, ...)
{
    if (log == NULL)
        return;
    int i = error ? 1 : 0;
    if (log->buf[i] == NULL || log->cap[i] == 0)
        return;
    size_t room = log->cap[i] - log->len[i];
    if (room <= 1)
        return;
    char *at = log->buf[i] + log->len[i];
    size_t used = 0;
    if (log->len[i] > 0) { /* messages are lines: join with '\n' */
        *at++ = '\n';
        room--;
        used = 1;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(at, room, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    used += (size_t)n < room ? (size_t)n : room - 1;
    log->len[i] += used;
}

int
fake_sm_compatible(int image_sm, int arch_specific, int device_sm)
{
    if (arch_specific)
        return image_sm == device_sm;
    return image_sm / 10 == device_sm / 10 && image_sm % 10 <= device_sm % 10;
}

fake_kernel *
fake_image_add_kernel(fake_image *img, const char *name, size_t len)
{
    uint32_t n = img->nkernels;
    if (n >= FAKE_MAX_KERNELS || len == 0)
        return NULL;
    /* Capacity doubles at each power of two: no separate field needed. */
    if (n == 0 || (n >= 8 && (n & (n - 1)) == 0)) {
        size_t cap = n < 8 ? 8 : (size_t)n * 2;
        fake_kernel *k = realloc(img->kernels, cap * sizeof(*k));
        if (k == NULL)
            return NULL;
        img->kernels = k;
    }
    fake_kernel *k = &img->kernels[n];
    memset(k, 0, sizeof(*k));
    if ((k->name = strndup(name, len)) == NULL)
        return NULL;
    k->max_threads = 1024;
    img->nkernels = n + 1;
    return k;
}

void
fake_image_fini(fake_image *img)
{
    for (uint32_t i = 0; i < img->nkernels; i++) {
        free(img->kernels[i].name);
        free(img->kernels[i].params);
    }
    free(img->kernels);
    for (uint32_t i = 0; i < img->nglobals; i++) {
        free(img->globals[i].name);
        free(img->globals[i].init);
    }
    free(img->globals);
    memset(img, 0, sizeof(*img));
}
