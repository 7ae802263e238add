/* SPDX-License-Identifier: MIT */
/*
 * The option table: every option of cumodd, its flag, its key in the
 * file, its kind, its limits, whether SIGHUP may change it, and its help
 * text. Everything else reads this table: the command line and the file
 * (config.c, config_file.c, config_set.c), --help and cumodd(8)
 * (config_help.c), --check and the reread at SIGHUP (config_reload.c).
 */
#include <limits.h>
#include <stddef.h>
#include <string.h>

#include "config_internal.h"

#define OFF(field) offsetof(cumod_config, field)
#define LIVE CFG_LIVE
#define BYTES CFG_BYTES

/* Every option, in --help's order. Keys of the file are the long names. */
const cfg_opt cumod__cfg_opts[] = {
    {"config", 0, CFG_K_PATH, OFF(config_file), 0, 0, CFG_CMDLINE, "FILE",
     "read settings from FILE (flags win over it)"},
    {"instance", 0, CFG_K_INSTANCE, OFF(instance), 0, 0, CFG_CMDLINE, "NAME",
     "defaults for instance NAME: listen on ipc:///run/cumod-NAME/"
     "cumodd.sock, kernels in /var/lib/cumod/NAME/kernels, device NAME "
     "when it is a number, and " CUMOD_SYSCONFDIR "/cumod/NAME.conf read "
     "when it exists"},
    {"config-dir", 0, CFG_K_PATH, OFF(config_dir), 0, 0, CFG_CMDLINE, "DIR",
     "where --instance NAME finds NAME.conf (default " CUMOD_SYSCONFDIR
     "/cumod)"},
    {"check", 0, CFG_K_FLAG, OFF(check_only), 0, 0, CFG_CMDLINE, NULL,
     "check the settings, print them as a file would give them, and exit"},
    {"kernels", 'k', CFG_K_PATH, OFF(kernel_dir), 0, 0, 0, "DIR",
     "the folder of .cubin, .fatbin, .ptx and .cu files (required; a .cu "
     "is compiled by NVRTC)"},
    {"listen", 'l', CFG_K_STR, OFF(url), 0, 0, 0, "URL",
     "where clients connect (default " CUMOD_DEFAULT_URL ")"},
    {"metrics-listen", 0, CFG_K_STR, OFF(metrics_listen), 0, 0, 0, "ADDR:PORT",
     "serve Prometheus metrics at http://ADDR:PORT/metrics, e.g. "
     "127.0.0.1:9464 (default: off; read at start)"},
    {"device", 'd', CFG_K_DEVICES, OFF(devices), 0, INT_MAX, 0, "N[,M...]|all",
     "the CUDA devices to serve, by ordinal, or all the driver lists; the "
     "first is the device of a session that asks none (default 0)"},
    {"domains", 0, CFG_K_DOMAINS_BY, OFF(domains_by), 0, 0, 0, "none|uid|gid",
     "what gives a session a domain (an executor and CUDA context) of its "
     "own when no [domain NAME] takes it: none (one domain, 'default'), "
     "its uid or its primary gid (default none)"},
    {"domain-option", 0, CFG_K_DOMOPT, OFF(domains), 0, 0, 0, "NAME:KEY=VALUE",
     "a setting of domain NAME, repeatable: KEY is uids, gids (lists of "
     "names or numbers), listen (a socket of its own), start "
     "(always|on-demand), device, memory-max or pool; in the file also as KEY "
     "= "
     "VALUE under [domain NAME]"},
    {"domain-idle", 0, CFG_K_U32, OFF(domain_idle_s), 0, 86400 * 365, LIVE,
     "SECONDS",
     "stop the executor of a domain without sessions this long (default "
     "300; 0: never)"},
    {"domain-memory-max", 0, CFG_K_U64, OFF(domain_mem_limit), 0, 1LL << 50,
     LIVE | BYTES, "BYTES",
     "device memory the sessions of one domain may hold together, where "
     "its memory-max says none (default 0: no limit)"},
    {"standby", 0, CFG_K_U32, OFF(standby), 0, 16, LIVE, "N",
     "spare executors kept per device with their context made, to take over "
     "a domain whose executor died (default 0)"},
    {"pool", 0, CFG_K_U32, OFF(pool), 1, 48, 0, "N",
     "executors (each a CUDA context and an MPS client) serving the default "
     "domain on its device, its sessions spread over them; above 1 needs "
     "--mps own or join (default 1; a [domain] section's pool = N for its "
     "own)"},
    {"mps", 0, CFG_K_STR, OFF(mps), 0, 0, 0, "none|own|join",
     "NVIDIA MPS for pools of executors: own (cumodd starts a control "
     "daemon with a pipe directory of its own and stops it), join (one "
     "already running at --mps-pipe-dir), none (default; executors outside "
     "a pool are never made MPS clients by cumodd)"},
    {"mps-pipe-dir", 0, CFG_K_PATH, OFF(mps_pipe_dir), 0, 0, 0, "DIR",
     "the MPS pipe directory (CUDA_MPS_PIPE_DIRECTORY): own's default is "
     "$RUNTIME_DIRECTORY/mps under systemd, else a new directory in /tmp; "
     "join's is $CUDA_MPS_PIPE_DIRECTORY, else /tmp/nvidia-mps"},
    {"mps-control", 0, CFG_K_PATH, OFF(mps_control), 0, 0, 0, "PATH",
     "the MPS control program --mps own runs (default "
     "nvidia-cuda-mps-control, found in PATH)"},
    {"cuda-library", 0, CFG_K_PATH, OFF(cuda_library), 0, 0, 0, "PATH",
     "the driver to load (default: $CUMOD_CUDA_LIBRARY, else libcuda.so.1)"},
    {"cublas-library", 0, CFG_K_PATH, OFF(cublas_library), 0, 0, 0, "PATH",
     "the cuBLAS that GEMMs load at the first one (default: "
     "$CUMOD_CUBLAS_LIBRARY, else libcublas.so, .so.13, .so.12 as the "
     "dynamic loader finds them, then in /usr/local/cuda/lib64)"},
    {"socket-mode", 0, CFG_K_MODE, OFF(socket_mode), 0, 0777, 0, "MODE",
     "permissions of an ipc:// socket file, octal (default 0660)"},
    {"socket-group", 0, CFG_K_GROUP, OFF(socket_group), 0, 0, 0, "GROUP",
     "group of an ipc:// socket file, a name or a number (default: "
     "cumodd's)"},
    {"allow-uid", 0, CFG_K_UIDS, OFF(allow_uid), 0, 0, LIVE, "LIST",
     "users who may connect, names or numbers, comma-separated, "
     "repeatable (default: anyone who can open the socket)"},
    {"allow-gid", 0, CFG_K_GIDS, OFF(allow_gid), 0, 0, LIVE, "LIST",
     "groups whose members may connect (a peer's primary and supplementary "
     "groups count); as --allow-uid"},
    {"control-uid", 0, CFG_K_UIDS, OFF(control_uid), 0, 0, LIVE, "LIST",
     "users who may send control requests (load, unload, pin, unpin, "
     "reload, unquarantine, kernel settings, global writes) besides root "
     "and cumodd's own user, names or numbers, comma-separated, repeatable "
     "(default: none)"},
    {"control-gid", 0, CFG_K_GIDS, OFF(control_gid), 0, 0, LIVE, "LIST",
     "groups whose members may send control requests; as --control-uid"},
    {"max-connections", 0, CFG_K_U32, OFF(max_connections), 1, 1 << 20, LIVE,
     "N", "client connections at once; more are closed (default 1024)"},
    {"tls-cert", 0, CFG_K_PATH, OFF(tls_cert), 0, 0, LIVE, "FILE",
     "the server's certificate (PEM, its chain may follow) for a "
     "tls+tcp:// listener, which needs one; SIGHUP reads it again for new "
     "connections"},
    {"tls-key", 0, CFG_K_PATH, OFF(tls_key), 0, 0, LIVE, "FILE",
     "the private key of --tls-cert (PEM, not encrypted)"},
    {"tls-ca", 0, CFG_K_PATH, OFF(tls_ca), 0, 0, LIVE, "FILE",
     "CA certificates (PEM): a tls+tcp:// client must present a "
     "certificate they vouch for (default: none asked)"},
    {"allow-cert-subject", 0, CFG_K_SUBJECTS, OFF(allow_subjects), 0, 0, LIVE,
     "LIST",
     "remote clients who may connect: names their certificate carries as "
     "its CN or a DNS subject alternative name, comma-separated, "
     "repeatable; needs --tls-ca (default: any certificate --tls-ca vouches "
     "for)"},
    {"max-message", 0, CFG_K_SIZE, OFF(max_msg), 1024, 1LL << 31, BYTES,
     "BYTES", "largest request accepted (default 64M)"},
    {"log-level", 0, CFG_K_LOG, OFF(log_level), 0, 0, LIVE, "LEVEL",
     "error, warn, notice, info or debug (default info)"},
    {"pin", 0, CFG_K_PINS, OFF(pins), 0, 0, LIVE, "NAME",
     "keep module NAME loaded from the start (repeatable)"},
    {"max-image-size", 0, CFG_K_SIZE, OFF(max_image_size), 64, 1LL << 40,
     LIVE | BYTES, "BYTES", "largest kernel file read (default 256M)"},
    {"max-resident-bytes", 0, CFG_K_U64, OFF(max_resident_bytes), 0, 1LL << 50,
     LIVE | BYTES, "BYTES", "bound on loaded image bytes (default 0: none)"},
    {"max-resident-modules", 0, CFG_K_U32, OFF(max_resident_modules), 0,
     1 << 20, LIVE, "N", "bound on loaded modules (default 0: none)"},
    {"idle-unload", 0, CFG_K_U32, OFF(idle_unload_s), 0, 86400 * 365, LIVE,
     "SECONDS", "unload modules unused this long (default 0: never)"},
    {"jit-opt-level", 0, CFG_K_JIT, OFF(jit.opt_level), 0, 4, LIVE, "N",
     "PTX JIT optimization level 0-4 (CU_JIT_OPTIMIZATION_LEVEL; default: "
     "the driver's, 4)"},
    {"jit-max-registers", 0, CFG_K_JIT, OFF(jit.max_registers), 1, 255, LIVE,
     "N",
     "PTX JIT register cap per thread (CU_JIT_MAX_REGISTERS; default: "
     "none)"},
    {"jit-line-info", 0, CFG_K_JIT, OFF(jit.line_info), 0, 1, LIVE, "0|1",
     "PTX JIT line information for profilers (CU_JIT_GENERATE_LINE_INFO; "
     "default 0)"},
    {"jit-fast-compile", 0, CFG_K_JIT, OFF(jit.fast_compile), 0, 3, LIVE, "N",
     "PTX JIT fast-compile level where the driver takes it "
     "(CU_JIT_FAST_COMPILE; default: none)"},
    {"nvrtc-option", 0, CFG_K_NVRTC, OFF(nvrtc_opts), 0, 0, LIVE, "OPT",
     "an NVRTC option for every NAME.cu, repeatable, one option each; given, "
     "the list replaces the defaults -std=c++17 and -default-device (the "
     "device's -arch and -I the kernel folder are always added, the arch "
     "unless an option names one)"},
    {"nvrtc-library", 0, CFG_K_PATH, OFF(nvrtc_library), 0, 0, 0, "PATH",
     "NVRTC to load for NAME.cu files (default: $CUMOD_NVRTC_LIBRARY, else "
     "libnvrtc.so, libnvrtc.so.13, libnvrtc.so.12, then the same in "
     "/usr/local/cuda/lib64)"},
    {"compile-cache", 0, CFG_K_PATH, OFF(compile_cache), 0, 0, 0, "DIR",
     "where compiled NAME.cu images are kept across restarts (default: "
     "$CACHE_DIRECTORY, else $XDG_CACHE_HOME/cumod, else ~/.cache/cumod; "
     "'none': no cache)"},
    {"compile-timeout", 0, CFG_K_U32, OFF(compile_timeout_s), 1, 86400, LIVE,
     "SECONDS",
     "a NAME.cu compile running this long is killed (default "
     "60); its CPU time is limited to the same"},
    {"compile-memory-max", 0, CFG_K_U64, OFF(compile_memory_max), 0, 1LL << 50,
     LIVE | BYTES, "BYTES",
     "address space a NAME.cu compile may take beyond the compiler's own "
     "libraries (default 4G; 0: no limit)"},
    {"module-option", 0, CFG_K_MODOPT, OFF(mod_opts), 0, 0, LIVE,
     "NAME:KEY=VALUE",
     "a setting for one module, repeatable: KEY is jit-opt-level, "
     "jit-max-registers, jit-line-info, jit-fast-compile or nvrtc-option; in "
     "the file also as KEY = VALUE under [module NAME]"},
    {"direct-launches", 0, CFG_K_BOOL, OFF(direct_launches), 0, 1, 0, "YES|NO",
     "each session's executor reads its ring and launches what it can "
     "check itself, without the front (default: yes; docs/isolation.md)"},
    {"allow-pointer-values", 0, CFG_K_BOOL, OFF(allow_pointer_values), 0, 1,
     LIVE, NULL,
     "let a launch give a value (bytes) where a C++ kernel's signature says "
     "pointer or reference (default: refused; a buffer reference is "
     "needed); in the file: yes or no"},
    {"session-memory-limit", 0, CFG_K_U64, OFF(session_mem_limit), 0, 1LL << 50,
     LIVE | BYTES, "BYTES",
     "device memory one connection may hold (default 0: no limit)"},
    {"session-max-buffers", 0, CFG_K_U32, OFF(session_max_buffers), 1, 1 << 24,
     LIVE, "N", "buffers one connection may hold (default 65536)"},
    {"session-max-streams", 0, CFG_K_U32, OFF(session_max_streams), 1,
     (1 << 20) - 2, LIVE, "N",
     "streams one connection may create (default 1024)"},
    {"session-max-segments", 0, CFG_K_U32, OFF(session_max_segments), 1,
     1 << 16, LIVE, "N", "shared segments one connection may map (default 64)"},
    {"session-max-inflight", 0, CFG_K_U32, OFF(session_max_inflight), 1,
     1 << 24, LIVE, "N",
     "launches and copies of one connection not yet complete (default "
     "65536)"},
    {"session-max-requests", 0, CFG_K_U32, OFF(session_max_requests), 1,
     1 << 20, LIVE, "N",
     "requests of one connection waiting for their answer (default 4096)"},
    {"busy-poll-us", 0, CFG_K_U32, OFF(busy_poll_us), 0, 100000, LIVE, "US",
     "how long the loop polls, instead of sleeping, after a client's "
     "fast-path request or work sent to the GPU (default 200; 0: never, "
     "at some microseconds per launch)"},
    {"crowded-at", 0, CFG_K_U32, OFF(crowded_at), 0, 100000, LIVE, "N",
     "how many clients using their rings at once make cumodd tell them to "
     "sleep sooner instead of spinning (default 0: the cores less 4, at "
     "least 2)"},
    {"max-watch-wait", 0, CFG_K_U32, OFF(max_watch_wait_ms), 0, 60000, LIVE,
     "MS",
     "the longest a client's watch for change events may wait for the next "
     "one (default 60000; longer waits asked are refused)"},
    {"launch-deadline", 0, CFG_K_U32, OFF(launch_deadline_ms), 0, 86400000,
     LIVE, "MS",
     "a launch still running this long is a hang (default 0: none; a "
     "launch may ask its own)"},
    {"max-launch-deadline", 0, CFG_K_U32, OFF(max_launch_deadline_ms), 0,
     86400000, LIVE, "MS",
     "the most any launch may run, its own deadline or none asked "
     "(default 0: no cap)"},
    {"drain-timeout", 0, CFG_K_U32, OFF(drain_ms), 0, 3600000, LIVE, "MS",
     "at SIGTERM, how long work in flight may finish (default 10000)"},
    {"restart-wait", 0, CFG_K_U32, OFF(restart_wait_ms), 0, 3600000, LIVE, "MS",
     "how long a request that arrives while the executor restarts waits "
     "for the new one before CUMOD_ECTXLOST (default 2000; 0: at once)"},
    {"quarantine-after", 0, CFG_K_U32, OFF(quarantine_after), 1, 1000000, LIVE,
     "N",
     "faults a module generation may cause before it is quarantined "
     "(default 1)"},
    {"stuck-timeout", 0, CFG_K_U32, OFF(stuck_ms), 500, 3600000, LIVE, "MS",
     "restart an executor silent this long (default 10000)"},
    {"orphan-grace", 0, CFG_K_U32, OFF(orphan_grace_s), 0, 86400, 0, "SECONDS",
     "executors outlive a front that dies (killed, crashed) this long, "
     "keeping their contexts and memory, for a new front to adopt at "
     "exec-PID.sock in the runtime directory (default 0: they die with "
     "it)"},
    {"submit-threads", 0, CFG_K_U32, OFF(submit_threads), 0, 64, 0, "N",
     "threads of each executor that enqueue sessions' work and read their "
     "rings, each owning the streams given to it, the fewest first "
     "(default 0: a quarter of the cores below 16, 1 to 4; 8 from 16)"},
    {"executor", 0, CFG_K_INT, OFF(executor_fd), 0, INT_MAX,
     CFG_CMDLINE | CFG_HIDDEN, "FD", NULL},
    {"executor-ring", 0, CFG_K_INT, OFF(executor_ring_fd), 0, INT_MAX,
     CFG_CMDLINE | CFG_HIDDEN, "FD", NULL},
    {"executor-path", 0, CFG_K_PATH, OFF(executor_path), 0, 0,
     CFG_CMDLINE | CFG_HIDDEN, "PATH", NULL},
    {"adopt-dir", 0, CFG_K_PATH, OFF(adopt_dir), 0, 0, CFG_CMDLINE | CFG_HIDDEN,
     "DIR", NULL},
    {"help", 'h', CFG_K_HELP, 0, 0, 0, CFG_CMDLINE, NULL, "this text"},
    {"version", 'V', CFG_K_VERSION, 0, 0, 0, CFG_CMDLINE, NULL, "the version"},
    {"man", 0, CFG_K_MAN, 0, 0, 0, CFG_CMDLINE | CFG_HIDDEN, NULL,
     "print the manual page cumodd(8), troff, made from this table"},
};

const size_t cumod__cfg_nopts =
    sizeof(cumod__cfg_opts) / sizeof(cumod__cfg_opts[0]);

_Static_assert(sizeof(cumod__cfg_opts) / sizeof(cumod__cfg_opts[0]) <=
                   CFG_MAX_OPTS,
               "cumod_config.src has a byte per option");

const cfg_opt *
cumod__cfg_find(const char *key)
{
    char norm[64];
    size_t n = strlen(key);

    if (n >= sizeof(norm))
        return NULL;
    for (size_t i = 0; i <= n; i++)
        norm[i] = key[i] == '_' ? '-' : key[i];
    for (size_t i = 0; i < cumod__cfg_nopts; i++)
        if (strcmp(cumod__cfg_opts[i].name, norm) == 0)
            return &cumod__cfg_opts[i];
    return NULL;
}
