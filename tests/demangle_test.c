/* SPDX-License-Identifier: MIT */
/*
 * The demangler (daemon/catalog/demangle/demangle.c). Real names: the kernels
 * of cubins nvcc builds from tests/demangle_kernels.cu, kernels/linalg.cu,
 * kernels/axpy.cu and tests/demangle_cub.cu, read back from their symbol
 * tables and checked against demangle_cases.c (and that table against
 * them: a kernel missing from either side fails); hand-written names; the
 * parameters' flags; what a refusal leaves. Hostile input is
 * demangle_hostile.c's, in the same suite.
 */
#include <criterion/criterion.h>
#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/demangle/demangle.h"
#include "demangle_cases.h"
#include "harness.h"

TH_SUITE_DRIVER(0);

#define DIR CUMOD_DEMANGLE_TEST_DIR

/* The signature of mangled (the caller frees it), or NULL if refused. */
static char *
signature_of(const char *mangled)
{
    cumod_demangled d;
    char *sig;

    if (cumod__demangle(mangled, &d) != 0)
        return NULL;
    cr_assert(dm_consistent(&d), "%s: inconsistent result '%s'", mangled,
              d.signature ? d.signature : "(null)");
    sig = strdup(d.signature);
    cr_assert_not_null(sig);
    cumod__demangled_fini(&d);
    return sig;
}

static void
expect_case(const dm_case *c)
{
    char *sig = signature_of(c->mangled);

    if (c->signature == NULL)
        cr_expect_null(sig, "%s: should be refused, gave %s", c->mangled, sig);
    else
        cr_expect(sig != NULL && strcmp(sig, c->signature) == 0,
                  "%s:\n  got  %s\n  want %s", c->mangled,
                  sig ? sig : "(refused)", c->signature);
    free(sig);
}

/* The names of the functions a cubin defines (its kernels). */
typedef struct kernels {
    char *names[256];
    size_t n;
} kernels;

static uint8_t *
slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *b;
    long n;

    cr_assert_not_null(f, "open %s (built by demangle_test_cubins)", path);
    cr_assert_eq(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    cr_assert_gt(n, 0);
    rewind(f);
    b = malloc((size_t)n);
    cr_assert_not_null(b);
    cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void
kernels_read(const char *path, kernels *k)
{
    size_t len, i, j;
    uint8_t *b = slurp(path, &len);
    Elf64_Ehdr eh;

    memset(k, 0, sizeof(*k));
    cr_assert_geq(len, sizeof(eh));
    memcpy(&eh, b, sizeof(eh));
    cr_assert(memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
              eh.e_ident[EI_CLASS] == ELFCLASS64);
    cr_assert(eh.e_shentsize == sizeof(Elf64_Shdr) && eh.e_shoff < len &&
              eh.e_shnum <= (len - eh.e_shoff) / sizeof(Elf64_Shdr));
    for (i = 0; i < eh.e_shnum; i++) {
        Elf64_Shdr sh, st;

        memcpy(&sh, b + eh.e_shoff + i * sizeof(sh), sizeof(sh));
        if (sh.sh_type != SHT_SYMTAB)
            continue;
        cr_assert(sh.sh_link < eh.e_shnum && sh.sh_offset <= len &&
                  sh.sh_size <= len - sh.sh_offset);
        memcpy(&st, b + eh.e_shoff + sh.sh_link * sizeof(st), sizeof(st));
        cr_assert(st.sh_offset <= len && st.sh_size <= len - st.sh_offset &&
                  st.sh_size > 0 && b[st.sh_offset + st.sh_size - 1] == '\0');
        for (j = 0; j < sh.sh_size / sizeof(Elf64_Sym); j++) {
            Elf64_Sym sym;

            memcpy(&sym, b + sh.sh_offset + j * sizeof(sym), sizeof(sym));
            if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC ||
                sym.st_shndx == SHN_UNDEF)
                continue;
            cr_assert_lt(sym.st_name, st.sh_size);
            cr_assert_lt(k->n, sizeof(k->names) / sizeof(k->names[0]));
            k->names[k->n] =
                strdup((const char *)b + st.sh_offset + sym.st_name);
            cr_assert_not_null(k->names[k->n]);
            k->n++;
        }
    }
    free(b);
    cr_assert_gt(k->n, 0, "%s has no kernels", path);
}

