#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumod/version.h"

static void
config_usage(FILE *f)
{
    fprintf(
        f,
        "Usage: cumodd --kernels DIR [options]\n"
        "Keeps the CUDA kernels of DIR loaded on one GPU and runs launch\n"
        "requests from clients (libcumod, cumodctl) over nng.\n"
        "\n"
        "  -k, --kernels DIR        folder of .cubin, .fatbin and .ptx files\n"
        "  -l, --listen URL         where clients connect "
        "(default " CUMOD_DEFAULT_URL ")\n"
        "  -d, --device N           CUDA device ordinal (default 0)\n"
        "      --cuda-library PATH  the driver to load (default: "
        "$CUMOD_CUDA_LIBRARY,\n"
        "                           else libcuda.so.1)\n"
        "      --socket-mode MODE   permissions of an ipc:// socket file, "
        "octal\n"
        "                           (default 0660)\n"
        "      --max-message BYTES  largest request accepted (default 64 "
        "MiB)\n"
        "      --log-level LEVEL    error, warn, notice, info or debug "
        "(default info)\n"
        "      --pin NAME           keep module NAME loaded from the start "
        "(repeatable)\n"
        "      --max-image-size BYTES  largest kernel file read (default 256 "
        "MiB)\n"
        "      --max-resident-bytes BYTES  bound on loaded image bytes "
        "(default: none)\n"
        "      --max-resident-modules N    bound on loaded modules (default: "
        "none)\n"
        "      --idle-unload SECONDS  unload modules unused this long "
        "(default: never)\n"
        "      --jit-opt-level N    PTX JIT optimization level 0-4 (default: "
        "the driver's)\n"
        "      --session-memory-limit BYTES  device memory one connection "
        "may hold\n"
        "                           (default: no limit)\n"
        "      --launch-deadline MS  a launch still running this long is a "
        "hang\n"
        "                           (default 0: none; a launch may ask its "
        "own)\n"
        "      --max-launch-deadline MS  the most any launch may run, its "
        "own deadline\n"
        "                           or none asked (default 0: no cap)\n"
        "      --drain-timeout MS   at SIGTERM, how long work in flight may "
        "finish\n"
        "                           (default 10000)\n"
        "      --quarantine-after N  faults a module generation may cause "
        "before it\n"
        "                           is quarantined (default 1)\n"
        "      --stuck-timeout MS   restart an executor silent this long "
        "(default 10000)\n"
        "  -h, --help               this text\n"
        "  -V, --version            the version\n");
}

static int
config_long(const char *opt, const char *s, long long lo, long long hi,
            int base, long long *out)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, base);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr,
                "cumodd: --%s: '%s' is not a number from %lld to %lld\n", opt,
                s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

