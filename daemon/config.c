/*
 * The option table and what reads it: the command line (getopt_long over
 * the table), the file (config_file.c hands each key here), --help (made
 * from the table), --check (config_print), and the reread at SIGHUP.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_internal.h"
#include "cumod/version.h"
#include "modopts.h"

#define OFF(field) offsetof(cumod_config, field)
#define LIVE CFG_LIVE
#define BYTES CFG_BYTES

/* Every option, in --help's order. Keys of the file are the long names. */
static const cfg_opt cfg_opts[] = {
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
     "(always|on-demand), device or memory-max; in the file also as KEY = "
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
    {"submit-threads", 0, CFG_K_U32, OFF(submit_threads), 0, 64, 0, "N",
     "threads of each executor that enqueue sessions' work, each owning "
     "the streams hashed to it (default 0: a quarter of the cores, 1 to "
     "4)"},
    {"executor", 0, CFG_K_INT, OFF(executor_fd), 0, INT_MAX,
     CFG_CMDLINE | CFG_HIDDEN, "FD", NULL},
    {"executor-ring", 0, CFG_K_INT, OFF(executor_ring_fd), 0, INT_MAX,
     CFG_CMDLINE | CFG_HIDDEN, "FD", NULL},
    {"executor-path", 0, CFG_K_PATH, OFF(executor_path), 0, 0,
     CFG_CMDLINE | CFG_HIDDEN, "PATH", NULL},
    {"help", 'h', CFG_K_HELP, 0, 0, 0, CFG_CMDLINE, NULL, "this text"},
    {"version", 'V', CFG_K_VERSION, 0, 0, 0, CFG_CMDLINE, NULL, "the version"},
    {"man", 0, CFG_K_MAN, 0, 0, 0, CFG_CMDLINE | CFG_HIDDEN, NULL,
     "print the manual page cumodd(8), troff, made from this table"},
};

#define CFG_NOPTS (sizeof(cfg_opts) / sizeof(cfg_opts[0]))

_Static_assert(CFG_NOPTS <= sizeof(((cumod_config *)0)->src),
               "cumod_config.src has a byte per option");

/* --- Owned strings ------------------------------------------------------ */

struct cumod_config_strs {
    size_t n, cap;
    char **v;
    cfg_domain_where *dwhere; /* CUMOD_CONFIG_MAX_DOMAINS, or NULL */
};

static cumod_config_strs *
cfg_strs(cumod_config *cfg)
{
    if (cfg->strs == NULL)
        cfg->strs = calloc(1, sizeof(*cfg->strs));
    return cfg->strs;
}

cfg_domain_where *
cumod__cfg_domain_where(cumod_config *cfg)
{
    cumod_config_strs *st = cfg_strs(cfg);

    if (st != NULL && st->dwhere == NULL)
        st->dwhere = calloc(CUMOD_CONFIG_MAX_DOMAINS, sizeof(*st->dwhere));
    return st != NULL ? st->dwhere : NULL;
}

const char *
cumod__cfg_strdup(cumod_config *cfg, const char *s)
{
    cumod_config_strs *st = cfg_strs(cfg);
    char *d;

    if (st == NULL)
        return NULL;
    if (st->n == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 16;
        char **v = realloc(st->v, cap * sizeof(*v));
        if (v == NULL)
            return NULL;
        st->v = v;
        st->cap = cap;
    }
    if ((d = strdup(s)) == NULL)
        return NULL;
    st->v[st->n++] = d;
    return d;
}

void
cumod__config_fini(cumod_config *cfg)
{
    if (cfg == NULL || cfg->strs == NULL)
        return;
    for (size_t i = 0; i < cfg->strs->n; i++)
        free(cfg->strs->v[i]);
    free(cfg->strs->v);
    free(cfg->strs->dwhere);
    free(cfg->strs);
    cfg->strs = NULL;
}

/* --- Errors -------------------------------------------------------------- */

void
cumod__cfg_error(cfg_ctx *cx, const cfg_opt *o, const char *fmt, ...)
{
    va_list ap;
    char what[600];

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    cx->errors++;
    if (cx->file != NULL)
        fprintf(cx->err, "cumodd: %s:%d: %s%s%s\n", cx->file, cx->line,
                o ? o->name : "", o ? ": " : "", what);
    else
        fprintf(cx->err, "cumodd: %s%s%s%s\n", o ? "--" : "", o ? o->name : "",
                o ? ": " : "", what);
}

/* --- Values -------------------------------------------------------------- */

/* A number, with a size suffix where bytes is set: K, M, G, T (powers of
 * 1024; "KiB" and "k" too). */
static int
cfg_number(const char *s, int base, int bytes, long long lo, long long hi,
           long long *out)
{
    char *end;
    long long v;
    unsigned shift = 0;

    if (s[0] == '\0' || s[0] == '-' || s[0] == '+' || s[0] == ' ')
        return -1;
    errno = 0;
    v = strtoll(s, &end, base);
    if (errno != 0 || end == s)
        return -1;
    if (bytes && *end != '\0') {
        switch (*end) {
        case 'k':
        case 'K':
            shift = 10;
            break;
        case 'M':
            shift = 20;
            break;
        case 'G':
            shift = 30;
            break;
        case 'T':
            shift = 40;
            break;
        default:
            return -1;
        }
        end++;
        if (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0)
            end += strlen(end);
        if (v > (LLONG_MAX >> shift))
            return -1;
        v <<= shift;
    }
    if (*end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* A module name as the catalog names modules: [A-Za-z0-9_.-]{1,128}. */
static int
cfg_module_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 128)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '.' ||
              s[i] == '-'))
            return 0;
    return 1;
}

/* An instance name: what a systemd instance may be and a path may hold. */
static int
cfg_instance_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64 || s[0] == '.')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '.' ||
              s[i] == '-' || s[i] == '@'))
            return 0;
    return 1;
}

/* A user or group, by number or name. */
static int
cfg_id(const char *s, int group, uint32_t *out)
{
    long long v;
    if (cfg_number(s, 10, 0, 0, 0xfffffffeLL, &v) == 0) {
        *out = (uint32_t)v;
        return 0;
    }
    char buf[4096];
    if (group) {
        struct group gr, *g = NULL;
        if (getgrnam_r(s, &gr, buf, sizeof(buf), &g) != 0 || g == NULL)
            return -1;
        *out = (uint32_t)g->gr_gid;
    } else {
        struct passwd pw, *p = NULL;
        if (getpwnam_r(s, &pw, buf, sizeof(buf), &p) != 0 || p == NULL)
            return -1;
        *out = (uint32_t)p->pw_uid;
    }
    return 0;
}

int
cumod__cfg_number(const char *s, int base, int bytes, long long lo,
                  long long hi, long long *out)
{
    return cfg_number(s, base, bytes, lo, hi, out);
}

int
cumod__cfg_id(const char *s, int group, uint32_t *out)
{
    return cfg_id(s, group, out);
}

static const char *
cfg_trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    return s;
}

/* Appends a name to --allow-cert-subject: printable, and all of them
 * within what the access policy copies (access.h). */
