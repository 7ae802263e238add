/* SPDX-License-Identifier: MIT */
/*
 * libcumod's connection: the dial (with TLS on tls+ URLs), nng's pipe
 * events, a call's place while it waits, the redial when no connection
 * comes, how a connection that ended reads, and the ring each connection's
 * session may open (the fast path, ring.c).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>

#include "client_internal.h"
#include "cumod.pb-c.h"

/* nng_dial, with the client's TLS configuration on tls+ URLs. */
int
cumod__client_dial(cumod_client *c, int flags, nng_dialer *out)
{
    nng_dialer d;
    int rv;

    if (c->tls == NULL)
        return nng_dial(c->sock, c->url, out, flags);
    if ((rv = nng_dialer_create(&d, c->sock, c->url)) != 0)
        return rv;
    if ((rv = nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, c->tls)) != 0 ||
        (rv = nng_dialer_start(d, flags)) != 0) {
        nng_dialer_close(d);
        return rv;
    }
    *out = d;
    return 0;
}

/* A whole file, NUL-terminated (PEM for nng); NULL with errno. */
static char *
client_slurp(const char *path)
{
    FILE *f = fopen(path, "re");
    char *buf = NULL;
    size_t len = 0, cap = 0, n;

    if (f == NULL)
        return NULL;
    do {
        if (len + 4096 + 1 > cap) {
            char *b = realloc(buf, cap = len + 65536);
            if (b == NULL) {
                free(buf);
                fclose(f);
                errno = ENOMEM;
                return NULL;
            }
            buf = b;
        }
        n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
    } while (n > 0 && len < (1u << 20));
    fclose(f);
    buf[len] = '\0';
    return buf;
}

static const char *
client_env(const char *given, const char *name)
{
    const char *v = given ? given : getenv(name);
    return v && v[0] ? v : NULL;
}

/* The TLS configuration of a tls+ URL: the CA that vouches for cumodd's
 * certificate (required: a server nobody vouches for is not trusted), and
 * this client's certificate and key when given. The host of the URL must
 * be a name the server's certificate carries (its CN or a DNS name). */
int
cumod__client_tls(cumod_client *c, const cumod_tls_files *files)
{
    const char *ca = client_env(files ? files->ca : NULL, "CUMOD_TLS_CA");
    const char *cert = client_env(files ? files->cert : NULL, "CUMOD_TLS_CERT");
    const char *key = client_env(files ? files->key : NULL, "CUMOD_TLS_KEY");
    char host[256], *certpem = NULL, *keypem = NULL;
    const char *h, *end;
    int rv;

    if (strncmp(c->url, "tls+", 4) != 0)
        return CUMOD_OK;
    if (ca == NULL)
        return cumod__client_set_error(
            CUMOD_EINVAL,
            "%s: a tls+tcp:// connection needs the CA that vouches for "
            "cumodd's certificate (--tls-ca FILE, or CUMOD_TLS_CA)",
            c->url);
    if ((cert == NULL) != (key == NULL))
        return cumod__client_set_error(
            CUMOD_EINVAL,
            "a client certificate needs its key and a key its certificate: "
            "give both --tls-cert and --tls-key (or CUMOD_TLS_CERT and "
            "CUMOD_TLS_KEY)");
    if ((rv = nng_tls_config_alloc(&c->tls, NNG_TLS_MODE_CLIENT)) != 0)
        return cumod__client_set_error(cumod__client_nng_err(rv),
                                       "cannot make a TLS configuration: %s",
                                       nng_strerror(rv));
    if ((rv = nng_tls_config_ca_file(c->tls, ca)) != 0)
        return cumod__client_set_error(
            CUMOD_EINVAL, "cannot read the CA certificates %s (--tls-ca): %s",
            ca, nng_strerror(rv));
    if (cert != NULL) {
        if ((certpem = client_slurp(cert)) == NULL ||
            (keypem = client_slurp(key)) == NULL) {
            int e = errno;
            free(certpem);
            return cumod__client_set_error(CUMOD_EINVAL, "cannot read %s: %s",
                                           certpem == NULL ? cert : key,
                                           strerror(e));
        }
        rv = nng_tls_config_own_cert(c->tls, certpem, keypem, NULL);
        free(certpem);
        free(keypem);
        if (rv != 0)
            return cumod__client_set_error(
                CUMOD_EINVAL,
                "cannot use the certificate %s with the key %s (PEM, the key "
                "not encrypted): %s",
                cert, key, nng_strerror(rv));
    }
    /* tls+tcp://HOST:PORT, tls+tcp://[V6]:PORT */
    h = strstr(c->url, "://");
    h = h ? h + 3 : c->url;
    if (*h == '[') {
        h++;
        end = strchr(h, ']');
    } else {
        end = strrchr(h, ':');
    }
    if (end == NULL)
        end = h + strlen(h);
    snprintf(host, sizeof(host), "%.*s", (int)(end - h), h);
    if (host[0] != '\0' && (rv = nng_tls_config_server_name(c->tls, host)) != 0)
        return cumod__client_set_error(cumod__client_nng_err(rv),
                                       "cannot set the server name %s: %s",
                                       host, nng_strerror(rv));
    return CUMOD_OK;
}

