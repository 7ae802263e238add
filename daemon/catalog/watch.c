/* SPDX-License-Identifier: MIT */
/*
 * The kernel folder's watcher (see watch.h for what is reported when). One
 * inotify descriptor and one uv_poll live as long as the watcher; the
 * folder's watch and open descriptor come and go with the folder. One timer
 * serves both states: while the folder is watched it runs the liveness
 * check, while it is gone it runs the retries.
 */
#include "watch.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cumod/errors.h"
#include "common/log.h"

#define WATCH_MASK                                                             \
    (IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MOVED_FROM |    \
     IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK)
/* The events after which the folder's watch is gone or follows a folder
 * that is no longer at the path. IN_UNMOUNT and IN_IGNORED come unasked. */
#define WATCH_GONE (IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_IGNORED)
/* 64 KiB holds some 2000 events of short names; the kernel never splits an
 * event across reads, and one with the longest name takes 272 bytes. */
#define WATCH_BUF (64 * 1024)
/* Reads per wake-up: a folder that keeps changing must not starve the loop.
 * uv_poll is level-triggered, so what is left wakes the loop again. */
#define WATCH_READS_MAX 16

enum watch_state {
    WATCH_ACTIVE = 1, /* folder open and watched; the timer checks the path */
    WATCH_DEGRADED,   /* folder gone; the timer retries with backoff */
    WATCH_CLOSING,    /* stopped; the handles are closing */
};

struct cumod_watch {
    uv_poll_t poll; /* on ifd */
    uv_timer_t timer;
    cumod_watch_cb cb; /* may stop the watcher: check state after each */
    void *arg;
    enum watch_state state;
    int nhandles; /* handles initialized and not yet closed */
    int ifd;      /* the inotify instance, for the watcher's whole life */
    int wd;       /* the folder's watch; -1 while degraded */
    int dirfd;    /* the folder; -1 while degraded */
    dev_t dev;    /* the folder's identity, for the liveness check */
    ino_t ino;
    int rescan; /* a RESCAN is owed at the end of this wake-up */
    uint64_t retry_ms;
    int retry_err; /* the last retry failure logged, to log each once */
    unsigned long overflows;
    _Alignas(struct inotify_event) char buf[WATCH_BUF];
    char path[];
};

static void watch_on_timer(uv_timer_t *h);

/* errno, where it enters, as a cumod error. ENOSPC is inotify_add_watch's
 * fs.inotify.max_user_watches, EMFILE inotify_init1's max_user_instances. */
static int
watch_err(int e)
{
    if (e == ENOENT)
        return CUMOD_ENOENT;
    if (e == ENOTDIR || e == ELOOP || e == ENAMETOOLONG)
        return CUMOD_EINVAL;
    if (e == EACCES || e == EPERM)
        return CUMOD_EPERM;
    if (e == ENOMEM || e == ENOSPC || e == EMFILE || e == ENFILE)
        return CUMOD_ENOMEM;
    return CUMOD_EIO;
}

/* Opens the folder at the path and watches it. On success the descriptor,
 * watch and identity are stored in w; on failure w is untouched. */
static int
watch_attach(cumod_watch *w, char *msg, size_t msglen)
{
    char self[64];
    struct stat st;
    int fd, wd, e;

    fd = open(w->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        e = errno;
        snprintf(msg, msglen, "cannot open kernel folder %s: %s", w->path,
                 strerror(e));
        return watch_err(e);
    }
    if (fstat(fd, &st) != 0) {
        e = errno;
        goto fail;
    }
    /* Watch the folder just opened, not whatever the path names a moment
     * later: /proc/self/fd/N resolves to the open file itself. Without
     * /proc the path is used; if it was swapped in between, the liveness
     * check sees the mismatch and attaches again. */
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    wd = inotify_add_watch(w->ifd, self, WATCH_MASK);
    if (wd < 0 && errno == ENOENT)
        wd = inotify_add_watch(w->ifd, w->path, WATCH_MASK);
    if (wd < 0) {
        e = errno;
        goto fail;
    }
    w->dev = st.st_dev;
    w->ino = st.st_ino;
    w->wd = wd;
    w->dirfd = fd;
    return CUMOD_OK;

fail:
    close(fd);
    snprintf(msg, msglen, "cannot watch kernel folder %s: %s%s", w->path,
             strerror(e),
             e == ENOSPC ? " (raise fs.inotify.max_user_watches)" : "");
    return watch_err(e);
}

