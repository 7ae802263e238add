/* SPDX-License-Identifier: MIT */
/*
 * cumod_demo, part 2: a hot reload under load. A worker thread on its own
 * connection (its own session) launches vadd:vadd over and over and checks
 * every result: each must be a + b (the original kernel) or a - b (the
 * variant). Meanwhile this thread renames the variant over vadd.cubin in
 * the kernel folder, waits until the daemon has a new generation and the
 * worker sees a - b, then puts the original back the same way.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "demo.h"

#define RELOAD_FLOATS 4096
#define RELOAD_WAIT_NS 10000000000ull /* a swap must show within 10 s */
#define RELOAD_SETTLE                                                          \
    200 /* launches of the new kind to see before going on                     \
         */

enum { KIND_NONE, KIND_SUM, KIND_DIFF };

typedef struct reload_worker {
    const char *url;
    atomic_int stop;
    atomic_int ready;               /* 1 set up; -1 could not */
    atomic_ulong sum, diff, failed; /* launches by their result */
    atomic_int last;                /* the kind of the last good launch */
    _Atomic uint64_t changed_ns;    /* when the kind last changed */
    atomic_flag noted;              /* error holds the first failure */
    char error[512];
} reload_worker;

/* One swap as seen from both threads. */
typedef struct reload_swap {
    uint64_t gen_before, gen_after;
    unsigned long before;  /* launches of the old kind before the rename */
    unsigned long between; /* ... after it, until the results changed */
    double ms;             /* from the rename to the first new result */
} reload_swap;

static void reload_note(reload_worker *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
reload_note(reload_worker *w, const char *fmt, ...)
{
    va_list ap;

    atomic_fetch_add(&w->failed, 1);
    if (atomic_flag_test_and_set(&w->noted))
        return;
    va_start(ap, fmt);
    vsnprintf(w->error, sizeof(w->error), fmt, ap);
    va_end(ap);
}

/* KIND_SUM or KIND_DIFF when every element agrees, else KIND_NONE with
 * the first element that does not in *bad. */
static int
reload_classify(const float *a, const float *b, const float *c, size_t *bad)
{
    int kind = c[0] == a[0] + b[0]   ? KIND_SUM
               : c[0] == a[0] - b[0] ? KIND_DIFF
                                     : KIND_NONE;

    for (size_t i = 0; i < RELOAD_FLOATS; i++)
        if (kind == KIND_NONE ||
            c[i] != (kind == KIND_SUM ? a[i] + b[i] : a[i] - b[i])) {
            *bad = i;
            return KIND_NONE;
        }
    return kind;
}

static void *
reload_worker_main(void *arg)
{
    reload_worker *w = arg;
    static const size_t bytes = RELOAD_FLOATS * sizeof(float);
    float a[RELOAD_FLOATS], b[RELOAD_FLOATS], out[RELOAD_FLOATS];
    cumod_buffer buf[3] = {0};
    cumod_client *c = NULL;
    cumod_arg args[4];
    cumod_launch_params p = {
        .kernel = "vadd:vadd",
        .grid = {RELOAD_FLOATS / 256, 1, 1},
        .block = {256, 1, 1},
        .nargs = 4,
        .args = args,
    };
    int prev = KIND_NONE;
    size_t bad;

    /* b is never 0, so a + b and a - b differ everywhere. */
    for (size_t i = 0; i < RELOAD_FLOATS; i++) {
        a[i] = (float)i;
        b[i] = (float)(2 * i + 1);
    }
    if (cumod_open(w->url, 0, &c) != CUMOD_OK ||
        cumod_buffer_alloc(c, bytes, &buf[0]) != CUMOD_OK ||
        cumod_buffer_alloc(c, bytes, &buf[1]) != CUMOD_OK ||
        cumod_buffer_alloc(c, bytes, &buf[2]) != CUMOD_OK ||
        cumod_buffer_write(c, buf[0], 0, a, bytes, 0) != CUMOD_OK ||
        cumod_buffer_write(c, buf[1], 0, b, bytes, 0) != CUMOD_OK) {
        reload_note(w, "setting up: %s", cumod_last_detail());
        atomic_store(&w->ready, -1);
        goto done;
    }
    for (int i = 0; i < 3; i++)
        args[i] = cumod_arg_buffer(buf[i], 0);
    args[3] = cumod_arg_i32(RELOAD_FLOATS);
    atomic_store(&w->ready, 1);
    while (!atomic_load(&w->stop)) {
        uint64_t gen;
        if (cumod_launch(c, &p, NULL, &gen) != CUMOD_OK ||
            cumod_buffer_read(c, buf[2], 0, out, bytes, 0) != CUMOD_OK) {
            reload_note(w, "%s", cumod_last_detail());
            usleep(1000); /* a daemon that is gone must not spin us */
            continue;
        }
        int kind = reload_classify(a, b, out, &bad);
        if (kind == KIND_NONE) {
            reload_note(w,
                        "generation %llu: c[%zu] = %g is neither a+b (%g) "
                        "nor a-b (%g)",
                        (unsigned long long)gen, bad, (double)out[bad],
                        (double)(a[bad] + b[bad]), (double)(a[bad] - b[bad]));
            continue;
        }
        atomic_fetch_add(kind == KIND_SUM ? &w->sum : &w->diff, 1);
        if (kind != prev) {
            atomic_store(&w->changed_ns, cumod__demo_now_ns());
            atomic_store(&w->last, kind);
            prev = kind;
        }
    }
done:
    for (int i = 0; c != NULL && i < 3; i++)
        if (buf[i] != 0)
            cumod_buffer_free(c, buf[i]);
    cumod_close(c);
    return NULL;
}

/* A whole file into a fresh allocation; NULL with errno set if not. */
static char *
reload_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;

    if (f == NULL)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 &&
        fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n)) != NULL &&
        fread(buf, 1, (size_t)n, f) == (size_t)n) {
        *len = (size_t)n;
    } else {
        free(buf);
        buf = NULL;
        errno = errno ? errno : EIO;
    }
    fclose(f);
    return buf;
}

