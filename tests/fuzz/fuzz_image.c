/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness: bytes -> the header checks of module images
 * (cumod__image_check: cubin ELF headers, the fatbin container, PTX's
 * .version and .target), the description of what they hold
 * (cumod__imeta_describe: .nv.info records, symbols, PTX parameter lists,
 * the fatbin entry the driver would pick) and the image file name rule
 * (cumod__image_name).
 *
 * Each input is checked as each kind of image, as the catalog checks a file
 * read from the kernel folder, for several devices: sm_90 (an H100), sm_86
 * (another minor version), sm_100 (another major) and 0.0 (no SM check).
 * The checks are pure, so a crash, a sanitizer report or a hang is a bug in
 * them; so is a result that breaks image.h's contract (a code other than
 * CUMOD_OK or CUMOD_EIMAGE, a message that does not start with the name, a
 * cubin accepted for a device that cannot run it), which traps.
 *
 * Seeds: tests/fuzz/corpus/image, the example kernels (cubins, the fatbin,
 * the PTX) and a few of tests/fakecuda's images, all under 32 KiB. Run by
 * hand: docs/testing.md "Fuzzing".
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/image/image.h"
#include "catalog/image/image_meta.h"
#include "cumod/errors.h"

#define FUZZ_NAME "fuzz.img"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_image_fail(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));

static void
fuzz_image_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("fuzz_image: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    __builtin_trap();
}

/* One check of the bytes as kind for the device major.minor, and what
 * image.h promises of its result. */
static void
fuzz_image_check(const uint8_t *data, size_t size, cumod_image_kind kind,
                 unsigned major, unsigned minor)
{
    unsigned smj = 1000, smn = 1000;
    int arch = -1;
    char msg[512];
    cumod_err rc;

    msg[0] = '\0';
    rc = cumod__image_check(data, size, kind, FUZZ_NAME, major, minor, &smj,
                            &smn, &arch, msg, sizeof(msg));
    if (rc == CUMOD_EIMAGE) {
        if (strncmp(msg, FUZZ_NAME, strlen(FUZZ_NAME)) != 0)
            fuzz_image_fail("%s for sm_%u%u: the message does not start "
                            "with the name: \"%s\"",
                            cumod__image_kind_name(kind), major, minor, msg);
        return;
    }
    if (rc != CUMOD_OK)
        fuzz_image_fail("%s for sm_%u%u: %s (%s), not CUMOD_OK or "
                        "CUMOD_EIMAGE",
                        cumod__image_kind_name(kind), major, minor,
                        cumod_errname(rc), msg);
    if (arch != 0 && arch != 1)
        fuzz_image_fail("%s for sm_%u%u: accepted, arch_specific %d",
                        cumod__image_kind_name(kind), major, minor, arch);
    if (kind == CUMOD_IMAGE_FATBIN && (smj != 0 || smn != 0))
        fuzz_image_fail("fatbin: accepted with an SM of its own (%u.%u)", smj,
                        smn);
    /* A cubin runs on its own major version at its minor or above; an
     * arch-specific one only on exactly its SM. */
    if (kind == CUMOD_IMAGE_CUBIN && (major != 0 || minor != 0) &&
        (smj != major || smn > minor || (arch && smn != minor)))
        fuzz_image_fail("cubin for sm_%u%u%s accepted for an sm_%u%u device",
                        smj, smn, arch ? "a" : "", major, minor);
}

/* The description of the bytes as kind for the device major.minor, and
 * what image_meta.h promises of its result. */
static void
fuzz_image_describe(const uint8_t *data, size_t size, cumod_image_kind kind,
                    unsigned major, unsigned minor)
{
    cumod_imeta m;
    char msg[512];
    cumod_err rc;
    size_t i;

    msg[0] = '\0';
    rc = cumod__imeta_describe(data, size, kind, FUZZ_NAME, major, minor, &m,
                               msg, sizeof(msg));
    if (rc != CUMOD_OK) {
        if (rc != CUMOD_EIMAGE && rc != CUMOD_ENOTSUP && rc != CUMOD_ENOMEM &&
            !(rc == CUMOD_EINVAL && kind == CUMOD_IMAGE_FATBIN && major == 0 &&
              minor == 0))
            fuzz_image_fail("describe %s for sm_%u%u: %s (%s)",
                            cumod__image_kind_name(kind), major, minor,
                            cumod_errname(rc), msg);
        if (strncmp(msg, FUZZ_NAME, strlen(FUZZ_NAME)) != 0)
            fuzz_image_fail("describe %s for sm_%u%u: the message does not "
                            "start with the name: \"%s\"",
                            cumod__image_kind_name(kind), major, minor, msg);
        return;
    }
    for (i = 0; i < m.nkernels; i++)
        if (m.kernels[i].name == NULL ||
            (m.kernels[i].nparams > 0 && m.kernels[i].params == NULL))
            fuzz_image_fail("describe %s: kernel %zu half described",
                            cumod__image_kind_name(kind), i);
    for (i = 0; i < m.nglobals; i++)
        if (m.globals[i].name == NULL)
            fuzz_image_fail("describe %s: global %zu has no name",
                            cumod__image_kind_name(kind), i);
    cumod__imeta_fini(&m);
}

/* The name rule on the input's first bytes as a file name. */
static void
fuzz_image_name(const uint8_t *data, size_t size)
{
    char name[CUMOD_IMAGE_NAME_MAX + 16], stem[CUMOD_IMAGE_NAME_MAX + 1];
    cumod_image_kind kind = CUMOD_IMAGE_KINDS;
    size_t n = size < sizeof(name) - 1 ? size : sizeof(name) - 1;

    memcpy(name, data, n);
    name[n] = '\0';
    if (!cumod__image_name(name, stem, &kind))
        return;
    size_t len = strlen(stem);
    if (len < 1 || len > CUMOD_IMAGE_NAME_MAX ||
        strspn(stem, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                     "0123456789_.-") != len ||
        strncmp(name, stem, len) != 0 || name[len] != '.' || name[0] == '.' ||
        (unsigned)kind >= CUMOD_IMAGE_KINDS ||
        strcmp(name + len + 1, cumod__image_kind_name(kind)) != 0)
        fuzz_image_fail("the name \"%s\" was taken as stem \"%s\", kind %d",
                        name, stem, (int)kind);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const unsigned devs[][2] = {{9, 0}, {8, 6}, {10, 0}, {0, 0}};

    for (int k = 0; k < CUMOD_IMAGE_KINDS; k++)
        for (size_t d = 0; d < sizeof(devs) / sizeof(devs[0]); d++) {
            fuzz_image_check(data, size, (cumod_image_kind)k, devs[d][0],
                             devs[d][1]);
            fuzz_image_describe(data, size, (cumod_image_kind)k, devs[d][0],
                                devs[d][1]);
        }
    fuzz_image_name(data, size);
    return 0;
}
