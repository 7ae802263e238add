/* SPDX-License-Identifier: MIT */
/*
 * The kernel folder's watcher against real files in a temp folder: each
 * test runs its own loop, bounded by a deadline timer, and ends with
 * uv_loop_close() == 0.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "cumod/errors.h"
#include "harness.h"
#include "catalog/watch.h"

TH_SUITE_DRIVER(0);

#define FX_PATH 1024 /* a path inside the watched folder */
/* Where the load tests make their files when it is there: they test the
 * inotify queue, not the disk, and tens of thousands of creations on a
 * slow virtual disk take tens of seconds where tmpfs takes a fraction. */
#define FX_FAST_BASE "/dev/shm"

typedef struct rec {
    cumod_watch_event ev;
    char name[NAME_MAX + 1]; /* "" for RESCAN and DEGRADED */
    unsigned long overflows; /* cumod__watch_overflows when it came */
    long probe;              /* *fx.probe when it came */
} rec;

typedef struct fx {
    uv_loop_t loop;
    uv_timer_t deadline;
    int expired;
    cumod_watch *w;
    char root[256]; /* the temp folder, removed at the end */
    char dir[512];  /* the watched folder, root/kernels */
    rec *ev;
    size_t n, cap;
    int stop_in_cb; /* stop the watcher from inside the first callback */
    int stopped;    /* set once cumod__watch_stop returned */
    atomic_long *probe;
    char *seen; /* f%05d.cubin files reported or found by a RESCAN's scan */
    int nseen;
    int nfds; /* descriptors open before the watcher started */
    char dump[2048];
} fx;

/* How many descriptors this process has open. */
static int
fx_nfds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;

    cr_assert_not_null(d);
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

/* Marks name in f->seen when it is one of the load tests' files. */
static void
fx_mark(fx *f, const char *name)
{
    int k;
    if (f->seen != NULL && sscanf(name, "f%05d.cubin", &k) == 1 && k >= 0 &&
        k < f->nseen)
        f->seen[k] = 1;
}

/* What the catalog does at a RESCAN: read the folder whole through the
 * watcher's descriptor (a dup: fdopendir takes it over). */
static void
fx_scan(fx *f)
{
    DIR *d = fdopendir(dup(cumod__watch_dirfd(f->w)));
    struct dirent *e;

    cr_assert_not_null(d, "fdopendir: %s", strerror(errno));
    while ((e = readdir(d)) != NULL)
        fx_mark(f, e->d_name);
    closedir(d);
}

static void
fx_on_event(void *arg, cumod_watch_event ev, const char *name)
{
    fx *f = arg;

    cr_expect(!f->stopped, "a callback after cumod__watch_stop");
    cr_expect_eq(name == NULL,
                 ev == CUMOD_WATCH_RESCAN || ev == CUMOD_WATCH_DEGRADED);
    if (f->n == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 64;
        f->ev = realloc(f->ev, f->cap * sizeof(rec));
        cr_assert_not_null(f->ev);
    }
    rec *r = &f->ev[f->n++];
    r->ev = ev;
    snprintf(r->name, sizeof(r->name), "%s", name ? name : "");
    r->overflows = f->w ? cumod__watch_overflows(f->w) : 0;
    r->probe = f->probe ? atomic_load(f->probe) : 0;
    if (ev == CUMOD_WATCH_CHANGED)
        fx_mark(f, name);
    if (ev == CUMOD_WATCH_RESCAN && f->seen != NULL)
        fx_scan(f);
    if (f->stop_in_cb) {
        cumod__watch_stop(f->w);
        f->w = NULL;
        f->stopped = 1;
    }
}

static void
fx_on_deadline(uv_timer_t *h)
{
    fx *f = h->data;
    f->expired = 1;
}

/* A temp folder with kernels/ in it, a loop, and a watcher on kernels/.
 * The temp folder is under base when it is given and usable. */
