/* SPDX-License-Identifier: MIT */
/*
 * Module image files: names, and reading one into a sealed memfd. Opening
 * it safely is image_open.c; the header checks are image_check.c and
 * image_ptx.c.
 */
#include "image.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include "cumod/errors.h"
#include "common/sha256.h"
#include "common/status.h"

/* The most sendfile(2) is asked for at once (it moves at most 2 GiB - 4 KiB
 * per call anyway). */
#define IMAGE_CHUNK ((size_t)1 << 30)

/* Room for "<dirpath>/<name>" in messages; a longer one is cut short. */
#define IMAGE_PATH_CAP (PATH_MAX + 256)

static const struct {
    const char *ext;
    size_t len;
    cumod_image_kind kind;
} image_exts[] = {
    {".cubin", 6, CUMOD_IMAGE_CUBIN},
    {".fatbin", 7, CUMOD_IMAGE_FATBIN},
    {".cu", 3, CUMOD_IMAGE_CU},
    {".ptx", 4, CUMOD_IMAGE_PTX},
};

const char *
cumod__image_kind_name(cumod_image_kind k)
{
    switch (k) {
    case CUMOD_IMAGE_CUBIN:
        return "cubin";
    case CUMOD_IMAGE_FATBIN:
        return "fatbin";
    case CUMOD_IMAGE_CU:
        return "cu";
    case CUMOD_IMAGE_PTX:
        return "ptx";
    }
    return "?";
}

static int
image_stem_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

int
cumod__image_name(const char *name, char stem[CUMOD_IMAGE_NAME_MAX + 1],
                  cumod_image_kind *kind)
{
    /* The longest extension is ".fatbin"; anything longer than the longest
     * stem plus it is refused before its end is looked at. */
    size_t cap = CUMOD_IMAGE_NAME_MAX + 7;
    size_t n, s, i, e;

    if (name == NULL || stem == NULL || kind == NULL || name[0] == '.')
        return 0;
    n = strnlen(name, cap + 1);
    if (n > cap)
        return 0;
    for (e = 0; e < sizeof(image_exts) / sizeof(image_exts[0]); e++) {
        if (n > image_exts[e].len &&
            memcmp(name + n - image_exts[e].len, image_exts[e].ext,
                   image_exts[e].len) == 0)
            break;
    }
    if (e == sizeof(image_exts) / sizeof(image_exts[0]))
        return 0;
    s = n - image_exts[e].len;
    if (s < 1 || s > CUMOD_IMAGE_NAME_MAX)
        return 0;
    for (i = 0; i < s; i++)
        if (!image_stem_char(name[i]))
            return 0;
    memcpy(stem, name, s);
    stem[s] = '\0';
    *kind = image_exts[e].kind;
    return 1;
}

int
cumod__opts_name(const char *name, char stem[CUMOD_IMAGE_NAME_MAX + 1],
                 cumod_opts_kind *which)
{
    static const struct {
        const char *ext;
        size_t len;
        cumod_opts_kind which;
    } exts[] = {{".ptx.opts", 9, CUMOD_OPTS_PTX},
                {".cu.opts", 8, CUMOD_OPTS_CU}};
    size_t n;

    if (name == NULL || stem == NULL || which == NULL || name[0] == '.')
        return 0;
    n = strnlen(name, CUMOD_IMAGE_NAME_MAX + 10);
    for (size_t e = 0; e < sizeof(exts) / sizeof(exts[0]); e++) {
        if (n <= exts[e].len ||
            memcmp(name + n - exts[e].len, exts[e].ext, exts[e].len) != 0)
            continue;
        size_t s = n - exts[e].len;
        if (s > CUMOD_IMAGE_NAME_MAX)
            return 0;
        for (size_t i = 0; i < s; i++)
            if (!image_stem_char(name[i]))
                return 0;
        memcpy(stem, name, s);
        stem[s] = '\0';
        *which = exts[e].which;
        return 1;
    }
    return 0;
}

/* Copies in to the memfd out with sendfile, so the bytes never pass through
 * a buffer of ours. (copy_file_range would as well, but since Linux 5.19 it
 * refuses most pairs of different file systems with EXDEV, and a memfd is
 * always on another one.) It asks for one byte past the cap, so that a file
 * growing while it is read is refused rather than cut. A file shrinking
 * meanwhile yields what was there: the content hash names exactly that, and
 * the watcher's next event brings a new read. */