static int
cfg_subject(cfg_ctx *cx, const cfg_opt *o, const char *item)
{
    cumod_config *cfg = cx->cfg;
    size_t total = strlen(item) + 1;
    const char *d;

    for (int i = 0; i < cfg->nallow_subjects; i++)
        total += strlen(cfg->allow_subjects[i]) + 1;
    for (const char *c = item; *c; c++)
        if ((unsigned char)*c < 0x21 || (unsigned char)*c > 0x7e) {
            cumod__cfg_error(cx, o, "'%s' is not a certificate name", item);
            return -1;
        }
    if (strlen(item) >= 128 || cfg->nallow_subjects == CUMOD_CONFIG_MAX_IDS ||
        total > 8192) {
        cumod__cfg_error(cx, o,
                         "at most %d names of 127 bytes each, 8 KiB in all",
                         CUMOD_CONFIG_MAX_IDS);
        return -1;
    }
    if ((d = cumod__cfg_strdup(cfg, item)) == NULL) {
        cumod__cfg_error(cx, o, "out of memory");
        return -1;
    }
    cfg->allow_subjects[cfg->nallow_subjects++] = d;
    return 0;
}

/* An id list (CFG_K_UIDS, CFG_K_GIDS): its array is at o->off, its count
 * right after it (config.h). */
static uint32_t *
cfg_ids(cumod_config *cfg, const cfg_opt *o, int **n)
{
    char *at = (char *)cfg + o->off;
    *n = (int *)(void *)(at + sizeof(uint32_t) * CUMOD_CONFIG_MAX_IDS);
    return (uint32_t *)(void *)at;
}
_Static_assert(offsetof(cumod_config, nallow_uid) ==
                       offsetof(cumod_config, allow_uid) +
                           sizeof(uint32_t) * CUMOD_CONFIG_MAX_IDS &&
                   offsetof(cumod_config, nallow_gid) ==
                       offsetof(cumod_config, allow_gid) +
                           sizeof(uint32_t) * CUMOD_CONFIG_MAX_IDS &&
                   offsetof(cumod_config, ncontrol_uid) ==
                       offsetof(cumod_config, control_uid) +
                           sizeof(uint32_t) * CUMOD_CONFIG_MAX_IDS &&
                   offsetof(cumod_config, ncontrol_gid) ==
                       offsetof(cumod_config, control_gid) +
                           sizeof(uint32_t) * CUMOD_CONFIG_MAX_IDS,
               "an id list's count follows its array");

/* Appends each comma- or space-separated item of value to a list. */
static int
cfg_list(cfg_ctx *cx, const cfg_opt *o, const char *value)
{
    cumod_config *cfg = cx->cfg;
    char *copy = strdup(value), *save = NULL;
    int rv = 0, any = 0;

    if (copy == NULL) {
        cumod__cfg_error(cx, o, "out of memory");
        return -1;
    }
    for (char *tok = strtok_r(copy, ", \t", &save); tok != NULL;
         tok = strtok_r(NULL, ", \t", &save)) {
        const char *item = cfg_trim(tok);
        any = 1;
        if (o->kind == CFG_K_PINS) {
            if (!cfg_module_name(item)) {
                cumod__cfg_error(cx, o,
                                 "'%s' is not a module name (1 to 128 of "
                                 "A-Z a-z 0-9 _ . -)",
                                 item);
                rv = -1;
            } else if (cfg->npins == CUMOD_CONFIG_MAX_PINS) {
                cumod__cfg_error(cx, o, "at most %d modules",
                                 CUMOD_CONFIG_MAX_PINS);
                rv = -1;
                break;
            } else {
                const char *d = cumod__cfg_strdup(cfg, item);
                if (d == NULL) {
                    cumod__cfg_error(cx, o, "out of memory");
                    rv = -1;
                    break;
                }
                cfg->pins[cfg->npins++] = d;
            }
            continue;
        }
        if (o->kind == CFG_K_SUBJECTS) {
            if (cfg_subject(cx, o, item) != 0) {
                rv = -1;
                break;
            }
            continue;
        }
        int group = o->kind == CFG_K_GIDS;
        int *n;
        uint32_t *ids = cfg_ids(cfg, o, &n);
        uint32_t id;
        if (cfg_id(item, group, &id) != 0) {
            cumod__cfg_error(cx, o, "'%s' is not a %s name or number", item,
                             group ? "group" : "user");
            rv = -1;
        } else if (*n == CUMOD_CONFIG_MAX_IDS) {
            cumod__cfg_error(cx, o, "at most %d entries", CUMOD_CONFIG_MAX_IDS);
            rv = -1;
            break;
        } else {
            ids[(*n)++] = id;
        }
    }
    free(copy);
    if (!any && rv == 0 && cx->file == NULL) {
        cumod__cfg_error(cx, o, "an empty list");
        rv = -1;
    }
    return rv;
}

/* --device N[,M...]|all. The whole list is read before any of it is
 * kept: a later value replaces an earlier one (flags win over the file). */
static int
cfg_devices(cfg_ctx *cx, const cfg_opt *o, const char *value)
{
    cumod_config *cfg = cx->cfg;
    int devs[CUMOD_CONFIG_MAX_DEVICES], n = 0, rv = 0;
    char *copy, *save = NULL;

    if (strcmp(value, "all") == 0) {
        cfg->devices_all = 1;
        cfg->ndevices = 0;
        cfg->device = 0;
        return 0;
    }
    if ((copy = strdup(value)) == NULL) {
        cumod__cfg_error(cx, o, "out of memory");
        return -1;
    }
    for (char *tok = strtok_r(copy, ", \t", &save); tok != NULL && rv == 0;
         tok = strtok_r(NULL, ", \t", &save)) {
        long long v;
        int dup = 0;
        if (strcmp(tok, "all") == 0) {
            cumod__cfg_error(cx, o,
                             "'all' stands alone (every device), not in a "
                             "list: '%s'",
                             value);
            rv = -1;
        } else if (cfg_number(tok, 10, 0, 0, INT_MAX, &v) != 0) {
            /* "is not a number from 0 to" as for every number */
            int alone = strcmp(tok, value) == 0;
            cumod__cfg_error(cx, o,
                             "'%s' is not a number from 0 to %d%s%s%s "
                             "(a device ordinal: N[,M...] or all)",
                             tok, INT_MAX, alone ? "" : " in '",
                             alone ? "" : value, alone ? "" : "'");
            rv = -1;
        } else {
            for (int i = 0; i < n; i++)
                dup |= devs[i] == (int)v;
            if (dup) {
                cumod__cfg_error(cx, o, "device %lld is listed twice in '%s'",
                                 v, value);
                rv = -1;
            } else if (n == CUMOD_CONFIG_MAX_DEVICES) {
                cumod__cfg_error(cx, o, "at most %d devices in '%s'",
                                 CUMOD_CONFIG_MAX_DEVICES, value);
                rv = -1;
            } else {
                devs[n++] = (int)v;
            }
        }
    }
    free(copy);
    if (rv == 0 && n == 0) {
        cumod__cfg_error(cx, o, "an empty list (N[,M...] or all)");
        rv = -1;
    }
    if (rv != 0)
        return -1;
    memcpy(cfg->devices, devs, sizeof(int) * (size_t)n);
    cfg->ndevices = n;
    cfg->devices_all = 0;
    cfg->device = devs[0];
    return 0;
}

