/* SPDX-License-Identifier: MIT */
/*
 * Pinned host buffers for inline reads (ReadBuffer). A copy from the device
 * into pageable memory returns only when it is done, so cuMemcpyDtoHAsync
 * into a malloc'ed buffer would hold the submission thread until the
 * session's stream reached it: 199 ms behind a 200 ms kernel on an H100
 * (bench/bench_threads.c), with every other session waiting. Into pinned
 * memory the copy is asynchronous and stays in the stream's order.
 *
 * The buffers are made at start, while the device is idle, since making
 * pinned memory later can hold launches (as registering does); a read that
 * finds no free buffer of its size class (or is larger than the largest)
 * falls back to pageable memory, and the log says so.
 */
#include <pthread.h>
#include <stdlib.h>

#include "common/log.h"
#include "pinned.h"

/* Size classes: count x size. 2 + 8 + 16 MiB of pinned memory. */
static const struct {
    size_t size;
    unsigned count;
} pinned_classes[] = {
    {64u << 10, 32},
    {1u << 20, 8},
    {16u << 20, 1},
};
#define PINNED_NCLASSES (sizeof(pinned_classes) / sizeof(pinned_classes[0]))

struct cumod_exec_pinned {
    /* The submission thread takes, the completion thread gives back. A
     * leaf lock; no driver call under it. */
    pthread_mutex_t mtx;
    void **free[PINNED_NCLASSES];
    unsigned nfree[PINNED_NCLASSES];
    void **all;           /* every buffer made */
    unsigned char *class; /* and its size class */
    unsigned nall;
    int warned;
};

cumod_err
cumod__exec_pinned_start(cumod_exec *ex)
{
    struct cumod_exec_pinned *pp = calloc(1, sizeof(*pp));
    unsigned total = 0;

    if (pp == NULL)
        return CUMOD_ENOMEM;
    for (size_t c = 0; c < PINNED_NCLASSES; c++)
        total += pinned_classes[c].count;
    if ((pp->all = calloc(total, sizeof(void *))) == NULL ||
        (pp->class = calloc(total, 1)) == NULL) {
        free(pp->all);
        free(pp);
        return CUMOD_ENOMEM;
    }
    pthread_mutex_init(&pp->mtx, NULL);
    for (size_t c = 0; c < PINNED_NCLASSES; c++) {
        pp->free[c] = calloc(pinned_classes[c].count, sizeof(void *));
        for (unsigned i = 0; pp->free[c] && i < pinned_classes[c].count; i++) {
            void *b;
            if (ex->drv.mem_host_alloc(&b, pinned_classes[c].size, 0) !=
                CUDA_SUCCESS)
                break;
            pp->class[pp->nall] = (unsigned char)c;
            pp->all[pp->nall++] = b;
            pp->free[c][pp->nfree[c]++] = b;
        }
    }
    ex->pinned = pp;
    return CUMOD_OK;
}

void
cumod__exec_pinned_stop(cumod_exec *ex)
{
    struct cumod_exec_pinned *pp = ex->pinned;
    if (pp == NULL)
        return;
    for (unsigned i = 0; i < pp->nall; i++)
        (void)ex->drv.mem_free_host(pp->all[i]);
    for (size_t c = 0; c < PINNED_NCLASSES; c++)
        free(pp->free[c]);
    free(pp->all);
    free(pp->class);
    pthread_mutex_destroy(&pp->mtx);
    free(pp);
    ex->pinned = NULL;
}

void *
cumod__exec_pinned_get(cumod_exec *ex, size_t len)
{
    struct cumod_exec_pinned *pp = ex->pinned;
    void *b = NULL;

    pthread_mutex_lock(&pp->mtx);
    for (size_t c = 0; c < PINNED_NCLASSES && b == NULL; c++)
        if (len <= pinned_classes[c].size && pp->nfree[c] > 0)
            b = pp->free[c][--pp->nfree[c]];
    int warn = b == NULL && !pp->warned;
    pp->warned |= warn;
    pthread_mutex_unlock(&pp->mtx);
    if (warn)
        CUMOD_LOGI("CUMOD-EXEC-PINNED",
                   "a %zu-byte read found no free pinned buffer: it waits "
                   "for its stream on the submission thread (reads over 16 "
                   "MiB always do; bulk data belongs in a segment)",
                   len);
    return b;
}

int
cumod__exec_pinned_put(cumod_exec *ex, void *b)
{
    struct cumod_exec_pinned *pp = ex->pinned;
    int mine = 0;

    if (b == NULL)
        return 0;
    pthread_mutex_lock(&pp->mtx);
    for (unsigned i = 0; i < pp->nall && !mine; i++)
        if (pp->all[i] == b) {
            unsigned c = pp->class[i];
            pp->free[c][pp->nfree[c]++] = b;
            mine = 1;
        }
    pthread_mutex_unlock(&pp->mtx);
    return mine;
}
