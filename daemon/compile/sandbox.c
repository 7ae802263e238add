/* SPDX-License-Identifier: MIT */
/*
 * The NVRTC worker's confinement (sandbox.h): rlimits, no_new_privs, a
 * network namespace, a seccomp filter and a Landlock domain.
 */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Landlock's ABI (linux/landlock.h), spelled out here: the build host's
 * headers may predate the parts used (net rules came with ABI 4, scopes
 * with ABI 6), and the running kernel says which it has. */
#define SB_LL_VERSION (1U << 0)
#define SB_LL_RULE_PATH_BENEATH 1
#define SB_LL_FS_EXECUTE (1ULL << 0)
#define SB_LL_FS_WRITE_FILE (1ULL << 1)
#define SB_LL_FS_READ_FILE (1ULL << 2)
#define SB_LL_FS_READ_DIR (1ULL << 3)
#define SB_LL_FS_REMOVE_FILE (1ULL << 5)
#define SB_LL_FS_MAKE_REG (1ULL << 8)
#define SB_LL_FS_ABI1 ((1ULL << 13) - 1) /* EXECUTE .. MAKE_SYM */
#define SB_LL_FS_REFER (1ULL << 13)      /* ABI 2 */
#define SB_LL_FS_TRUNCATE (1ULL << 14)   /* ABI 3 */
#define SB_LL_FS_IOCTL_DEV (1ULL << 15)  /* ABI 5 */
#define SB_LL_NET_BIND_TCP (1ULL << 0)   /* ABI 4 */
#define SB_LL_NET_CONNECT_TCP (1ULL << 1)
#define SB_LL_SCOPE_ABSTRACT_UNIX (1ULL << 0) /* ABI 6 */
#define SB_LL_SCOPE_SIGNAL (1ULL << 1)

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

struct sb_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

struct sb_path_beneath {
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));

#if defined(__x86_64__)
#define SB_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SB_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

int
cumod__sandbox_landlock_abi(void)
{
    long v = syscall(SYS_landlock_create_ruleset, NULL, 0, SB_LL_VERSION);
    return v > 0 ? (int)v : 0;
}

/* 1 if this process may make namespaces (CAP_SYS_ADMIN in effect). */
static int
sandbox_may_unshare(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    unsigned long long caps = 0;
    if (f == NULL)
        return geteuid() == 0;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "CapEff: %llx", &caps) == 1)
            break;
    fclose(f);
    return (caps >> 21) & 1; /* CAP_SYS_ADMIN */
}

void
cumod__sandbox_describe(uint64_t memory_max, char *buf, size_t len)
{
    int abi = cumod__sandbox_landlock_abi();
    char ll[160], mem[64];
    if (abi > 0)
        snprintf(ll, sizeof(ll),
                 "landlock ABI %d (the kernel refuses files outside the "
                 "kernel folder, the include folders and the toolkit)",
                 abi);
    else
        snprintf(ll, sizeof(ll),
                 "fallback: path check (no Landlock in this kernel: only the "
                 "#include lines are checked)");
    if (memory_max > 0)
        snprintf(mem, sizeof(mem), "%llu MiB",
                 (unsigned long long)(memory_max >> 20));
    else
        snprintf(mem, sizeof(mem), "no limit");
    snprintf(buf, len,
             "%s; network: %s%s; no_new_privs; memory: %s "
             "(--compile-memory-max); CPU: --compile-timeout",
             ll, sandbox_may_unshare() ? "new namespace + " : "",
#ifdef SB_AUDIT_ARCH
             abi >= 4 ? "seccomp (socket refused) + landlock TCP"
                      : "seccomp (socket refused)",
#else
             abi >= 4 ? "landlock TCP" : "not confined on this architecture",
#endif
             mem);
}

/* The address space mapped now, in bytes (0 if unknown). */
static uint64_t
sandbox_vm_now(void)
{
    FILE *f = fopen("/proc/self/statm", "re");
    unsigned long long pages = 0;
    if (f == NULL)
        return 0;
    if (fscanf(f, "%llu", &pages) != 1)
        pages = 0;
    fclose(f);
    return (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

static int
sandbox_limits(const cumod_sandbox *sb, char *msg, size_t len)
{
    struct rlimit core = {0, 0};
    (void)setrlimit(RLIMIT_CORE, &core); /* a crash leaves no core behind */
    if (sb->cpu_s > 0) {
        /* SIGXCPU at the soft limit ends it by a signal the daemon names;
         * the wall-clock limit in the daemon usually comes first. */
        struct rlimit cpu = {sb->cpu_s, (rlim_t)sb->cpu_s + 1};
        (void)setrlimit(RLIMIT_CPU, &cpu);
    }
    if (sb->memory_max > 0) {
        /* Beyond what is mapped now (the program, NVRTC, and a sanitizer's
         * shadow where there is one): a budget for the compile itself. */
        uint64_t now = sandbox_vm_now();
        struct rlimit as = {(rlim_t)(now + sb->memory_max),
                            (rlim_t)(now + sb->memory_max)};
        if (setrlimit(RLIMIT_AS, &as) != 0) {
            snprintf(msg, len, "cannot limit the compile's memory: %s",
                     strerror(errno));
            return -1;
        }
    }
    return 0;
}

/* socket() and io_uring (which can open sockets too) fail with EACCES;
 * another ABI's system calls (x32) are refused outright. */
static int
sandbox_seccomp(void)
{
#ifdef SB_AUDIT_ARCH
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SB_AUDIT_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#ifdef __x86_64__
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 3, 0),
#else
        BPF_JUMP(BPF_JMP | BPF_JA, 0, 0, 0),
#endif
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_io_uring_setup, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EACCES & 0xffff)),
    };
    struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
