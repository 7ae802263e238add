/* SPDX-License-Identifier: MIT */
/*
 * The metrics' serving (metrics.h): nng's HTTP server on its own threads
 * answers /metrics, /healthz and /readyz from the last rendering, asking
 * the loop for a fresh one (uv_async) and waiting at most
 * METRICS_FRESH_MS; and the start and stop of it all.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "front/metrics_impl.h"

/* How long a scrape waits for the loop's fresh rendering. */
#define METRICS_FRESH_MS 500

static void
metrics_on_async(uv_async_t *h)
{
    cumod__metrics_render(h->data);
}

/* --- Serving (nng's threads) --------------------------------------------- */

/* Asks the loop for a fresh rendering and waits for it, at most
 * METRICS_FRESH_MS; called and returns with m->mtx held. 1: it came. */
static int
metrics_fresh(cumod_metrics *m)
{
    struct timespec until;
    uint64_t had = m->gen;
    if (!m->closing)
        uv_async_send(&m->async);
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += METRICS_FRESH_MS * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (m->gen == had && !m->closing &&
           pthread_cond_timedwait(&m->cond, &m->mtx, &until) == 0)
        ;
    return m->gen != had;
}

/* GET /healthz and /readyz: 200 or 503, and a line saying why. */
static void
metrics_on_probe(nng_aio *aio, int ready)
{
    nng_http_handler *h = nng_aio_get_input(aio, 1);
    cumod_metrics *m = nng_http_handler_get_data(h);
    nng_http_res *res;
    char line[200];
    int ok;

    pthread_mutex_lock(&m->mtx);
    if (!metrics_fresh(m)) {
        ok = 0;
        snprintf(line, sizeof(line), "cumodd: %s\n",
                 m->closing ? "shutting down"
                            : "its loop did not answer in "
                              "500 ms");
    } else {
        ok = ready ? m->ready : m->healthy;
        snprintf(line, sizeof(line), "cumodd: %s\n",
                 ready ? (ok ? "ready" : m->ready_why) : m->health_why);
    }
    pthread_mutex_unlock(&m->mtx);
    if (nng_http_res_alloc(&res) != 0) {
        nng_aio_finish(aio, NNG_ENOMEM);
        return;
    }
    if (!ok)
        nng_http_res_set_status(res, NNG_HTTP_STATUS_SERVICE_UNAVAILABLE);
    nng_http_res_set_header(res, "Content-Type", "text/plain; charset=utf-8");
    nng_http_res_copy_data(res, line, strlen(line));
    nng_aio_set_output(aio, 0, res);
    nng_aio_finish(aio, 0);
}

static void
metrics_on_healthz(nng_aio *aio)
{
    metrics_on_probe(aio, 0);
}

static void
metrics_on_readyz(nng_aio *aio)
{
    metrics_on_probe(aio, 1);
}

static void
metrics_on_http(nng_aio *aio)
{
    nng_http_handler *h = nng_aio_get_input(aio, 1);
    cumod_metrics *m = nng_http_handler_get_data(h);
    nng_http_res *res;
    char *text = NULL;
    size_t len = 0;
    uint64_t age_ms = 0;

    pthread_mutex_lock(&m->mtx);
    (void)metrics_fresh(m);
    if (m->text != NULL && (text = malloc(m->len + 128)) != NULL) {
        memcpy(text, m->text, m->len);
        len = m->len;
        age_ms = cumod__wall_ms() - m->render_ms;
    }
    pthread_mutex_unlock(&m->mtx);
    if (nng_http_res_alloc(&res) != 0) {
        free(text);
        nng_aio_finish(aio, NNG_ENOMEM);
        return;
    }
    if (text == NULL) {
        nng_http_res_set_status(res, NNG_HTTP_STATUS_SERVICE_UNAVAILABLE);
        nng_http_res_copy_data(res, "cumodd: no metrics rendered yet\n", 32);
    } else {
        /* The last line is the age: set it as it is now. */
        const char *tag = "cumod_metrics_render_age_seconds 0\n";
        size_t tl = strlen(tag);
        if (len >= tl && memcmp(text + len - tl, tag, tl) == 0)
            len -= tl;
        len += (size_t)snprintf(text + len, 128,
                                "cumod_metrics_render_age_seconds %.3f\n",
                                (double)age_ms / 1e3);
        nng_http_res_set_header(res, "Content-Type",
                                "text/plain; version=0.0.4; charset=utf-8");
        nng_http_res_copy_data(res, text, len);
    }
    free(text);
    nng_aio_set_output(aio, 0, res);
    nng_aio_finish(aio, 0);
}

