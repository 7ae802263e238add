/* SPDX-License-Identifier: MIT */
/*
 * NVIDIA MPS for the pools of executors (mps.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "cumod/errors.h"
#include "front/units/mps.h"

extern char **environ;

/* How long the control program may take to fork its daemon, or to
 * answer quit; how long the daemon's pipe may take to appear. */
#define MPS_RUN_MS 10000
#define MPS_PIPE_MS 5000

static void
mps_sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000,
                          .tv_nsec = (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Whether a control daemon runs for dir: its pid file there names a live
 * process (its sockets stay in the directory after it quits). */
static int
mps_answers(const char *dir)
{
    char path[PATH_MAX + 40], buf[32];
    snprintf(path, sizeof(path), "%s/nvidia-cuda-mps-control.pid", dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    long pid = strtol(buf, NULL, 10);
    return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

/* Runs m->control (with -d when daemon, else reading input on its
 * standard input) in the environment of m's pipe and log directories,
 * waiting at most MPS_RUN_MS. Its exit status, or -1 with why in err. */
static int
mps_run(const cumod_mps *m, int daemon, const char *input, char *err,
        size_t errlen)
{
    char pipe_env[PATH_MAX + 32], log_env[PATH_MAX + 32];
    char *env[512];
    int n = 0, fds[2] = {-1, -1};

    snprintf(pipe_env, sizeof(pipe_env), "CUDA_MPS_PIPE_DIRECTORY=%s", m->dir);
    snprintf(log_env, sizeof(log_env), "CUDA_MPS_LOG_DIRECTORY=%s", m->log_dir);
    for (char **e = environ; *e != NULL && n < 508; e++)
        if (strncmp(*e, "CUDA_MPS_", 9) != 0)
            env[n++] = *e;
    env[n++] = pipe_env;
    env[n++] = log_env;
    env[n] = NULL;
    char *argv[] = {(char *)m->control, daemon ? "-d" : NULL, NULL};

    if (input != NULL && pipe2(fds, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        if (fds[0] >= 0) {
            close(fds[0]);
            close(fds[1]);
        }
        return -1;
    }
    if (pid == 0) {
        int in = fds[0] >= 0 ? fds[0] : open("/dev/null", O_RDONLY);
        if (in >= 0)
            (void)dup2(in, 0);
        /* Not the front's descriptors: only the standard three. */
        if (close_range(3, ~0U, 0) != 0)
            for (int fd = 3; fd < 65536; fd++)
                (void)close(fd);
        if (strchr(m->control, '/') != NULL)
            execve(m->control, argv, env);
        else
            execvpe(m->control, argv, env);
        _exit(127);
    }
    if (fds[0] >= 0) {
        close(fds[0]);
        (void)!write(fds[1], input, strlen(input));
        close(fds[1]);
    }
    uint64_t until = cumod__mono_ms() + MPS_RUN_MS;
    int ws = 0;
    pid_t r;
    while ((r = waitpid(pid, &ws, WNOHANG)) == 0 && cumod__mono_ms() < until)
        mps_sleep_ms(5);
    if (r == 0) {
        kill(pid, SIGKILL);
        (void)waitpid(pid, &ws, 0);
        snprintf(err, errlen, "%s did not end within %d ms", m->control,
                 MPS_RUN_MS);
        return -1;
    }
    if (r < 0) {
        snprintf(err, errlen, "waitpid: %s", strerror(errno));
        return -1;
    }
    if (WIFEXITED(ws) && WEXITSTATUS(ws) == 127) {
        snprintf(err, errlen,
                 "cannot run %s (not installed, or not in PATH: "
                 "--mps-control PATH names it)",
                 m->control);
        return -1;
    }
    if (!WIFEXITED(ws)) {
        snprintf(err, errlen, "%s ended by signal %d", m->control,
                 WTERMSIG(ws));
        return -1;
    }
    return WEXITSTATUS(ws);
}

/* Waits for the control pipe to appear (want 1) or go (want 0). */
static int
mps_wait(const char *dir, int want, int ms)
{
    uint64_t until = cumod__mono_ms() + (uint64_t)ms;
    while (mps_answers(dir) != want) {
        if (cumod__mono_ms() >= until)
            return -1;
        mps_sleep_ms(5);
    }
    return 0;
}

/* Whether the pipe directory dir may be trusted: a directory (not a
 * link) of cumodd's user or root that no one else may write to. Another
 * user able to write there could plant a pid file and a control socket
 * of their own, and have the pools' executors join their MPS server. */
static int
mps_dir_trusted(const char *dir, char *err, size_t errlen)
{
    struct stat sb;
    if (lstat(dir, &sb) != 0) {
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        return 0;
    }
    if (!S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "%s is not a directory", dir);
        return 0;
    }
    if (sb.st_uid != geteuid() && sb.st_uid != 0) {
        snprintf(err, errlen,
                 "the pipe directory %s belongs to uid %u, not to cumodd's "
                 "user (%u) or root: its MPS control daemon is not to be "
                 "trusted",
                 dir, (unsigned)sb.st_uid, (unsigned)geteuid());
        return 0;
    }
    if ((sb.st_mode & 022) != 0) {
        snprintf(err, errlen,
                 "the pipe directory %s may be written by others (mode "
                 "%04o): another user could put a control daemon of theirs "
                 "there",
                 dir, (unsigned)(sb.st_mode & 07777));
        return 0;
    }
    return 1;
}

static int
mps_mkdir(const char *dir, char *err, size_t errlen)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot make %s: %s", dir, strerror(errno));
        return -1;
    }
    return mps_dir_trusted(dir, err, errlen) ? 0 : -1;
}

/* own: where the pipes go. */
static int
mps_own_dir(const cumod_config *cfg, cumod_mps *m, char *err, size_t errlen)
{
    const char *rt = getenv("RUNTIME_DIRECTORY"); /* systemd's, ':'-split */

    if (cfg->mps_pipe_dir != NULL) {
        snprintf(m->dir, sizeof(m->dir), "%s", cfg->mps_pipe_dir);
        return mps_mkdir(m->dir, err, errlen);
    }
    if (rt != NULL && rt[0] == '/') {
        size_t k = strcspn(rt, ":");
        snprintf(m->dir, sizeof(m->dir), "%.*s/mps", (int)k, rt);
        return mps_mkdir(m->dir, err, errlen);
    }
    snprintf(m->dir, sizeof(m->dir), "/tmp/cumod-mps-XXXXXX");
    if (mkdtemp(m->dir) == NULL) {
        snprintf(err, errlen, "cannot make a directory in /tmp: %s",
                 strerror(errno));
        return -1;
    }
    m->made_dir = 1;
    return 0;
}

cumod_err
cumod__mps_start(const cumod_config *cfg, cumod_mps *m, cumod_status *st)
{
    char err[PATH_MAX + 256];

    memset(m, 0, sizeof(*m));
    m->mode = cfg->mps_mode;
    if (m->mode == CUMOD_MPS_NONE)
        return CUMOD_OK;
    if (m->mode == CUMOD_MPS_JOIN) {
        const char *dir = cfg->mps_pipe_dir;
        if (dir == NULL)
            dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
        if (dir == NULL || dir[0] == '\0')
            dir = "/tmp/nvidia-mps";
        snprintf(m->dir, sizeof(m->dir), "%s", dir);
        if (!mps_dir_trusted(m->dir, err, sizeof(err)))
            return cumod__status_set(st, CUMOD_EPERM, "--mps join: %s", err);
        if (!mps_answers(m->dir))
            return cumod__status_set(
                st, CUMOD_EIO,
                "--mps join: no MPS control daemon answers in %s (no "
                "live pid in %s/nvidia-cuda-mps-control.pid): start one "
                "(nvidia-cuda-mps-control "
                "-d with CUDA_MPS_PIPE_DIRECTORY=%s), or let cumodd run its "
                "own (--mps own)",
                m->dir, m->dir, m->dir);
        CUMOD_LOGN("CUMOD-MPS",
                   "pools join the MPS control daemon of pipe directory %s",
                   m->dir);
        return CUMOD_OK;
    }
    snprintf(m->control, sizeof(m->control), "%s",
             cfg->mps_control ? cfg->mps_control : "nvidia-cuda-mps-control");
    if (mps_own_dir(cfg, m, err, sizeof(err)) != 0)
        return cumod__status_set(st, CUMOD_EIO, "--mps own: %s", err);
    if ((size_t)snprintf(m->log_dir, sizeof(m->log_dir), "%s/log", m->dir) >=
        sizeof(m->log_dir)) {
        cumod__mps_stop(m);
        return cumod__status_set(st, CUMOD_EINVAL,
                                 "--mps own: the pipe directory's path is "
                                 "too long");
    }
    if (mps_mkdir(m->log_dir, err, sizeof(err)) != 0) {
        cumod__mps_stop(m);
        return cumod__status_set(st, CUMOD_EIO, "--mps own: %s", err);
    }
    if (mps_answers(m->dir)) {
        /* Ours, left by a cumodd that did not stop (its pipe directory is
         * ours alone): it goes, with the clients it still had. */
        CUMOD_LOGW("CUMOD-MPS",
                   "an MPS control daemon still answers in %s (left by a "
                   "cumodd that did not stop): it is told to quit",
                   m->dir);
        (void)mps_run(m, 0, "quit\n", err, sizeof(err));
        if (mps_wait(m->dir, 0, MPS_PIPE_MS) != 0)
            return cumod__status_set(
                st, CUMOD_EIO,
                "--mps own: an MPS control daemon answers in %s and did not "
                "quit: use --mps join to share it, or another --mps-pipe-dir",
                m->dir);
    }
    int rc = mps_run(m, 1, NULL, err, sizeof(err));
    if (rc != 0) {
        if (rc > 0)
            snprintf(err, sizeof(err), "%s -d exited with status %d",
                     m->control, rc);
        m->made_dir = 0; /* kept: its log says why */
        cumod__mps_stop(m);
        return cumod__status_set(st, CUMOD_EIO,
                                 "--mps own: cannot start the MPS control "
                                 "daemon: %s (its log: %s)",
                                 err, m->log_dir);
    }
    m->started = 1;
    if (mps_wait(m->dir, 1, MPS_PIPE_MS) != 0) {
        cumod__status_set(st, CUMOD_EIO,
                          "--mps own: %s -d ran, and no control daemon "
                          "answered in %s within %d ms (its log: %s)",
                          m->control, m->dir, MPS_PIPE_MS, m->log_dir);
        m->made_dir = 0; /* kept: its log says why */
        cumod__mps_stop(m);
        return st->code;
    }
    CUMOD_LOGN("CUMOD-MPS",
               "MPS control daemon started (%s, pipe directory %s, log %s)",
               m->control, m->dir, m->log_dir);
    return CUMOD_OK;
}

static int
mps_rm(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    (void)remove(path);
    return 0;
}

void
cumod__mps_stop(cumod_mps *m)
{
    char err[PATH_MAX + 256] = "";

    if (m->mode != CUMOD_MPS_OWN)
        return;
    if (m->started) {
        m->started = 0;
        if (mps_run(m, 0, "quit\n", err, sizeof(err)) != 0)
            CUMOD_LOGW("CUMOD-MPS",
                       "telling the MPS control daemon to quit: %s",
                       err[0] ? err : "it failed");
        else if (mps_wait(m->dir, 0, MPS_PIPE_MS) != 0)
            CUMOD_LOGW("CUMOD-MPS",
                       "the MPS control daemon of %s did not quit within "
                       "%d ms",
                       m->dir, MPS_PIPE_MS);
        else
            CUMOD_LOGI("CUMOD-MPS", "MPS control daemon stopped (%s)", m->dir);
    }
    if (m->made_dir) {
        m->made_dir = 0;
        (void)nftw(m->dir, mps_rm, 16, FTW_DEPTH | FTW_PHYS);
    }
}

const char *
cumod__mps_dir(const cumod_mps *m)
{
    return m->mode != CUMOD_MPS_NONE && m->dir[0] ? m->dir : NULL;
}
