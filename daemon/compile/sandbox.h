/* SPDX-License-Identifier: MIT */
/*
 * The NVRTC worker's confinement: what the kernel lets it read, write and
 * reach once NVRTC is loaded and before it reads the source.
 *
 * A NAME.cu comes from whoever writes the kernel folder, and NVRTC opens
 * whatever its #include lines name, so without this a source could pull
 * /etc/shadow or /proc/self/environ into its compile log, which `cumodctl
 * show` hands to every client. The worker therefore:
 * - sets no_new_privs, and RLIMIT_AS (the address space it has plus a
 *   budget), RLIMIT_CPU (the compile's time limit) and RLIMIT_CORE 0;
 * - enters a new network namespace when it may (root, CAP_SYS_ADMIN), and
 *   in any case installs a seccomp filter that refuses socket() and
 *   io_uring: a compiler needs neither;
 * - with Landlock (Linux 5.13+), lets the kernel refuse every file outside
 *   the read roots (the kernel folder, the configured include folders, the
 *   toolkit's headers, NVRTC's own folder) and every write outside the
 *   compile cache; TCP (ABI 4), abstract UNIX sockets and signals out of
 *   the sandbox (ABI 6) are refused too.
 * Without Landlock the text check of the #include lines (deps.h) is the
 * only guard of what is read; cumod__sandbox_describe says which applies.
 */
#ifndef CUMOD_COMPILE_SANDBOX_H
#define CUMOD_COMPILE_SANDBOX_H

#include <stddef.h>
#include <stdint.h>

#define CUMOD_SANDBOX_MAX_ROOTS 72

typedef struct cumod_sandbox {
    const char *read[CUMOD_SANDBOX_MAX_ROOTS]; /* folders or files: read */
    size_t nread;
    const char *cache;   /* read and write (files in it); NULL: none */
    uint64_t memory_max; /* bytes of address space beyond what is mapped
                            now; 0: no limit */
    uint32_t cpu_s;      /* CPU seconds; 0: no limit */
} cumod_sandbox;

/* The Landlock ABI this kernel offers, 0 when it has none (too old, or
 * disabled at boot). Any thread; does not block. */
int cumod__sandbox_landlock_abi(void);

/* One line for the log saying which protections a worker gets here:
 * "landlock ABI 7; network: new namespace + seccomp; ..." Any thread. */
void cumod__sandbox_describe(uint64_t memory_max, char *buf, size_t len);

/* Confines the calling process (the worker: single-threaded, NVRTC already
 * loaded) as sb says; irreversible. 0, or -1 with a sentence in msg: a
 * kernel that offers Landlock but refuses the rules fails the compile
 * rather than run it unconfined. */
int cumod__sandbox_enter(const cumod_sandbox *sb, char *msg, size_t len);

#endif
