/* SPDX-License-Identifier: MIT */
/*
 * The ledger (ledger.h): records appended to a memfd, and replayed up to
 * the first that is not whole and right.
 */
#include "ledger.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define LEDGER_MAGIC 0x31474c444f4d5543ull /* "CUMODLG1" */
#define LEDGER_VERSION 1
#define LEDGER_REC_MAGIC 0x4345524cu /* "LREC" */

typedef struct ledger_hdr {
    uint64_t magic;
    uint32_t version;
    uint32_t hdr_size; /* where the records start */
    uint64_t len;      /* bytes in use, header included */
    uint8_t pad[40];
} ledger_hdr;

typedef struct ledger_rec {
    uint32_t magic;
    uint16_t type;
    uint16_t flags;
    uint32_t len; /* payload bytes */
    uint32_t crc; /* CRC-32C of this header (crc 0) and the payload */
    uint64_t seq;
} ledger_rec;

_Static_assert(sizeof(ledger_hdr) == 64, "ledger header");
_Static_assert(sizeof(ledger_rec) == 24, "ledger record header");

static size_t
ledger_pad(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void
crc_make(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t
cumod__crc32c(uint32_t crc, const void *p, size_t len)
{
    const uint32_t *table = crc_table;
    (void)pthread_once(&crc_once, crc_make);
    const uint8_t *b = p;
    crc = ~crc;
    for (size_t i = 0; i < len; i++)
        crc = table[(crc ^ b[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

static uint32_t
ledger_rec_crc(const ledger_rec *r, const void *payload)
{
    ledger_rec h = *r;
    h.crc = 0;
    return cumod__crc32c(cumod__crc32c(0, &h, sizeof(h)), payload, r->len);
}

static cumod_err
ledger_map(cumod_ledger *l, size_t cap, cumod_status *st)
{
    if (ftruncate(l->fd, (off_t)cap) != 0)
        return cumod__status_set(st, CUMOD_ENOMEM,
                                 "the ledger cannot grow to %zu bytes: %s", cap,
                                 strerror(errno));
    void *m = l->map != NULL ? mremap(l->map, l->cap, cap, MREMAP_MAYMOVE)
                             : mmap(NULL, cap, PROT_READ | PROT_WRITE,
                                    MAP_SHARED, l->fd, 0);
    if (m == MAP_FAILED)
        return cumod__status_set(st, CUMOD_ENOMEM,
                                 "the ledger cannot be mapped (%zu bytes): %s",
                                 cap, strerror(errno));
    l->map = m;
    l->cap = cap;
    return CUMOD_OK;
}

static void
ledger_set_len(cumod_ledger *l, size_t len)
{
    l->len = len;
    __atomic_store_n(&((ledger_hdr *)l->map)->len, (uint64_t)len,
                     __ATOMIC_RELEASE);
}

cumod_err
cumod__ledger_create(cumod_ledger *l, const char *name, size_t cap,
                     cumod_status *st)
{
    memset(l, 0, sizeof(*l));
    l->fd = -1;
    if (cap < 4096)
        cap = 4096;
    if ((l->fd = memfd_create(name, MFD_CLOEXEC)) < 0)
        return cumod__status_set(st, CUMOD_ENOMEM,
                                 "memfd_create for the ledger: %s",
                                 strerror(errno));
    cumod_err rv = ledger_map(l, cap, st);
    if (rv != CUMOD_OK) {
        cumod__ledger_close(l);
        return rv;
    }
    ledger_hdr *h = (ledger_hdr *)l->map;
    *h = (ledger_hdr){.magic = LEDGER_MAGIC,
                      .version = LEDGER_VERSION,
                      .hdr_size = sizeof(ledger_hdr)};
    ledger_set_len(l, sizeof(ledger_hdr));
    l->next = 1;
    return CUMOD_OK;
}

cumod_err
cumod__ledger_append(cumod_ledger *l, uint16_t type, const void *p,
                     uint32_t len, cumod_status *st)
{
    if (type == 0 || len > CUMOD_LEDGER_REC_MAX || (len > 0 && p == NULL))
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "a ledger record of type %u and %u bytes "
                                 "(type 0 and over %u bytes are refused)",
                                 type, len, CUMOD_LEDGER_REC_MAX);
    size_t need = sizeof(ledger_rec) + ledger_pad(len);
    if (l->len + need > CUMOD_LEDGER_MAX)
        return cumod__status_set(st, CUMOD_ETOOBIG,
                                 "the ledger would pass %zu bytes",
                                 CUMOD_LEDGER_MAX);
    if (l->len + need > l->cap) {
        size_t cap = l->cap;
        while (cap < l->len + need)
            cap *= 2;
        if (cap > CUMOD_LEDGER_MAX)
            cap = CUMOD_LEDGER_MAX;
        cumod_err rv = ledger_map(l, cap, st);
        if (rv != CUMOD_OK)
            return rv;
    }
    ledger_rec r = {
        .magic = LEDGER_REC_MAGIC, .type = type, .len = len, .seq = l->next};
    r.crc = ledger_rec_crc(&r, p);
    uint8_t *at = l->map + l->len;
    /* The payload, then the header, then the length in use. */
    if (len > 0)
        memcpy(at + sizeof(r), p, len);
    memset(at + sizeof(r) + len, 0, ledger_pad(len) - len);
    memcpy(at, &r, sizeof(r));
    ledger_set_len(l, l->len + need);
    l->next++;
    l->records++;
    return CUMOD_OK;
}

/* The good prefix of the ledger mapped at m (size bytes). */
static cumod_err
ledger_walk(const uint8_t *m, size_t size, cumod_ledger_fn fn, void *arg,
            uint64_t *n, size_t *good, char *why, size_t whylen,
            cumod_status *st)
{
    ledger_hdr h;
    *n = 0;
    *good = 0;
    if (whylen > 0)
        why[0] = '\0';
    if (size < sizeof(h))
        return cumod__status_set(st, CUMOD_EPROTO,
                                 "not a ledger: %zu bytes, shorter than its "
                                 "header",
                                 size);
    memcpy(&h, m, sizeof(h));
    if (h.magic != LEDGER_MAGIC || h.version != LEDGER_VERSION ||
        h.hdr_size != sizeof(h))
        return cumod__status_set(st, CUMOD_EPROTO,
                                 "not a ledger of this version (magic "
                                 "%#llx, version %u)",
                                 (unsigned long long)h.magic, h.version);
    /* The length the writer published bounds the walk; a file longer
     * than it holds only what a killed writer left half written. */
    size_t end = h.len < size ? (size_t)h.len : size;
    size_t at = sizeof(h);
    uint64_t seq = 1;
    while (at < end) {
        ledger_rec r;
        if (end - at < sizeof(r)) {
            snprintf(why, whylen, "record %llu: its header is cut short",
                     (unsigned long long)seq);
            break;
        }
        memcpy(&r, m + at, sizeof(r));
        if (r.magic != LEDGER_REC_MAGIC || r.type == 0) {
            snprintf(why, whylen, "record %llu: no record header at byte %zu",
                     (unsigned long long)seq, at);
            break;
        }
        if (r.len > CUMOD_LEDGER_REC_MAX ||
            end - at - sizeof(r) < ledger_pad(r.len)) {
            snprintf(why, whylen,
                     "record %llu: %u bytes, past the ledger's end",
                     (unsigned long long)seq, r.len);
            break;
        }
        if (r.seq != seq) {
            snprintf(why, whylen, "record %llu: numbered %llu",
                     (unsigned long long)seq, (unsigned long long)r.seq);
            break;
        }
        const uint8_t *payload = m + at + sizeof(r);
        if (ledger_rec_crc(&r, payload) != r.crc) {
            snprintf(why, whylen, "record %llu: its checksum does not match",
                     (unsigned long long)seq);
            break;
        }
        if (fn != NULL) {
            int rv = fn(arg, r.seq, r.type, payload, r.len);
            if (rv != 0)
                return cumod__status_set(st, CUMOD_EINTERNAL,
                                         "the replay stopped at record %llu "
                                         "(%d)",
                                         (unsigned long long)seq, rv);
        }
        at += sizeof(r) + ledger_pad(r.len);
        (*n)++;
        seq++;
        *good = at;
    }
    if (*n == 0)
        *good = sizeof(h);
    if (at >= end && end < (size_t)h.len)
        snprintf(why, whylen, "the ledger says %llu bytes, the file has %zu",
                 (unsigned long long)h.len, size);
    return CUMOD_OK;
}

cumod_err
cumod__ledger_replay(int fd, cumod_ledger_fn fn, void *arg, uint64_t *n,
                     size_t *good, char *why, size_t whylen, cumod_status *st)
{
    struct stat sb;
    uint64_t n0 = 0;
    size_t g0 = 0;
    if (n == NULL)
        n = &n0;
    if (good == NULL)
        good = &g0;
    *n = 0;
    *good = 0;
    if (fstat(fd, &sb) != 0)
        return cumod__status_set(st, CUMOD_EIO, "the ledger: fstat: %s",
                                 strerror(errno));
    if (sb.st_size < (off_t)sizeof(ledger_hdr) ||
        (uint64_t)sb.st_size > CUMOD_LEDGER_MAX)
        return cumod__status_set(st, CUMOD_EPROTO, "not a ledger: %lld bytes",
                                 (long long)sb.st_size);
    size_t size = (size_t)sb.st_size;
    /* Private: what the replay reads cannot change under it. */
    void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED)
        return cumod__status_set(st, CUMOD_EIO, "the ledger: mmap: %s",
                                 strerror(errno));
    cumod_err rv = ledger_walk(m, size, fn, arg, n, good, why, whylen, st);
    munmap(m, size);
    return rv;
}

cumod_err
cumod__ledger_adopt(cumod_ledger *l, int fd, cumod_status *st)
{
    uint64_t n;
    size_t good;
    char why[160];
    struct stat sb;
    memset(l, 0, sizeof(*l));
    l->fd = -1;
    cumod_err rv =
        cumod__ledger_replay(fd, NULL, NULL, &n, &good, why, sizeof(why), st);
    if (rv != CUMOD_OK)
        return rv;
    if (fstat(fd, &sb) != 0 || (l->fd = dup(fd)) < 0)
        return cumod__status_set(st, CUMOD_EIO, "the ledger: %s",
                                 strerror(errno));
    size_t cap = (size_t)sb.st_size;
    if ((l->map = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_SHARED, l->fd,
                       0)) == MAP_FAILED) {
        l->map = NULL;
        cumod__ledger_close(l);
        return cumod__status_set(st, CUMOD_EIO, "the ledger: mmap: %s",
                                 strerror(errno));
    }
    l->cap = cap;
    /* What followed the good prefix is not the ledger's: cut off. */
    memset(l->map + good, 0, cap - good);
    ledger_set_len(l, good);
    l->next = n + 1;
    l->records = n;
    return CUMOD_OK;
}

void
cumod__ledger_close(cumod_ledger *l)
{
    if (l->map != NULL)
        munmap(l->map, l->cap);
    if (l->fd >= 0)
        close(l->fd);
    memset(l, 0, sizeof(*l));
    l->fd = -1;
}