static void
fx_open_in(fx *f, const char *base)
{
    char msg[512];

    memset(f, 0, sizeof(*f));
    snprintf(f->root, sizeof(f->root), "%s/cumod-test.XXXXXX",
             base ? base : "");
    if (base == NULL || mkdtemp(f->root) == NULL)
        th_tmpdir(f->root, sizeof(f->root));
    snprintf(f->dir, sizeof(f->dir), "%s/kernels", f->root);
    cr_assert_eq(mkdir(f->dir, 0755), 0);
    cr_assert_eq(uv_loop_init(&f->loop), 0);
    uv_timer_init(&f->loop, &f->deadline);
    f->deadline.data = f;
    f->nfds = fx_nfds();
    int rc = cumod__watch_start(&f->loop, f->dir, fx_on_event, f, &f->w, msg,
                                sizeof(msg));
    cr_assert_eq(rc, CUMOD_OK, "watch_start: %s: %s", cumod_errname(rc), msg);
}

static void
fx_open(fx *f)
{
    fx_open_in(f, NULL);
}

/* Stops the watcher, lets the handles close, checks that nothing is left
 * on the loop, and removes the temp folder. */
static void
fx_close(fx *f)
{
    cumod__watch_stop(f->w);
    f->w = NULL;
    f->stopped = 1;
    uv_close((uv_handle_t *)&f->deadline, NULL);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    cr_expect_eq(fx_nfds(), f->nfds, "descriptors left open");
    cr_expect_eq(uv_loop_close(&f->loop), 0, "handles left on the loop");
    th_rmtree(f->root);
    free(f->ev);
}

typedef int (*fx_pred)(const fx *f, const void *arg);

/* Runs the loop until pred holds or ms pass; returns whether it holds. A
 * NULL pred never holds: the loop runs ms, for what would come late. */
static int
fx_until(fx *f, fx_pred pred, const void *arg, int ms)
{
    f->expired = 0;
    uv_timer_start(&f->deadline, fx_on_deadline, (uint64_t)ms, 0);
    while (!(pred && pred(f, arg)) && !f->expired)
        uv_run(&f->loop, UV_RUN_ONCE);
    uv_timer_stop(&f->deadline);
    return pred && pred(f, arg);
}

static void
fx_settle(fx *f, int ms)
{
    fx_until(f, NULL, NULL, ms);
}

typedef struct ev_key {
    cumod_watch_event ev;
    const char *name; /* NULL: any */
} ev_key;

static size_t
fx_count(const fx *f, cumod_watch_event ev, const char *name)
{
    size_t c = 0;
    for (size_t i = 0; i < f->n; i++)
        if (f->ev[i].ev == ev && (name == NULL || !strcmp(f->ev[i].name, name)))
            c++;
    return c;
}

static int
fx_seen(const fx *f, const void *arg)
{
    const ev_key *k = arg;
    return fx_count(f, k->ev, k->name) > 0;
}

/* Waits up to ms for ev (on name, or any); returns whether it came. */
static int
fx_wait(fx *f, cumod_watch_event ev, const char *name, int ms)
{
    ev_key k = {ev, name};
    return fx_until(f, fx_seen, &k, ms);
}

static const char *const ev_names[] = {
    [CUMOD_WATCH_CHANGED] = "CHANGED",
    [CUMOD_WATCH_REMOVED] = "REMOVED",
    [CUMOD_WATCH_RESCAN] = "RESCAN",
    [CUMOD_WATCH_DEGRADED] = "DEGRADED",
};

/* What came, one event a line, for failure messages. */
static const char *
fx_dump(fx *f)
{
    size_t o = 0;
    f->dump[0] = '\0';
    for (size_t i = 0; i < f->n && o < sizeof(f->dump) - 64; i++)
        o += (size_t)snprintf(f->dump + o, sizeof(f->dump) - o, "\n  %s %s",
                              ev_names[f->ev[i].ev], f->ev[i].name);
    return f->dump;
}