/* Sets option o from value (from a flag, or the file's line). */
int
cumod__cfg_set(cfg_ctx *cx, const cfg_opt *o, const char *value)
{
    cumod_config *cfg = cx->cfg;
    char *p = (char *)cfg + o->off;
    long long v;
    int idx = (int)(o - cfg_opts);

    switch (o->kind) {
    case CFG_K_STR:
    case CFG_K_PATH:
    case CFG_K_INSTANCE: {
        if (value[0] == '\0') {
            cumod__cfg_error(cx, o, "an empty value");
            return -1;
        }
        if (o->kind == CFG_K_INSTANCE && !cfg_instance_name(value)) {
            cumod__cfg_error(cx, o,
                             "'%s' is not an instance name (1 to 64 of "
                             "A-Z a-z 0-9 _ . - @, not starting with .)",
                             value);
            return -1;
        }
        const char *d = cumod__cfg_strdup(cfg, value);
        if (d == NULL) {
            cumod__cfg_error(cx, o, "out of memory");
            return -1;
        }
        memcpy(p, &d, sizeof(d));
        break;
    }
    case CFG_K_INT:
    case CFG_K_U32:
    case CFG_K_U64:
    case CFG_K_SIZE:
    case CFG_K_MODE:
    case CFG_K_JIT:
        if (cfg_number(value, o->kind == CFG_K_MODE ? 8 : 10,
                       (o->flags & CFG_BYTES) != 0, o->lo, o->hi, &v) != 0) {
            if (o->kind == CFG_K_MODE)
                cumod__cfg_error(cx, o,
                                 "'%s' is not an octal mode from 0 to "
                                 "0777",
                                 value);
            else if (o->flags & CFG_BYTES)
                cumod__cfg_error(cx, o,
                                 "'%s' is not a size from %lld to %lld bytes "
                                 "(a number, with K, M, G or T for KiB, MiB, "
                                 "GiB, TiB)",
                                 value, o->lo, o->hi);
            else
                cumod__cfg_error(cx, o,
                                 "'%s' is not a number from %lld to %lld",
                                 value, o->lo, o->hi);
            return -1;
        }
        if (o->kind == CFG_K_U64) {
            uint64_t u = (uint64_t)v;
            memcpy(p, &u, sizeof(u));
        } else if (o->kind == CFG_K_U32) {
            uint32_t u = (uint32_t)v;
            memcpy(p, &u, sizeof(u));
        } else if (o->kind == CFG_K_SIZE) {
            size_t u = (size_t)v;
            memcpy(p, &u, sizeof(u));
        } else {
            int i = (int)v;
            memcpy(p, &i, sizeof(i));
        }
        break;
    case CFG_K_LOG:
        if (cumod__log_parse_level(value, &cfg->log_level) != 0) {
            cumod__cfg_error(cx, o,
                             "'%s' is not one of error, warn, notice, info, "
                             "debug",
                             value);
            return -1;
        }
        break;
    case CFG_K_GROUP: {
        uint32_t g;
        if (cfg_id(value, 1, &g) != 0) {
            cumod__cfg_error(cx, o, "'%s' is not a group name or number",
                             value);
            return -1;
        }
        cfg->socket_group = (int)g;
        break;
    }
    case CFG_K_PINS:
    case CFG_K_UIDS:
    case CFG_K_GIDS:
    case CFG_K_SUBJECTS:
        /* A list given by flags replaces the file's (flags win). */
        if (!cx->file && cfg->src[idx] != CUMOD_SRC_FLAG) {
            int *n;
            if (o->kind == CFG_K_PINS)
                cfg->npins = 0;
            else if (o->kind == CFG_K_SUBJECTS)
                cfg->nallow_subjects = 0;
            else if (cfg_ids(cfg, o, &n) != NULL)
                *n = 0;
        }
        if (cfg_list(cx, o, value) != 0)
            return -1;
        break;
    case CFG_K_NVRTC:
    case CFG_K_MODOPT: {
        /* One item per value: an NVRTC option may hold commas and spaces.
         * A list given by flags replaces the file's (flags win). */
        int nv = o->kind == CFG_K_NVRTC;
        int *n = nv ? &cfg->nnvrtc_opts : &cfg->nmod_opts;
        const char **items = nv ? cfg->nvrtc_opts : cfg->mod_opts;
        if (!cx->file && cfg->src[idx] != CUMOD_SRC_FLAG)
            *n = 0;
        if (nv)
            cfg->nvrtc_opts_set = 1;
        if (value[0] == '\0') {
            if (nv)
                break; /* an empty list: no defaults */
            cumod__cfg_error(cx, o, "an empty value");
            return -1;
        }
        if (!nv) {
            char name[129], msg[512];
            const char *key, *val;
            size_t keylen;
            if (cumod__modopt_split(value, name, &key, &keylen, &val, msg,
                                    sizeof(msg)) != 0) {
                cumod__cfg_error(cx, o, "%s", msg);
                return -1;
            }
        }
        if (*n == CUMOD_CONFIG_MAX_OPTS) {
            cumod__cfg_error(cx, o, "at most %d entries",
                             CUMOD_CONFIG_MAX_OPTS);
            return -1;
        }
        const char *d = cumod__cfg_strdup(cfg, value);
        if (d == NULL) {
            cumod__cfg_error(cx, o, "out of memory");
            return -1;
        }
        items[(*n)++] = d;
        break;
    }
    case CFG_K_DEVICES:
        if (cfg_devices(cx, o, value) != 0)
            return -1;
        break;
    case CFG_K_DOMAINS_BY:
        if (strcmp(value, "none") == 0)
            cfg->domains_by = CUMOD_DOMAINS_NONE;
        else if (strcmp(value, "uid") == 0)
            cfg->domains_by = CUMOD_DOMAINS_UID;
        else if (strcmp(value, "gid") == 0)
            cfg->domains_by = CUMOD_DOMAINS_GID;
        else {
            cumod__cfg_error(cx, o, "'%s' is not none, uid or gid", value);
            return -1;
        }
        break;
    case CFG_K_DOMOPT:
        /* Domains given by flags replace the file's (flags win), as
         * --module-option's list does. */
        if (!cx->file && cfg->src[idx] != CUMOD_SRC_FLAG) {
            memset(cfg->domains, 0, sizeof(cfg->domains));
            cfg->ndomains = 0;
        }
        if (cumod__cfg_domain_set(cx, o, value) != 0)
            return -1;
        break;
    case CFG_K_FLAG:
        cfg->check_only = 1;
        break;
    case CFG_K_BOOL: {
        int b;
        if (strcmp(value, "yes") == 0 || strcmp(value, "true") == 0 ||
            strcmp(value, "1") == 0 || strcmp(value, "on") == 0)
            b = 1;
        else if (strcmp(value, "no") == 0 || strcmp(value, "false") == 0 ||
                 strcmp(value, "0") == 0 || strcmp(value, "off") == 0)
            b = 0;
        else {
            cumod__cfg_error(cx, o, "'%s' is not yes or no", value);
            return -1;
        }
        memcpy(p, &b, sizeof(b));
        break;
    }
    default:
        return -1;
    }
    cumod__cfg_from(cx, o);
    return 0;
}