static void
kernels_fini(kernels *k)
{
    size_t i;

    for (i = 0; i < k->n; i++)
        free(k->names[i]);
    k->n = 0;
}

Test(demangle, nvcc_kernels_match_the_table)
{
    static const char *const cubins[] = {
        DIR "/demangle_kernels.cubin", DIR "/linalg.cubin", DIR "/axpy.cubin"};
    int hit[256] = {0}, anon_hit[8] = {0};
    size_t f, i, j;

    cr_assert_leq(dm_nvcc_ncases, 256);
    cr_assert_leq(dm_nvcc_nanon, 8);
    for (f = 0; f < sizeof(cubins) / sizeof(cubins[0]); f++) {
        kernels k;

        kernels_read(cubins[f], &k);
        for (i = 0; i < k.n; i++) {
            char *sig;

            for (j = 0; j < dm_nvcc_ncases; j++)
                if (strcmp(k.names[i], dm_nvcc_cases[j].mangled) == 0)
                    break;
            if (j < dm_nvcc_ncases) {
                expect_case(&dm_nvcc_cases[j]);
                hit[j] = 1;
                continue;
            }
            /* Not by name: one of the anonymous namespace's, by signature. */
            sig = signature_of(k.names[i]);
            for (j = 0; sig != NULL && j < dm_nvcc_nanon; j++)
                if (strcmp(sig, dm_nvcc_anon[j]) == 0)
                    break;
            cr_expect(sig != NULL && j < dm_nvcc_nanon,
                      "%s: kernel %s (%s) is in no table", cubins[f],
                      k.names[i], sig ? sig : "refused");
            if (sig != NULL && j < dm_nvcc_nanon)
                anon_hit[j] = 1;
            free(sig);
        }
        kernels_fini(&k);
    }
    for (j = 0; j < dm_nvcc_ncases; j++)
        cr_expect(hit[j], "%s is in no cubin", dm_nvcc_cases[j].mangled);
    for (j = 0; j < dm_nvcc_nanon; j++)
        cr_expect(anon_hit[j], "no kernel demangles to %s", dm_nvcc_anon[j]);
}

/* CUB's names carry the CCCL version, so the exact table holds what nvcc
 * 13.0 wrote, and what this toolkit writes must demangle whole. */
Test(demangle, cub_and_thrust_kernels)
{
    kernels k;
    size_t i;

    for (i = 0; i < dm_cub_ncases; i++)
        expect_case(&dm_cub_cases[i]);
    kernels_read(DIR "/demangle_cub.cubin", &k);
    cr_expect_geq(k.n, 5);
    for (i = 0; i < k.n; i++) {
        char *sig = signature_of(k.names[i]);

        cr_expect_not_null(sig, "CUB kernel %s refused", k.names[i]);
        free(sig);
    }
    kernels_fini(&k);
}

Test(demangle, hand_written_names)
{
    size_t i;

    for (i = 0; i < dm_hand_ncases; i++)
        expect_case(&dm_hand_cases[i]);
}

/* What the catalog reads per parameter: its type and whether the kernel
 * receives an address for it. */
