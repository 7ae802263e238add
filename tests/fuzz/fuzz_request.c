/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness: bytes -> the front's decoding, validation and request
 * handlers, with a real executor on the fake driver.
 *
 * LLVMFuzzerInitialize copies the example kernels into a temp folder and
 * runs the real front, cumod__front_run, on a thread of this process, so
 * that its code (built with -fsanitize=fuzzer-no-link) guides the fuzzer.
 * Its executor is this build's cumodd (--executor-path), on libfakecuda.so;
 * the executor's sanitizer reports go to files (log_path) that are looked
 * for after every input. Each input is sent as one raw nng message on a
 * req0 socket, or as several (fuzz_request.h), and every message must be
 * answered within CUMOD_FUZZ_REPLY_MS milliseconds (default 5000) with a
 * cumod.Reply that names the request, as server.h promises; anything else
 * traps, and libFuzzer keeps the input. CUMOD_FUZZ_VERBOSE=1 prints every
 * answer (to see what a reproducer does).
 *
 * Single messages share a connection (one session), opened again every
 * FUZZ_RENEW inputs so that what they allocate is freed; a multi-message
 * input gets a connection of its own. At exit (libFuzzer's -max_total_time
 * or -runs, or a replay) the front gets SIGTERM and must stop cleanly,
 * with its executor, within 30 s.
 *
 * Seeds: tests/fuzz/corpus/request, written by fuzz_seeds.c. Run by hand:
 * docs/testing.md "Fuzzing".
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "common/config.h"
#include "cumod.pb-c.h"
#include "cumod/errors.h"
#include "data/decode.h"
#include "front/front.h"
#include "fuzz_request.h"
#include "common/log.h"

/* Inputs a shared connection serves before it is opened again. */
#define FUZZ_RENEW 256
/* Waits at start and at exit. */
#define FUZZ_START_MS 120000
#define FUZZ_STOP_S 30
/* After a failed call, how long a front that was told to stop may take to
 * finish (its --drain-timeout, then its executor's exit). */
#define FUZZ_GONE_MS 10000

typedef struct fuzz_ctx {
    char dir[200];     /* temp folder: kernels/, san/, the socket */
    char kernels[240]; /* the watched folder */
    char san[240];     /* the executor's sanitizer reports */
    char url[260];     /* ipc://dir/f.sock */
    char *argv[32];    /* cumodd's command line; cfg borrows it */
    cumod_config cfg;
    pthread_t front; /* runs cumod__front_run */
    int front_started;
    int front_rc; /* its exit status, once front_done */
    atomic_int front_done;
    nng_socket sock;
    int connected;
    unsigned served; /* inputs on this connection */
    int reply_ms;
    int verbose; /* CUMOD_FUZZ_VERBOSE: print each answer */
} fuzz_ctx;

/* libFuzzer's entry points take no context, so the harness keeps its one
 * here. Only the fuzzer's main thread touches it, but for front_rc and
 * front_done, which the front's thread sets as it ends. */
static fuzz_ctx fuzz;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_fail(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));
static void fuzz_die(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));

/* A finding: says what, then traps so that libFuzzer keeps the input. */
static void
fuzz_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("fuzz_request: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    __builtin_trap();
}

/* The harness itself cannot go on (no temp folder, no daemon). */
static void
fuzz_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("fuzz_request: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static double
fuzz_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int
fuzz_rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    remove(path);
    return 0;
}

