/*
 * The front process: one libuv loop thread owns all of its state (the
 * executor's supervision, requests waiting on the executor, signals, the
 * server's hand-off queue). Nothing here is touched from another thread.
 */
#ifndef CUMOD_DAEMON_H
#define CUMOD_DAEMON_H

#include <limits.h>
#include <stdint.h>
#include <uv.h>

#include "channel.h"
#include "config.h"
#include "catalog/catalog.h"
#include "server.h"

typedef enum cumod_exec_state {
    CUMOD_EXEC_DOWN = 0, /* not running; a restart may be scheduled */
    CUMOD_EXEC_STARTING, /* spawned, waiting for READY or FAILED */
    CUMOD_EXEC_READY,    /* context up, serving commands */
} cumod_exec_state;

typedef struct cumod_daemon {
    const cumod_config *cfg;
    uv_loop_t loop;
    uv_signal_t sigterm, sigint;
    uv_timer_t restart_timer;
    char exe[PATH_MAX]; /* this binary, re-run as the executor */

    /* The executor and its channel. */
    uv_process_t proc;
    int proc_alive; /* proc is an open handle whose exit has not come */
    uv_poll_t chan_poll;
    int chan_fd; /* -1 when closed */
    int chan_polling;
    cumod_exec_state exec;
    int exec_restarts; /* consecutive failed starts, for backoff */
    int ever_ready;    /* has any executor come up? */
    char exec_error[1024];
    int exec_error_code;
    cumod_chan_device dev;
    char *chan_buf; /* CUMOD_CHAN_MAX bytes */

    /* Calls waiting on an executor reply, matched by seq, oldest first. */
    struct cumod_exec_pending *pending, *pending_tail;
    uint64_t next_seq;
    /* Commands the channel's socket buffer could not take yet, in order;
     * flushed when it is writable again. */
    struct cumod_chan_out *outq, *outq_tail;
    size_t outq_bytes;

    struct cumod_catalog *cat;
#define CUMOD_DAEMON_SESSION_BUCKETS 256
    struct cumod_session *sessions[CUMOD_DAEMON_SESSION_BUCKETS];

    cumod_server *srv;
    int stopping;
    int exit_code;
} cumod_daemon;

/* Runs the front until SIGTERM or SIGINT (exit 0) or a fatal start error
 * (EX_UNAVAILABLE when the driver or device is unusable, EX_CONFIG for a bad
 * kernel folder, EX_UNAVAILABLE when the listen address is taken). Blocks. */
int cumod__daemon_run(const cumod_config *cfg);

/* The request handler (handlers.c), called on the loop thread. */
void cumod__daemon_on_request(void *arg, cumod_work *w);

/* The answer to an executor call: the reply's header and payload, or, when
 * the executor died first, a header with status CUMOD_ECTXLOST and no
 * payload. Runs on the loop thread, exactly once per accepted call. */
typedef void (*cumod_exec_cb)(cumod_daemon *d, void *arg,
                              const cumod_chan_hdr *hdr, const void *payload,
                              size_t len);

/* Sends a command to the executor (with fd passed along when >= 0; the
 * caller keeps its own copy) and calls cb (unless NULL) with the reply.
 * Returns
 * CUMOD_ECTXLOST, and never calls cb, when the executor is not up or the
 * channel fails. Loop thread. */
int cumod__exec_call(cumod_daemon *d, uint32_t op, const void *payload,
                     size_t len, int fd, cumod_exec_cb cb, void *arg);

/* 1 when an executor is up and serving. */
int cumod__exec_ready(const cumod_daemon *d);

#endif
