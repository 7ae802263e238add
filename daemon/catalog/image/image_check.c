/* SPDX-License-Identifier: MIT */
/*
 * The header checks of module images (cumod__image_check): enough to refuse
 * junk, truncated files and images for another SM with a sentence that says
 * so, before the bytes reach the driver. Every read of a file byte is bounds
 * checked here; nothing about the bytes is assumed.
 *
 * How a cubin names its SM. e_flags has had two layouts, told apart by the
 * ELF ABI version (e_ident[EI_ABIVERSION]); LLVM's BinaryFormat/ELF.h calls
 * them ELFABIVERSION_CUDA_V1 (7) and ELFABIVERSION_CUDA_V2 (8):
 *
 *   V1, ABI version <= 7 (CUDA 12 and older toolchains):
 *     bits 0..7   the SM, major * 10 + minor (EF_CUDA_SM)
 *     bit 11      0x800, arch-specific 'a' (EF_CUDA_ACCELERATORS_V1)
 *     bits 8..10, 12 texture mode, 64-bit addresses, a software flag
 *     bits 16..23 the virtual (PTX) SM
 *   V2, ABI version >= 8 (what ptxas of CUDA 13.0 writes, for every SM):
 *     bits 8..15  the SM, major * 10 + minor (EF_CUDA_SM_MASK)
 *     bit 3       0x8, arch-specific 'a' (EF_CUDA_ACCELERATORS)
 *     the low byte otherwise 0x04 up to sm_90 and 0x02 from sm_100 on, and
 *     0x06 in bits 24..31, meanings not documented
 *
 * What nvcc 13.0 (V13.0.88) writes for kernels/vadd.cu with -cubin -arch=:
 *   sm_75 0x06004b04  sm_80 0x06005004  sm_86 0x06005604  sm_87 0x06005704
 *   sm_89 0x06005904  sm_90 0x06005a04  sm_100 0x06006402 sm_103 0x06006702
 *   sm_110 0x06006e02 sm_120 0x06007802 sm_121 0x06007902
 * and for sm_90a, sm_100a, sm_120a exactly the e_flags of the plain SM: the
 * 0x8 bit stays clear. What marks those images is the .nv.compat section
 * (type SHT_LOPROC + 0x86), a list of 4-byte records (format, attribute,
 * value) like .nv.info's, where attribute 0x09 (format 2, a byte value) is 1
 * for an 'a' build and 0 otherwise. Both marks are honoured. 'f' builds
 * (sm_100f) are the plain SM's cubin but for the ptxas command line kept in
 * .note.nv.tkinfo, and need nothing: the plain rule (same major, device
 * minor not below the image's) is the family rule.
 *
 * tests/fakecuda/cubin.c reads the same header for the fake driver with
 * code of its own, on purpose: a test driver must not share the reader it
 * tests (see image_meta_cubin.c).
 */
#include "image.h"

#include <elf.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cumod/errors.h"
#include "common/status.h"

#define IMAGE_FATBIN_MAGIC 0xBA55ED50u
#define IMAGE_FATBIN_HDR 16u
#define IMAGE_CUDA_ABI_V2 8
#define IMAGE_EF_V1_ACCEL 0x800u
#define IMAGE_EF_V2_ACCEL 0x8u
#define IMAGE_SHT_NV_COMPAT (SHT_LOPROC + 0x86u)
#define IMAGE_COMPAT_ARCH 0x09

typedef struct image_dev {
    unsigned major, minor; /* 0, 0: no SM check */
} image_dev;

static uint16_t
image_check_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t
image_check_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static uint64_t
image_check_le64(const uint8_t *p)
{
    return (uint64_t)image_check_le32(p) | (uint64_t)image_check_le32(p + 4)
                                               << 32;
}

/* 1 if [off, off + size) lies within len bytes, without overflowing. */
static int
image_check_within(uint64_t off, uint64_t size, size_t len)
{
    return off <= len && size <= len - off;
}

/* Text as PTX is: printable ASCII, white space, and UTF-8 (bytes >= 0x80,
 * which comments may hold). */
