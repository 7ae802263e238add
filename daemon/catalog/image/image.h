/* SPDX-License-Identifier: MIT */
/*
 * Kernel image files: which names in the kernel folder are module images,
 * and reading one safely. A file is opened beneath the folder (a symlink is
 * followed only where it resolves inside it: the Kubernetes volume layout
 * name -> ..data/name), must be a regular file under a size cap, is copied
 * whole into a sealed memfd, hashed (SHA-256, mbedtls) and its header checked
 * against the device's SM before anything reaches the driver. The executor
 * then loads the module from that memfd, never from the path.
 *
 * Nothing here keeps state between calls: every function may be called from
 * any thread, and two threads may read the same file at once.
 */
#ifndef CUMOD_IMAGE_H
#define CUMOD_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "cumod/errors.h"

/* The kinds of image, in order of preference when one module has several
 * (a cubin for the device's SM, then a fatbin, then CUDA C++ source that
 * NVRTC compiles, then PTX). A .cu never reaches the executor: what it
 * compiles to (a cubin, or PTX where its options ask for a virtual
 * architecture) does. */
typedef enum cumod_image_kind {
    CUMOD_IMAGE_CUBIN = 0,
    CUMOD_IMAGE_FATBIN = 1,
    CUMOD_IMAGE_CU = 2,
    CUMOD_IMAGE_PTX = 3,
} cumod_image_kind;
#define CUMOD_IMAGE_KINDS 4

/* Sidecar files of a module: NAME.ptx.opts (JIT options) and NAME.cu.opts
 * (NVRTC options). */
typedef enum cumod_opts_kind {
    CUMOD_OPTS_PTX = 0,
    CUMOD_OPTS_CU = 1,
} cumod_opts_kind;
#define CUMOD_OPTS_KINDS 2

/* Module names match [A-Za-z0-9_.-]{1,CUMOD_IMAGE_NAME_MAX}. */
#define CUMOD_IMAGE_NAME_MAX 128

/* The size cap cumod__image_read applies when given max_size 0. */
#define CUMOD_IMAGE_MAX_SIZE_DEFAULT ((size_t)256 << 20)

/* A module image read into memory. The image owns fd and the mapping;
 * cumod__image_fini releases both. */
typedef struct cumod_image {
    cumod_image_kind kind;
    /* A sealed memfd holding exactly the bytes (F_SEAL_WRITE, F_SEAL_GROW,
     * F_SEAL_SHRINK, F_SEAL_SEAL), close-on-exec, to pass to the executor
     * over SCM_RIGHTS (the receiver gets its own descriptor; this one stays
     * the image's). -1 when the image holds none. */
    int fd;
    const uint8_t *bytes; /* read-only mapping of fd (MAP_SHARED, PROT_READ) */
    size_t len;           /* >= 1 */
    uint8_t sha256[32];
    char sha256_hex[65]; /* lowercase, NUL-terminated */
    /* cubin: the SM it was built for (sm_90 is 9, 0); ptx: the SM of its
     * .target; fatbin: 0, 0 (the driver picks among its entries). */
    unsigned sm_major, sm_minor;
    /* 1 for an architecture-specific image (cubin or PTX for sm_90a and the
     * like), which runs only on exactly its SM. */
    int arch_specific;
} cumod_image;

/* The state of an image that holds nothing; cumod__image_fini accepts it,
 * and so it accepts an all-zero image (the fd is released only while the
 * image holds a mapping, so a zeroed fd 0 is never closed). */
/* clang-format off */
#define CUMOD_IMAGE_INIT {.kind = CUMOD_IMAGE_CUBIN, .fd = -1}
/* clang-format on */

/* "cubin", "fatbin", "ptx"; "?" for other values. Static string, any
 * thread. */
const char *cumod__image_kind_name(cumod_image_kind k);

