/* SPDX-License-Identifier: MIT */
/*
 * The fake driver's one state, its lock, handle tables, the log and faults.
 */
#include "fake.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * A driver library keeps process state: the program calls cuInit once and
 * then plain functions with no context argument, so there is nowhere else to
 * keep it. This is the one mutable file-scope object of the library; every
 * access holds its lock. The condition variable is set up on first use (it
 * waits on CLOCK_MONOTONIC, which needs an attribute).
 */
static fake_state fake_the_state = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .set_devices = -1,
    .log_fd = -1,
};
static pthread_once_t fake_once = PTHREAD_ONCE_INIT;

/* The current context is per thread in the real driver, so it is here. */
static _Thread_local uintptr_t fake_current_ctx;

static void
fake_state_once(void)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&fake_the_state.cond, &attr);
    pthread_condattr_destroy(&attr);
}

/* What the fake holds goes with it (dlclose, or the process's exit), so
 * that a sanitizer's leak check of the process that used it shows that
 * process's leaks, not the fake's records. Skipped when a thread still
 * holds the lock (it is inside a call: the memory is in use). */
__attribute__((destructor)) static void
fake_state_fini(void)
{
    pthread_once(&fake_once, fake_state_once);
    if (pthread_mutex_trylock(&fake_the_state.lock) != 0)
        return;
    fake_state_clear(&fake_the_state);
    pthread_mutex_unlock(&fake_the_state.lock);
}

fake_state *
fake_lock(void)
{
    pthread_once(&fake_once, fake_state_once);
    pthread_mutex_lock(&fake_the_state.lock);
    return &fake_the_state;
}

void
fake_unlock(fake_state *st)
{
    pthread_mutex_unlock(&st->lock);
}

