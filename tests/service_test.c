/* SPDX-License-Identifier: MIT */
/*
 * cumodd as a service: its configuration file (--config, --check, errors
 * that name the line, flags winning, --instance), SIGHUP (reread, apply
 * what may change, rescan), and systemd's notify protocol (READY=1 only
 * once it serves, STATUS=, RELOADING=1, STOPPING=1, WATCHDOG=1), heard on
 * a datagram socket of the test's own as systemd would.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cumod/cumod.h"
#include "fixture.h"
#include "harness.h"

TH_SUITE_DRIVER(0);

/* Runs cumodd with args (NULL-ended, at most 30); its output in *out and
 * *err (caller frees). Returns its exit status. */
static int
sv_cumodd(const char *const *args, char **out, char **err)
{
    const char *argv[32] = {th_cumodd};
    int n = 1;
    for (int i = 0; args[i] != NULL && n < 31; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    return th_run(argv, NULL, out, err, 20000);
}

/* A temp folder with a kernel folder k/ (vadd, scale) and a file path. */
typedef struct sv_dir {
    char dir[256];
    char kdir[300];
    char conf[300];
} sv_dir;

static void
sv_dir_init(sv_dir *s)
{
    char cmd[700];
    th_tmpdir(s->dir, sizeof(s->dir));
    snprintf(s->kdir, sizeof(s->kdir), "%s/k", s->dir);
    snprintf(s->conf, sizeof(s->conf), "%s/cumodd.conf", s->dir);
    snprintf(cmd, sizeof(cmd), "mkdir -p %s", s->kdir);
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(
        th_copy(CUMOD_TEST_KERNEL_DIR "/vadd.cubin", s->kdir, "vadd.cubin"), 0);
    cr_assert_eq(
        th_copy(CUMOD_TEST_KERNEL_DIR "/scale.cubin", s->kdir, "scale.cubin"),
        0);
}

static void sv_writef(const char *path, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
sv_writef(const char *path, const char *fmt, ...)
{
    char text[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    cr_assert_eq(th_write_file(path, text), 0, "writing %s", path);
}

/* --- The configuration file ----------------------------------------------- */

Test(config, check_prints_every_setting_with_where_it_came_from)
{
    sv_dir s;
    char *out = NULL, *err = NULL;

    sv_dir_init(&s);
    sv_writef(s.conf,
              "# a comment\n"
              "[cumodd]\n"
              "kernels = %s\n"
              "  max-message = 16M\n"
              "  session_max_streams = 12 ; an inline comment\n"
              "pin = vadd, scale\n"
              "allow-uid = root, 4242\n"
              "launch-deadline = 500\n",
              s.kdir);
    int rc = sv_cumodd((const char *[]){"--config", s.conf, "--check",
                                        "--max-message", "32M", NULL},
                       &out, &err);
    cr_assert_eq(rc, 0, "%s", err);
    char want[512];
    snprintf(want, sizeof(want), "kernels = %s ; from the file", s.kdir);
    cr_expect(strstr(out, want), "%s", out);
    cr_expect(strstr(out, "max-message = 33554432 ; from a flag"),
              "the flag wins: %s", out);
    cr_expect(strstr(out, "session-max-streams = 12 ; from the file"),
              "indented keys and underscores read: %s", out);
    cr_expect(strstr(out, "pin = vadd, scale ; from the file"), "%s", out);
    cr_expect(strstr(out, "allow-uid = 0, 4242 ; from the file"),
              "user names resolved: %s", out);
    cr_expect(strstr(out, "max-connections = 1024 ; default"), "%s", out);
    cr_expect(strstr(out, "session-max-buffers = 65536 ; default"), "%s", out);

    /* What --check prints is a configuration file that gives the same. */
    char again[300];
    snprintf(again, sizeof(again), "%s/again.conf", s.dir);
    cr_assert_eq(th_write_file(again, out), 0);
    char *out2 = NULL;
    rc = sv_cumodd((const char *[]){"--config", again, "--check", NULL}, &out2,
                   NULL);
    cr_assert_eq(rc, 0);
    const char *keys[] = {"max-message = 33554432", "pin = vadd, scale",
                          "launch-deadline = 500", "session-max-streams = 12"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        cr_expect(strstr(out2, keys[i]), "%s read back: %s", keys[i], out2);
    free(out2);
    free(out);
    free(err);
    th_rmtree(s.dir);
}

Test(config, every_error_names_the_file_and_its_line)
{
    sv_dir s;
    char *err = NULL;

    sv_dir_init(&s);
    sv_writef(s.conf,
              "kernels = %s\n"
              "max-mesage = 3\n"
              "device = -1\n"
              "[other]\n"
              "x = 1\n"
              "[cumodd]\n"
              "garbage line\n"
              "socket-mode = 0999\n"
              "allow-uid = nosuchuser-cumod-test\n"
              "log-level = loud\n"
              "max-message = 12x\n"
              "config = /etc/passwd\n"
              "pin = ../etc/passwd\n",
              s.kdir);
    int rc = sv_cumodd((const char *[]){"--config", s.conf, "--check", NULL},
                       NULL, &err);
    cr_expect_eq(rc, 78, "a bad file is EX_CONFIG: %s", err);
    const char *want[] = {
        ":2: unknown key 'max-mesage'",
        ":3: device: '-1' is not a number from 0",
        ":4: unknown section [other]",
        ":7: not 'key = value': garbage line",
        ":8: socket-mode: '0999' is not an octal mode",
        ":9: allow-uid: 'nosuchuser-cumod-test' is not a user name or number",
        ":10: log-level: 'loud' is not one of error, warn",
        ":11: max-message: '12x' is not a size from 1024",
        ":12: 'config' is a command-line option, not a key",
        ":13: pin: '../etc/passwd' is not a module name",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        cr_expect(strstr(err, want[i]), "'%s' in:\n%s", want[i], err);
    cr_expect(!strstr(err, ":5:"),
              "keys of an unknown section are not "
              "reported one by one: %s",
              err);
    free(err);

    /* A missing file, and a wrong flag (EX_USAGE, naming the flag). */
    rc = sv_cumodd(
        (const char *[]){"--config", "/nonexistent/cumodd.conf", NULL}, NULL,
        &err);
    cr_expect_eq(rc, 78);
    cr_expect(strstr(err, "cannot read the configuration file "
                          "/nonexistent/cumodd.conf"),
              "%s", err);
    free(err);
    rc = sv_cumodd((const char *[]){"--config", s.conf, "--session-max-buffers",
                                    "0", NULL},
                   NULL, &err);
    cr_expect_eq(rc, 78, "the file is read before the flags, and is bad");
    free(err);
    rc = sv_cumodd((const char *[]){"--kernels", s.kdir, "--max-connections",
                                    "lots", NULL},
                   NULL, &err);
    cr_expect_eq(rc, 64);
    cr_expect(strstr(err, "--max-connections: 'lots' is not a number"), "%s",
              err);
    free(err);
    th_rmtree(s.dir);
}

Test(config, a_list_given_by_flags_replaces_the_files)
{
    sv_dir s;
    char *out = NULL;

    sv_dir_init(&s);
    sv_writef(s.conf, "kernels = %s\npin = vadd\npin = scale\n", s.kdir);
    int rc = sv_cumodd((const char *[]){"--config", s.conf, "--pin", "empty",
                                        "--pin", "affine", "--check", NULL},
                       &out, NULL);
    cr_assert_eq(rc, 0);
    cr_expect(strstr(out, "pin = empty, affine ; from a flag"), "%s", out);
    free(out);
    th_rmtree(s.dir);
}

Test(config, an_instance_has_its_own_socket_folder_device_and_file)
{
    sv_dir s;
    char *out = NULL, *err = NULL, path[400];

    sv_dir_init(&s);
    snprintf(path, sizeof(path), "%s/3.conf", s.dir);
    sv_writef(path, "kernels = %s\n", s.kdir);
    int rc = sv_cumodd((const char *[]){"--instance", "3", "--config-dir",
                                        s.dir, "--check", NULL},
                       &out, &err);
    cr_assert_eq(rc, 0, "%s", err);
    cr_expect(strstr(out, "listen = ipc:///run/cumod-3/cumodd.sock ; default"),
              "%s", out);
    cr_expect(strstr(out, "device = 3 ; default"), "%s", out);
    cr_expect(strstr(out, "for instance 3"), "%s", out);
    free(out);
    free(err);
    /* Without a file of its own, the instance's folder is the default. */
    rc = sv_cumodd((const char *[]){"--instance", "alice", "--config-dir",
                                    s.dir, "--check", NULL},
                   NULL, &err);
    cr_expect_eq(rc, 78);
    cr_expect(strstr(err, "/var/lib/cumod/alice/kernels"), "%s", err);
    free(err);
    rc = sv_cumodd((const char *[]){"--instance", "../x", "--check", NULL},
                   NULL, &err);
    cr_expect_eq(rc, 64);
    cr_expect(strstr(err, "is not an instance name"), "%s", err);
    free(err);
    th_rmtree(s.dir);
}

/* --- The daemon on a file, and SIGHUP --------------------------------------
 */

/* Allocates until it fails; returns how many succeeded (at most 8), with
 * the failure's code in *rv. */
static int
sv_alloc_until_refused(cumod_client *c, int *rv)
{
    cumod_buffer b;
    int n = 0;
    while (n < 8 && (*rv = cumod_buffer_alloc(c, 64, &b)) == CUMOD_OK)
        n++;
    return n;
}

/* Waits up to 10 s for needle in the daemon's log. */
static int
sv_log_wait(const th_daemon *d, const char *needle)
{
    for (int i = 0; i < 500; i++) {
        char *log = th_daemon_log(d);
        int in = log && strstr(log, needle);
        free(log);
        if (in)
            return 1;
        th_sleep_ms(20);
    }
    return 0;
}

Test(config, sighup_rereads_the_file_applies_what_it_can_and_rescans,
     .timeout = 120)
{
    sv_dir s;
    th_daemon d;
    cumod_client *c;
    int rv;

    sv_dir_init(&s);
    sv_writef(s.conf, "kernels = %s\nsession-max-buffers = 2\n", s.kdir);
    cr_assert_eq(
        th_daemon_start(&d, (const char *[]){"--config", s.conf, NULL}, NULL),
        0);
    cr_assert_eq(cumod_open(d.url, 10000, &c), CUMOD_OK);
    cr_expect_eq(sv_alloc_until_refused(c, &rv), 2, "the file's limit");
    cr_expect_eq(rv, CUMOD_ELIMIT);
    cr_expect(strstr(cumod_last_detail(), "--session-max-buffers"), "%s",
              cumod_last_detail());

    /* A new limit and a pin apply; a new message cap cannot while
     * running (the flags th_daemon_start gives, --listen, still win). */
    sv_writef(s.conf,
              "kernels = %s\nsession-max-buffers = 4\npin = vadd\n"
              "max-message = 1M\nlog-level = debug\n",
              s.kdir);
    kill(d.pid, SIGHUP);
    cr_assert(sv_log_wait(&d, "CUMOD-PIN: vadd: pinned by the configuration"));
    cr_expect(sv_log_wait(&d, "session-max-buffers: '2' -> '4'"));
    cr_expect(sv_log_wait(&d, "max-message: '67108864' -> '1048576'"));
    cr_expect(sv_log_wait(&d, "cannot change while cumodd runs"));
    cr_expect(sv_log_wait(&d, "rescanning"));
    cr_expect_eq(sv_alloc_until_refused(c, &rv), 2, "2 more: 4 in all");
    cumod_module_list *ml = NULL;
    cr_assert_eq(cumod_modules_list(c, &ml), CUMOD_OK);
    int pinned = 0;
    for (size_t i = 0; i < ml->count; i++)
        if (strcmp(ml->modules[i].name, "vadd") == 0)
            pinned = ml->modules[i].pinned;
    cr_expect(pinned, "vadd pinned by the reread file");
    cumod_module_list_free(ml);
    cumod_device_info di;
    cr_expect_eq(cumod_device_info_get(c, &di), CUMOD_OK);

    /* A file with an error changes nothing. */
    sv_writef(s.conf, "kernels = %s\nsession-max-buffers = 9\nbogus = 1\n",
              s.kdir);
    kill(d.pid, SIGHUP);
    cr_expect(sv_log_wait(&d, "cumodd.conf:3: unknown key 'bogus'"));
    cr_expect(sv_log_wait(&d, "the configuration was not reloaded"));
    cr_expect_eq(sv_alloc_until_refused(c, &rv), 0, "still 4 in all");
    cumod_close(c);
    cr_expect_eq(th_daemon_stop(&d), 0);
    th_rmtree(s.dir);
}

/* --- systemd's notify protocol ---------------------------------------------
 */

typedef struct sv_notify {
    int fd;
    char path[100];
    char all[65536]; /* every message so far, separated by "|" */
    size_t len;
} sv_notify;

static void
sv_notify_open(sv_notify *n, const char *dir)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memset(n, 0, sizeof(*n));
    cr_assert_lt(strlen(dir), sizeof(n->path) - 14, "a short temp path");
    snprintf(n->path, sizeof(n->path), "%.80s/notify.sock", dir);
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", n->path);
    n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    cr_assert(n->fd >= 0);
    cr_assert_eq(bind(n->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    struct timeval tv = {.tv_usec = 20000};
    setsockopt(n->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

/* Reads what came; returns 1 when needle is among the messages, waiting up
 * to ms for it. */
static int
sv_notify_wait(sv_notify *n, const char *needle, int ms)
{
    double until = th_now_ms() + ms;
    do {
        char buf[4096];
        ssize_t k = recv(n->fd, buf, sizeof(buf) - 1, 0);
        if (k > 0 && n->len + (size_t)k + 2 < sizeof(n->all)) {
            memcpy(n->all + n->len, buf, (size_t)k);
            n->len += (size_t)k;
            n->all[n->len++] = '|';
            n->all[n->len] = '\0';
        }
        if (strstr(n->all, needle))
            return 1;
    } while (th_now_ms() < until);
    return 0;
}

Test(notify, ready_only_once_serving_then_status_watchdog_reload_and_stop,
     .timeout = 120)
{
    sv_dir s;
    sv_notify n;
    th_daemon d;
    char env_sock[400];

    sv_dir_init(&s);
    sv_notify_open(&n, s.dir);
    snprintf(env_sock, sizeof(env_sock), "NOTIFY_SOCKET=%s", n.path);
    /* A driver that takes 400 ms to come up. */
    const char *env[] = {env_sock, "WATCHDOG_USEC=200000",
                         "CUMOD_FAKE_INIT_DELAY_MS=400", NULL};
    double t0 = th_now_ms();
    cr_assert_eq(th_daemon_start_in(&d, s.kdir, NULL, env), 0);
    cr_assert(sv_notify_wait(&n, "READY=1", 10000), "%s", n.all);
    cr_expect_geq(th_now_ms() - t0, 400, "not before the driver is up");
    /* Ready means serving: the socket answers and the scan is done. */
    cumod_client *c;
    cr_assert_eq(cumod_open(d.url, 5000, &c), CUMOD_OK);
    cumod_module_list *ml = NULL;
    cr_assert_eq(cumod_modules_list(c, &ml), CUMOD_OK);
    cr_expect_eq(ml->count, 2, "vadd and scale are known at READY=1");
    cumod_module_list_free(ml);
    cr_expect(strstr(n.all, "STATUS=serving 2 modules from"), "%s", n.all);

    /* The watchdog is pinged at half its period while all is well. */
    size_t before = (size_t)th_count(n.all, "WATCHDOG=1");
    sv_notify_wait(&n, "no such message", 1000);
    cr_expect_geq((size_t)th_count(n.all, "WATCHDOG=1"), before + 5,
                  "about 10 pings a second: %s", n.all);

    /* SIGHUP: RELOADING=1, then READY=1 again. */
    kill(d.pid, SIGHUP);
    cr_expect(sv_notify_wait(&n, "RELOADING=1\nMONOTONIC_USEC=", 5000), "%s",
              n.all);
    cr_expect(sv_notify_wait(&n, "STATUS=serving from", 5000), "%s", n.all);

    /* The executor dies: a STATUS line says so, and another when it is back. */
    cumod_device_info di;
    cr_assert_eq(cumod_device_info_get(c, &di), CUMOD_OK);
    kill((pid_t)di.executor_pid, SIGKILL);
    cr_expect(sv_notify_wait(&n, "STATUS=the executor is restarting", 5000),
              "%s", n.all);
    cr_expect(sv_notify_wait(&n,
                             "STATUS=serving again after 1 executor "
                             "restarts",
                             10000),
              "%s", n.all);
    cumod_close(c);

    /* SIGTERM: STOPPING=1. */
    cr_expect_eq(th_daemon_stop(&d), 0);
    cr_expect(sv_notify_wait(&n, "STOPPING=1", 2000), "%s", n.all);
    close(n.fd);
    th_rmtree(s.dir);
}

Test(notify, nothing_is_sent_outside_systemd)
{
    sv_dir s;
    th_daemon d;

    /* No NOTIFY_SOCKET: the daemon runs as before (and must not crash
     * on WATCHDOG_USEC alone). */
    sv_dir_init(&s);
    const char *env[] = {"WATCHDOG_USEC=100000", NULL};
    cr_assert_eq(th_daemon_start_in(&d, s.kdir, NULL, env), 0);
    th_sleep_ms(300);
    cr_expect_eq(th_daemon_stop(&d), 0);
    th_rmtree(s.dir);
}
