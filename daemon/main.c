/* SPDX-License-Identifier: MIT */
/*
 * cumodd: the front (default) or, with --executor FD, the executor process
 * the front starts. One binary, so the two always agree on the channel.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sysexits.h>
#include <unistd.h>

#include "compile/compile.h"
#include "common/config.h"
#include "common/parent.h"
#include "front/front.h"
#include "exec/executor.h"
#include "common/log.h"

int
main(int argc, char **argv)
{
    cumod_config cfg;
    int rc;

    /* The NVRTC worker (compile.h) takes its own arguments. */
    if (argc >= 2 && strcmp(argv[1], "--nvrtc-worker") == 0)
        return cumod__nvrtc_worker_main(argc, argv);
    switch (cumod__config_parse(&cfg, argc, argv)) {
    case CUMOD_CONFIG_RUN:
        break;
    case CUMOD_CONFIG_EXIT:
        cumod__config_fini(&cfg);
        return 0;
    case CUMOD_CONFIG_BAD:
        cumod__config_fini(&cfg);
        return EX_CONFIG;
    default:
        cumod__config_fini(&cfg);
        return EX_USAGE;
    }
    if (cfg.executor_fd >= 0) {
        cumod_executor_cfg ec = {
            .chan_fd = cfg.executor_fd,
            .ring_fd = cfg.executor_ring_fd,
            .device = cfg.device,
            .submit_threads = cfg.submit_threads,
            .cuda_library = cfg.cuda_library,
            .cublas_library = cfg.cublas_library,
            .mps_pipe_dir =
                cfg.mps_mode != CUMOD_MPS_NONE ? cfg.mps_pipe_dir : NULL,
            .orphan_grace_s = cfg.adopt_dir != NULL ? cfg.orphan_grace_s : 0,
            .adopt_dir = cfg.adopt_dir,
        };
        /* Die with the front, unless asked to wait for a new one for a
         * bounded time (exec/orphan.h): a context never outlives its
         * owner by more. */
        if ((ec.orphan_grace_s > 0 ? cumod__parent_alive()
                                   : cumod__parent_tie()) != 0)
            return EX_SOFTWARE;
        /* The front handles SIGINT, SIGTERM and SIGHUP (a terminal's ^C
         * or hang-up reaches the whole process group; systemd's stop, the
         * whole control group): the executor stops when the front closes
         * the channel, after in-flight work has drained. Ended at once by
         * one of them, it would lose that work, and the front would start
         * another. */
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        cumod__log_init("cumodd-exec", cfg.log_level);
        rc = cumod__executor_main(&ec);
        cumod__config_fini(&cfg);
        return rc;
    }
    cumod__log_init("cumodd", cfg.log_level);
    /* Before any thread: the executors and NVRTC workers inherit it. */
    cumod__parent_mark();
    signal(SIGPIPE, SIG_IGN);
    /* A daemon's usual first step: descriptors up to the hard limit (one
     * per client connection, and a few per read in flight). */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
    rc = cumod__front_run(&cfg);
    cumod__config_fini(&cfg);
    return rc;
}