/* Replaces dir/vadd.cubin with bytes atomically: written under a name the
 * daemon ignores (a dotfile ending .tmp), then renamed over it. */
static int
reload_put(const char *dir, const char *bytes, size_t len)
{
    char tmp[4096], dst[4096];
    int fd, ok;

    snprintf(tmp, sizeof(tmp), "%s/.vadd.cubin.%ld.tmp", dir, (long)getpid());
    snprintf(dst, sizeof(dst), "%s/vadd.cubin", dir);
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
        fprintf(stderr, "cumod_demo: cannot create %s: %s\n", tmp,
                strerror(errno));
        return -1;
    }
    ok = write(fd, bytes, len) == (ssize_t)len;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, dst) != 0) {
        fprintf(stderr, "cumod_demo: cannot replace %s: %s\n", dst,
                strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* The daemon's generation of module vadd (0 when not loaded). */
static int
reload_generation(cumod_client *c, uint64_t *gen)
{
    cumod_module_list *l;
    int rv;

    if ((rv = cumod_modules_list(c, &l)) != CUMOD_OK)
        return rv;
    *gen = 0;
    for (size_t i = 0; i < l->count; i++)
        if (strcmp(l->modules[i].name, "vadd") == 0)
            *gen = l->modules[i].generation;
    cumod_module_list_free(l);
    return CUMOD_OK;
}

/* Waits until want holds, the worker has had settle launches of kind (0:
 * just a new generation) and none failed; -1 on a timeout, an interrupt
 * or a failed launch (the message printed). */
static int
reload_wait(cumod_client *c, reload_worker *w, int kind, uint64_t after_gen,
            unsigned long settle, uint64_t *gen, const char *what)
{
    uint64_t deadline = cumod__demo_now_ns() + RELOAD_WAIT_NS;
    atomic_ulong *count = kind == KIND_SUM ? &w->sum : &w->diff;

    while (!cumod__demo_interrupted && atomic_load(&w->ready) >= 0) {
        if (reload_generation(c, gen) != CUMOD_OK) {
            fprintf(stderr, "cumod_demo: listing modules: %s\n",
                    cumod_last_detail());
            return -1;
        }
        if (*gen > after_gen && atomic_load(&w->last) == kind &&
            atomic_load(count) >= settle)
            return 0;
        if (cumod__demo_now_ns() > deadline)
            break;
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
    fprintf(stderr, "cumod_demo: %s: %s\n", what,
            cumod__demo_interrupted      ? "interrupted"
            : atomic_load(&w->ready) < 0 ? w->error
                                         : "not seen within 10 s");
    return -1;
}

/* One swap: new_bytes over vadd.cubin, then waits for results of kind. */
static int
reload_swap_to(cumod_client *c, reload_worker *w, const char *dir,
               const char *bytes, size_t len, int kind, reload_swap *s)
{
    atomic_ulong *old = kind == KIND_SUM ? &w->diff : &w->sum;
    atomic_ulong *now = kind == KIND_SUM ? &w->sum : &w->diff;
    uint64_t t;

    if (reload_generation(c, &s->gen_before) != CUMOD_OK)
        return -1;
    s->before = atomic_load(old);
    unsigned long settle = atomic_load(now) + RELOAD_SETTLE;
    t = cumod__demo_now_ns();
    if (reload_put(dir, bytes, len) != 0 ||
        reload_wait(c, w, kind, s->gen_before, settle, &s->gen_after,
                    kind == KIND_SUM ? "the original's results (a+b)"
                                     : "the variant's results (a-b)") != 0)
        return -1;
    s->between = atomic_load(old) - s->before;
    s->ms = (double)(atomic_load(&w->changed_ns) - t) / 1e6;
    return 0;
}

static void
reload_print_swap(const char *name, const reload_swap *s, const char *from,
                  const char *to)
{
    printf("  %s: %lu launches gave %s before the rename; %s %.1f ms after "
           "it (generation %llu -> %llu), %lu %s launches in between\n",
           name, s->before, from, to, s->ms, (unsigned long long)s->gen_before,
           (unsigned long long)s->gen_after, s->between, from);
}

int
cumod__demo_reload(cumod_client *c, const demo_opts *o)
{
    reload_worker w = {.url = o->url, .noted = ATOMIC_FLAG_INIT};
    reload_swap swaps[2] = {{0}};
    char path[4096], *orig = NULL, *variant = NULL;
    size_t orig_len = 0, variant_len = 0;
    int swapped = 0, done = 0, rv = 1;
    pthread_t thread;
    uint64_t gen;

    snprintf(path, sizeof(path), "%s/vadd.cubin", o->kernels);
    if ((orig = reload_read(path, &orig_len)) == NULL ||
        (variant = reload_read(o->variant, &variant_len)) == NULL) {
        fprintf(stderr, "cumod_demo: cannot read %s: %s\n",
                orig ? o->variant : path, strerror(errno));
        goto out;
    }
    if (orig_len == variant_len && memcmp(orig, variant, orig_len) == 0) {
        fprintf(stderr,
                "cumod_demo: %s is already the variant (%s): "
                "rebuild to restore it\n",
                path, o->variant);
        goto out;
    }
    if (pthread_create(&thread, NULL, reload_worker_main, &w) != 0) {
        fprintf(stderr, "cumod_demo: cannot start a thread\n");
        goto out;
    }
    printf("hot reload under load: a second connection launches vadd:vadd "
           "on %d floats and checks every result\n",
           RELOAD_FLOATS);
    if (reload_wait(c, &w, KIND_SUM, 0, RELOAD_SETTLE, &gen,
                    "the original's results (a+b)") == 0) {
        swapped = 1;
        done = reload_swap_to(c, &w, o->kernels, variant, variant_len,
                              KIND_DIFF, &swaps[0]) == 0 &&
               reload_swap_to(c, &w, o->kernels, orig, orig_len, KIND_SUM,
                              &swaps[1]) == 0;
    }
    /* Whatever went wrong, the folder gets its original back (the same
     * bytes again are no event to the daemon). */
    if (swapped && !done && reload_put(o->kernels, orig, orig_len) != 0)
        fprintf(stderr, "cumod_demo: %s is left as the variant\n", path);
    atomic_store(&w.stop, 1);
    pthread_join(thread, NULL);
    if (done) {
        reload_print_swap("swap 1, the variant in", &swaps[0], "a+b", "a-b");
        reload_print_swap("swap 2, the original back", &swaps[1], "a-b", "a+b");
    }
    printf("  in all %lu launches: %lu gave a+b, %lu a-b; %lu launches failed "
           "during the swaps\n",
           atomic_load(&w.sum) + atomic_load(&w.diff) + atomic_load(&w.failed),
           atomic_load(&w.sum), atomic_load(&w.diff), atomic_load(&w.failed));
    if (atomic_load(&w.failed))
        printf("  the first failure: %s\n", w.error);
    rv = done && atomic_load(&w.failed) == 0 ? 0 : 1;
out:
    free(orig);
    free(variant);
    return rv;
}
