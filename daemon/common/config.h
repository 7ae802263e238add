/* SPDX-License-Identifier: MIT */
/*
 * cumodd's settings: one table of options (config_opts.c) that the command
 * line and the configuration file both use, so every flag has a key of the
 * same name and the same checks.
 *
 * Precedence: built-in defaults (changed by --instance NAME), then the
 * configuration file (--config FILE, or the instance's file when it
 * exists), then the flags: flags win. A list option given on the command
 * line replaces the file's list.
 *
 * The only environment variables read are CUMOD_CUDA_LIBRARY (driver.h),
 * CUMOD_NVRTC_LIBRARY (the NVRTC worker), CUMOD_CUBLAS_LIBRARY
 * (exec/blas.h), CACHE_DIRECTORY, XDG_CACHE_HOME and HOME (the compile
 * cache's default), JOURNAL_STREAM (log.h) and systemd's NOTIFY_SOCKET and
 * WATCHDOG_USEC (notify.h).
 */
#ifndef CUMOD_CONFIG_H
#define CUMOD_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cumod/version.h"
#include "log.h"

#define CUMOD_CONFIG_MAX_PINS 256
#define CUMOD_CONFIG_MAX_IDS 256
#define CUMOD_CONFIG_MAX_OPTS 1024
#define CUMOD_CONFIG_MAX_DEVICES 64
#define CUMOD_CONFIG_MAX_DOMAINS 64

/* --domains: what puts a session into a domain of its own when no
 * [domain NAME] section names it (docs/faults.md "Domains"). */
typedef enum cumod_domains_by {
    CUMOD_DOMAINS_NONE = 0, /* one domain, "default" (today's behaviour) */
    CUMOD_DOMAINS_UID,      /* "uid-1000": one per user */
    CUMOD_DOMAINS_GID,      /* "gid-100": one per primary group */
} cumod_domains_by;

/* A [domain NAME] section (or --domain-option NAME:KEY=VALUE): the
 * sessions it takes and how its executors run. A session goes to the
 * first section that names its listener, else its uid, else its gid
 * (uids, gids and listen may each be empty); a section with none of the
 * three takes no session by credentials (its listen may still be set
 * later). */
typedef struct cumod_domain_cfg {
    char name[64]; /* [A-Za-z0-9_.-], 1-63 bytes; not "default" */
    uint32_t uids[CUMOD_CONFIG_MAX_IDS];
    int nuids;
    uint32_t gids[CUMOD_CONFIG_MAX_IDS];
    int ngids;
    const char *listen;  /* listen = URL: a socket of its own, or NULL */
    int start_always;    /* start = always (else on-demand: at first session) */
    int device;          /* device = N: its sessions' default; -1: the first */
    uint64_t memory_max; /* memory-max = BYTES; 0: --domain-memory-max */
    uint32_t pool;       /* pool = N: executors on its device (MPS); 0: 1 */
} cumod_domain_cfg;

/* --mps: NVIDIA MPS for the pools of executors (front/units/mps.h). */
typedef enum cumod_mps_mode {
    CUMOD_MPS_NONE = 0, /* no executor is made an MPS client */
    CUMOD_MPS_OWN,      /* cumodd starts and stops a control daemon */
    CUMOD_MPS_JOIN,     /* one the operator runs, at --mps-pipe-dir */
} cumod_mps_mode;

/* JIT options (CUjit_option), each -1 where not set: the driver's default.
 * Layers (the global configuration, a module's settings, its NAME.ptx.opts,
 * a load's own) are merged field by field, later layers winning. */
typedef struct cumod_jit_opts {
    int32_t opt_level;     /* CU_JIT_OPTIMIZATION_LEVEL 0-4 */
    int32_t max_registers; /* CU_JIT_MAX_REGISTERS 1-255 */
    int32_t line_info;     /* CU_JIT_GENERATE_LINE_INFO 0/1 */
    int32_t fast_compile;  /* CU_JIT_FAST_COMPILE 0-3 */
} cumod_jit_opts;
#define CUMOD_JIT_OPTS_UNSET                                                   \
    {                                                                          \
        -1, -1, -1, -1                                                         \
    }

/* Where each setting came from (for --check and the reload log). */
typedef enum cumod_config_src {
    CUMOD_SRC_DEFAULT = 0,
    CUMOD_SRC_FILE,
    CUMOD_SRC_FLAG,
} cumod_config_src;

/* Strings the configuration owns (from its file); freed by fini. */
typedef struct cumod_config_strs cumod_config_strs;

