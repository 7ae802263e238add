/* SPDX-License-Identifier: MIT */
/* The executor's submission threads (executor_submit.h). */
#include "executor_submit.h"

#include "common/log.h"
#include "direct.h"
#include "handlers.h"
#include "submit.h"

static int
executor_submit_done(cumod_exec *ex, void *aux)
{
    return cumod__exec_work_flush_in(ex, aux);
}

/* What a submission thread is posted: a session's WORK, or a command of
 * its direct ring (direct.h). */
static int
executor_submit_run(cumod_exec *ex, const cumod_chan_hdr *hdr,
                    const void *payload, size_t len, int fd, void *aux)
{
    if (hdr->op == CUMOD_CHAN_WORK)
        return cumod__exec_on_work(ex, hdr, payload, len, fd, aux);
    return cumod__exec_on_direct_run(ex, hdr, payload, len, fd, aux);
}

static int
executor_submit_poll(cumod_exec *ex, unsigned index, void *aux)
{
    (void)aux;
    return cumod__direct_poll(ex, index);
}

static int
executor_submit_may_sleep(cumod_exec *ex, unsigned index, void *aux)
{
    (void)aux;
    return cumod__direct_may_sleep(ex, index);
}

static int
executor_submit_drain(cumod_exec *ex, unsigned index, void *aux)
{
    (void)aux;
    return cumod__direct_drain(ex, index);
}

static int
executor_submit_age(cumod_exec *ex, void *aux)
{
    return cumod__exec_work_age_in(ex, aux);
}

/* The submission threads, each with a WORK state of its own: as many as
 * asked, or a quarter of the cores (1 to 4) below 16 cores and 8 from 16
 * on, since they read rings themselves (direct launches).
 * Measured at 8 clients on 16-core H100 hosts (bench/notes.md), the front
 * reading the rings, mean p50 of the clients: 1 thread 34.5 / 70.9 us, 2
 * threads 26.3 / 43.3, 4 threads 30.8 / 30.6 (two machines, one run each).
 * With direct launches on the H200 host, 20,000 launches a client: 4
 * threads 299k/s at 8 clients and 245k/s at 16, 8 threads 317k/s and
 * 279k/s, and 1 client 12.7 against 11.5 us p50. */
cumod_err
cumod__executor_submit_start(cumod_exec *ex, void **aux, unsigned *n)
{
    static const cumod_submit_ops ops = {
        .run = executor_submit_run,
        .done = executor_submit_done,
        .age = executor_submit_age,
        .poll = executor_submit_poll,
        .may_sleep = executor_submit_may_sleep,
        .drain = executor_submit_drain,
    };
    unsigned want = ex->cfg->submit_threads;
    if (want == 0)
        want = cumod__submit_threads_default();
    if (want > CUMOD_EXEC_SUBMIT_MAX)
        want = CUMOD_EXEC_SUBMIT_MAX;
    for (*n = 0; *n < want; (*n)++)
        if ((aux[*n] = cumod__exec_work_new()) == NULL)
            return CUMOD_ENOMEM;
    /* Direct launches: the submission threads read the rings the front
     * hands over (direct.h). Without the service, a RING_ATTACH is
     * refused and the front keeps serving its rings. */
    if (cumod__direct_start(ex, want) != CUMOD_OK)
        CUMOD_LOGW("CUMOD-EXEC-DIRECT",
                   "direct launches are off: the service could not start");
    return cumod__submit_start(ex, want, &ops, aux, &ex->submit);
}

void
cumod__executor_submit_stop(cumod_exec *ex, void **aux, unsigned n)
{
    /* The doorbell thread wakes the submission threads: it stops first
     * (ASan saw it wake one already freed). */
    cumod__direct_stop_bell(ex);
    cumod__submit_stop(ex->submit);
    ex->submit = NULL;
    for (unsigned i = 0; i < n; i++)
        cumod__exec_work_free(ex, aux[i]);
}
