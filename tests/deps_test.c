/* SPDX-License-Identifier: MIT */
/*
 * The headers of a NAME.cu (daemon/compile/deps.c): what the scan follows
 * and finds, in which folders, and that the digest changes exactly when a
 * header the source can reach changes.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compile/deps.h"

static char dir[64];

static void
dt_setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/cumod-deps-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void
dt_teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

static void
dt_put(const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

/* The digest of src as DIR/k.cu with opts (the folder first, as the
 * catalog gives it, then extra), the folder the one root; the refusal, if
 * any, in refused. */
static size_t
dt_check(const char *src, const char *extra, char hex[65], char *refused,
         size_t len)
{
    char path[256], inc[128];
    const char *opts[3], *roots[] = {dir};
    size_t n = 0;
    snprintf(path, sizeof(path), "%s/k.cu", dir);
    snprintf(inc, sizeof(inc), "--include-path=%s", dir);
    opts[n++] = "-std=c++17";
    opts[n++] = inc;
    if (extra != NULL)
        opts[n++] = extra;
    return cumod__compile_deps(path, src, strlen(src), opts, n, roots, 1, hex,
                               refused, len);
}

static size_t
dt_deps(const char *src, const char *extra, char hex[65])
{
    return dt_check(src, extra, hex, NULL, 0);
}

TestSuite(deps, .init = dt_setup, .fini = dt_teardown);

Test(deps, a_source_without_headers_of_its_own_has_none)
{
    char hex[65];
    cr_expect_eq(
        dt_deps("#include <cuda_fp16.h>\n__global__ void k(){}\n", NULL, hex),
        0, "the toolkit's headers are NVRTC's version's");
    cr_expect_str_eq(hex, "");
}

Test(deps, nested_headers_each_count_and_a_cycle_ends)
{
    char a[65], b[65];
    mkdir(strcat(strcpy((char[256]){0}, dir), "/sub"), 0700);
    dt_put("a.cuh", "#pragma once\n#include \"sub/b.cuh\"\n");
    dt_put("sub/b.cuh", "  #  include \"c.cuh\"\n#include \"../a.cuh\"\n");
    dt_put("sub/c.cuh", "#define C 1\n");
    const char *src = "#include \"a.cuh\"\n__global__ void k(){}\n";
    cr_expect_eq(dt_deps(src, NULL, a), 3, "a, sub/b and sub/c (beside b)");
    cr_expect_eq(strlen(a), 64);
    cr_expect_eq(dt_deps(src, NULL, b), 3);
    cr_expect_str_eq(a, b, "the same files: the same digest");
    dt_put("sub/c.cuh", "#define C 2\n");
    cr_expect_eq(dt_deps(src, NULL, b), 3);
    cr_expect_str_neq(a, b, "a header two levels down changed");
}

Test(deps, angle_brackets_search_the_include_folders_only)
{
    char a[65], b[65], inc[128];
    mkdir(strcat(strcpy((char[256]){0}, dir), "/lib"), 0700);
    dt_put("lib/v.h", "#define V 1\n");
    cr_expect_eq(dt_deps("#include <v.h>\n", NULL, a), 0,
                 "lib is not an include folder");
    snprintf(inc, sizeof(inc), "-I%s/lib", dir);
    cr_expect_eq(dt_deps("#include <v.h>\n", inc, a), 1, "-I names it");
    snprintf(inc, sizeof(inc), "--include-path=%s/lib", dir);
    cr_expect_eq(dt_deps("#include <v.h>\n", inc, b), 1);
    cr_expect_str_eq(a, b, "either spelling finds the same file");
    /* The first folder that holds it wins, as in the preprocessor. */
    dt_put("v.h", "#define V 0\n");
    cr_expect_eq(dt_deps("#include <v.h>\n", inc, b), 1);
    cr_expect_str_neq(a, b, "the folder's v.h comes first");
}

Test(deps, what_the_scan_cannot_follow_is_left_out)
{
    char hex[65];
    cr_expect_eq(dt_deps("#include \"missing.h\"\n"
                         "#include HEADER_BY_MACRO\n"
                         "#include \"unterminated.h\n"
                         "#include\n#\n#incl\n",
                         NULL, hex),
                 0);
    cr_expect_str_eq(hex, "");
}

/* What lies outside the roots is refused by its line, and neither read
 * nor hashed: changing it changes nothing. */
Test(deps, an_include_outside_the_roots_is_refused_unread)
{
    char out[64], secret[128], link[256], rel[512], src[1024], why[1024];
    char a[65], b[65];
    snprintf(out, sizeof(out), "/tmp/cumod-deps-out-XXXXXX");
    cr_assert_not_null(mkdtemp(out));
    snprintf(secret, sizeof(secret), "%s/secret.h", out);
    FILE *f = fopen(secret, "w");
    cr_assert_not_null(f);
    fputs("#define SECRET 1\n", f);
    fclose(f);
    snprintf(link, sizeof(link), "%s/evil.h", dir);
    cr_assert_eq(symlink(secret, link), 0);
    mkfifo(strcat(strcpy((char[256]){0}, dir), "/pipe.h"), 0600);
    dt_put("ok.h", "#define OK 1\n");
    /* ../ enough times to reach / from the folder, then the secret. */
    snprintf(rel, sizeof(rel),
             "../../../../../../../../../../../../../../../..%s", secret);
    const struct {
        const char *inc, *why;
    } cases[] = {
        {"\"/etc/shadow\"", "outside the kernel folder"},
        {"\"/proc/self/environ\"", "outside the kernel folder"},
        {rel, "outside the kernel folder"},
        {"\"evil.h\"", "outside the kernel folder"},
        {"<evil.h>", "outside the kernel folder"},
        {"\"/dev/zero\"", "outside the kernel folder"},
        {"\"pipe.h\"", "not a regular file"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char inc[600];
        if (cases[i].inc == rel)
            snprintf(inc, sizeof(inc), "\"%s\"", rel);
        else
            snprintf(inc, sizeof(inc), "%s", cases[i].inc);
        snprintf(src, sizeof(src),
                 "#include \"ok.h\"\n// line 2\n#include %s\n", inc);
        cr_expect_eq(dt_check(src, NULL, a, why, sizeof(why)), 1,
                     "%s: only ok.h counts", inc);
        char want[700];
        snprintf(want, sizeof(want), "k.cu:3: #include %s: %s", inc,
                 cases[i].why);
        cr_expect(strncmp(why, want, strlen(want)) == 0,
                  "the refusal names the line: %s (want %s)", why, want);
        /* The outside file changes: the digest does not. */
        f = fopen(secret, "w");
        fprintf(f, "#define SECRET %zu\n", i + 2);
        fclose(f);
        cr_expect_eq(dt_check(src, NULL, b, why, sizeof(why)), 1);
        cr_expect_str_eq(a, b, "%s: nothing of it is hashed", inc);
    }
    /* A header of the folder that reaches out is refused by its path. */
    dt_put("nest.h", "#include \"evil.h\"\n");
    cr_expect_eq(dt_check("#include \"nest.h\"\n", NULL, a, why, sizeof(why)),
                 1);
    cr_expect(strstr(why, "/nest.h:1: #include \"evil.h\": outside"), "%s",
              why);
    /* Without the wish to know, the scan just leaves it out. */
    cr_expect_eq(dt_deps("#include \"evil.h\"\n", NULL, a), 0);
    unlink(secret);
    rmdir(out);
}
