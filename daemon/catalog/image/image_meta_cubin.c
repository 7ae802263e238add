/* SPDX-License-Identifier: MIT */
/*
 * Describing a cubin: its kernels and globals, read from the ELF sections
 * the driver reads. Every fact below was read from nvcc 13.0's output
 * (readelf, hexdumps, cuobjdump -elf, which names the attributes, and
 * cuobjdump -res-usage) and compared with what driver 580 says of the
 * loaded module on an H100 (cuFuncGetParamInfo, cuFuncGetAttribute,
 * cuModuleGetGlobal; tests/gpu/driver_report.c prints both):
 *
 * - Kernels are the STT_FUNC symbols marked as entries (st_other bit 0x10,
 *   STO_CUDA_ENTRY) whose section is .text.<name>. The mark is what tells
 *   them apart: a device function of a -rdc build linked by nvlink is a
 *   global STT_FUNC with a .text.<name> and a .nv.info.<name> of its own,
 *   but no mark, and the driver does not list it; a static __global__ (or
 *   one in an anonymous namespace) is a local symbol with the mark, and
 *   the driver lists it. They are listed from the symbol table's end, the
 *   order the driver enumerates them in.
 * - Each kernel's .nv.info.<name> holds records (see nvinfo.c of the fake
 *   for the format): u8 format (1 none, 2 byte, 3 half-word, 4 sized), u8
 *   attribute, u16 value or, for format 4, the payload's length, then the
 *   payload. Read here:
 *     0x17 EIATTR_KPARAM_INFO: u32 index, u16 ordinal, u16 offset, u32 whose
 *          bits 18..31 are the size (a parameter buffer up to 4 KiB);
 *     0x45 EIATTR_KPARAM_INFO_V2: the same, but the whole u32 is the size
 *          (what ptxas writes for every parameter of a kernel whose buffer
 *          is larger: a 20000-byte struct);
 *     0x05 EIATTR_MAX_THREADS: u32 x, y, z of __launch_bounds__ / .maxntid;
 *          the driver's MAX_THREADS_PER_BLOCK is at most their product;
 *     0x10 EIATTR_REQNTID: u32 x, y, z of .reqntid (which does not lower
 *          MAX_THREADS_PER_BLOCK: the driver says 1024 for .reqntid 64,2,1);
 *     0x3d EIATTR_CTA_PER_CLUSTER: u32 x, y, z of __cluster_dims__ or
 *          .reqnctapercluster: REQUIRED_CLUSTER_WIDTH, HEIGHT, DEPTH;
 *     0x3e EIATTR_EXPLICIT_CLUSTER, no value: __cluster_dims__ or
 *          .explicitcluster, CLUSTER_SIZE_MUST_BE_SET 1 (a lone
 *          .reqnctapercluster writes 0x3d without it, and the driver says
 *          0 there).
 * - Registers: the module's .nv.info keys EIATTR_REGCOUNT (0x2f) records by
 *   symbol index (u32 symbol, u32 count): NUM_REGS and -res-usage's REG.
 *   The .text.<name> section's sh_info is the symbol's index alone in CUDA
 *   13's cubins (bits 24..31 zero); older toolkits kept the count there,
 *   which is read only where no EIATTR_REGCOUNT names the kernel.
 * - Static shared memory is the size of .nv.shared.<name>, less 1 KiB where
 *   the cubin has a .nv.shared.reserved.0 section (sm_90 and later put the
 *   block's reserved 1 KiB at the start of each kernel's section; the
 *   driver counts it apart): the driver says 0, 4, 64, 160 and 1024 for
 *   sections of 1024, 1028, 1088, 1184 and 2048 bytes. sm_80 cubins have
 *   no reserved section and no such KiB.
 * - Globals are the STT_OBJECT symbols defined in .nv.global (__device__,
 *   zero-initialised), .nv.global.init (__device__ with a value) and the
 *   .nv.constant<N> bank sections (__constant__; bank 3 on sm_90), local or
 *   global alike (cuModuleGetGlobal finds both), st_size bytes each.
 *   CONST_SIZE_BYTES, the same for every kernel of a module, is the size
 *   of the banks that hold __constant__ objects (not of .nv.constant4,
 *   which ptxas fills with addresses and names no object).
 *
 * Not shared with the fake driver's cubin reader (tests/fakecuda/cubin.c,
 * nvinfo.c), on purpose: the fake stands in for the real driver that this
 * reader is tested against (tests/image_meta_driver_test.c compares what
 * both say of the same images; tests/gpu/driver_report.c holds the fake to
 * the real one), and a test driver must not share the reader it tests, or a
 * misreading would agree with itself. The two read the same facts, found
 * the same way, and each says where it learnt them.
 */
