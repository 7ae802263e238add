/*
 * cumodd's command line. Every option has an environment-free default; the
 * only environment variables read are CUMOD_CUDA_LIBRARY (driver.h) and
 * JOURNAL_STREAM (log.h).
 */
#ifndef CUMOD_CONFIG_H
#define CUMOD_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "cumod/version.h"
#include "log.h"

typedef struct cumod_config {
    const char *kernel_dir;   /* --kernels DIR */
    const char *url;          /* --listen URL */
    int device;               /* --device N */
    const char *cuda_library; /* --cuda-library PATH, or NULL */
    int socket_mode;          /* --socket-mode OCTAL, ipc only */
    size_t max_msg;           /* --max-message BYTES */
    cumod_log_level log_level;
    size_t max_image_size; /* --max-image-size BYTES */
    const char *pins[64];  /* --pin NAME, repeatable */
    int npins;
    uint64_t max_resident_bytes;     /* --max-resident-bytes, 0: no limit */
    uint32_t max_resident_modules;   /* --max-resident-modules, 0: no limit */
    uint32_t idle_unload_s;          /* --idle-unload SECONDS, 0: never */
    int jit_opt_level;               /* --jit-opt-level 0-4, -1: default */
    uint64_t session_mem_limit;      /* --session-memory-limit, 0: none */
    uint32_t launch_deadline_ms;     /* --launch-deadline, 0: none */
    uint32_t max_launch_deadline_ms; /* --max-launch-deadline, 0: no cap */
    uint32_t drain_ms;               /* --drain-timeout: at SIGTERM */
    uint32_t quarantine_after;       /* --quarantine-after N faults */
    uint32_t stuck_ms;               /* --stuck-timeout: kill a silent one */
    /* executor mode (internal): cumodd --executor FD */
    int executor_fd;
    /* the executor's program (internal, for tests and fuzzers that run the
     * front in their own process): --executor-path PATH; NULL: this one */
    const char *executor_path;
} cumod_config;

typedef enum cumod_config_result {
    CUMOD_CONFIG_RUN = 0,  /* run the daemon (or the executor) */
    CUMOD_CONFIG_EXIT = 1, /* --help or --version was printed: exit 0 */
    CUMOD_CONFIG_USAGE = 2 /* an error was printed: exit EX_USAGE */
} cumod_config_result;

/* Parses argv into cfg (pointers borrow argv). Prints --help, --version
 * and usage errors itself, naming the option and what was wrong. */
cumod_config_result cumod__config_parse(cumod_config *cfg, int argc,
                                        char **argv);

#endif