int
cumod__client_nng_err(int rv)
{
    switch (rv) {
    case NNG_ETIMEDOUT:
        return CUMOD_ETIMEDOUT;
    case NNG_ECONNREFUSED:
    case NNG_ENOENT:
    case NNG_EADDRINVAL:
        return CUMOD_ECONNREFUSED;
    case NNG_ECLOSED:
    case NNG_ECONNRESET:
    case NNG_ECONNSHUT:
        return CUMOD_ECLOSED;
    case NNG_ENOMEM:
        return CUMOD_ENOMEM;
    case NNG_EPERM:
        return CUMOD_EPERM;
    case NNG_EMSGSIZE:
        return CUMOD_ETOOBIG;
    case NNG_EINVAL:
        return CUMOD_EINVAL;
    default:
        return CUMOD_EIO;
    }
}

int
cumod__client_refused(cumod_client *c)
{
    /* A remote peer has no uid for cumodd to judge: say what it judged. */
    if (strncmp(c->url, "ipc://", 6) != 0)
        return cumod__client_set_error(
            CUMOD_EPERM,
            "cumodd at %s closed the connection before answering anything: "
            "remote peers have no uid, so its --allow-uid / --allow-gid "
            "admit none; a tls+tcp:// client is admitted by its certificate "
            "(its --tls-ca, --allow-cert-subject), or it has "
            "--max-connections open; its log says which (CUMOD-ACCESS); "
            "open a new client to try again",
            c->url);
    return cumod__client_set_error(
        CUMOD_EPERM,
        "cumodd at %s closed the connection before answering anything: "
        "this user (uid %d) may not be allowed (its --allow-uid / "
        "--allow-gid), or it has --max-connections open; its log says "
        "which (CUMOD-ACCESS); open a new client to try again",
        c->url, (int)getuid());
}

/* Whether connection id is up; under c->mtx. */
static int
client_live(const cumod_client *c, uint32_t id)
{
    for (unsigned i = 0; i < c->n_live; i++)
        if (c->live[i] == id)
            return 1;
    return 0;
}

/* nng's thread: a connection came or went. A connection of a dialer this
 * client closed itself (cumod__client_redial, after an unanswered second) going
 * away is no news: calls in flight are not failed for it, since they may
 * be on the new dialer's connection (and a call that never had a reply
 * would read it as a refusal); one still on the old connection runs into
 * its own timeout. The old dialer's connection and the new one's can both
 * be up a moment, and their events come in either order: the client is
 * connected while any is, and the ring goes with the one whose session
 * took it, whichever that is. */
void
cumod__client_on_pipe(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    cumod_client *c = arg;
    uint32_t id = (uint32_t)nng_pipe_id(p);
    unsigned n = sizeof(c->live) / sizeof(c->live[0]);

    nng_mtx_lock(c->mtx);
    if (ev == NNG_PIPE_EV_ADD_POST) {
        if (c->n_live == n) { /* the oldest gives way (never seen: 2 at most) */
            memmove(c->live, c->live + 1, (n - 1) * sizeof(c->live[0]));
            c->n_live--;
        }
        c->live[c->n_live++] = id;
        c->connected = 1;
        c->pipe = p;
        nng_mtx_unlock(c->mtx);
        return;
    }
    for (unsigned i = 0; i < c->n_live; i++)
        if (c->live[i] == id) {
            memmove(c->live + i, c->live + i + 1,
                    (c->n_live - i - 1) * sizeof(c->live[0]));
            c->n_live--;
            break;
        }
    if (id == c->device_pipe)
        c->device_lost = 1; /* its session's choice of device went too */
    /* The ring was that connection's session's: gone with it (the next
     * call on another connection opens another). */
    if (id == c->ring_on)
        cumod__ring_kill(atomic_load(&c->ring));
    if (nng_dialer_id(nng_pipe_dialer(p)) == nng_dialer_id(c->dialer))
        for (cumod__call *k = c->calls; k != NULL; k = k->next)
            nng_aio_abort(k->aio, NNG_ECONNRESET);
    if (id == (uint32_t)nng_pipe_id(c->pipe)) {
        /* The newest still up, if another is (an old dialer's, closing). */
        c->connected = c->n_live > 0;
        if (c->n_live > 0)
            c->pipe.id = c->live[c->n_live - 1];
    }
    nng_mtx_unlock(c->mtx);
}

