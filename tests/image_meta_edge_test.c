/* SPDX-License-Identifier: MIT */
/*
 * cumod__imeta_describe on what the built images do not show: PTX written
 * by hand (module-scope .shared, open array dimensions, .ptr parameters,
 * declarations, comments), and cubins whose tables were damaged on
 * purpose (a parameter described twice or never, a record running past
 * its section, no symbol table).
 */
#include <criterion/criterion.h>
#include <elf.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/image/image_meta.h"
#include "cumod/errors.h"
#include "image_meta_test.h"

#define PTX_HEAD ".version 8.0\n.target sm_90\n.address_size 64\n"

static cumod_err
describe_ptx(const char *text, cumod_imeta *m, char *msg, size_t msglen)
{
    memset(m, 0, sizeof(*m));
    return cumod__imeta_describe((const uint8_t *)text, strlen(text),
                                 CUMOD_IMAGE_PTX, "t.ptx", 9, 0, m, msg,
                                 msglen);
}

Test(image_meta_ptx, variables_parameters_and_declarations)
{
    static const char text[] =
        PTX_HEAD "// .visible .entry commented(.param .u32 a) { ret; }\n"
                 "/* .entry block_commented() { } */\n"
                 ".extern .entry elsewhere(.param .u32 a);\n"
                 ".extern .global .align 4 .u32 outside[4];\n"
                 ".extern .shared .align 16 .b8 dynamic[];\n"
                 ".global .align 4 .u32 arr[] = {1, 2, 3};\n"
                 ".global .align 1 .b8 grid[2][3] = {{1, 2, 3}, {4, 5, 6}};\n"
                 ".visible .global .v4 .f32 vec;\n"
                 ".global .u32 a1, a2[5];\n"
                 ".const .align 8 .b8 c1[3];\n"
                 ".const .align 8 .u64 c2 = 7;\n"
                 ".func (.param .b32 r) helper(.param .b32 x)\n{\n"
                 "\tret;\n}\n"
                 ".visible .entry k(\n"
                 "\t.param .u64 .ptr.global.align 16 k_p,\n"
                 "\t.param .u64 .ptr .shared .align 8 k_q,\n"
                 "\t.param .align 4 .b8 k_s[6],\n"
                 "\t.param .u8 k_c\n)\n"
                 ".maxntid 32, 2\n"
                 ".pragma \"nounroll\";\n"
                 "{\n"
                 "\t.shared .align 8 .b8 t1[12];\n"
                 "\t.shared .align 16 .b8 t2[4], t3[16];\n"
                 "$L1:\n"
                 "\tst.shared.v2.u32 [t1], {%r1, %r2};\n"
                 "\tret;\n"
                 "}\n"
                 ".visible .entry bare { ret; }\n";
    cumod_imeta m;
    char msg[256] = "";

    cr_assert_eq(describe_ptx(text, &m, msg, sizeof(msg)), CUMOD_OK, "%s", msg);
    cr_expect_eq(m.source, CUMOD_IMETA_PTX);
    cr_assert_eq(m.nkernels, 2);
    cumod_kdesc *k = &m.kernels[0];
    cr_expect_str_eq(k->name, "k");
    cr_assert_eq(k->nparams, 4);
    /* .ptr's .align is the pointee's: the pointers lie at 0 and 8. */
    cr_expect(k->params[0].offset == 0 && k->params[0].size == 8);
    cr_expect(k->params[1].offset == 8 && k->params[1].size == 8);
    cr_expect(k->params[2].offset == 16 && k->params[2].size == 6);
    cr_expect(k->params[3].offset == 22 && k->params[3].size == 1);
    cr_expect_eq(k->max_threads, 64);
    /* 12, then 4 at 16, then 16 at 32. */
    cr_expect_eq(k->static_shared, 48);
    cr_expect_eq(k->registers, -1);
    cr_expect_str_eq(m.kernels[1].name, "bare");
    cr_expect_eq(m.kernels[1].nparams, 0);
    cr_expect_null(m.kernels[1].params);

    static const struct {
        const char *name;
        uint64_t size;
        int constant;
    } g[] = {{"arr", 12, 0}, {"grid", 6, 0}, {"vec", 16, 0}, {"a1", 4, 0},
             {"a2", 20, 0},  {"c1", 3, 1},   {"c2", 8, 1}};
    cr_assert_eq(m.nglobals, sizeof(g) / sizeof(g[0]));
    for (size_t i = 0; i < m.nglobals; i++)
        cr_expect(strcmp(m.globals[i].name, g[i].name) == 0 &&
                      m.globals[i].size == g[i].size &&
                      m.globals[i].constant == g[i].constant,
                  "global %zu: %s %llu %d", i, m.globals[i].name,
                  (unsigned long long)m.globals[i].size, m.globals[i].constant);
    cr_expect_eq(m.const_bytes, 16); /* 3, then 8 at 8 */
    cumod__imeta_fini(&m);
}

Test(image_meta_ptx, shared_memory_outside_entries_is_unknown)
{
    static const char *const texts[] = {
        PTX_HEAD ".shared .align 4 .b8 pool[64];\n"
                 ".visible .entry k(.param .u64 p)\n{\n\tret;\n}\n",
        PTX_HEAD ".func helper()\n{\n\t.shared .align 4 .b8 s[16];\n"
                 "\tret;\n}\n"
                 ".visible .entry k()\n{\n\t.shared .b8 own[8];\n\tret;\n}\n",
    };
    for (size_t i = 0; i < 2; i++) {
        cumod_imeta m;
        char msg[256] = "";
        cr_assert_eq(describe_ptx(texts[i], &m, msg, sizeof(msg)), CUMOD_OK,
                     "%s", msg);
        cr_assert_eq(m.nkernels, 1);
        cr_expect_eq(m.kernels[0].static_shared, -1, "text %zu", i);
        cumod__imeta_fini(&m);
    }
}

