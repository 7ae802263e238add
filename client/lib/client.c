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

/* How long a request may wait for a connection before a new one is
 * dialed (client_redial). */
#define CLIENT_STALL_MS 1000

/* nng's codes, converted once where they enter. */
static int client_nng_err(int rv);

/* nng_dial, with the client's TLS configuration on tls+ URLs. */
static int
client_dial(cumod_client *c, int flags, nng_dialer *out)
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
static int
client_tls(cumod_client *c, const cumod_tls_files *files)
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
        return cumod__client_set_error(client_nng_err(rv),
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
        return cumod__client_set_error(client_nng_err(rv),
                                       "cannot set the server name %s: %s",
                                       host, nng_strerror(rv));
    return CUMOD_OK;
}

static int
client_nng_err(int rv)
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

static int
client_refused(cumod_client *c)
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

/* nng's thread: a connection came or went. A connection of a dialer this
 * client closed itself (client_redial, after an unanswered second) going
 * away is no news: calls in flight are not failed for it, since they may
 * be on the new dialer's connection (and a call that never had a reply
 * would read it as a refusal); one still on the old connection runs into
 * its own timeout. */
static void
client_on_pipe(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    cumod_client *c = arg;
    nng_mtx_lock(c->mtx);
    if (ev == NNG_PIPE_EV_REM_POST &&
        (uint32_t)nng_pipe_id(p) == c->device_pipe)
        c->device_lost = 1; /* its session's choice of device went too */
    if (ev == NNG_PIPE_EV_ADD_POST) {
        c->connected = 1;
        c->pipe = p;
    } else if (nng_dialer_id(nng_pipe_dialer(p)) != nng_dialer_id(c->dialer)) {
        if (nng_pipe_id(p) == nng_pipe_id(c->pipe)) {
            c->connected = 0;
            cumod__ring_kill(atomic_load(&c->ring));
        }
    } else {
        c->connected = 0;
        for (cumod__call *k = c->calls; k != NULL; k = k->next)
            nng_aio_abort(k->aio, NNG_ECONNRESET);
        /* The ring was that connection's session's: gone with it (the
         * next call on a new connection opens another). */
        cumod__ring_kill(atomic_load(&c->ring));
    }
    nng_mtx_unlock(c->mtx);
}

static void
client_call_add(cumod_client *c, cumod__call *k)
{
    nng_mtx_lock(c->mtx);
    k->next = c->calls;
    c->calls = k;
    nng_mtx_unlock(c->mtx);
}

