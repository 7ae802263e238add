/* SPDX-License-Identifier: MIT */
#include "lane.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec.h"
#include "common/list.h"
#include "common/log.h"

typedef struct lane_job {
    cumod_list_node link;
    cumod_lane_fn fn;
    cumod_chan_hdr hdr;
    int fd;
    void *aux;
    size_t len;
    char payload[];
} lane_job;

struct cumod_lane {
    struct cumod_exec *ex;
    char name[16];
    pthread_t thread;
    /* Guards jobs and stop. A leaf: no driver call is made while it is
     * held. */
    pthread_mutex_t mtx;
    pthread_cond_t cond;
    cumod_list jobs;
    int stop;
};

static void *
lane_main(void *arg)
{
    cumod_lane *l = arg;
    char tname[24];

    snprintf(tname, sizeof(tname), "exec-%.10s", l->name);
    pthread_setname_np(pthread_self(), tname);
    (void)l->ex->drv.ctx_set_current(l->ex->ctx);
    pthread_mutex_lock(&l->mtx);
    for (;;) {
        cumod_list_node *n;
        while (!l->stop && cumod__list_empty(&l->jobs))
            pthread_cond_wait(&l->cond, &l->mtx);
        if (l->stop)
            break;
        n = cumod__list_pop(&l->jobs);
        pthread_mutex_unlock(&l->mtx);
        lane_job *j = CUMOD_CONTAINER_OF(n, lane_job, link);
        int rv = j->fn(l->ex, &j->hdr, j->payload, j->len, j->fd, j->aux);
        free(j);
        if (rv != 0) {
            /* The channel is gone: the front is away or the process is
             * ending. The main thread sees it too. */
            CUMOD_LOGD("CUMOD-EXEC-CHAN", "%s lane: channel send failed: %s",
                       l->name, strerror(-rv));
        }
        pthread_mutex_lock(&l->mtx);
    }
    pthread_mutex_unlock(&l->mtx);
    return NULL;
}

cumod_err
cumod__lane_start(struct cumod_exec *ex, const char *name, cumod_lane **out)
{
    cumod_lane *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return CUMOD_ENOMEM;
    l->ex = ex;
    snprintf(l->name, sizeof(l->name), "%s", name);
    cumod__list_init(&l->jobs);
    pthread_mutex_init(&l->mtx, NULL);
    pthread_cond_init(&l->cond, NULL);
    if (pthread_create(&l->thread, NULL, lane_main, l) != 0) {
        pthread_mutex_destroy(&l->mtx);
        pthread_cond_destroy(&l->cond);
        free(l);
        return CUMOD_ENOMEM;
    }
    *out = l;
    return CUMOD_OK;
}

cumod_err
cumod__lane_post(cumod_lane *l, cumod_lane_fn fn, const cumod_chan_hdr *hdr,
                 const void *payload, size_t len, int fd, void *aux)
{
    lane_job *j = malloc(sizeof(*j) + len);
    if (j == NULL) {
        if (fd >= 0)
            close(fd);
        return CUMOD_ENOMEM;
    }
    cumod__list_node_init(&j->link);
    j->fn = fn;
    j->hdr = *hdr;
    j->fd = fd;
    j->aux = aux;
    j->len = len;
    if (len)
        memcpy(j->payload, payload, len);
    pthread_mutex_lock(&l->mtx);
    if (l->stop) {
        pthread_mutex_unlock(&l->mtx);
        if (fd >= 0)
            close(fd);
        free(j);
        return CUMOD_ECLOSED;
    }
    cumod__list_append(&l->jobs, &j->link);
    pthread_cond_signal(&l->cond);
    pthread_mutex_unlock(&l->mtx);
    return CUMOD_OK;
}

void
cumod__lane_stop(cumod_lane *l)
{
    if (l == NULL)
        return;
    pthread_mutex_lock(&l->mtx);
    if (l->stop) {
        pthread_mutex_unlock(&l->mtx);
        return;
    }
    l->stop = 1;
    pthread_cond_signal(&l->cond);
    pthread_mutex_unlock(&l->mtx);
    pthread_join(l->thread, NULL);
    /* Under the lock: a post racing the stop is refused or dropped here. */
    pthread_mutex_lock(&l->mtx);
    for (cumod_list_node *n; (n = cumod__list_pop(&l->jobs)) != NULL;) {
        lane_job *j = CUMOD_CONTAINER_OF(n, lane_job, link);
        if (j->fd >= 0)
            close(j->fd);
        free(j);
    }
    pthread_mutex_unlock(&l->mtx);
}

void
cumod__lane_free(cumod_lane *l)
{
    if (l == NULL)
        return;
    cumod__lane_stop(l);
    pthread_mutex_destroy(&l->mtx);
    pthread_cond_destroy(&l->cond);
    free(l);
}
