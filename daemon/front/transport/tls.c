/* SPDX-License-Identifier: MIT */
/*
 * cumodd's TLS engine for nng (nng's engine API, engine.h) over mbed TLS
 * 2.28, modelled on nng 1.5.2's own (src/supplemental/tls/mbedtls/tls.c,
 * MIT), and the credential sets of tls.h. See tls.h for why it exists.
 *
 * A generation (tls_gen) is one mbedtls_ssl_config with the certificates
 * and key it points to; it is never changed once a connection uses it, and
 * is freed with the last connection (or set) that holds it. A set
 * (cumod_tls) holds the generation that new connections get; an engine
 * configuration bound to a set asks it at each new connection.
 */
#include "front/transport/tls.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/oid.h>
#include <mbedtls/version.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>
#include <nng/supplemental/tls/engine.h>

#include "common/log.h"
#include "common/status.h"

#define TLS_LOG_LINES 10
#define TLS_LOG_WINDOW_MS 10000

typedef struct tls_gen {
    atomic_int refs;
    mbedtls_ssl_config conf;
    mbedtls_x509_crt ca, own;
    mbedtls_pk_context key;
    /* --allow-cert-subject, checked in the handshake (conn_verify): names
     * one after another, each ending in a NUL; nsubjects 0: any. */
    char *subjects;
    int nsubjects;
} tls_gen;

struct cumod_tls {
    atomic_int refs;     /* the opener's, and one per engine configuration */
    pthread_mutex_t mtx; /* guards cur and the log window; a leaf */
    tls_gen *cur;
    nng_tls_config *ncfg;
    uint64_t window_ms;
    unsigned lines;
    uint64_t unsaid;
};

struct nng_tls_engine_config {
    cumod_tls *bound; /* NULL: an ordinary configuration, gen below */
    tls_gen *gen;
    char *server_name;
};

struct nng_tls_engine_conn {
    mbedtls_ssl_context ctx;
    tls_gen *gen;
    cumod_tls *bound;
    /* Set by conn_verify when the peer's certificate names no one in
     * --allow-cert-subject: its CN and first DNS name, for the log. */
    int unlisted;
    char cn[128], dns[128];
};

/* The engine's hooks give no argument of ours, so two hand-offs go by the
 * calling thread, each set just before one synchronous nng call and cleared
 * after it: the set a configuration being allocated is bound to
 * (nng_tls_config_alloc calls config_init on this thread), and the peer
 * whose names are wanted (reading NNG_OPT_TLS_VERIFIED calls conn_verified
 * on this thread). Nothing else is kept between calls. */
static _Thread_local cumod_tls *tls_binding;
static _Thread_local cumod_peer *tls_asking;

