/* SPDX-License-Identifier: MIT */
/*
 * The text helpers (daemon/common/text.c) and the logger that uses them:
 * escapes for a log line and for a reply, valid UTF-8 whatever the input, a
 * reply whose strings are made valid for packing and given back after, and one
 * cumod__log call written as exactly one line.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cumod/errors.h"
#include "common/log.h"
#include "common/text.h"

static char *
tx_log(const char *s, cumod_text_mode mode)
{
    size_t len = strlen(s);
    size_t need = cumod__text_escaped_len(s, len, mode);
    char *out = malloc(need + 1);
    size_t used = 0;
    cr_assert_eq(cumod__text_escape(out, need + 1, s, len, mode, &used), need);
    cr_assert_eq(used, len);
    return out;
}

Test(text, a_log_line_escapes_controls_and_bytes_that_are_no_utf8)
{
    char *e = tx_log("a\nb\tc\rd\x1b[1m\x7f\xff\xfe\xc2\x9b \xc3\xa9 \\x",
                     CUMOD_TEXT_LOG);
    cr_expect_str_eq(e, "a\\nb\\tc\\rd\\x1b[1m\\x7f\\xff\\xfe\\xc2\\x9b "
                        "\xc3\xa9 \\x");
    free(e);
}

Test(text, a_reply_keeps_newlines_and_tabs_and_escapes_the_rest)
{
    char *e = tx_log("a\nb\tc\x01\xff", CUMOD_TEXT_REPLY);
    cr_expect_str_eq(e, "a\nb\tc\\x01\\xff");
    free(e);
}

Test(text, utf8_that_is_overlong_a_surrogate_or_cut_short_is_escaped)
{
    /* overlong '/', a surrogate, past U+10FFFF, a 3-byte sequence cut. */
    char *e = tx_log("\xc0\xaf|\xed\xa0\x80|\xf4\x90\x80\x80|\xe2\x82",
                     CUMOD_TEXT_LOG);
    cr_expect_str_eq(e, "\\xc0\\xaf|\\xed\\xa0\\x80|\\xf4\\x90\\x80\\x80|"
                        "\\xe2\\x82");
    free(e);
    e = tx_log("\xe2\x82\xac \xf0\x9f\x98\x80", CUMOD_TEXT_LOG);
    cr_expect_str_eq(e, "\xe2\x82\xac \xf0\x9f\x98\x80", "kept as it is");
    free(e);
}

Test(text, a_short_buffer_never_cuts_an_escape_or_a_sequence)
{
    char out[7];
    size_t used;
    size_t n = cumod__text_escape(out, sizeof(out), "ab\n\xc3\xa9xyz", 9,
                                  CUMOD_TEXT_LOG, &used);
    cr_expect_eq(n, 6);
    cr_expect_str_eq(out, "ab\\n\xc3\xa9");
    cr_expect_eq(used, 5);
    n = cumod__text_escape(out, 5, "ab\xff", 3, CUMOD_TEXT_LOG, &used);
    cr_expect_str_eq(out, "ab", "\\xff does not fit whole");
    cr_expect_eq(used, 2);
}

Test(text, a_reply_is_made_valid_for_packing_and_given_back_after)
{
    char msg[] = "no module \xff\xfe";
    char k0[] = "ok", k1[] = "bad\x01";
    char *kernels[] = {k0, k1};
    Cumod__Status st = CUMOD__STATUS__INIT;
    Cumod__ModuleInfo mi = CUMOD__MODULE_INFO__INIT;
    Cumod__ModuleReply mr = CUMOD__MODULE_REPLY__INIT;
    Cumod__Reply r = CUMOD__REPLY__INIT;
    st.code = CUMOD_ENOENT;
    st.message = msg;
    mi.name = k0;
    mi.n_kernels = 2;
    mi.kernels = kernels;
    mr.module = &mi;
    r.status = &st;
    r.body_case = CUMOD__REPLY__BODY_MODULE;
    r.module = &mr;

    cumod_text_fix fix;
    cumod__text_fix_reply(&r, &fix);
    cr_expect_eq(fix.n, 2);
    cr_expect_str_eq(st.message, "no module \\xff\\xfe");
    cr_expect_str_eq(mi.kernels[1], "bad\\x01");
    cr_expect_eq(mi.name, k0, "a clean string is not copied");
    size_t len = cumod__reply__get_packed_size(&r);
    uint8_t *buf = malloc(len);
    cumod__reply__pack(&r, buf);
    cumod__text_fix_undo(&fix);
    cr_expect_eq(st.message, msg, "the fields get their own strings back");
    cr_expect_eq(mi.kernels[1], k1);
    Cumod__Reply *back = cumod__reply__unpack(NULL, len, buf);
    cr_assert_not_null(back);
    cr_expect_str_eq(back->status->message, "no module \\xff\\xfe");
    cr_expect_str_eq(back->module->module->kernels[1], "bad\\x01");
    cumod__reply__free_unpacked(back, NULL);
    free(buf);

    /* Clean: nothing is allocated or changed. */
    st.message = "fine";
    mi.n_kernels = 1;
    cumod__text_fix_reply(&r, &fix);
    cr_expect_eq(fix.n, 0);
    cumod__text_fix_undo(&fix);
}

Test(text, one_log_call_is_one_line_whatever_its_arguments)
{
    char path[] = "/tmp/cumod-text-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    int saved = dup(2);
    cr_assert_eq(dup2(fd, 2), 2);
    cumod__log_init("cumodd", CUMOD_LOG_INFO);
    CUMOD_LOGW("CUMOD-TEST", "module %s: %s", "a\nb",
               "line 1\n2026-01-01T00:00:00.000Z cumodd[1] notice "
               "CUMOD-READY: forged\n\xff");
    /* A message longer than a line: cut, said so, still one line. */
    char *big = malloc(10000);
    memset(big, '\n', 9999);
    big[9999] = '\0';
    CUMOD_LOGW("CUMOD-TEST", "%s", big);
    free(big);
    dup2(saved, 2);
    close(saved);
    char text[16384];
    ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
    close(fd);
    unlink(path);
    cr_assert(n > 0);
    text[n] = '\0';
    int lines = 0;
    for (ssize_t i = 0; i < n; i++)
        lines += text[i] == '\n';
    cr_expect_eq(lines, 2, "two calls, two lines:\n%s", text);
    cr_expect(strstr(text, "CUMOD-TEST: module a\\nb: line 1\\n2026-01-01T00:"
                           "00:00.000Z cumodd[1] notice CUMOD-READY: "
                           "forged\\n\\xff\n") != NULL,
              "%s", text);
    cr_expect(strstr(text, "\\n\\n...\n") != NULL, "%s", text);
    cr_expect(strlen(strchr(text, '\n') + 1) <= 4096);
}
