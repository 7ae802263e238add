/* SPDX-License-Identifier: MIT */
/*
 * Module image files (daemon/image*.c): which names count, reading a file
 * safely into a sealed memfd, and the header checks, on the example kernels
 * and on cubins nvcc built for other SMs (CUMOD_IMAGE_TEST_DIR).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cumod/errors.h"
#include "harness.h"
#include "catalog/image/image.h"

TH_SUITE_DRIVER(0);

#define SEALS (F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL)
#define N(a) (sizeof(a) / sizeof((a)[0]))

/* The commonest calls and checks, with img and msg[] in scope. */
#define READ(name)                                                             \
    cumod__image_read(fx.dirfd, fx.dir, name, 0, 9, 0, &img, msg, sizeof(msg))
#define EXPECT_READ(name, code)                                                \
    cr_expect_eq(READ(name), code, "%s: %s", name, msg)
#define CHECK(b, len, kind, maj, min)                                          \
    cumod__image_check(b, len, kind, "x", maj, min, NULL, NULL, NULL, msg,     \
                       sizeof(msg))
#define HAS(text) cr_expect_not_null(strstr(msg, text), "%s", msg)

/* Each test's temp folder: the kernel folder is <tmp>/k, with <tmp> left
 * for files "outside" it. */
static struct {
    char tmp[256];
    char dir[300];
    int dirfd;
} fx;

static void
fx_setup(void)
{
    th_tmpdir(fx.tmp, sizeof(fx.tmp));
    snprintf(fx.dir, sizeof(fx.dir), "%s/k", fx.tmp);
    cr_assert_eq(mkdir(fx.dir, 0755), 0);
    fx.dirfd = open(fx.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    cr_assert_geq(fx.dirfd, 0);
}

static void
fx_teardown(void)
{
    close(fx.dirfd);
    th_rmtree(fx.tmp);
}

/* <kernel folder>/<rel>. */
static const char *
fx_path(const char *rel)
{
    static char p[600];
    snprintf(p, sizeof(p), "%s/%s", fx.dir, rel);
    return p;
}

static void
fx_link(const char *target, const char *rel)
{
    cr_assert_eq(symlink(target, fx_path(rel)), 0, "%s", rel);
}

static void
fx_mkdir(const char *rel)
{
    cr_assert_eq(mkdir(fx_path(rel), 0755), 0, "%s", rel);
}

/* A whole file, binary. Caller frees. */
static uint8_t *
slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    long n;

    cr_assert_not_null(f, "cannot read %s", path);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)n + 1);
    cr_assert_not_null(buf);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void