#include "image_meta_internal.h"

#include <elf.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"

enum {
    CUBIN_STO_ENTRY = 0x10,
    CUBIN_SYM = 24, /* sizeof(Elf64_Sym) */
    CUBIN_SEC = 64, /* sizeof(Elf64_Shdr) */
    CUBIN_RESERVED_SMEM = 1024,
    EIFMT_NVAL = 1,
    EIFMT_HVAL = 3,
    EIFMT_SVAL = 4,
    EIATTR_MAX_THREADS = 0x05,
    EIATTR_REQNTID = 0x10,
    EIATTR_KPARAM_INFO = 0x17,
    EIATTR_REGCOUNT = 0x2f,
    EIATTR_CTA_PER_CLUSTER = 0x3d,
    EIATTR_EXPLICIT_CLUSTER = 0x3e,
    EIATTR_KPARAM_INFO_V2 = 0x45,
};

typedef struct cubin_sec {
    const char *name; /* NUL-terminated inside .shstrtab */
    uint32_t type, info, link;
    uint64_t off, size, entsize;
} cubin_sec;

typedef struct cubin_name {
    const char *name;
    unsigned index;
} cubin_name;

typedef struct cubin_rd {
    const uint8_t *b;
    size_t len;
    const char *what;
    cubin_sec *sec;
    cubin_name *names; /* the sections by name */
    unsigned nsec;
    const cubin_sec *symtab, *strtab;
    size_t nsyms;
    int32_t *regs;  /* by symbol index, -1 where no EIATTR_REGCOUNT says */
    uint8_t *banks; /* by section: holds a __constant__ object */
    int reserved_smem;
    char *msg;
    size_t msglen;
} cubin_rd;

typedef struct cubin_rec {
    unsigned fmt, attr, value;
    const uint8_t *payload; /* value bytes for EIFMT_SVAL */
    size_t at;              /* offset in its section, for messages */
} cubin_rec;

static cumod_err
cubin_bad(cubin_rd *c, const char *what)
{
    return cumod__errf(c->msg, c->msglen, CUMOD_EIMAGE, "%s is malformed: %s",
                       c->what, what);
}

/* The NUL-terminated string at off of a string table, or NULL. */
static const char *
cubin_str(const cubin_rd *c, const cubin_sec *s, uint64_t off)
{
    const char *at;

    if (s->type != SHT_STRTAB || off >= s->size)
        return NULL;
    at = (const char *)c->b + s->off + off;
    return memchr(at, '\0', (size_t)(s->size - off)) != NULL ? at : NULL;
}

static int
cubin_name_cmp(const void *a, const void *b)
{
    return strcmp(((const cubin_name *)a)->name, ((const cubin_name *)b)->name);
}

/* Compares prefix + name with s, without building the string. */
static int
cubin_cmp2(const char *prefix, const char *name, const char *s)
{
    for (; *prefix != '\0'; prefix++, s++)
        if (*prefix != *s)
            return (unsigned char)*prefix - (unsigned char)*s;
    return strcmp(name, s);
}