/* The folder is gone, or the path names another one: forget it, report
 * DEGRADED once, and look for it again with backoff. */
static void
watch_degrade(cumod_watch *w, const char *why)
{
    if (w->state != WATCH_ACTIVE)
        return;
    /* The kernel may have dropped the watch already (IN_IGNORED); then
     * this fails with EINVAL, which is fine. Events still queued for the
     * old watch are skipped by their descriptor. */
    if (w->wd >= 0)
        inotify_rm_watch(w->ifd, w->wd);
    w->wd = -1;
    if (w->dirfd >= 0)
        close(w->dirfd);
    w->dirfd = -1;
    w->state = WATCH_DEGRADED;
    w->rescan = 0; /* the RESCAN when it is back covers it */
    w->retry_ms = CUMOD_WATCH_RETRY_MIN_MS;
    w->retry_err = 0;
    /* The catalog logs what this means to the operator (CUMOD-DIR-GONE);
     * the kernel's reason is detail. */
    CUMOD_LOGD("CUMOD-WATCH-GONE",
               "kernel folder %s is gone (%s); looking for it again", w->path,
               why);
    uv_timer_start(&w->timer, watch_on_timer, w->retry_ms, 0);
    w->cb(w->arg, CUMOD_WATCH_DEGRADED, NULL);
}

/* The next whole record of buf[0..n) at *off. A record that does not fit
 * ends the buffer (the kernel never writes one; the caller rescans).
 * *name is NULL for events on the folder itself. */
static int
watch_next(const char *buf, size_t n, size_t *off, struct inotify_event *ev,
           const char **name)
{
    size_t left = n - *off;

    if (left < sizeof(*ev))
        return 0;
    memcpy(ev, buf + *off, sizeof(*ev)); /* no alignment assumed */
    if (ev->len > left - sizeof(*ev))
        return 0;
    *name = NULL;
    if (ev->len > 0) {
        const char *p = buf + *off + sizeof(*ev);
        if (p[0] != '\0' && memchr(p, '\0', ev->len) != NULL)
            *name = p;
    }
    *off += sizeof(*ev) + ev->len;
    return 1;
}

/* Whether buf holds anything that asks for a rescan: then its per-name
 * events are superseded by the scan that follows the RESCAN. */
static int
watch_buf_rescans(const cumod_watch *w, size_t n)
{
    struct inotify_event ev;
    const char *name;
    size_t off = 0;

    while (watch_next(w->buf, n, &off, &ev, &name)) {
        if (ev.mask & IN_Q_OVERFLOW)
            return 1;
        if (ev.wd == w->wd && name != NULL && strcmp(name, "..data") == 0)
            return 1;
    }
    return off != n; /* a short record: something was lost */
}

/* Whether a name just created is complete content: a symlink, or a hard
 * link to a file (neither is followed by a close event). A file being
 * written is reported at its IN_CLOSE_WRITE instead. */
