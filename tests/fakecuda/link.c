/* SPDX-License-Identifier: MIT */
/*
 * The JIT linker: cuLinkCreate, cuLinkAddData, cuLinkComplete and
 * cuLinkDestroy, for PTX inputs.
 *
 * cuLinkAddData checks a PTX input as cuModuleLoadDataEx checks PTX (the
 * same parser, codes and log lines, into cuLinkCreate's log buffers) and
 * keeps its text. cuLinkComplete does not make a cubin: its image is the
 * fake's own container of those texts, which fake_image_load recognises, so
 * cuModuleLoadData of it parses them again and gives the same functions and
 * parameter layouts as the PTX would (kind "ptx" in the log). Other input
 * types answer CUDA_ERROR_NOT_SUPPORTED: a limit of the fake.
 *
 * The image: "fakecuda-linked\0", its whole size (u64), the input count
 * (u32) and the register cap the JIT was given (u32, 0: none); then per input
 * its length (u64) and its text with a NUL. Integers are little-endian.
 */
#include "fake.h"

#include <stdlib.h>
#include <string.h>

static const char link_magic[16] = "fakecuda-linked";

enum { LINK_HEADER = 32 };

static void
link_put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t
link_get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

int
fake_link_image_size(const uint8_t *head, size_t n, uint64_t *size)
{
    if (n < LINK_HEADER || memcmp(head, link_magic, sizeof(link_magic)) != 0)
        return 0;
    *size = link_get64(head + 16);
    if (*size < LINK_HEADER)
        *size = LINK_HEADER;
    return 1;
}

/* Moves src's kernels to the end of dst; src is left empty. Fails with
 * CUDA_ERROR_INVALID_IMAGE when a name is in both (logged as nvlink
 * would), or on OOM. */
static CUresult
link_merge(fake_image *dst, fake_image *src, fake_jitlog *log)
{
    CUresult rc = CUDA_SUCCESS;
    for (uint32_t i = 0; i < src->nkernels && rc == CUDA_SUCCESS; i++) {
        fake_kernel *from = &src->kernels[i];
        for (uint32_t j = 0; j < dst->nkernels; j++)
            if (strcmp(dst->kernels[j].name, from->name) == 0) {
                fake_jitlog_printf(log, 1,
                                   "nvlink error   : Multiple definition of "
                                   "'%s'",
                                   from->name);
                rc = CUDA_ERROR_INVALID_IMAGE;
            }
        fake_kernel *k = NULL;
        if (rc == CUDA_SUCCESS &&
            (k = fake_image_add_kernel(dst, from->name, strlen(from->name))) ==
                NULL)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        if (rc == CUDA_SUCCESS) {
            char *name = k->name;
            *k = *from;
            k->name = name;
            from->params = NULL; /* now dst's */
        }
    }
    fake_image_fini(src);
    return rc;
}

/* Parses texts[0..n) into one image. */
static CUresult
link_parse(char *const *texts, const size_t *lens, uint32_t n, int sm,
           fake_image *img, fake_jitlog *log)
{
    memset(img, 0, sizeof(*img));
    CUresult rc = CUDA_SUCCESS;
    for (uint32_t i = 0; i < n && rc == CUDA_SUCCESS; i++) {
        fake_image one;
        rc = fake_ptx_parse(texts[i], lens[i], sm, &one, log);
        if (rc == CUDA_SUCCESS && i == 0)
            img->ptx_version = one.ptx_version;
        if (rc == CUDA_SUCCESS)
            rc = link_merge(img, &one, log);
    }
    img->kind = FAKE_IMAGE_PTX;
    img->sm = sm;
    if (rc != CUDA_SUCCESS)
        fake_image_fini(img);
    return rc;
}