static void
fuzz_cleanup(void)
{
    if (fuzz.dir[0] != '\0')
        nftw(fuzz.dir, fuzz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
    shm_unlink(FUZZ_REQUEST_SEGMENT);
}

/* The fuzzer ends with _Exit on a finding, a timeout or ^C, skipping
 * atexit: a process forked here, before any thread, cleans up after it.
 * It waits for EOF on a pipe whose other end only this process holds
 * (close-on-exec, so the executor does not), which comes however this
 * process ends, then removes the temp folder and the segment. */
static void
fuzz_start_reaper(void)
{
    int p[2], fd;
    pid_t pid;
    char c;

    if (pipe2(p, O_CLOEXEC) != 0 || (pid = fork()) < 0)
        fuzz_die("cannot start the clean-up process: %s", strerror(errno));
    if (pid > 0) {
        close(p[0]);
        return;
    }
    /* Its output is nobody's: a test runner waits for its pipes. */
    if ((fd = open("/dev/null", O_RDWR)) >= 0) {
        dup2(fd, 0);
        dup2(fd, 1);
        dup2(fd, 2);
    }
    close(p[1]);
    while (read(p[0], &c, 1) < 0 && errno == EINTR)
        ;
    fuzz_cleanup();
    _exit(0);
}

/* Copies every regular file of the example kernel folder into dst. */
static void
fuzz_copy_kernels(const char *src, const char *dst)
{
    DIR *d = opendir(src);
    struct dirent *e;
    char buf[65536];

    if (d == NULL)
        fuzz_die("cannot open the example kernels %s: %s", src,
                 strerror(errno));
    while ((e = readdir(d)) != NULL) {
        char from[512], to[512];
        struct stat st;
        int in, out;
        ssize_t n;

        snprintf(from, sizeof(from), "%s/%s", src, e->d_name);
        snprintf(to, sizeof(to), "%s/%s", dst, e->d_name);
        if (e->d_name[0] == '.' || stat(from, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if ((in = open(from, O_RDONLY | O_CLOEXEC)) < 0 ||
            (out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) <
                0)
            fuzz_die("cannot copy %s to %s: %s", from, to, strerror(errno));
        while ((n = read(in, buf, sizeof(buf))) > 0)
            if (write(out, buf, (size_t)n) != n)
                fuzz_die("cannot write %s: %s", to, strerror(errno));
        close(in);
        close(out);
    }
    closedir(d);
}

/* Appends to an environment variable of the executor-to-be (this process
 * has read its own sanitizer settings already). */
static void
fuzz_env_append(const char *var, const char *more)
{
    const char *old = getenv(var);
    char v[2048];
    snprintf(v, sizeof(v), "%s%s%s", old ? old : "", old && old[0] ? ":" : "",
             more);
    setenv(var, v, 1);
}

/* 1 if the executor wrote a sanitizer report; prints it. */
static int
fuzz_exec_reports(void)
{
    DIR *d = opendir(fuzz.san);
    struct dirent *e;
    int found = 0;

    if (d == NULL)
        return 0;
    while ((e = readdir(d)) != NULL) {
        char path[512], buf[4096];
        size_t n;
        FILE *f;

        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", fuzz.san, e->d_name);
        fprintf(stderr, "fuzz_request: the executor's sanitizer report %s:\n",
                path);
        if ((f = fopen(path, "r")) != NULL) {
            while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
                fwrite(buf, 1, n, stderr);
            fclose(f);
        }
        found = 1;
    }
    closedir(d);
    return found;
}

static void *
fuzz_front_main(void *arg)
{
    (void)arg;
    fuzz.front_rc = cumod__front_run(&fuzz.cfg);
    atomic_store(&fuzz.front_done, 1);
    return NULL;
}

/* The front stopped while the fuzzer runs, or stops within wait_ms: a
 * SIGTERM from outside (a person, a supervisor) stops the fuzzer too
 * (the front closes its connections before it has finished stopping,
 * hence the wait after a failed call); any other end is a bug. Returns if
 * the front still runs. */
static void
fuzz_check_front(int wait_ms)
{
    for (double end = fuzz_now_ms() + wait_ms;
         !atomic_load(&fuzz.front_done) && fuzz_now_ms() < end;)
        usleep(10000);
    if (!atomic_load(&fuzz.front_done))
        return;
    if (fuzz.front_rc == 0) {
        fprintf(stderr, "fuzz_request: cumodd stopped on a signal; stopping\n");
        fuzz_cleanup();
        _Exit(0);
    }
    fuzz_fail("cumodd stopped by itself, exit status %d", fuzz.front_rc);
}

static void
fuzz_disconnect(void)
{
    if (fuzz.connected)
        nng_close(fuzz.sock); /* no other thread uses it */
    fuzz.connected = 0;
}

/* Opens a connection: a new session at its first request. 0, or an nng
 * error when the daemon is not listening (yet). */
static int
fuzz_connect(void)
{
    int rv;

    fuzz_disconnect();
    if ((rv = nng_req0_open(&fuzz.sock)) != 0)
        fuzz_die("nng_req0_open: %s", nng_strerror(rv));
    /* No resends (DESIGN.md "Protocol"): every message is sent once and
     * must be answered once. */
    nng_socket_set_ms(fuzz.sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    nng_socket_set_ms(fuzz.sock, NNG_OPT_RECVTIMEO, fuzz.reply_ms);
    nng_socket_set_ms(fuzz.sock, NNG_OPT_SENDTIMEO, fuzz.reply_ms);
    if ((rv = nng_dial(fuzz.sock, fuzz.url, NULL, 0)) != 0) {
        nng_close(fuzz.sock);
        return rv;
    }
    fuzz.connected = 1;
    fuzz.served = 0;
    return 0;
}

/* The body of a successful reply to each request (cumod.proto's "reply:"
 * notes); the status-only ones (free, unmap, destroy) may carry a
 * DoneReply or nothing. */
static const Cumod__Reply__BodyCase fuzz_reply_body[] = {
    [CUMOD__REQUEST__BODY_HELLO] = CUMOD__REPLY__BODY_HELLO,
    [CUMOD__REQUEST__BODY_LIST_MODULES] = CUMOD__REPLY__BODY_LIST_MODULES,
    [CUMOD__REQUEST__BODY_SHOW_MODULE] = CUMOD__REPLY__BODY_SHOW_MODULE,
    [CUMOD__REQUEST__BODY_LOAD_MODULE] = CUMOD__REPLY__BODY_MODULE,
    [CUMOD__REQUEST__BODY_UNLOAD_MODULE] = CUMOD__REPLY__BODY_MODULE,
    [CUMOD__REQUEST__BODY_PIN_MODULE] = CUMOD__REPLY__BODY_MODULE,
    [CUMOD__REQUEST__BODY_UNPIN_MODULE] = CUMOD__REPLY__BODY_MODULE,
    [CUMOD__REQUEST__BODY_RELOAD_MODULE] = CUMOD__REPLY__BODY_MODULE,
    [CUMOD__REQUEST__BODY_UNQUARANTINE_MODULE] = CUMOD__REPLY__BODY_MODULE,
    [CUMOD__REQUEST__BODY_ALLOC_BUFFER] = CUMOD__REPLY__BODY_BUFFER,
    [CUMOD__REQUEST__BODY_FREE_BUFFER] = CUMOD__REPLY__BODY__NOT_SET,
    [CUMOD__REQUEST__BODY_WRITE_BUFFER] = CUMOD__REPLY__BODY_DONE,
    [CUMOD__REQUEST__BODY_READ_BUFFER] = CUMOD__REPLY__BODY_DATA,
    [CUMOD__REQUEST__BODY_MEMSET] = CUMOD__REPLY__BODY_DONE,
    [CUMOD__REQUEST__BODY_MAP_SEGMENT] = CUMOD__REPLY__BODY_SEGMENT,
    [CUMOD__REQUEST__BODY_UNMAP_SEGMENT] = CUMOD__REPLY__BODY__NOT_SET,
    [CUMOD__REQUEST__BODY_COPY] = CUMOD__REPLY__BODY_DONE,
    [CUMOD__REQUEST__BODY_CREATE_STREAM] = CUMOD__REPLY__BODY_STREAM,
    [CUMOD__REQUEST__BODY_DESTROY_STREAM] = CUMOD__REPLY__BODY__NOT_SET,
    [CUMOD__REQUEST__BODY_SYNCHRONIZE] = CUMOD__REPLY__BODY_DONE,
    [CUMOD__REQUEST__BODY_WAIT] = CUMOD__REPLY__BODY_DONE,
    [CUMOD__REQUEST__BODY_LAUNCH] = CUMOD__REPLY__BODY_DONE,
    [CUMOD__REQUEST__BODY_BATCH] = CUMOD__REPLY__BODY_BATCH,
    [CUMOD__REQUEST__BODY_READ_GLOBAL] = CUMOD__REPLY__BODY_DATA,
    [CUMOD__REQUEST__BODY_WRITE_GLOBAL] = CUMOD__REPLY__BODY_DONE,
    [CUMOD__REQUEST__BODY_OPEN_RING] = CUMOD__REPLY__BODY_RING,
    [CUMOD__REQUEST__BODY_WATCH_EVENTS] = CUMOD__REPLY__BODY_EVENTS,
    [CUMOD__REQUEST__BODY_GEMM] = CUMOD__REPLY__BODY_DONE,
    [CUMOD__REQUEST__BODY_SET_DEVICE] = CUMOD__REPLY__BODY_DEVICE,
};

/* The requests whose success is a status alone (cumod.proto's "(status
 * only)"): the only ones fuzz_reply_body may leave unset. */
static const int fuzz_status_only[] = {
    CUMOD__REQUEST__BODY_FREE_BUFFER,
    CUMOD__REQUEST__BODY_UNMAP_SEGMENT,
    CUMOD__REQUEST__BODY_DESTROY_STREAM,
    CUMOD__REQUEST__BODY_KERNEL_SETTINGS,
};

/* Every body of cumod.Request has its expected reply above: a body added
 * to the protocol without one stops the harness at its start, by name,
 * instead of being found as a "wrong reply" whenever the fuzzer happens
 * to send it (SetDevice was, in one CI run). */
static void
fuzz_check_reply_table(void)
{
    const ProtobufCMessageDescriptor *d = &cumod__request__descriptor;
    size_t n = sizeof(fuzz_reply_body) / sizeof(fuzz_reply_body[0]);

    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        int known = 0;

        if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) == 0)
            continue;
        if (f->id < n && fuzz_reply_body[f->id] != CUMOD__REPLY__BODY__NOT_SET)
            known = 1;
        for (size_t k = 0; !known && k < sizeof(fuzz_status_only) /
                                             sizeof(fuzz_status_only[0]);
             k++)
            known = fuzz_status_only[k] == (int)f->id;
        if (!known)
            fuzz_die("request body %u (%s) has no expected reply in "
                     "fuzz_reply_body: add it",
                     f->id, f->name);
    }
}

/* What a successful reply's body must be for req (a request the daemon
 * served: version 1, a known body). */
static void
fuzz_check_body(const Cumod__Request *req, const Cumod__Reply *rep)
{
    int body = (int)req->body_case;
    Cumod__Reply__BodyCase want = CUMOD__REPLY__BODY__NOT_SET;

    if (body > 0 &&
        (size_t)body < sizeof(fuzz_reply_body) / sizeof(fuzz_reply_body[0]))
        want = fuzz_reply_body[body];
    if (want == CUMOD__REPLY__BODY__NOT_SET) {
        if (rep->body_case != CUMOD__REPLY__BODY__NOT_SET &&
            rep->body_case != CUMOD__REPLY__BODY_DONE)
            fuzz_fail("request body %d was answered with reply body %d, not "
                      "none or done",
                      body, (int)rep->body_case);
        return;
    }
    if (rep->body_case != want)
        fuzz_fail("request body %d was answered with reply body %d, not %d",
                  body, (int)rep->body_case, (int)want);
    if (want == CUMOD__REPLY__BODY_DATA &&
        rep->data->data.len != req->read_buffer->length)
        fuzz_fail("a read of %llu bytes was answered with %zu",
                  (unsigned long long)req->read_buffer->length,
                  rep->data->data.len);
    if (want == CUMOD__REPLY__BODY_BUFFER &&
        (rep->buffer->handle == 0 ||
         rep->buffer->size != req->alloc_buffer->size))
        fuzz_fail("an alloc of %llu bytes was answered with buffer %llu of "
                  "%llu bytes",
                  (unsigned long long)req->alloc_buffer->size,
                  (unsigned long long)rep->buffer->handle,
                  (unsigned long long)rep->buffer->size);
}

/* What server.h and cumod.proto promise of the reply to the bytes p: a
 * cumod.Reply that names the request (its id), EPROTO for bytes that are
 * no Request, EVERSION for another version, a status only with a known
 * error and a sentence, the body the request asks for on success and none
 * on failure (but a refused Batch's). */
static void
fuzz_check_reply(const uint8_t *p, size_t len, nng_msg *m)
{
    Cumod__Reply *rep =
        cumod__reply__unpack(NULL, nng_msg_len(m), nng_msg_body(m));
    Cumod__Request *req = cumod__request__unpack(NULL, len, p);
    int code;

    if (rep == NULL)
        fuzz_fail("the reply (%zu bytes) is not a cumod.Reply", nng_msg_len(m));
    code = rep->status != NULL ? rep->status->code : 0;
    if (rep->status != NULL &&
        (code == 0 || strcmp(cumod_errname(code), "CUMOD_E?") == 0 ||
         rep->status->message == NULL || rep->status->message[0] == '\0'))
        fuzz_fail("the reply has a status of code %d (%s), message \"%s\"",
                  code, cumod_errname(code),
                  rep->status->message ? rep->status->message : "(none)");
    if (req == NULL && code != CUMOD_EPROTO)
        fuzz_fail("bytes that are no cumod.Request were answered %s, not "
                  "CUMOD_EPROTO",
                  cumod_errname(code));
    if (req != NULL && rep->id != req->id)
        fuzz_fail("the reply names request %llu, not %llu",
                  (unsigned long long)rep->id, (unsigned long long)req->id);
    if (req != NULL &&
        req->version != CUMOD__PROTOCOL_VERSION__PROTOCOL_VERSION_1 &&
        code != CUMOD_EVERSION)
        fuzz_fail("a request of version %u was answered %s, not "
                  "CUMOD_EVERSION",
                  req->version, cumod_errname(code));
    if (req != NULL && code == 0)
        fuzz_check_body(req, rep);
    if (code != 0 && rep->body_case != CUMOD__REPLY__BODY__NOT_SET &&
        !(rep->body_case == CUMOD__REPLY__BODY_BATCH && req != NULL &&
          req->body_case == CUMOD__REQUEST__BODY_BATCH))
        fuzz_fail("a %s answer carries reply body %d", cumod_errname(code),
                  (int)rep->body_case);
    if (fuzz.verbose)
        fprintf(stderr, "fuzz_request: request %llu (body %d) -> %s%s%s\n",
                req ? (unsigned long long)req->id : 0ULL,
                req ? (int)req->body_case : -1,
                code ? cumod_errname(code) : "CUMOD_OK", code ? ": " : "",
                code ? rep->status->message : "");
    if (req != NULL)
        cumod__request__free_unpacked(req, NULL);
    cumod__reply__free_unpacked(rep, NULL);
}

/* Sends one message and checks its answer. */
static void
fuzz_call(const uint8_t *p, size_t len)
{
    nng_msg *m;
    int rv;

    if (len > fuzz.cfg.max_msg)
        return; /* nng drops it and the connection: not the daemon's doing */
    if (nng_msg_alloc(&m, len) != 0)
        fuzz_die("out of memory");
    if (len > 0)
        memcpy(nng_msg_body(m), p, len);
    if ((rv = nng_sendmsg(fuzz.sock, m, 0)) != 0) {
        nng_msg_free(m);
        fuzz_check_front(FUZZ_GONE_MS);
        fuzz_fail("cannot send a %zu-byte request: %s", len, nng_strerror(rv));
    }
    if ((rv = nng_recvmsg(fuzz.sock, &m, 0)) != 0) {
        fuzz_check_front(FUZZ_GONE_MS);
        fuzz_fail("no reply to a %zu-byte request within %d ms: %s", len,
                  fuzz.reply_ms, nng_strerror(rv));
    }
    fuzz_check_reply(p, len, m);
    nng_msg_free(m);
}

/* A shared-memory segment of ours for MapSegment to find. */
static void
fuzz_make_segment(void)
{
    int fd = shm_open(FUZZ_REQUEST_SEGMENT, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)FUZZ_REQUEST_SEGMENT_SIZE) != 0)
        fuzz_die("cannot make the shared memory %s: %s", FUZZ_REQUEST_SEGMENT,
                 strerror(errno));
    close(fd);
}

