/* SPDX-License-Identifier: MIT */
/*
 * A libcumod client's life: cumod_open (a socket, the dial, a Hello that
 * proves the connection served, $CUMOD_DEVICE, the ring) and cumod_close;
 * and the calls that describe the daemon (cumod_device_info_get,
 * cumod_sessions_list).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>

#include "client_internal.h"
#include "cumod.pb-c.h"

int
cumod_open(const char *url, int timeout_ms, cumod_client **out)
{
    return cumod_open_tls(url, timeout_ms, NULL, out);
}

/* Frees what client_new made of c before its socket was open. */
static void
client_free_early(cumod_client *c)
{
    if (c->tls != NULL)
        nng_tls_config_free(c->tls);
    if (c->late_cv != NULL)
        nng_cv_free(c->late_cv);
    nng_mtx_free(c->stage_mtx);
    nng_mtx_free(c->mtx);
    free(c);
}

/* A client of url, not yet dialed: its locks, TLS and req socket. */
static int
client_new(const char *url, int timeout_ms, const cumod_tls_files *tls,
           cumod_client **out)
{
    cumod_client *c;
    int rv;

    if ((c = calloc(1, sizeof(*c))) == NULL)
        return cumod__client_set_error(CUMOD_ENOMEM, "out of memory");
    snprintf(c->url, sizeof(c->url), "%s", url);
    c->timeout_ms = timeout_ms ? timeout_ms : 10000;
    atomic_init(&c->want_device, -1);
    if ((rv = nng_mtx_alloc(&c->mtx)) != 0) {
        free(c);
        return cumod__client_set_error(CUMOD_ENOMEM, "out of memory");
    }
    if (nng_mtx_alloc(&c->stage_mtx) != 0) {
        nng_mtx_free(c->mtx);
        free(c);
        return cumod__client_set_error(CUMOD_ENOMEM, "out of memory");
    }
    if (nng_cv_alloc(&c->late_cv, c->mtx) != 0) {
        client_free_early(c);
        return cumod__client_set_error(CUMOD_ENOMEM, "out of memory");
    }
    if ((rv = cumod__client_tls(c, tls)) != CUMOD_OK) {
        client_free_early(c);
        return rv;
    }
    if ((rv = nng_req0_open(&c->sock)) != 0) {
        client_free_early(c);
        return cumod__client_set_error(cumod__client_nng_err(rv),
                                       "cannot open a req socket: %s",
                                       nng_strerror(rv));
    }
    nng_pipe_notify(c->sock, NNG_PIPE_EV_ADD_POST, cumod__client_on_pipe, c);
    nng_pipe_notify(c->sock, NNG_PIPE_EV_REM_POST, cumod__client_on_pipe, c);
    /* No resends: the daemon must see each request once (a launch is not
     * idempotent); a lost reply is the caller's timeout. */
    nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    *out = c;
    return CUMOD_OK;
}

/* Dials c's url until until. A Unix socket's accept queue can be full
 * when many clients connect at once (connect(2) says EAGAIN): that is
 * "later", not "no", so try again for as long as the caller's timeout
 * allows. On failure c is freed. */
static int
client_connect(cumod_client *c, const char *url, nng_time until)
{
    unsigned nap = 1;
    int rv;

    while ((rv = cumod__client_dial(c, 0, &c->dialer)) == NNG_EAGAIN &&
           nng_clock() < until) {
        nng_msleep(nap);
        nap = nap < 32 ? nap * 2 : 32;
    }
    if (rv == 0)
        return CUMOD_OK;
    nng_close(c->sock);
    client_free_early(c);
    if (rv == NNG_EPEERAUTH || rv == NNG_ECRYPTO ||
        (strncmp(url, "tls+", 4) == 0 &&
         (rv == NNG_ECONNSHUT || rv == NNG_ECLOSED)))
        return cumod__client_set_error(
            CUMOD_EPERM,
            "cannot connect to %s: the TLS handshake failed (%s): "
            "cumodd's certificate is not one the CA of --tls-ca vouches "
            "for under this host name, or cumodd refused this client's "
            "certificate (--tls-cert, --tls-key) or its lack of one",
            url, nng_strerror(rv));
    if (rv == NNG_ECONNREFUSED || rv == NNG_ENOENT)
        return cumod__client_set_error(
            CUMOD_ECONNREFUSED,
            "cannot connect to %s: no cumodd is listening there (%s)", url,
            nng_strerror(rv));
    return cumod__client_set_error(cumod__client_nng_err(rv),
                                   "cannot connect to %s: %s", url,
                                   nng_strerror(rv));
}

