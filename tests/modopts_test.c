/* SPDX-License-Identifier: MIT */
/*
 * A module's settings (daemon/common/modopts.c): the JIT option keys in every
 * spelling people use, merging layers, and the two sidecar formats, with
 * errors that name the file and line.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "common/modopts.h"

Test(modopts, jit_keys_in_the_spellings_people_use)
{
    static const struct {
        const char *key, *value;
        int32_t opt, reg, line, fast;
    } ok[] = {
        {"opt-level", "3", 3, -1, -1, -1},
        {"jit-opt-level", "0", 0, -1, -1, -1},
        {"--jit-opt-level", "4", 4, -1, -1, -1},
        {"CU_JIT_OPTIMIZATION_LEVEL", "1", 1, -1, -1, -1},
        {"O", "2", 2, -1, -1, -1},
        {"max-registers", "64", -1, 64, -1, -1},
        {"maxrregcount", "32", -1, 32, -1, -1},
        {"jit_max_registers", "255", -1, 255, -1, -1},
        {"line-info", NULL, -1, -1, 1, -1},
        {"-lineinfo", "0", -1, -1, 0, -1},
        {"CU_JIT_GENERATE_LINE_INFO", "", -1, -1, 1, -1},
        {"fast-compile", "2", -1, -1, -1, 2},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        cumod_jit_opts o = CUMOD_JIT_OPTS_UNSET;
        char msg[256] = "";
        cr_expect_eq(
            cumod__jit_set(&o, ok[i].key, ok[i].value, msg, sizeof(msg)), 0,
            "%s: %s", ok[i].key, msg);
        cr_expect_eq(o.opt_level, ok[i].opt, "%s", ok[i].key);
        cr_expect_eq(o.max_registers, ok[i].reg, "%s", ok[i].key);
        cr_expect_eq(o.line_info, ok[i].line, "%s", ok[i].key);
        cr_expect_eq(o.fast_compile, ok[i].fast, "%s", ok[i].key);
    }
}

Test(modopts, bad_values_and_keys_say_what_was_wrong)
{
    static const struct {
        const char *key, *value, *says;
    } bad[] = {
        {"opt-level", "5", "opt-level: '5' is not a number from 0 to 4"},
        {"opt-level", "x", "opt-level: 'x' is not a number from 0 to 4"},
        {"opt-level", NULL, "opt-level needs a value (0 to 4)"},
        {"max-registers", "0",
         "max-registers: '0' is not a number from 1 to "
         "255"},
        {"max-registers", "12k", "'12k' is not a number"},
        {"line-info", "2", "line-info: '2' is not a number from 0 to 1"},
        {"nope", "1", "unknown JIT option 'nope'"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cumod_jit_opts o = CUMOD_JIT_OPTS_UNSET;
        char msg[256] = "";
        cr_expect_eq(
            cumod__jit_set(&o, bad[i].key, bad[i].value, msg, sizeof(msg)), -1,
            "%s", bad[i].key);
        cr_expect(strstr(msg, bad[i].says), "%s: got '%s'", bad[i].key, msg);
        cr_expect_eq(o.opt_level, -1, "nothing set on error");
    }
}

Test(modopts, layers_merge_field_by_field_and_format)
{
    cumod_jit_opts a = CUMOD_JIT_OPTS_UNSET, b = CUMOD_JIT_OPTS_UNSET;
    char buf[256], msg[128];
    cumod__jit_format(&a, buf, sizeof(buf));
    cr_expect_str_eq(buf, "none (the driver's defaults)");
    a.opt_level = 2;
    a.max_registers = 64;
    b.opt_level = 0;
    b.line_info = 1;
    cumod__jit_merge(&a, &b);
    cumod__jit_format(&a, buf, sizeof(buf));
    cr_expect_str_eq(buf, "opt-level 0, max-registers 64, line-info 1");
    cr_expect(!cumod__jit_equal(&a, &b));
    (void)msg;
}

Test(modopts, module_options_name_module_key_and_value)
{
    char name[129], msg[256];
    const char *key, *value;
    size_t keylen;
    cr_expect_eq(cumod__modopt_split("vadd:jit-opt-level=3", name, &key,
                                     &keylen, &value, msg, sizeof(msg)),
                 0);
    cr_expect_str_eq(name, "vadd");
    cr_expect_eq(keylen, 13);
    cr_expect_str_eq(value, "3");
    cr_expect_eq(cumod__modopt_split("k:nvrtc-option=-DX=a,b c", name, &key,
                                     &keylen, &value, msg, sizeof(msg)),
                 0, "an NVRTC option may hold '=', ',' and spaces");
    cr_expect_str_eq(value, "-DX=a,b c");
    static const struct {
        const char *item, *says;
    } bad[] = {
        {"vadd", "'vadd' is not NAME:KEY=VALUE"},
        {"vadd:jit-opt-level", "is not NAME:KEY=VALUE"},
        {"a b:jit-opt-level=1", "'a b' is not a module name"},
        {"vadd:jit-opt-level=7", "vadd: opt-level: '7' is not a number"},
        {"vadd:colour=red", "vadd: unknown JIT option 'colour'"},
        {"vadd:nvrtc-option=", "vadd: nvrtc-option needs a value"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        msg[0] = '\0';
        cr_expect_eq(cumod__modopt_split(bad[i].item, name, &key, &keylen,
                                         &value, msg, sizeof(msg)),
                     -1, "%s", bad[i].item);
        cr_expect(strstr(msg, bad[i].says), "%s: got '%s'", bad[i].item, msg);
    }
    /* One module's settings among several, in order. */
    const char *items[] = {"a:jit-opt-level=1", "b:jit-opt-level=2",
                           "a:nvrtc-option=-DX", "a:jit-opt-level=3",
                           "a:nvrtc-option=-DY"};
    cumod_jit_opts j = CUMOD_JIT_OPTS_UNSET;
    const char *opts[4];
    size_t n = 0;
    cumod__modopt_for(items, 5, "a", &j, opts, 4, &n);
    cr_expect_eq(j.opt_level, 3, "the later one wins");
    cr_expect_eq(n, 2);
    cr_expect_str_eq(opts[0], "-DX");
    cr_expect_str_eq(opts[1], "-DY");
}

