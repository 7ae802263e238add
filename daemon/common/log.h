/* SPDX-License-Identifier: MIT */
/*
 * Logging to stderr, one line per event: a level, a stable tag an operator
 * can grep for (CUMOD-RELOAD-FAIL), and a sentence. The sentence is
 * escaped as a whole (text.h): whatever text from outside its arguments
 * carry (a name with a newline, a compile log), one event is one line.
 *
 * Under systemd (JOURNAL_STREAM set) lines carry an sd-daemon "<N>" priority
 * prefix and no timestamp, since journald keeps both itself; elsewhere they
 * carry an ISO-8601 UTC timestamp and the level in words.
 */
#ifndef CUMOD_LOG_H
#define CUMOD_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* syslog's numbers, so the journal prefix is the level itself. */
typedef enum cumod_log_level {
    CUMOD_LOG_ERR = 3,
    CUMOD_LOG_WARN = 4,
    CUMOD_LOG_NOTICE = 5,
    CUMOD_LOG_INFO = 6,
    CUMOD_LOG_DEBUG = 7,
} cumod_log_level;

/* Set once by main before any thread starts (the logger's settings are the
 * one piece of process-wide state: every thread of the process logs, and
 * threading a context through every error path would buy nothing).
 * name: the process name in each line ("cumodd", "cumodd-exec"). */
void cumod__log_init(const char *name, cumod_log_level level);

/* Changes the level (SIGHUP). Any thread. */
void cumod__log_set_level(cumod_log_level level);

/* 1 when lines of level are written: for work done only to log it. Any
 * thread. */
int cumod__log_enabled(cumod_log_level level);

/* The name of a level, as parsed ("info"). Static. */
const char *cumod__log_level_name(cumod_log_level level);

/* Parses "error", "warn", "notice", "info", "debug". 0 on success. */
int cumod__log_parse_level(const char *s, cumod_log_level *out);

/* Writes one line with a single write(2), so lines of concurrent threads and
 * of the executor never interleave. Any thread; never blocks on a lock. */
void cumod__log(cumod_log_level level, const char *tag, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The wall clock in milliseconds since the epoch (for what is shown to
 * people: status, ls), and one such time as "2026-11-23T12:00:00Z". */
uint64_t cumod__wall_ms(void);
/* CLOCK_MONOTONIC in nanoseconds: for intervals. */
uint64_t cumod__mono_ns(void);
/* The same in milliseconds. */
static inline uint64_t
cumod__mono_ms(void)
{
    return cumod__mono_ns() / 1000000;
}
void cumod__utc(uint64_t unix_ms, char *buf, size_t len);

/* A spinning thread's pause between two looks (a hint to the core). */
static inline void
cumod__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#define CUMOD_LOGE(tag, ...) cumod__log(CUMOD_LOG_ERR, tag, __VA_ARGS__)
#define CUMOD_LOGW(tag, ...) cumod__log(CUMOD_LOG_WARN, tag, __VA_ARGS__)
#define CUMOD_LOGN(tag, ...) cumod__log(CUMOD_LOG_NOTICE, tag, __VA_ARGS__)
#define CUMOD_LOGI(tag, ...) cumod__log(CUMOD_LOG_INFO, tag, __VA_ARGS__)
#define CUMOD_LOGD(tag, ...) cumod__log(CUMOD_LOG_DEBUG, tag, __VA_ARGS__)

#endif
