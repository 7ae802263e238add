/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "text.h"

/* Written once in cumod__log_init before threads exist; read-only after,
 * but for the level, which SIGHUP may change while other threads log. */
static struct {
    char name[32];
    _Atomic int level;
    int journal;
} log_cfg = {"cumodd", CUMOD_LOG_INFO, 0};

static const char *const log_names[] = {
    [CUMOD_LOG_ERR] = "error",     [CUMOD_LOG_WARN] = "warn",
    [CUMOD_LOG_NOTICE] = "notice", [CUMOD_LOG_INFO] = "info",
    [CUMOD_LOG_DEBUG] = "debug",
};

void
cumod__log_init(const char *name, cumod_log_level level)
{
    snprintf(log_cfg.name, sizeof(log_cfg.name), "%s", name);
    atomic_store_explicit(&log_cfg.level, (int)level, memory_order_relaxed);
    log_cfg.journal = getenv("JOURNAL_STREAM") != NULL;
}

void
cumod__log_set_level(cumod_log_level level)
{
    atomic_store_explicit(&log_cfg.level, (int)level, memory_order_relaxed);
}

int
cumod__log_enabled(cumod_log_level level)
{
    return (int)level <=
           atomic_load_explicit(&log_cfg.level, memory_order_relaxed);
}

const char *
cumod__log_level_name(cumod_log_level level)
{
    return log_names[level];
}

int
cumod__log_parse_level(const char *s, cumod_log_level *out)
{
    for (int l = CUMOD_LOG_ERR; l <= CUMOD_LOG_DEBUG; l++) {
        if (strcmp(s, log_names[l]) == 0) {
            *out = (cumod_log_level)l;
            return 0;
        }
    }
    return -1;
}

void
cumod__log(cumod_log_level level, const char *tag, const char *fmt, ...)
{
    /* One line at most PIPE_BUF bytes: atomic on a pipe. */
    char line[4096], text[4096];
    size_t n, len, used;
    int rv;
    va_list ap;

    if ((int)level > atomic_load_explicit(&log_cfg.level, memory_order_relaxed))
        return;
    if (log_cfg.journal) {
        n = (size_t)snprintf(line, sizeof(line), "<%d>%s: ", (int)level, tag);
    } else {
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
        n += (size_t)snprintf(line + n, sizeof(line) - n,
                              ".%03ldZ %s[%d] %s %s: ", ts.tv_nsec / 1000000,
                              log_cfg.name, (int)getpid(), log_names[level],
                              tag);
    }
    if (n >= sizeof(line) / 2)
        n = sizeof(line) / 2;
    va_start(ap, fmt);
    rv = vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    len = rv < 0                      ? 0
          : (size_t)rv < sizeof(text) ? (size_t)rv
                                      : sizeof(text) - 1;
    /* The whole message is escaped, whatever its arguments hold (names,
     * compile logs, client text): one call is one line, and nothing in it
     * can start a line that looks like one of ours (text.h). Room is kept
     * for "..." and the newline. */
    n += cumod__text_escape(line + n, sizeof(line) - n - 4, text, len,
                            CUMOD_TEXT_LOG, &used);
    if (used < len || (rv > 0 && (size_t)rv >= sizeof(text))) {
        memcpy(line + n, "...", 3);
        n += 3;
    }
    line[n++] = '\n';
    /* One write: atomic for lines under PIPE_BUF on pipes, and never torn
     * between threads on a terminal or the journal's stream socket. */
    ssize_t w = write(STDERR_FILENO, line, n);
    (void)w;
}

uint64_t
cumod__mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t
cumod__wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void
cumod__utc(uint64_t unix_ms, char *buf, size_t len)
{
    time_t t = (time_t)(unix_ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    if (len > 0 && strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        buf[0] = '\0';
}