static int
tls_random(void *arg, unsigned char *buf, size_t len)
{
    (void)arg;
    while (len > 0) {
        ssize_t n = getrandom(buf, len, 0);
        if (n <= 0)
            return MBEDTLS_ERR_SSL_INTERNAL_ERROR;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

static int
tls_nng_err(int err)
{
    switch (err) {
    case MBEDTLS_ERR_SSL_NO_CLIENT_CERTIFICATE:
    case MBEDTLS_ERR_SSL_CA_CHAIN_REQUIRED:
    case MBEDTLS_ERR_SSL_PEER_VERIFY_FAILED:
    case MBEDTLS_ERR_SSL_NO_USABLE_CIPHERSUITE:
    case MBEDTLS_ERR_X509_CERT_VERIFY_FAILED:
        return NNG_EPEERAUTH;
    case MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY:
        return NNG_ECONNREFUSED;
    case MBEDTLS_ERR_SSL_ALLOC_FAILED:
        return NNG_ENOMEM;
    case MBEDTLS_ERR_SSL_TIMEOUT:
        return NNG_ETIMEDOUT;
    case MBEDTLS_ERR_SSL_CONN_EOF:
        return NNG_ECLOSED;
    default:
        return NNG_ECRYPTO;
    }
}

static int
tls_net_send(void *tls, const unsigned char *buf, size_t len)
{
    size_t sz = len;
    switch (nng_tls_engine_send(tls, buf, &sz)) {
    case 0:
        return (int)sz;
    case NNG_EAGAIN:
        return MBEDTLS_ERR_SSL_WANT_WRITE;
    default:
        return MBEDTLS_ERR_NET_SEND_FAILED;
    }
}

static int
tls_net_recv(void *tls, unsigned char *buf, size_t len)
{
    size_t sz = len;
    switch (nng_tls_engine_recv(tls, buf, &sz)) {
    case 0:
        return (int)sz;
    case NNG_EAGAIN:
        return MBEDTLS_ERR_SSL_WANT_READ;
    default:
        return MBEDTLS_ERR_NET_RECV_FAILED;
    }
}

/* --- Generations ---------------------------------------------------------- */

static void
gen_unref(tls_gen *g)
{
    if (g == NULL || atomic_fetch_sub(&g->refs, 1) != 1)
        return;
    mbedtls_ssl_config_free(&g->conf);
    mbedtls_x509_crt_free(&g->ca);
    mbedtls_x509_crt_free(&g->own);
    mbedtls_pk_free(&g->key);
    free(g->subjects);
    free(g);
}

static tls_gen *
gen_new(int server)
{
    tls_gen *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return NULL;
    atomic_init(&g->refs, 1);
    mbedtls_ssl_config_init(&g->conf);
    mbedtls_x509_crt_init(&g->ca);
    mbedtls_x509_crt_init(&g->own);
    mbedtls_pk_init(&g->key);
    if (mbedtls_ssl_config_defaults(
            &g->conf, server ? MBEDTLS_SSL_IS_SERVER : MBEDTLS_SSL_IS_CLIENT,
            MBEDTLS_SSL_TRANSPORT_STREAM, MBEDTLS_SSL_PRESET_DEFAULT) != 0) {
        gen_unref(g);
        return NULL;
    }
    mbedtls_ssl_conf_authmode(&g->conf, server ? MBEDTLS_SSL_VERIFY_NONE
                                               : MBEDTLS_SSL_VERIFY_REQUIRED);
    /* TLS 1.2, as nng's engine: mbed TLS 2.28 has no usable 1.3. */
    mbedtls_ssl_conf_min_version(&g->conf, MBEDTLS_SSL_MAJOR_VERSION_3,
                                 MBEDTLS_SSL_MINOR_VERSION_3);
    mbedtls_ssl_conf_max_version(&g->conf, MBEDTLS_SSL_MAJOR_VERSION_3,
                                 MBEDTLS_SSL_MINOR_VERSION_3);
    mbedtls_ssl_conf_rng(&g->conf, tls_random, NULL);
    return g;
}

static void
tls_strerror(int rv, char *buf, size_t len)
{
    mbedtls_strerror(rv, buf, len);
}

/* A server generation from the three files. */
static cumod_err
gen_load(const cumod_tls_opts *o, tls_gen **out, char *msg, size_t msglen)
{
    const char *cert = o->cert, *key = o->key, *ca = o->ca;
    char why[200];
    tls_gen *g = gen_new(1);
    size_t total = 0;
    int rv;

    if (g == NULL)
        return cumod__errf(msg, msglen, CUMOD_ENOMEM, "out of memory");
    for (int i = 0; i < o->nsubjects; i++)
        total += strlen(o->subjects[i]) + 1;
    if (total > 0) {
        if ((g->subjects = malloc(total)) == NULL) {
            gen_unref(g);
            return cumod__errf(msg, msglen, CUMOD_ENOMEM, "out of memory");
        }
        for (size_t at = 0, i = 0; i < (size_t)o->nsubjects; i++) {
            size_t n = strlen(o->subjects[i]) + 1;
            memcpy(g->subjects + at, o->subjects[i], n);
            at += n;
        }
        g->nsubjects = o->nsubjects;
    }
    if ((rv = mbedtls_x509_crt_parse_file(&g->own, cert)) != 0) {
        tls_strerror(rv, why, sizeof(why));
        cumod__msgf(msg, msglen,
                    "cannot read the certificate %s (--tls-cert): %s", cert,
                    rv > 0 ? "a certificate in it is not valid PEM" : why);
        goto fail;
    }
    if ((rv = mbedtls_pk_parse_keyfile(&g->key, key, NULL)) != 0) {
        tls_strerror(rv, why, sizeof(why));
        cumod__msgf(msg, msglen,
                    "cannot read the private key %s (--tls-key; PEM, not "
                    "encrypted): %s",
                    key, why);
        goto fail;
    }
    if (mbedtls_pk_check_pair(&g->own.pk, &g->key) != 0) {
        cumod__msgf(msg, msglen,
                    "the private key %s (--tls-key) is not the key of the "
                    "certificate %s (--tls-cert)",
                    key, cert);
        goto fail;
    }
    if ((rv = mbedtls_ssl_conf_own_cert(&g->conf, &g->own, &g->key)) != 0) {
        tls_strerror(rv, why, sizeof(why));
        cumod__msgf(msg, msglen, "cannot use the certificate %s: %s", cert,
                    why);
        goto fail;
    }
    if (ca != NULL) {
        if ((rv = mbedtls_x509_crt_parse_file(&g->ca, ca)) != 0) {
            tls_strerror(rv, why, sizeof(why));
            cumod__msgf(msg, msglen,
                        "cannot read the CA certificates %s (--tls-ca): %s", ca,
                        rv > 0 ? "a certificate in it is not valid PEM" : why);
            goto fail;
        }
        mbedtls_ssl_conf_ca_chain(&g->conf, &g->ca, NULL);
        mbedtls_ssl_conf_authmode(&g->conf, MBEDTLS_SSL_VERIFY_REQUIRED);
    }
    *out = g;
    return CUMOD_OK;

fail:
    gen_unref(g);
    return CUMOD_EINVAL;
}

/* --- The engine: configurations ------------------------------------------ */

static void
tls_unref(cumod_tls *t)
{
    if (t == NULL || atomic_fetch_sub(&t->refs, 1) != 1)
        return;
    gen_unref(t->cur);
    pthread_mutex_destroy(&t->mtx);
    free(t);
}

static int
config_init(nng_tls_engine_config *cfg, nng_tls_mode mode)
{
    if (tls_binding != NULL) {
        cfg->bound = tls_binding;
        atomic_fetch_add(&cfg->bound->refs, 1);
        return 0;
    }
    if ((cfg->gen = gen_new(mode == NNG_TLS_MODE_SERVER)) == NULL)
        return NNG_ENOMEM;
    return 0;
}

static void
config_fini(nng_tls_engine_config *cfg)
{
    gen_unref(cfg->gen);
    tls_unref(cfg->bound);
    free(cfg->server_name);
}

/* The setters below change an ordinary configuration only: a bound one
 * takes its credentials from its set. */
static int
config_server_name(nng_tls_engine_config *cfg, const char *name)
{
    char *d = strdup(name);
    if (d == NULL)
        return NNG_ENOMEM;
    free(cfg->server_name);
    cfg->server_name = d;
    return 0;
}

static int
config_auth_mode(nng_tls_engine_config *cfg, nng_tls_auth_mode mode)
{
    static const int modes[] = {
        [NNG_TLS_AUTH_MODE_NONE] = MBEDTLS_SSL_VERIFY_NONE,
        [NNG_TLS_AUTH_MODE_OPTIONAL] = MBEDTLS_SSL_VERIFY_OPTIONAL,
        [NNG_TLS_AUTH_MODE_REQUIRED] = MBEDTLS_SSL_VERIFY_REQUIRED,
    };
    if ((unsigned)mode > NNG_TLS_AUTH_MODE_REQUIRED)
        return NNG_EINVAL;
    if (cfg->gen != NULL)
        mbedtls_ssl_conf_authmode(&cfg->gen->conf, modes[mode]);
    return 0;
}

static int
config_ca_chain(nng_tls_engine_config *cfg, const char *certs, const char *crl)
{
    int rv;
    if (crl != NULL)
        return NNG_ENOTSUP; /* nothing of cumod's gives one */
    if (cfg->gen == NULL)
        return 0;
    rv = mbedtls_x509_crt_parse(&cfg->gen->ca, (const unsigned char *)certs,
                                strlen(certs) + 1);
    if (rv != 0)
        return tls_nng_err(rv);
    mbedtls_ssl_conf_ca_chain(&cfg->gen->conf, &cfg->gen->ca, NULL);
    return 0;
}

static int
config_own_cert(nng_tls_engine_config *cfg, const char *cert, const char *key,
                const char *pass)
{
    tls_gen *g = cfg->gen;
    int rv;

    if (g == NULL)
        return 0;
    /* One pair: what cumod uses (nng's engine keeps a list). */
    if (g->own.raw.p != NULL)
        return NNG_EBUSY;
    if ((rv = mbedtls_x509_crt_parse(&g->own, (const unsigned char *)cert,
                                     strlen(cert) + 1)) != 0 ||
        (rv = mbedtls_pk_parse_key(&g->key, (const unsigned char *)key,
                                   strlen(key) + 1, (const unsigned char *)pass,
                                   pass ? strlen(pass) : 0)) != 0 ||
        (rv = mbedtls_ssl_conf_own_cert(&g->conf, &g->own, &g->key)) != 0)
        return tls_nng_err(rv);
    return 0;
}

static int
config_version(nng_tls_engine_config *cfg, nng_tls_version lo,
               nng_tls_version hi)
{
    (void)cfg;
    /* 1.2 only, as above; a range that holds it is fine. */
    if (lo > hi || lo > NNG_TLS_1_2 || hi < NNG_TLS_1_2)
        return NNG_ENOTSUP;
    return 0;
}

/* --- The engine: connections --------------------------------------------- */

/* A refused handshake, in words, logged at most TLS_LOG_LINES lines a
 * window (a port scanner must not flood the log). */
static void
tls_log_refusal(nng_tls_engine_conn *ec, int rv)
{
    cumod_tls *t = ec->bound;
    char why[400], info[240] = "";
    uint64_t now = cumod__mono_ms(), unsaid = 0;
    int say = 0;

    pthread_mutex_lock(&t->mtx);
    if (now - t->window_ms >= TLS_LOG_WINDOW_MS) {
        t->window_ms = now;
        t->lines = 0;
    }
    if (t->lines < TLS_LOG_LINES) {
        t->lines++;
        say = 1;
        unsaid = t->unsaid;
        t->unsaid = 0;
    } else {
        t->unsaid++;
    }
    pthread_mutex_unlock(&t->mtx);
    if (!say)
        return;
    switch (rv) {
    case MBEDTLS_ERR_SSL_NO_CLIENT_CERTIFICATE:
        snprintf(why, sizeof(why),
                 "the client sent no certificate (--tls-ca requires one)");
        break;
    case MBEDTLS_ERR_X509_CERT_VERIFY_FAILED: {
        if (ec->unlisted) {
            snprintf(why, sizeof(why),
                     "its certificate (CN '%s'%s%s) names no one in "
                     "--allow-cert-subject",
                     ec->cn, ec->dns[0] ? ", DNS " : "", ec->dns);
            break;
        }
        uint32_t flags = mbedtls_ssl_get_verify_result(&ec->ctx);
        mbedtls_x509_crt_verify_info(info, sizeof(info), "", flags);
        for (char *p = info; *p; p++)
            if (*p == '\n')
                *p = p[1] ? ';' : '\0';
        snprintf(why, sizeof(why),
                 "its certificate is not one --tls-ca vouches for: %s", info);
        break;
    }
    case MBEDTLS_ERR_SSL_INVALID_RECORD:
    case MBEDTLS_ERR_SSL_BAD_HS_CLIENT_HELLO:
    case MBEDTLS_ERR_SSL_BAD_HS_PROTOCOL_VERSION:
        tls_strerror(rv, info, sizeof(info));
        snprintf(why, sizeof(why),
                 "not a TLS client (plain tcp:// to a tls+tcp:// "
                 "port?): %s",
                 info);
        break;
    default:
        tls_strerror(rv, info, sizeof(info));
        snprintf(why, sizeof(why), "%s", info);
        break;
    }
    char more[80] = "";
    if (unsaid > 0)
        snprintf(more, sizeof(more), " (and %llu more refused before it)",
                 (unsigned long long)unsaid);
    CUMOD_LOGW("CUMOD-TLS", "refused a connection in its TLS handshake: %s%s",
               why, more);
}

static int tls_name_is(const mbedtls_x509_buf *b, const char *name);
static void tls_name_copy(char *dst, size_t cap, const unsigned char *src,
                          size_t len);

/* The handshake's check of --allow-cert-subject, on the peer's own
 * certificate (depth 0): one whose CN and DNS names are none of the
 * listed fails verification there, so the client hears a refused
 * handshake, as for a certificate of another CA, instead of a connection
 * closed after it was made (which nng 1.5.2's dialer takes as a cue to
 * dial again, and a close then can hang it). The names are kept for the
 * log. */
static int
conn_verify(void *arg, mbedtls_x509_crt *crt, int depth, uint32_t *flags)
{
    nng_tls_engine_conn *ec = arg;
    const tls_gen *g = ec->gen;
    int listed = 0;

    if (depth != 0 || g->nsubjects == 0)
        return 0;
    ec->cn[0] = ec->dns[0] = '\0';
    for (const mbedtls_x509_name *n = &crt->subject; n != NULL; n = n->next)
        if (n->oid.p != NULL &&
            MBEDTLS_OID_CMP(MBEDTLS_OID_AT_CN, &n->oid) == 0) {
            tls_name_copy(ec->cn, sizeof(ec->cn), n->val.p, n->val.len);
            for (int i = 0, at = 0; !listed && i < g->nsubjects; i++) {
                listed = tls_name_is(&n->val, g->subjects + at);
                at += (int)strlen(g->subjects + at) + 1;
            }
        }
    for (const mbedtls_x509_sequence *q = &crt->subject_alt_names;
         q != NULL && q->buf.p != NULL; q = q->next) {
        if (q->buf.tag != (MBEDTLS_ASN1_CONTEXT_SPECIFIC | 2))
            continue;
        if (ec->dns[0] == '\0')
            tls_name_copy(ec->dns, sizeof(ec->dns), q->buf.p, q->buf.len);
        for (int i = 0, at = 0; !listed && i < g->nsubjects; i++) {
            listed = tls_name_is(&q->buf, g->subjects + at);
            at += (int)strlen(g->subjects + at) + 1;
        }
    }
    if (!listed) {
        ec->unlisted = 1;
        *flags |= MBEDTLS_X509_BADCERT_OTHER;
    }
    return 0;
}

static int
tls_name_is(const mbedtls_x509_buf *b, const char *name)
{
    size_t n = strlen(name);
    return n > 0 && b->len == n && memcmp(b->p, name, n) == 0;
}

static int
conn_init(nng_tls_engine_conn *ec, void *tls, nng_tls_engine_config *cfg)
{
    int rv;

    if (cfg->bound != NULL) {
        pthread_mutex_lock(&cfg->bound->mtx);
        ec->gen = cfg->bound->cur;
        atomic_fetch_add(&ec->gen->refs, 1);
        pthread_mutex_unlock(&cfg->bound->mtx);
        ec->bound = cfg->bound;
        atomic_fetch_add(&ec->bound->refs, 1);
    } else {
        ec->gen = cfg->gen;
        atomic_fetch_add(&ec->gen->refs, 1);
    }
    mbedtls_ssl_init(&ec->ctx);
    mbedtls_ssl_set_bio(&ec->ctx, tls, tls_net_send, tls_net_recv, NULL);
    if ((rv = mbedtls_ssl_setup(&ec->ctx, &ec->gen->conf)) != 0)
        return tls_nng_err(rv);
    if (ec->gen->nsubjects > 0)
        mbedtls_ssl_set_verify(&ec->ctx, conn_verify, ec);
    if (cfg->server_name != NULL &&
        (rv = mbedtls_ssl_set_hostname(&ec->ctx, cfg->server_name)) != 0)
        return tls_nng_err(rv);
    return 0;
}

static void
conn_fini(nng_tls_engine_conn *ec)
{
    mbedtls_ssl_free(&ec->ctx);
    gen_unref(ec->gen);
    tls_unref(ec->bound);
}

static void
conn_close(nng_tls_engine_conn *ec)
{
    (void)mbedtls_ssl_close_notify(&ec->ctx);
}

static int
conn_io_err(int rv)
{
    if (rv == MBEDTLS_ERR_SSL_WANT_READ || rv == MBEDTLS_ERR_SSL_WANT_WRITE)
        return NNG_EAGAIN;
    return tls_nng_err(rv);
}

static int
conn_recv(nng_tls_engine_conn *ec, uint8_t *buf, size_t *szp)
{
    int rv = mbedtls_ssl_read(&ec->ctx, buf, *szp);
    if (rv < 0)
        return conn_io_err(rv);
    *szp = (size_t)rv;
    return 0;
}

static int
conn_send(nng_tls_engine_conn *ec, const uint8_t *buf, size_t *szp)
{
    int rv = mbedtls_ssl_write(&ec->ctx, buf, *szp);
    if (rv < 0)
        return conn_io_err(rv);
    *szp = (size_t)rv;
    return 0;
}

static int
conn_handshake(nng_tls_engine_conn *ec)
{
    int rv = mbedtls_ssl_handshake(&ec->ctx);
    if (rv == 0)
        return 0;
    if (rv == MBEDTLS_ERR_SSL_WANT_READ || rv == MBEDTLS_ERR_SSL_WANT_WRITE)
        return NNG_EAGAIN;
    if (ec->bound != NULL)
        tls_log_refusal(ec, rv);
    return tls_nng_err(rv);
}

/* Printable ASCII only: the names reach the log and replies. */
static void
tls_name_copy(char *dst, size_t cap, const unsigned char *src, size_t len)
{
    size_t n = len < cap - 1 ? len : cap - 1;
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i] >= 0x20 && src[i] < 0x7f ? (char)src[i] : '?';
    dst[n] = '\0';
}

static void
tls_peer_names(const mbedtls_x509_crt *crt, cumod_peer *peer)
{
    for (const mbedtls_x509_name *n = &crt->subject; n != NULL; n = n->next)
        if (n->oid.p != NULL &&
            MBEDTLS_OID_CMP(MBEDTLS_OID_AT_CN, &n->oid) == 0)
            tls_name_copy(peer->cn, sizeof(peer->cn), n->val.p, n->val.len);
    for (const mbedtls_x509_sequence *s = &crt->subject_alt_names;
         s != NULL && s->buf.p != NULL && peer->nsan < CUMOD_PEER_MAX_SANS;
         s = s->next) {
        /* dNSName, [2] IA5String: the raw name follows the tag. */
        if (s->buf.tag != (MBEDTLS_ASN1_CONTEXT_SPECIFIC | 2))
            continue;
        tls_name_copy(peer->san[peer->nsan++], sizeof(peer->san[0]), s->buf.p,
                      s->buf.len);
    }
}

static bool
conn_verified(nng_tls_engine_conn *ec)
{
    bool ok = mbedtls_ssl_get_verify_result(&ec->ctx) == 0;
    cumod_peer *peer = tls_asking;
    const mbedtls_x509_crt *crt;

    if (peer != NULL && (crt = mbedtls_ssl_get_peer_cert(&ec->ctx)) != NULL)
        tls_peer_names(crt, peer);
    return ok;
}

static nng_tls_engine_config_ops tls_config_ops = {
    .size = sizeof(nng_tls_engine_config),
    .init = config_init,
    .fini = config_fini,
    .server = config_server_name,
    .auth = config_auth_mode,
    .ca_chain = config_ca_chain,
    .own_cert = config_own_cert,
    .version = config_version,
};

static nng_tls_engine_conn_ops tls_conn_ops = {
    .size = sizeof(nng_tls_engine_conn),
    .init = conn_init,
    .fini = conn_fini,
    .close = conn_close,
    .recv = conn_recv,
    .send = conn_send,
    .handshake = conn_handshake,
    .verified = conn_verified,
};

static const nng_tls_engine tls_engine = {
    .version = NNG_TLS_ENGINE_VERSION,
    .config_ops = &tls_config_ops,
    .conn_ops = &tls_conn_ops,
    .name = "cumod-mbed",
    .description = "cumodd's engine over mbed TLS " MBEDTLS_VERSION_STRING,
    .fips_mode = false,
};

static int tls_registered_rv;

static void
tls_register(void)
{
    /* nng's own initialisation registers its engine: run it first (any
     * call that initialises nng will do), so that ours comes after. */
    (void)nng_tls_engine_name();
    tls_registered_rv = nng_tls_engine_register(&tls_engine);
}

/* --- Sets ----------------------------------------------------------------- */

cumod_err
cumod__tls_open(const cumod_tls_opts *o, cumod_tls **out, char *msg,
                size_t msglen)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    cumod_tls *t;
    tls_gen *g;
    cumod_err e;
    int rv;

    pthread_once(&once, tls_register);
    if (tls_registered_rv != 0)
        return cumod__errf(msg, msglen, CUMOD_EIO,
                           "cannot register cumodd's TLS engine with nng: %s",
                           nng_strerror(tls_registered_rv));
    if ((e = gen_load(o, &g, msg, msglen)) != CUMOD_OK)
        return e;
    if ((t = calloc(1, sizeof(*t))) == NULL) {
        gen_unref(g);
        return cumod__errf(msg, msglen, CUMOD_ENOMEM, "out of memory");
    }
    atomic_init(&t->refs, 1);
    pthread_mutex_init(&t->mtx, NULL);
    t->cur = g;
    tls_binding = t;
    rv = nng_tls_config_alloc(&t->ncfg, NNG_TLS_MODE_SERVER);
    tls_binding = NULL;
    if (rv != 0) {
        tls_unref(t);
        return cumod__errf(msg, msglen, CUMOD_EIO,
                           "cannot make a TLS configuration: %s",
                           nng_strerror(rv));
    }
    *out = t;
    return CUMOD_OK;
}