/* 1 if name is a module image file: it ends in .cubin, .fatbin, .cu or .ptx,
 * does
 * not start with '.', and its stem matches [A-Za-z0-9_.-]{1,128}; then
 * writes the stem (NUL-terminated) into stem and the kind into *kind.
 * 0 for every other name (dotfiles, "foo.cubin~", "foo.cubin.swp",
 * "foo.tmp", "foo.new", "x.txt", "4913", "..data", ".cubin", stems over 128
 * characters), leaving stem and *kind alone. "vadd.sm_80.cubin" has the
 * stem "vadd.sm_80". Pure; any thread; never blocks. */
int cumod__image_name(const char *name, char stem[CUMOD_IMAGE_NAME_MAX + 1],
                      cumod_image_kind *kind);

/* 1 if name is a sidecar file: "STEM.ptx.opts" or "STEM.cu.opts" with a
 * stem as cumod__image_name takes it; then writes the stem and which.
 * Pure; any thread. */
int cumod__opts_name(const char *name, char stem[CUMOD_IMAGE_NAME_MAX + 1],
                     cumod_opts_kind *which);

/* How cumod__image_open resolves the name. AUTO uses openat2(2) with
 * RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS and falls back to REALPATH where
 * the kernel has no openat2 (before Linux 5.6). REALPATH resolves the path
 * with realpath(3), checks that it lies inside the folder, opens it, and
 * checks again what the open descriptor names (/proc/self/fd); the tests
 * use it to cover the fallback. */
typedef enum cumod_image_resolve {
    CUMOD_IMAGE_RESOLVE_AUTO = 0,
    CUMOD_IMAGE_RESOLVE_REALPATH = 1,
} cumod_image_resolve;

/* Opens the file name of the folder dirfd for reading, safely: a symlink is
 * followed only where it resolves inside the folder, and only a regular file
 * is ever opened for reading (the name is first opened O_PATH and fstat'ed,
 * so a FIFO or device is never opened; the read open is O_RDONLY |
 * O_NONBLOCK | O_CLOEXEC | O_NOCTTY and fstat'ed again, so a FIFO swapped in
 * between cannot block the caller either). On success writes the descriptor
 * (the caller owns and closes it) to *fdp and the file's size to *sizep.
 * dirpath is the folder's path, for messages and for the REALPATH check;
 * dirfd stays the caller's. Errors, each with a sentence in msg naming the
 * file's full path: CUMOD_ENOENT gone (or a dangling symlink); CUMOD_EPERM a
 * symlink leading outside the folder (under AUTO also an absolute symlink,
 * even one naming a file inside: RESOLVE_BENEATH refuses those), a /proc
 * magic link or symlink loop, or no permission; CUMOD_EINVAL not a regular
 * file (the sentence says what it is) or a name that is not a single path
 * component; CUMOD_ENOMEM, CUMOD_EIO other failures. Blocks (file system).
 * Any thread. */
cumod_err cumod__image_open(int dirfd, const char *dirpath, const char *name,
                            cumod_image_resolve resolve, int *fdp,
                            uint64_t *sizep, char *msg, size_t msglen);

/* Reads the module image file name of the folder dirfd (path dirpath, for
 * messages) into *out: opens it with cumod__image_open (AUTO); refuses a
 * file over max_size bytes (0: CUMOD_IMAGE_MAX_SIZE_DEFAULT); copies it into
 * a memfd with sendfile(2), no user-space buffer, refusing it if it grows
 * past max_size while being read; seals and maps the memfd, hashes it, and
 * checks its header with cumod__image_check against the device's SM
 * (dev_major, dev_minor; 0, 0 skips the SM check). The kind comes from the
 * name's extension. *out is written only on success; the caller releases it
 * with cumod__image_fini.
 * Errors, each with a sentence in msg (msg may be NULL when msglen is 0)
 * that names the file's full path and what was wrong: those of
 * cumod__image_open (CUMOD_EINVAL also when name is not a module image
 * name, see cumod__image_name); CUMOD_ETOOBIG over the cap (both sizes);
 * CUMOD_EIMAGE empty, or refused by cumod__image_check; CUMOD_EIO read
 * errors; CUMOD_ENOMEM no memory or descriptors for the memfd.
 * Blocks (file I/O): the daemon calls it from libuv's thread pool. Any
 * thread. */
