/* SPDX-License-Identifier: MIT */
/*
 * Holding work and loads (fakecuda.h: CUMOD_FAKE_HOLD, CUMOD_FAKE_LOAD_HOLD,
 * fakecuda_hold, fakecuda_hold_functions, fakecuda_hold_loads).
 *
 * The hold file is read again on every completion pass: a missing file
 * holds nothing, one without names holds all work, one with names holds the
 * launches of those functions. Another process writes it while this one
 * runs, so a pass may see it half written; a test that replaces its names
 * should write a new file and rename it over the old one.
 */
#include "fake.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { HOLD_FILE_MAX = 1 << 20 };

void
fake_names_fini(fake_names *names)
{
    free(names->buf);
    *names = (fake_names){NULL, 0, 0};
}

static int
hold_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' ||
           c == '\v';
}

/* Splits text[0..len) at `sep` into names, each trimmed of white space;
 * empty ones are skipped. */
static int
hold_names_parse(fake_names *out, const char *text, size_t len, char sep)
{
    fake_names names = {malloc(len + 1), 0, 0};
    if (names.buf == NULL)
        return -1;
    for (size_t at = 0; at < len;) {
        const char *end = memchr(text + at, sep, len - at);
        size_t stop = end != NULL ? (size_t)(end - text) : len, b = at;
        size_t e = stop;
        while (b < e && hold_space(text[b]))
            b++;
        while (e > b && hold_space(text[e - 1]))
            e--;
        if (e > b) {
            memcpy(names.buf + names.len, text + b, e - b);
            names.len += e - b;
            names.buf[names.len++] = '\0';
            names.n++;
        }
        at = stop + 1;
    }
    fake_names_fini(out);
    *out = names;
    return 0;
}

int
fake_names_set_list(fake_names *names, const char *list, char sep)
{
    if (list == NULL) {
        fake_names_fini(names);
        return 0;
    }
    return hold_names_parse(names, list, strlen(list), sep);
}

static int
hold_names_has(const fake_names *names, const char *name)
{
    const char *p = names->buf;
    for (size_t i = 0; i < names->n; i++) {
        if (strcmp(p, name) == 0)
            return 1;
        p += strlen(p) + 1;
    }
    return 0;
}

/* The file's bytes (up to HOLD_FILE_MAX), or NULL with *exists 0 if it is
 * not there. A file that exists but cannot be read holds all work. */
static char *
hold_read(const char *path, int *exists, size_t *len)
{
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    *exists = fd >= 0 || errno != ENOENT;
    if (fd < 0)
        return NULL;
    struct stat sb;
    char *buf = NULL;
    size_t want = 0;
    if (fstat(fd, &sb) == 0 && sb.st_size > 0)
        want = sb.st_size < HOLD_FILE_MAX ? (size_t)sb.st_size : HOLD_FILE_MAX;
    if (want > 0 && (buf = malloc(want)) != NULL) {
        while (*len < want) {
            ssize_t r = read(fd, buf + *len, want - *len);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            *len += (size_t)r;
        }
    }
    close(fd);
    return buf;
}

void
fake_hold_refresh(fake_state *st)
{
    fake_hold *h = &st->hold;
    h->file_exists = 0;
    if (h->path != NULL) {
        size_t len;
        char *text = hold_read(h->path, &h->file_exists, &len);
        /* Split the names again only when the bytes changed. */
        if (text != NULL &&
            (len != h->file_len || memcmp(text, h->file_text, len) != 0) &&
            hold_names_parse(&h->file_fn, text, len, '\n') == 0) {
            free(h->file_text);
            h->file_text = text;
            h->file_len = len;
            text = NULL;
        } else if (text == NULL && h->file_exists && h->file_len > 0) {
            free(h->file_text);
            h->file_text = NULL;
            h->file_len = 0;
            fake_names_fini(&h->file_fn);
        }
        free(text);
    }
    h->all = h->api || (h->file_exists && h->file_fn.n == 0);
}

int
fake_hold_blocks(const fake_state *st, const fake_work *w)
{
    const fake_hold *h = &st->hold;
    if (h->all)
        return 1;
    if (w->kind != FAKE_WORK_LAUNCH && w->kind != FAKE_WORK_CALL)
        return 0;
    return hold_names_has(&h->api_fn, w->name) ||
           (h->file_exists && hold_names_has(&h->file_fn, w->name));
}

static int
hold_loads(fake_state *st)
{
    return st->hold.load_api || (st->hold.load_path != NULL &&
                                 access(st->hold.load_path, F_OK) == 0);
}

void
fake_load_hold_wait(fake_state *st, const char *call)
{
    if (!hold_loads(st))
        return;
    struct timespec t0, t1, nap = {0, 5 * 1000 * 1000};
    uint64_t epoch = st->epoch;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* Said at once too, so that a test can tell a load is waiting now. */
    fake_log(st, "load-waiting call=%s", call);
    /* The lock is released while asleep, so other threads' launches,
     * queries and synchronizes go on, as they do during a real JIT. */
    do {
        fake_unlock(st);
        nanosleep(&nap, NULL);
        pthread_mutex_lock(&st->lock);
    } while (st->epoch == epoch && hold_loads(st));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long ms = (long)(t1.tv_sec - t0.tv_sec) * 1000 +
              (t1.tv_nsec - t0.tv_nsec) / 1000000;
    fake_log(st, "load-held call=%s ms=%ld", call, ms);
}

void
fake_copy_hold_wait(fake_state *st)
{
    struct timespec nap = {0, 1000 * 1000};
    uint64_t epoch = st->epoch;
    if (st->hold.copy_path == NULL || access(st->hold.copy_path, F_OK) != 0)
        return;
    fake_log(st, "copy-waiting");
    do {
        fake_unlock(st);
        nanosleep(&nap, NULL);
        pthread_mutex_lock(&st->lock);
    } while (st->epoch == epoch && access(st->hold.copy_path, F_OK) == 0);
}

int
fake_event_hold_on(fake_state *st)
{
    return st->hold.event_path != NULL &&
           access(st->hold.event_path, F_OK) == 0;
}

void
fake_hold_fini(fake_hold *h)
{
    fake_names_fini(&h->api_fn);
    fake_names_fini(&h->file_fn);
    free(h->file_text);
    free(h->path);
    free(h->load_path);
    free(h->copy_path);
    free(h->event_path);
    *h = (fake_hold){.api = 0};
}
