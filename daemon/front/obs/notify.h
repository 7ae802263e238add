/* SPDX-License-Identifier: MIT */
/*
 * systemd's service protocol, through libsystemd's sd_notify: READY=1 once
 * the daemon serves (the executor holds its context, the socket listens and
 * the first scan is done), STATUS= lines as its state changes (faults,
 * restarts, reloads), RELOADING=1 / READY=1 around a SIGHUP, STOPPING=1 at
 * shutdown, and WATCHDOG=1 from the loop while the daemon is healthy.
 *
 * Outside systemd (no NOTIFY_SOCKET) every call does nothing. Loop thread.
 */
#ifndef CUMOD_NOTIFY_H
#define CUMOD_NOTIFY_H

#include <stdint.h>
#include <uv.h>

/* Whether the daemon is healthy now, asked before each WATCHDOG=1. */
typedef int (*cumod_notify_health_cb)(void *arg);

typedef struct cumod_notify {
    int enabled;            /* NOTIFY_SOCKET is set */
    uint64_t watchdog_usec; /* WATCHDOG_USEC for us; 0: no watchdog */
    uv_timer_t timer;       /* pings at half the watchdog period */
    int timer_open;
    cumod_notify_health_cb health;
    void *arg;
    int ready;              /* READY=1 sent */
    uint64_t pings, missed; /* WATCHDOG=1 sent; ticks skipped as unhealthy */
} cumod_notify;

/* Reads the environment and, when systemd asked for a watchdog, starts
 * the timer that pings while health says so. */
void cumod__notify_init(cumod_notify *n, uv_loop_t *loop,
                        cumod_notify_health_cb health, void *arg);

/* READY=1 with a STATUS line (once; later calls only set the status). */
void cumod__notify_ready(cumod_notify *n, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A STATUS= line. */
void cumod__notify_status(cumod_notify *n, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* RELOADING=1 (with MONOTONIC_USEC), then READY=1 when done. */
void cumod__notify_reloading(cumod_notify *n);
void cumod__notify_reloaded(cumod_notify *n);

/* STOPPING=1 with a STATUS line. */
void cumod__notify_stopping(cumod_notify *n, const char *why);

/* Stops the timer (closed on the loop). */
void cumod__notify_close(cumod_notify *n);

#endif