CUresult
fake_check(fake_state *st)
{
    if (st->sticky != CUDA_SUCCESS)
        return st->sticky;
    return st->initialised ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

CUcontext
fake_current(void)
{
    return (CUcontext)fake_current_ctx;
}

void
fake_set_current(CUcontext ctx)
{
    fake_current_ctx = (uintptr_t)ctx;
}

CUresult
fake_check_ctx(fake_state *st, int *dev)
{
    CUresult rc = fake_check(st);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint32_t gen, slot, sub;
    if (!fake_handle_split(fake_current_ctx, FAKE_TAG_CTX, &gen, &slot, &sub) ||
        slot >= (uint32_t)st->ndevices || st->dev[slot].ctx_refs == 0 ||
        st->dev[slot].ctx_gen != gen)
        return CUDA_ERROR_INVALID_CONTEXT;
    *dev = (int)slot;
    return CUDA_SUCCESS;
}

uintptr_t
fake_handle(fake_tag tag, uint32_t gen, uint32_t slot, uint32_t sub)
{
    return (uintptr_t)tag << 56 | (uintptr_t)(gen & 0xffffff) << 32 |
           (uintptr_t)(slot & 0xffff) << 16 | (sub & 0xffff);
}

int
fake_handle_split(uintptr_t h, fake_tag tag, uint32_t *gen, uint32_t *slot,
                  uint32_t *sub)
{
    if ((h >> 56) != (uintptr_t)tag)
        return 0;
    *gen = (uint32_t)(h >> 32) & 0xffffff;
    *slot = (uint32_t)(h >> 16) & 0xffff;
    *sub = (uint32_t)h & 0xffff;
    return 1;
}

int
fake_grow(void *data, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 8;
    while (n < need)
        n *= 2;
    /* data points to a pointer of some object type: copied in and out as
     * bytes, so no lvalue of the wrong pointer type is used. */
    void *old, *q;
    memcpy(&old, data, sizeof(old));
    if (n > SIZE_MAX / elem || (q = realloc(old, n * elem)) == NULL)
        return -1;
    memset((char *)q + *cap * elem, 0, (n - *cap) * elem);
    memcpy(data, &q, sizeof(q));
    *cap = n;
    return 0;
}

uint32_t
fake_gen_next(fake_state *st)
{
    st->next_gen = (st->next_gen + 1) & 0xffffff;
    if (st->next_gen == 0)
        st->next_gen = 1;
    return st->next_gen;
}

int
fake_table_add(fake_state *st, fake_table *t, void *item, uint32_t *slot,
               uint32_t *gen)
{
    uint32_t i = 0;
    while (i < t->cap && t->items[i] != NULL)
        i++;
    if (i == t->cap) {
        if (t->cap >= FAKE_MAX_SLOTS)
            return -1;
        size_t cap = t->cap, cap2 = t->cap;
        if (fake_grow(&t->items, &cap, cap + 1, sizeof(*t->items)) != 0 ||
            fake_grow(&t->gens, &cap2, cap2 + 1, sizeof(*t->gens)) != 0)
            return -1;
        /* Both grew from the same size by the same rule. */
        t->cap = (uint32_t)(cap < FAKE_MAX_SLOTS ? cap : FAKE_MAX_SLOTS);
    }
    t->items[i] = item;
    t->gens[i] = fake_gen_next(st);
    *slot = i;
    *gen = t->gens[i];
    return 0;
}

void *
fake_table_get(const fake_table *t, uintptr_t h, fake_tag tag, uint32_t *slot)
{
    uint32_t gen, i, sub;
    if (!fake_handle_split(h, tag, &gen, &i, &sub) || i >= t->cap ||
        t->items[i] == NULL || t->gens[i] != gen)
        return NULL;
    if (slot != NULL)
        *slot = i;
    return t->items[i];
}

void
fake_table_del(fake_table *t, uint32_t slot)
{
    if (slot < t->cap)
        t->items[slot] = NULL;
}

void
fake_log(fake_state *st, const char *fmt, ...)
{
    if (st->log_fd < 0)
        return;
    char *line = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    char *full = NULL;
    int m = asprintf(&full, "%s pid=%ld\n", line, (long)getpid());
    free(line);
    if (m < 0)
        return;
    /* One write per line on an O_APPEND descriptor: lines from several
     * processes never interleave, and a reader sees whole lines. */
    ssize_t w;
    do {
        w = write(st->log_fd, full, (size_t)m);
    } while (w < 0 && errno == EINTR);
    free(full);
}

int
fake_fault_add(fake_state *st, fakecuda_fault_kind kind, uint64_t at,
               const char *name, CUresult code)
{
    if (st->nfaults >= FAKE_MAX_FAULTS)
        return -1;
    char *copy = NULL;
    if (name != NULL && (copy = strdup(name)) == NULL)
        return -1;
    st->faults[st->nfaults++] =
        (fake_fault){.kind = kind, .at = at, .name = copy, .code = code};
    return 0;
}

int
fake_fault_fires(fake_state *st, fakecuda_fault_kind kind, uint64_t count,
                 const char *name, CUresult *code)
{
    for (int i = 0; i < st->nfaults; i++) {
        fake_fault *f = &st->faults[i];
        if (f->kind != kind)
            continue;
        if (f->name != NULL) {
            if (name != NULL && strcmp(f->name, name) == 0)
                return 1;
            continue;
        }
        if (f->at != count)
            continue;
        if (code != NULL)
            *code = f->code;
        /* A counted fault fires once: drop it. */
        st->faults[i] = st->faults[--st->nfaults];
        /* and, with CUMOD_FAKE_FAULT_ONCE, in one process only */
        const char *once = getenv("CUMOD_FAKE_FAULT_ONCE");
        if (once != NULL && once[0] != '\0') {
            int fd = open(once, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
            if (fd < 0)
                return 0; /* it fired in another process */
            close(fd);
        }
        return 1;
    }
    return 0;
}

/* What the context still held when it went: a process that gives back
 * what it made leaves nothing (the real driver frees it all silently). */
void
fake_device_log_left(fake_state *st, int dev)
{
    unsigned streams = 0, events = 0, modules = 0, allocs = 0, regs = 0;
    for (uint32_t i = 0; i < st->streams.cap; i++) {
        fake_stream *s = st->streams.items[i];
        streams += s != NULL && s->dev == dev;
    }
    for (uint32_t i = 0; i < st->events.cap; i++) {
        fake_event *e = st->events.items[i];
        events += e != NULL && e->dev == dev;
    }
    for (uint32_t i = 0; i < st->modules.cap; i++) {
        fake_module *m = st->modules.items[i];
        modules += m != NULL && m->dev == dev;
    }
    for (size_t i = 0; i < st->nallocs; i++)
        allocs += st->allocs[i].dev == dev;
    for (size_t i = 0; i < st->nregs; i++)
        regs += st->regs[i].dev == dev;
    fake_log(st,
             "teardown device=%d left streams=%u events=%u modules=%u "
             "allocations=%u registrations=%u",
             dev, streams, events, modules, allocs, regs);
}

void
fake_device_teardown(fake_state *st, int dev)
{
    fake_work_clear(st, dev);
    fake_modules_clear(st, dev);
    fake_memory_clear(st, dev);
    for (uint32_t i = 0; i < st->streams.cap; i++) {
        fake_stream *s = st->streams.items[i];
        if (s != NULL && s->dev == dev) {
            fake_queue_unref(st, s->q);
            free(s);
            fake_table_del(&st->streams, i);
        }
    }
    for (uint32_t i = 0; i < st->events.cap; i++) {
        fake_event *e = st->events.items[i];
        if (e != NULL && e->dev == dev) {
            fake_point_clear(st, &e->at);
            free(e);
            fake_table_del(&st->events, i);
        }
    }
    fake_queue_unref(st, st->dev[dev].legacy);
    st->dev[dev].legacy = NULL;
}

static void
fake_records_clear(fake_state *st)
{
    for (size_t i = 0; i < st->nlaunches; i++) {
        free((char *)st->launches[i].function);
        free((unsigned char *)st->launches[i].params);
    }
    free(st->launches);
    free(st->copies);
    st->launches = NULL;
    st->copies = NULL;
    st->nlaunches = st->cap_launches = st->launch_total = 0;
    st->ncopies = st->cap_copies = st->copy_total = 0;
}

void
fake_state_clear(fake_state *st)
{
    for (int d = 0; d < FAKE_MAX_DEVICES; d++)
        fake_device_teardown(st, d);
    fake_work_clear(st, -1);
    fake_links_clear(st);
    /* What is left is held by waiters, which see the new epoch and leave
     * their refs alone. */
    fake_queues_free_all(st);
    free(st->modules.items);
    free(st->modules.gens);
    free(st->streams.items);
    free(st->streams.gens);
    free(st->events.items);
    free(st->events.gens);
    free(st->links.items);
    free(st->links.gens);
    free(st->allocs);
    free(st->regs);
    for (int i = 0; i < st->nfaults; i++)
        free(st->faults[i].name);
    fake_records_clear(st);
    fake_hold_fini(&st->hold);
    if (st->log_fd >= 0)
        close(st->log_fd);

    /* Keep what must survive: the lock, the condition, the generation
     * counter (so old handles stay stale) and the epoch. */
    uint32_t next_gen = st->next_gen;
    uint64_t epoch = st->epoch + 1;
    size_t off = offsetof(fake_state, set_sm);
    memset((char *)st + off, 0, sizeof(*st) - off);
    st->next_gen = next_gen;
    st->epoch = epoch;
    st->set_devices = -1;
    st->log_fd = -1;
}