void
cumod__cfg_from(cfg_ctx *cx, const cfg_opt *o)
{
    cx->cfg->src[o - cfg_opts] = cx->file ? CUMOD_SRC_FILE : CUMOD_SRC_FLAG;
}

const cfg_opt *
cumod__cfg_find(const char *key)
{
    char norm[64];
    size_t n = strlen(key);

    if (n >= sizeof(norm))
        return NULL;
    for (size_t i = 0; i <= n; i++)
        norm[i] = key[i] == '_' ? '-' : key[i];
    for (size_t i = 0; i < CFG_NOPTS; i++)
        if (strcmp(cfg_opts[i].name, norm) == 0)
            return &cfg_opts[i];
    return NULL;
}

/* --- The command line ---------------------------------------------------- */

static void
cfg_usage(FILE *f)
{
    fprintf(f,
            "Usage: cumodd --kernels DIR [options]\n"
            "       cumodd --config FILE [options]\n"
            "       cumodd --instance NAME [options]\n"
            "Keeps the CUDA kernels of DIR loaded on the GPUs of --device and "
            "runs\nlaunch requests from clients (libcumod, cumodctl) over "
            "nng.\n"
            "\n"
            "Every option (but --config, --instance, --check, --help and\n"
            "--version) is also a key of the configuration file, an INI file\n"
            "of \"key = value\" lines (optionally under [cumodd]); flags win\n"
            "over the file. SIGHUP rescans the kernel folder and rereads the\n"
            "file. BYTES take K, M, G or T (KiB...). Lists are "
            "comma-separated.\n"
            "Settings of one module go under [module NAME] in the file "
            "(jit-opt-level,\n"
            "jit-max-registers, jit-line-info, jit-fast-compile, "
            "nvrtc-option), or in\n"
            "NAME.ptx.opts and NAME.cu.opts beside its image.\n"
            "Settings of one domain go under [domain NAME] (uids, gids, "
            "listen, start,\ndevice, memory-max).\n\n");
    for (size_t i = 0; i < CFG_NOPTS; i++) {
        const cfg_opt *o = &cfg_opts[i];
        char head[64];
        if (o->flags & CFG_HIDDEN)
            continue;
        snprintf(head, sizeof(head), "%c%c%c --%s%s%s", o->letter ? '-' : ' ',
                 o->letter ? o->letter : ' ', o->letter ? ',' : ' ', o->name,
                 o->arg ? " " : "", o->arg ? o->arg : "");
        /* The help text, wrapped at 76 columns under a 29-column head. */
        const char *h = o->help;
        int col = fprintf(f, "  %s", head);
        if (col > 28) {
            fputc('\n', f);
            col = 0;
        }
        while (*h) {
            fprintf(f, "%*s", 29 - col, "");
            col = 29;
            const char *end = h;
            const char *brk = NULL;
            while (*end && col + (end - h) < 78) {
                if (*end == ' ')
                    brk = end;
                end++;
            }
            if (*end && brk != NULL)
                end = brk;
            fprintf(f, "%.*s\n", (int)(end - h), h);
            h = *end == ' ' ? end + 1 : end;
            col = 0;
        }
    }
    fprintf(f, "\nExit status: 0 after SIGTERM or SIGINT (or a --check that "
               "passed), 64 for a\nwrong flag, 78 for a wrong configuration "
               "file or a missing kernel folder,\n69 when the driver, the "
               "device or the listen address is unusable.\n");
}

/* s in troff: backslashes doubled, hyphens as \-, a leading dot or quote
 * escaped. */
static void
cfg_troff(FILE *f, const char *s)
{
    if (*s == '.' || *s == '\'')
        fputs("\\&", f);
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\e", f);
        else if (*s == '-')
            fputs("\\-", f);
        else
            fputc(*s, f);
    }
}

/* cumodd(8), from the same table as --help: every option it lists. */
static void
cfg_man(FILE *f)
{
    fprintf(f, ".TH CUMODD 8 \"\" \"cumod %s\" \"System Administration\"\n",
            CUMOD_VERSION_STRING);
    fputs(".SH NAME\n"
          "cumodd \\- keep CUDA kernels loaded and run clients' launches\n"
          ".SH SYNOPSIS\n"
          ".B cumodd\n"
          "\\fB\\-\\-kernels\\fR \\fIDIR\\fR [\\fIoptions\\fR]\n"
          ".br\n"
          ".B cumodd\n"
          "\\fB\\-\\-config\\fR \\fIFILE\\fR [\\fIoptions\\fR]\n"
          ".br\n"
          ".B cumodd\n"
          "\\fB\\-\\-instance\\fR \\fINAME\\fR [\\fIoptions\\fR]\n"
          ".SH DESCRIPTION\n"
          "\\fBcumodd\\fR holds one CUDA Driver API context on one GPU, "
          "watches a kernel folder with inotify, and loads and unloads the "
          "modules of its \\fB.cubin\\fR, \\fB.fatbin\\fR, "
          "\\fB.ptx\\fR and \\fB.cu\\fR files (CUDA C++ sources, "
          "compiled by NVRTC) as they appear, change and go. Client "
          "processes (libcumod, \\fBcumodctl\\fR(1)) submit launches, "
          "copies and waits over nng, without a CUDA context of their own. "
          "A new file in the folder changes what the next launch runs; "
          "launches in flight finish on the old code; a broken file never "
          "replaces a working one. A kernel that faults or hangs costs its "
          "own work: the daemon restarts its executor process and "
          "quarantines the module's bytes.\n"
          ".PP\n"
          "Every option but \\fB\\-\\-config\\fR, "
          "\\fB\\-\\-instance\\fR, \\fB\\-\\-check\\fR, "
          "\\fB\\-\\-help\\fR and \\fB\\-\\-version\\fR is also a key "
          "of the configuration file: an INI file of \\fIkey\\fR = "
          "\\fIvalue\\fR lines, optionally under [cumodd]. Flags win over "
          "the file. \\fIBYTES\\fR take K, M, G or T (KiB...); lists are "
          "comma-separated.\n"
          ".SH OPTIONS\n",
          f);
    for (size_t i = 0; i < CFG_NOPTS; i++) {
        const cfg_opt *o = &cfg_opts[i];
        if (o->flags & CFG_HIDDEN)
            continue;
        fputs(".TP\n", f);
        if (o->letter)
            fprintf(f, "\\fB\\-%c\\fR, ", o->letter);
        fputs("\\fB\\-\\-", f);
        cfg_troff(f, o->name);
        fputs("\\fR", f);
        if (o->arg) {
            fputs(" \\fI", f);
            cfg_troff(f, o->arg);
            fputs("\\fR", f);
        }
        fputc('\n', f);
        cfg_troff(f, o->help);
        if (o->flags & CFG_CMDLINE)
            fputs(" (a flag only, not a key of the file)", f);
        else if (o->flags & CFG_LIVE)
            fputs(" (rereadable: SIGHUP applies a changed value)", f);
        fputs(".\n", f);
    }
    fputs(
        ".SH SIGNALS\n"
        ".TP\n"
        ".B SIGHUP\n"
        "rescan the kernel folder and reread the configuration file "
        "(options marked rereadable take their new values).\n"
        ".TP\n"
        ".BR SIGTERM \", \" SIGINT\n"
        "stop: new work is refused, work in flight may finish within "
        "\\fB\\-\\-drain\\-timeout\\fR, then the executor and the "
        "daemon exit.\n"
        ".SH ENVIRONMENT\n"
        ".TP\n"
        ".B CUMOD_CUDA_LIBRARY\n"
        "the CUDA driver library to load when "
        "\\fB\\-\\-cuda\\-library\\fR is not given (else "
        "libcuda.so.1).\n"
        ".TP\n"
        ".B CUMOD_NVRTC_LIBRARY\n"
        "NVRTC, for \\fINAME\\fR.cu files, when "
        "\\fB\\-\\-nvrtc\\-library\\fR is not given.\n"
        ".TP\n"
        ".BR CACHE_DIRECTORY \", \" XDG_CACHE_HOME \", \" HOME\n"
        "where the compile cache goes when "
        "\\fB\\-\\-compile\\-cache\\fR is not given "
        "(systemd's CacheDirectory= first).\n"
        ".TP\n"
        ".B CUMOD_CUBLAS_LIBRARY\n"
        "the cuBLAS library GEMMs load when "
        "\\fB\\-\\-cublas\\-library\\fR is not given (else "
        "libcublas.so, libcublas.so.13, libcublas.so.12, then the same in "
        "/usr/local/cuda/lib64).\n"
        ".SH FILES\n"
        ".TP\n"
        ".I DIR/NAME.cubin, NAME.fatbin, NAME.cu, NAME.ptx\n"
        "the images of module NAME, preferred in this order when several are "
        "there; a .cu is compiled by NVRTC in a worker process.\n"
        ".TP\n"
        ".IR DIR / NAME .ptx.opts\n"
        "the module's JIT options, one a line: opt\\-level N, "
        "max\\-registers N, line\\-info [0|1], fast\\-compile N; # starts "
        "a comment.\n"
        ".TP\n"
        ".IR DIR / NAME .cu.opts\n"
        "NVRTC options for NAME.cu, one a line, after the configuration's.\n"
        ".TP\n"
        ".I DIR/*.h, *.cuh, *.hpp, ...\n"
        "headers the sources include: a changed one compiles the NAME.cu "
        "files that include it again (the headers they include are part of "
        "the compile cache's key).\n"
        ".TP\n"
        ".I /run/cumod/cumodd.sock\n"
        "the default listen socket (ipc://).\n"
        ".TP\n"
        ".I /usr/local/etc/cumod/NAME.conf\n"
        "the configuration of instance NAME "
        "(\\fB\\-\\-config\\-dir\\fR).\n"
        ".SH EXIT STATUS\n"
        "0 after SIGTERM or SIGINT, or a \\fB\\-\\-check\\fR that "
        "passed; 64 for a wrong flag; 78 for a wrong configuration file, "
        "a missing kernel folder, or a tls+tcp:// listener without a "
        "certificate and key that load; 69 when the driver, the device or the "
        "listen address is unusable.\n"
        ".SH SEE ALSO\n"
        ".BR cumodctl (1),\n"
        ".BR systemd.service (5).\n"
        "The README of cumod says how to set it up, and its BENCHMARKS.md "
        "what it costs.\n",
        f);
}