void
cumod__client_call_add(cumod_client *c, cumod__call *k)
{
    nng_mtx_lock(c->mtx);
    k->next = c->calls;
    c->calls = k;
    nng_mtx_unlock(c->mtx);
}

void
cumod__client_call_remove(cumod_client *c, cumod__call *k, int replied)
{
    nng_mtx_lock(c->mtx);
    for (cumod__call **pp = &c->calls; *pp != NULL; pp = &(*pp)->next)
        if (*pp == k) {
            *pp = k->next;
            break;
        }
    if (replied)
        c->replies++;
    nng_mtx_unlock(c->mtx);
}

/* The detail for a call whose connection ended under it. A client that
 * never had a reply was refused (its uid, or the daemon's connection
 * limit): the dialer is closed then, so that the library does not keep
 * knocking (each redial would be refused and logged again). Whether nng
 * fails the call or our pipe callback does first is a race, so this looks
 * at the client's whole history, not at the connection's. */
int
cumod__client_conn_ended(cumod_client *c)
{
    int unheard, close_dialer = 0;
    nng_dialer d;

    nng_mtx_lock(c->mtx);
    unheard = c->replies == 0;
    if (unheard && !c->refused) {
        c->refused = 1;
        close_dialer = 1;
        d = c->dialer;
    }
    nng_mtx_unlock(c->mtx);
    if (close_dialer)
        nng_dialer_close(d);
    if (unheard)
        return cumod__client_refused(c);
    return cumod__client_set_error(
        CUMOD_ECLOSED,
        "cumodd at %s closed the connection (it stopped or restarted, or "
        "refused a message): the call did not complete, and this "
        "connection's buffers, segments and streams are gone",
        c->url);
}

/* No connection came up for a while (a send could not leave): when none is
 * up, dial again, once per stall whatever the number of threads waiting.
 * This heals what nng 1.5.2's listener does after a peer disconnects
 * during its handshake (nanomsg/nng #1518): it stops accepting, and a
 * connection made then is never served, though cumodd listens again on a
 * new socket file within a second or so. */
void
cumod__client_redial(cumod_client *c, unsigned gen, int force)
{
    nng_dialer old;
    int redial = 0;

    nng_mtx_lock(c->mtx);
    if ((force || !c->connected) && !c->refused && c->dial_gen == gen) {
        c->dial_gen++;
        old = c->dialer;
        redial = 1;
    }
    nng_mtx_unlock(c->mtx);
    if (!redial)
        return;
    /* The new dialer is the client's before the old one closes, so that
     * the old connection's going is known as the old one's
     * (cumod__client_on_pipe). */
    nng_dialer d;
    if (cumod__client_dial(c, NNG_FLAG_NONBLOCK, &d) == 0) {
        nng_mtx_lock(c->mtx);
        c->dialer = d;
        nng_mtx_unlock(c->mtx);
    }
    nng_dialer_close(old);
}

uint32_t
cumod__client_pipe(cumod_client *c)
{
    uint32_t id;

    nng_mtx_lock(c->mtx);
    id = c->connected && !c->refused && nng_pipe_id(c->pipe) > 0
             ? (uint32_t)nng_pipe_id(c->pipe)
             : 0;
    nng_mtx_unlock(c->mtx);
    return id;
}

