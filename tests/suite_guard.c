/* SPDX-License-Identifier: MIT */
/*
 * suite_guard: runs one test suite under a deadline of its own, so that a
 * hang names itself (issue 32). CTest starts every suite through it:
 *
 *   suite_guard --name NAME --deadline SECONDS --log FILE -- COMMAND ARGS...
 *
 * The suite runs in a process group of its own, with TMPDIR set to a fresh
 * folder (mode 01777, so that a second uid's clients reach sockets made
 * there) and its stdout and stderr copied both to ours and to FILE. The
 * guard is a child subreaper: a daemon the suite started stays below it
 * even when the suite's process that started it is gone.
 *
 * Past the deadline (times CUMOD_DEADLINE_SCALE, when set), before
 * anything is killed, it prints: the suite, the test running (Criterion's
 * last "[RUN ]" line, or the last line of output), every process below
 * it (its command line, then the stacks of its threads by gdb -batch,
 * threads with the same stack told once), and the last lines of every log
 * those processes write (their stdout, stderr and open *.log files) and of
 * the *.log files under the suite's TMPDIR. Then it kills them all and
 * exits 124. After a suite ends of itself, processes it left running are
 * named and killed. Exit status: the suite's (128 + N if a signal N ended
 * it), or 124 past its deadline.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GUARD_MAX_PROCS 64     /* processes whose stacks are printed */
#define GUARD_STACK_S 20       /* gdb's time for one process */
#define GUARD_LOG_LINES 25     /* last lines of each log */
#define GUARD_MAX_LOGS 16      /* logs printed */
#define GUARD_MAX_THREADS 1024 /* threads grouped per process */

typedef struct guard {
    const char *name;
    double deadline_s;
    FILE *log;
    char tmp[PATH_MAX];
    pid_t child;
    char running[512]; /* the test running: the last "[RUN ]" line */
    char last[512];    /* the last line of output */
    char partial[512]; /* output since the last newline */
    size_t npartial;
    char printed[GUARD_MAX_LOGS][PATH_MAX]; /* logs already printed */
    int nprinted;
    int done;   /* the suite's process ended */
    int status; /* its wait status then */
} guard;

/* Reaps every process that ended below the guard (the suite's orphans
 * come to it), keeping the suite's own status. */
static void
guard_reap(guard *g)
{
    int st;
    for (pid_t w; (w = waitpid(-1, &st, WNOHANG)) > 0;)
        if (w == g->child) {
            g->status = st;
            g->done = 1;
        }
}

static volatile sig_atomic_t guard_signalled;

static void
guard_on_signal(int sig)
{
    guard_signalled = sig;
}

static double
guard_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Writes to stdout and the log file. */
static void guard_say(guard *g, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
guard_say(guard *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    if (g->log != NULL) {
        va_start(ap, fmt);
        vfprintf(g->log, fmt, ap);
        va_end(ap);
        fflush(g->log);
    }
    fflush(stdout);
}

/* A line of someone's output, made printable: control bytes and bytes
 * over 0x7e as \xNN, so that a log cannot rewrite the terminal. */
static void
guard_clean(const char *in, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < cap; i++) {
        unsigned char ch = (unsigned char)in[i];
        if (ch == '\t' || (ch >= 0x20 && ch < 0x7f))
            out[o++] = (char)ch;
        else
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", ch);
    }
    out[o] = '\0';
}

/* One line of the suite's output: remembered for the deadline's report. */
static void
guard_line(guard *g, const char *line, size_t n)
{
    char clean[512];
    guard_clean(line, n, clean, sizeof(clean));
    if (clean[0] == '\0')
        return;
    snprintf(g->last, sizeof(g->last), "%s", clean);
    if (strncmp(clean, "[RUN ] ", 7) == 0)
        snprintf(g->running, sizeof(g->running), "%s", clean + 7);
}