static int
image_check_text_byte(uint8_t c)
{
    return (c >= 0x20 && c != 0x7f) || c == '\t' || c == '\n' || c == '\r' ||
           c == '\v' || c == '\f';
}

/* What bytes plainly are, for messages: NULL when nothing in particular. */
static const char *
image_check_looks_like(const uint8_t *b, size_t len)
{
    size_t n = len < 4096 ? len : 4096, i;

    if (len >= SELFMAG && memcmp(b, ELFMAG, SELFMAG) == 0)
        return "an ELF file (a cubin?)";
    if (len >= 4 && image_check_le32(b) == IMAGE_FATBIN_MAGIC)
        return "a fatbin";
    for (i = 0; i < n; i++)
        if (!image_check_text_byte(b[i]))
            return NULL;
    if (memmem(b, n, ".version", 8) != NULL)
        return "PTX text";
    return "text";
}

static int
image_check_sm_ok(unsigned major, unsigned minor, int arch, image_dev dev)
{
    if (dev.major == 0 && dev.minor == 0)
        return 1;
    if (arch)
        return major == dev.major && minor == dev.minor;
    return major == dev.major && minor <= dev.minor;
}

/* The arch-specific mark of .nv.compat (see the top of the file); 0 where
 * the section is missing or holds records of a format not known here. */
static int
image_check_compat_arch(const uint8_t *b, uint64_t off, uint64_t size)
{
    uint64_t p = off, end = off + size;
    uint8_t fmt, attr;

    while (end - p >= 4) {
        fmt = b[p];
        attr = b[p + 1];
        if (fmt == 2 && attr == IMAGE_COMPAT_ARCH)
            return b[p + 2] != 0;
        if (fmt >= 1 && fmt <= 3)
            p += 4;
        else if (fmt == 4)
            p += 4 + (uint64_t)image_check_le16(b + p + 2);
        else
            return 0;
        if (p > end)
            return 0;
    }
    return 0;
}

/* The ELF header says a cubin: the magic, 64-bit little-endian, EM_CUDA. */
static int
image_check_elf_ident(const uint8_t *b, size_t len, const char *name, char *msg,
                      size_t msglen)
{
    const char *like;
    unsigned machine;

    if (len < SELFMAG || memcmp(b, ELFMAG, SELFMAG) != 0) {
        like = image_check_looks_like(b, len);
        if (like != NULL) {
            cumod__msgf(msg, msglen,
                        "%s is not a cubin (no ELF magic); it looks like "
                        "%s",
                        name, like);
        } else {
            cumod__msgf(msg, msglen,
                        "%s is not a cubin: it does not start with the "
                        "ELF magic 7f 45 4c 46",
                        name);
        }
        return CUMOD_EIMAGE;
    }
    if (len < sizeof(Elf64_Ehdr)) {
        cumod__msgf(msg, msglen,
                    "%s is truncated: %zu bytes, shorter than an ELF64 "
                    "header (%zu)",
                    name, len, sizeof(Elf64_Ehdr));
        return CUMOD_EIMAGE;
    }
    if (b[EI_CLASS] != ELFCLASS64 || b[EI_DATA] != ELFDATA2LSB) {
        cumod__msgf(msg, msglen,
                    "%s is not a cubin: a cubin is a 64-bit "
                    "little-endian ELF, this one has class %u, data "
                    "encoding %u",
                    name, b[EI_CLASS], b[EI_DATA]);
        return CUMOD_EIMAGE;
    }
    machine = image_check_le16(b + offsetof(Elf64_Ehdr, e_machine));
    if (machine != EM_CUDA) {
        cumod__msgf(msg, msglen,
                    "%s is an ELF file for machine %u%s, not a cubin "
                    "(EM_CUDA, 190)",
                    name, machine,
                    machine == EM_X86_64    ? " (x86-64)"
                    : machine == EM_AARCH64 ? " (AArch64)"
                                            : "");
        return CUMOD_EIMAGE;
    }
    return CUMOD_OK;
}

/* 1 if section or segment i, [off, off + size), lies within the len
 * bytes; else 0 with a sentence in msg. */