Test(image_meta_ptx, refuses_what_the_jit_would_refuse)
{
    static const struct {
        const char *text, *why;
    } cases[] = {
        {PTX_HEAD ".visible .entry k(.param .u64)\n{\n\tret;\n}\n",
         "line 4: a parameter without a type or a name"},
        {PTX_HEAD ".visible .entry k(.param .align 3 .b8 p[4])\n{ ret; }\n",
         "line 4: a parameter's .align is not a power of two"},
        {PTX_HEAD ".visible .entry k(.param .u32 p, .reg .u32 q)\n{ ret; }\n",
         "a parameter list not understood here"},
        {PTX_HEAD ".visible .entry k(.param .u32 p)\n{\n\tret;\n",
         "a body that never ends"},
        {PTX_HEAD ".visible .entry k(.param .u32 p)\n.maxntid 64\n",
         "an .entry without a body"},
        {PTX_HEAD ".global .align 4 .u32 x[;\n", "not understood here"},
        {PTX_HEAD ".visible .entry (.param .u32 p) { ret; }\n",
         "an .entry without a name"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cumod_imeta m;
        char msg[256] = "";
        cr_expect_eq(describe_ptx(cases[i].text, &m, msg, sizeof(msg)),
                     CUMOD_EIMAGE, "case %zu: %s", i, msg);
        cr_expect_eq(strncmp(msg, "t.ptx: line ", 12), 0, "case %zu: %s", i,
                     msg);
        cr_expect_not_null(strstr(msg, cases[i].why), "case %zu: %s", i, msg);
    }
}

/* ---- damaged cubins ---------------------------------------------------- */

/* The section named name of a cubin: its header's offset in the file. */
static size_t
elf_section(const mt_file *f, const char *name)
{
    Elf64_Ehdr eh;
    Elf64_Shdr sh, str;

    memcpy(&eh, f->bytes, sizeof(eh));
    memcpy(&str, f->bytes + eh.e_shoff + (size_t)eh.e_shstrndx * sizeof(sh),
           sizeof(str));
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        size_t at = eh.e_shoff + (size_t)i * sizeof(sh);
        memcpy(&sh, f->bytes + at, sizeof(sh));
        if (strcmp((const char *)f->bytes + str.sh_offset + sh.sh_name, name) ==
            0)
            return at;
    }
    cr_assert_fail("no section %s", name);
    return 0;
}

/* The offset of the n-th (0: first) KPARAM_INFO record of vadd. */
static size_t
kparam(const mt_file *f, int n)
{
    Elf64_Shdr sh;
    size_t at = elf_section(f, ".nv.info.vadd");

    memcpy(&sh, f->bytes + at, sizeof(sh));
    for (size_t o = sh.sh_offset; o + 16 <= sh.sh_offset + sh.sh_size; o += 4)
        if (memcmp(f->bytes + o, "\x04\x17\x0c\x00", 4) == 0 && n-- == 0)
            return o;
    cr_assert_fail("no parameter record %d", n);
    return 0;
}

static void
expect_refused(mt_file *f, const char *why)
{
    cumod_imeta m;
    char msg[256] = "";

    cr_expect_eq(cumod__imeta_describe(f->bytes, f->len, f->kind, "v.cubin", 9,
                                       0, &m, msg, sizeof(msg)),
                 CUMOD_EIMAGE, "%s", why);
    cr_expect_not_null(strstr(msg, why), "%s", msg);
    cr_expect_eq(strncmp(msg, "v.cubin is malformed: ", 22), 0, "%s", msg);
}

Test(image_meta_cubin, refuses_damaged_tables)
{
    mt_file f;
    size_t at;
    uint8_t keep[64];

    mt_read(CUMOD_TEST_KERNEL_DIR, "vadd.cubin", &f);
    /* Records run from the last parameter to the first: ordinals 3, 2,
     * 1, 0 at +4 of each payload. */
    at = kparam(&f, 0) + 4 + 4;
    cr_assert_eq(f.bytes[at], 3);
    f.bytes[at] = 9;
    expect_refused(&f, "kernel vadd has 4 parameter records for ordinals up "
                       "to 9");
    f.bytes[at] = 3;
    at = kparam(&f, 2) + 4 + 4;
    cr_assert_eq(f.bytes[at], 1);
    f.bytes[at] = 0;
    expect_refused(&f, "kernel vadd describes parameter 0 twice");
    f.bytes[at] = 1;
    at = kparam(&f, 0) + 2;
    f.bytes[at] = 0xff;
    f.bytes[at + 1] = 0xff;
    expect_refused(&f, ".nv.info.vadd has a record at byte 8 that runs past "
                       "its end");
    f.bytes[at] = 12;
    f.bytes[at + 1] = 0;
    /* No symbol table: the .symtab's entry size made wrong. */
    at = elf_section(&f, ".symtab") + offsetof(Elf64_Shdr, sh_entsize);
    memcpy(keep, f.bytes + at, 8);
    memset(f.bytes + at, 0, 8);
    expect_refused(&f, "it has no usable symbol table");
    memcpy(f.bytes + at, keep, 8);

    cumod_imeta m;
    char msg[256] = "";
    cr_expect_eq(cumod__imeta_describe(f.bytes, f.len, f.kind, "v.cubin", 9, 0,
                                       &m, msg, sizeof(msg)),
                 CUMOD_OK, "restored: %s", msg);
    cumod__imeta_fini(&m);
    free(f.bytes);
}