cumod_err
cumod__metrics_start(cumod_front *f, const char *addr, char *err, size_t errlen)
{
    cumod_metrics *m;
    char url[300];
    nng_url *u = NULL;
    int rv;

    if (addr == NULL || addr[0] == '\0')
        return CUMOD_OK;
    if ((m = calloc(1, sizeof(*m))) == NULL)
        return CUMOD_ENOMEM;
    m->f = f;
    cumod__idmap_init(&m->mods);
    cumod__idmap_init(&m->gpu);
    pthread_mutex_init(&m->mtx, NULL);
    pthread_cond_init(&m->cond, NULL);
    uv_async_init(&f->loop, &m->async, metrics_on_async);
    m->async.data = m;
    snprintf(url, sizeof(url), "http://%s", addr);
    if ((rv = nng_url_parse(&u, url)) != 0 ||
        (rv = nng_http_server_hold(&m->srv, u)) != 0 ||
        (rv = nng_http_handler_alloc(&m->h, "/metrics", metrics_on_http)) !=
            0 ||
        (rv = nng_http_handler_set_method(m->h, "GET")) != 0 ||
        (rv = nng_http_handler_set_data(m->h, m, NULL)) != 0 ||
        (rv = nng_http_server_add_handler(m->srv, m->h)) != 0 ||
        (rv = nng_http_handler_alloc(&m->hz, "/healthz", metrics_on_healthz)) !=
            0 ||
        (rv = nng_http_handler_set_method(m->hz, "GET")) != 0 ||
        (rv = nng_http_handler_set_data(m->hz, m, NULL)) != 0 ||
        (rv = nng_http_server_add_handler(m->srv, m->hz)) != 0 ||
        (rv = nng_http_handler_alloc(&m->rz, "/readyz", metrics_on_readyz)) !=
            0 ||
        (rv = nng_http_handler_set_method(m->rz, "GET")) != 0 ||
        (rv = nng_http_handler_set_data(m->rz, m, NULL)) != 0 ||
        (rv = nng_http_server_add_handler(m->srv, m->rz)) != 0 ||
        (rv = nng_http_server_start(m->srv)) != 0) {
        snprintf(err, errlen,
                 "--metrics-listen %s: cannot serve http://%s/metrics: %s",
                 addr, addr, nng_strerror(rv));
        if (u != NULL)
            nng_url_free(u);
        f->metrics = m;
        cumod__metrics_stop(f);
        return CUMOD_EINVAL;
    }
    nng_url_free(u);
    f->metrics = m;
    cumod__metrics_render(m);
    CUMOD_LOGN("CUMOD-METRICS", "metrics at http://%s/metrics", addr);
    return CUMOD_OK;
}

static void
metrics_on_close(uv_handle_t *h)
{
    cumod_metrics *m = h->data;
    size_t cur = 0;
    mod_counts *c;
    while ((c = cumod__idmap_next(&m->mods, &cur, NULL)) != NULL) {
        free(c->name);
        free(c);
    }
    cumod__idmap_fini(&m->mods);
    cur = 0;
    gpu_counts *g;
    while ((g = cumod__idmap_next(&m->gpu, &cur, NULL)) != NULL) {
        free(g->key);
        free(g);
    }
    cumod__idmap_fini(&m->gpu);
    pthread_mutex_destroy(&m->mtx);
    pthread_cond_destroy(&m->cond);
    free(m->text);
    free(m);
}

void
cumod__metrics_stop(cumod_front *f)
{
    cumod_metrics *m = f->metrics;
    if (m == NULL)
        return;
    f->metrics = NULL;
    pthread_mutex_lock(&m->mtx);
    m->closing = 1;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->mtx);
    if (m->srv != NULL) {
        /* Waits for handlers running now (they no longer wait on us). */
        nng_http_server_stop(m->srv);
        nng_http_server_release(m->srv);
    }
    uv_close((uv_handle_t *)&m->async, metrics_on_close);
}