/* A connection is only known to be served once something is answered on
 * it: nng 1.5.2's listener, after a peer dropped in its handshake (#1518),
 * still completes new handshakes but never hands their requests on, until
 * cumodd listens again (within a second or so). So ask for a Hello, which
 * cumodd answers from its own state, a second at a time, dialing again
 * while it goes unanswered, until until. */
static int
client_served(cumod_client *c, nng_time until)
{
    int total = c->timeout_ms, rv;

    for (;;) {
        cumod_device_info di;
        nng_time now = nng_clock();
        unsigned gen;
        int left = now < until ? (int)(until - now) : 0;
        c->timeout_ms =
            left < CLIENT_STALL_MS ? (left > 0 ? left : 1) : CLIENT_STALL_MS;
        nng_mtx_lock(c->mtx);
        gen = c->dial_gen;
        nng_mtx_unlock(c->mtx);
        rv = cumod_device_info_get(c, &di);
        if (rv != CUMOD_ETIMEDOUT || nng_clock() >= until)
            break;
        cumod__client_redial(c, gen, 1);
    }
    c->timeout_ms = total;
    return rv;
}

/* The fast path where the daemon shares the host: without it (an older
 * cumodd, no /dev/shm) everything goes over the connection. */
static void
client_fast_path(cumod_client *c)
{
    if ((c->ring_want = cumod__ring_wanted(c->url)) != 0)
        cumod__client_ring_try(c, cumod__client_pipe(c));
    else
        snprintf(c->ring_why, sizeof(c->ring_why), "%s",
                 strncmp(c->url, "ipc://", 6) != 0
                     ? "the URL is not local (only ipc:// clients share "
                       "memory with cumodd)"
                     : "CUMOD_NO_RING is set");
}

int
cumod_open_tls(const char *url, int timeout_ms, const cumod_tls_files *tls,
               cumod_client **out)
{
    cumod_client *c = NULL;
    int rv, device;

    if (out == NULL || timeout_ms < 0)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_open: out is NULL or timeout_ms "
                                       "is negative");
    if ((rv = cumod__device_env(&device)) != CUMOD_OK)
        return rv;
    if (url == NULL)
        url = getenv("CUMOD_URL");
    if (url == NULL || url[0] == '\0')
        url = CUMOD_DEFAULT_URL;
    if ((rv = client_new(url, timeout_ms, tls, &c)) != CUMOD_OK)
        return rv;
    nng_time until = nng_clock() + (nng_time)c->timeout_ms;
    if ((rv = client_connect(c, url, until)) != CUMOD_OK)
        return rv;
    rv = client_served(c, until);
    /* $CUMOD_DEVICE: before anything the session could hold, the ring
     * included. */
    if (rv == CUMOD_OK && device >= 0)
        rv = cumod_set_device(c, device);
    if (rv != CUMOD_OK) {
        char detail[1024];
        snprintf(detail, sizeof(detail), "%s", cumod_last_detail());
        cumod_close(c);
        return cumod__client_set_error(rv, "%s", detail);
    }
    client_fast_path(c);
    *out = c;
    return cumod__client_ok();
}

/* nng_close on a thread of its own, waited for ms: whoever of the two
 * ends last frees it. */
typedef struct client_closer {
    nng_socket sock;
    pthread_mutex_t mtx;
    pthread_cond_t cond;
    int done; /* nng_close returned */
    int gone; /* the waiter stopped waiting */
} client_closer;

static void
client_closer_free(client_closer *x)
{
    pthread_cond_destroy(&x->cond);
    pthread_mutex_destroy(&x->mtx);
    free(x);
}

static void *
client_closer_main(void *arg)
{
    client_closer *x = arg;
    int gone;

    nng_close(x->sock);
    pthread_mutex_lock(&x->mtx);
    x->done = 1;
    gone = x->gone;
    pthread_cond_signal(&x->cond);
    pthread_mutex_unlock(&x->mtx);
    if (gone)
        client_closer_free(x);
    return NULL;
}