cumod_config_result
cumod__config_parse(cumod_config *cfg, int argc, char **argv)
{
    enum {
        OPT_CUDA = 256,
        OPT_MODE,
        OPT_MAXMSG,
        OPT_LOG,
        OPT_EXEC,
        OPT_PIN,
        OPT_MAXIMG,
        OPT_MAXRB,
        OPT_MAXRM,
        OPT_IDLE,
        OPT_JIT,
        OPT_SESSMEM,
        OPT_DEADLINE,
        OPT_MAXDEADLINE,
        OPT_DRAIN,
        OPT_QUARANTINE,
        OPT_STUCK,
        OPT_EXECPATH,
    };
    static const struct option opts[] = {
        {"kernels", required_argument, NULL, 'k'},
        {"listen", required_argument, NULL, 'l'},
        {"device", required_argument, NULL, 'd'},
        {"cuda-library", required_argument, NULL, OPT_CUDA},
        {"socket-mode", required_argument, NULL, OPT_MODE},
        {"max-message", required_argument, NULL, OPT_MAXMSG},
        {"log-level", required_argument, NULL, OPT_LOG},
        {"executor", required_argument, NULL, OPT_EXEC},
        {"pin", required_argument, NULL, OPT_PIN},
        {"max-image-size", required_argument, NULL, OPT_MAXIMG},
        {"max-resident-bytes", required_argument, NULL, OPT_MAXRB},
        {"max-resident-modules", required_argument, NULL, OPT_MAXRM},
        {"idle-unload", required_argument, NULL, OPT_IDLE},
        {"jit-opt-level", required_argument, NULL, OPT_JIT},
        {"session-memory-limit", required_argument, NULL, OPT_SESSMEM},
        {"launch-deadline", required_argument, NULL, OPT_DEADLINE},
        {"max-launch-deadline", required_argument, NULL, OPT_MAXDEADLINE},
        {"drain-timeout", required_argument, NULL, OPT_DRAIN},
        {"quarantine-after", required_argument, NULL, OPT_QUARANTINE},
        {"stuck-timeout", required_argument, NULL, OPT_STUCK},
        {"executor-path", required_argument, NULL, OPT_EXECPATH},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    long long v;
    int c;

    memset(cfg, 0, sizeof(*cfg));
    cfg->url = CUMOD_DEFAULT_URL;
    cfg->socket_mode = 0660;
    cfg->max_msg = 64u << 20;
    cfg->log_level = CUMOD_LOG_INFO;
    cfg->executor_fd = -1;
    cfg->max_image_size = 256u << 20;
    cfg->jit_opt_level = -1;
    cfg->drain_ms = 10000;
    cfg->quarantine_after = 1;
    cfg->stuck_ms = 10000;

    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":k:l:d:hV", opts, NULL)) != -1) {
        switch (c) {
        case 'k':
            cfg->kernel_dir = optarg;
            break;
        case 'l':
            cfg->url = optarg;
            break;
        case 'd':
            if (config_long("device", optarg, 0, INT_MAX, 10, &v) != 0)
                return CUMOD_CONFIG_USAGE;
            cfg->device = (int)v;
            break;
        case OPT_CUDA:
            cfg->cuda_library = optarg;
            break;
        case OPT_MODE:
            if (config_long("socket-mode", optarg, 0, 0777, 8, &v) != 0)
                return CUMOD_CONFIG_USAGE;
            cfg->socket_mode = (int)v;
            break;
        case OPT_MAXMSG:
            if (config_long("max-message", optarg, 1024, 1LL << 31, 10, &v) !=
                0)
                return CUMOD_CONFIG_USAGE;
            cfg->max_msg = (size_t)v;
            break;
        case OPT_LOG:
            if (cumod__log_parse_level(optarg, &cfg->log_level) != 0) {
                fprintf(stderr,
                        "cumodd: --log-level: '%s' is not one of error, "
                        "warn, notice, info, debug\n",
                        optarg);
                return CUMOD_CONFIG_USAGE;
            }
            break;
        case OPT_EXEC:
            if (config_long("executor", optarg, 0, INT_MAX, 10, &v) != 0)
                return CUMOD_CONFIG_USAGE;
            cfg->executor_fd = (int)v;
            break;
        case OPT_PIN:
            if (cfg->npins == (int)(sizeof(cfg->pins) / sizeof(cfg->pins[0]))) {
                fprintf(stderr, "cumodd: --pin: at most %zu modules\n",
                        sizeof(cfg->pins) / sizeof(cfg->pins[0]));
                return CUMOD_CONFIG_USAGE;
            }
            cfg->pins[cfg->npins++] = optarg;
            break;
        case OPT_MAXIMG:
            if (config_long("max-image-size", optarg, 64, 1LL << 40, 10, &v) !=
                0)
                return CUMOD_CONFIG_USAGE;
            cfg->max_image_size = (size_t)v;
            break;
        case OPT_MAXRB:
            if (config_long("max-resident-bytes", optarg, 0, 1LL << 50, 10,
                            &v) != 0)
                return CUMOD_CONFIG_USAGE;
            cfg->max_resident_bytes = (uint64_t)v;
            break;
        case OPT_MAXRM:
            if (config_long("max-resident-modules", optarg, 0, 1 << 20, 10,
                            &v) != 0)
                return CUMOD_CONFIG_USAGE;
            cfg->max_resident_modules = (uint32_t)v;
            break;
        case OPT_IDLE:
            if (config_long("idle-unload", optarg, 0, 86400 * 365, 10, &v) != 0)
                return CUMOD_CONFIG_USAGE;
            cfg->idle_unload_s = (uint32_t)v;
            break;
        case OPT_JIT:
            if (config_long("jit-opt-level", optarg, 0, 4, 10, &v) != 0)
                return CUMOD_CONFIG_USAGE;
            cfg->jit_opt_level = (int)v;
            break;
        case OPT_SESSMEM:
            if (config_long("session-memory-limit", optarg, 0, 1LL << 50, 10,
                            &v) != 0)
                return CUMOD_CONFIG_USAGE;
            cfg->session_mem_limit = (uint64_t)v;
            break;
        case OPT_DEADLINE:
            if (config_long("launch-deadline", optarg, 0, 86400000, 10, &v) !=
                0)
                return CUMOD_CONFIG_USAGE;
            cfg->launch_deadline_ms = (uint32_t)v;
            break;
        case OPT_MAXDEADLINE:
            if (config_long("max-launch-deadline", optarg, 0, 86400000, 10,
                            &v) != 0)
                return CUMOD_CONFIG_USAGE;
            cfg->max_launch_deadline_ms = (uint32_t)v;
            break;
        case OPT_DRAIN:
            if (config_long("drain-timeout", optarg, 0, 3600000, 10, &v) != 0)
                return CUMOD_CONFIG_USAGE;
            cfg->drain_ms = (uint32_t)v;
            break;
        case OPT_QUARANTINE:
            if (config_long("quarantine-after", optarg, 1, 1000000, 10, &v) !=
                0)
                return CUMOD_CONFIG_USAGE;
            cfg->quarantine_after = (uint32_t)v;
            break;
        case OPT_STUCK:
            if (config_long("stuck-timeout", optarg, 500, 3600000, 10, &v) != 0)
                return CUMOD_CONFIG_USAGE;
            cfg->stuck_ms = (uint32_t)v;
            break;
        case OPT_EXECPATH:
            cfg->executor_path = optarg;
            break;
        case 'h':
            config_usage(stdout);
            return CUMOD_CONFIG_EXIT;
        case 'V':
            printf("cumodd %s\n", CUMOD_VERSION_STRING);
            return CUMOD_CONFIG_EXIT;
        case ':':
            fprintf(stderr, "cumodd: option %s needs a value\n",
                    argv[optind - 1]);
            return CUMOD_CONFIG_USAGE;
        default:
            fprintf(stderr, "cumodd: unknown option %s (see cumodd --help)\n",
                    argv[optind - 1]);
            return CUMOD_CONFIG_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr,
                "cumodd: unexpected argument '%s' (see cumodd --help)\n",
                argv[optind]);
        return CUMOD_CONFIG_USAGE;
    }
    if (cfg->executor_fd < 0 && cfg->kernel_dir == NULL) {
        fprintf(stderr, "cumodd: --kernels DIR is required (see cumodd "
                        "--help)\n");
        return CUMOD_CONFIG_USAGE;
    }
    if (cfg->max_launch_deadline_ms &&
        cfg->launch_deadline_ms > cfg->max_launch_deadline_ms) {
        fprintf(stderr,
                "cumodd: --launch-deadline %u is above --max-launch-deadline "
                "%u\n",
                cfg->launch_deadline_ms, cfg->max_launch_deadline_ms);
        return CUMOD_CONFIG_USAGE;
    }
    return CUMOD_CONFIG_RUN;
}
