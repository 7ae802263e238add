/* SPDX-License-Identifier: MIT */
/*
 * What image_meta_test's files share: the folders of images it reads and
 * reading one. The images are the example kernels (CUMOD_TEST_KERNEL_DIR),
 * tests/fakecuda's (CUMOD_TEST_FAKE_IMAGE_DIR) and tests/kernels/meta's
 * (CUMOD_TEST_META_DIR), as the build makes them.
 */
#ifndef CUMOD_IMAGE_META_TEST_H
#define CUMOD_IMAGE_META_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "catalog/image/image.h"

typedef struct mt_file {
    char name[128]; /* the file name, as in its folder */
    uint8_t *bytes; /* malloc'd, exactly len bytes */
    size_t len;
    cumod_image_kind kind;
} mt_file;

/* The folders, NULL-ended. */
extern const char *const mt_dirs[];

/* Reads dir/name into *f (the kind from its extension); a cubin named
 * STEM.cubin is also looked for as STEM.sm_90.cubin (a build for several
 * SMs names them so). Fails the test if neither can be read. */
void mt_read(const char *dir, const char *name, mt_file *f);

/* Every module image of every folder, sorted by folder then name; *n set.
 * The caller frees with mt_free_all. */
mt_file *mt_read_all(size_t *n);
void mt_free_all(mt_file *files, size_t n);

#endif
