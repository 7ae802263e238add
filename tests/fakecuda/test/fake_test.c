/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the fakecuda suite (see fake_test.h).
 */
#include "fake_test.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

enum { TEST_PAD = 65536, TEST_PAGE = 4096 };

const char *
test_errname(CUresult rc)
{
    const char *s = NULL;
    return cuGetErrorName(rc, &s) == CUDA_SUCCESS ? s : "(unknown CUresult)";
}

test_file
test_read(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    cr_assert_gt(len, 0, "%s is empty", path);
    test_file out = {calloc(1, (size_t)len + TEST_PAD), (size_t)len};
    cr_assert_not_null(out.bytes);
    cr_assert_eq(fread(out.bytes, 1, (size_t)len, f), (size_t)len,
                 "cannot read %s", path);
    fclose(f);
    return out;
}

void
test_file_free(test_file *f)
{
    free(f->bytes);
    f->bytes = NULL;
}

CUcontext
test_start(void)
{
    CUcontext ctx = NULL;
    CU_OK(cuInit(0));
    CU_OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU_OK(cuCtxSetCurrent(ctx));
    return ctx;
}

CUmodule
test_load(const char *dir, const char *name)
{
    test_file f = test_read(dir, name);
    CUmodule mod = NULL;
    CUresult rc = cuModuleLoadData(&mod, f.bytes);
    test_file_free(&f);
    cr_assert_eq(rc, CUDA_SUCCESS, "loading %s: %s", name, test_errname(rc));
    return mod;
}

CUfunction
test_function(const char *file, const char *name)
{
    CUmodule mod = test_load(TEST_KERNELS, file);
    CUfunction f = NULL;
    CU_OK(cuModuleGetFunction(&f, mod, name));
    return f;
}

void
test_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void *
test_wait(void *arg)
{
    test_waiter *w = arg;
    cuCtxSetCurrent(w->ctx);
    w->rc = w->what == TEST_WAIT_STREAM  ? cuStreamSynchronize(w->stream)
            : w->what == TEST_WAIT_EVENT ? cuEventSynchronize(w->event)
                                         : cuCtxSynchronize();
    atomic_store(&w->done, 1);
    return NULL;
}

void
test_waiter_start(test_waiter *w)
{
    atomic_init(&w->done, 0);
    cr_assert_eq(pthread_create(&w->thread, NULL, test_wait, w), 0);
}

void
test_waiter_join(test_waiter *w)
{
    pthread_join(w->thread, NULL);
}

void
test_guard_init(test_guard *g, size_t max_bytes)
{
    g->len = (max_bytes + TEST_PAGE - 1) / TEST_PAGE * TEST_PAGE;
    g->map = mmap(NULL, g->len + TEST_PAGE, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(g->map, MAP_FAILED);
    cr_assert_eq(mprotect(g->map + g->len, TEST_PAGE, PROT_NONE), 0);
}

unsigned char *
test_guard_put(test_guard *g, const void *bytes, size_t n)
{
    cr_assert_leq(n, g->len);
    unsigned char *at = g->map + g->len - n;
    memcpy(at, bytes, n);
    return at;
}

void
test_guard_fini(test_guard *g)
{
    munmap(g->map, g->len + TEST_PAGE);
}

char *
test_capture_stderr(void (*fn)(void *), void *arg)
{
    char path[] = "/tmp/fakecuda_stderr_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    unlink(path);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    fn(arg);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    off_t len = lseek(fd, 0, SEEK_END);
    char *out = calloc(1, (size_t)len + 1);
    cr_assert_not_null(out);
    cr_assert_eq(pread(fd, out, (size_t)len, 0), (ssize_t)len);
    close(fd);
    return out;
}

void
test_expect_function(CUfunction f, const char *name, const test_param *params,
                     size_t nparams)
{
    const char *got = NULL;
    CU_OK(cuFuncGetName(&got, f));
    cr_expect_str_eq(got, name);
    for (size_t i = 0; i < nparams; i++) {
        size_t off = 99, size = 99;
        CU_OK(cuFuncGetParamInfo(f, i, &off, &size));
        cr_expect_eq(off, params[i].offset,
                     "%s param %zu: offset %zu, want %zu", name, i, off,
                     params[i].offset);
        cr_expect_eq(size, params[i].size, "%s param %zu: size %zu, want %zu",
                     name, i, size, params[i].size);
    }
    size_t off, size;
    CU_IS(CUDA_ERROR_INVALID_VALUE,
          cuFuncGetParamInfo(f, nparams, &off, &size));
}