/* Copies what the suite wrote; returns 0 at its end (EOF). */
static int
guard_pump(guard *g, int fd)
{
    char buf[8192];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0)
        return errno == EINTR || errno == EAGAIN ? 1 : 0;
    if (n == 0)
        return 0;
    fwrite(buf, 1, (size_t)n, stdout);
    fflush(stdout);
    if (g->log != NULL) {
        fwrite(buf, 1, (size_t)n, g->log);
        fflush(g->log);
    }
    for (ssize_t i = 0; i < n; i++) {
        if (buf[i] == '\n') {
            guard_line(g, g->partial, g->npartial);
            g->npartial = 0;
        } else if (g->npartial + 1 < sizeof(g->partial)) {
            g->partial[g->npartial++] = buf[i];
        }
    }
    return 1;
}

/* --- The processes below the guard ---------------------------------- */

static pid_t
guard_ppid(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    /* "pid (comm) state ppid": comm may hold spaces and parentheses */
    char *p = strrchr(buf, ')');
    int ppid;
    char state;
    if (p == NULL || sscanf(p + 1, " %c %d", &state, &ppid) != 2)
        return -1;
    return (pid_t)ppid;
}

/* Every process below the guard (the subreaper keeps orphans there), in
 * the order of their ids; returns how many (at most cap). */
static int
guard_below(pid_t *out, int cap)
{
    pid_t all[8192], parent[8192];
    int n = 0, k = 0;
    DIR *d = opendir("/proc");
    if (d == NULL)
        return 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && n < 8192;) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end != '\0' || pid <= 0)
            continue;
        all[n] = (pid_t)pid;
        parent[n] = guard_ppid((pid_t)pid);
        n++;
    }
    closedir(d);
    /* Grow the set from the guard until it stops growing. */
    pid_t self = getpid();
    char in[8192] = {0};
    for (int grew = 1; grew;) {
        grew = 0;
        for (int i = 0; i < n; i++) {
            if (in[i] || all[i] == self)
                continue;
            int up = parent[i] == self;
            for (int j = 0; !up && j < n; j++)
                up = in[j] && all[j] == parent[i];
            if (up) {
                in[i] = 1;
                grew = 1;
            }
        }
    }
    for (int i = 0; i < n && k < cap; i++)
        if (in[i])
            out[k++] = all[i];
    return k;
}

static void
guard_cmdline(pid_t pid, char *out, size_t cap)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0) {
        snprintf(out, cap, "(gone)");
        return;
    }
    for (ssize_t i = 0; i < n - 1; i++)
        if (buf[i] == '\0')
            buf[i] = ' ';
    guard_clean(buf, (size_t)(buf[n - 1] == '\0' ? n - 1 : n), out, cap);
}

/* Runs argv with its stdout read into *out (malloc'd), for at most
 * limit_s seconds. Returns 0, or -1 if it could not run. */
