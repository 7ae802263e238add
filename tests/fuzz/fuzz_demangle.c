/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness: bytes -> the demangler (cumod__demangle,
 * catalog/demangle/demangle.c), as the catalog calls it on a kernel name read
 * from a user's cubin. The input, cut at its first NUL, is the name.
 *
 * The demangler is pure, so a crash, a sanitizer report or a hang is a bug
 * in it; so is a result that breaks demangle.h's contract, which traps: a
 * return other than 0 or -1, a result for a name without the _Z prefix,
 * a signature that is not the name and the parameters' types, an empty
 * string, a flag other than 0 or 1, a reference that is not indirect, or
 * more output than CUMOD_DM_OUT_MAX.
 *
 * Seeds: tests/fuzz/corpus/demangle, names nvcc 13.0 wrote for the kernels
 * of tests/demangle_kernels.cu, tests/demangle_cub.cu and kernels/, and a
 * few hand-written ones. Run by hand: docs/testing.md "Fuzzing".
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/demangle/demangle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_demangle_fail(const char *name, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

static void
fuzz_demangle_fail(const char *name, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "fuzz_demangle: %s: ", name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    __builtin_trap();
}

/* What demangle.h promises of a result. */
static void
fuzz_demangle_check(const char *name, const cumod_demangled *d)
{
    const char *s = d->signature;
    size_t i, at, total;

    if (strncmp(name, "_Z", 2) != 0)
        fuzz_demangle_fail(name, "accepted without the _Z prefix");
    if (d->name == NULL || s == NULL || d->name[0] == '\0' ||
        (d->nparams > 0) != (d->params != NULL))
        fuzz_demangle_fail(name, "missing or empty strings");
    at = strlen(d->name);
    total = at + strlen(s);
    if (strncmp(s, d->name, at) != 0 || s[at++] != '(')
        fuzz_demangle_fail(name, "signature '%s' does not start with '%s('", s,
                           d->name);
    for (i = 0; i < d->nparams; i++) {
        const cumod_dm_param *p = &d->params[i];
        size_t n;

        if (p->type == NULL || p->type[0] == '\0')
            fuzz_demangle_fail(name, "parameter %zu has no type", i);
        if ((p->indirect != 0 && p->indirect != 1) ||
            (p->reference != 0 && p->reference != 1) ||
            (p->reference && !p->indirect))
            fuzz_demangle_fail(name,
                               "parameter %zu (%s): indirect %d, "
                               "reference %d",
                               i, p->type, p->indirect, p->reference);
        if (i > 0 && strncmp(s + at, ", ", 2) == 0)
            at += 2;
        else if (i > 0)
            fuzz_demangle_fail(name, "no ', ' before parameter %zu", i);
        n = strlen(p->type);
        total += n;
        if (strncmp(s + at, p->type, n) != 0)
            fuzz_demangle_fail(name, "parameter %zu (%s) is not in '%s'", i,
                               p->type, s);
        at += n;
    }
    if (strcmp(s + at, ")") != 0)
        fuzz_demangle_fail(name, "'%s' goes on after its parameters", s);
    if (total > CUMOD_DM_OUT_MAX)
        fuzz_demangle_fail(name, "%zu bytes of output", total);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *name = malloc(size + 1);
    cumod_demangled d;
    int rc;

    if (name == NULL)
        return 0;
    memcpy(name, data, size);
    name[size] = '\0';
    /* Past the first NUL the bytes are no part of the name; an allocation
     * of exactly the name's size lets ASan see a read past it. */
    name = realloc(name, strlen(name) + 1);
    if (name == NULL)
        return 0;
    rc = cumod__demangle(name, &d);
    if (rc != 0 && rc != -1)
        fuzz_demangle_fail(name, "returned %d", rc);
    if (rc == 0) {
        fuzz_demangle_check(name, &d);
        cumod__demangled_fini(&d);
    }
    free(name);
    return 0;
}