/* The getopt_long table made from the option table. */
static void
cfg_getopt_table(struct option *lo, char *shorts)
{
    size_t k = 0;
    *shorts++ = ':';
    for (size_t i = 0; i < CFG_NOPTS; i++) {
        int needs = cfg_opts[i].arg != NULL;
        lo[i] = (struct option){cfg_opts[i].name,
                                needs ? required_argument : no_argument, NULL,
                                256 + (int)i};
        if (cfg_opts[i].letter) {
            shorts[k++] = (char)cfg_opts[i].letter;
            if (needs)
                shorts[k++] = ':';
        }
    }
    lo[CFG_NOPTS] = (struct option){NULL, 0, NULL, 0};
    shorts[k] = '\0';
}

static const cfg_opt *
cfg_by_code(int c)
{
    if (c >= 256 && c < 256 + (int)CFG_NOPTS)
        return &cfg_opts[c - 256];
    for (size_t i = 0; i < CFG_NOPTS; i++)
        if (cfg_opts[i].letter == c)
            return &cfg_opts[i];
    return NULL;
}

/* One pass over argv. pre: only --config, --instance, --help, --version
 * (and the check that every flag is known); otherwise everything but
 * those. Returns RUN, EXIT (help/version printed) or USAGE. */
static cumod_config_result
cfg_argv(cfg_ctx *cx, int argc, char **argv, int pre)
{
    struct option lo[CFG_NOPTS + 1];
    char shorts[2 * CFG_NOPTS + 2];
    int c;

    cfg_getopt_table(lo, shorts);
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
        const cfg_opt *o = cfg_by_code(c);
        if (c == ':') {
            fprintf(cx->err, "cumodd: option %s needs a value\n",
                    argv[optind - 1]);
            return CUMOD_CONFIG_USAGE;
        }
        if (o == NULL) {
            fprintf(cx->err, "cumodd: unknown option %s (see cumodd --help)\n",
                    argv[optind - 1]);
            return CUMOD_CONFIG_USAGE;
        }
        int early = o->kind == CFG_K_HELP || o->kind == CFG_K_VERSION ||
                    o->kind == CFG_K_MAN || o->off == OFF(config_file) ||
                    o->off == OFF(instance) || o->off == OFF(config_dir);
        if (pre != early)
            continue;
        if (o->kind == CFG_K_HELP) {
            cfg_usage(stdout);
            return CUMOD_CONFIG_EXIT;
        }
        if (o->kind == CFG_K_VERSION) {
            printf("cumodd %s\n", CUMOD_VERSION_STRING);
            return CUMOD_CONFIG_EXIT;
        }
        if (o->kind == CFG_K_MAN) {
            cfg_man(stdout);
            return CUMOD_CONFIG_EXIT;
        }
        if (cumod__cfg_set(cx, o, o->arg ? optarg : "1") != 0)
            return CUMOD_CONFIG_USAGE;
    }
    if (optind < argc) {
        fprintf(cx->err,
                "cumodd: unexpected argument '%s' (see cumodd --help)\n",
                argv[optind]);
        return CUMOD_CONFIG_USAGE;
    }
    return CUMOD_CONFIG_RUN;
}

/* --- Defaults, and the whole parse ---------------------------------------- */

static void
cfg_defaults(cumod_config *cfg)
{
    cfg->url = CUMOD_DEFAULT_URL;
    cfg->ndevices = 1; /* device 0 */
    cfg->domain_idle_s = 300;
    cfg->socket_mode = 0660;
    cfg->socket_group = -1;
    cfg->max_msg = 64u << 20;
    cfg->log_level = CUMOD_LOG_INFO;
    cfg->executor_fd = -1;
    cfg->executor_ring_fd = -1;
    cfg->max_image_size = 256u << 20;
    cfg->jit.opt_level = -1;
    cfg->jit.max_registers = -1;
    cfg->jit.line_info = -1;
    cfg->jit.fast_compile = -1;
    cfg->compile_timeout_s = 60;
    cfg->compile_memory_max = (uint64_t)4 << 30;
    cfg->drain_ms = 10000;
    cfg->restart_wait_ms = 2000;
    cfg->quarantine_after = 1;
    cfg->stuck_ms = 10000;
    cfg->max_connections = 1024;
    cfg->session_max_buffers = 65536;
    cfg->session_max_streams = 1024;
    cfg->session_max_segments = 64;
    cfg->session_max_inflight = 65536;
    cfg->busy_poll_us = 200;
    cfg->max_watch_wait_ms = 60000;
    cfg->session_max_requests = 4096;
}

