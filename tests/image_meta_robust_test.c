/* SPDX-License-Identifier: MIT */
/*
 * cumod__imeta_describe on damaged copies of every image the build makes:
 * truncated at every length of the first 256 bytes and at 64 more spread
 * over the rest, with single bits flipped, with words overwritten by 0xff
 * or 0 (sizes, offsets and counts become huge or nothing), and with spans
 * cut out of the middle. Deterministic (a fixed xorshift seed), a few
 * thousand cases an image kind. Each must give a description or an error
 * with a message, never a crash or a read outside the copy: the copy is
 * allocated at exactly its length, so the ASan build (CUMOD_SANITIZE=
 * address,undefined) catches any over-read.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/image/image_meta.h"
#include "cumod/errors.h"
#include "image_meta_test.h"

typedef struct robust {
    uint64_t rng;
    size_t described, refused;
} robust;

static uint64_t
robust_next(robust *r)
{
    r->rng ^= r->rng << 13;
    r->rng ^= r->rng >> 7;
    r->rng ^= r->rng << 17;
    return r->rng;
}

/* Describes bytes[0, len) (a copy of exactly len bytes) for a few devices
 * and checks what the header promises of the result. */
static void
robust_one(robust *r, const mt_file *f, const uint8_t *bytes, size_t len)
{
    static const unsigned devs[][2] = {{9, 0}, {10, 0}};
    uint8_t *copy = malloc(len ? len : 1);

    cr_assert_not_null(copy);
    memcpy(copy, bytes, len);
    for (size_t d = 0; d < 2; d++) {
        cumod_imeta m;
        char msg[256];
        msg[0] = '\0';
        cumod_err rc =
            cumod__imeta_describe(copy, len, f->kind, "img", devs[d][0],
                                  devs[d][1], &m, msg, sizeof(msg));
        if (rc != CUMOD_OK) {
            cr_assert(
                rc == CUMOD_EIMAGE || rc == CUMOD_ENOTSUP || rc == CUMOD_ENOMEM,
                "%s (%zu bytes): %s: %s", f->name, len, cumod_errname(rc), msg);
            cr_assert_eq(strncmp(msg, "img", 3), 0, "%s: %s", f->name, msg);
            r->refused++;
            continue;
        }
        cr_assert(m.nkernels == 0 || m.kernels != NULL);
        for (size_t i = 0; i < m.nkernels; i++) {
            cr_assert_not_null(m.kernels[i].name);
            cr_assert(m.kernels[i].nparams == 0 || m.kernels[i].params != NULL);
        }
        for (size_t i = 0; i < m.nglobals; i++)
            cr_assert_not_null(m.globals[i].name);
        cumod__imeta_fini(&m);
        r->described++;
    }
    free(copy);
}

static void
robust_image(robust *r, const mt_file *f)
{
    uint8_t *b = malloc(f->len);
    size_t i, at, n;

    cr_assert_not_null(b);
    /* Truncated: every length of the headers, then spread over the rest. */
    for (i = 0; i < 256 && i < f->len; i++)
        robust_one(r, f, f->bytes, i);
    for (i = 0; i < 64 && f->len > 256; i++)
        robust_one(r, f, f->bytes, 256 + robust_next(r) % (f->len - 256));
    /* One bit flipped. */
    memcpy(b, f->bytes, f->len);
    for (i = 0; i < 192; i++) {
        at = robust_next(r) % f->len;
        b[at] ^= (uint8_t)(1u << (robust_next(r) % 8));
        robust_one(r, f, b, f->len);
        b[at] = f->bytes[at];
    }
    /* A word of 0xff or 0: lengths, offsets and counts gone wild. */
    for (i = 0; i < 96 && f->len >= 4; i++) {
        at = robust_next(r) % (f->len - 3);
        memset(b + at, i % 2 ? 0xff : 0, 4);
        robust_one(r, f, b, f->len);
        memcpy(b + at, f->bytes + at, 4);
    }
    /* A span cut out of the middle: a text's tokens run together. */
    for (i = 0; i < 32 && f->len > 16; i++) {
        at = robust_next(r) % (f->len - 8);
        n = 1 + robust_next(r) % 8;
        memcpy(b, f->bytes, at);
        memcpy(b + at, f->bytes + at + n, f->len - at - n);
        robust_one(r, f, b, f->len - n);
    }
    free(b);
}

static void
robust_kind(cumod_image_kind kind)
{
    robust r = {.rng = 0x9e3779b97f4a7c15ull};
    size_t n, images = 0;
    mt_file *files = mt_read_all(&n);

    for (size_t i = 0; i < n; i++) {
        if (files[i].kind != kind)
            continue;
        robust_image(&r, &files[i]);
        images++;
    }
    cr_expect_geq(images, 2, "%zu images", images);
    /* Damage must not make every copy a description, nor every one an
     * error: both paths are exercised. */
    cr_expect_gt(r.described, 0);
    cr_expect_gt(r.refused, 0);
    cr_log_info("%s: %zu images, %zu damaged copies described, %zu refused",
                cumod__image_kind_name(kind), images, r.described, r.refused);
    mt_free_all(files, n);
}

Test(image_meta_robust, damaged_cubins, .timeout = 240)
{
    robust_kind(CUMOD_IMAGE_CUBIN);
}

Test(image_meta_robust, damaged_ptx, .timeout = 240)
{
    robust_kind(CUMOD_IMAGE_PTX);
}

Test(image_meta_robust, damaged_fatbins, .timeout = 240)
{
    robust_kind(CUMOD_IMAGE_FATBIN);
}

/* Every section of every cubin in turn made SHT_NULL with its offset and
 * size past the file's end: a null section has no bytes, and none of its
 * bytes are read (fuzz_image found .nv.info of type SHT_NULL read out of
 * bounds: the section table's bounds check skipped null sections). */
Test(image_meta_robust, null_sections_read_no_bytes, .timeout = 240)
{
    robust r = {.rng = 0x2545f4914f6cdd1dull};
    size_t n, tried = 0;
    mt_file *files = mt_read_all(&n);

    for (size_t k = 0; k < n; k++) {
        const mt_file *f = &files[k];
        if (f->kind != CUMOD_IMAGE_CUBIN || f->len < 64)
            continue;
        uint64_t shoff = 0;
        uint16_t shnum = 0;
        memcpy(&shoff, f->bytes + 0x28, 8); /* e_shoff (little-endian) */
        memcpy(&shnum, f->bytes + 0x3c, 2); /* e_shnum */
        uint8_t *b = malloc(f->len);
        cr_assert_not_null(b);
        for (uint16_t i = 0; i < shnum; i++) {
            uint64_t h = shoff + (uint64_t)i * 64, off = f->len - 1,
                     size = 0x10000;
            if (h + 64 > f->len)
                break;
            memcpy(b, f->bytes, f->len);
            memset(b + h + 4, 0, 4);        /* sh_type = SHT_NULL */
            memcpy(b + h + 0x18, &off, 8);  /* sh_offset */
            memcpy(b + h + 0x20, &size, 8); /* sh_size */
            robust_one(&r, f, b, f->len);
            tried++;
        }
        free(b);
    }
    cr_expect_gt(tried, 10, "%zu sections tried", tried);
    mt_free_all(files, n);
}
