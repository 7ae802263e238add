/* SPDX-License-Identifier: MIT */
/*
 * Cubins: ELF64, little-endian, e_machine EM_CUDA (190).
 *
 * What nvcc 13.0 writes, learnt by compiling kernels/vadd.cu for each SM and
 * reading the results (readelf, hexdumps):
 *
 * - e_flags carries the SM in one of two layouts, told apart by
 *   e_ident[EI_ABIVERSION]. ABI version 8 (OSABI 0x41; every cubin of CUDA
 *   13, and sm_100+ since 12.8): the SM in bits 8..15, a small version in
 *   the low byte, 0x06 in bits 24..31 (sm_75 0x06004b04, sm_80 0x06005004,
 *   sm_86 0x06005604, sm_89 0x06005904, sm_90 0x06005a04, sm_100
 *   0x06006402, sm_103 0x06006702, sm_120 0x06007802). ABI version 7 (OSABI
 *   0x33, CUDA 12 and older, up to sm_90): the SM in the low byte, the PTX
 *   (virtual) SM in bits 16..23, 0x800 for an "a" target (published values:
 *   sm_80 0x00500550, sm_90 0x005a055a; not compiled here, nvcc 13 cannot).
 * - The arch-specific "a" targets (sm_90a, sm_100a): CUDA 13 leaves e_flags as
 *   for the plain SM (LLVM's EF_CUDA_ACCELERATORS, 0x8, stays clear); the
 *   difference is in .nv.compat, whose attribute 0x09 (a byte value) is 1.
 *   The "f" targets (sm_100f) build the same cubin as the plain SM.
 * - Kernels are STT_FUNC symbols with st_other 0x10 (the entry mark), in a
 *   section named .text.<name>, local ones too (a static __global__ or one
 *   in an anonymous namespace: the driver lists them). A non-inlined device
 *   function is a local STT_FUNC inside its caller's .text section; in a
 *   -rdc build linked by nvlink it is a global STT_FUNC with a .text.<name>
 *   and a .nv.info.<name> of its own, but no mark, and the driver does not
 *   list it. The symbol table lists kernels in reverse source order; the
 *   driver (580, on the H100) enumerates them from the table's end, so in
 *   source order.
 * - Kernel attributes and parameters are in .nv.info.<name>, registers and
 *   frame sizes in .nv.info (nvinfo.c reads both). Static shared memory is
 *   the size of .nv.shared.<name>, less 1 KiB where the cubin has a
 *   .nv.shared.reserved.0 section (sm_90: the section of a kernel with a
 *   1 KiB array is 2 KiB; the driver says 1 KiB).
 * - CONST_SIZE_BYTES is the module's: the size of the .nv.constant<N>
 *   sections that hold __constant__ objects (bank 3 on sm_90), for every
 *   kernel alike (the H100 says 116 for a module with 16 and 100 bytes of
 *   them, in kernels that use none); .nv.constant4, ptxas's own, names no
 *   object and does not count.
 * - .note.nv.cuinfo's descriptor: u16 note version, u16 virtual SM, u32
 *   toolkit version.
 *
 * The daemon reads the same ELF (daemon/catalog/image/image_check.c,
 * image_meta_cubin.c) with code of its own, and this does not share it, on
 * purpose: this fake is the driver that reader is tested against
 * (tests/image_meta_driver_test.c), so it must be an independent reading,
 * or a misreading would agree with itself. The fake is held to the real
 * driver by tests/gpu/driver_report.c.
 */
#include "fake.h"

#include <elf.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
    "the cubin reader copies little-endian ELF structures as they are");

enum {
    CUBIN_EM_CUDA = 190,
    CUBIN_STO_ENTRY = 0x10,
};

typedef struct cubin_name {
    const char *name;
    uint32_t index;
} cubin_name;

typedef struct cubin {
    const uint8_t *p;
    size_t n;
    Elf64_Shdr *sh;
    uint32_t shnum;
    cubin_name *names; /* section names, sorted */
    uint32_t nnames;
    const Elf64_Shdr *strtab; /* the symbol table's strings */
    uint32_t shstrndx;        /* the section names' section */
    int *regs;                /* by symbol index, from .nv.info */
    int *frame;
} cubin;

static uint16_t
cubin_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t
cubin_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