Test(modopts, ptx_opts_files_take_comments_and_forms_and_name_the_line)
{
    const char *text = "# JIT options of vadd\n"
                       "\n"
                       "opt-level 1   # quick\n"
                       "max-registers=40\r\n"
                       "  --lineinfo\n"
                       "-O3\n";
    cumod_jit_opts o;
    char msg[256] = "";
    cr_assert_eq(cumod__opts_parse_jit(text, strlen(text), "k/vadd.ptx.opts",
                                       &o, msg, sizeof(msg)),
                 0, "%s", msg);
    cr_expect_eq(o.opt_level, 3, "-O3 comes later");
    cr_expect_eq(o.max_registers, 40);
    cr_expect_eq(o.line_info, 1);
    cr_expect_eq(o.fast_compile, -1);
    const char *bad = "opt-level 1\nwhat-is-this 2\n";
    cr_expect_eq(cumod__opts_parse_jit(bad, strlen(bad), "k/v.ptx.opts", &o,
                                       msg, sizeof(msg)),
                 -1);
    cr_expect(strstr(msg, "k/v.ptx.opts:2: unknown JIT option "
                          "'what-is-this'"),
              "%s", msg);
    cr_expect_eq(
        cumod__opts_parse_jit("a\0b", 3, "k/v.ptx.opts", &o, msg, sizeof(msg)),
        -1);
    cr_expect(strstr(msg, "NUL byte"), "%s", msg);
}

Test(modopts, cu_opts_files_are_one_option_a_line)
{
    const char *text = "# NVRTC\n-DN=4\n  --use_fast_math  \n\n-I /x y\n";
    char *opts[CUMOD_OPTS_FILE_MAX], msg[256];
    size_t n = 0;
    cr_assert_eq(cumod__opts_parse_lines(text, strlen(text), "k/a.cu.opts",
                                         opts, &n, msg, sizeof(msg)),
                 0);
    cr_assert_eq(n, 3);
    cr_expect_str_eq(opts[0], "-DN=4");
    cr_expect_str_eq(opts[1], "--use_fast_math");
    cr_expect_str_eq(opts[2], "-I /x y", "a line is one option, spaces kept");
    for (size_t i = 0; i < n; i++)
        free(opts[i]);
    char *many = malloc(CUMOD_OPTS_FILE_MAX * 4 + 8);
    size_t at = 0;
    for (int i = 0; i <= CUMOD_OPTS_FILE_MAX; i++)
        at += (size_t)sprintf(many + at, "-D\n");
    cr_expect_eq(cumod__opts_parse_lines(many, at, "k/a.cu.opts", opts, &n, msg,
                                         sizeof(msg)),
                 -1);
    cr_expect(strstr(msg, "k/a.cu.opts:257: too many options"), "%s", msg);
    free(many);
}