typedef struct cumod_config {
    const char *kernel_dir;     /* --kernels DIR */
    const char *url;            /* --listen URL */
    const char *metrics_listen; /* --metrics-listen ADDR:PORT, or NULL */
    int device;                 /* --device: the first (default) device */
    /* --device N[,M...]|all: the devices served, in order; devices[0] ==
     * device. all: every device the driver lists (known once the first
     * executor is up; ndevices is then 0 and devices_all 1). */
    int devices[CUMOD_CONFIG_MAX_DEVICES];
    int ndevices;
    int devices_all;
    cumod_domains_by domains_by; /* --domains none|uid|gid */
    cumod_domain_cfg domains[CUMOD_CONFIG_MAX_DOMAINS]; /* [domain NAME] */
    int ndomains;
    uint32_t domain_idle_s;  /* --domain-idle: stop an idle executor; 0 never */
    uint32_t standby;        /* --standby N: spare executors per device */
    uint32_t pool;           /* --pool N: the default domain's executors */
    const char *mps;         /* --mps none|own|join, as given */
    cumod_mps_mode mps_mode; /* --mps, checked */
    const char *mps_pipe_dir;   /* --mps-pipe-dir DIR, or NULL: the default */
    const char *mps_control;    /* --mps-control PATH, or NULL */
    uint64_t domain_mem_limit;  /* --domain-memory-max, 0: none */
    const char *cuda_library;   /* --cuda-library PATH, or NULL */
    const char *cublas_library; /* --cublas-library PATH, or NULL */
    int socket_mode;            /* --socket-mode OCTAL, ipc only */
    int socket_group;           /* --socket-group GROUP, a gid; -1: ours */
    size_t max_msg;             /* --max-message BYTES */
    cumod_log_level log_level;
    size_t max_image_size;                   /* --max-image-size BYTES */
    const char *pins[CUMOD_CONFIG_MAX_PINS]; /* --pin NAME, repeatable */
    int npins;
    uint64_t max_resident_bytes;   /* --max-resident-bytes, 0: no limit */
    uint32_t max_resident_modules; /* --max-resident-modules, 0: no limit */
    uint32_t idle_unload_s;        /* --idle-unload SECONDS, 0: never */
    cumod_jit_opts jit;            /* --jit-*: the global JIT options */
    /* NAME.cu: --nvrtc-option (NULL: the defaults), --nvrtc-library,
     * --compile-cache, --compile-timeout */
    const char *nvrtc_opts[CUMOD_CONFIG_MAX_OPTS];
    int nnvrtc_opts;
    int nvrtc_opts_set; /* the list was given (even empty) */
    const char *nvrtc_library;
    const char *compile_cache;
    uint32_t compile_timeout_s;
    uint64_t compile_memory_max; /* --compile-memory-max, 0: no limit */
    /* --module-option NAME:KEY=VALUE, in order (later wins) */
    const char *mod_opts[CUMOD_CONFIG_MAX_OPTS];
    int nmod_opts;
    int allow_pointer_values;    /* --allow-pointer-values: C++ kernels */
    int direct_launches;         /* --direct-launches (front/units/direct.h) */
    uint32_t launch_deadline_ms; /* --launch-deadline, 0: none */
    uint32_t max_launch_deadline_ms; /* --max-launch-deadline, 0: no cap */
    uint32_t drain_ms;               /* --drain-timeout: at SIGTERM */
    uint32_t restart_wait_ms;        /* --restart-wait: parked requests */
    uint32_t quarantine_after;       /* --quarantine-after N faults */
    uint32_t stuck_ms;               /* --stuck-timeout: kill a silent one */

    /* Who may connect (checked when a connection arrives): a peer whose
     * uid is in allow_uid, or one of whose groups is in allow_gid; both
     * empty: anyone who can open the socket. root and cumodd's own uid
     * always may. */
    uint32_t allow_uid[CUMOD_CONFIG_MAX_IDS];
    int nallow_uid;
    uint32_t allow_gid[CUMOD_CONFIG_MAX_IDS];
    int nallow_gid;
    uint32_t max_connections; /* --max-connections: connections at once */
    /* tls+tcp://: --tls-cert, --tls-key (the server's), --tls-ca (client
     * certificates required and verified), and the names a remote peer's
     * certificate must carry (--allow-cert-subject: CN or DNS name). */
    const char *tls_cert, *tls_key, *tls_ca;
    const char *allow_subjects[CUMOD_CONFIG_MAX_IDS];
    int nallow_subjects;
    /* Who may send control requests (load, unload, pin, unpin, reload,
     * unquarantine, kernel settings, global writes: what changes the
     * daemon for every session): root, cumodd's own uid, and peers in
     * these lists (as allow_uid and allow_gid). Each list's count follows
     * its array, as above (config_value.c finds it so). */
    uint32_t control_uid[CUMOD_CONFIG_MAX_IDS];
    int ncontrol_uid;
    uint32_t control_gid[CUMOD_CONFIG_MAX_IDS];
    int ncontrol_gid;

    /* Per-session (per-connection) limits; 0 where it says "none". */
    uint64_t session_mem_limit;    /* --session-memory-limit, 0: none */
    uint32_t session_max_buffers;  /* --session-max-buffers */
    uint32_t session_max_streams;  /* --session-max-streams */
    uint32_t session_max_segments; /* --session-max-segments */
    uint32_t session_max_inflight; /* --session-max-inflight: launches */
    uint32_t busy_poll_us;         /* --busy-poll-us */
    uint32_t crowded_at;           /* --crowded-at; 0: the cores less 4 */
    uint32_t submit_threads;       /* --submit-threads (0: by the cores) */
    uint32_t max_watch_wait_ms;    /* --max-watch-wait */
    uint32_t session_max_requests; /* --session-max-requests: waiting */

    /* executor mode (internal): cumodd --executor FD */
    int executor_fd;
    int executor_ring_fd; /* the channel ring's memfd; its eventfd is next */
    /* the executor's program (internal, for tests and fuzzers that run the
     * front in their own process): --executor-path PATH; NULL: this one */
    const char *executor_path;
    uint32_t orphan_grace_s; /* --orphan-grace SECONDS */
    const char *adopt_dir;   /* --adopt-dir DIR (the executor's, hidden) */

    /* How this configuration was made: the file read (NULL: none), the
     * instance, the command line (borrowed from main, for SIGHUP), and
     * where each option's value came from. */
    const char *config_file;
    const char *instance;
    const char *config_dir; /* --config-dir: where NAME.conf is looked for */
    int check_only;         /* --check: validate, print, exit */
    int argc;
    char **argv;
    unsigned char src[96];
    cumod_config_strs *strs;
} cumod_config;