void
cumod__client_ring_off(cumod_client *c, const char *fmt, ...)
{
    char why[sizeof(c->ring_why)];
    int tell;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    nng_mtx_lock(c->mtx);
    tell = !c->ring_why_told || strcmp(c->ring_why, why) != 0;
    memcpy(c->ring_why, why, sizeof(why));
    c->ring_why_told = 1;
    nng_mtx_unlock(c->mtx);
    if (tell)
        cumod__client_log(CUMOD_LOG_WARNING,
                          "cumod: the client of %s goes over the connection, "
                          "not the fast path: %s",
                          c->url, why);
}

/* Opens a ring for connection pipe's session: at cumod_open, and on the
 * first call over each later connection (after a dropped connection or a
 * restarted daemon), once per connection. A thread that finds another
 * opening one goes over nng meanwhile. */
void
cumod__client_ring_try(cumod_client *c, uint32_t pipe)
{
    cumod__ring *g, *old = NULL;
    uint32_t on = 0;
    int expect = 0, fresh, kept = 1;
    char detail[1024];

    if (pipe == 0 ||
        !atomic_compare_exchange_strong(&c->ring_opening, &expect, 1))
        return;
    nng_mtx_lock(c->mtx);
    fresh = c->ring_pipe != pipe;
    c->ring_pipe = pipe;
    nng_mtx_unlock(c->mtx);
    if (!fresh) {
        atomic_store(&c->ring_opening, 0);
        return;
    }
    /* The caller's detail is its own call's, not the ring's. */
    snprintf(detail, sizeof(detail), "%s", cumod_last_detail());
    if (cumod__ring_open(c, &g, &on) != CUMOD_OK) {
        cumod__client_ring_off(c, "cumodd did not take a ring: %s",
                               cumod_last_detail());
    } else {
        nng_mtx_lock(c->mtx);
        old = atomic_load(&c->ring);
        if (old != NULL) {
            cumod__ring **v =
                realloc(c->old_rings, (c->n_old_rings + 1) * sizeof(*v));
            if (v == NULL)
                kept = 0;
            else {
                c->old_rings = v;
                v[c->n_old_rings++] = old;
            }
        }
        if (kept) {
            atomic_store(&c->ring, g);
            c->ring_why[0] = '\0';
            c->ring_why_told = 0;
            /* The ring is the session's that answered, which need not be
             * the connection tried: while a redial's old connection is
             * still up, nng may send on it. When that one goes, so does
             * the ring, and the next call tries the newest again. */
            if (on == 0)
                on = pipe;
            c->ring_on = on;
            c->ring_pipe = on;
            /* The connection went while the ring was made: it is that
             * session's, gone too (the next connection tries again). */
            if (!client_live(c, on))
                cumod__ring_kill(g);
        }
        nng_mtx_unlock(c->mtx);
        if (!kept)
            cumod__ring_destroy(g);
        else if (old != NULL)
            cumod__client_log(CUMOD_LOG_INFO,
                              "cumod: the client of %s is on the fast path "
                              "again (a new ring on its new connection)",
                              c->url);
    }
    (void)cumod__client_set_error(CUMOD_OK, "%s", detail);
    atomic_store(&c->ring_opening, 0);
}

/* The ring a call may take now, or NULL: a dead one is replaced first when
 * the connection it died with has been made again. */
cumod__ring *
cumod__client_ring_now(cumod_client *c)
{
    cumod__ring *g = atomic_load_explicit(&c->ring, memory_order_acquire);

    if ((g != NULL && cumod__ring_alive(g)) || !c->ring_want)
        return g;
    if (atomic_load(&c->shut) != 0)
        return NULL; /* shut down: no ring again */
    /* Once per connection: cumod__client_ring_try returns at once for the
     * connection it has tried. */
    cumod__client_ring_try(c, cumod__client_pipe(c));
    return atomic_load_explicit(&c->ring, memory_order_acquire);
}

size_t
cumod_fast_path_why(cumod_client *c, char *buf, size_t cap)
{
    const char *why;
    size_t n;

    if (c == NULL)
        why = "the client is NULL";
    else if (cumod_fast_path(c))
        why = "";
    else {
        nng_mtx_lock(c->mtx);
        n = (size_t)snprintf(
            buf, cap, "%s",
            c->ring_why[0] != '\0'
                ? c->ring_why
                : "the connection ended: a new ring is opened on the next "
                  "connection");
        nng_mtx_unlock(c->mtx);
        return n;
    }
    return (size_t)snprintf(buf, cap, "%s", why);
}
