/* SPDX-License-Identifier: MIT */
/*
 * SHA-256 (mbedtls) under one set of names for mbedtls 2 and 3: 3 dropped
 * the _ret suffix of 2.x, where the plain names are deprecated ones that
 * return nothing. Image identity, the compile cache's key and a source's
 * headers are all SHA-256.
 */
#ifndef CUMOD_SHA256_H
#define CUMOD_SHA256_H

#include <stddef.h>

#include <mbedtls/sha256.h>
#include <mbedtls/version.h>

typedef mbedtls_sha256_context cumod_sha256;

#if MBEDTLS_VERSION_NUMBER >= 0x03000000
#define CUMOD__SHA256_STARTS mbedtls_sha256_starts
#define CUMOD__SHA256_UPDATE mbedtls_sha256_update
#define CUMOD__SHA256_FINISH mbedtls_sha256_finish
#define CUMOD__SHA256_ONCE mbedtls_sha256
#else
#define CUMOD__SHA256_STARTS mbedtls_sha256_starts_ret
#define CUMOD__SHA256_UPDATE mbedtls_sha256_update_ret
#define CUMOD__SHA256_FINISH mbedtls_sha256_finish_ret
#define CUMOD__SHA256_ONCE mbedtls_sha256_ret
#endif

static inline void
cumod__sha256_init(cumod_sha256 *c)
{
    mbedtls_sha256_init(c);
    (void)CUMOD__SHA256_STARTS(c, 0);
}

static inline void
cumod__sha256_update(cumod_sha256 *c, const void *p, size_t n)
{
    (void)CUMOD__SHA256_UPDATE(c, (const unsigned char *)p, n);
}

/* The sum; c is freed (init it again to reuse). */
static inline void
cumod__sha256_final(cumod_sha256 *c, unsigned char out[32])
{
    (void)CUMOD__SHA256_FINISH(c, out);
    mbedtls_sha256_free(c);
}

/* The sum of n bytes at p: 0, or -1 where mbedtls fails. */
static inline int
cumod__sha256(const void *p, size_t n, unsigned char out[32])
{
    return CUMOD__SHA256_ONCE((const unsigned char *)p, n, out, 0) == 0 ? 0
                                                                        : -1;
}

/* sum as 64 lowercase hex digits and a NUL. */
static inline void
cumod__sha256_hex(const unsigned char sum[32], char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[sum[i] >> 4];
        hex[2 * i + 1] = digits[sum[i] & 0xf];
    }
    hex[64] = '\0';
}

#endif