static int
image_check_piece(const char *name, const char *what, unsigned i, uint64_t off,
                  uint64_t size, size_t len, char *msg, size_t msglen)
{
    if (image_check_within(off, size, len))
        return 1;
    cumod__msgf(msg, msglen,
                "%s is truncated or corrupt: %s %u (bytes %" PRIu64
                " to %" PRIu64 ") lies past its end (%zu bytes)",
                name, what, i, off, off + size, len);
    return 0;
}

/* Every section and segment lies within the len bytes; *compat: the
 * .nv.compat section marks the cubin arch-specific. */
static int
image_check_elf_tables(const uint8_t *b, size_t len, const char *name,
                       int *compat, char *msg, size_t msglen)
{
    uint64_t shoff, phoff, off, size;
    uint32_t type;
    unsigned shnum, shentsize, phnum, phentsize, i;

    shoff = image_check_le64(b + offsetof(Elf64_Ehdr, e_shoff));
    shnum = image_check_le16(b + offsetof(Elf64_Ehdr, e_shnum));
    shentsize = image_check_le16(b + offsetof(Elf64_Ehdr, e_shentsize));
    phoff = image_check_le64(b + offsetof(Elf64_Ehdr, e_phoff));
    phnum = image_check_le16(b + offsetof(Elf64_Ehdr, e_phnum));
    phentsize = image_check_le16(b + offsetof(Elf64_Ehdr, e_phentsize));
    if (shnum == 0 || shentsize != sizeof(Elf64_Shdr) ||
        (phnum != 0 && phentsize != sizeof(Elf64_Phdr))) {
        cumod__msgf(msg, msglen,
                    "%s is corrupt: its ELF header gives %u section "
                    "headers of %u bytes and %u program headers of %u "
                    "bytes",
                    name, shnum, shentsize, phnum, phentsize);
        return CUMOD_EIMAGE;
    }
    if (!image_check_within(shoff, (uint64_t)shnum * shentsize, len) ||
        !image_check_within(phoff, (uint64_t)phnum * phentsize, len)) {
        cumod__msgf(msg, msglen,
                    "%s is truncated or corrupt: its section or program "
                    "header table lies past its end (%zu bytes)",
                    name, len);
        return CUMOD_EIMAGE;
    }
    *compat = 0;
    for (i = 0; i < shnum; i++) {
        const uint8_t *sh = b + shoff + (uint64_t)i * shentsize;

        type = image_check_le32(sh + offsetof(Elf64_Shdr, sh_type));
        off = image_check_le64(sh + offsetof(Elf64_Shdr, sh_offset));
        size = image_check_le64(sh + offsetof(Elf64_Shdr, sh_size));
        if (type == SHT_NULL || type == SHT_NOBITS)
            continue;
        if (!image_check_piece(name, "section", i, off, size, len, msg, msglen))
            return CUMOD_EIMAGE;
        if (type == IMAGE_SHT_NV_COMPAT)
            *compat |= image_check_compat_arch(b, off, size);
    }
    for (i = 0; i < phnum; i++) {
        const uint8_t *ph = b + phoff + (uint64_t)i * phentsize;

        off = image_check_le64(ph + offsetof(Elf64_Phdr, p_offset));
        size = image_check_le64(ph + offsetof(Elf64_Phdr, p_filesz));
        if (!image_check_piece(name, "segment", i, off, size, len, msg, msglen))
            return CUMOD_EIMAGE;
    }
    return CUMOD_OK;
}

/* The SM the ELF flags name (arch-specific by the flags or by compat),
 * and whether it runs on dev. */