static int
image_copy(int in, int out, size_t max_size, const char *path, size_t *lenp,
           char *msg, size_t msglen)
{
    size_t total = 0, room, want;
    ssize_t n;

    for (;;) {
        room = max_size - total;
        want = room < IMAGE_CHUNK ? room + 1 : IMAGE_CHUNK;
        n = sendfile(out, in, NULL, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return cumod__image_errno(errno, path, "read", msg, msglen);
        if (n == 0)
            break;
        total += (size_t)n;
        if (total > max_size) {
            cumod__msgf(msg, msglen,
                        "%s grew past the size cap of %zu bytes while being "
                        "read",
                        path, max_size);
            return CUMOD_ETOOBIG;
        }
    }
    *lenp = total;
    return CUMOD_OK;
}

cumod_err
cumod__image_read(int dirfd, const char *dirpath, const char *name,
                  size_t max_size, unsigned dev_major, unsigned dev_minor,
                  cumod_image *out, char *msg, size_t msglen)
{
    cumod_image img = CUMOD_IMAGE_INIT;
    char path[IMAGE_PATH_CAP], stem[CUMOD_IMAGE_NAME_MAX + 1];
    char memname[CUMOD_IMAGE_NAME_MAX + 16];
    uint64_t size;
    size_t len = 0;
    int fd = -1, mfd = -1, rc;

    if (dirpath == NULL || name == NULL || out == NULL) {
        cumod__msgf(msg, msglen, "cumod__image_read: a NULL argument");
        return CUMOD_EINVAL;
    }
    snprintf(path, sizeof(path), "%s/%s", dirpath, name);
    if (!cumod__image_name(name, stem, &img.kind)) {
        cumod__msgf(msg, msglen,
                    "%s is not a module image name (*.cubin, *.fatbin, *.cu "
                    "or *.ptx, the stem of 1 to 128 of A-Z a-z 0-9 _ . -)",
                    path);
        return CUMOD_EINVAL;
    }
    if (max_size == 0)
        max_size = CUMOD_IMAGE_MAX_SIZE_DEFAULT;

    rc = cumod__image_open(dirfd, dirpath, name, CUMOD_IMAGE_RESOLVE_AUTO, &fd,
                           &size, msg, msglen);
    if (rc != CUMOD_OK)
        goto fail;
    rc = CUMOD_ETOOBIG;
    if (size > max_size) {
        cumod__msgf(msg, msglen,
                    "%s is %llu bytes, over the size cap of %zu bytes", path,
                    (unsigned long long)size, max_size);
        goto fail;
    }
    snprintf(memname, sizeof(memname), "cumod:%s", name);
    mfd = memfd_create(memname, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (mfd < 0) {
        rc = cumod__image_errno(errno, path, "memfd_create", msg, msglen);
        goto fail;
    }
    rc = image_copy(fd, mfd, max_size, path, &len, msg, msglen);
    if (rc != CUMOD_OK)
        goto fail;
    close(fd);
    fd = -1;
    rc = cumod__image_from_memfd(mfd, len, img.kind, path, dev_major, dev_minor,
                                 out, msg, msglen);
    if (rc == CUMOD_OK)
        return CUMOD_OK;
    mfd = -1; /* closed by cumod__image_from_memfd */
fail:
    if (mfd >= 0)
        close(mfd);
    if (fd >= 0)
        close(fd);
    return rc;
}

cumod_err
cumod__image_from_memfd(int mfd, size_t len, cumod_image_kind kind,
                        const char *path, unsigned dev_major,
                        unsigned dev_minor, cumod_image *out, char *msg,
                        size_t msglen)
{
    cumod_image img = CUMOD_IMAGE_INIT;
    void *map = MAP_FAILED;
    cumod_err rc = CUMOD_EIMAGE;

    img.kind = kind;
    if (len == 0) {
        cumod__msgf(msg, msglen, "%s is empty", path);
        goto fail;
    }
    /* (A memfd sealed already, an image kept from before, stays so.) */
    const int seals = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL;
    if ((fcntl(mfd, F_GET_SEALS) & seals) != seals &&
        fcntl(mfd, F_ADD_SEALS, seals) != 0) {
        rc = cumod__image_errno(errno, path, "sealing its memfd", msg, msglen);
        goto fail;
    }
    map = mmap(NULL, len, PROT_READ, MAP_SHARED, mfd, 0);
    if (map == MAP_FAILED) {
        rc = cumod__image_errno(errno, path, "mapping its memfd", msg, msglen);
        goto fail;
    }
    if (cumod__sha256(map, len, img.sha256) != 0) {
        cumod__msgf(msg, msglen, "%s: SHA-256 failed", path);
        rc = CUMOD_EINTERNAL;
        goto fail;
    }
    cumod__sha256_hex(img.sha256, img.sha256_hex);
    rc = cumod__image_check(map, len, img.kind, path, dev_major, dev_minor,
                            &img.sm_major, &img.sm_minor, &img.arch_specific,
                            msg, msglen);
    if (rc != CUMOD_OK)
        goto fail;
    img.fd = mfd;
    img.bytes = map;
    img.len = len;
    *out = img;
    return CUMOD_OK;
fail:
    if (map != MAP_FAILED)
        munmap(map, len);
    close(mfd);
    return rc;
}

void
cumod__image_fini(cumod_image *img)
{
    if (img == NULL)
        return;
    if (img->bytes != NULL) {
        munmap((void *)img->bytes, img->len);
        if (img->fd >= 0)
            close(img->fd);
    }
    *img = (cumod_image)CUMOD_IMAGE_INIT;
}