static void
client_call_remove(cumod_client *c, cumod__call *k, int replied)
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
static int
client_conn_ended(cumod_client *c)
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
        return client_refused(c);
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
static void
client_redial(cumod_client *c, unsigned gen, int force)
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
     * (client_on_pipe). */
    nng_dialer d;
    if (client_dial(c, NNG_FLAG_NONBLOCK, &d) == 0) {
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
static void
client_ring_try(cumod_client *c, uint32_t pipe)
{
    cumod__ring *g, *old = NULL;
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
    if (cumod__ring_open(c, &g) != CUMOD_OK) {
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
            /* The connection went while the ring was made: it is that
             * session's, gone too (the next connection tries again). */
            if ((uint32_t)nng_pipe_id(c->pipe) != pipe || !c->connected)
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
static cumod__ring *
client_ring_now(cumod_client *c)
{
    cumod__ring *g = atomic_load_explicit(&c->ring, memory_order_acquire);
    uint32_t pipe, tried;

    if ((g != NULL && cumod__ring_alive(g)) || !c->ring_want)
        return g;
    pipe = cumod__client_pipe(c);
    nng_mtx_lock(c->mtx);
    tried = c->ring_pipe;
    nng_mtx_unlock(c->mtx);
    if (pipe != 0 && pipe != tried)
        client_ring_try(c, pipe);
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
    if ((rv = client_tls(c, tls)) != CUMOD_OK) {
        client_free_early(c);
        return rv;
    }
    if ((rv = nng_req0_open(&c->sock)) != 0) {
        client_free_early(c);
        return cumod__client_set_error(client_nng_err(rv),
                                       "cannot open a req socket: %s",
                                       nng_strerror(rv));
    }
    nng_pipe_notify(c->sock, NNG_PIPE_EV_ADD_POST, client_on_pipe, c);
    nng_pipe_notify(c->sock, NNG_PIPE_EV_REM_POST, client_on_pipe, c);
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

    while ((rv = client_dial(c, 0, &c->dialer)) == NNG_EAGAIN &&
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
    return cumod__client_set_error(
        client_nng_err(rv), "cannot connect to %s: %s", url, nng_strerror(rv));
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
        client_redial(c, gen, 1);
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
        client_ring_try(c, cumod__client_pipe(c));
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

void
cumod_close(cumod_client *c)
{
    if (c == NULL)
        return;
    /* The contract says no call is in progress, so no synchronous operation
     * is blocked on the socket: closing cannot hit nng #1543. */
    nng_close(c->sock);
    if (c->tls != NULL)
        nng_tls_config_free(c->tls);
    cumod__ring_destroy(atomic_load(&c->ring));
    for (size_t i = 0; i < c->n_old_rings; i++)
        cumod__ring_destroy(c->old_rings[i]);
    free(c->old_rings);
    cumod__stage_free(c);
    nng_mtx_free(c->stage_mtx);
    nng_mtx_free(c->mtx);
    free(c);
}

int
cumod__client_call(cumod_client *c, Cumod__Request *req, Cumod__Reply **out)
{
    return cumod__client_call_ex(c, req, out, 0);
}

/* The reply r (decoded, ours to free) to req: checked, and handed on. */
static int
client_reply(Cumod__Request *req, Cumod__Reply *reply, Cumod__Reply **out,
             int keep_on_error)
{
    int code;

    if (reply == NULL)
        return cumod__client_set_error(CUMOD_EPROTO,
                                       "cumodd's reply is not a valid "
                                       "cumod.Reply message");
    if (reply->id != req->id) {
        cumod__reply__free_unpacked(reply, NULL);
        return cumod__client_set_error(CUMOD_EPROTO,
                                       "cumodd answered request %llu with the "
                                       "reply to another",
                                       (unsigned long long)req->id);
    }
    if (reply->status != NULL && reply->status->code != CUMOD_OK) {
        code = cumod__client_set_error(reply->status->code, "%s",
                                       reply->status->message);
        if (keep_on_error)
            *out = reply;
        else
            cumod__reply__free_unpacked(reply, NULL);
        return code;
    }
    *out = reply;
    return cumod__client_ok();
}

/* Through ring g (req is one it takes): CUMOD__RING_NOT_TAKEN when it is
 * not for this call now (go over nng), else what came of it. */
static int
client_call_ring(cumod_client *c, cumod__ring *g, Cumod__Request *req,
                 const cumod__pack_items *pre, Cumod__Reply **out,
                 int keep_on_error)
{
    Cumod__Reply *reply = NULL;
    int connected;

    nng_mtx_lock(c->mtx);
    connected = c->connected && !c->refused;
    nng_mtx_unlock(c->mtx);
    if (!connected)
        return CUMOD__RING_NOT_TAKEN; /* nng knows what to do */
    switch (cumod__ring_call(g, req, pre, c->timeout_ms, &reply)) {
    case CUMOD_OK:
        nng_mtx_lock(c->mtx);
        c->replies++;
        nng_mtx_unlock(c->mtx);
        return client_reply(req, reply, out, keep_on_error);
    case CUMOD__RING_NOT_TAKEN:
        return CUMOD__RING_NOT_TAKEN;
    case CUMOD__RING_TIMEDOUT:
        return cumod__client_set_error(
            CUMOD_ETIMEDOUT,
            "no reply from cumodd at %s within %d ms (is it overloaded or "
            "stuck?)",
            c->url, c->timeout_ms);
    case CUMOD__RING_BROKEN:
        cumod__client_ring_off(c, "cumodd's reply ring held bytes that are "
                                  "not a reply");
        return cumod__client_set_error(
            CUMOD_EPROTO,
            "cumodd's reply ring holds bytes that are not a reply: the call "
            "may or may not have run; later calls go over the connection");
    default:
        nng_mtx_lock(c->mtx);
        connected = c->connected;
        nng_mtx_unlock(c->mtx);
        if (!connected)
            return client_conn_ended(c);
        cumod__client_ring_off(c, "cumodd closed this client's ring (its "
                                  "log says why, CUMOD-RING)");
        return cumod__client_set_error(
            CUMOD_ECLOSED,
            "cumodd closed this client's ring while the call was in "
            "progress (its log says why, CUMOD-RING): the call may or may "
            "not have run; later calls go over the connection");
    }
}

int
cumod__client_call_ex(cumod_client *c, Cumod__Request *req, Cumod__Reply **out,
                      int keep_on_error)
{
    return cumod__client_call_timed(c, req, NULL, out, keep_on_error, 0);
}

/* req packed into a new message of its size (*out): CUMOD_OK, or the
 * error (set). */
static int
client_pack(cumod_client *c, Cumod__Request *req, const cumod__pack_items *pre,
            nng_msg **out)
{
    size_t fast;
    int rv;
    size_t len = (fast = cumod__pack_fast_size(req, pre)) > 0
                     ? fast
                     : cumod__request__get_packed_size(req);
    uint32_t max = atomic_load(&c->max_message);

    if (max > 0 && len > max)
        return cumod__client_set_error(
            CUMOD_ETOOBIG,
            "the request is %zu bytes, over cumodd's --max-message (%u "
            "bytes): it was not sent (cumodd would drop it and close the "
            "connection); send less at a time",
            len, (unsigned)max);
    if ((rv = nng_msg_alloc(out, len)) != 0)
        return cumod__client_set_error(client_nng_err(rv), "out of memory");
    if (fast > 0)
        (void)cumod__pack_fast(req, pre, nng_msg_body(*out));
    else
        cumod__request__pack(req, nng_msg_body(*out));
    return CUMOD_OK;
}

/* Sends msg (then nng's) on ctx through k's aio, before until. The send
 * leaves once a connection is up; while none comes, a new one is tried
 * every CLIENT_STALL_MS (client_redial). On failure msg is freed and k
 * removed. */
static int
client_send(cumod_client *c, nng_ctx ctx, cumod__call *k, nng_msg *msg,
            nng_time until)
{
    nng_aio *aio = k->aio;
    int rv;

    for (;;) {
        nng_time now = nng_clock();
        unsigned gen;
        nng_duration left = now < until ? (nng_duration)(until - now) : 0;
        nng_mtx_lock(c->mtx);
        gen = c->dial_gen;
        if (c->refused) {
            nng_mtx_unlock(c->mtx);
            client_call_remove(c, k, 0);
            nng_msg_free(msg);
            return client_refused(c);
        }
        nng_mtx_unlock(c->mtx);
        nng_aio_set_timeout(aio,
                            left < CLIENT_STALL_MS ? left : CLIENT_STALL_MS);
        nng_aio_set_msg(aio, msg);
        nng_ctx_send(ctx, aio);
        nng_aio_wait(aio);
        rv = nng_aio_result(aio);
        if (rv != NNG_ETIMEDOUT || nng_clock() >= until)
            break;
        client_redial(c, gen, 0);
    }
    nng_aio_set_timeout(
        aio, until > nng_clock() ? (nng_duration)(until - nng_clock()) : 1);
    if (rv != 0) {
        client_call_remove(c, k, 0);
        /* A failed send leaves the message with us. */
        nng_msg_free(msg);
        return rv == NNG_ECONNRESET
                   ? client_conn_ended(c)
                   : cumod__client_set_error(client_nng_err(rv),
                                             "cannot send to cumodd at %s: %s",
                                             c->url, nng_strerror(rv));
    }
    return CUMOD_OK;
}

/* The reply on ctx through k's aio (k removed): *reply decoded (NULL when
 * it is not a reply) and *pipe_id the connection it came over. */
static int
client_recv(cumod_client *c, nng_ctx ctx, cumod__call *k, Cumod__Reply **reply,
            int *pipe_id)
{
    nng_aio *aio = k->aio;
    nng_msg *msg;
    int rv;

    nng_ctx_recv(ctx, aio);
    nng_aio_wait(aio);
    client_call_remove(c, k, nng_aio_result(aio) == 0);
    if ((rv = nng_aio_result(aio)) != 0) {
        if (rv == NNG_ECONNRESET)
            return client_conn_ended(c);
        return cumod__client_set_error(
            client_nng_err(rv), "no reply from cumodd at %s: %s%s", c->url,
            nng_strerror(rv),
            rv == NNG_ETIMEDOUT ? " (is it overloaded or stuck?)" : "");
    }
    msg = nng_aio_get_msg(aio);
    *reply = cumod__reply__unpack(NULL, nng_msg_len(msg), nng_msg_body(msg));
    *pipe_id = nng_pipe_id(nng_msg_get_pipe(msg));
    nng_msg_free(msg);
    return CUMOD_OK;
}

/* The reply to req that came over the connection pipe_id: checked, and
 * handed on in *out. */
static int
client_answered(cumod_client *c, Cumod__Request *req, Cumod__Reply *reply,
                int pipe_id, Cumod__Reply **out, int keep_on_error)
{
    int rv;

    if ((rv = client_reply(req, reply, out, keep_on_error)) != CUMOD_OK)
        return rv;
    /* Which session answered: one that has not heard the device chosen is
     * an error (device.c). */
    if ((rv = cumod__device_replied(
             c, req, pipe_id > 0 ? (uint32_t)pipe_id : 0)) != CUMOD_OK) {
        cumod__reply__free_unpacked(*out, NULL);
        *out = NULL;
        return rv;
    }
    /* A call the ring would have taken came back over a new connection
     * (it waited for it): the next finds the new ring, opened now. Not
     * for control calls (SetDevice is answered before its connection is
     * marked as having heard it). */
    if (c->ring_want && cumod__ring_eligible(req))
        (void)client_ring_now(c);
    return CUMOD_OK;
}

int
cumod__client_call_timed(cumod_client *c, Cumod__Request *req,
                         const cumod__pack_items *pre, Cumod__Reply **out,
                         int keep_on_error, int timeout_ms)
{
    nng_ctx ctx;
    nng_aio *aio = NULL;
    nng_msg *msg = NULL;
    Cumod__Reply *reply = NULL;
    cumod__call k = {0};
    int rv, code, pipe_id = 0;

    if (keep_on_error)
        *out = NULL;
    if ((rv = cumod__device_again(c, req)) != CUMOD_OK)
        return rv;
    req->version = CUMOD__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    req->id = atomic_fetch_add(&c->next_id, 1) + 1;
    cumod__ring *g =
        c->ring_want && cumod__ring_eligible(req) ? client_ring_now(c) : NULL;
    if (g != NULL &&
        (rv = client_call_ring(c, g, req, pre, out, keep_on_error)) !=
            CUMOD__RING_NOT_TAKEN)
        return rv;
    /* A context per call: concurrent callers each get their own reply. */
    if ((rv = nng_ctx_open(&ctx, c->sock)) != 0)
        return cumod__client_set_error(client_nng_err(rv),
                                       "cannot open a request context: %s",
                                       nng_strerror(rv));
    if ((code = client_pack(c, req, pre, &msg)) != CUMOD_OK) {
        nng_ctx_close(ctx);
        return code;
    }
    if ((rv = nng_aio_alloc(&aio, NULL, NULL)) != 0) {
        nng_msg_free(msg);
        nng_ctx_close(ctx);
        return cumod__client_set_error(client_nng_err(rv), "out of memory");
    }
    k.aio = aio;
    client_call_add(c, &k);
    nng_time until =
        nng_clock() + (nng_time)(timeout_ms > 0 ? timeout_ms : c->timeout_ms);
    if ((code = client_send(c, ctx, &k, msg, until)) == CUMOD_OK)
        code = client_recv(c, ctx, &k, &reply, &pipe_id);
    nng_aio_free(aio);
    nng_ctx_close(ctx);
    if (code != CUMOD_OK)
        return code;
    return client_answered(c, req, reply, pipe_id, out, keep_on_error);
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

int
cumod__client_call_for(cumod_client *c, Cumod__Request *req,
                       Cumod__Reply__BodyCase want, const char *fn,
                       Cumod__Reply **out)
{
    Cumod__Reply *reply;
    int rv;

    if ((rv = cumod__client_call(c, req, &reply)) != CUMOD_OK)
        return rv;
    if (reply->body_case != want) {
        cumod__reply__free_unpacked(reply, NULL);
        return cumod__client_set_error(CUMOD_EPROTO,
                                       "%s: cumodd answered with another "
                                       "kind of reply",
                                       fn);
    }
    *out = reply;
    return CUMOD_OK;
}