static int
image_check_cubin_sm(const uint8_t *b, const char *name, image_dev dev,
                     int compat, unsigned *smj, unsigned *smn, int *arch,
                     char *msg, size_t msglen)
{
    unsigned sm, major, minor, abi;
    uint32_t flags;
    int accel, by_flags;

    abi = b[EI_ABIVERSION];
    flags = image_check_le32(b + offsetof(Elf64_Ehdr, e_flags));
    if (abi >= IMAGE_CUDA_ABI_V2) {
        sm = (flags >> 8) & 0xffu;
        by_flags = (flags & IMAGE_EF_V2_ACCEL) != 0;
    } else {
        sm = flags & 0xffu;
        by_flags = (flags & IMAGE_EF_V1_ACCEL) != 0;
    }
    if (sm < 20) {
        cumod__msgf(msg, msglen,
                    "%s: its ELF e_flags 0x%08x (ABI version %u) name no "
                    "SM version (read sm_%u)",
                    name, flags, abi, sm);
        return CUMOD_EIMAGE;
    }
    major = sm / 10;
    minor = sm % 10;
    accel = by_flags || compat;
    if (!image_check_sm_ok(major, minor, accel, dev)) {
        cumod__msgf(msg, msglen,
                    "%s is built for sm_%u%u%s (ELF e_flags 0x%08x%s); "
                    "this device is sm_%u%u: %s",
                    name, major, minor, accel ? "a" : "", flags,
                    by_flags ? ", arch-specific"
                    : accel  ? "; arch-specific by its .nv.compat section"
                             : "",
                    dev.major, dev.minor,
                    accel ? "an arch-specific ('a') cubin runs only on "
                            "exactly its own SM"
                          : "a cubin runs only on its own major SM "
                            "version, at its minor version or above");
        return CUMOD_EIMAGE;
    }
    *smj = major;
    *smn = minor;
    *arch = accel;
    return CUMOD_OK;
}

static int
image_check_cubin(const uint8_t *b, size_t len, const char *name, image_dev dev,
                  unsigned *smj, unsigned *smn, int *arch, char *msg,
                  size_t msglen)
{
    int compat = 0, rv;

    if ((rv = image_check_elf_ident(b, len, name, msg, msglen)) != CUMOD_OK ||
        (rv = image_check_elf_tables(b, len, name, &compat, msg, msglen)) !=
            CUMOD_OK)
        return rv;
    return image_check_cubin_sm(b, name, dev, compat, smj, smn, arch, msg,
                                msglen);
}

static int
image_check_fatbin(const uint8_t *b, size_t len, const char *name, char *msg,
                   size_t msglen)
{
    const char *like = image_check_looks_like(b, len);
    uint32_t magic;
    uint64_t fat;
    unsigned version, hdr;

    if (like != NULL && strcmp(like, "a fatbin") != 0) {
        cumod__msgf(msg, msglen, "%s is not a fatbin: it looks like %s", name,
                    like);
        return CUMOD_EIMAGE;
    }
    if (len < IMAGE_FATBIN_HDR) {
        cumod__msgf(msg, msglen,
                    "%s is truncated: %zu bytes, shorter than a fatbin "
                    "header (%u)",
                    name, len, IMAGE_FATBIN_HDR);
        return CUMOD_EIMAGE;
    }
    magic = image_check_le32(b);
    version = image_check_le16(b + 4);
    hdr = image_check_le16(b + 6);
    fat = image_check_le64(b + 8);
    if (magic != IMAGE_FATBIN_MAGIC) {
        cumod__msgf(msg, msglen,
                    "%s is not a fatbin: it starts with 0x%08x, not the "
                    "fatbin magic 0x%08x",
                    name, magic, IMAGE_FATBIN_MAGIC);
        return CUMOD_EIMAGE;
    }
    if (version != 1 || hdr < IMAGE_FATBIN_HDR) {
        cumod__msgf(msg, msglen,
                    "%s: fatbin version %u with a %u-byte header is not "
                    "one known here (version 1, at least 16 bytes)",
                    name, version, hdr);
        return CUMOD_EIMAGE;
    }
    if (!image_check_within(hdr, fat, len)) {
        cumod__msgf(msg, msglen,
                    "%s is truncated: its fatbin header promises %u + "
                    "%" PRIu64 " bytes, the file has %zu",
                    name, hdr, fat, len);
        return CUMOD_EIMAGE;
    }
    if (fat == 0) {
        cumod__msgf(msg, msglen, "%s is a fatbin that holds no images", name);
        return CUMOD_EIMAGE;
    }
    /* Walk the entries (u16 kind, u16 version, u32 header size, u64
     * payload size, ...) to the end: driver 580 hangs in cuModuleLoadData
     * on a fatbin whose entries run into zeros (a truncated copy padded by
     * the filesystem), so such a file must never reach it. */
    uint64_t off = hdr, end = hdr + fat;
    unsigned n = 0;
    while (off < end) {
        if (end - off < 16) {
            cumod__msgf(msg, msglen,
                        "%s: fatbin entry %u at byte %" PRIu64 " is cut short",
                        name, n, off);
            return CUMOD_EIMAGE;
        }
        unsigned kind = image_check_le16(b + off);
        uint32_t ehdr = image_check_le32(b + off + 4);
        uint64_t payload = image_check_le64(b + off + 8);
        if (kind == 0 || ehdr < 16 || ehdr > end - off ||
            payload > end - off - ehdr) {
            cumod__msgf(msg, msglen,
                        "%s: fatbin entry %u at byte %" PRIu64
                        " is malformed (kind %u, header %u bytes, "
                        "payload %" PRIu64 " bytes)",
                        name, n, off, kind, ehdr, payload);
            return CUMOD_EIMAGE;
        }
        off += ehdr + payload;
        n++;
    }
    return CUMOD_OK;
}