spill(const char *path, const void *bytes, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot create %s", path);
    cr_assert_eq(fwrite(bytes, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
}

/* An example kernel's path (static buffer). */
static const char *
example(const char *name)
{
    static char p[600];
    snprintf(p, sizeof(p), "%s/%s", th_kernel_dir, name);
    return p;
}

/* Copies the example kernel name to <kernel folder>/<rel>. */
static void
put(const char *name, const char *rel)
{
    size_t len;
    uint8_t *b = slurp(example(name), &len);

    spill(fx_path(rel), b, len);
    free(b);
}

/* The SHA-256 that sha256sum(1) gives, a route independent of mbedtls. */
static void
sha256sum(const char *path, char hex[65])
{
    char cmd[700], line[256];
    FILE *p;

    snprintf(cmd, sizeof(cmd), "sha256sum -b '%s'", path);
    p = popen(cmd, "r");
    cr_assert_not_null(p);
    cr_assert_not_null(fgets(line, sizeof(line), p));
    cr_assert_eq(pclose(p), 0, "sha256sum failed on %s", path);
    memcpy(hex, line, 64);
    hex[64] = '\0';
}

static int
check_file(const char *path, cumod_image_kind kind, unsigned maj, unsigned min,
           char *msg, size_t msglen)
{
    size_t len;
    uint8_t *b = slurp(path, &len);
    int rc = cumod__image_check(b, len, kind, path, maj, min, NULL, NULL, NULL,
                                msg, msglen);
    free(b);
    return rc;
}

/* ------------------------------------------------------------------ */

Test(image_name, accepted)
{
    static const struct {
        const char *name, *stem;
        cumod_image_kind kind;
    } ok[] = {
        {"vadd.cubin", "vadd", CUMOD_IMAGE_CUBIN},
        {"vadd_fat.fatbin", "vadd_fat", CUMOD_IMAGE_FATBIN},
        {"scale_ptx.ptx", "scale_ptx", CUMOD_IMAGE_PTX},
        {"vadd.sm_80.cubin", "vadd.sm_80", CUMOD_IMAGE_CUBIN},
        {"a.cubin", "a", CUMOD_IMAGE_CUBIN},
        {"A-Z_0.9.ptx", "A-Z_0.9", CUMOD_IMAGE_PTX},
        {"-x.fatbin", "-x", CUMOD_IMAGE_FATBIN},
        {"x..cubin", "x.", CUMOD_IMAGE_CUBIN},
        {"cubin.cubin", "cubin", CUMOD_IMAGE_CUBIN},
        {"v.ptx.cubin", "v.ptx", CUMOD_IMAGE_CUBIN},
        {"sq.cu", "sq", CUMOD_IMAGE_CU},
        {"sq.v2.cu", "sq.v2", CUMOD_IMAGE_CU},
    };
    char stem[CUMOD_IMAGE_NAME_MAX + 1], name[300];
    cumod_image_kind kind;

    for (size_t i = 0; i < N(ok); i++) {
        memset(stem, 'X', sizeof(stem));
        kind = (cumod_image_kind)99;
        cr_expect_eq(cumod__image_name(ok[i].name, stem, &kind), 1, "%s",
                     ok[i].name);
        cr_expect_str_eq(stem, ok[i].stem);
        cr_expect_eq(kind, ok[i].kind, "%s", ok[i].name);
    }
    /* The longest stem: 128 characters. */
    memset(name, 'a', 128);
    strcpy(name + 128, ".fatbin");
    cr_expect_eq(cumod__image_name(name, stem, &kind), 1);
    cr_expect_eq(strlen(stem), 128);
    cr_expect_eq(kind, CUMOD_IMAGE_FATBIN);
}

/* Sidecar files: NAME.ptx.opts (JIT options), NAME.cu.opts (NVRTC). */
Test(image_name, sidecars)
{
    char stem[CUMOD_IMAGE_NAME_MAX + 1];
    cumod_opts_kind which = CUMOD_OPTS_CU;
    cr_expect_eq(cumod__opts_name("vadd.ptx.opts", stem, &which), 1);
    cr_expect_str_eq(stem, "vadd");
    cr_expect_eq(which, CUMOD_OPTS_PTX);
    cr_expect_eq(cumod__opts_name("sq.v2.cu.opts", stem, &which), 1);
    cr_expect_str_eq(stem, "sq.v2");
    cr_expect_eq(which, CUMOD_OPTS_CU);
    static const char *const bad[] = {
        ".ptx.opts",      "vadd.opts",   "vadd.cubin.opts", ".vadd.cu.opts",
        "vadd.ptx.opts~", "a b.cu.opts", "vadd.PTX.opts",   ""};
    for (size_t i = 0; i < N(bad); i++)
        cr_expect_eq(cumod__opts_name(bad[i], stem, &which), 0, "'%s'", bad[i]);
}

Test(image_name, ignored)
{
    static const char *const bad[] = {"..data",
                                      ".vadd.cubin",
                                      "vadd.cubin~",
                                      "vadd.cubin.swp",
                                      ".vadd.cubin.swp",
                                      "4913",
                                      "vadd.tmp",
                                      "vadd.new",
                                      "vadd.cubin.new",
                                      "vadd.cubin.tmp",
                                      "x.txt",
                                      ".cubin",
                                      ".ptx",
                                      "cubin",
                                      "a b.cubin",
                                      "a/b.cubin",
                                      "a\tb.ptx",
                                      "v\xc3\xa9.cubin",
                                      "vadd.CUBIN",
                                      "vadd.cubin ",
                                      "vadd.Ptx",
                                      "#vadd.cubin#",
                                      "vadd.cubin#",
                                      "",
                                      "vadd.cu~",
                                      "vadd.fatbi",
                                      "..2024_01_01_00_00_00.000000000",
                                      "vadd.o",
                                      "vadd:x.cubin",
                                      "v*.ptx",
                                      "vadd.CU",
                                      "vadd.cuh",
                                      "vadd.ptx.opts",
                                      "vadd.cu.opts",
                                      ".cu",
                                      "vadd.cu.swp"};
    char stem[CUMOD_IMAGE_NAME_MAX + 1], name[300];
    cumod_image_kind kind = CUMOD_IMAGE_PTX;

    for (size_t i = 0; i < N(bad); i++) {
        strcpy(stem, "untouched");
        cr_expect_eq(cumod__image_name(bad[i], stem, &kind), 0, "'%s'", bad[i]);
        cr_expect_str_eq(stem, "untouched");
        cr_expect_eq(kind, CUMOD_IMAGE_PTX);
    }
    /* 129 characters is one too many, whatever the extension. */
    memset(name, 'b', 129);
    strcpy(name + 129, ".cubin");
    cr_expect_eq(cumod__image_name(name, stem, &kind), 0);
    memset(name, 'b', 250);
    strcpy(name + 250, ".ptx");
    cr_expect_eq(cumod__image_name(name, stem, &kind), 0);
    cr_expect_eq(cumod__image_name(NULL, stem, &kind), 0);
    cr_expect_str_eq(cumod__image_kind_name((cumod_image_kind)7), "?");
}

/* ------------------------------------------------------------------ */

Test(image_read, every_example)
{
    static const char *const ex[] = {
        "affine.cubin", "axpy.cubin",      "empty.cubin",  "scale.cubin",
        "vadd.cubin",   "vadd_fat.fatbin", "scale_ptx.ptx"};
    char hex[65], msg[512];
    int kdir = open(th_kernel_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    cr_assert_geq(kdir, 0, "no example kernels at %s", th_kernel_dir);
    for (size_t i = 0; i < N(ex); i++) {
        cumod_image img = CUMOD_IMAGE_INIT;
        const char *path = example(ex[i]);
        struct stat st;
        size_t len;
        uint8_t *b;

        msg[0] = '\0';
        cr_assert_eq(cumod__image_read(kdir, th_kernel_dir, ex[i], 0, 9, 0,
                                       &img, msg, sizeof(msg)),
                     CUMOD_OK, "%s: %s", ex[i], msg);
        cr_expect_str_eq(cumod__image_kind_name(img.kind),
                         strrchr(ex[i], '.') + 1);
        sha256sum(path, hex);
        cr_expect_str_eq(img.sha256_hex, hex, "%s", ex[i]);
        for (int k = 0; k < 32; k++) /* the raw bytes say the same */
            cr_expect_eq(img.sha256[k],
                         strtoul((char[3]){hex[2 * k], hex[2 * k + 1]}, 0, 16));
        /* The memfd is sealed and holds exactly the file's bytes, and the
         * mapping shows them. */
        cr_expect_eq(fcntl(img.fd, F_GET_SEALS), SEALS, "%s", ex[i]);
        cr_expect_eq(fcntl(img.fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
        b = slurp(path, &len);
        cr_assert_eq(img.len, len, "%s", ex[i]);
        cr_expect_eq(memcmp(b, img.bytes, len), 0, "%s", ex[i]);
        cr_assert_eq(fstat(img.fd, &st), 0);
        cr_expect_eq((size_t)st.st_size, len);
        free(b);
        /* The seals hold: no writing, growing or shrinking. */
        cr_expect_eq(pwrite(img.fd, "x", 1, 0), -1);
        cr_expect_eq(errno, EPERM);
        cr_expect_eq(ftruncate(img.fd, 1), -1);
        cr_expect_eq(ftruncate(img.fd, (off_t)len + 4096), -1);
        cr_expect_eq(img.sm_major, img.kind == CUMOD_IMAGE_FATBIN ? 0 : 9);
        cr_expect_eq(img.sm_minor, 0);
        cr_expect_eq(img.arch_specific, 0);
        cumod__image_fini(&img);
        cr_expect_eq(img.fd, -1);
        cr_expect_null(img.bytes);
        cumod__image_fini(&img); /* twice is harmless */
    }
    close(kdir);
}

Test(image_read, configmap_symlinks_are_followed, .init = fx_setup,
     .fini = fx_teardown)
{
    cumod_image img = CUMOD_IMAGE_INIT;
    char hex[65], msg[512];

    /* The layout of a Kubernetes ConfigMap volume. */
    fx_mkdir("..2024_01_01_00_00_00.1");
    put("vadd.cubin", "..2024_01_01_00_00_00.1/vadd.cubin");
    fx_link("..2024_01_01_00_00_00.1", "..data");
    fx_link("..data/vadd.cubin", "vadd.cubin");
    cr_assert_eq(READ("vadd.cubin"), CUMOD_OK, "%s", msg);
    sha256sum(example("vadd.cubin"), hex);
    cr_expect_str_eq(img.sha256_hex, hex);
    cumod__image_fini(&img);

    /* A symlink inside a subfolder back up into the folder is fine too. */
    fx_mkdir("sub");
    fx_link("../vadd.cubin", "sub/up.cubin");
    fx_link("sub/up.cubin", "up.cubin");
    EXPECT_READ("up.cubin", CUMOD_OK);
    cumod__image_fini(&img);
}

/* Symlinks that lead outside the folder, or nowhere. */
static void
outside_links(void)
{
    put("vadd.cubin", "../outside.cubin");
    fx_mkdir("..data");
    fx_link("/etc/passwd", "passwd.cubin");
    fx_link("../outside.cubin", "out.cubin");
    fx_link("..data/../../outside.cubin", "deep.cubin");
    fx_link("/proc/self/exe", "proc.cubin");
    fx_link("..data/nothing.cubin", "dangling.cubin");
    fx_link("loop.cubin", "loop.cubin");
}

static const char *const outside[] = {"passwd.cubin", "out.cubin", "deep.cubin",
                                      "proc.cubin", "loop.cubin"};

static int
open_realpath(const char *name, uint64_t *size, char *msg, size_t msglen)
{
    int fd = -1, rc;

    rc = cumod__image_open(fx.dirfd, fx.dir, name, CUMOD_IMAGE_RESOLVE_REALPATH,
                           &fd, size, msg, msglen);
    cr_expect_eq(fd >= 0, rc == CUMOD_OK, "a descriptor only on success");
    if (fd >= 0) {
        cr_expect_eq(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
        close(fd);
    }
    return rc;
}

/* Each outside link is refused both through openat2 and through the
 * realpath fallback; /proc/self/exe resolves to the test binary. */
Test(image_read, symlinks_leading_outside_are_refused, .init = fx_setup,
     .fini = fx_teardown)
{
    cumod_image img = CUMOD_IMAGE_INIT;
    char msg[512];
    uint64_t size = 0;
    struct stat st;

    outside_links();
    for (size_t i = 0; i < N(outside); i++) {
        msg[0] = '\0';
        EXPECT_READ(outside[i], CUMOD_EPERM);
        HAS(outside[i]);
        cr_expect_eq(img.fd, -1, "*out is written only on success");
        cr_expect_eq(open_realpath(outside[i], &size, msg, sizeof(msg)),
                     CUMOD_EPERM, "%s: %s", outside[i], msg);
    }
    EXPECT_READ("out.cubin", CUMOD_EPERM);
    HAS("out.cubin is a symlink that leads outside the kernel folder");
    EXPECT_READ("dangling.cubin", CUMOD_ENOENT);
    cr_expect_eq(open_realpath("dangling.cubin", &size, msg, sizeof(msg)),
                 CUMOD_ENOENT, "%s", msg);

    /* What lies inside is opened by the fallback too, and only regular
     * files. */
    put("vadd.cubin", "..data/vadd.cubin");
    fx_link("..data/vadd.cubin", "vadd.cubin");
    cr_expect_eq(open_realpath("vadd.cubin", &size, msg, sizeof(msg)), CUMOD_OK,
                 "%s", msg);
    cr_assert_eq(stat(example("vadd.cubin"), &st), 0);
    cr_expect_eq(size, (uint64_t)st.st_size);
    cr_assert_eq(mkfifo(fx_path("fifo.cubin"), 0644), 0);
    cr_expect_eq(open_realpath("fifo.cubin", &size, msg, sizeof(msg)),
                 CUMOD_EINVAL, "%s", msg);
    cr_expect_eq(open_realpath("../k/vadd.cubin", &size, msg, sizeof(msg)),
                 CUMOD_EINVAL, "%s", msg);
}

Test(image_read, not_regular_files_are_refused_without_blocking,
     .init = fx_setup, .fini = fx_teardown, .timeout = 20)
{
    cumod_image img = CUMOD_IMAGE_INIT;
    struct sockaddr_un sa;
    char msg[512];
    time_t t0;
    int s;

    cr_assert_eq(mkfifo(fx_path("fifo.cubin"), 0644), 0);
    fx_link("fifo.cubin", "fifolink.cubin");
    t0 = time(NULL);
    EXPECT_READ("fifo.cubin", CUMOD_EINVAL);
    HAS("fifo.cubin is a FIFO (named pipe), not a regular file");
    HAS(fx.dir);
    EXPECT_READ("fifolink.cubin", CUMOD_EINVAL);
    cr_expect_leq(time(NULL) - t0, 1, "reading a FIFO must not block");

    fx_mkdir("x.cubin");
    EXPECT_READ("x.cubin", CUMOD_EINVAL);
    HAS("x.cubin is a directory");

    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    cr_assert_lt(
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", fx_path("sock.ptx")),
        (int)sizeof(sa.sun_path));
    s = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_geq(s, 0);
    cr_assert_eq(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
    EXPECT_READ("sock.ptx", CUMOD_EINVAL);
    HAS("sock.ptx is a socket");
    close(s);

    fx_link("/dev/null", "null.ptx");
    EXPECT_READ("null.ptx", CUMOD_EPERM);
    cr_expect_eq(img.fd, -1);
}

Test(image_read, size_cap, .init = fx_setup, .fini = fx_teardown)
{
    cumod_image img = CUMOD_IMAGE_INIT;
    char msg[512], want[128];
    struct stat st;

    cr_assert_eq(stat(example("vadd.cubin"), &st), 0);
    put("vadd.cubin", "vadd.cubin");
    cr_expect_eq(cumod__image_read(fx.dirfd, fx.dir, "vadd.cubin",
                                   (size_t)st.st_size, 9, 0, &img, msg,
                                   sizeof(msg)),
                 CUMOD_OK, "%s", msg);
    cumod__image_fini(&img);
    cr_expect_eq(cumod__image_read(fx.dirfd, fx.dir, "vadd.cubin",
                                   (size_t)st.st_size - 1, 9, 0, &img, msg,
                                   sizeof(msg)),
                 CUMOD_ETOOBIG);
    snprintf(want, sizeof(want),
             "vadd.cubin is %lld bytes, over the size cap of %lld bytes",
             (long long)st.st_size, (long long)st.st_size - 1);
    HAS(want);
    cr_expect_eq(img.fd, -1);
}

Test(image_read, bad_contents, .init = fx_setup, .fini = fx_teardown)
{
    static const char *const names[] = {"e.cubin", "e.fatbin", "e.ptx"};
    cumod_image img = CUMOD_IMAGE_INIT;
    uint8_t junk[4096], *b;
    uint32_t x = 2463534242u;
    char msg[512];
    size_t len;

    for (size_t i = 0; i < sizeof(junk); i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        junk[i] = (uint8_t)x;
    }
    for (size_t i = 0; i < N(names); i++) {
        spill(fx_path(names[i]), "", 0);
        EXPECT_READ(names[i], CUMOD_EIMAGE);
        HAS("is empty");
        spill(fx_path(names[i]), junk, sizeof(junk));
        EXPECT_READ(names[i], CUMOD_EIMAGE);
        HAS(fx_path(names[i]));
        cr_expect_eq(img.fd, -1);
    }
    EXPECT_READ("gone.cubin", CUMOD_ENOENT);
    HAS(fx_path("gone.cubin"));
    EXPECT_READ("notes.txt", CUMOD_EINVAL);
    EXPECT_READ("../k/vadd.cubin", CUMOD_EINVAL);
    cr_expect_eq(cumod__image_read(fx.dirfd, fx.dir, "gone.cubin", 0, 9, 0,
                                   NULL, NULL, 0),
                 CUMOD_EINVAL);
    /* A truncated cubin, and a cubin under a .ptx name. */
    b = slurp(example("axpy.cubin"), &len);
    spill(fx_path("cut.cubin"), b, len / 2);
    EXPECT_READ("cut.cubin", CUMOD_EIMAGE);
    HAS("cut.cubin is truncated or corrupt");
    spill(fx_path("elf.ptx"), b, len);
    EXPECT_READ("elf.ptx", CUMOD_EIMAGE);
    HAS("elf.ptx is not PTX text: it is an ELF file");
    free(b);
}

/* ------------------------------------------------------------------ */

Test(image_check, every_truncation_of_every_example_is_refused)
{
    static const char *const names[] = {"affine.cubin", "axpy.cubin",
                                        "empty.cubin",  "scale.cubin",
                                        "vadd.cubin",   "vadd_fat.fatbin"};
    char msg[512];
    size_t len;
    uint8_t *b, *cut;

    for (size_t i = 0; i < N(names); i++) {
        cumod_image_kind kind = strstr(names[i], ".fatbin") ? CUMOD_IMAGE_FATBIN
                                                            : CUMOD_IMAGE_CUBIN;
        b = slurp(example(names[i]), &len);
        cr_expect_eq(CHECK(b, len, kind, 9, 0), CUMOD_OK, "%s", msg);
        /* Each cut in a buffer of exactly its length, so that the
         * sanitizers see any read past it. */
        for (size_t n = 0; n < len; n++) {
            cut = malloc(n ? n : 1);
            memcpy(cut, b, n);
            int rc = CHECK(cut, n, kind, 9, 0);
            free(cut);
            if (rc != CUMOD_EIMAGE) {
                cr_expect_eq(rc, CUMOD_EIMAGE, "%s cut at %zu", names[i], n);
                break;
            }
        }
        free(b);
    }
}

/* nvcc's cubins for other SMs: the device, whether it takes the image,
 * and a piece of the sentence when it does not. */
Test(image_check, cubin_sm_rules)
{
    static const struct {
        const char *arch;
        unsigned dmaj, dmin;
        int ok;
        const char *says;
    } rules[] = {
        /* clang-format off */
        {"sm_80", 8, 0, 1, NULL},  {"sm_80", 8, 6, 1, NULL},
        {"sm_80", 8, 9, 1, NULL},  {"sm_80", 7, 5, 0, NULL},
        {"sm_86", 8, 0, 0, NULL},  {"sm_86", 8, 6, 1, NULL},
        {"sm_86", 8, 9, 1, NULL},  {"sm_90a", 9, 0, 1, NULL},
        {"sm_90a", 9, 1, 0, NULL}, {"sm_90a", 8, 9, 0, NULL},
        {"sm_100", 10, 0, 1, NULL}, {"sm_100", 10, 3, 1, NULL},
        {"sm_100", 12, 0, 0, NULL}, {"sm_100", 9, 0, 0, NULL},
        {"sm_100a", 10, 0, 1, NULL}, {"sm_100a", 10, 3, 0, NULL},
        {"sm_120", 12, 0, 1, NULL}, {"sm_120", 12, 1, 1, NULL},
        {"sm_120", 10, 0, 0, NULL}, {"sm_80", 0, 0, 1, NULL},
        {"sm_90a", 0, 0, 1, NULL},
        {"sm_80", 9, 0, 0, "vadd.sm_80.cubin is built for sm_80 (ELF e_flags "
         "0x06005004); this device is sm_90: a cubin runs only on its own "
         "major SM version, at its minor version or above"},
        {"sm_90a", 10, 0, 0, "vadd.sm_90a.cubin is built for sm_90a (ELF "
         "e_flags 0x06005a04"},
        {"sm_90a", 10, 0, 0, "this device is sm_100: an arch-specific ('a') "
         "cubin runs only on exactly its own SM"},
        /* clang-format on */
    };
    char path[600], msg[512];

    for (size_t i = 0; i < N(rules); i++) {
        unsigned smj = 99, smn = 99;
        int arch = 99, rc;
        size_t len;
        uint8_t *b;

        snprintf(path, sizeof(path), "%s/vadd.%s.cubin", CUMOD_IMAGE_TEST_DIR,
                 rules[i].arch);
        b = slurp(path, &len);
        msg[0] = '\0';
        rc = cumod__image_check(b, len, CUMOD_IMAGE_CUBIN, path, rules[i].dmaj,
                                rules[i].dmin, &smj, &smn, &arch, msg,
                                sizeof(msg));
        free(b);
        cr_expect_eq(rc, rules[i].ok ? CUMOD_OK : CUMOD_EIMAGE,
                     "%s on %u.%u: %s", rules[i].arch, rules[i].dmaj,
                     rules[i].dmin, msg);
        if (rules[i].ok && rc == CUMOD_OK) {
            cr_expect_eq(smj * 10 + smn, (unsigned)atoi(rules[i].arch + 3));
            cr_expect_eq(arch, strchr(rules[i].arch, 'a') != NULL);
        } else if (!rules[i].ok) {
            cr_expect_eq(smj, 99, "results are written only on success");
            HAS(rules[i].says ? rules[i].says : "is built for sm_");
        }
    }
    /* The example kernels are sm_90. */
    cr_expect_eq(check_file(example("vadd.cubin"), CUMOD_IMAGE_CUBIN, 8, 0, msg,
                            sizeof(msg)),
                 CUMOD_EIMAGE);
}

/* e_flags as toolchains before CUDA 13 wrote them (ELF ABI version 7): the
 * SM in the low byte, 'a' at 0x800. And the 0x8 'a' bit of the new layout,
 * which LLVM documents though nvcc 13.0 leaves it clear. */
Test(image_check, both_e_flags_layouts)
{
    static const struct {
        unsigned abi;
        uint32_t flags;
        unsigned dmaj, dmin;
        int ok;
        unsigned sm;
        int arch;
    } cases[] = {
        {7, 0x00500550, 8, 6, 1, 80, 0},  {7, 0x00500550, 9, 0, 0, 80, 0},
        {7, 0x005a0d5a, 9, 0, 1, 90, 1},  {7, 0x005a0d5a, 10, 0, 0, 90, 1},
        {7, 0x005a055a, 9, 0, 1, 90, 0},  {8, 0x06005a0c, 9, 0, 1, 90, 1},
        {8, 0x06005a0c, 10, 0, 0, 90, 1}, {8, 0x06006402, 10, 3, 1, 100, 0},
        {8, 0x06000004, 9, 0, 0, 0, 0},   {7, 0x00000500, 9, 0, 0, 0, 0},
    };
    char msg[512];
    size_t len;
    uint8_t *b = slurp(example("vadd.cubin"), &len);

    for (size_t i = 0; i < N(cases); i++) {
        unsigned smj = 0, smn = 0;
        int arch = -1;
        b[8] = (uint8_t)cases[i].abi; /* e_ident[EI_ABIVERSION] */
        for (int k = 0; k < 4; k++)   /* e_flags, little-endian */
            b[48 + k] = (uint8_t)(cases[i].flags >> (8 * k));
        int rc = cumod__image_check(b, len, CUMOD_IMAGE_CUBIN, "x.cubin",
                                    cases[i].dmaj, cases[i].dmin, &smj, &smn,
                                    &arch, msg, sizeof(msg));
        cr_expect_eq(rc, cases[i].ok ? CUMOD_OK : CUMOD_EIMAGE,
                     "abi %u e_flags 0x%08x on %u.%u: %s", cases[i].abi,
                     cases[i].flags, cases[i].dmaj, cases[i].dmin, msg);
        if (rc == CUMOD_OK) {
            cr_expect_eq(smj * 10 + smn, cases[i].sm);
            cr_expect_eq(arch, cases[i].arch);
        }
    }
    free(b);
}

Test(image_check, other_kinds_are_named)
{
    static const struct {
        const char *file;
        cumod_image_kind as;
        const char *says;
    } cases[] = {
        {"vadd_fat.fatbin", CUMOD_IMAGE_CUBIN, "it looks like a fatbin"},
        {"scale_ptx.ptx", CUMOD_IMAGE_CUBIN, "it looks like PTX text"},
        {"vadd.cubin", CUMOD_IMAGE_FATBIN, "it looks like an ELF file"},
        {"scale_ptx.ptx", CUMOD_IMAGE_FATBIN, "it looks like PTX text"},
        {"vadd.cubin", CUMOD_IMAGE_PTX, "it is an ELF file"},
        {"vadd_fat.fatbin", CUMOD_IMAGE_PTX, "it is a fatbin"},
    };
    char msg[512];
    size_t len;
    uint8_t *b;

    for (size_t i = 0; i < N(cases); i++) {
        b = slurp(example(cases[i].file), &len);
        cr_expect_eq(CHECK(b, len, cases[i].as, 9, 0), CUMOD_EIMAGE);
        HAS(cases[i].says);
        free(b);
    }
    /* An x86-64 ELF is an ELF, not a cubin. */
    b = slurp(example("vadd.cubin"), &len);
    b[18] = 62;
    b[19] = 0;
    cr_expect_eq(CHECK(b, len, CUMOD_IMAGE_CUBIN, 9, 0), CUMOD_EIMAGE);
    HAS("x is an ELF file for machine 62 (x86-64), not a cubin");
    cr_expect_eq(CHECK(NULL, 4, CUMOD_IMAGE_PTX, 9, 0), CUMOD_EINVAL);
    cr_expect_eq(CHECK(b, len, (cumod_image_kind)9, 9, 0), CUMOD_EINVAL);
    free(b);
}

Test(image_check, fatbin_header)
{
    char msg[512];
    size_t len;
    uint8_t *b = slurp(example("vadd_fat.fatbin"), &len);

    cr_expect_eq(CHECK(b, len, CUMOD_IMAGE_FATBIN, 8, 0), CUMOD_OK, "%s", msg);
    b[4] = 2; /* version */
    cr_expect_eq(CHECK(b, len, CUMOD_IMAGE_FATBIN, 9, 0), CUMOD_EIMAGE);
    HAS("fatbin version 2");
    b[4] = 1;
    b[6] = 8; /* header size */
    cr_expect_eq(CHECK(b, len, CUMOD_IMAGE_FATBIN, 9, 0), CUMOD_EIMAGE);
    b[6] = 16;
    memset(b + 8, 0xff, 8); /* payload size: overflows any sum */
    cr_expect_eq(CHECK(b, len, CUMOD_IMAGE_FATBIN, 9, 0), CUMOD_EIMAGE);
    HAS("is truncated");
    memset(b + 8, 0, 8);
    cr_expect_eq(CHECK(b, len, CUMOD_IMAGE_FATBIN, 9, 0), CUMOD_EIMAGE);
    HAS("holds no images");
    b[0] ^= 1;
    cr_expect_eq(CHECK(b, len, CUMOD_IMAGE_FATBIN, 9, 0), CUMOD_EIMAGE);
    HAS("not the fatbin magic 0xba55ed50");
    free(b);
}

/* PTX texts, each checked in a buffer of exactly its length (for the
 * sanitizers): the device, whether it takes the text (then the SM and 'a'
 * found), and a piece of the sentence when it does not. */
#define T(s) s, sizeof(s) - 1
static const struct {
    const char *text;
    size_t len;
    unsigned dmaj, dmin;
    int ok;
    unsigned sm;
    int arch;
    const char *says;
} ptx_cases[] = {
    /* clang-format off */
    {T(".version 8.0\n.target sm_90a\n.address_size 64\n"
       ".visible .entry k() { ret; }\n"), 9, 0, 1, 90, 1, NULL},
    {T(".version 8.0\n.target sm_90a\n.entry k(){}\n"), 10, 0, 0, 0, 0,
     "arch-specific ('a') PTX compiles only for exactly its own SM"},
    {T(".version 8.8\n.target sm_100f\n"), 10, 3, 1, 100, 0, NULL},
    {T(".version 8.8\n.target sm_100f\n"), 12, 0, 0, 0, 0, "family-specific"},
    {T(".version 8.0\n.target sm_90\n"), 8, 9, 0, 0, 0, "t.ptx targets sm_90 "
     "(.target on line 2); this device is sm_89: the JIT compiles PTX for its "
     "target SM or a newer one, never an older one"},
    {T(".version 7.0\n.target compute_80\n"), 9, 0, 1, 80, 0, NULL},
    {T("\t.version\t9.0 // x\r\n\t.target sm_120, debug\n"), 0, 0, 1, 120, 0,
     NULL},
    {T(".version 7.0\n.target texmode_independent, sm_75\n"), 8, 0, 1, 75, 0,
     NULL},
    {T(".version 8.0\n.target sm_80,"), 8, 0, 1, 80, 0, NULL},
    /* Trailing NULs are fine; no text at all is not. */
    {T(".version 8.0\n.target sm_80\n\0\0"), 8, 0, 1, 80, 0, NULL},
    {T("\0\0"), 8, 0, 0, 0, 0, "no .version"},
    /* Directives in comments, strings or after the first .entry, and dots
     * inside instructions, do not count. */
    {T("// .version 8.0\n/* .target sm_80 */\n.entry k() { ld.version.x; }\n"
       ".version 8.0\n.target sm_80\n"), 8, 0, 0, 0, 0, "t.ptx is not PTX: "
     "it has no .version directive before its first .entry"},
    {T(".version 8.0\n\".target sm_80\"\n.entry k(){}\n"), 8, 0, 0, 0, 0,
     "no .target"},
    {T(".version 8.0\n/* .target sm_80"), 8, 0, 0, 0, 0, "no .target"},
    /* Malformed directives. */
    {T(".version eight\n.target sm_80\n"), 8, 0, 0, 0, 0,
     "malformed .version directive on line 1"},
    {T(".version 8.\n.target sm_80\n"), 8, 0, 0, 0, 0, "line 1"},
    {T(".version 99999999999.0\n.target sm_80\n"), 8, 0, 0, 0, 0, ".version"},
    {T(".version 8.0\n.target sm_8\n"), 8, 0, 0, 0, 0,
     "the .target directive on line 2 names no SM"},
    {T(".version 8.0\n.target sm_80x\n"), 8, 0, 0, 0, 0, "no SM"},
    {T(".version 8.0\n.target sm_1000\n"), 8, 0, 0, 0, 0, "no SM"},
    {T(".version 8.0\n.target\n"), 8, 0, 0, 0, 0, "no SM"},
    /* Not text. */
    {T(".version 8.0\n.target sm_80\0\n.entry"), 8, 0, 0, 0, 0,
     "NUL byte at offset 26"},
    {T(".version 8.0\n\x01.target sm_80\n"), 8, 0, 0, 0, 0,
     "byte 13 is 0x01, a control character"},
    {T("hello, world\n"), 8, 0, 0, 0, 0, "no .version"},
    /* Scanning stops at the end of the text, wherever that falls. */
    {T("."), 8, 0, 0, 0, 0, NULL}, {T(".version"), 8, 0, 0, 0, 0, NULL},
    {T(".version 8"), 8, 0, 0, 0, 0, NULL}, {T("\""), 8, 0, 0, 0, 0, NULL},
    {T(".version 8.0\n.target "), 8, 0, 0, 0, 0, NULL},
    {T("/"), 8, 0, 0, 0, 0, NULL}, {T("/*"), 8, 0, 0, 0, 0, NULL},
    {T("//"), 8, 0, 0, 0, 0, NULL}, {T("x"), 8, 0, 0, 0, 0, NULL},
    /* clang-format on */
};

Test(image_check, ptx_directives)
{
    const char *path = example("scale_ptx.ptx");
    char msg[512];

    for (size_t i = 0; i < N(ptx_cases); i++) {
        uint8_t *b = malloc(ptx_cases[i].len);
        unsigned smj = 0, smn = 0;
        int arch = -1, rc;

        memcpy(b, ptx_cases[i].text, ptx_cases[i].len);
        msg[0] = '\0';
        rc = cumod__image_check(b, ptx_cases[i].len, CUMOD_IMAGE_PTX, "t.ptx",
                                ptx_cases[i].dmaj, ptx_cases[i].dmin, &smj,
                                &smn, &arch, msg, sizeof(msg));
        free(b);
        cr_expect_eq(rc, ptx_cases[i].ok ? CUMOD_OK : CUMOD_EIMAGE,
                     "case %zu: %s", i, msg);
        if (rc == CUMOD_OK && ptx_cases[i].ok) {
            cr_expect_eq(smj * 10 + smn, ptx_cases[i].sm, "case %zu", i);
            cr_expect_eq(arch, ptx_cases[i].arch, "case %zu", i);
        }
        if (ptx_cases[i].says != NULL)
            HAS(ptx_cases[i].says);
    }
    /* The example, on devices of its SM, a newer and an older one. */
    cr_expect_eq(check_file(path, CUMOD_IMAGE_PTX, 9, 0, msg, sizeof(msg)),
                 CUMOD_OK, "%s", msg);
    cr_expect_eq(check_file(path, CUMOD_IMAGE_PTX, 10, 0, msg, sizeof(msg)),
                 CUMOD_OK, "%s", msg);
    cr_expect_eq(check_file(path, CUMOD_IMAGE_PTX, 8, 6, msg, sizeof(msg)),
                 CUMOD_EIMAGE);
    HAS("targets sm_90 (.target on line 10); this device is sm_86");
}

Test(image_fini, accepts_init_and_zeroed_images)
{
    cumod_image a = CUMOD_IMAGE_INIT, z;
    int before = fcntl(0, F_GETFD);

    memset(&z, 0, sizeof(z));
    cumod__image_fini(&a);
    cumod__image_fini(&z);
    cumod__image_fini(NULL);
    cr_expect_eq(a.fd, -1);
    cr_expect_eq(z.fd, -1);
    cr_expect_eq(fcntl(0, F_GETFD), before, "a zeroed image closed fd 0");
}
