/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the fakecuda suite's files (tests/fakecuda_test.c and
 * the .c files beside this one): one Criterion executable, each test in its own
 * process, so every test starts from a fresh library.
 */
#ifndef FAKE_TEST_H
#define FAKE_TEST_H

#include <criterion/criterion.h>
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "fakecuda.h"

/* The folders the build puts images in (CMake compile definitions). */
#define TEST_KERNELS CUMOD_TEST_KERNEL_DIR
#define TEST_IMAGES CUMOD_TEST_FAKE_IMAGE_DIR

/* Asserts that a driver call returns `want`, naming both codes if not. */
#define CU_IS(want, call)                                                      \
    do {                                                                       \
        CUresult cu_is_rc_ = (call);                                           \
        cr_assert_eq(cu_is_rc_, (want), "%s: got %s, want %s", #call,          \
                     test_errname(cu_is_rc_), test_errname(want));             \
    } while (0)
#define CU_OK(call) CU_IS(CUDA_SUCCESS, call)

/* A file read whole; `bytes` has 64 KiB of zeros after `size`. */
typedef struct test_file {
    unsigned char *bytes;
    size_t size;
} test_file;

const char *test_errname(CUresult rc);

/* Reads dir/name; fails the test if it cannot. Free with test_file_free. */
test_file test_read(const char *dir, const char *name);
void test_file_free(test_file *f);

/* cuInit, retain device 0's primary context, make it current. */
CUcontext test_start(void);

/* Loads dir/name into a module. */
CUmodule test_load(const char *dir, const char *name);

/* Loads an example kernel's image and looks its function up. */
CUfunction test_function(const char *file, const char *name);

void test_sleep_ms(int ms);

/* A thread blocked in one synchronize call, in context ctx; `done` turns 1
 * when the call returns, with its result in rc. */
typedef enum test_wait_kind {
    TEST_WAIT_STREAM,
    TEST_WAIT_EVENT,
    TEST_WAIT_CTX
} test_wait_kind;

typedef struct test_waiter {
    test_wait_kind what;
    CUstream stream;
    CUevent event;
    CUcontext ctx;
    CUresult rc;
    atomic_int done;
    pthread_t thread;
} test_waiter;

void test_waiter_start(test_waiter *w);
void test_waiter_join(test_waiter *w);

/* A region of memory whose end touches an unmapped page: bytes placed with
 * test_guard_put end exactly there, so reading one byte past them faults. */
typedef struct test_guard {
    unsigned char *map;
    size_t len; /* readable bytes before the guard page */
} test_guard;

void test_guard_init(test_guard *g, size_t max_bytes);
/* Copies n bytes so they end at the guard page; returns where they start. */
unsigned char *test_guard_put(test_guard *g, const void *bytes, size_t n);
void test_guard_fini(test_guard *g);

/* Runs fn with stderr captured; returns what it wrote (caller frees). */
char *test_capture_stderr(void (*fn)(void *), void *arg);

/* The expected parameter layout of one kernel. */
typedef struct test_param {
    size_t offset, size;
} test_param;

/* Checks function f's name and its parameters against the expected ones. */
void test_expect_function(CUfunction f, const char *name,
                          const test_param *params, size_t nparams);

#endif
