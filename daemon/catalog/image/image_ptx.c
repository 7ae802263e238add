/* SPDX-License-Identifier: MIT */
/*
 * The PTX part of cumod__image_check: the bytes are text, and before the
 * first .entry there is a .version X.Y and a .target naming an SM the
 * device's JIT can compile for. The scan knows just enough of PTX's lexis
 * to not be fooled: comments and string literals are skipped, and a
 * directive is a '.' that starts a token (".param" in "ld.param" is not).
 * Every read is bounded by the text's length.
 */
#include "image.h"

#include <elf.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cumod/errors.h"
#include "common/status.h"

#define IMAGE_PTX_FATBIN_MAGIC "\x50\xed\x55\xba"

typedef struct image_ptx {
    const char *s;
    size_t n; /* the text's length: up to the first NUL */
    int have_version, have_target;
    size_t target_at; /* offset of the .target, for its line number */
    unsigned sm;      /* major * 10 + minor */
    char variant;     /* 0, 'a' (arch-specific), 'f' (family-specific) */
    char target[24];  /* as written: "sm_90a" */
} image_ptx;

static int
image_ptx_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int
image_ptx_word_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           image_ptx_digit(c) || c == '_' || c == '$';
}

/* Instruction names and operands: "ld.param.u64", "%rd1". */
static int
image_ptx_ident_char(char c)
{
    return image_ptx_word_char(c) || c == '.' || c == '%';
}

static unsigned
image_ptx_line(const image_ptx *p, size_t at)
{
    unsigned line = 1;
    size_t i;

    for (i = 0; i < at && i < p->n; i++)
        line += p->s[i] == '\n';
    return line;
}

static size_t
image_ptx_blank(const image_ptx *p, size_t i)
{
    while (i < p->n && (p->s[i] == ' ' || p->s[i] == '\t'))
        i++;
    return i;
}

/* Up to 6 digits at *i; 1 if there was at least one. */
static int
image_ptx_number(const image_ptx *p, size_t *i, unsigned *v)
{
    size_t k = *i;

    *v = 0;
    while (k < p->n && image_ptx_digit(p->s[k]) && k - *i < 6)
        *v = *v * 10 + (unsigned)(p->s[k++] - '0');
    if (k == *i || (k < p->n && image_ptx_digit(p->s[k])))
        return 0;
    *i = k;
    return 1;
}

/* sm_NN, sm_NNN, compute_NN..., each with an optional 'a' or 'f'. */
static int
image_ptx_sm(const char *t, size_t len, unsigned *sm, char *variant)
{
    size_t k, d;
    unsigned v = 0;

    if (len > 3 && memcmp(t, "sm_", 3) == 0)
        k = 3;
    else if (len > 8 && memcmp(t, "compute_", 8) == 0)
        k = 8;
    else
        return 0;
    for (d = k; d < len && image_ptx_digit(t[d]) && d - k < 3; d++)
        v = v * 10 + (unsigned)(t[d] - '0');
    if (d - k < 2 || v < 20)
        return 0;
    *variant = 0;
    if (d < len && (t[d] == 'a' || t[d] == 'f'))
        *variant = t[d++];
    if (d != len)
        return 0;
    *sm = v;
    return 1;
}

/* The directive whose name (after the '.') is at [w, j): 1 to stop the
 * scan (.entry), -1 on a malformed .version or .target (msg written),
 * 0 to go on. */
static int
image_ptx_directive(image_ptx *p, size_t w, size_t j, const char *name,
                    char *msg, size_t msglen)
{
    size_t len = j - w, k, t;
    unsigned major, minor;
    int found = 0;

    if (len == 5 && memcmp(p->s + w, "entry", 5) == 0)
        return 1;
    if (len == 7 && memcmp(p->s + w, "version", 7) == 0 && !p->have_version) {
        k = image_ptx_blank(p, j);
        if (!image_ptx_number(p, &k, &major) || k >= p->n || p->s[k++] != '.' ||
            !image_ptx_number(p, &k, &minor)) {
            cumod__msgf(msg, msglen,
                        "%s: malformed .version directive on line %u "
                        "(want .version X.Y)",
                        name, image_ptx_line(p, w));
            return -1;
        }
        p->have_version = 1;
        return 0;
    }
    if (len != 6 || memcmp(p->s + w, "target", 6) != 0 || p->have_target)
        return 0;
    /* .target sm_90a, debug, texmode_independent: the SM is one of a
     * comma-separated list. */
    p->have_target = 1;
    p->target_at = w;
    k = image_ptx_blank(p, j);
    for (;;) {
        t = k;
        while (k < p->n && image_ptx_word_char(p->s[k]))
            k++;
        if (k == t)
            break;
        if (!found && image_ptx_sm(p->s + t, k - t, &p->sm, &p->variant)) {
            found = 1;
            snprintf(p->target, sizeof(p->target), "%.*s", (int)(k - t),
                     p->s + t);
        }
        k = image_ptx_blank(p, k);
        if (k >= p->n || p->s[k] != ',')
            break;
        k = image_ptx_blank(p, k + 1);
    }
    if (!found) {
        cumod__msgf(msg, msglen,
                    "%s: the .target directive on line %u names no SM "
                    "(want sm_NN or compute_NN, optionally with a or f)",
                    name, image_ptx_line(p, w));
        return -1;
    }
    return 0;
}

