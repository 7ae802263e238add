/* SPDX-License-Identifier: MIT */
/* cumodctl launch's typed arguments: parsing them into kernel argument
 * bytes, and printing buffers back. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_launch.h"

static const struct {
    const char *name;
    size_t size;
} args_views[] = {
    [CTL_VIEW_HEX] = {"hex", 1}, [CTL_VIEW_F32] = {"f32", 4},
    [CTL_VIEW_F64] = {"f64", 8}, [CTL_VIEW_I32] = {"i32", 4},
    [CTL_VIEW_U32] = {"u32", 4},
};

const char *
cumod__ctl_view_name(ctl_view v)
{
    return args_views[v].name;
}

size_t
cumod__ctl_view_size(ctl_view v)
{
    return args_views[v].size;
}

/* Decimal, or hexadecimal after 0x; the whole string. */
static int
args_int(const char *s, int is_signed, long long *ll, unsigned long long *ull)
{
    const char *d = (s[0] == '-' || s[0] == '+') ? s + 1 : s;
    int base = (d[0] == '0' && (d[1] == 'x' || d[1] == 'X')) ? 16 : 10;
    char *end;

    if (!is_signed && s[0] == '-')
        return -1;
    errno = 0;
    if (is_signed)
        *ll = strtoll(s, &end, base);
    else
        *ull = strtoull(s, &end, base);
    return (errno != 0 || end == s || *end != '\0') ? -1 : 0;
}

int
cumod__ctl_parse_uint(const char *s, unsigned long long max,
                      unsigned long long *v)
{
    unsigned long long u;

    if (args_int(s, 0, NULL, &u) != 0 || u > max)
        return -1;
    *v = u;
    return 0;
}

/* One value of a scalar type ("i32", ...) as the kernel takes it (the
 * host's little-endian bytes) into out; the byte count, or 0 if s is not
 * such a value. */
static size_t
args_scalar(const char *type, const char *s, unsigned char *out)
{
    size_t n;
    long long ll;
    unsigned long long ull;
    char *end;

    if (strlen(type) != 3)
        return 0;
    n = strcmp(type + 1, "64") == 0 ? 8 : 4;
    if (strcmp(type, "i32") == 0 || strcmp(type, "i64") == 0) {
        if (args_int(s, 1, &ll, NULL) != 0 ||
            (n == 4 && (ll < INT32_MIN || ll > INT32_MAX)))
            return 0;
        int32_t v32 = (int32_t)ll;
        int64_t v64 = ll;
        memcpy(out, n == 4 ? (void *)&v32 : (void *)&v64, n);
    } else if (strcmp(type, "u32") == 0 || strcmp(type, "u64") == 0) {
        if (args_int(s, 0, NULL, &ull) != 0 || (n == 4 && ull > UINT32_MAX))
            return 0;
        uint32_t v32 = (uint32_t)ull;
        uint64_t v64 = ull;
        memcpy(out, n == 4 ? (void *)&v32 : (void *)&v64, n);
    } else if (strcmp(type, "f32") == 0 || strcmp(type, "f64") == 0) {
        errno = 0;
        double d = strtod(s, &end);
        float f = (float)d;
        if (end == s || *end != '\0' || errno == ERANGE)
            return 0;
        memcpy(out, n == 4 ? (void *)&f : (void *)&d, n);
    } else {
        return 0;
    }
    return n;
}

/* Hex digits to bytes (a fresh allocation); -1 unless an even count of
 * them, no more than a kernel parameter holds. */
static int
args_hex(const char *s, unsigned char **out, size_t *n)
{
    size_t len = strlen(s);
    unsigned char *b;

    if (len == 0 || len % 2 || len / 2 > CUMOD_MAX_ARG_BYTES ||
        strspn(s, "0123456789abcdefABCDEF") != len ||
        (b = malloc(len / 2)) == NULL)
        return -1;
    for (size_t i = 0; i < len / 2; i++) {
        char two[3] = {s[2 * i], s[2 * i + 1], '\0'};
        b[i] = (unsigned char)strtoul(two, NULL, 16);
    }
    *out = b;
    *n = len / 2;
    return 0;
}

/* SIZE[:TYPE][=V,V,...], what follows "buf:". */
static int
args_buffer(char *spec, ctl_arg *a)
{
    char *init = strchr(spec, '='), *type, *end;
    unsigned long long size;
    size_t esize, count = 1;

    if (init != NULL)
        *init++ = '\0';
    if ((type = strchr(spec, ':')) != NULL)
        *type++ = '\0';
    errno = 0;
    size = strtoull(spec, &end, 10);
    if (*end == 'K' || *end == 'M' || *end == 'G') {
        size <<= (*end == 'K' ? 10 : *end == 'M' ? 20 : 30);
        end++;
    }
    if (errno || end == spec || *end || spec[0] == '-' || size == 0 ||
        size > (1ull << 40))
        return -1;
    a->is_buffer = 1;
    a->size = (size_t)size;
    a->view = CTL_VIEW_HEX;
    for (int v = CTL_VIEW_HEX; type != NULL && v <= CTL_VIEW_U32; v++)
        if (strcmp(type, args_views[v].name) == 0) {
            a->view = (ctl_view)v;
            type = NULL;
        }
    if (type != NULL)
        return -1;
    if (init == NULL)
        return 0;
    if (a->view == CTL_VIEW_HEX)
        return (args_hex(init, &a->bytes, &a->nbytes) != 0 ||
                a->nbytes > a->size)
                   ? -1
                   : 0;
    esize = args_views[a->view].size;
    for (const char *p = init; *p; p++)
        count += *p == ',';
    if (count * esize > a->size || (a->bytes = malloc(count * esize)) == NULL)
        return -1;
    for (char *v = strtok(init, ","); v != NULL; v = strtok(NULL, ",")) {
        if (args_scalar(args_views[a->view].name, v, a->bytes + a->nbytes) !=
            esize)
            return -1;
        a->nbytes += esize;
    }
    return a->nbytes == count * esize ? 0 : -1;
}