CUresult
fake_link_image_parse(const uint8_t *p, size_t n, int sm, fake_image *img,
                      fake_jitlog *log)
{
    uint64_t count = n >= LINK_HEADER
                         ? p[24] | (uint64_t)p[25] << 8 |
                               (uint64_t)p[26] << 16 | (uint64_t)p[27] << 24
                         : 0;
    /* Each input takes 9 bytes at least: more is a corrupt count; and
     * cuLinkComplete never makes an image without inputs. */
    if (count == 0 || count > (n - LINK_HEADER) / 9) {
        fake_jitlog_printf(log, 1, "fakecuda: a corrupt linked image");
        return CUDA_ERROR_INVALID_IMAGE;
    }
    char **texts = calloc(count, sizeof(*texts));
    size_t *lens = calloc(count, sizeof(*lens));
    CUresult rc =
        texts != NULL && lens != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    size_t at = LINK_HEADER;
    for (uint64_t i = 0; i < count && rc == CUDA_SUCCESS; i++) {
        uint64_t len = n - at >= 8 ? link_get64(p + at) : UINT64_MAX;
        /* The text and its NUL must lie inside the image. */
        if (len >= n - at - 8 || p[at + 8 + len] != '\0') {
            fake_jitlog_printf(log, 1, "fakecuda: a corrupt linked image");
            rc = CUDA_ERROR_INVALID_IMAGE;
            break;
        }
        texts[i] = (char *)(p + at + 8);          /* read only */
        lens[i] = strnlen(texts[i], (size_t)len); /* a NUL ends the text */
        at += 8 + (size_t)len + 1;
    }
    /* The inputs fill the image exactly. */
    if (rc == CUDA_SUCCESS && at != n) {
        fake_jitlog_printf(log, 1, "fakecuda: a corrupt linked image");
        rc = CUDA_ERROR_INVALID_IMAGE;
    }
    if (rc == CUDA_SUCCESS)
        rc = link_parse(texts, lens, (uint32_t)count, sm, img, log);
    int cap = p[28] | p[29] << 8 | p[30] << 16 | (p[31] & 0x7f) << 24;
    for (uint32_t i = 0; rc == CUDA_SUCCESS && cap > 0 && i < img->nkernels;
         i++)
        if (img->kernels[i].num_regs > cap)
            img->kernels[i].num_regs = cap;
    free(texts);
    free(lens);
    return rc;
}

static void
link_free(fake_link *l)
{
    if (l == NULL)
        return;
    for (uint32_t i = 0; i < l->ntexts; i++)
        free(l->texts[i]);
    free(l->texts);
    free(l->lens);
    free(l->opts);
    free(l->image);
    free(l);
}

void
fake_links_clear(fake_state *st)
{
    for (uint32_t i = 0; i < st->links.cap; i++) {
        link_free(st->links.items[i]);
        fake_table_del(&st->links, i);
    }
}

static CUresult
link_get(fake_state *st, CUlinkState h, fake_link **l, uint32_t *slot)
{
    CUresult rc = fake_check(st);
    if (rc == CUDA_SUCCESS &&
        (*l = fake_table_get(&st->links, (uintptr_t)h, FAKE_TAG_LINK, slot)) ==
            NULL)
        rc = CUDA_ERROR_INVALID_HANDLE;
    return rc;
}

CUresult CUDAAPI
cuLinkCreate(unsigned int numOptions, CUjit_option *options,
             void **optionValues, CUlinkState *stateOut)
{
    fake_state *st = fake_lock();
    int dev;
    uint32_t slot, gen;
    fake_link *l = NULL;
    CUresult rc = fake_check_ctx(st, &dev);
    if (rc == CUDA_SUCCESS && stateOut == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && (l = calloc(1, sizeof(*l))) == NULL)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    /* Any known option is accepted (the optimisation level, the info log,
     * verbosity...); the log buffers are filled across the later calls. */
    if (rc == CUDA_SUCCESS)
        rc = fake_jit_options(&l->log, numOptions, options, optionValues);
    if (rc == CUDA_SUCCESS && numOptions > 0 &&
        (l->opts = malloc(numOptions * sizeof(*l->opts))) == NULL)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS && fake_table_add(st, &st->links, l, &slot, &gen))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS) {
        /* The values must stay valid while the state lives (cuda.h): the
         * log sizes are written back there; the options are copied. */
        if (numOptions > 0)
            memcpy(l->opts, options, numOptions * sizeof(*l->opts));
        l->nopts = numOptions;
        l->vals = optionValues;
        *stateOut = (CUlinkState)fake_handle(FAKE_TAG_LINK, gen, slot, 0);
        l = NULL;
    }
    link_free(l);
    fake_unlock(st);
    return rc;
}

/* Room for one more input; 0 or -1. */
static int
link_room(fake_link *l)
{
    char **texts = realloc(l->texts, (l->ntexts + 1) * sizeof(*texts));
    if (texts == NULL)
        return -1;
    l->texts = texts;
    size_t *lens = realloc(l->lens, (l->ntexts + 1) * sizeof(*lens));
    if (lens == NULL)
        return -1;
    l->lens = lens;
    return 0;
}

