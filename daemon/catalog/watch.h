/* SPDX-License-Identifier: MIT */
/*
 * The kernel folder's watcher: a raw inotify descriptor under uv_poll on the
 * folder (libuv's uv_fs_event never reports IN_CLOSE_WRITE and drops
 * IN_Q_OVERFLOW), turned into four events the catalog acts on.
 *
 * What the kernel says, and what is reported (names starting with '.' are
 * never reported; every other name is reported as is, the catalog filters):
 *
 *   IN_CLOSE_WRITE, IN_MOVED_TO          CHANGED name
 *   IN_CREATE of a symlink, or of a      CHANGED name (symlink(2) and link(2)
 *     hard link (a non-directory with      make a complete name at once and
 *     more than one link)                  no close event ever follows)
 *   IN_CREATE of anything else           nothing: a file being written is
 *                                          reported at its IN_CLOSE_WRITE; a
 *                                          new directory is not content
 *   IN_DELETE, IN_MOVED_FROM             REMOVED name
 *   any event on "..data"                RESCAN (Kubernetes swaps the volume
 *                                          by renaming ..data_tmp over ..data;
 *                                          the new files live in a folder
 *                                          inotify does not see into.
 *                                          "..data_tmp" itself is ignored:
 *                                          until the rename the old content
 *                                          is still the current one)
 *   IN_Q_OVERFLOW                        RESCAN
 *   IN_DELETE_SELF, IN_MOVE_SELF,        DEGRADED, then RESCAN once the path
 *     IN_UNMOUNT, IN_IGNORED, or the       opens as a folder again
 *     liveness check (below) failing
 *
 * RESCANs are coalesced: one is reported after the events drained in one
 * wake-up, and a rescan found in a read buffer drops that buffer's per-name
 * events and all later ones of the wake-up (the scan that follows sees them).
 *
 * Hazard: the watcher holds the folder open (the catalog reads through
 * cumod__watch_dirfd), and while any descriptor of it is open the kernel
 * holds IN_DELETE_SELF back until the last one is closed; a plain umount
 * fails (EBUSY) and a lazy one says nothing. So a liveness check runs every
 * CUMOD_WATCH_CHECK_MS: when the path no longer names the folder being
 * watched (deleted, renamed over, a file system mounted or lazily unmounted
 * over it, a symlink on the path repointed, a parent renamed), the watcher
 * degrades. It follows the path, never the inode: a folder moved elsewhere
 * is forgotten. A relative path is resolved at each check and retry.
 * A folder moved away (IN_MOVE_SELF) is noticed at once; one deleted while
 * open, within CUMOD_WATCH_CHECK_MS.
 *
 * Queue: IN_CREATE is asked for (for symlinks), so a new file takes two
 * entries of the kernel's queue; the default fs.inotify.max_queued_events
 * (16384) holds some 8000 new files' events before it overflows into a
 * RESCAN.
 *
 * Not seen: a file made with O_TMPFILE and linkat(2) gives only an IN_CREATE
 * with one link and no close event on its name, so it is not reported until
 * the next RESCAN; writers should write a temporary name and rename it.
 *
 * Everything here runs on the loop thread. Nothing waits beyond a few
 * system calls on the folder's path (open, stat, fstatat), which block only
 * when its file system does (a hung network mount).
 */
#ifndef CUMOD_WATCH_H
#define CUMOD_WATCH_H

#include <stddef.h>
#include <uv.h>

#include "cumod/errors.h"

/* How often the liveness check runs while the folder is watched. */
#define CUMOD_WATCH_CHECK_MS 1000
/* The retry backoff while the folder is gone: first and last delay. */
#define CUMOD_WATCH_RETRY_MIN_MS 100
#define CUMOD_WATCH_RETRY_MAX_MS 5000

typedef enum cumod_watch_event {
    CUMOD_WATCH_CHANGED = 1, /* name has new content (IN_CLOSE_WRITE,
                                IN_MOVED_TO, a new symlink or hard link) */
    CUMOD_WATCH_REMOVED,     /* name is gone (IN_DELETE, IN_MOVED_FROM) */
    CUMOD_WATCH_RESCAN,      /* the folder must be scanned whole: overflow,
                                ..data swap, or the folder is back after
                                being gone; name is NULL */
    CUMOD_WATCH_DEGRADED,    /* the folder is gone (deleted, moved,
                                unmounted, replaced); the watcher retries with
                                backoff (100 ms doubling to 5 s) and sends
                                RESCAN when it is back; name is NULL */
} cumod_watch_event;

/* Called on the loop thread, in the order the kernel gave the events. name
 * is borrowed for the call (a name inside the folder, never a path). The
 * callback may call cumod__watch_stop; nothing is reported after that. */
typedef void (*cumod_watch_cb)(void *arg, cumod_watch_event ev,
                               const char *name);

typedef struct cumod_watch cumod_watch;

/* Starts watching path on loop: opens the folder (O_RDONLY|O_DIRECTORY|
 * O_CLOEXEC, for openat and fdopendir), an inotify descriptor
 * (IN_NONBLOCK|IN_CLOEXEC) with a watch on that very folder for
 * IN_CLOSE_WRITE|IN_MOVED_TO|IN_CREATE|IN_DELETE|IN_MOVED_FROM|
 * IN_DELETE_SELF|IN_MOVE_SELF with IN_ONLYDIR|IN_EXCL_UNLINK (events of
 * names already unlinked are not wanted), polled with uv_poll, and the
 * liveness check's timer. path is copied.
 *
 * Does not scan: the caller scans after this returns. Every change made
 * after the watch was added is reported, so nothing falls between the two
 * (a change may be seen by both).
 *
 * Errors (a sentence naming the path goes into msg, which may be NULL;
 * *out is written only on success, and nothing is left on the loop):
 * CUMOD_EINVAL for bad arguments or a path that is not a folder,
 * CUMOD_ENOENT when the folder does not exist (that is not degraded mode),
 * CUMOD_EPERM when it may not be read, CUMOD_ENOMEM when memory or the
 * inotify limits (fs.inotify.max_user_instances, max_user_watches) run
 * out, CUMOD_EIO otherwise. The watcher is owned by the caller until
 * cumod__watch_stop. Loop thread; waits only on the file system. */
cumod_err cumod__watch_start(uv_loop_t *loop, const char *path,
                             cumod_watch_cb cb, void *arg, cumod_watch **out,
                             char *msg, size_t msglen);

/* The folder's open descriptor for openat and fdopendir (dup it before
 * fdopendir, which takes ownership), or -1 while degraded. Owned by the
 * watcher: never close it. It changes when the folder comes back, so fetch
 * it again after each RESCAN rather than keeping it. Loop thread. */
int cumod__watch_dirfd(const cumod_watch *w);

/* 1 while the folder is gone and being watched for again, else 0. Loop
 * thread. */
int cumod__watch_degraded(const cumod_watch *w);

/* How many times the kernel's event queue overflowed (IN_Q_OVERFLOW) since
 * start: each cost a RESCAN. For logs and tests. Loop thread. */
unsigned long cumod__watch_overflows(const cumod_watch *w);

/* Stops and frees: no callback runs after this returns. The handles are
 * closed and the memory and descriptors are released in the last uv close
 * callback, so the loop must run once more before uv_loop_close. May be
 * called from inside the watcher's own callback. Accepts NULL. Loop thread;
 * does not block. */
void cumod__watch_stop(cumod_watch *w);

#endif