/* Expects exactly the events given, in order, and nothing else. */
static void
fx_expect(fx *f, size_t n, const ev_key *want)
{
    cr_expect_eq(f->n, n, "%zu events expected, got %zu:%s", n, f->n,
                 fx_dump(f));
    for (size_t i = 0; i < n && i < f->n; i++) {
        cr_expect_eq(f->ev[i].ev, want[i].ev, "event %zu:%s", i, fx_dump(f));
        cr_expect_str_eq(f->ev[i].name, want[i].name ? want[i].name : "",
                         "event %zu:%s", i, fx_dump(f));
    }
}

static void
fx_clear(fx *f)
{
    f->n = 0;
}

static char *
in(const fx *f, const char *name, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s", f->dir, name);
    return buf;
}

/* Writes a file of len bytes in pieces of up to 1 KiB, then closes it. */
static void
write_file(const char *path, size_t len)
{
    char chunk[1024];
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    cr_assert(fd >= 0, "open %s: %s", path, strerror(errno));
    memset(chunk, 0x5a, sizeof(chunk));
    for (size_t off = 0; off < len; off += sizeof(chunk)) {
        size_t k = len - off < sizeof(chunk) ? len - off : sizeof(chunk);
        cr_assert_eq(write(fd, chunk, k), (ssize_t)k);
    }
    cr_assert_eq(close(fd), 0);
}

Test(watch, a_closed_write_is_one_changed, .timeout = 30)
{
    fx f;
    char p[FX_PATH];

    fx_open(&f);
    write_file(in(&f, "vadd.cubin", p, sizeof(p)), 3000);
    cr_expect(fx_wait(&f, CUMOD_WATCH_CHANGED, "vadd.cubin", 2000));
    fx_settle(&f, 200);
    fx_expect(&f, 1, (ev_key[]){{CUMOD_WATCH_CHANGED, "vadd.cubin"}});
    fx_close(&f);
}

typedef struct slow_writer {
    char path[FX_PATH];
    atomic_long closing;
} slow_writer;