/* At exit: SIGTERM to the front, which must stop cleanly (exit status 0,
 * every handle closed, its executor gone without a sanitizer report). */
static void
fuzz_stop(void)
{
    struct timespec ts;
    int bad = 0;

    fuzz_disconnect();
    if (!fuzz.front_started) {
        fuzz_cleanup();
        return;
    }
    if (!atomic_load(&fuzz.front_done)) {
        pthread_kill(fuzz.front, SIGTERM);
    }
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += FUZZ_STOP_S;
    if (pthread_timedjoin_np(fuzz.front, NULL, &ts) != 0) {
        fprintf(stderr,
                "fuzz_request: cumodd did not stop within %d s of SIGTERM\n",
                FUZZ_STOP_S);
        _Exit(1);
    }
    if (fuzz.front_rc != 0) {
        fprintf(stderr, "fuzz_request: cumodd exited with status %d\n",
                fuzz.front_rc);
        bad = 1;
    }
    bad |= fuzz_exec_reports();
    fuzz_cleanup();
    if (bad)
        _Exit(1);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *t = getenv("TMPDIR"), *ms = getenv("CUMOD_FUZZ_REPLY_MS");
    char sock[260], opt[300];
    int n = 0;

    (void)argc;
    (void)argv;
    fuzz.reply_ms = ms != NULL && atoi(ms) > 0 ? atoi(ms) : 5000;
    fuzz.verbose = getenv("CUMOD_FUZZ_VERBOSE") != NULL;
    fuzz_check_reply_table();
    snprintf(fuzz.dir, sizeof(fuzz.dir), "%s/cumod-fuzz.XXXXXX",
             t && t[0] ? t : "/tmp");
    if (mkdtemp(fuzz.dir) == NULL)
        fuzz_die("mkdtemp %s: %s", fuzz.dir, strerror(errno));
    fuzz_start_reaper();
    atexit(fuzz_stop);
    snprintf(fuzz.kernels, sizeof(fuzz.kernels), "%s/kernels", fuzz.dir);
    snprintf(fuzz.san, sizeof(fuzz.san), "%s/san", fuzz.dir);
    snprintf(sock, sizeof(sock), "%s/f.sock", fuzz.dir);
    snprintf(fuzz.url, sizeof(fuzz.url), "ipc://%s", sock);
    if (mkdir(fuzz.kernels, 0755) != 0 || mkdir(fuzz.san, 0755) != 0)
        fuzz_die("mkdir in %s: %s", fuzz.dir, strerror(errno));
    fuzz_copy_kernels(FUZZ_KERNEL_DIR, fuzz.kernels);
    fuzz_make_segment();

    /* The executor's settings: a small fake device (its memory is host
     * memory), and its sanitizer reports in files of san/ (abort() too). */
    setenv("CUMOD_FAKE_MEM", "1g", 1);
    snprintf(opt, sizeof(opt), "log_path=%s/exec:handle_abort=1:detect_leaks=0",
             fuzz.san);
    fuzz_env_append("ASAN_OPTIONS", opt);
    snprintf(opt, sizeof(opt), "log_path=%s/exec", fuzz.san);
    fuzz_env_append("UBSAN_OPTIONS", opt);

    /* clang-format off */
    char *const args[] = {
        "cumodd",
        "--kernels", fuzz.kernels,
        "--listen", fuzz.url,
        "--cuda-library", FUZZ_FAKECUDA,
        "--cublas-library", FUZZ_FAKECUBLAS,
        "--executor-path", FUZZ_CUMODD,
        "--log-level", "error",
        "--session-memory-limit", "268435456",
        "--drain-timeout", "2000",
        "--max-message", "1048576",
        /* A watch waits at most this, well within a reply's time. */
        "--max-watch-wait", "1000",
    };
    /* clang-format on */
    for (size_t i = 0; i < sizeof(args) / sizeof(args[0]); i++)
        fuzz.argv[n++] = args[i]; /* all of them outlive the front */
    fuzz.argv[n] = NULL;
    if (cumod__config_parse(&fuzz.cfg, n, fuzz.argv) != CUMOD_CONFIG_RUN)
        fuzz_die("cumodd's command line was refused");
    cumod__log_init("cumodd", fuzz.cfg.log_level);
    signal(SIGPIPE, SIG_IGN); /* as cumodd's main does */
    if (pthread_create(&fuzz.front, NULL, fuzz_front_main, NULL) != 0)
        fuzz_die("cannot start the front's thread");
    fuzz.front_started = 1;

    /* Ready when a Hello is answered (the front listens once its first
     * executor holds the context). */
    for (double end = fuzz_now_ms() + FUZZ_START_MS;; usleep(20000)) {
        if (atomic_load(&fuzz.front_done))
            fuzz_die("cumodd exited with status %d at start", fuzz.front_rc);
        if (fuzz_now_ms() > end)
            fuzz_die("cumodd did not answer within %d s of its start",
                     FUZZ_START_MS / 1000);
        if (fuzz_connect() != 0)
            continue;
        Cumod__Request req = CUMOD__REQUEST__INIT;
        Cumod__Hello hello = CUMOD__HELLO__INIT;
        uint8_t buf[64];
        req.version = CUMOD__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
        req.id = 1;
        req.body_case = CUMOD__REQUEST__BODY_HELLO;
        req.hello = &hello;
        fuzz_call(buf, cumod__request__pack(&req, buf));
        break;
    }
    /* ^C should stop the fuzzer, as libFuzzer does it (with its stats),
     * not the daemon beneath it; libFuzzer sets its handler only where
     * none is set. SIGTERM stays the front's: fuzz_stop sends it. */
    struct sigaction sa = {.sa_handler = SIG_DFL};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    return 0;
}