static int
guard_capture(char *const argv[], int limit_s, char **out, size_t *len)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        /* gdb runs as it is: a sanitizer runtime preloaded for the
         * suite (python_tests under ASan) is not for it */
        unsetenv("LD_PRELOAD");
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(p[1], 1);
        dup2(null, 2);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(p[1]);
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    double end = guard_now() + limit_s;
    struct pollfd pf = {.fd = p[0], .events = POLLIN};
    while (buf != NULL) {
        int left = (int)((end - guard_now()) * 1000);
        if (left <= 0 || poll(&pf, 1, left) <= 0)
            break;
        if (n + 4096 > cap) {
            char *more = cap < (64u << 20) ? realloc(buf, cap * 2) : NULL;
            if (more == NULL)
                break;
            buf = more;
            cap *= 2;
        }
        ssize_t r = read(p[0], buf + n, cap - n - 1);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(p[0]);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    if (buf == NULL)
        return -1;
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

/* gdb's "thread apply all bt" cut into threads; each thread's frames as
 * "function (file:line)", so that the same stack compares equal. */
typedef struct guard_thread {
    char head[160];
    char *frames;  /* lines, malloc'd */
    char top[200]; /* the innermost frame */
    int ours;      /* a frame is in this repository's sources */
    int same;      /* threads with this stack */
} guard_thread;

#ifndef CUMOD_GUARD_SOURCE_DIR
#define CUMOD_GUARD_SOURCE_DIR "/nonexistent"
#endif

/* Whether a gdb frame line is in this repository's sources. */
static int
guard_frame_ours(const char *line)
{
    const char *at = strstr(line, ") at ");
    return at != NULL && strncmp(at + 5, CUMOD_GUARD_SOURCE_DIR "/",
                                 strlen(CUMOD_GUARD_SOURCE_DIR) + 1) == 0;
}

/* "#3  0x00007f in nng_close (s=...) at core/socket.c:714" ->
 * "nng_close (core/socket.c:714)". */
static void
guard_frame(const char *line, char *out, size_t cap)
{
    const char *p = line, *fn, *at, *addr = NULL;
    if (*p == '#')
        p++;
    while (*p >= '0' && *p <= '9')
        p++;
    while (*p == ' ')
        p++;
    const char *in = strstr(p, " in ");
    if (strncmp(p, "0x", 2) == 0 && in != NULL) {
        addr = p;
        p = in + 4;
    }
    fn = p;
    size_t fl = strcspn(fn, " (");
    if (addr != NULL && fl == 2 && strncmp(fn, "??", 2) == 0) {
        fn = addr; /* no symbol: the address says more than "??" */
        fl = strcspn(addr, " ");
    }
    at = strstr(p, ") at ");
    if (at == NULL)
        at = strstr(p, ") from ");
    if (at != NULL) {
        const char *w = strchr(at + 2, ' ') + 1;
        const char *slash = strrchr(w, '/');
        snprintf(out, cap, "%.*s (%s)", (int)fl, fn, slash ? slash + 1 : w);
    } else {
        snprintf(out, cap, "%.*s", (int)fl, fn);
    }
}

static void
guard_stacks(guard *g, pid_t pid)
{
    char pidarg[32];
    snprintf(pidarg, sizeof(pidarg), "%d", (int)pid);
    char *const argv[] = {"gdb",
                          "-batch",
                          "-nx",
                          "-p",
                          pidarg,
                          "-ex",
                          "set pagination off",
                          "-ex",
                          "set print frame-arguments none",
                          "-ex",
                          "thread apply all bt 40",
                          NULL};
    char *out = NULL;
    size_t len = 0;
    if (guard_capture(argv, GUARD_STACK_S, &out, &len) != 0 || len == 0) {
        free(out);
        guard_say(g, "      (no stacks: gdb did not run; cmake/run installs "
                     "it)\n");
        return;
    }
    static guard_thread th[GUARD_MAX_THREADS];
    int nt = 0;
    for (char *line = strtok(out, "\n"); line != NULL;
         line = strtok(NULL, "\n")) {
        if (strncmp(line, "Thread ", 7) == 0 && nt < GUARD_MAX_THREADS) {
            guard_thread *t = &th[nt++];
            size_t l = strlen(line);
            if (l > 0 && line[l - 1] == ':')
                l--;
            guard_clean(line, l, t->head, sizeof(t->head));
            t->frames = NULL;
            t->top[0] = '\0';
            t->ours = 0;
            t->same = 1;
        } else if (line[0] == '#' && nt > 0) {
            guard_thread *t = &th[nt - 1];
            char f[400], clean[400];
            guard_frame(line, f, sizeof(f));
            guard_clean(f, strlen(f), clean, sizeof(clean));
            t->ours |= guard_frame_ours(line);
            if (t->top[0] == '\0')
                snprintf(t->top, sizeof(t->top), "%s", clean);
            size_t have = t->frames ? strlen(t->frames) : 0;
            char *more = realloc(t->frames, have + strlen(clean) + 12);
            if (more == NULL)
                continue;
            t->frames = more;
            sprintf(t->frames + have, "        %s\n", clean);
        }
    }
    free(out);
    /* Threads with the same stack are told once, with their count. */
    for (int i = 0; i < nt; i++)
        for (int j = i + 1; j < nt; j++)
            if (th[j].same && th[i].same && th[i].frames && th[j].frames &&
                strcmp(th[i].frames, th[j].frames) == 0) {
                th[i].same++;
                th[j].same = 0;
            }
    /* A thread with no frame of ours (nng's, libuv's, Criterion's own)
     * is told in one line: where it waits. */
    for (int i = 0; i < nt; i++) {
        if (th[i].same == 0)
            continue;
        if (!th[i].ours) {
            guard_say(g, "      %s%s: not in cumod's code, at %s\n", th[i].head,
                      th[i].same > 1 ? " and others like it" : "",
                      th[i].top[0] ? th[i].top : "(no frame)");
            continue;
        }
        if (th[i].same > 1)
            guard_say(g, "      %s, and %d more threads with this stack:\n",
                      th[i].head, th[i].same - 1);
        else
            guard_say(g, "      %s:\n", th[i].head);
        guard_say(g, "%s", th[i].frames ? th[i].frames : "        (none)\n");
    }
    for (int i = 0; i < nt; i++)
        free(th[i].frames);
    if (nt == 0)
        guard_say(g, "      (gdb printed no thread: it may not be allowed to "
                     "attach)\n");
}

/* --- Logs ------------------------------------------------------------ */

static void
guard_tail(guard *g, const char *path)
{
    for (int i = 0; i < g->nprinted; i++)
        if (strcmp(g->printed[i], path) == 0)
            return;
    if (g->nprinted == GUARD_MAX_LOGS)
        return;
    snprintf(g->printed[g->nprinted++], PATH_MAX, "%s", path);
    if (g->log != NULL) {
        /* the guard's own copy of the output is not a log of the suite's */
        struct stat a, b;
        if (stat(path, &a) == 0 && fstat(fileno(g->log), &b) == 0 &&
            a.st_ino == b.st_ino && a.st_dev == b.st_dev)
            return;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        return;
    }
    off_t from = st.st_size > 16384 ? st.st_size - 16384 : 0;
    char buf[16385];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, from);
    close(fd);
    if (n < 0)
        n = 0;
    buf[n] = '\0';
    int lines = 0;
    ssize_t start = n;
    while (start > 0 && lines <= GUARD_LOG_LINES)
        if (buf[--start] == '\n' && start != n - 1)
            lines++;
    if (buf[start] == '\n')
        start++;
    guard_say(g, "  --- the last lines of %s (%lld bytes):\n", path,
              (long long)st.st_size);
    for (char *line = buf + start; *line != '\0';) {
        size_t l = strcspn(line, "\n");
        char clean[600];
        guard_clean(line, l < 300 ? l : 300, clean, sizeof(clean));
        guard_say(g, "    %s%s\n", clean, l > 300 ? " [...]" : "");
        line += l;
        if (*line == '\n')
            line++;
    }
}