static void *
slow_write(void *arg)
{
    slow_writer *s = arg;
    char chunk[4096];
    int fd = open(s->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

    memset(chunk, 0x7f, sizeof(chunk));
    for (int i = 0; fd >= 0 && i < 10; i++) {
        if (write(fd, chunk, sizeof(chunk)) != (ssize_t)sizeof(chunk))
            break;
        th_sleep_ms(20);
    }
    /* Set before close: the loop may see the close before this thread
     * runs again. A CHANGED before it would be one of the writes'. */
    atomic_store(&s->closing, 1);
    if (fd >= 0)
        close(fd);
    return NULL;
}

Test(watch, a_slow_writer_is_one_changed_after_close, .timeout = 30)
{
    fx f;
    slow_writer s = {.closing = 0};
    pthread_t t;

    fx_open(&f);
    in(&f, "slow.cubin", s.path, sizeof(s.path));
    f.probe = &s.closing;
    cr_assert_eq(pthread_create(&t, NULL, slow_write, &s), 0);
    cr_expect(fx_wait(&f, CUMOD_WATCH_CHANGED, "slow.cubin", 5000));
    pthread_join(t, NULL);
    fx_settle(&f, 200);
    fx_expect(&f, 1, (ev_key[]){{CUMOD_WATCH_CHANGED, "slow.cubin"}});
    if (f.n == 1)
        cr_expect_eq(f.ev[0].probe, 1, "CHANGED came before the close");
    fx_close(&f);
}

Test(watch, an_editor_save_by_rename_reports_the_target_only, .timeout = 30)
{
    fx f;
    char tmp[FX_PATH], dst[FX_PATH];

    fx_open(&f);
    write_file(in(&f, "vadd.cubin", dst, sizeof(dst)), 100);
    cr_expect(fx_wait(&f, CUMOD_WATCH_CHANGED, "vadd.cubin", 2000));
    fx_clear(&f);
    write_file(in(&f, ".vadd.cubin.tmp", tmp, sizeof(tmp)), 5000);
    cr_assert_eq(rename(tmp, dst), 0);
    cr_expect(fx_wait(&f, CUMOD_WATCH_CHANGED, "vadd.cubin", 2000));
    fx_settle(&f, 200);
    fx_expect(&f, 1, (ev_key[]){{CUMOD_WATCH_CHANGED, "vadd.cubin"}});
    fx_close(&f);
}

Test(watch, a_swap_file_save_reports_each_name_as_is, .timeout = 30)
{
    fx f;
    char tmp[FX_PATH], dst[FX_PATH];

    fx_open(&f);
    write_file(in(&f, "vadd.cubin.swp", tmp, sizeof(tmp)), 5000);
    cr_assert_eq(rename(tmp, in(&f, "vadd.cubin", dst, sizeof(dst))), 0);
    cr_expect(fx_wait(&f, CUMOD_WATCH_CHANGED, "vadd.cubin", 2000));
    fx_settle(&f, 200);
    fx_expect(&f, 3,
              (ev_key[]){{CUMOD_WATCH_CHANGED, "vadd.cubin.swp"},
                         {CUMOD_WATCH_REMOVED, "vadd.cubin.swp"},
                         {CUMOD_WATCH_CHANGED, "vadd.cubin"}});
    fx_close(&f);
}

Test(watch, dotfiles_and_new_folders_are_not_reported, .timeout = 30)
{
    fx f;
    char a[FX_PATH], b[FX_PATH];

    fx_open(&f);
    write_file(in(&f, ".hidden.cubin", a, sizeof(a)), 10);
    cr_assert_eq(rename(a, in(&f, ".other", b, sizeof(b))), 0);
    cr_assert_eq(unlink(b), 0);
    cr_assert_eq(mkdir(in(&f, "sub.cubin", a, sizeof(a)), 0755), 0);
    cr_assert_eq(symlink("x", in(&f, ".link", a, sizeof(a))), 0);
    fx_settle(&f, 300);
    fx_expect(&f, 0, NULL);
    fx_close(&f);
}

Test(watch, unlink_and_renames_out_are_removed_renames_in_changed,
     .timeout = 30)
{
    fx f;
    char out[FX_PATH], p[FX_PATH];

    fx_open(&f);
    snprintf(out, sizeof(out), "%s/staged.fatbin", f.root);
    write_file(out, 100);
    cr_assert_eq(rename(out, in(&f, "scale.fatbin", p, sizeof(p))), 0);
    cr_expect(fx_wait(&f, CUMOD_WATCH_CHANGED, "scale.fatbin", 2000));
    cr_assert_eq(rename(p, out), 0);
    cr_expect(fx_wait(&f, CUMOD_WATCH_REMOVED, "scale.fatbin", 2000));
    write_file(in(&f, "axpy.ptx", p, sizeof(p)), 10);
    cr_assert_eq(unlink(p), 0);
    cr_expect(fx_wait(&f, CUMOD_WATCH_REMOVED, "axpy.ptx", 2000));
    fx_settle(&f, 200);
    fx_expect(&f, 4,
              (ev_key[]){{CUMOD_WATCH_CHANGED, "scale.fatbin"},
                         {CUMOD_WATCH_REMOVED, "scale.fatbin"},
                         {CUMOD_WATCH_CHANGED, "axpy.ptx"},
                         {CUMOD_WATCH_REMOVED, "axpy.ptx"}});
    fx_close(&f);
}

Test(watch, symlinks_and_hard_links_are_changed_when_made, .timeout = 30)
{
    fx f;
    char a[FX_PATH], b[FX_PATH];

    fx_open(&f);
    cr_assert_eq(
        symlink("../elsewhere/vadd.cubin", in(&f, "vadd.cubin", a, sizeof(a))),
        0);
    cr_expect(fx_wait(&f, CUMOD_WATCH_CHANGED, "vadd.cubin", 2000));
    write_file(in(&f, "a.ptx", a, sizeof(a)), 10);
    cr_expect(fx_wait(&f, CUMOD_WATCH_CHANGED, "a.ptx", 2000));
    cr_assert_eq(link(a, in(&f, "b.ptx", b, sizeof(b))), 0);
    cr_expect(fx_wait(&f, CUMOD_WATCH_CHANGED, "b.ptx", 2000));
    fx_settle(&f, 200);
    fx_expect(&f, 3,
              (ev_key[]){{CUMOD_WATCH_CHANGED, "vadd.cubin"},
                         {CUMOD_WATCH_CHANGED, "a.ptx"},
                         {CUMOD_WATCH_CHANGED, "b.ptx"}});
    fx_close(&f);
}

/* One Kubernetes volume update: the payload in a new timestamped folder,
 * ..data_tmp pointing at it renamed over ..data, the old folder removed. */
static void
k8s_swap(fx *f, const char *stamp, const char *old)
{
    char p[FX_PATH], q[FX_PATH + 16];

    cr_assert_eq(mkdir(in(f, stamp, p, sizeof(p)), 0755), 0);
    snprintf(q, sizeof(q), "%s/vadd.cubin", p);
    write_file(q, 100);
    cr_assert_eq(symlink(stamp, in(f, "..data_tmp", p, sizeof(p))), 0);
    cr_assert_eq(rename(p, in(f, "..data", q, sizeof(q))), 0);
    if (old != NULL)
        th_rmtree(in(f, old, p, sizeof(p)));
}

Test(watch, a_kubernetes_data_swap_is_one_rescan, .timeout = 30)
{
    fx f;
    char p[FX_PATH];

    fx_open(&f);
    /* The first payload, and the visible name kubelet links to it. */
    k8s_swap(&f, "..2024_01_01_12_00_00.1", NULL);
    cr_assert_eq(
        symlink("..data/vadd.cubin", in(&f, "vadd.cubin", p, sizeof(p))), 0);
    cr_expect(fx_wait(&f, CUMOD_WATCH_RESCAN, NULL, 2000));
    fx_settle(&f, 200);
    /* The new link may be read with ..data and then goes into the rescan. */
    cr_expect_eq(fx_count(&f, CUMOD_WATCH_RESCAN, NULL), 1, "%s", fx_dump(&f));
    cr_expect_eq(fx_count(&f, CUMOD_WATCH_RESCAN, NULL) +
                     fx_count(&f, CUMOD_WATCH_CHANGED, "vadd.cubin"),
                 f.n, "%s", fx_dump(&f));
    fx_clear(&f);
    /* An update: the files change inside the folders, only ..data moves. */
    k8s_swap(&f, "..2024_01_02_12_00_00.2", "..2024_01_01_12_00_00.1");
    cr_expect(fx_wait(&f, CUMOD_WATCH_RESCAN, NULL, 2000));
    fx_settle(&f, 200);
    fx_expect(&f, 1, (ev_key[]){{CUMOD_WATCH_RESCAN, NULL}});
    fx_close(&f);
}

Test(watch, a_rescan_supersedes_the_events_read_with_it, .timeout = 30)
{
    fx f;
    char p[FX_PATH];

    fx_open(&f);
    /* All of it is queued before the loop reads: one read takes it all. */
    write_file(in(&f, "a.cubin", p, sizeof(p)), 10);
    k8s_swap(&f, "..2024_01_01_12_00_00.1", NULL);
    k8s_swap(&f, "..2024_01_02_12_00_00.2", "..2024_01_01_12_00_00.1");
    write_file(in(&f, "b.cubin", p, sizeof(p)), 10);
    cr_assert_eq(unlink(in(&f, "a.cubin", p, sizeof(p))), 0);
    fx_settle(&f, 300);
    fx_expect(&f, 1, (ev_key[]){{CUMOD_WATCH_RESCAN, NULL}});
    fx_close(&f);
}

typedef struct creator {
    const char *dir;
    int first, count;
    atomic_long *created; /* files closed so far, may be NULL */
} creator;

static void *
create_files(void *arg)
{
    const creator *c = arg;
    char p[FX_PATH];

    for (int i = c->first; i < c->first + c->count; i++) {
        snprintf(p, sizeof(p), "%s/f%05d.cubin", c->dir, i);
        int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd >= 0)
            close(fd);
        if (c->created)
            atomic_fetch_add(c->created, 1);
    }
    return NULL;
}

