/* SPDX-License-Identifier: MIT */
#include "front/obs/notify.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "common/log.h"

static void
notify_send(cumod_notify *n, const char *msg)
{
    int rv;
    if (!n->enabled)
        return;
    /* Best effort: systemd going away is no reason to stop serving. */
    if ((rv = sd_notify(0, msg)) < 0)
        CUMOD_LOGD("CUMOD-NOTIFY", "sd_notify failed: %d", rv);
}

static void
notify_on_timer(uv_timer_t *h)
{
    cumod_notify *n = h->data;
    if (n->health == NULL || n->health(n->arg)) {
        n->pings++;
        notify_send(n, "WATCHDOG=1");
    } else {
        /* Unhealthy: systemd's watchdog ends us after WatchdogSec and
         * Restart= starts a fresh daemon. Said once per episode. */
        if (n->missed++ == 0)
            CUMOD_LOGE("CUMOD-WATCHDOG",
                       "unhealthy: no WATCHDOG=1 is sent until the executor "
                       "serves again; systemd restarts cumodd after "
                       "WatchdogSec");
        return;
    }
    n->missed = 0;
}

void
cumod__notify_init(cumod_notify *n, uv_loop_t *loop,
                   cumod_notify_health_cb health, void *arg)
{
    uint64_t usec = 0;

    n->enabled = getenv("NOTIFY_SOCKET") != NULL;
    n->health = health;
    n->arg = arg;
    /* Only the main process may notify (NotifyAccess=main); the executor
     * must not inherit the socket's address. */
    if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0)
        n->watchdog_usec = usec;
    if (!n->enabled || n->watchdog_usec == 0)
        return;
    uv_timer_init(loop, &n->timer);
    n->timer.data = n;
    n->timer_open = 1;
    uint64_t every = n->watchdog_usec / 2000;
    if (every == 0)
        every = 1;
    uv_timer_start(&n->timer, notify_on_timer, every, every);
    CUMOD_LOGD("CUMOD-WATCHDOG", "pinging systemd's watchdog every %llu ms",
               (unsigned long long)every);
}

static void notify_vstatus(cumod_notify *n, const char *head, const char *fmt,
                           va_list ap) __attribute__((format(printf, 3, 0)));

static void
notify_vstatus(cumod_notify *n, const char *head, const char *fmt, va_list ap)
{
    char msg[1024];
    int at = snprintf(msg, sizeof(msg), "%sSTATUS=", head);
    vsnprintf(msg + at, sizeof(msg) - (size_t)at, fmt, ap);
    notify_send(n, msg);
}

void
cumod__notify_ready(cumod_notify *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    notify_vstatus(n, n->ready ? "" : "READY=1\n", fmt, ap);
    va_end(ap);
    n->ready = 1;
}

void
cumod__notify_status(cumod_notify *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    notify_vstatus(n, "", fmt, ap);
    va_end(ap);
}

void
cumod__notify_reloading(cumod_notify *n)
{
    char msg[128];
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(msg, sizeof(msg),
             "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading the "
             "configuration and rescanning the kernel folder",
             (unsigned long long)ts.tv_sec * 1000000ull +
                 (unsigned long long)ts.tv_nsec / 1000);
    notify_send(n, msg);
}

void
cumod__notify_reloaded(cumod_notify *n)
{
    notify_send(n, "READY=1");
}

void
cumod__notify_stopping(cumod_notify *n, const char *why)
{
    char msg[512];
    snprintf(msg, sizeof(msg), "STOPPING=1\nSTATUS=%s", why);
    notify_send(n, msg);
}

void
cumod__notify_close(cumod_notify *n)
{
    if (n->timer_open) {
        n->timer_open = 0;
        uv_timer_stop(&n->timer);
        uv_close((uv_handle_t *)&n->timer, NULL);
    }
}