/* The section named prefix + name, or NULL. */
static const cubin_sec *
cubin_find(const cubin_rd *c, const char *prefix, const char *name)
{
    unsigned lo = 0, hi = c->nsec, mid;
    int d;

    while (lo < hi) {
        mid = lo + (hi - lo) / 2;
        d = cubin_cmp2(prefix, name, c->names[mid].name);
        if (d == 0)
            return &c->sec[c->names[mid].index];
        if (d < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* The section table, its names, and every section's bytes in the file. */
static cumod_err
cubin_sections(cubin_rd *c)
{
    uint64_t shoff = cumod__imeta_le64(c->b + offsetof(Elf64_Ehdr, e_shoff));
    unsigned shnum = cumod__imeta_le16(c->b + offsetof(Elf64_Ehdr, e_shnum));
    unsigned strndx =
        cumod__imeta_le16(c->b + offsetof(Elf64_Ehdr, e_shstrndx));
    const uint8_t *h;
    unsigned i;

    if (shnum == 0 || strndx >= shnum ||
        cumod__imeta_le16(c->b + offsetof(Elf64_Ehdr, e_shentsize)) !=
            CUBIN_SEC ||
        !cumod__imeta_within(shoff, (uint64_t)shnum * CUBIN_SEC, c->len))
        return cubin_bad(c, "its section table or the index of its section "
                            "names is out of range");
    c->sec = calloc(shnum, sizeof(*c->sec));
    c->names = calloc(shnum, sizeof(*c->names));
    if (c->sec == NULL || c->names == NULL)
        return cumod__errf(c->msg, c->msglen, CUMOD_ENOMEM,
                           "%s: no memory for its %u sections", c->what, shnum);
    c->nsec = shnum;
    for (i = 0; i < shnum; i++) {
        cubin_sec *s = &c->sec[i];

        h = c->b + shoff + (uint64_t)i * CUBIN_SEC;
        s->type = cumod__imeta_le32(h + offsetof(Elf64_Shdr, sh_type));
        s->off = cumod__imeta_le64(h + offsetof(Elf64_Shdr, sh_offset));
        s->size = cumod__imeta_le64(h + offsetof(Elf64_Shdr, sh_size));
        s->link = cumod__imeta_le32(h + offsetof(Elf64_Shdr, sh_link));
        s->info = cumod__imeta_le32(h + offsetof(Elf64_Shdr, sh_info));
        s->entsize = cumod__imeta_le64(h + offsetof(Elf64_Shdr, sh_entsize));
        /* A null section has no bytes, whatever its header says: found by
         * name (a null .nv.info), it must read as empty, not past the
         * file (its offset and size are not checked below). */
        if (s->type == SHT_NULL)
            s->off = s->size = 0;
        if (s->type != SHT_NOBITS && s->type != SHT_NULL &&
            !cumod__imeta_within(s->off, s->size, c->len))
            return cubin_bad(c, "a section lies past its end");
    }
    for (i = 0; i < shnum; i++) {
        h = c->b + shoff + (uint64_t)i * CUBIN_SEC;
        c->sec[i].name =
            cubin_str(c, &c->sec[strndx],
                      cumod__imeta_le32(h + offsetof(Elf64_Shdr, sh_name)));
        if (c->sec[i].name == NULL)
            return cubin_bad(c, "a section's name lies outside the table of "
                                "section names");
        c->names[i] = (cubin_name){c->sec[i].name, i};
    }
    qsort(c->names, shnum, sizeof(*c->names), cubin_name_cmp);
    c->reserved_smem = cubin_find(c, ".nv.shared.reserved.0", "") != NULL;
    return CUMOD_OK;
}

/* The next .nv.info record of s at *at: 1, 0 at its end, -1 if malformed. */
static int
cubin_rec_next(const cubin_rd *c, const cubin_sec *s, size_t *at, cubin_rec *r)
{
    const uint8_t *p;

    if (*at >= s->size)
        return 0;
    if (s->size - *at < 4)
        return -1;
    p = c->b + s->off + *at;
    r->fmt = p[0];
    r->attr = p[1];
    r->value = cumod__imeta_le16(p + 2);
    r->payload = p + 4;
    r->at = *at;
    if (r->fmt == EIFMT_SVAL) {
        if (r->value > s->size - *at - 4)
            return -1;
        *at += 4 + (size_t)r->value;
        return 1;
    }
    *at += 4;
    return r->fmt >= EIFMT_NVAL && r->fmt <= EIFMT_HVAL ? 1 : -1;
}

/* Register counts by symbol from the module's .nv.info. */
static cumod_err
cubin_regs(cubin_rd *c)
{
    const cubin_sec *s = cubin_find(c, ".nv.info", "");
    cubin_rec r;
    size_t at = 0, i;
    uint32_t sym, v;
    int k;

    c->regs = malloc((c->nsyms + 1) * sizeof(*c->regs));
    if (c->regs == NULL)
        return cumod__errf(c->msg, c->msglen, CUMOD_ENOMEM,
                           "%s: no memory for its %zu symbols", c->what,
                           c->nsyms);
    for (i = 0; i < c->nsyms; i++)
        c->regs[i] = -1;
    if (s == NULL || s->type == SHT_NOBITS)
        return CUMOD_OK;
    while ((k = cubin_rec_next(c, s, &at, &r)) == 1) {
        if (r.attr != EIATTR_REGCOUNT || r.fmt != EIFMT_SVAL || r.value < 8)
            continue;
        sym = cumod__imeta_le32(r.payload);
        v = cumod__imeta_le32(r.payload + 4);
        if (sym < c->nsyms)
            c->regs[sym] = v > INT32_MAX ? INT32_MAX : (int32_t)v;
    }
    return k < 0 ? cubin_bad(c, ".nv.info has a record running past its end "
                                "or of an unknown format")
                 : CUMOD_OK;
}

static uint32_t
cubin_sat32(uint64_t v)
{
    return v > INT32_MAX ? INT32_MAX : (uint32_t)v;
}

/* The parameters of a kernel, from its KPARAM_INFO records (either
 * version): dense ordinals from 0, each once. */
static cumod_err
cubin_params(cubin_rd *c, const cubin_sec *s, cumod_kdesc *k)
{
    cubin_rec r;
    size_t at = 0;
    uint32_t n = 0, top = 0, ord, word;
    uint8_t *seen;
    cumod_err rc = CUMOD_OK;

    while (cubin_rec_next(c, s, &at, &r) == 1) {
        if ((r.attr != EIATTR_KPARAM_INFO && r.attr != EIATTR_KPARAM_INFO_V2) ||
            r.fmt != EIFMT_SVAL || r.value < 12)
            continue;
        ord = cumod__imeta_le16(r.payload + 4);
        top = ord + 1 > top ? ord + 1 : top;
        n++;
    }
    if (n == 0)
        return CUMOD_OK;
    if (top != n)
        return cumod__errf(c->msg, c->msglen, CUMOD_EIMAGE,
                           "%s is malformed: kernel %s has %u parameter "
                           "records for ordinals up to %u",
                           c->what, k->name, n, top - 1);
    k->params = calloc(n, sizeof(*k->params));
    seen = calloc(n, 1);
    if (k->params == NULL || seen == NULL) {
        free(seen);
        return cumod__errf(c->msg, c->msglen, CUMOD_ENOMEM,
                           "%s: no memory for the %u parameters of %s", c->what,
                           n, k->name);
    }
    k->nparams = n;
    at = 0;
    while (cubin_rec_next(c, s, &at, &r) == 1) {
        if ((r.attr != EIATTR_KPARAM_INFO && r.attr != EIATTR_KPARAM_INFO_V2) ||
            r.fmt != EIFMT_SVAL || r.value < 12)
            continue;
        ord = cumod__imeta_le16(r.payload + 4);
        word = cumod__imeta_le32(r.payload + 8);
        if (seen[ord]++) {
            rc = cumod__errf(c->msg, c->msglen, CUMOD_EIMAGE,
                             "%s is malformed: kernel %s describes "
                             "parameter %u twice",
                             c->what, k->name, ord);
            break;
        }
        k->params[ord].offset = cumod__imeta_le16(r.payload + 6);
        k->params[ord].size = r.attr == EIATTR_KPARAM_INFO ? word >> 18 : word;
    }
    free(seen);
    return rc;
}

/* A kernel's .nv.info.<name>: parameters, launch bounds, cluster shape. */
static cumod_err
cubin_kernel_info(cubin_rd *c, const cubin_sec *s, cumod_kdesc *k)
{
    cubin_rec r;
    size_t at = 0;
    uint64_t t;
    int i, n;
    uint32_t xyz[3];

    while ((n = cubin_rec_next(c, s, &at, &r)) == 1) {
        if (r.attr == EIATTR_EXPLICIT_CLUSTER) {
            k->cluster_explicit = 1;
            continue;
        }
        if ((r.attr != EIATTR_MAX_THREADS && r.attr != EIATTR_REQNTID &&
             r.attr != EIATTR_CTA_PER_CLUSTER) ||
            r.fmt != EIFMT_SVAL || r.value < 12)
            continue;
        for (i = 0; i < 3; i++)
            xyz[i] = cumod__imeta_le32(r.payload + 4 * i);
        if (r.attr == EIATTR_MAX_THREADS) {
            t = (uint64_t)cubin_sat32(xyz[0]) * cubin_sat32(xyz[1]);
            t = (uint64_t)cubin_sat32(t) * cubin_sat32(xyz[2]);
            k->max_threads = (int32_t)cubin_sat32(t);
        } else {
            memcpy(r.attr == EIATTR_REQNTID ? k->reqntid : k->cluster, xyz,
                   sizeof(xyz));
        }
    }
    if (n < 0)
        return cumod__errf(c->msg, c->msglen, CUMOD_EIMAGE,
                           "%s is malformed: .nv.info.%s has a record at "
                           "byte %zu that runs past its end or has an "
                           "unknown format",
                           c->what, k->name, at);
    return cubin_params(c, s, k);
}

/* Symbol i, if it is a kernel: its description appended. */
static cumod_err
cubin_kernel(cubin_rd *c, const uint8_t *sym, size_t i, cumod_imeta *m)
{
    unsigned type = ELF64_ST_TYPE(sym[4]), other = sym[5];
    unsigned shndx = cumod__imeta_le16(sym + 6);
    const cubin_sec *text, *info, *shared;
    const char *name;
    cumod_kdesc *k;
    uint64_t bytes;
    cumod_err rc;

    if (type != STT_FUNC || !(other & CUBIN_STO_ENTRY) || shndx == SHN_UNDEF ||
        shndx >= c->nsec)
        return CUMOD_OK;
    name = cubin_str(c, c->strtab, cumod__imeta_le32(sym));
    if (name == NULL)
        return cubin_bad(c, "a kernel symbol's name lies outside its "
                            "string table");
    text = cubin_find(c, ".text.", name);
    if (name[0] == '\0' || text != &c->sec[shndx])
        return CUMOD_OK;
    rc = cumod__imeta_add_kernel(m, name, strlen(name), &k, c->msg, c->msglen);
    if (rc != CUMOD_OK)
        return rc;
    info = cubin_find(c, ".nv.info.", name);
    if (info != NULL && info->type != SHT_NOBITS &&
        (rc = cubin_kernel_info(c, info, k)) != CUMOD_OK)
        return rc;
    shared = cubin_find(c, ".nv.shared.", name);
    if (shared != NULL) {
        bytes = shared->size;
        if (c->reserved_smem)
            bytes =
                bytes > CUBIN_RESERVED_SMEM ? bytes - CUBIN_RESERVED_SMEM : 0;
        k->static_shared = (int32_t)cubin_sat32(bytes);
    }
    k->registers = c->regs[i];
    if (k->registers < 0 && (text->info >> 24) != 0)
        k->registers = (int32_t)(text->info >> 24);
    return CUMOD_OK;
}

/* The bank sections of __constant__ objects: .nv.constant<digits>. */
static int
cubin_is_bank(const char *name)
{
    size_t n = strlen(".nv.constant");

    if (strncmp(name, ".nv.constant", n) != 0 || name[n] == '\0')
        return 0;
    return strspn(name + n, "0123456789") == strlen(name + n);
}

/* Symbol i, if it is a module global: appended. */
static cumod_err
cubin_global(cubin_rd *c, const uint8_t *sym, cumod_imeta *m)
{
    unsigned shndx = cumod__imeta_le16(sym + 6);
    const char *name, *sec;
    int constant;

    if (ELF64_ST_TYPE(sym[4]) != STT_OBJECT || shndx == SHN_UNDEF ||
        shndx >= c->nsec)
        return CUMOD_OK;
    sec = c->sec[shndx].name;
    constant = cubin_is_bank(sec);
    if (!constant && strcmp(sec, ".nv.global") != 0 &&
        strcmp(sec, ".nv.global.init") != 0)
        return CUMOD_OK;
    name = cubin_str(c, c->strtab, cumod__imeta_le32(sym));
    if (name == NULL)
        return cubin_bad(c, "a global's name lies outside its string table");
    if (name[0] == '\0')
        return CUMOD_OK;
    if (constant)
        c->banks[shndx] = 1;
    return cumod__imeta_add_global(m, name, strlen(name),
                                   cumod__imeta_le64(sym + 16), constant,
                                   c->msg, c->msglen);
}

static cumod_err
cubin_symbols(cubin_rd *c, cumod_imeta *m)
{
    const uint8_t *syms;
    unsigned i;
    size_t s;
    cumod_err rc = CUMOD_OK;

    for (i = 0; i < c->nsec && c->symtab == NULL; i++)
        if (c->sec[i].type == SHT_SYMTAB)
            c->symtab = &c->sec[i];
    if (c->symtab == NULL || c->symtab->entsize != CUBIN_SYM ||
        c->symtab->link >= c->nsec ||
        c->sec[c->symtab->link].type != SHT_STRTAB)
        return cubin_bad(c, "it has no usable symbol table");
    c->strtab = &c->sec[c->symtab->link];
    c->nsyms = (size_t)(c->symtab->size / CUBIN_SYM);
    syms = c->b + c->symtab->off;
    c->banks = calloc(c->nsec, 1);
    if (c->banks == NULL)
        return cumod__errf(c->msg, c->msglen, CUMOD_ENOMEM,
                           "%s: no memory for its sections", c->what);
    if ((rc = cubin_regs(c)) != CUMOD_OK)
        return rc;
    /* Kernels as the driver enumerates them: from the table's end. */
    for (s = c->nsyms; s-- > 1 && rc == CUMOD_OK;)
        rc = cubin_kernel(c, syms + s * CUBIN_SYM, s, m);
    for (s = 1; s < c->nsyms && rc == CUMOD_OK; s++)
        rc = cubin_global(c, syms + s * CUBIN_SYM, m);
    for (i = 0; i < c->nsec && rc == CUMOD_OK; i++)
        if (c->banks[i])
            m->const_bytes += c->sec[i].size;
    return rc;
}

cumod_err
cumod__imeta_cubin(const uint8_t *b, size_t len, const char *what,
                   cumod_imeta *m, char *msg, size_t msglen)
{
    cubin_rd c;
    cumod_err rc;

    memset(&c, 0, sizeof(c));
    c.b = b;
    c.len = len;
    c.what = what;
    c.msg = msg;
    c.msglen = msglen;
    if (len < sizeof(Elf64_Ehdr))
        rc = cubin_bad(&c, "it is shorter than an ELF header");
    else if ((rc = cubin_sections(&c)) == CUMOD_OK)
        rc = cubin_symbols(&c, m);
    free(c.sec);
    free(c.names);
    free(c.regs);
    free(c.banks);
    return rc;
}