/* Every file is accounted for: reported, or found by a RESCAN's scan. */
static int
fx_all_seen(const fx *f, const void *arg)
{
    const atomic_long *created = arg;
    if (created != NULL && atomic_load(created) < f->nseen)
        return 0;
    return memchr(f->seen, 0, (size_t)f->nseen) == NULL;
}

Test(watch, a_queue_overflow_is_one_rescan, .timeout = 60)
{
    enum { NFILES = 50000 };
    fx f;
    pthread_t t[2];
    creator c[2];
    char *q = th_read_file("/proc/sys/fs/inotify/max_queued_events");

    cr_log_info("fs.inotify.max_queued_events = %s", q ? q : "?\n");
    free(q);
    fx_open_in(&f, FX_FAST_BASE);
    f.seen = calloc(NFILES, 1);
    f.nseen = NFILES;
    /* Two threads on two cores make them at once; the loop does not read
     * meanwhile, as a daemon busy elsewhere would not, so the kernel's
     * queue overflows (by default it holds 16384 events, two a file). */
    long t0 = (long)th_now_ms();
    for (int i = 0; i < 2; i++) {
        c[i] = (creator){f.dir, i * (NFILES / 2), NFILES / 2, NULL};
        cr_assert_eq(pthread_create(&t[i], NULL, create_files, &c[i]), 0);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    long t1 = (long)th_now_ms();
    cr_expect(fx_wait(&f, CUMOD_WATCH_RESCAN, NULL, 10000));
    fx_settle(&f, 200);
    cr_log_info("%d files made in %ld ms, RESCAN %ld ms later, %zu events",
                NFILES, t1 - t0, (long)th_now_ms() - t1 - 200, f.n);
    cr_expect_eq(fx_count(&f, CUMOD_WATCH_RESCAN, NULL), 1);
    for (size_t i = 0; i < f.n; i++)
        if (f.ev[i].ev == CUMOD_WATCH_RESCAN)
            cr_expect_geq(f.ev[i].overflows, 1,
                          "the RESCAN did not come of an overflow");
    cr_expect_eq(cumod__watch_overflows(f.w), 1);
    cr_expect_lt(fx_count(&f, CUMOD_WATCH_CHANGED, NULL), NFILES);
    cr_expect_eq(fx_count(&f, CUMOD_WATCH_CHANGED, NULL) + 1, f.n,
                 "only CHANGED and one RESCAN are expected");
    cr_expect(fx_all_seen(&f, NULL), "files lost in the overflow");
    free(f.seen);
    fx_close(&f);
}

Test(watch, under_load_no_file_is_lost, .timeout = 60)
{
    enum { NFILES = 20000 };
    fx f;
    pthread_t t;
    atomic_long created = 0;

    fx_open_in(&f, FX_FAST_BASE);
    f.seen = calloc(NFILES, 1);
    f.nseen = NFILES;
    creator c = {f.dir, 0, NFILES, &created};
    cr_assert_eq(pthread_create(&t, NULL, create_files, &c), 0);
    cr_expect(fx_until(&f, fx_all_seen, &created, 20000),
              "files neither reported nor found by a rescan");
    pthread_join(t, NULL);
    cr_log_info("%zu events, %zu RESCAN, %lu overflows", f.n,
                fx_count(&f, CUMOD_WATCH_RESCAN, NULL),
                cumod__watch_overflows(f.w));
    free(f.seen);
    fx_close(&f);
}

/* After the folder is back: the watcher is whole, on the folder now at the
 * path, and reports what happens in it. */
static void
expect_back_and_live(fx *f, const char *name)
{
    struct stat a, b;
    char p[FX_PATH];

    cr_expect_eq(cumod__watch_degraded(f->w), 0);
    int fd = cumod__watch_dirfd(f->w);
    cr_assert(fd >= 0);
    cr_assert_eq(fstat(fd, &a), 0);
    cr_assert_eq(stat(f->dir, &b), 0);
    cr_expect(a.st_dev == b.st_dev && a.st_ino == b.st_ino,
              "dirfd is not the folder now at the path");
    write_file(in(f, name, p, sizeof(p)), 10);
    cr_expect(fx_wait(f, CUMOD_WATCH_CHANGED, name, 2000),
              "nothing reported from the new folder:%s", fx_dump(f));
}

Test(watch, a_deleted_folder_degrades_and_comes_back, .timeout = 30)
{
    fx f;
    char p[FX_PATH];

    fx_open(&f);
    write_file(in(&f, "a.cubin", p, sizeof(p)), 10);
    cr_expect(fx_wait(&f, CUMOD_WATCH_CHANGED, "a.cubin", 2000));
    th_rmtree(f.dir);
    /* The kernel holds IN_DELETE_SELF back while the folder is open: the
     * liveness check finds it gone. */
    cr_assert(fx_wait(&f, CUMOD_WATCH_DEGRADED, NULL, 3000), "%s", fx_dump(&f));
    cr_expect_eq(cumod__watch_degraded(f.w), 1);
    cr_expect_eq(cumod__watch_dirfd(f.w), -1);
    cr_assert_eq(mkdir(f.dir, 0755), 0);
    long t0 = (long)th_now_ms();
    cr_assert(fx_wait(&f, CUMOD_WATCH_RESCAN, NULL, 3000), "%s", fx_dump(&f));
    cr_log_info("RESCAN %ld ms after the folder came back",
                (long)th_now_ms() - t0);
    expect_back_and_live(&f, "b.cubin");
    cr_expect_eq(fx_count(&f, CUMOD_WATCH_DEGRADED, NULL), 1);
    cr_expect_eq(fx_count(&f, CUMOD_WATCH_RESCAN, NULL), 1);
    fx_close(&f);
}

Test(watch, a_folder_moved_away_and_another_moved_in, .timeout = 30)
{
    fx f;
    char old[512], fresh[512], p[FX_PATH];

    fx_open(&f);
    snprintf(old, sizeof(old), "%s/kernels.old", f.root);
    snprintf(fresh, sizeof(fresh), "%s/kernels.new", f.root);
    cr_assert_eq(rename(f.dir, old), 0);
    /* IN_MOVE_SELF comes at once, well before the liveness check. */
    cr_expect(fx_wait(&f, CUMOD_WATCH_DEGRADED, NULL, 500), "%s", fx_dump(&f));
    snprintf(p, sizeof(p), "%s/stale.cubin", old);
    write_file(p, 10);
    cr_assert_eq(mkdir(fresh, 0755), 0);
    snprintf(p, sizeof(p), "%s/x.cubin", fresh);
    write_file(p, 10);
    cr_assert_eq(rename(fresh, f.dir), 0);
    cr_assert(fx_wait(&f, CUMOD_WATCH_RESCAN, NULL, 3000), "%s", fx_dump(&f));
    expect_back_and_live(&f, "y.cubin");
    fx_settle(&f, 200);
    fx_expect(&f, 3,
              (ev_key[]){{CUMOD_WATCH_DEGRADED, NULL},
                         {CUMOD_WATCH_RESCAN, NULL},
                         {CUMOD_WATCH_CHANGED, "y.cubin"}});
    fx_close(&f);
}

Test(watch, a_folder_renamed_over_is_followed, .timeout = 30)
{
    fx f;
    char fresh[512];

    fx_open(&f);
    snprintf(fresh, sizeof(fresh), "%s/kernels.new", f.root);
    cr_assert_eq(mkdir(fresh, 0755), 0);
    cr_assert_eq(rename(fresh, f.dir), 0); /* over the empty folder */
    cr_assert(fx_wait(&f, CUMOD_WATCH_DEGRADED, NULL, 3000), "%s", fx_dump(&f));
    cr_assert(fx_wait(&f, CUMOD_WATCH_RESCAN, NULL, 3000), "%s", fx_dump(&f));
    expect_back_and_live(&f, "z.cubin");
    fx_close(&f);
}

/* A release switch: the watched path is a symlink, repointed atomically. */
Test(watch, a_repointed_symlink_path_is_followed, .timeout = 30)
{
    fx f;
    char v1[512], v2[512], tmp[512], msg[512];

    fx_open(&f);
    cumod__watch_stop(f.w);
    snprintf(v1, sizeof(v1), "%s/v1", f.root);
    snprintf(v2, sizeof(v2), "%s/v2", f.root);
    snprintf(tmp, sizeof(tmp), "%s/kernels.tmp", f.root);
    cr_assert_eq(rename(f.dir, v1), 0);
    cr_assert_eq(symlink("v1", f.dir), 0);
    cr_assert_eq(cumod__watch_start(&f.loop, f.dir, fx_on_event, &f, &f.w, msg,
                                    sizeof(msg)),
                 CUMOD_OK, "%s", msg);
    cr_assert_eq(mkdir(v2, 0755), 0);
    cr_assert_eq(symlink("v2", tmp), 0);
    cr_assert_eq(rename(tmp, f.dir), 0);
    cr_assert(fx_wait(&f, CUMOD_WATCH_DEGRADED, NULL, 3000), "%s", fx_dump(&f));
    cr_assert(fx_wait(&f, CUMOD_WATCH_RESCAN, NULL, 3000), "%s", fx_dump(&f));
    expect_back_and_live(&f, "v2.cubin");
    fx_close(&f);
}

Test(watch, a_missing_folder_is_an_error_naming_it, .timeout = 30)
{
    uv_loop_t loop;
    char sentinel;
    cumod_watch *w = (cumod_watch *)&sentinel; /* must stay untouched */
    char root[256], p[FX_PATH], msg[512];
    int rc;

    th_tmpdir(root, sizeof(root));
    cr_assert_eq(uv_loop_init(&loop), 0);
    snprintf(p, sizeof(p), "%s/nope", root);
    rc = cumod__watch_start(&loop, p, fx_on_event, NULL, &w, msg, sizeof(msg));
    cr_expect_eq(rc, CUMOD_ENOENT, "%s", cumod_errname(rc));
    cr_expect(strstr(msg, p) != NULL, "message does not name %s: %s", p, msg);
    cr_expect_eq(w, (cumod_watch *)&sentinel);
    snprintf(p, sizeof(p), "%s/file", root);
    write_file(p, 1);
    rc = cumod__watch_start(&loop, p, fx_on_event, NULL, &w, msg, sizeof(msg));
    cr_expect_eq(rc, CUMOD_EINVAL, "%s", cumod_errname(rc));
    cr_expect(strstr(msg, p) != NULL, "message does not name %s: %s", p, msg);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_expect_eq(uv_loop_close(&loop), 0);
    cumod__watch_stop(NULL);
    th_rmtree(root);
}

Test(watch, stop_with_events_pending_reports_nothing, .timeout = 30)
{
    fx f;
    char p[FX_PATH];

    fx_open(&f);
    for (int i = 0; i < 100; i++) {
        snprintf(p, sizeof(p), "%s/p%d.cubin", f.dir, i);
        write_file(p, 10);
    }
    cumod__watch_stop(f.w);
    f.w = NULL;
    f.stopped = 1;
    fx_settle(&f, 100);
    fx_expect(&f, 0, NULL);
    fx_close(&f);
}

Test(watch, stop_inside_the_callback_ends_the_reports, .timeout = 30)
{
    fx f;
    char p[FX_PATH];

    fx_open(&f);
    f.stop_in_cb = 1;
    for (int i = 0; i < 10; i++) {
        snprintf(p, sizeof(p), "%s/s%d.cubin", f.dir, i);
        write_file(p, 10);
    }
    cr_expect(fx_wait(&f, CUMOD_WATCH_CHANGED, "s0.cubin", 2000));
    fx_settle(&f, 200);
    fx_expect(&f, 1, (ev_key[]){{CUMOD_WATCH_CHANGED, "s0.cubin"}});
    fx_close(&f);
}