/* The launch decoder (decode_fast.c) must make of the bytes what
 * protobuf-c makes of them, whenever it takes them: compared by packing
 * both again. */
static void
fuzz_decode_same(const uint8_t *data, size_t size)
{
    static cumod_decoder d;
    static int ready;
    Cumod__Request *fast;

    if (!ready) {
        cumod__decoder_init(&d);
        ready = 1;
    }
    cumod__decoder_release(&d);
    d.decoded = 0;
    d.budget = size * 32 + (1u << 20);
    d.over_budget = 0;
    if (!cumod__decode_fast(&d, data, size, &fast))
        return;
    Cumod__Request *ref = cumod__request__unpack(NULL, size, data);
    if (ref == NULL)
        fuzz_fail("the launch decoder took %zu bytes that protobuf-c "
                  "refuses",
                  size);
    size_t la = cumod__request__get_packed_size(fast);
    size_t lb = cumod__request__get_packed_size(ref);
    uint8_t *a = malloc(la + 1), *b = malloc(lb + 1);
    if (a == NULL || b == NULL)
        fuzz_die("out of memory");
    cumod__request__pack(fast, a);
    cumod__request__pack(ref, b);
    if (la != lb || memcmp(a, b, la) != 0)
        fuzz_fail("the launch decoder and protobuf-c disagree on %zu bytes",
                  size);
    free(a);
    free(b);
    cumod__request__free_unpacked(ref, NULL);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *sep =
        memmem(data, size, FUZZ_REQUEST_SEP, FUZZ_REQUEST_SEP_LEN);
    int rv;

    fuzz_check_front(0);
    if (sep != NULL || !fuzz.connected || fuzz.served >= FUZZ_RENEW) {
        if ((rv = fuzz_connect()) != 0) {
            fuzz_check_front(FUZZ_GONE_MS);
            fuzz_fail("cannot connect to cumodd: %s", nng_strerror(rv));
        }
    }
    fuzz.served++;
    if (sep == NULL) {
        fuzz_decode_same(data, size);
        fuzz_call(data, size);
    } else {
        const uint8_t *p = data, *end = data + size;
        for (int i = 0; i < FUZZ_REQUEST_MAX_MSGS && p <= end; i++) {
            sep = memmem(p, (size_t)(end - p), FUZZ_REQUEST_SEP,
                         FUZZ_REQUEST_SEP_LEN);
            fuzz_decode_same(p, (size_t)((sep ? sep : end) - p));
            fuzz_call(p, (size_t)((sep ? sep : end) - p));
            if (sep == NULL)
                break;
            p = sep + FUZZ_REQUEST_SEP_LEN;
        }
        /* The next input starts on a connection of its own too. */
        fuzz_disconnect();
    }
    if (fuzz_exec_reports())
        fuzz_fail("the executor reported a bug (above) during this input");
    return 0;
}