/* CUDA C++ source: text for NVRTC (which takes a NUL-terminated string):
 * no NUL byte, and not plainly a binary image. What it says is NVRTC's to
 * judge, in the compile worker. */
static int
image_check_cu(const uint8_t *b, size_t len, const char *name, char *msg,
               size_t msglen)
{
    if (len >= 4 && memcmp(b,
                           "\x7f"
                           "ELF",
                           4) == 0) {
        cumod__msgf(msg, msglen,
                    "%s is not CUDA C++ source: it is an ELF file (a cubin "
                    "goes in NAME.cubin)",
                    name);
        return CUMOD_EIMAGE;
    }
    const uint8_t *nul = memchr(b, 0, len);
    if (nul != NULL) {
        cumod__msgf(msg, msglen,
                    "%s is not CUDA C++ source: a NUL byte at offset %zu "
                    "(a binary file?)",
                    name, (size_t)(nul - b));
        return CUMOD_EIMAGE;
    }
    return CUMOD_OK;
}

cumod_err
cumod__image_check(const uint8_t *bytes, size_t len, cumod_image_kind kind,
                   const char *name, unsigned dev_major, unsigned dev_minor,
                   unsigned *sm_major, unsigned *sm_minor, int *arch_specific,
                   char *msg, size_t msglen)
{
    image_dev dev = {dev_major, dev_minor};
    unsigned smj = 0, smn = 0;
    int arch = 0, rc;

    if (name == NULL)
        name = "the image";
    if (bytes == NULL && len != 0) {
        cumod__msgf(msg, msglen, "%s: no bytes to check", name);
        return CUMOD_EINVAL;
    }
    if (kind != CUMOD_IMAGE_CUBIN && kind != CUMOD_IMAGE_FATBIN &&
        kind != CUMOD_IMAGE_PTX && kind != CUMOD_IMAGE_CU) {
        cumod__msgf(msg, msglen, "%s: unknown image kind %d", name, (int)kind);
        return CUMOD_EINVAL;
    }
    if (len == 0) {
        cumod__msgf(msg, msglen, "%s is empty", name);
        return CUMOD_EIMAGE;
    }
    switch (kind) {
    case CUMOD_IMAGE_CUBIN:
        rc = image_check_cubin(bytes, len, name, dev, &smj, &smn, &arch, msg,
                               msglen);
        break;
    case CUMOD_IMAGE_FATBIN:
        rc = image_check_fatbin(bytes, len, name, msg, msglen);
        break;
    case CUMOD_IMAGE_CU:
        rc = image_check_cu(bytes, len, name, msg, msglen);
        break;
    default:
        rc = cumod__image_check_ptx(bytes, len, name, dev_major, dev_minor,
                                    &smj, &smn, &arch, msg, msglen);
        break;
    }
    if (rc != CUMOD_OK)
        return rc;
    if (sm_major != NULL)
        *sm_major = smj;
    if (sm_minor != NULL)
        *sm_minor = smn;
    if (arch_specific != NULL)
        *arch_specific = arch;
    return CUMOD_OK;
}