nng_tls_config *
cumod__tls_config(cumod_tls *t)
{
    return t->ncfg;
}

cumod_err
cumod__tls_reload(cumod_tls *t, const cumod_tls_opts *o, char *msg,
                  size_t msglen)
{
    tls_gen *g, *old;
    cumod_err e;

    if ((e = gen_load(o, &g, msg, msglen)) != CUMOD_OK)
        return e;
    pthread_mutex_lock(&t->mtx);
    old = t->cur;
    t->cur = g;
    pthread_mutex_unlock(&t->mtx);
    gen_unref(old); /* connections that use it hold their own */
    return CUMOD_OK;
}

void
cumod__tls_close(cumod_tls *t)
{
    if (t == NULL)
        return;
    nng_tls_config_free(t->ncfg); /* its engine part drops its hold */
    tls_unref(t);
}

int
cumod__tls_peer(nng_pipe p, cumod_peer *peer)
{
    nng_sockaddr sa;
    bool v = false;
    int rv;

    if (nng_pipe_get_addr(p, NNG_OPT_REMADDR, &sa) != 0 ||
        (sa.s_family != NNG_AF_INET && sa.s_family != NNG_AF_INET6))
        return 0;
    peer->remote = 1;
    if (sa.s_family == NNG_AF_INET) {
        char a[INET_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET, &sa.s_in.sa_addr, a, sizeof(a));
        snprintf(peer->addr, sizeof(peer->addr), "%s:%u", a,
                 (unsigned)ntohs(sa.s_in.sa_port));
    } else {
        char a[INET6_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET6, sa.s_in6.sa_addr, a, sizeof(a));
        snprintf(peer->addr, sizeof(peer->addr), "[%s]:%u", a,
                 (unsigned)ntohs(sa.s_in6.sa_port));
    }
    tls_asking = peer;
    rv = nng_pipe_get_bool(p, NNG_OPT_TLS_VERIFIED, &v);
    tls_asking = NULL;
    if (rv == 0) {
        peer->tls = 1;
        peer->verified = v;
    }
    return 1;
}