/* A process's logs: its stdout and stderr when they are files, and any
 * open file whose name ends in .log. */
static void
guard_proc_logs(guard *g, pid_t pid)
{
    char dir[64];
    snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char link[PATH_MAX + 64], target[PATH_MAX];
        if (e->d_name[0] == '.')
            continue;
        snprintf(link, sizeof(link), "%s/%s", dir, e->d_name);
        ssize_t n = readlink(link, target, sizeof(target) - 1);
        if (n <= 0 || target[0] != '/')
            continue;
        target[n] = '\0';
        size_t tl = strlen(target);
        int fd = atoi(e->d_name);
        if (fd == 1 || fd == 2 ||
            (tl > 4 && strcmp(target + tl - 4, ".log") == 0))
            guard_tail(g, target);
    }
    closedir(d);
}

/* The *.log files under the suite's TMPDIR (its daemons' logs, the fake
 * driver's), a few levels down. */
static void
guard_tmp_logs(guard *g, const char *dir, int depth)
{
    DIR *d = opendir(dir);
    if (d == NULL || depth > 4) {
        if (d)
            closedir(d);
        return;
    }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char path[PATH_MAX];
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) != 0)
            continue;
        size_t l = strlen(e->d_name);
        if (S_ISDIR(st.st_mode))
            guard_tmp_logs(g, path, depth + 1);
        else if (S_ISREG(st.st_mode) && l > 4 &&
                 strcmp(e->d_name + l - 4, ".log") == 0)
            guard_tail(g, path);
    }
    closedir(d);
}