static int
watch_created_whole(const cumod_watch *w, const char *name)
{
    struct stat st;

    if (fstatat(w->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return 0; /* gone already: its removal follows */
    return S_ISLNK(st.st_mode) || (S_ISREG(st.st_mode) && st.st_nlink > 1);
}

/* Reports the events of one read, in the kernel's order. */
static void
watch_dispatch(cumod_watch *w, size_t n)
{
    struct inotify_event ev;
    const char *name;
    size_t off = 0;

    if (!w->rescan && watch_buf_rescans(w, n))
        w->rescan = 1;
    while (w->state == WATCH_ACTIVE &&
           watch_next(w->buf, n, &off, &ev, &name)) {
        if (ev.mask & IN_Q_OVERFLOW) {
            w->overflows++;
            CUMOD_LOGD("CUMOD-WATCH-OVERFLOW",
                       "the inotify queue of %s overflowed (raise "
                       "fs.inotify.max_queued_events); rescanning",
                       w->path);
            continue;
        }
        if (ev.wd != w->wd)
            continue; /* a watch dropped earlier */
        if (ev.mask & WATCH_GONE) {
            watch_degrade(w, (ev.mask & IN_DELETE_SELF) ? "deleted"
                             : (ev.mask & IN_MOVE_SELF) ? "moved away"
                             : (ev.mask & IN_UNMOUNT)   ? "unmounted"
                                                        : "watch dropped");
            return;
        }
        if (w->rescan || name == NULL || name[0] == '.')
            continue;
        if (ev.mask & (IN_CLOSE_WRITE | IN_MOVED_TO))
            w->cb(w->arg, CUMOD_WATCH_CHANGED, name);
        else if (ev.mask & (IN_DELETE | IN_MOVED_FROM))
            w->cb(w->arg, CUMOD_WATCH_REMOVED, name);
        else if ((ev.mask & IN_CREATE) && !(ev.mask & IN_ISDIR) &&
                 watch_created_whole(w, name))
            w->cb(w->arg, CUMOD_WATCH_CHANGED, name);
    }
    if (w->state == WATCH_ACTIVE && off != n)
        CUMOD_LOGE("CUMOD-WATCH-FAIL",
                   "short inotify record at %zu of %zu bytes for %s; "
                   "rescanning",
                   off, n, w->path);
}

/* The inotify descriptor failed (it never does in practice): stop polling
 * and go through degraded mode, whose retry polls again. */
static void
watch_poll_failed(cumod_watch *w, const char *what, const char *err)
{
    CUMOD_LOGE("CUMOD-WATCH-FAIL", "%s: inotify %s failed: %s", w->path, what,
               err);
    uv_poll_stop(&w->poll);
    watch_degrade(w, "inotify failed");
}

static void
watch_on_poll(uv_poll_t *h, int status, int events)
{
    cumod_watch *w = h->data;

    (void)events;
    if (status < 0) {
        watch_poll_failed(w, "poll", uv_strerror(status));
        return;
    }
    for (int i = 0; i < WATCH_READS_MAX; i++) {
        ssize_t n = read(w->ifd, w->buf, sizeof(w->buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        if (n <= 0) {
            watch_poll_failed(w, "read", n < 0 ? strerror(errno) : "EOF");
            return;
        }
        /* While degraded the queue is drained and dropped: what it held
         * is covered by the RESCAN when the folder is back. */
        if (w->state == WATCH_ACTIVE)
            watch_dispatch(w, (size_t)n);
        if (w->state == WATCH_CLOSING)
            return;
    }
    if (w->rescan && w->state == WATCH_ACTIVE) {
        w->rescan = 0;
        w->cb(w->arg, CUMOD_WATCH_RESCAN, NULL);
    }
}

/* DEGRADED: one try to find the folder at the path again. */
static void
watch_retry(cumod_watch *w)
{
    char msg[PATH_MAX + 128];
    int err;

    if ((err = watch_attach(w, msg, sizeof(msg))) != CUMOD_OK) {
        /* The folder not being there is what degraded mode expects; any
         * other reason is logged, once while it lasts. */
        if (err != CUMOD_ENOENT && err != w->retry_err)
            CUMOD_LOGW("CUMOD-WATCH-RETRY", "%s", msg);
        w->retry_err = err;
        w->retry_ms *= 2;
        if (w->retry_ms > CUMOD_WATCH_RETRY_MAX_MS)
            w->retry_ms = CUMOD_WATCH_RETRY_MAX_MS;
        uv_timer_start(&w->timer, watch_on_timer, w->retry_ms, 0);
        return;
    }
    w->state = WATCH_ACTIVE;
    /* Polls again after a poll failure; that can only fail when another
     * handle polls the same descriptor. */
    if (!uv_is_active((uv_handle_t *)&w->poll))
        uv_poll_start(&w->poll, UV_READABLE, watch_on_poll);
    uv_timer_start(&w->timer, watch_on_timer, CUMOD_WATCH_CHECK_MS,
                   CUMOD_WATCH_CHECK_MS);
    CUMOD_LOGD("CUMOD-WATCH-BACK", "kernel folder %s is back; rescanning",
               w->path);
    w->cb(w->arg, CUMOD_WATCH_RESCAN, NULL);
}

/* ACTIVE: does the path still name the folder being watched? The kernel
 * holds IN_DELETE_SELF back while the folder is open (as it is, for the
 * catalog), and says nothing of mounts or renames above it. */
static void
watch_check(cumod_watch *w)
{
    struct stat st;
    char why[96];

    if (stat(w->path, &st) != 0) {
        snprintf(why, sizeof(why), "the path: %s", strerror(errno));
        watch_degrade(w, why);
    } else if (!S_ISDIR(st.st_mode) || st.st_dev != w->dev ||
               st.st_ino != w->ino) {
        watch_degrade(w, "the path names another folder now");
    }
}

static void
watch_on_timer(uv_timer_t *h)
{
    cumod_watch *w = h->data;

    switch (w->state) {
    case WATCH_ACTIVE:
        watch_check(w);
        break;
    case WATCH_DEGRADED:
        watch_retry(w);
        break;
    case WATCH_CLOSING:
        break;
    }
}

static void
watch_free(cumod_watch *w)
{
    if (w->ifd >= 0)
        close(w->ifd);
    if (w->dirfd >= 0)
        close(w->dirfd);
    free(w);
}

static void
watch_on_close(uv_handle_t *h)
{
    cumod_watch *w = h->data;

    if (--w->nhandles == 0)
        watch_free(w);
}

/* Stops everything now; frees in the last close callback, or at once when
 * no handle was made yet (a half-built watcher). */
static void
watch_close(cumod_watch *w)
{
    w->state = WATCH_CLOSING;
    if (w->nhandles == 0) {
        watch_free(w);
        return;
    }
    uv_close((uv_handle_t *)&w->poll, watch_on_close);
    uv_close((uv_handle_t *)&w->timer, watch_on_close);
}

cumod_err
cumod__watch_start(uv_loop_t *loop, const char *path, cumod_watch_cb cb,
                   void *arg, cumod_watch **out, char *msg, size_t msglen)
{
    cumod_watch *w;
    char none[1];
    size_t len;
    int err, rv;

    if (msg == NULL) {
        msg = none;
        msglen = sizeof(none);
    }
    if (loop == NULL || path == NULL || cb == NULL || out == NULL) {
        snprintf(msg, msglen, "watch: missing argument");
        return CUMOD_EINVAL;
    }
    len = strlen(path);
    if (len == 0 || len >= PATH_MAX) {
        snprintf(msg, msglen, "kernel folder path is empty or too long");
        return CUMOD_EINVAL;
    }
    if ((w = calloc(1, sizeof(*w) + len + 1)) == NULL) {
        snprintf(msg, msglen, "out of memory watching %s", path);
        return CUMOD_ENOMEM;
    }
    memcpy(w->path, path, len + 1);
    w->cb = cb;
    w->arg = arg;
    w->wd = w->dirfd = -1;
    w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->ifd < 0) {
        int e = errno;
        snprintf(msg, msglen, "cannot watch kernel folder %s: inotify: %s%s",
                 path, strerror(e),
                 e == EMFILE ? " (raise fs.inotify.max_user_instances)" : "");
        err = watch_err(e);
        goto fail;
    }
    if ((err = watch_attach(w, msg, msglen)) != CUMOD_OK)
        goto fail;
    /* uv_poll_init leaves nothing to close when it fails. */
    if ((rv = uv_poll_init(loop, &w->poll, w->ifd)) != 0) {
        snprintf(msg, msglen, "cannot poll inotify for %s: %s", path,
                 uv_strerror(rv));
        err = CUMOD_EIO;
        goto fail;
    }
    /* Nothing fails from here: uv_timer_init cannot, and uv_poll_start
     * only when another handle polls the descriptor, which uv_poll_init
     * has just ruled out. */
    uv_timer_init(loop, &w->timer);
    w->poll.data = w->timer.data = w;
    w->nhandles = 2;
    w->state = WATCH_ACTIVE;
    uv_poll_start(&w->poll, UV_READABLE, watch_on_poll);
    uv_timer_start(&w->timer, watch_on_timer, CUMOD_WATCH_CHECK_MS,
                   CUMOD_WATCH_CHECK_MS);
    *out = w;
    return CUMOD_OK;

fail:
    watch_close(w);
    return err;
}

int
cumod__watch_dirfd(const cumod_watch *w)
{
    return w->dirfd;
}

int
cumod__watch_degraded(const cumod_watch *w)
{
    return w->state == WATCH_DEGRADED;
}

unsigned long
cumod__watch_overflows(const cumod_watch *w)
{
    return w->overflows;
}

void
cumod__watch_stop(cumod_watch *w)
{
    if (w == NULL || w->state == WATCH_CLOSING)
        return;
    watch_close(w);
}