/* --instance NAME's defaults, before the file. */
static int
cfg_instance_defaults(cfg_ctx *cx, char *file, size_t filelen)
{
    cumod_config *cfg = cx->cfg;
    const char *name = cfg->instance;
    char buf[512];
    long long dev;

    snprintf(buf, sizeof(buf), "ipc:///run/cumod-%s/cumodd.sock", name);
    if ((cfg->url = cumod__cfg_strdup(cfg, buf)) == NULL)
        return -1;
    snprintf(buf, sizeof(buf), "/var/lib/cumod/%s/kernels", name);
    if ((cfg->kernel_dir = cumod__cfg_strdup(cfg, buf)) == NULL)
        return -1;
    if (cfg_number(name, 10, 0, 0, INT_MAX, &dev) == 0)
        cfg->device = cfg->devices[0] = (int)dev;
    if (cfg->config_dir != NULL)
        snprintf(file, filelen, "%s/%s.conf", cfg->config_dir, name);
    else
        snprintf(file, filelen, "%s/cumod/%s.conf", CUMOD_SYSCONFDIR, name);
    return 0;
}

/* tls+tcp:// needs a certificate and its key, and the TLS options are for
 * such a listener; the files must be readable (they are read when the
 * listener starts and at each SIGHUP). Exit 78 (EX_CONFIG) either way: a
 * listener without credentials would fail every handshake. */
static int
cfg_tls_check(cfg_ctx *cx)
{
    const cumod_config *cfg = cx->cfg;
    int tls = strncmp(cfg->url, "tls+", 4) == 0;
    const struct {
        const char *path, *flag;
    } files[] = {
        {cfg->tls_cert, "--tls-cert"},
        {cfg->tls_key, "--tls-key"},
        {cfg->tls_ca, "--tls-ca"},
    };

    if (tls && (cfg->tls_cert == NULL || cfg->tls_key == NULL)) {
        fprintf(cx->err,
                "cumodd: listening on %s needs the server's certificate and "
                "its key: %s%s%s missing (tls-cert = FILE and tls-key = FILE "
                "in the file)\n",
                cfg->url, cfg->tls_cert ? "" : "--tls-cert FILE",
                cfg->tls_cert || cfg->tls_key ? "" : " and ",
                cfg->tls_key ? "" : "--tls-key FILE");
        return -1;
    }
    if (!tls && (cfg->tls_cert || cfg->tls_key || cfg->tls_ca)) {
        fprintf(cx->err,
                "cumodd: --tls-cert, --tls-key and --tls-ca are for a "
                "tls+tcp:// listener, and cumodd listens on %s\n",
                cfg->url);
        return -1;
    }
    if (cfg->nallow_subjects > 0 && cfg->tls_ca == NULL) {
        fprintf(cx->err, "cumodd: --allow-cert-subject needs --tls-ca: only a "
                         "certificate a CA vouches for names anyone\n");
        return -1;
    }
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
        if (files[i].path != NULL && access(files[i].path, R_OK) != 0) {
            fprintf(cx->err, "cumodd: %s: cannot read %s: %s\n", files[i].flag,
                    files[i].path, strerror(errno));
            return -1;
        }
    return 0;
}

/* Everything but the early pass: defaults, instance, file, flags, and the
 * checks across options. Errors go to cx->err. */
static cumod_config_result
cfg_build(cfg_ctx *cx, int argc, char **argv, const char *file,
          const char *instance, const char *dir)
{
    cumod_config *cfg = cx->cfg;
    char inst_file[PATH_MAX] = "";
    cumod_config_result r;

    cfg_defaults(cfg);
    cfg->argc = argc;
    cfg->argv = argv;
    if (dir != NULL && (cfg->config_dir = cumod__cfg_strdup(cfg, dir)) == NULL)
        return CUMOD_CONFIG_BAD;
    if (instance != NULL) {
        cfg->instance = cumod__cfg_strdup(cfg, instance);
        if (cfg->instance == NULL ||
            cfg_instance_defaults(cx, inst_file, sizeof(inst_file)) != 0) {
            fprintf(cx->err, "cumodd: out of memory\n");
            return CUMOD_CONFIG_BAD;
        }
        if (file == NULL && access(inst_file, F_OK) == 0)
            file = inst_file;
    }
    if (file != NULL) {
        if ((cfg->config_file = cumod__cfg_strdup(cfg, file)) == NULL)
            return CUMOD_CONFIG_BAD;
        if (cumod__cfg_read_file(cx, cfg->config_file) != 0)
            return CUMOD_CONFIG_BAD;
    }
    if ((r = cfg_argv(cx, argc, argv, 0)) != CUMOD_CONFIG_RUN)
        return r;
    if (cfg->executor_fd < 0 && cfg->kernel_dir == NULL) {
        fprintf(cx->err, "cumodd: --kernels DIR is required (or kernels = DIR "
                         "in the file; see cumodd --help)\n");
        return CUMOD_CONFIG_USAGE;
    }
    if (cfg->executor_fd < 0 && cfg_tls_check(cx) != 0)
        return CUMOD_CONFIG_BAD;
    /* The domains' checks across options: a flag among them is a usage
     * error, as for the deadlines below. */
    if (cfg->executor_fd < 0 && cumod__cfg_domains_check(cx) != 0) {
        const char *by[] = {"device", "listen", "domain-option"};
        for (size_t i = 0; i < sizeof(by) / sizeof(by[0]); i++)
            if (cfg->src[cumod__cfg_find(by[i]) - cfg_opts] == CUMOD_SRC_FLAG)
                return CUMOD_CONFIG_USAGE;
        return CUMOD_CONFIG_BAD;
    }
    if (cfg->max_launch_deadline_ms &&
        cfg->launch_deadline_ms > cfg->max_launch_deadline_ms) {
        fprintf(cx->err,
                "cumodd: launch-deadline %u is above max-launch-deadline "
                "%u\n",
                cfg->launch_deadline_ms, cfg->max_launch_deadline_ms);
        return cfg->src[cumod__cfg_find("launch-deadline") - cfg_opts] ==
                       CUMOD_SRC_FLAG
                   ? CUMOD_CONFIG_USAGE
                   : CUMOD_CONFIG_BAD;
    }
    return CUMOD_CONFIG_RUN;
}