/* Kills everything below the guard, until nothing is left (5 s). */
static int
guard_kill_all(guard *g, int quiet)
{
    pid_t p[GUARD_MAX_PROCS * 4];
    int killed = 0;
    double end = guard_now() + 5;
    for (;;) {
        int n = guard_below(p, (int)(sizeof(p) / sizeof(p[0])));
        if (n == 0 || guard_now() > end)
            break;
        for (int i = 0; i < n; i++) {
            if (!quiet && killed < GUARD_MAX_PROCS) {
                char cmd[512];
                guard_cmdline(p[i], cmd, sizeof(cmd));
                guard_say(g, "suite_guard: %s left pid %d running: %s\n",
                          g->name, (int)p[i], cmd);
            }
            kill(p[i], SIGKILL);
            killed++;
        }
        /* reap what was ours (the subreaper's orphans are) */
        guard_reap(g);
        struct timespec nap = {0, 20000000};
        nanosleep(&nap, NULL);
        guard_reap(g);
        quiet = 1;
    }
    return killed;
}

static void
guard_report(guard *g, double ran)
{
    pid_t p[GUARD_MAX_PROCS];
    int n = guard_below(p, GUARD_MAX_PROCS);
    const char *t = g->running[0] ? g->running : "(no [RUN ] line)";

    guard_say(g,
              "\n==== DEADLINE: suite %s still running after %.0f s (its "
              "deadline); running test: %s; last line of output: %s\n",
              g->name, ran, t, g->last[0] ? g->last : "(none)");
    /* Everything below is stopped first, so that what is printed is one
     * moment of the whole suite (gdb attaches to stopped processes). */
    for (int i = 0; i < n; i++)
        kill(p[i], SIGSTOP);
    guard_say(g, "==== %d processes below it, stopped; each one's threads:\n",
              n);
    for (int i = 0; i < n; i++) {
        char cmd[512];
        guard_cmdline(p[i], cmd, sizeof(cmd));
        guard_say(g, "  pid %d (parent %d): %s\n", (int)p[i],
                  (int)guard_ppid(p[i]), cmd);
        guard_stacks(g, p[i]);
    }
    guard_say(g, "==== their logs:\n");
    for (int i = 0; i < n; i++)
        guard_proc_logs(g, p[i]);
    guard_tmp_logs(g, g->tmp, 0);
}

static int
guard_rmtree_cb(const char *dir)
{
    char *const argv[] = {"rm", "-rf", (char *)dir, NULL};
    pid_t pid = fork();
    if (pid == 0) {
        execvp("rm", argv);
        _exit(127);
    }
    int st = 0;
    if (pid > 0)
        waitpid(pid, &st, 0);
    return st;
}

static int
guard_usage(void)
{
    fprintf(stderr, "usage: suite_guard --name NAME --deadline SECONDS "
                    "[--log FILE] -- COMMAND [ARGS...]\n");
    return 2;
}