cumod_err cumod__image_read(int dirfd, const char *dirpath, const char *name,
                            size_t max_size, unsigned dev_major,
                            unsigned dev_minor, cumod_image *out, char *msg,
                            size_t msglen);

/* The second half of cumod__image_read: seals the memfd mfd (unless it
 * is sealed already) holding len bytes of an image of kind, maps and hashes it
 * and checks it (path names it in messages). Takes mfd: on success it is out's,
 * else closed. Errors as cumod__image_read's. Any thread. */
cumod_err cumod__image_from_memfd(int mfd, size_t len, cumod_image_kind kind,
                                  const char *path, unsigned dev_major,
                                  unsigned dev_minor, cumod_image *out,
                                  char *msg, size_t msglen);

/* Checks that bytes (len of them) are an image of the given kind that the
 * device (dev_major, dev_minor; 0, 0 skips the SM checks) can load, without
 * looking further than the headers:
 *  cubin: an ELF64 little-endian header, e_machine EM_CUDA (190), section
 *    and program header tables and every section within the file (which
 *    catches truncation); the SM from e_flags, with the ELF ABI version
 *    telling the two layouts apart (see image_check.c); runs on the device
 *    when the major versions are equal and the device's minor is not below
 *    the image's, and an arch-specific ('a') image only on exactly its SM.
 *  fatbin: the container header (magic 0xBA55ED50, version 1, header size
 *    >= 16) and header size + payload size within the file.
 *  ptx: text (no NUL but trailing ones, no control characters but white
 *    space), with a .version X.Y and a .target sm_NN[a|f] or compute_NN
 *    directive before the first .entry; a target the device cannot JIT for
 *    (above its SM; an 'a' target other than exactly its SM; an 'f' target
 *    of another major version) is refused.
 * Content that is plainly another kind (an ELF in a .ptx, text in a .cubin)
 * is refused with a sentence saying what it looks like.
 * On success writes the image's SM and whether it is arch-specific (see
 * cumod_image) to the non-NULL ones of sm_major, sm_minor, arch_specific.
 * Errors: CUMOD_EIMAGE, with a sentence in msg that starts with name;
 * CUMOD_EINVAL for a NULL bytes or an unknown kind. Pure; any thread; never
 * blocks. */
cumod_err cumod__image_check(const uint8_t *bytes, size_t len,
                             cumod_image_kind kind, const char *name,
                             unsigned dev_major, unsigned dev_minor,
                             unsigned *sm_major, unsigned *sm_minor,
                             int *arch_specific, char *msg, size_t msglen);

/* Converts an errno value of a file operation into a cumod error, once,
 * where it enters (image_open.c): the code is cumod__errno_err's (status.h:
 * ENOENT CUMOD_ENOENT, EXDEV and ELOOP CUMOD_EPERM, ...); msg gets
 * "<path>: <what>: <why>" or a more specific sentence (EXDEV, openat2's
 * "leads outside the folder", and ELOOP say so). Pure; any thread. */
cumod_err cumod__image_errno(int e, const char *path, const char *what,
                             char *msg, size_t msglen);

/* The PTX part of cumod__image_check (image_ptx.c), called by it: the same
 * contract, except that bytes is non-NULL, len >= 1 and the three result
 * pointers are non-NULL. Pure; any thread; never blocks. */
cumod_err cumod__image_check_ptx(const uint8_t *bytes, size_t len,
                                 const char *name, unsigned dev_major,
                                 unsigned dev_minor, unsigned *sm_major,
                                 unsigned *sm_minor, int *arch_specific,
                                 char *msg, size_t msglen);

/* Unmaps the bytes and closes the memfd, leaving img as CUMOD_IMAGE_INIT.
 * Accepts an image from CUMOD_IMAGE_INIT, an all-zero one, or one already
 * released; fd is closed only while the image holds a mapping (so a caller
 * that took the descriptor over sets fd to -1 first). The thread that owns
 * img; never blocks. */
void cumod__image_fini(cumod_image *img);

#endif