Test(demangle, parameters)
{
    static const struct {
        const char *mangled, *name;
        size_t n;
        struct {
            const char *type;
            int indirect, reference;
        } p[5];
    } cases[] = {
        {"_ZN6linalg6detail5clampERKfPfi",
         "linalg::detail::clamp",
         3,
         {{"const float&", 1, 1}, {"float*", 1, 0}, {"int", 0, 0}}},
        {"_ZN6linalg7saxpy_vENS_4pairEPKfPfi",
         "linalg::saxpy_v",
         4,
         {{"linalg::pair", 0, 0},
          {"const float*", 1, 0},
          {"float*", 1, 0},
          {"int", 0, 0}}},
        {"_ZN6linalg4gemvIfLi4EEEvPKT_S3_PS1_ii",
         "linalg::gemv<float, 4>",
         5,
         {{"const float*", 1, 0},
          {"const float*", 1, 0},
          {"float*", 1, 0},
          {"int", 0, 0},
          {"int", 0, 0}}},
        /* Through a template parameter that is a pointer. */
        {"_Z4toptIPfEvT_PS1_PKS1_RS1_",
         "topt<float*>",
         4,
         {{"float*", 1, 0},
          {"float**", 1, 0},
          {"float* const*", 1, 0},
          {"float*&", 1, 1}}},
        {"_Z4arrtIfLi4EEvPAT0__T_RS1_",
         "arrt<float, 4>",
         2,
         {{"float (*)[4]", 1, 0}, {"float (&)[4]", 1, 1}}},
        {"_ZN5outer5inner4fptrEPFviEPFfPKfiEi",
         "outer::inner::fptr",
         3,
         {{"void (*)(int)", 1, 0},
          {"float (*)(const float*, int)", 1, 0},
          {"int", 0, 0}}},
        /* A pack expansion is one parameter per element. */
        {"_Z4varpIJf1WIiEEEviDpPKT_",
         "varp<float, W<int>>",
         3,
         {{"int", 0, 0}, {"const float*", 1, 0}, {"const W<int>*", 1, 0}}},
        {"_Z1fIJEEvDpT_i", "f<>", 1, {{"int", 0, 0}}},
        {"_Z1fIRiEvOT_", "f<int&>", 1, {{"int&", 1, 1}}},
        {"_Z1fOf", "f", 1, {{"float&&", 1, 1}}},
        {"_Z1fIPfEvKT_", "f<float*>", 1, {{"float* const", 1, 0}}},
        {"_ZN3cub17CUB_300001_SM_9006detail11EmptyKernelIvEEvv",
         "cub::CUB_300001_SM_900::detail::EmptyKernel<void>",
         0,
         {{NULL, 0, 0}}},
    };
    size_t i, j;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cumod_demangled d;

        cr_assert_eq(cumod__demangle(cases[i].mangled, &d), 0, "%s",
                     cases[i].mangled);
        cr_expect(dm_consistent(&d));
        cr_expect_str_eq(d.name, cases[i].name);
        cr_assert_eq(d.nparams, cases[i].n, "%s: %zu parameters",
                     cases[i].mangled, d.nparams);
        cr_expect_eq(d.params == NULL, d.nparams == 0);
        for (j = 0; j < d.nparams; j++) {
            cr_expect_str_eq(d.params[j].type, cases[i].p[j].type);
            cr_expect_eq(d.params[j].indirect, cases[i].p[j].indirect, "%s: %s",
                         cases[i].mangled, d.params[j].type);
            cr_expect_eq(d.params[j].reference, cases[i].p[j].reference,
                         "%s: %s", cases[i].mangled, d.params[j].type);
        }
        cumod__demangled_fini(&d);
    }
}

Test(demangle, refusal_leaves_out_alone_and_fini_is_safe)
{
    static const char *const refused[] = {
        "vadd", "cname", "", "_Z", "_Z1", "_Z1f.", "_ZN1a1bE", "_Z1fIiE",
    };
    cumod_demangled d, mark;
    size_t i;

    memset(&mark, 0xa5, sizeof(mark));
    for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        d = mark;
        cr_expect_eq(cumod__demangle(refused[i], &d), -1, "'%s'", refused[i]);
        cr_expect(memcmp(&d, &mark, sizeof(d)) == 0, "'%s' wrote out",
                  refused[i]);
    }
    cr_expect_eq(cumod__demangle(NULL, &d), -1);
    cr_expect_eq(cumod__demangle("_Z1fv", NULL), -1);

    cumod__demangled_fini(NULL);
    memset(&d, 0, sizeof(d));
    cumod__demangled_fini(&d);
    cr_assert_eq(cumod__demangle("_Z1fPKfi", &d), 0);
    cumod__demangled_fini(&d);
    cr_expect_null(d.name);
    cr_expect_eq(d.nparams, 0);
    cumod__demangled_fini(&d); /* twice: zeroed the first time */
}