/* Closes sock, waiting at most ms: 0, or -1 when nng_close has not
 * returned by then (it goes on on its thread). */
static int
client_close_socket(nng_socket sock, int ms)
{
    client_closer *x = calloc(1, sizeof(*x));
    pthread_condattr_t ca;
    pthread_attr_t ta;
    pthread_t th;
    struct timespec until;
    int done;

    if (x == NULL) {
        nng_close(sock);
        return 0;
    }
    x->sock = sock;
    pthread_mutex_init(&x->mtx, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&x->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_attr_init(&ta);
    pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &ta, client_closer_main, x) != 0) {
        pthread_attr_destroy(&ta);
        nng_close(sock);
        client_closer_free(x);
        return 0;
    }
    pthread_attr_destroy(&ta);
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&x->mtx);
    while (!x->done &&
           pthread_cond_timedwait(&x->cond, &x->mtx, &until) != ETIMEDOUT)
        ;
    done = x->done;
    x->gone = 1;
    pthread_mutex_unlock(&x->mtx);
    if (done)
        client_closer_free(x);
    return done ? 0 : -1;
}

void
cumod_shutdown(cumod_client *c)
{
    int was = 0;

    if (c == NULL)
        return;
    if (!atomic_compare_exchange_strong(&c->shut, &was, 1)) {
        /* Another thread shuts it down: return once it has. */
        while (atomic_load(&c->shut) != 2)
            nng_msleep(1);
        return;
    }
    /* No call starts now (call.c looks at shut after counting itself in
     * users; both sequentially consistent, so one of the two sees the
     * other). Calls whose request has not left are failed where they
     * wait for a connection (again on every pass: one may register after
     * a pass). Calls already sent run to their reply or timeout: closing
     * the socket while a reply is arriving can hang nng 1.5 to 1.7 for
     * good (the pipe's receive, re-armed as the reply lands, is stopped
     * half-started: nng #1813, the process's reaper thread with it), so
     * the socket is closed once none is left, quiet, with nothing blocked
     * on it (nng #1543). */
    for (;;) {
        nng_mtx_lock(c->mtx);
        for (cumod__call *k = c->calls; k != NULL; k = k->next)
            if (!atomic_load(&k->sent))
                nng_aio_abort(k->aio, NNG_ECLOSED);
        nng_mtx_unlock(c->mtx);
        if (atomic_load(&c->users) == 0)
            break;
        nng_msleep(1);
    }
    /* Calls whose callers timed out may still be answered: their replies
     * are awaited (CLIENT_LATE_CLOSE_MS), the rest aborted, so that the
     * socket closes with no reply on its way. nng_close itself is bounded
     * too (CLIENT_CLOSE_MS), for the case that still catches nng. */
    cumod__client_late_reap(c, 1);
    if (client_close_socket(c->sock, CLIENT_CLOSE_MS) != 0) {
        c->close_stuck = 1;
        cumod__client_log(
            CUMOD_LOG_WARNING,
            "libcumod: closing the connection to cumodd at %s did not end "
            "within %d ms (nng #1813, in nng before 1.8): it is left to a "
            "thread of its own, and this client's memory is not freed",
            c->url, CLIENT_CLOSE_MS);
    }
    atomic_store(&c->shut, 2);
}

void
cumod_close(cumod_client *c)
{
    if (c == NULL)
        return;
    cumod_shutdown(c);
    if (c->close_stuck)
        return; /* nng may still call back with c: left, not freed */
    if (c->tls != NULL)
        nng_tls_config_free(c->tls);
    cumod__ring_destroy(atomic_load(&c->ring));
    for (size_t i = 0; i < c->n_old_rings; i++)
        cumod__ring_destroy(c->old_rings[i]);
    free(c->old_rings);
    cumod__stage_free(c);
    nng_mtx_free(c->stage_mtx);
    nng_cv_free(c->late_cv);
    nng_mtx_free(c->mtx);
    free(c);
}

