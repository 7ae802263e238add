/* SPDX-License-Identifier: MIT */
#include "shmguard.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Slots a chunk holds; chunks are linked as needed and never freed, so
 * the handler never reads freed memory. A front holds one range a ring, an
 * executor one a segment. */
#define GUARD_SLOTS 128

struct cumod_shm_range {
    _Atomic uintptr_t start; /* 0: free (set last on add, first on remove) */
    _Atomic size_t len;
    atomic_int bad;
    int used; /* under guard_lock */
};

typedef struct guard_chunk {
    struct guard_chunk *_Atomic next;
    cumod_shm_range slot[GUARD_SLOTS];
} guard_chunk;

/* The process-wide state (see the header for why it is global). */
static guard_chunk guard_first;
static pthread_mutex_t guard_lock = PTHREAD_MUTEX_INITIALIZER;
static int guard_installed; /* under guard_lock */
static struct sigaction guard_prev;
static atomic_uint_fast64_t guard_faults;

/* Not ours: the handler that was there before, or the default action (the
 * signal is blocked in here, so the raised one comes after the return,
 * under SIG_DFL, and ends the process as an unhandled SIGBUS would). */
static void
shmguard_pass_on(int sig, siginfo_t *si, void *ctx)
{
    if ((guard_prev.sa_flags & SA_SIGINFO) && guard_prev.sa_sigaction != NULL) {
        guard_prev.sa_sigaction(sig, si, ctx);
        return;
    }
    if (guard_prev.sa_handler != SIG_DFL && guard_prev.sa_handler != SIG_IGN) {
        guard_prev.sa_handler(sig);
        return;
    }
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGBUS, &dfl, NULL);
    raise(SIGBUS);
}

/* Signal context: atomic loads, mmap and sigaction only. */
static void
shmguard_on_sigbus(int sig, siginfo_t *si, void *ctx)
{
    int saved = errno;
    uintptr_t a = (uintptr_t)si->si_addr;

    for (guard_chunk *c = &guard_first; c != NULL;
         c = atomic_load_explicit(&c->next, memory_order_acquire)) {
        for (int i = 0; i < GUARD_SLOTS; i++) {
            cumod_shm_range *r = &c->slot[i];
            uintptr_t start =
                atomic_load_explicit(&r->start, memory_order_acquire);
            size_t len = atomic_load_explicit(&r->len, memory_order_relaxed);
            if (start == 0 || a < start || a - start >= len)
                continue;
            /* The whole range, as Wayland does: one fault says the client
             * changed the memory, and reads of it mean nothing since. */
            void *m = mmap((void *)start, len, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
            if (m == MAP_FAILED)
                break;
            atomic_store_explicit(&r->bad, 1, memory_order_release);
            atomic_fetch_add_explicit(&guard_faults, 1, memory_order_relaxed);
            errno = saved;
            return;
        }
    }
    errno = saved;
    shmguard_pass_on(sig, si, ctx);
}

static cumod_err
shmguard_install_locked(void)
{
    struct sigaction sa;

    if (guard_installed)
        return CUMOD_OK;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = shmguard_on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &guard_prev) != 0)
        return CUMOD_EIO;
    guard_installed = 1;
    return CUMOD_OK;
}

cumod_err
cumod__shmguard_install(void)
{
    pthread_mutex_lock(&guard_lock);
    cumod_err rv = shmguard_install_locked();
    pthread_mutex_unlock(&guard_lock);
    return rv;
}

cumod_err
cumod__shmguard_add(void *p, size_t len, cumod_shm_range **out)
{
    cumod_shm_range *r = NULL;
    guard_chunk *c = &guard_first, *last = NULL;
    cumod_err rv;

    if (p == NULL || len == 0)
        return CUMOD_EINVAL;
    pthread_mutex_lock(&guard_lock);
    if ((rv = shmguard_install_locked()) != CUMOD_OK)
        goto done;
    for (; c != NULL && r == NULL;
         c = atomic_load_explicit(&c->next, memory_order_acquire)) {
        last = c;
        for (int i = 0; i < GUARD_SLOTS && r == NULL; i++)
            if (!c->slot[i].used)
                r = &c->slot[i];
    }
    if (r == NULL) {
        guard_chunk *n = calloc(1, sizeof(*n));
        if (n == NULL) {
            rv = CUMOD_ENOMEM;
            goto done;
        }
        atomic_store_explicit(&last->next, n, memory_order_release);
        r = &n->slot[0];
    }
    r->used = 1;
    atomic_store_explicit(&r->bad, 0, memory_order_relaxed);
    atomic_store_explicit(&r->len, len, memory_order_relaxed);
    atomic_store_explicit(&r->start, (uintptr_t)p, memory_order_release);
    *out = r;
done:
    pthread_mutex_unlock(&guard_lock);
    return rv;
}

int
cumod__shmguard_bad(const cumod_shm_range *r)
{
    return r != NULL && atomic_load_explicit(&((cumod_shm_range *)r)->bad,
                                             memory_order_acquire);
}

cumod_shm_range *
cumod__shmguard_find(uintptr_t addr, size_t len)
{
    for (guard_chunk *c = &guard_first; c != NULL;
         c = atomic_load_explicit(&c->next, memory_order_acquire)) {
        for (int i = 0; i < GUARD_SLOTS; i++) {
            cumod_shm_range *r = &c->slot[i];
            uintptr_t start =
                atomic_load_explicit(&r->start, memory_order_acquire);
            size_t n = atomic_load_explicit(&r->len, memory_order_relaxed);
            if (start != 0 && addr >= start && addr - start < n &&
                len <= n - (addr - start))
                return r;
        }
    }
    return NULL;
}

void
cumod__shmguard_remove(cumod_shm_range *r)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&guard_lock);
    atomic_store_explicit(&r->start, 0, memory_order_release);
    atomic_store_explicit(&r->len, 0, memory_order_relaxed);
    r->used = 0;
    pthread_mutex_unlock(&guard_lock);
}

uint64_t
cumod__shmguard_faults(void)
{
    return atomic_load_explicit(&guard_faults, memory_order_relaxed);
}