int
cumod__ctl_parse_arg(char *s, ctl_arg *a, cumod_arg *arg)
{
    char *colon = strchr(s, ':');
    size_t n;

    if (colon == NULL)
        return -1;
    *colon = '\0';
    const char *type = s, *val = colon + 1;
    if (strcmp(type, "buf") == 0)
        return args_buffer(colon + 1, a);
    if (strcmp(type, "hex") == 0) {
        if (args_hex(val, &a->bytes, &a->nbytes) != 0)
            return -1;
        *arg = cumod_arg_bytes(a->bytes, a->nbytes);
        return 0;
    }
    /* A value: its bytes live in the cumod_arg itself. */
    memset(arg, 0, sizeof(*arg));
    if ((n = args_scalar(type, val, arg->v.bytes)) == 0)
        return -1;
    arg->kind = CUMOD_ARG_VALUE;
    arg->len = n;
    /* Typed, so that the daemon can check it against a C++ kernel's
     * signature (args_scalar took only these six). */
    arg->type = type[0] == 'f'   ? (n == 4 ? CUMOD_TYPE_F32 : CUMOD_TYPE_F64)
                : type[0] == 'u' ? (n == 4 ? CUMOD_TYPE_U32 : CUMOD_TYPE_U64)
                                 : (n == 4 ? CUMOD_TYPE_I32 : CUMOD_TYPE_I64);
    return 0;
}

int
cumod__ctl_parse_dim3(const char *s, cumod_dim3 *d)
{
    unsigned long v[3] = {1, 1, 1};
    const char *p = s;
    char *end;

    for (int i = 0; i < 3; i++) {
        errno = 0;
        v[i] = strtoul(p, &end, 10);
        if (errno || end == p || *p == '-' || v[i] == 0 || v[i] > 0x7fffffff)
            return -1;
        if (*end == '\0')
            break;
        if (*end != ',' || i == 2)
            return -1;
        p = end + 1;
    }
    d->x = (unsigned)v[0];
    d->y = (unsigned)v[1];
    d->z = (unsigned)v[2];
    return 0;
}

void
cumod__ctl_format(ctl_view v, const unsigned char *e, char *out, size_t cap)
{
    float f;
    double d;
    int32_t s32;
    uint32_t u32;

    switch (v) {
    case CTL_VIEW_HEX:
        snprintf(out, cap, "%02x", e[0]);
        break;
    case CTL_VIEW_F32:
        memcpy(&f, e, sizeof(f));
        snprintf(out, cap, "%.9g", f);
        break;
    case CTL_VIEW_F64:
        memcpy(&d, e, sizeof(d));
        snprintf(out, cap, "%.17g", d);
        break;
    case CTL_VIEW_I32:
        memcpy(&s32, e, sizeof(s32));
        snprintf(out, cap, "%d", (int)s32);
        break;
    case CTL_VIEW_U32:
        memcpy(&u32, e, sizeof(u32));
        snprintf(out, cap, "%u", (unsigned)u32);
        break;
    }
}

int
cumod__ctl_parse_values(ctl_view v, char *list, unsigned char **out, size_t *n)
{
    size_t esize = args_views[v].size, count = 1;
    unsigned char *b;

    *out = NULL;
    *n = 0;
    if (v == CTL_VIEW_HEX)
        return args_hex(list, out, n);
    for (const char *p = list; *p; p++)
        count += *p == ',';
    if ((b = malloc(count * esize)) == NULL)
        return -1;
    size_t at = 0;
    for (char *x = strtok(list, ","); x != NULL; x = strtok(NULL, ",")) {
        if (at + esize > count * esize ||
            args_scalar(args_views[v].name, x, b + at) != esize) {
            free(b);
            return -1;
        }
        at += esize;
    }
    if (at != count * esize) {
        free(b);
        return -1;
    }
    *out = b;
    *n = at;
    return 0;
}

int
cumod__ctl_parse_view(const char *name, ctl_view *v)
{
    for (int i = CTL_VIEW_HEX; i <= CTL_VIEW_U32; i++)
        if (strcmp(name, args_views[i].name) == 0) {
            *v = (ctl_view)i;
            return 0;
        }
    return -1;
}