typedef enum cumod_config_result {
    CUMOD_CONFIG_RUN = 0,   /* run the daemon (or the executor) */
    CUMOD_CONFIG_EXIT = 1,  /* --help, --version or --check printed: exit 0 */
    CUMOD_CONFIG_USAGE = 2, /* a flag was wrong (printed): exit EX_USAGE */
    CUMOD_CONFIG_BAD = 3,   /* the file was wrong (printed): exit EX_CONFIG */
} cumod_config_result;

/* Parses argv and the configuration file into cfg (which the caller frees
 * with cumod__config_fini, whatever the result; argv is borrowed for the
 * life of cfg). Prints --help, --version, --check's settings and errors
 * itself: each error names the flag, or the file and line, and what was
 * wrong. */
cumod_config_result cumod__config_parse(cumod_config *cfg, int argc,
                                        char **argv);

/* Releases what cfg owns. Accepts a zeroed or half-made one. */
void cumod__config_fini(cumod_config *cfg);

/* The submission threads of an executor by default (--submit-threads
 * 0), by this machine's cores: a quarter of them below 16 (1 to 4), 8
 * from 16. The executor's count; a pool shares it (front/units/unit.c). */
unsigned cumod__submit_threads_default(void);

/* SIGHUP: makes *next from cur's command line and its file read again.
 * On CUMOD_OK the caller applies it (cumod__config_apply) and frees it;
 * otherwise the errors went to the log (CUMOD-CONFIG) and nothing changes.
 * Loop thread. */
int cumod__config_reread(const cumod_config *cur, cumod_config *next);

/* One setting that changed at a reread: its option name, and whether it
 * took effect (1) or needs a restart (0). */
typedef void (*cumod_config_change_cb)(void *arg, const char *name, int live);

/* Copies next's settings that may change at run time into cur, logging
 * each change (CUMOD-CONFIG) and, for the ones that cannot change at run
 * time, that a restart is needed. cb (may be NULL) hears each change.
 * Strings of next that cur keeps are moved into cur. Loop thread. */
void cumod__config_apply(cumod_config *cur, cumod_config *next,
                         cumod_config_change_cb cb, void *arg);

/* Writes every setting as the file's "key = value" lines, each with where
 * its value came from: valid input for --config. */
void cumod__config_print(const cumod_config *cfg, FILE *out);

#endif
