/* SPDX-License-Identifier: MIT */
#include "text.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cumod/errors.h"

/* The length of the valid UTF-8 sequence at s (at most n bytes), or 0
 * when s does not start one: no overlong forms, no surrogates, nothing
 * past U+10FFFF (RFC 3629). */
static size_t
text_utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t need;
    unsigned lo = 0x80, hi = 0xbf; /* bounds of the second byte */

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        need = 2;
    else if (c >= 0xe0 && c <= 0xef)
        need = 3;
    else if (c >= 0xf0 && c <= 0xf4)
        need = 4;
    else
        return 0;
    if (c == 0xe0)
        lo = 0xa0;
    else if (c == 0xed)
        hi = 0x9f;
    else if (c == 0xf0)
        lo = 0x90;
    else if (c == 0xf4)
        hi = 0x8f;
    if (n < need || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < need; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return need;
}

/* What the sequence at s (k bytes, valid UTF-8 or one invalid byte) is
 * written as: its escape in esc (returns its length), or 0 when it is
 * written as it is. */
static size_t
text_escape_one(const unsigned char *s, size_t k, cumod_text_mode mode,
                char esc[16])
{
    static const char hex[] = "0123456789abcdef";
    unsigned c = s[0];

    if (k == 1 && c >= 0x20 && c < 0x7f)
        return 0;
    if (k == 1 && c < 0x80 && mode == CUMOD_TEXT_REPLY &&
        (c == '\n' || c == '\t'))
        return 0;
    if (k == 1 && (c == '\n' || c == '\t' || c == '\r')) {
        esc[0] = '\\';
        esc[1] = c == '\n' ? 'n' : c == '\t' ? 't' : 'r';
        return 2;
    }
    /* The C1 controls (U+0080-U+009F) act on terminals as ESC does. */
    if (k == 2 && c == 0xc2 && s[1] < 0xa0) {
        memcpy(esc, "\\xc2\\x", 6);
        esc[6] = hex[s[1] >> 4];
        esc[7] = hex[s[1] & 15];
        return 8;
    }
    if (k > 1)
        return 0;
    esc[0] = '\\';
    esc[1] = 'x';
    esc[2] = hex[c >> 4];
    esc[3] = hex[c & 15];
    return 4;
}

/* The length of the next unit at s: a valid UTF-8 sequence, or one byte
 * that is not part of one. */
static size_t
text_unit(const unsigned char *s, size_t n)
{
    size_t k = text_utf8_len(s, n);
    return k ? k : 1;
}

size_t
cumod__text_escaped_len(const char *src, size_t len, cumod_text_mode mode)
{
    const unsigned char *s = (const unsigned char *)src;
    size_t out = 0;
    char esc[16];

    for (size_t i = 0; i < len;) {
        size_t k = text_unit(s + i, len - i);
        size_t e = text_escape_one(s + i, k, mode, esc);
        out += e ? e : k;
        i += k;
    }
    return out;
}

size_t
cumod__text_escape(char *dst, size_t cap, const char *src, size_t len,
                   cumod_text_mode mode, size_t *used)
{
    const unsigned char *s = (const unsigned char *)src;
    size_t out = 0, i = 0;
    char esc[16];

    if (cap == 0) {
        if (used != NULL)
            *used = 0;
        return 0;
    }
    while (i < len) {
        size_t k = text_unit(s + i, len - i);
        size_t e = text_escape_one(s + i, k, mode, esc);
        size_t w = e ? e : k;
        if (out + w >= cap)
            break;
        memcpy(dst + out, e ? esc : src + i, w);
        out += w;
        i += k;
    }
    dst[out] = '\0';
    if (used != NULL)
        *used = i;
    return out;
}

/* --- replies ------------------------------------------------------------ */

typedef void (*text_visit_fn)(char **field, void *arg);

/* Calls fn for every string field of m that is set, depth first. */
static void
text_visit(ProtobufCMessage *m, text_visit_fn fn, void *arg)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    char *base = (char *)m;

    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type != PROTOBUF_C_TYPE_STRING &&
            f->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0) {
            uint32_t which;
            memcpy(&which, base + f->quantifier_offset, sizeof(which));
            if (which != f->id)
                continue;
        }
        size_t n = 1;
        void **at = (void **)(base + f->offset);
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            memcpy(&n, base + f->quantifier_offset, sizeof(n));
            at = *(void ***)at;
            if (at == NULL)
                continue;
        }
        for (size_t k = 0; k < n; k++) {
            if (at[k] == NULL)
                continue;
            if (f->type == PROTOBUF_C_TYPE_STRING)
                fn((char **)&at[k], arg);
            else
                text_visit(at[k], fn, arg);
        }
    }
}

typedef struct text_count {
    size_t n, bytes;
} text_count;

static int
text_needs_fix(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    char esc[16];
    for (size_t i = 0; i < len;) {
        size_t k = text_unit(u + i, len - i);
        if (text_escape_one(u + i, k, CUMOD_TEXT_REPLY, esc) != 0)
            return 1;
        i += k;
    }
    return 0;
}

static void
text_count_one(char **field, void *arg)
{
    text_count *c = arg;
    size_t len = strlen(*field);
    if (!text_needs_fix(*field, len))
        return;
    c->n++;
    c->bytes += cumod__text_escaped_len(*field, len, CUMOD_TEXT_REPLY) + 1;
}

typedef struct text_fill {
    cumod_text_fix *fix;
    char *text;
} text_fill;

static void
text_fill_one(char **field, void *arg)
{
    text_fill *t = arg;
    size_t len = strlen(*field);
    if (!text_needs_fix(*field, len))
        return;
    size_t w = cumod__text_escape(
        t->text, cumod__text_escaped_len(*field, len, CUMOD_TEXT_REPLY) + 1,
        *field, len, CUMOD_TEXT_REPLY, NULL);
    t->fix->field[t->fix->n] = field;
    t->fix->orig[t->fix->n] = *field;
    t->fix->n++;
    *field = t->text;
    t->text += w + 1;
}

void
cumod__text_fix_reply(Cumod__Reply *reply, cumod_text_fix *fix)
{
    /* Packed as it is, never written: protobuf-c reads what it packs. */
    static const Cumod__Status nomem = {
        .base = PROTOBUF_C_MESSAGE_INIT(&cumod__status__descriptor),
        .code = CUMOD_ENOMEM,
        .message = "out of memory making the reply's text valid UTF-8",
    };
    text_count c = {0, 0};
    char *block;

    memset(fix, 0, sizeof(*fix));
    text_visit(&reply->base, text_count_one, &c);
    if (c.n == 0)
        return;
    size_t head = c.n * (sizeof(char **) + sizeof(char *));
    if ((block = malloc(head + c.bytes)) == NULL) {
        reply->body_case = CUMOD__REPLY__BODY__NOT_SET;
        reply->status = (Cumod__Status *)&nomem;
        return;
    }
    fix->field = (char ***)(void *)block;
    fix->orig = (char **)(void *)(block + c.n * sizeof(char **));
    text_fill t = {fix, block + head};
    text_visit(&reply->base, text_fill_one, &t);
}

void
cumod__text_fix_undo(cumod_text_fix *fix)
{
    /* Backwards: a field met twice (a message shared by two fields) gets
     * its own string back last. */
    for (size_t i = fix->n; i-- > 0;)
        *fix->field[i] = fix->orig[i];
    free(fix->field);
    memset(fix, 0, sizeof(*fix));
}
