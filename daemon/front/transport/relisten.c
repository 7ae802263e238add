/* SPDX-License-Identifier: MIT */
#include "front/transport/relisten.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cumod/errors.h"
#include "common/log.h"

#define RELISTEN_EVERY_MS 1000
#define RELISTEN_PROBE_MS 500

struct cumod_relisten {
    uv_timer_t timer;
    nng_socket sock;
    nng_listener l; /* the live one */
    char url[512];
    const char *path; /* inside url */
    int ipc_mode;
    int ipc_group;   /* -1: ours */
    uint64_t others; /* the listener's "other" errors at the last look */
    unsigned count;
};

static uint64_t
relisten_others(nng_listener l)
{
    nng_stat *all, *ls, *st;
    uint64_t v = 0;

    if (nng_stats_get(&all) != 0)
        return 0;
    if ((ls = nng_stat_find_listener(all, l)) != NULL &&
        (st = nng_stat_find(ls, "other")) != NULL)
        v = nng_stat_value(st);
    nng_stats_free(all);
    return v;
}

/* 1 if the listener at path serves a request end to end: the SP handshake
 * as a req0 peer, then one request (a byte that is no cumod.Request, which
 * the server answers on nng's threads with CUMOD_EPROTO). The handshake
 * alone is not enough: in the failure, the transport still answers it, but
 * its pipes never reach the socket. */
static int
relisten_probe(const char *path)
{
    static const unsigned char req[8 + 9 + 5] = {
        0,    'S', 'P', 0,    0x00, 0x30, 0, 0,    /* handshake: req0 */
        0x01, 0,   0,   0,    0,    0,    0, 0, 5, /* a message of 5 bytes: */
        0x80, 0,   0,   0x01,                      /* request id 1 */
        0xff,                                      /* and a body that is junk */
    };
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    unsigned char got[8 + 9 + 4];
    size_t have = 0;
    int fd, ok = 0;

    if (strlen(path) >= sizeof(sa.sun_path))
        return 1; /* cannot tell: leave it alone */
    strcpy(sa.sun_path, path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return 1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        send(fd, req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req))
        goto done;
    while (have < sizeof(got)) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, RELISTEN_PROBE_MS) <= 0)
            goto done;
        ssize_t n = recv(fd, got + have, sizeof(got) - have, 0);
        if (n <= 0)
            goto done;
        have += (size_t)n;
    }
    ok = got[1] == 'S' && got[2] == 'P' && got[8] == 0x01;
done:
    close(fd);
    return ok;
}

static void
relisten_on_timer(uv_timer_t *h)
{
    cumod_relisten *g = h->data;
    uint64_t others = relisten_others(g->l);
    nng_listener nl;
    int rv;

    if (others == g->others)
        return;
    CUMOD_LOGD("CUMOD-NNG-RELISTEN", "other errors: %llu (was %llu)",
               (unsigned long long)others, (unsigned long long)g->others);
    /* Every client that goes away counts as an "other" error on this
     * listener, the probe included: take its own one into the baseline so
     * that probing does not feed itself. */
    g->others = others + 1;
    if (relisten_probe(g->path))
        return; /* alive: the errors were ordinary disconnects */
    CUMOD_LOGW("CUMOD-NNG-RELISTEN",
               "the listener on %s stopped accepting after a client "
               "disconnected during its handshake (nng 1.5.2, nanomsg/nng "
               "#1518); listening again",
               g->url);
    /* The dead listener still holds the path: free it for the new one. */
    if (unlink(g->path) != 0 && errno != ENOENT)
        CUMOD_LOGE("CUMOD-NNG-RELISTEN", "cannot remove %s: %s", g->path,
                   strerror(errno));
    if ((rv = nng_listener_create(&nl, g->sock, g->url)) != 0 ||
        (g->ipc_mode > 0 &&
         (rv = nng_listener_set_int(nl, NNG_OPT_IPC_PERMISSIONS,
                                    g->ipc_mode)) != 0) ||
        (rv = nng_listener_start(nl, 0)) != 0) {
        CUMOD_LOGE("CUMOD-NNG-RELISTEN", "cannot listen again on %s: %s",
                   g->url, nng_strerror(rv));
        return; /* tried again next tick, the count having moved */
    }
    if (g->ipc_group >= 0 && chown(g->path, (uid_t)-1, (gid_t)g->ipc_group))
        CUMOD_LOGE("CUMOD-NNG-RELISTEN", "cannot give %s to group %d: %s",
                   g->path, g->ipc_group, strerror(errno));
    g->l = nl;
    g->others = 0;
    g->count++;
}

cumod_err
cumod__relisten_start(uv_loop_t *loop, nng_socket sock, const char *url,
                      int ipc_mode, int ipc_group, nng_listener l,
                      cumod_relisten **out)
{
    cumod_relisten *g;

    if (strncmp(url, "ipc://", 6) != 0) {
        *out = NULL;
        return CUMOD_OK;
    }
    if ((g = calloc(1, sizeof(*g))) == NULL)
        return CUMOD_ENOMEM;
    g->sock = sock;
    g->l = l;
    g->ipc_mode = ipc_mode;
    g->ipc_group = ipc_group;
    snprintf(g->url, sizeof(g->url), "%s", url);
    g->path = g->url + 6;
    g->others = relisten_others(l);
    uv_timer_init(loop, &g->timer);
    g->timer.data = g;
    uv_timer_start(&g->timer, relisten_on_timer, RELISTEN_EVERY_MS,
                   RELISTEN_EVERY_MS);
    /* Not a reason to keep the loop alive on its own. */
    uv_unref((uv_handle_t *)&g->timer);
    *out = g;
    return CUMOD_OK;
}

unsigned
cumod__relisten_count(const cumod_relisten *g)
{
    return g ? g->count : 0;
}

static void
relisten_on_close(uv_handle_t *h)
{
    free(h->data);
}

void
cumod__relisten_stop(cumod_relisten *g)
{
    if (g == NULL)
        return;
    uv_timer_stop(&g->timer);
    uv_close((uv_handle_t *)&g->timer, relisten_on_close);
}