cumod_config_result
cumod__config_parse(cumod_config *cfg, int argc, char **argv)
{
    cfg_ctx cx = {.cfg = cfg, .err = stderr};
    cumod_config_result r;

    memset(cfg, 0, sizeof(*cfg));
    cfg->executor_fd = -1;
    cfg->executor_ring_fd = -1;
    /* First --help, --version, --config and --instance, which say what
     * the rest starts from. */
    if ((r = cfg_argv(&cx, argc, argv, 1)) != CUMOD_CONFIG_RUN)
        return r;
    char *file = cfg->config_file ? strdup(cfg->config_file) : NULL;
    char *inst = cfg->instance ? strdup(cfg->instance) : NULL;
    char *dir = cfg->config_dir ? strdup(cfg->config_dir) : NULL;
    cumod__config_fini(cfg);
    memset(cfg, 0, sizeof(*cfg));
    r = cfg_build(&cx, argc, argv, file, inst, dir);
    free(file);
    free(inst);
    free(dir);
    if (r != CUMOD_CONFIG_RUN)
        return r;
    if (cfg->check_only) {
        struct stat st;
        if (stat(cfg->kernel_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "cumodd: kernels: %s is not a folder: %s\n",
                    cfg->kernel_dir,
                    stat(cfg->kernel_dir, &st) != 0 ? strerror(errno)
                                                    : "not a directory");
            return CUMOD_CONFIG_BAD;
        }
        cumod__config_print(cfg, stdout);
        return CUMOD_CONFIG_EXIT;
    }
    return CUMOD_CONFIG_RUN;
}

int
cumod__config_reread(const cumod_config *cur, cumod_config *next)
{
    char *text = NULL;
    size_t len = 0;
    FILE *err = open_memstream(&text, &len);
    cfg_ctx cx = {.cfg = next, .err = err};
    cumod_config_result r;

    memset(next, 0, sizeof(*next));
    next->executor_fd = -1;
    if (err == NULL)
        return -1;
    r = cfg_build(&cx, cur->argc, cur->argv, cur->config_file, cur->instance,
                  cur->config_dir);
    fclose(err);
    if (r != CUMOD_CONFIG_RUN) {
        for (char *line = strtok(text, "\n"); line != NULL;
             line = strtok(NULL, "\n"))
            CUMOD_LOGE("CUMOD-CONFIG", "%s",
                       strncmp(line, "cumodd: ", 8) == 0 ? line + 8 : line);
        CUMOD_LOGE("CUMOD-CONFIG",
                   "the configuration was not reloaded: the settings in "
                   "use stay");
        free(text);
        cumod__config_fini(next);
        return -1;
    }
    free(text);
    return 0;
}

/* --- Printing and comparing ------------------------------------------------
 */

/* The value of o in cfg as the file would give it. */
static void
cfg_format(const cumod_config *cfg, const cfg_opt *o, char *buf, size_t len)
{
    const char *p = (const char *)cfg + o->off;
    size_t at = 0;

    buf[0] = '\0';
    switch (o->kind) {
    case CFG_K_STR:
    case CFG_K_PATH: {
        const char *s;
        memcpy(&s, p, sizeof(s));
        snprintf(buf, len, "%s", s ? s : "");
        break;
    }
    case CFG_K_INT:
    case CFG_K_JIT: {
        int v;
        memcpy(&v, p, sizeof(v));
        if (v >= 0)
            snprintf(buf, len, "%d", v);
        break;
    }
    case CFG_K_MODE: {
        int v;
        memcpy(&v, p, sizeof(v));
        snprintf(buf, len, "0%o", (unsigned)v);
        break;
    }
    case CFG_K_BOOL: {
        int v;
        memcpy(&v, p, sizeof(v));
        snprintf(buf, len, "%s", v ? "yes" : "no");
        break;
    }
    case CFG_K_U32: {
        uint32_t v;
        memcpy(&v, p, sizeof(v));
        snprintf(buf, len, "%u", v);
        break;
    }
    case CFG_K_U64: {
        uint64_t v;
        memcpy(&v, p, sizeof(v));
        snprintf(buf, len, "%llu", (unsigned long long)v);
        break;
    }
    case CFG_K_SIZE: {
        size_t v;
        memcpy(&v, p, sizeof(v));
        snprintf(buf, len, "%zu", v);
        break;
    }
    case CFG_K_LOG:
        snprintf(buf, len, "%s", cumod__log_level_name(cfg->log_level));
        break;
    case CFG_K_GROUP:
        if (cfg->socket_group >= 0)
            snprintf(buf, len, "%d", cfg->socket_group);
        break;
    case CFG_K_NVRTC:
    case CFG_K_MODOPT: {
        int nv = o->kind == CFG_K_NVRTC;
        int n = nv ? cfg->nnvrtc_opts : cfg->nmod_opts;
        const char *const *v = nv ? cfg->nvrtc_opts : cfg->mod_opts;
        for (int i = 0; i < n && at < len; i++)
            at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? "\n" : "",
                                   v[i]);
        break;
    }
    case CFG_K_PINS:
        for (int i = 0; i < cfg->npins && at < len; i++)
            at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? ", " : "",
                                   cfg->pins[i]);
        break;
    case CFG_K_SUBJECTS:
        for (int i = 0; i < cfg->nallow_subjects && at < len; i++)
            at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? ", " : "",
                                   cfg->allow_subjects[i]);
        break;
    case CFG_K_DEVICES:
        if (cfg->devices_all)
            snprintf(buf, len, "all");
        for (int i = 0; i < cfg->ndevices && at < len; i++)
            at += (size_t)snprintf(buf + at, len - at, "%s%d", i ? "," : "",
                                   cfg->devices[i]);
        break;
    case CFG_K_DOMAINS_BY:
        snprintf(buf, len, "%s",
                 cfg->domains_by == CUMOD_DOMAINS_UID   ? "uid"
                 : cfg->domains_by == CUMOD_DOMAINS_GID ? "gid"
                                                        : "none");
        break;
    case CFG_K_UIDS:
    case CFG_K_GIDS: {
        int *np;
        const uint32_t *ids = cfg_ids((cumod_config *)cfg, o, &np);
        int n = *np;
        for (int i = 0; i < n && at < len; i++)
            at += (size_t)snprintf(buf + at, len - at, "%s%u", i ? ", " : "",
                                   ids[i]);
        break;
    }
    default:
        break;
    }
}

static const char *const cfg_src_names[] = {
    [CUMOD_SRC_DEFAULT] = "default",
    [CUMOD_SRC_FILE] = "from the file",
    [CUMOD_SRC_FLAG] = "from a flag",
};

/* The domains as --domain-option values, one a line, in a string the
 * caller frees (NULL when out of memory): 64 domains of 512 ids each do
 * not fit the buffers of the other options. */
static char *
cfg_domains_text(const cumod_config *cfg)
{
    int n = cumod__cfg_domains_format(cfg, NULL, 0);
    char *t = malloc((size_t)n + 1);

    if (t != NULL)
        cumod__cfg_domains_format(cfg, t, (size_t)n + 1);
    return t;
}

static void
cfg_print_domains(const cumod_config *cfg, size_t i, FILE *out)
{
    const char *name = cfg_opts[i].name, *src = cfg_src_names[cfg->src[i]];
    char *t = cfg_domains_text(cfg);

    if (t == NULL || t[0] == '\0')
        fprintf(out, "# %s = ; %s, %s\n", name, t ? "unset" : "out of memory",
                src);
    for (char *line = t, *nl; t != NULL && *line != '\0'; line = nl) {
        if ((nl = strchr(line, '\n')) != NULL)
            *nl++ = '\0';
        else
            nl = line + strlen(line);
        fprintf(out, "%s = %s ; %s\n", name, line, src);
    }
    free(t);
}