int
main(int argc, char **argv)
{
    guard g = {.name = "suite"};
    const char *logpath = NULL;
    int i;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (i + 1 >= argc)
            return guard_usage();
        if (strcmp(argv[i], "--name") == 0)
            g.name = argv[++i];
        else if (strcmp(argv[i], "--deadline") == 0)
            g.deadline_s = atof(argv[++i]);
        else if (strcmp(argv[i], "--log") == 0)
            logpath = argv[++i];
        else
            return guard_usage();
    }
    if (i >= argc || g.deadline_s <= 0)
        return guard_usage();
    const char *scale = getenv("CUMOD_DEADLINE_SCALE");
    if (scale != NULL && atof(scale) > 0)
        g.deadline_s *= atof(scale);
    if (logpath != NULL) {
        g.log = fopen(logpath, "w");
        if (g.log == NULL)
            fprintf(stderr, "suite_guard: cannot write %s: %s\n", logpath,
                    strerror(errno));
    }
    const char *base = getenv("TMPDIR");
    snprintf(g.tmp, sizeof(g.tmp), "%s/cumod-t.XXXXXX",
             base && base[0] ? base : "/tmp");
    if (mkdtemp(g.tmp) == NULL || chmod(g.tmp, 01777) != 0) {
        fprintf(stderr, "suite_guard: mkdtemp %s: %s\n", g.tmp,
                strerror(errno));
        return 1;
    }
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    struct sigaction sa = {.sa_handler = guard_on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0)
        return 1;
    g.child = fork();
    if (g.child < 0)
        return 1;
    if (g.child == 0) {
        setpgid(0, 0);
        setenv("TMPDIR", g.tmp, 1);
        dup2(out[1], 1);
        dup2(out[1], 2);
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        execvp(argv[i], argv + i);
        fprintf(stderr, "suite_guard: cannot run %s: %s\n", argv[i],
                strerror(errno));
        _exit(127);
    }
    close(out[1]);

    double t0 = guard_now(), end = t0 + g.deadline_s;
    int open_out = 1, rc;
    while (!g.done) {
        struct pollfd pf = {.fd = out[0], .events = POLLIN};
        int left = (int)((end - guard_now()) * 1000);
        if (left > 100)
            left = 100;
        if (left < 0)
            left = 0;
        if (open_out && poll(&pf, 1, left) > 0)
            open_out = guard_pump(&g, out[0]);
        else if (!open_out) {
            struct timespec nap = {0, (long)left * 1000000L};
            nanosleep(&nap, NULL);
        }
        guard_reap(&g);
        if (guard_signalled) {
            guard_say(&g, "suite_guard: %s: stopped by signal %d\n", g.name,
                      (int)guard_signalled);
            guard_kill_all(&g, 1);
            return 128 + (int)guard_signalled;
        }
        if (!g.done && guard_now() >= end) {
            guard_report(&g, guard_now() - t0);
            guard_kill_all(&g, 1);
            while (open_out && poll(&pf, 1, 100) > 0 &&
                   (open_out = guard_pump(&g, out[0])))
                ;
            guard_say(&g,
                      "==== DEADLINE: suite %s killed after %.0f s; running "
                      "test: %s; its files stay in %s\n",
                      g.name, guard_now() - t0,
                      g.running[0] ? g.running : "(no [RUN ] line)", g.tmp);
            return 124;
        }
    }
    /* Ended of itself: what it wrote last, then what it left running. */
    while (open_out) {
        struct pollfd pf = {.fd = out[0], .events = POLLIN};
        if (poll(&pf, 1, 200) <= 0)
            break;
        open_out = guard_pump(&g, out[0]);
    }
    guard_kill_all(&g, 0);
    while (open_out) {
        struct pollfd pf = {.fd = out[0], .events = POLLIN};
        if (poll(&pf, 1, 200) <= 0)
            break;
        open_out = guard_pump(&g, out[0]);
    }
    rc = WIFEXITED(g.status) ? WEXITSTATUS(g.status) : 128 + WTERMSIG(g.status);
    if (WIFSIGNALED(g.status))
        guard_say(&g, "suite_guard: %s died of signal %d (%s)\n", g.name,
                  WTERMSIG(g.status), strsignal(WTERMSIG(g.status)));
    if (rc == 0 || rc == 77)
        guard_rmtree_cb(g.tmp);
    else
        guard_say(&g,
                  "suite_guard: %s exited with status %d; its files stay "
                  "in %s\n",
                  g.name, rc, g.tmp);
    if (g.log != NULL)
        fclose(g.log);
    return rc;
}
