/* SPDX-License-Identifier: MIT */
/*
 * cumodctl's launch command: the command (ctl_launch.c), its typed
 * arguments (ctl_args.c), and the options it shares with the rest of
 * cumodctl (cumodctl.c). Not part of libcumod; single-threaded.
 */
#ifndef CUMOD_CTL_LAUNCH_H
#define CUMOD_CTL_LAUNCH_H

#include <stddef.h>

#include "cumod/cumod.h"

/* cumodctl's global options, parsed before the command. */
typedef struct ctl {
    const char *url;     /* never NULL once parsed */
    const char *command; /* the command word ("ls", "launch"); NULL: none */
    int json;            /* print JSON, errors too */
    int timeout_ms;      /* of every request */
    cumod_tls_files tls; /* --tls-ca, --tls-cert, --tls-key (NULL: env) */
} ctl;

/* A command's failure (cumodctl's exit status 1, which it returns): with
 * --json one object a line on stdout, {"error": true, "command": CMD,
 * "context": WHAT or null, "code": N, "name": "CUMOD_E...", "detail": ...};
 * else "cumodctl: CMD: [WHAT: ]DETAIL" on stderr. rv is the cumod error;
 * detail NULL: cumod_last_detail(), else cumod_strerror(rv). what NULL (or
 * the command itself): no context. Reads the ctl given to
 * cumod__ctl_errors (main's), so --json after the command counts. */
int cumod__ctl_fail(const char *what, int rv, const char *detail);

/* A usage error (exit status 2, which it returns): the message (printf's
 * fmt, "cumodctl: ...\n") on stderr, as ever; and when --json was given
 * anywhere on the command line, also one object on stdout, {"error": true,
 * "usage": true, "command": CMD or null, "code": CUMOD_EINVAL, "name":
 * "CUMOD_EINVAL", "detail": the message without "cumodctl: " and the
 * newline}, so a script tells a wrong command line from a daemon's no. */
int cumod__ctl_usage(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* The options whose json and command cumod__ctl_fail reads; main's. */
void cumod__ctl_errors(const ctl *o);

/* Whether --json is anywhere in argv (for usage errors found before the
 * options are read); main calls it first. */
void cumod__ctl_json_asked(int argc, char **argv);

/* Runs `launch MODULE:KERNEL [options] ARG...`: argv[0] is "launch", the
 * rest its options and arguments (cumod__ctl_launch_usage lists them).
 * Connects to o->url, allocates the buffers that buf: arguments ask for,
 * launches, waits for completion and prints the generation that ran and
 * each buffer's contents. Returns cumodctl's exit status: 0 done, 1 the
 * daemon or the connection refused (the detail printed), 2 a usage error.
 * Uses getopt afresh: main's own parsing must be over. */
int cumod__ctl_launch(int argc, char **argv, ctl *o);

/* The launch command's lines of cumodctl --help. */
extern const char cumod__ctl_launch_usage[];

/* How a buffer argument is printed after the launch. */
typedef enum ctl_view {
    CTL_VIEW_HEX,
    CTL_VIEW_F32,
    CTL_VIEW_F64,
    CTL_VIEW_I32,
    CTL_VIEW_U32,
} ctl_view;

/* One ARG of the command line: a value, or a buffer for the call. */
typedef struct ctl_arg {
    int is_buffer;
    size_t size;          /* buffer: bytes */
    ctl_view view;        /* buffer: how to print it */
    unsigned char *bytes; /* hex: the raw bytes; buffer: its initial bytes
                             (NULL: none); owned, free() */
    size_t nbytes;
    cumod_buffer handle; /* buffer: 0 until allocated */
} ctl_arg;

/* Parses one ARG (i32:V, u32:V, i64:V, u64:V, f32:V, f64:V, hex:BYTES,
 * buf:SIZE[:TYPE][=V,...]); s is modified. A value fills *arg at once
 * (hex: borrowing a->bytes); a buffer's *arg is set once it exists.
 * Returns 0, or -1 when s is not such an argument. */
int cumod__ctl_parse_arg(char *s, ctl_arg *a, cumod_arg *arg);

/* "X[,Y,Z]", each from 1 to 2^31 - 1; missing ones are 1. 0 or -1. */
int cumod__ctl_parse_dim3(const char *s, cumod_dim3 *d);

/* A whole unsigned number, decimal or 0x hexadecimal, at most max. 0 or
 * -1. */
int cumod__ctl_parse_uint(const char *s, unsigned long long max,
                          unsigned long long *v);

/* "V,V,..." of a view's type (hex: hex digits) into fresh bytes (*out,
 * caller frees). 0 or -1. list is modified. */
int cumod__ctl_parse_values(ctl_view v, char *list, unsigned char **out,
                            size_t *n);

/* A view by name (hex, f32, f64, i32, u32). 0 or -1. */
int cumod__ctl_parse_view(const char *name, ctl_view *v);

/* cumodctl global and carveout (ctl_global.c): argv[0] is the command. */
int cumod__ctl_global(int argc, char **argv, ctl *o);
int cumod__ctl_carveout(int argc, char **argv, ctl *o);
extern const char cumod__ctl_global_usage[];

/* `watch [--json] [--all] [--count N]`: change events (ctl_watch.c). */
int cumod__ctl_watch(int argc, char **argv, ctl *o);
extern const char cumod__ctl_watch_usage[];

/* `top [--json] [--interval S]`: sessions by GPU time (ctl_top.c). */
int cumod__ctl_top(int argc, char **argv, ctl *o);
extern const char cumod__ctl_top_usage[];

/* `gemm TYPE M N K [options]` (ctl_gemm.c): one GEMM on buffers of its
 * own, run once (cuBLAS's loads) and then timed. */
int cumod__ctl_gemm(int argc, char **argv, ctl *o);
extern const char cumod__ctl_gemm_usage[];

/* `status` (ctl_status.c) on an open client: text, or JSON with o->json.
 * cumodctl's exit status. */
int cumod__ctl_status(cumod_client *c, const ctl *o);

/* The view's name ("f32") and its element's size in bytes. */
const char *cumod__ctl_view_name(ctl_view v);
size_t cumod__ctl_view_size(ctl_view v);

/* One element at e as text: two hex digits, or a number. */
void cumod__ctl_format(ctl_view v, const unsigned char *e, char *out,
                       size_t cap);

#endif