/* At a reread: only the domains' memory-max may change while cumodd runs;
 * any other change to the domains waits for a restart. */
static void
cfg_apply_domains(cumod_config *cur, cumod_config *next, size_t i,
                  cumod_config_change_cb cb, void *arg)
{
    const char *name = cfg_opts[i].name;
    char *a = cfg_domains_text(cur), *b = cfg_domains_text(next);

    if (a == NULL || b == NULL || strcmp(a, b) == 0)
        goto done;
    if (!cumod__cfg_domains_live_only(cur, next)) {
        CUMOD_LOGW("CUMOD-CONFIG",
                   "%s: '%s' -> '%s' cannot change while cumodd runs: "
                   "restart it to apply",
                   name, a, b);
        if (cb != NULL)
            cb(arg, name, 0);
        goto done;
    }
    CUMOD_LOGN("CUMOD-CONFIG", "%s: '%s' -> '%s' (%s)", name, a, b,
               cfg_src_names[next->src[i]]);
    for (int k = 0; k < cur->ndomains; k++)
        cur->domains[k].memory_max = next->domains[k].memory_max;
    cur->src[i] = next->src[i];
    if (cb != NULL)
        cb(arg, name, 1);
done:
    free(a);
    free(b);
}

void
cumod__config_print(const cumod_config *cfg, FILE *out)
{
    char val[8192];

    fprintf(out, "# cumodd %s: the settings in effect", CUMOD_VERSION_STRING);
    if (cfg->instance)
        fprintf(out, " for instance %s", cfg->instance);
    fprintf(out, "\n# (the file %s, then the flags)\n[cumodd]\n",
            cfg->config_file ? cfg->config_file : "none");
    for (size_t i = 0; i < CFG_NOPTS; i++) {
        const cfg_opt *o = &cfg_opts[i];
        if (o->flags & CFG_CMDLINE)
            continue;
        if (o->kind == CFG_K_DOMOPT) {
            cfg_print_domains(cfg, i, out);
            continue;
        }
        cfg_format(cfg, o, val, sizeof(val));
        if ((o->kind == CFG_K_NVRTC || o->kind == CFG_K_MODOPT) && val[0]) {
            /* One line per item: values may hold commas. */
            for (char *line = val, *nl; line != NULL; line = nl) {
                if ((nl = strchr(line, '\n')) != NULL)
                    *nl++ = '\0';
                fprintf(out, "%s = %s ; %s\n", o->name, line,
                        cfg_src_names[cfg->src[i]]);
            }
            continue;
        }
        if (o->kind == CFG_K_NVRTC && cfg->nvrtc_opts_set) {
            fprintf(out, "%s = ; none, %s\n", o->name,
                    cfg_src_names[cfg->src[i]]);
            continue;
        }
        if (val[0])
            fprintf(out, "%s = %s ; %s\n", o->name, val,
                    cfg_src_names[cfg->src[i]]);
        else
            fprintf(out, "# %s = ; unset, %s\n", o->name,
                    cfg_src_names[cfg->src[i]]);
    }
}

void
cumod__config_apply(cumod_config *cur, cumod_config *next,
                    cumod_config_change_cb cb, void *arg)
{
    char a[8192], b[8192];

    for (size_t i = 0; i < CFG_NOPTS; i++) {
        const cfg_opt *o = &cfg_opts[i];
        if (o->flags & CFG_CMDLINE)
            continue;
        if (o->kind == CFG_K_DOMOPT) {
            cfg_apply_domains(cur, next, i, cb, arg);
            continue;
        }
        cfg_format(cur, o, a, sizeof(a));
        cfg_format(next, o, b, sizeof(b));
        if (strcmp(a, b) == 0)
            continue;
        if (!(o->flags & CFG_LIVE)) {
            CUMOD_LOGW("CUMOD-CONFIG",
                       "%s: '%s' -> '%s' cannot change while cumodd runs: "
                       "restart it to apply",
                       o->name, a, b);
            if (cb != NULL)
                cb(arg, o->name, 0);
            continue;
        }
        CUMOD_LOGN("CUMOD-CONFIG", "%s: '%s' -> '%s' (%s)", o->name, a, b,
                   cfg_src_names[next->src[i]]);
        switch (o->kind) {
        case CFG_K_PINS:
            cur->npins = 0;
            for (int k = 0; k < next->npins; k++) {
                const char *d = cumod__cfg_strdup(cur, next->pins[k]);
                if (d != NULL)
                    cur->pins[cur->npins++] = d;
            }
            break;
        case CFG_K_NVRTC:
        case CFG_K_MODOPT: {
            int nv = o->kind == CFG_K_NVRTC;
            int *n = nv ? &cur->nnvrtc_opts : &cur->nmod_opts;
            const char **v = nv ? cur->nvrtc_opts : cur->mod_opts;
            int nn = nv ? next->nnvrtc_opts : next->nmod_opts;
            const char *const *nvv = nv ? next->nvrtc_opts : next->mod_opts;
            *n = 0;
            for (int k = 0; k < nn; k++) {
                const char *d = cumod__cfg_strdup(cur, nvv[k]);
                if (d != NULL)
                    v[(*n)++] = d;
            }
            if (nv)
                cur->nvrtc_opts_set = next->nvrtc_opts_set;
            break;
        }
        case CFG_K_SUBJECTS:
            cur->nallow_subjects = 0;
            for (int k = 0; k < next->nallow_subjects; k++) {
                const char *d = cumod__cfg_strdup(cur, next->allow_subjects[k]);
                if (d != NULL)
                    cur->allow_subjects[cur->nallow_subjects++] = d;
            }
            break;
        case CFG_K_UIDS:
        case CFG_K_GIDS: {
            int *cn, *nn;
            uint32_t *c = cfg_ids(cur, o, &cn);
            const uint32_t *nx = cfg_ids((cumod_config *)next, o, &nn);
            memcpy(c, nx, sizeof(uint32_t) * CUMOD_CONFIG_MAX_IDS);
            *cn = *nn;
            break;
        }
        case CFG_K_LOG:
            cur->log_level = next->log_level;
            cumod__log_set_level(next->log_level);
            break;
        case CFG_K_STR:
        case CFG_K_PATH: {
            const char *s;
            memcpy(&s, (char *)next + o->off, sizeof(s));
            s = s ? cumod__cfg_strdup(cur, s) : NULL;
            memcpy((char *)cur + o->off, &s, sizeof(s));
            break;
        }
        default: {
            size_t w = o->kind == CFG_K_U64    ? sizeof(uint64_t)
                       : o->kind == CFG_K_SIZE ? sizeof(size_t)
                       : o->kind == CFG_K_U32  ? sizeof(uint32_t)
                                               : sizeof(int);
            memcpy((char *)cur + o->off, (char *)next + o->off, w);
            break;
        }
        }
        cur->src[i] = next->src[i];
        if (cb != NULL)
            cb(arg, o->name, 1);
    }
}