#else
    return 0;
#endif
}

/* One path-beneath rule: a folder gets dir_access, a file file_access. A
 * path that is not there is skipped (a configured include folder that
 * does not exist holds nothing to read). */
static int
sandbox_rule(int rs, const char *path, uint64_t dir_access,
             uint64_t file_access)
{
    struct stat st;
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
    struct sb_path_beneath pb = {.parent_fd = fd};
    int rc = -1;
    if (fstat(fd, &st) == 0) {
        pb.allowed_access = S_ISDIR(st.st_mode) ? dir_access : file_access;
        rc = (int)syscall(SYS_landlock_add_rule, rs, SB_LL_RULE_PATH_BENEATH,
                          &pb, 0);
    }
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

static int
sandbox_landlock(const cumod_sandbox *sb, int abi, char *msg, size_t len)
{
    struct sb_ruleset_attr attr = {.handled_access_fs = SB_LL_FS_ABI1};
    size_t size = sizeof(uint64_t);
    uint64_t trunc = 0;
    if (abi >= 2)
        attr.handled_access_fs |= SB_LL_FS_REFER;
    if (abi >= 3)
        attr.handled_access_fs |= trunc = SB_LL_FS_TRUNCATE;
    if (abi >= 5)
        attr.handled_access_fs |= SB_LL_FS_IOCTL_DEV;
    if (abi >= 4) {
        /* Handled with no rule: no TCP bind or connect at all. */
        attr.handled_access_net = SB_LL_NET_BIND_TCP | SB_LL_NET_CONNECT_TCP;
        size = 2 * sizeof(uint64_t);
    }
    if (abi >= 6) {
        attr.scoped = SB_LL_SCOPE_ABSTRACT_UNIX | SB_LL_SCOPE_SIGNAL;
        size = sizeof(attr);
    }
    int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
    if (rs < 0) {
        snprintf(msg, len, "landlock_create_ruleset (ABI %d): %s", abi,
                 strerror(errno));
        return -1;
    }
    const uint64_t rd = SB_LL_FS_READ_FILE | SB_LL_FS_READ_DIR;
    for (size_t i = 0; i < sb->nread; i++)
        if (sandbox_rule(rs, sb->read[i], rd, SB_LL_FS_READ_FILE) != 0) {
            snprintf(msg, len, "landlock rule for %s: %s", sb->read[i],
                     strerror(errno));
            goto fail;
        }
    if (sb->cache != NULL &&
        sandbox_rule(rs, sb->cache,
                     rd | SB_LL_FS_WRITE_FILE | SB_LL_FS_MAKE_REG |
                         SB_LL_FS_REMOVE_FILE | trunc,
                     0) != 0) {
        snprintf(msg, len, "landlock rule for the cache %s: %s", sb->cache,
                 strerror(errno));
        goto fail;
    }
    if (syscall(SYS_landlock_restrict_self, rs, 0) != 0) {
        snprintf(msg, len, "landlock_restrict_self: %s", strerror(errno));
        goto fail;
    }
    close(rs);
    return 0;
fail:
    close(rs);
    return -1;
}

int
cumod__sandbox_enter(const cumod_sandbox *sb, char *msg, size_t len)
{
    if (sandbox_limits(sb, msg, len) != 0)
        return -1;
    /* Required by seccomp and Landlock for an unprivileged caller, and
     * wanted anyway: nothing the compile execs gains privileges. */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        snprintf(msg, len, "PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
        return -1;
    }
    /* Only where permitted; seccomp below refuses sockets regardless. */
    (void)unshare(CLONE_NEWNET);
    int abi = cumod__sandbox_landlock_abi();
    if (abi > 0 && sandbox_landlock(sb, abi, msg, len) != 0)
        return -1;
    if (sandbox_seccomp() != 0) {
        snprintf(msg, len, "seccomp: %s", strerror(errno));
        return -1;
    }
    return 0;
}