int
fake_cubin_sm(const uint8_t *p, size_t n, int *arch_specific)
{
    if (n < sizeof(Elf64_Ehdr) || memcmp(p, ELFMAG, SELFMAG) != 0 ||
        p[EI_CLASS] != ELFCLASS64 || p[EI_DATA] != ELFDATA2LSB ||
        cubin_le16(p + offsetof(Elf64_Ehdr, e_machine)) != CUBIN_EM_CUDA)
        return -1;
    uint32_t flags = cubin_le32(p + offsetof(Elf64_Ehdr, e_flags));
    if (p[EI_ABIVERSION] >= 8) {
        *arch_specific = (flags & 0x8) != 0;
        return (int)((flags >> 8) & 0xff);
    }
    *arch_specific = (flags & 0x800) != 0;
    return (int)(flags & 0xff);
}

/* A NUL-terminated string at off inside section s, or NULL. */
static const char *
cubin_str(const cubin *c, const Elf64_Shdr *s, uint64_t off)
{
    if (s->sh_type != SHT_STRTAB || off >= s->sh_size)
        return NULL;
    const char *at = (const char *)c->p + s->sh_offset + off;
    return memchr(at, '\0', s->sh_size - off) != NULL ? at : NULL;
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

static int
cubin_name_cmp(const void *a, const void *b)
{
    return strcmp(((const cubin_name *)a)->name, ((const cubin_name *)b)->name);
}

/* The section named prefix + name, or NULL. */
static const Elf64_Shdr *
cubin_find(const cubin *c, const char *prefix, const char *name)
{
    uint32_t lo = 0, hi = c->nnames;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int d = cubin_cmp2(prefix, name, c->names[mid].name);
        if (d == 0)
            return &c->sh[c->names[mid].index];
        if (d < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* Reads the section table and checks that every section lies in the image. */
static int
cubin_sections(cubin *c, fake_jitlog *log)
{
    Elf64_Ehdr eh;
    memcpy(&eh, c->p, sizeof(eh));
    uint64_t shnum = eh.e_shnum, strndx = eh.e_shstrndx;
    if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff > c->n ||
        c->n - eh.e_shoff < sizeof(Elf64_Shdr))
        goto fail;
    Elf64_Shdr s0;
    memcpy(&s0, c->p + eh.e_shoff, sizeof(s0));
    if (shnum == 0)
        shnum = s0.sh_size;
    if (strndx == SHN_XINDEX)
        strndx = s0.sh_link;
    if (shnum == 0 || shnum > (c->n - eh.e_shoff) / sizeof(Elf64_Shdr) ||
        strndx >= shnum)
        goto fail;
    c->shnum = (uint32_t)shnum;
    c->shstrndx = (uint32_t)strndx;
    c->sh = malloc(shnum * sizeof(*c->sh));
    c->names = malloc(shnum * sizeof(*c->names));
    if (c->sh == NULL || c->names == NULL)
        goto fail;
    memcpy(c->sh, c->p + eh.e_shoff, shnum * sizeof(*c->sh));
    for (uint32_t i = 0; i < c->shnum; i++) {
        const Elf64_Shdr *s = &c->sh[i];
        if (s->sh_type != SHT_NOBITS &&
            (s->sh_offset > c->n || s->sh_size > c->n - s->sh_offset))
            goto fail;
    }
    for (uint32_t i = 0; i < c->shnum; i++) {
        const char *name = cubin_str(c, &c->sh[strndx], c->sh[i].sh_name);
        if (name == NULL)
            goto fail;
        c->names[c->nnames++] = (cubin_name){name, i};
    }
    qsort(c->names, c->nnames, sizeof(*c->names), cubin_name_cmp);
    return 0;
fail:
    fake_jitlog_printf(log, 1, "fakecuda: cubin: bad section table");
    return -1;
}

/* The module-wide .nv.info: register counts and frame sizes by symbol. */
static int
cubin_module_info(cubin *c, uint32_t nsyms)
{
    c->regs = calloc(nsyms + 1, sizeof(*c->regs));
    c->frame = calloc(nsyms + 1, sizeof(*c->frame));
    if (c->regs == NULL || c->frame == NULL)
        return -1;
    const Elf64_Shdr *s = cubin_find(c, ".nv.info", "");
    if (s == NULL || s->sh_type == SHT_NOBITS)
        return 0;
    return fake_nvinfo_module(c->p + s->sh_offset, s->sh_size, nsyms, c->regs,
                              c->frame);
}

/* The kernel a symbol names, or 0 if it is no kernel; -1 if malformed. */
static int
cubin_kernel(cubin *c, const Elf64_Sym *sym, uint32_t i, fake_image *img)
{
    if (ELF64_ST_TYPE(sym->st_info) != STT_FUNC ||
        !(sym->st_other & CUBIN_STO_ENTRY) || sym->st_shndx == SHN_UNDEF ||
        sym->st_shndx >= c->shnum)
        return 0;
    const char *name = cubin_str(c, c->strtab, sym->st_name);
    if (name == NULL || name[0] == '\0')
        return -1;
    const Elf64_Shdr *text = cubin_find(c, ".text.", name);
    const Elf64_Shdr *info = cubin_find(c, ".nv.info.", name);
    if (text != &c->sh[sym->st_shndx])
        return 0;
    fake_kernel *k = fake_image_add_kernel(img, name, strlen(name));
    if (k == NULL)
        return -1;
    if (info != NULL && info->sh_type != SHT_NOBITS &&
        fake_nvinfo_kernel(c->p + info->sh_offset, info->sh_size, k) != 0)
        return -1;
    const Elf64_Shdr *shared = cubin_find(c, ".nv.shared.", name);
    if (shared != NULL) {
        /* sm_90 cubins put the block's 1 KiB of reserved shared memory at
         * the start of each kernel's section; the driver counts it apart. */
        uint64_t bytes = shared->sh_size;
        if (cubin_find(c, ".nv.shared.reserved.0", "") != NULL)
            bytes = bytes > 1024 ? bytes - 1024 : 0;
        k->shared_bytes =
            bytes > FAKE_STATIC_SHMEM ? FAKE_STATIC_SHMEM : (int)bytes;
    }
    k->num_regs = c->regs[i];
    k->local_bytes = c->frame[i];
    if (k->num_regs >
        0) { /* registers are handed out per warp, 256 at a time */
        int per_warp = (k->num_regs * 32 + 255) / 256 * 256;
        int limit = 65536 / per_warp * 32;
        if (limit < k->max_threads)
            k->max_threads = limit;
    }
    return 1;
}

/* A global a symbol names (an object in .nv.global*, .nv.constant*), or
 * nothing; -1 when out of memory. Its initial bytes are the section's,
 * where the section has any (.nv.global is NOBITS: zeros). */
static int
cubin_global(cubin *c, const Elf64_Sym *sym, fake_image *img)
{
    if (ELF64_ST_TYPE(sym->st_info) != STT_OBJECT ||
        sym->st_shndx == SHN_UNDEF || sym->st_shndx >= c->shnum ||
        sym->st_size == 0)
        return 0;
    const Elf64_Shdr *sec = &c->sh[sym->st_shndx];
    const char *sname = cubin_str(c, &c->sh[c->shstrndx], sec->sh_name);
    const char *name = cubin_str(c, c->strtab, sym->st_name);
    if (sname == NULL || name == NULL || name[0] == '\0')
        return 0;
    int constant = strncmp(sname, ".nv.constant", 12) == 0;
    if (!constant && strncmp(sname, ".nv.global", 10) != 0)
        return 0;
    if (sym->st_value > sec->sh_size ||
        sym->st_size > sec->sh_size - sym->st_value)
        return 0;
    const uint8_t *init = NULL;
    if (sec->sh_type != SHT_NOBITS && sec->sh_offset <= c->n &&
        sec->sh_offset + sym->st_value + sym->st_size <= c->n)
        init = c->p + sec->sh_offset + sym->st_value;
    return fake_image_add_global(img, name, sym->st_size, init, constant);
}

/* The arch-specific ("a") mark: .nv.compat's attribute 0x09 set to 1. */
static int
cubin_arch_specific(const cubin *c)
{
    const Elf64_Shdr *s = cubin_find(c, ".nv.compat", "");
    if (s == NULL || s->sh_type == SHT_NOBITS)
        return 0;
    return fake_nvinfo_has(c->p + s->sh_offset, s->sh_size, 0x09, 1);
}

/* The virtual SM from .note.nv.cuinfo, or 0. */
static int
cubin_virtual_sm(const cubin *c)
{
    const Elf64_Shdr *s = cubin_find(c, ".note.nv.cuinfo", "");
    if (s == NULL || s->sh_type != SHT_NOTE || s->sh_size < 12)
        return 0;
    const uint8_t *d = c->p + s->sh_offset;
    uint64_t namesz = cubin_le32(d), descsz = cubin_le32(d + 4);
    uint64_t desc = 12 + ((namesz + 3) & ~(uint64_t)3);
    if (descsz < 4 || desc > s->sh_size || s->sh_size - desc < 4)
        return 0;
    return cubin_le16(d + desc + 2);
}

/* The module's __constant__ bytes: the .nv.constant<digits> sections that
 * hold an object. */
static int
cubin_const_bytes(const cubin *c, const Elf64_Shdr *symtab)
{
    uint8_t *bank = calloc(c->shnum, 1);
    uint64_t bytes = 0;
    if (bank == NULL)
        return 0;
    for (uint64_t i = 0; i < symtab->sh_size / sizeof(Elf64_Sym); i++) {
        Elf64_Sym sym;
        memcpy(&sym, c->p + symtab->sh_offset + i * sizeof(sym), sizeof(sym));
        if (ELF64_ST_TYPE(sym.st_info) == STT_OBJECT &&
            sym.st_shndx != SHN_UNDEF && sym.st_shndx < c->shnum)
            bank[sym.st_shndx] = 1;
    }
    for (uint32_t i = 0; i < c->nnames; i++) {
        const char *name = c->names[i].name, *digits = name + 12;
        if (strncmp(name, ".nv.constant", 12) == 0 && *digits != '\0' &&
            strspn(digits, "0123456789") == strlen(digits) &&
            bank[c->names[i].index])
            bytes += c->sh[c->names[i].index].sh_size;
    }
    free(bank);
    return bytes > 0x7fffffff ? 0x7fffffff : (int)bytes;
}

static void
cubin_fini(cubin *c)
{
    free(c->sh);
    free(c->names);
    free(c->regs);
    free(c->frame);
}

CUresult
fake_cubin_parse(const uint8_t *p, size_t n, int sm, fake_image *img,
                 fake_jitlog *log)
{
    int arch_specific = 0;
    int isa = fake_cubin_sm(p, n, &arch_specific);
    if (isa < 0) {
        fake_jitlog_printf(log, 1, "%s", fake_unknown_format_log);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    if (cubin_le16(p + offsetof(Elf64_Ehdr, e_type)) != ET_EXEC) {
        fake_jitlog_printf(
            log, 1, "fakecuda: cubin: not an executable image (ET_EXEC)");
        return CUDA_ERROR_INVALID_IMAGE;
    }
    cubin c = {.p = p, .n = n};
    CUresult rc = CUDA_ERROR_INVALID_IMAGE;
    const Elf64_Shdr *symtab = NULL;
    memset(img, 0, sizeof(*img));
    if (cubin_sections(&c, log) != 0)
        goto fail;
    arch_specific |= cubin_arch_specific(&c);
    if (!fake_sm_compatible(isa, arch_specific, sm)) {
        fake_jitlog_printf(log, 1,
                           "fakecuda: cubin for sm_%d%s does not run on sm_%d",
                           isa, arch_specific ? "a" : "", sm);
        rc = CUDA_ERROR_NO_BINARY_FOR_GPU;
        goto fail;
    }
    for (uint32_t i = 0; i < c.shnum && symtab == NULL; i++)
        if (c.sh[i].sh_type == SHT_SYMTAB)
            symtab = &c.sh[i];
    if (symtab == NULL || symtab->sh_entsize != sizeof(Elf64_Sym) ||
        symtab->sh_link >= c.shnum ||
        c.sh[symtab->sh_link].sh_type != SHT_STRTAB) {
        fake_jitlog_printf(log, 1, "fakecuda: cubin: no usable symbol table");
        goto fail;
    }
    c.strtab = &c.sh[symtab->sh_link];
    uint32_t nsyms = (uint32_t)(symtab->sh_size / sizeof(Elf64_Sym) > 0xffffff
                                    ? 0xffffff
                                    : symtab->sh_size / sizeof(Elf64_Sym));
    if (cubin_module_info(&c, nsyms) != 0) {
        fake_jitlog_printf(log, 1, "fakecuda: cubin: malformed .nv.info");
        goto fail;
    }
    /* Enumerate as the driver does: the symbol table from its end. */
    for (uint32_t i = nsyms; i-- > 0;) {
        Elf64_Sym sym;
        memcpy(&sym, p + symtab->sh_offset + (size_t)i * sizeof(sym),
               sizeof(sym));
        if (cubin_kernel(&c, &sym, i, img) < 0 ||
            cubin_global(&c, &sym, img) < 0) {
            fake_jitlog_printf(
                log, 1, "fakecuda: cubin: malformed kernel (symbol %u)", i);
            goto fail;
        }
    }
    img->kind = FAKE_IMAGE_CUBIN;
    img->sm = isa;
    img->const_bytes = cubin_const_bytes(&c, symtab);
    /* The virtual SM: the cuinfo note, else (old layout) e_flags 16..23. */
    img->ptx_version = cubin_virtual_sm(&c);
    if (img->ptx_version == 0 && p[EI_ABIVERSION] < 8)
        img->ptx_version =
            (int)((cubin_le32(p + offsetof(Elf64_Ehdr, e_flags)) >> 16) & 0xff);
    if (img->ptx_version == 0)
        img->ptx_version = isa;
    cubin_fini(&c);
    return CUDA_SUCCESS;
fail:
    fake_image_fini(img);
    cubin_fini(&c);
    return rc;
}
