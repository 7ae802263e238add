/* SPDX-License-Identifier: MIT */
/*
 * The control API of fakecuda.h: settings, faults, hold, and the records a
 * test reads back.
 */
#include "fake.h"

#include <stdlib.h>

void
fakecuda_reset(void)
{
    fake_state *st = fake_lock();
    fake_state_clear(st);
    /* Waiters see the new epoch and give up. */
    pthread_cond_broadcast(&st->cond);
    fake_set_current(NULL);
    fake_unlock(st);
}

int
fakecuda_set_sm(int sm)
{
    if (sm < 10 || sm > 199)
        return -1;
    fake_state *st = fake_lock();
    st->set_sm = sm;
    if (st->initialised)
        st->sm = sm;
    fake_unlock(st);
    return 0;
}

int
fakecuda_set_memory(size_t bytes)
{
    if (bytes == 0)
        return -1;
    fake_state *st = fake_lock();
    st->set_mem = bytes;
    if (st->initialised)
        st->mem = bytes;
    fake_unlock(st);
    return 0;
}

int
fakecuda_set_devices(int count)
{
    if (count < 0 || count > FAKE_MAX_DEVICES)
        return -1;
    fake_state *st = fake_lock();
    st->set_devices = count;
    fake_unlock(st);
    return 0;
}

void
fakecuda_hold(int on)
{
    fake_state *st = fake_lock();
    st->hold.api = on != 0;
    fake_progress(st);
    fake_unlock(st);
}

int
fakecuda_hold_functions(const char *names)
{
    fake_state *st = fake_lock();
    int rc = fake_names_set_list(&st->hold.api_fn, names, ',');
    fake_progress(st);
    fake_unlock(st);
    return rc;
}

void
fakecuda_hold_loads(int on)
{
    fake_state *st = fake_lock();
    st->hold.load_api = on != 0;
    fake_unlock(st);
}

int
fakecuda_inject_fault(fakecuda_fault_kind kind, unsigned n)
{
    if (n == 0)
        return -1;
    fake_state *st = fake_lock();
    int rc = -1;
    switch (kind) {
    case FAKECUDA_FAULT_LAUNCH:
        rc = fake_fault_add(st, kind, st->n_launch + n, NULL, CUDA_SUCCESS);
        break;
    case FAKECUDA_FAULT_ALLOC:
        rc = fake_fault_add(st, kind, st->n_alloc + n, NULL,
                            CUDA_ERROR_OUT_OF_MEMORY);
        break;
    case FAKECUDA_FAULT_LOAD:
        rc = fake_fault_add(st, kind, st->n_load + n, NULL,
                            CUDA_ERROR_INVALID_IMAGE);
        break;
    case FAKECUDA_FAULT_POISON:
    case FAKECUDA_FAULT_REFUSE:
        break; /* by name only: CUMOD_FAKE_FAULT poison:NAME, refuse:NAME */
    }
    fake_unlock(st);
    return rc;
}

int
fakecuda_inject_launch_fault(const char *function)
{
    if (function == NULL || function[0] == '\0')
        return -1;
    fake_state *st = fake_lock();
    int rc =
        fake_fault_add(st, FAKECUDA_FAULT_LAUNCH, 0, function, CUDA_SUCCESS);
    fake_unlock(st);
    return rc;
}

int
fakecuda_inject_load_fault(unsigned n, CUresult code)
{
    if (n == 0 || code == CUDA_SUCCESS)
        return -1;
    fake_state *st = fake_lock();
    int rc =
        fake_fault_add(st, FAKECUDA_FAULT_LOAD, st->n_load + n, NULL, code);
    fake_unlock(st);
    return rc;
}

void
fakecuda_clear_faults(void)
{
    fake_state *st = fake_lock();
    for (int i = 0; i < st->nfaults; i++)
        free(st->faults[i].name);
    st->nfaults = 0;
    fake_unlock(st);
}

CUresult
fakecuda_sticky_error(void)
{
    fake_state *st = fake_lock();
    CUresult rc = st->sticky;
    fake_unlock(st);
    return rc;
}

size_t
fakecuda_launch_count(void)
{
    fake_state *st = fake_lock();
    size_t n = st->launch_total;
    fake_unlock(st);
    return n;
}

int
fakecuda_launch_get(size_t i, fakecuda_launch *out)
{
    fake_state *st = fake_lock();
    int rc = -1;
    if (out != NULL && i < st->nlaunches) {
        *out = st->launches[i];
        rc = 0;
    }
    fake_unlock(st);
    return rc;
}

size_t
fakecuda_copy_count(void)
{
    fake_state *st = fake_lock();
    size_t n = st->copy_total;
    fake_unlock(st);
    return n;
}

int
fakecuda_copy_get(size_t i, fakecuda_copy *out)
{
    fake_state *st = fake_lock();
    int rc = -1;
    if (out != NULL && i < st->ncopies) {
        *out = st->copies[i];
        rc = 0;
    }
    fake_unlock(st);
    return rc;
}

size_t
fakecuda_pending(void)
{
    fake_state *st = fake_lock();
    fake_progress(st); /* the hold file may be gone */
    size_t n = st->pending;
    fake_unlock(st);
    return n;
}

size_t
fakecuda_allocation_count(void)
{
    fake_state *st = fake_lock();
    size_t n = st->nallocs;
    fake_unlock(st);
    return n;
}

size_t
fakecuda_allocated_bytes(void)
{
    fake_state *st = fake_lock();
    size_t n = 0;
    for (size_t i = 0; i < st->nallocs; i++)
        n += st->allocs[i].size;
    fake_unlock(st);
    return n;
}

size_t
fakecuda_module_count(void)
{
    fake_state *st = fake_lock();
    size_t n = 0;
    for (uint32_t i = 0; i < st->modules.cap; i++)
        n += st->modules.items[i] != NULL;
    fake_unlock(st);
    return n;
}

int
fakecuda_primary_refs(int dev)
{
    fake_state *st = fake_lock();
    int n = dev >= 0 && dev < FAKE_MAX_DEVICES ? st->dev[dev].ctx_refs : -1;
    fake_unlock(st);
    return n;
}