/* Scans up to the first .entry; CUMOD_OK or CUMOD_EIMAGE. */
static int
image_ptx_scan(image_ptx *p, const char *name, char *msg, size_t msglen)
{
    const char *s = p->s, *end;
    size_t i = 0, j;
    int r;

    while (i < p->n) {
        if (s[i] == '/' && i + 1 < p->n && s[i + 1] == '/') {
            while (i < p->n && s[i] != '\n')
                i++;
        } else if (s[i] == '/' && i + 1 < p->n && s[i + 1] == '*') {
            end = memmem(s + i + 2, p->n - i - 2, "*/", 2);
            i = end != NULL ? (size_t)(end - s) + 2 : p->n;
        } else if (s[i] == '"') {
            for (i++; i < p->n && s[i] != '"' && s[i] != '\n'; i++)
                ;
            i++;
        } else if (s[i] == '.' && i + 1 < p->n &&
                   image_ptx_word_char(s[i + 1])) {
            for (j = i + 1; j < p->n && image_ptx_word_char(s[j]); j++)
                ;
            r = image_ptx_directive(p, i + 1, j, name, msg, msglen);
            if (r < 0)
                return CUMOD_EIMAGE;
            if (r > 0)
                break;
            i = j;
        } else if (image_ptx_ident_char(s[i])) {
            while (i < p->n && image_ptx_ident_char(s[i]))
                i++;
        } else {
            i++;
        }
    }
    if (!p->have_version || !p->have_target) {
        cumod__msgf(msg, msglen,
                    "%s is not PTX: it has no %s directive before its "
                    "first .entry",
                    name, !p->have_version ? ".version" : ".target");
        return CUMOD_EIMAGE;
    }
    return CUMOD_OK;
}

cumod_err
cumod__image_check_ptx(const uint8_t *bytes, size_t len, const char *name,
                       unsigned dev_major, unsigned dev_minor,
                       unsigned *sm_major, unsigned *sm_minor,
                       int *arch_specific, char *msg, size_t msglen)
{
    image_ptx p;
    unsigned major, minor;
    size_t n, i;
    uint8_t c;
    int ok;

    memset(&p, 0, sizeof(p));
    if (len >= SELFMAG && memcmp(bytes, ELFMAG, SELFMAG) == 0) {
        cumod__msgf(msg, msglen,
                    "%s is not PTX text: it is an ELF file (a cubin?)", name);
        return CUMOD_EIMAGE;
    }
    if (len >= 4 && memcmp(bytes, IMAGE_PTX_FATBIN_MAGIC, 4) == 0) {
        cumod__msgf(msg, msglen, "%s is not PTX text: it is a fatbin", name);
        return CUMOD_EIMAGE;
    }
    /* NULs may end the text (the driver reads PTX as a C string), but
     * nothing else may follow one. */
    for (n = 0; n < len && bytes[n] != 0; n++) {
        c = bytes[n];
        if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\v' &&
             c != '\f') ||
            c == 0x7f) {
            cumod__msgf(msg, msglen,
                        "%s is not PTX text: byte %zu is 0x%02x, a control "
                        "character",
                        name, n, c);
            return CUMOD_EIMAGE;
        }
    }
    for (i = n; i < len; i++) {
        if (bytes[i] != 0) {
            cumod__msgf(msg, msglen,
                        "%s is not PTX text: it has a NUL byte at offset "
                        "%zu, before its end",
                        name, n);
            return CUMOD_EIMAGE;
        }
    }
    p.s = (const char *)bytes;
    p.n = n;
    if (image_ptx_scan(&p, name, msg, msglen) != CUMOD_OK)
        return CUMOD_EIMAGE;

    major = p.sm / 10;
    minor = p.sm % 10;
    if (dev_major == 0 && dev_minor == 0)
        ok = 1;
    else if (p.variant == 'a')
        ok = major == dev_major && minor == dev_minor;
    else if (p.variant == 'f')
        ok = major == dev_major && minor <= dev_minor;
    else
        ok = major < dev_major || (major == dev_major && minor <= dev_minor);
    if (!ok) {
        cumod__msgf(msg, msglen,
                    "%s targets %s (.target on line %u); this device is "
                    "sm_%u%u: %s",
                    name, p.target, image_ptx_line(&p, p.target_at), dev_major,
                    dev_minor,
                    p.variant == 'a'
                        ? "arch-specific ('a') PTX compiles only for "
                          "exactly its own SM"
                    : p.variant == 'f'
                        ? "family-specific ('f') PTX compiles only for its "
                          "own major SM version, at its minor version or "
                          "above"
                        : "the JIT compiles PTX for its target SM or a "
                          "newer one, never an older one");
        return CUMOD_EIMAGE;
    }
    *sm_major = major;
    *sm_minor = minor;
    *arch_specific = p.variant == 'a';
    return CUMOD_OK;
}