/* cuLinkAddData's own options: compiler options only (cuda.h). */
static CUresult
link_input_options(unsigned n, const CUjit_option *opts, void **vals,
                   int *verbose)
{
    if (n > 0 && (opts == NULL || vals == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n; i++) {
        switch (opts[i]) {
        case CU_JIT_WALL_TIME:
        case CU_JIT_INFO_LOG_BUFFER:
        case CU_JIT_ERROR_LOG_BUFFER:
        case CU_JIT_TARGET_FROM_CUCONTEXT:
        case CU_JIT_TARGET:
            return CUDA_ERROR_INVALID_VALUE;
        case CU_JIT_LOG_VERBOSE:
            *verbose = (int)(uintptr_t)vals[i];
            break;
        default:
            if ((unsigned)opts[i] >= CU_JIT_NUM_OPTIONS)
                return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuLinkAddData(CUlinkState state, CUjitInputType type, void *data, size_t size,
              const char *name, unsigned int numOptions, CUjit_option *options,
              void **optionValues)
{
    fake_state *st = fake_lock();
    fake_link *l = NULL;
    char *text = NULL;
    size_t len = 0;
    fake_image img;
    CUresult rc = link_get(st, state, &l, NULL);
    int verbose = rc == CUDA_SUCCESS ? l->log.verbose : 0;
    if (rc == CUDA_SUCCESS &&
        (data == NULL || (unsigned)type >= CU_JIT_NUM_INPUT_TYPES))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        rc = link_input_options(numOptions, options, optionValues, &verbose);
    /* The fake's choice: a completed link takes no more inputs. */
    if (rc == CUDA_SUCCESS && l->image != NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && type != CU_JIT_INPUT_PTX)
        rc = CUDA_ERROR_NOT_SUPPORTED;
    /* PTX is NUL-terminated; size bounds the read where it is given. */
    if (rc == CUDA_SUCCESS)
        rc = fake_text_copy(data, size, &text, &len);
    if (rc == CUDA_SUCCESS && link_room(l) != 0)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS) {
        int saved = l->log.verbose;
        l->log.verbose = verbose;
        rc = fake_ptx_parse(text, len, st->sm, &img, &l->log);
        l->log.verbose = saved;
    }
    if (rc == CUDA_SUCCESS) {
        fake_image_fini(&img); /* parsed again at load */
        l->texts[l->ntexts] = text;
        l->lens[l->ntexts++] = len;
        text = NULL;
    }
    if (l != NULL)
        fake_jit_done(&l->log, l->nopts, l->opts, l->vals);
    free(text);
    (void)name; /* ptxas names the input in its log; the fake does not */
    fake_unlock(st);
    return rc;
}

/* The container of l's texts (see the top of this file). */
static CUresult
link_build(fake_link *l)
{
    size_t size = LINK_HEADER;
    for (uint32_t i = 0; i < l->ntexts; i++)
        size += 8 + l->lens[i] + 1;
    unsigned char *p = calloc(1, size), *at;
    if (p == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(p, link_magic, sizeof(link_magic));
    link_put64(p + 16, size);
    for (int i = 0; i < 4; i++)
        p[24 + i] = (unsigned char)(l->ntexts >> (8 * i));
    /* The register cap the JIT was given (0: none), which the fake applies
     * to the kernels when the image is loaded. */
    unsigned cap = l->log.jit[1] > 0 ? (unsigned)(l->log.jit[1] - 1) : 0;
    for (int i = 0; i < 4; i++)
        p[28 + i] = (unsigned char)(cap >> (8 * i));
    at = p + LINK_HEADER;
    for (uint32_t i = 0; i < l->ntexts; i++) {
        link_put64(at, l->lens[i]);
        memcpy(at + 8, l->texts[i], l->lens[i] + 1);
        at += 8 + l->lens[i] + 1;
    }
    l->image = p;
    l->image_size = size;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
    fake_state *st = fake_lock();
    fake_link *l = NULL;
    fake_image img;
    CUresult rc = link_get(st, state, &l, NULL);
    if (rc == CUDA_SUCCESS && cubinOut == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        /* The lock is released while held: look the state up again. */
        fake_load_hold_wait(st, "cuLinkComplete");
        l = NULL;
        rc = link_get(st, state, &l, NULL);
    }
    /* The fake's choice: nothing to link is a bad value. */
    if (rc == CUDA_SUCCESS && l->ntexts == 0)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && l->image == NULL) {
        rc = link_parse(l->texts, l->lens, l->ntexts, st->sm, &img, &l->log);
        if (rc == CUDA_SUCCESS) {
            fake_image_fini(&img);
            rc = link_build(l);
        }
        if (rc == CUDA_SUCCESS)
            fake_jit_report(&l->log);
    }
    if (rc == CUDA_SUCCESS) {
        fake_log(st, "link inputs=%u size=%zu", l->ntexts, l->image_size);
        *cubinOut = l->image;
        if (sizeOut != NULL)
            *sizeOut = l->image_size;
    }
    if (l != NULL)
        fake_jit_done(&l->log, l->nopts, l->opts, l->vals);
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuLinkDestroy(CUlinkState state)
{
    fake_state *st = fake_lock();
    fake_link *l = NULL;
    uint32_t slot;
    CUresult rc = link_get(st, state, &l, &slot);
    if (rc == CUDA_SUCCESS) {
        fake_table_del(&st->links, slot);
        link_free(l);
    }
    fake_unlock(st);
    return rc;
}