static void
client_copy(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

int
cumod_device_info_get(cumod_client *c, cumod_device_info *out)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__Hello hello = CUMOD__HELLO__INIT;
    Cumod__Reply *reply = NULL;
    cumod_device_info info;
    int rv;

    if (c == NULL || out == NULL)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_device_info_get: NULL argument");
    hello.client = "libcumod " CUMOD_VERSION_STRING;
    req.body_case = CUMOD__REQUEST__BODY_HELLO;
    req.hello = &hello;
    if ((rv = cumod__client_call_for(c, &req, CUMOD__REPLY__BODY_HELLO,
                                     __func__, &reply)) != CUMOD_OK)
        return rv;
    const Cumod__HelloReply *h = reply->hello;
    memset(&info, 0, sizeof(info));
    client_copy(info.daemon_version, sizeof(info.daemon_version),
                h->daemon_version);
    info.protocol_version = h->protocol_version;
    info.ordinal = h->device_ordinal;
    client_copy(info.name, sizeof(info.name), h->device_name);
    info.sm_major = h->sm_major;
    info.sm_minor = h->sm_minor;
    info.multiprocessors = h->multiprocessors;
    info.driver_version = h->driver_version;
    info.total_memory = h->total_memory;
    info.free_memory = h->free_memory;
    client_copy(info.kernel_dir, sizeof(info.kernel_dir), h->kernel_dir);
    info.executor_pid = (int64_t)h->executor_pid;
    info.modules = h->modules;
    info.resident_modules = h->resident_modules;
    info.resident_bytes = h->resident_bytes;
    info.kernel_dir_degraded = h->kernel_dir_degraded;
    client_copy(info.executor_state, sizeof(info.executor_state),
                h->executor_state);
    info.executor_state_since_unix_ms = h->executor_state_since_unix_ms;
    info.executor_restarts = h->executor_restarts;
    client_copy(info.last_fault, sizeof(info.last_fault), h->last_fault);
    info.last_fault_unix_ms = h->last_fault_unix_ms;
    info.free_memory_age_ms = h->free_memory_age_ms;
    info.launch_deadline_ms = (unsigned)h->launch_deadline_ms;
    info.max_launch_deadline_ms = (unsigned)h->max_launch_deadline_ms;
    atomic_store(&c->device, h->session_device);
    atomic_store(&c->max_message, h->max_message);
    nng_mtx_lock(c->mtx);
    snprintf(c->fd_socket, sizeof(c->fd_socket), "%s",
             h->fd_socket != NULL && strlen(h->fd_socket) < sizeof(c->fd_socket)
                 ? h->fd_socket
                 : "");
    nng_mtx_unlock(c->mtx);
    cumod__reply__free_unpacked(reply, NULL);
    *out = info;
    return CUMOD_OK;
}

int
cumod_sessions_list(cumod_client *c, cumod_session_info **out, size_t *n,
                    uint64_t *mono_ns)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__Hello hello = CUMOD__HELLO__INIT;
    Cumod__Reply *reply = NULL;
    cumod_session_info *v = NULL;
    int rv;

    if (c == NULL || out == NULL || n == NULL)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_sessions_list: NULL argument");
    hello.client = "libcumod " CUMOD_VERSION_STRING;
    hello.sessions = 1;
    req.body_case = CUMOD__REQUEST__BODY_HELLO;
    req.hello = &hello;
    if ((rv = cumod__client_call_for(c, &req, CUMOD__REPLY__BODY_HELLO,
                                     __func__, &reply)) != CUMOD_OK)
        return rv;
    const Cumod__HelloReply *h = reply->hello;
    if (h->n_sessions > 0 && (v = calloc(h->n_sessions, sizeof(*v))) == NULL) {
        cumod__reply__free_unpacked(reply, NULL);
        return cumod__client_set_error(CUMOD_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < h->n_sessions; i++) {
        const Cumod__SessionInfo *si = h->sessions[i];
        v[i].id = si->id;
        v[i].pid = si->pid;
        v[i].uid = si->uid;
        client_copy(v[i].domain, sizeof(v[i].domain), si->domain);
        v[i].gpu_ns = si->gpu_ns;
        v[i].memory_bytes = si->memory_bytes;
        v[i].inflight = si->inflight;
        v[i].device = si->device;
        v[i].fast_path = si->fast_path;
    }
    *out = v;
    *n = h->n_sessions;
    if (mono_ns != NULL)
        *mono_ns = h->sessions_mono_ns;
    cumod__reply__free_unpacked(reply, NULL);
    return CUMOD_OK;
}
