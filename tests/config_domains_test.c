/* SPDX-License-Identifier: MIT */
/*
 * cumodd's settings for domains and devices (issue 20): --device
 * N[,M...]|all, --domains, --domain-idle, --domain-memory-max, --standby,
 * [domain NAME] sections and --domain-option NAME:KEY=VALUE. The fields
 * the front reads are checked on cumod__config_parse's result; the errors,
 * --check and --help on cumodd itself, as a user meets them; SIGHUP on
 * cumod__config_reread and cumod__config_apply.
 */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "harness.h"

TH_SUITE_DRIVER(0);

/* A temp folder with an empty kernel folder k/ and a file path. */
typedef struct cd_dir {
    char dir[256];
    char kdir[300];
    char conf[300];
} cd_dir;

static void
cd_dir_init(cd_dir *s)
{
    char cmd[700];
    th_tmpdir(s->dir, sizeof(s->dir));
    snprintf(s->kdir, sizeof(s->kdir), "%s/k", s->dir);
    snprintf(s->conf, sizeof(s->conf), "%s/cumodd.conf", s->dir);
    snprintf(cmd, sizeof(cmd), "mkdir -p %s", s->kdir);
    cr_assert_eq(system(cmd), 0);
}

static void cd_writef(const char *path, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
cd_writef(const char *path, const char *fmt, ...)
{
    char text[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    cr_assert_eq(th_write_file(path, text), 0, "writing %s", path);
}

/* Runs cumodd with args (NULL-ended, at most 30); its output in *out and
 * *err (either may be NULL; caller frees). Returns its exit status. */
static int
cd_cumodd(const char *const *args, char **out, char **err)
{
    const char *argv[32] = {th_cumodd};
    int n = 1;
    for (int i = 0; args[i] != NULL && n < 31; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    return th_run(argv, NULL, out, err, 20000);
}

/* Parses args in this process (argv[0] added; args must outlive cfg). */
static cumod_config_result
cd_parse(cumod_config *cfg, char **argv, const char *const *args)
{
    int n = 1;
    argv[0] = "cumodd";
    for (int i = 0; args[i] != NULL; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    return cumod__config_parse(cfg, n, argv);
}

static const cumod_domain_cfg *
cd_domain(const cumod_config *cfg, const char *name)
{
    for (int i = 0; i < cfg->ndomains; i++)
        if (strcmp(cfg->domains[i].name, name) == 0)
            return &cfg->domains[i];
    return NULL;
}

/* cumodd's stderr for args, with its exit status checked. */
static char *
cd_err_of(const char *const *args, int want_rc)
{
    char *err = NULL;
    int rc = cd_cumodd(args, NULL, &err);
    cr_expect_eq(rc, want_rc, "exit %d, wanted %d: %s", rc, want_rc,
                 err ? err : "");
    return err;
}

#define cd_expect_in(hay, needle)                                              \
    cr_expect(strstr((hay) ? (hay) : "", (needle)) != NULL, "'%s' not in: %s", \
              (needle), (hay) ? (hay) : "(null)")

/* --- Defaults and --device ------------------------------------------------
 */

Test(config_domains, a_configuration_without_any_of_it_is_todays)
{
    cumod_config cfg;
    char *argv[8];

    cr_assert_eq(cd_parse(&cfg, argv, (const char *[]){"--kernels", "/", NULL}),
                 CUMOD_CONFIG_RUN);
    cr_expect_eq(cfg.ndomains, 0);
    cr_expect_eq(cfg.domains_by, CUMOD_DOMAINS_NONE);
    cr_expect_eq(cfg.ndevices, 1);
    cr_expect_eq(cfg.devices[0], 0);
    cr_expect_eq(cfg.device, 0);
    cr_expect_eq(cfg.devices_all, 0);
    cr_expect_eq(cfg.domain_idle_s, 300);
    cr_expect_eq(cfg.standby, 0);
    cr_expect_eq(cfg.domain_mem_limit, 0);
    cumod__config_fini(&cfg);
}

Test(config_domains, device_takes_a_list_or_all)
{
    cumod_config cfg;
    char *argv[8];

    cr_assert_eq(cd_parse(&cfg, argv,
                          (const char *[]){"--kernels", "/", "--device",
                                           "2, 0,5", NULL}),
                 CUMOD_CONFIG_RUN);
    cr_expect_eq(cfg.ndevices, 3);
    cr_expect_eq(cfg.devices[0], 2);
    cr_expect_eq(cfg.devices[1], 0);
    cr_expect_eq(cfg.devices[2], 5);
    cr_expect_eq(cfg.device, 2, "the first is the default device");
    cr_expect_eq(cfg.devices_all, 0);
    cumod__config_fini(&cfg);

    cr_assert_eq(
        cd_parse(&cfg, argv,
                 (const char *[]){"--kernels", "/", "-d", "all", NULL}),
        CUMOD_CONFIG_RUN);
    cr_expect_eq(cfg.devices_all, 1);
    cr_expect_eq(cfg.ndevices, 0);
    cr_expect_eq(cfg.device, 0);
    cumod__config_fini(&cfg);

    /* The executor is still given one device: --device N as before. */
    cr_assert_eq(
        cd_parse(&cfg, argv,
                 (const char *[]){"--kernels", "/", "--device", "7", NULL}),
        CUMOD_CONFIG_RUN);
    cr_expect_eq(cfg.ndevices, 1);
    cr_expect_eq(cfg.devices[0], 7);
    cr_expect_eq(cfg.device, 7);
    cumod__config_fini(&cfg);
}

Test(config_domains, a_flag_replaces_the_files_devices_and_check_prints_them)
{
    cd_dir s;
    char *out = NULL, *err = NULL;

    cd_dir_init(&s);
    cd_writef(s.conf, "kernels = %s\ndevice = 1,3\n", s.kdir);
    int rc = cd_cumodd((const char *[]){"--config", s.conf, "--check", NULL},
                       &out, &err);
    cr_assert_eq(rc, 0, "%s", err);
    cd_expect_in(out, "\ndevice = 1,3 ; from the file\n");
    free(out);
    free(err);
    rc = cd_cumodd((const char *[]){"--config", s.conf, "--device", "all",
                                    "--check", NULL},
                   &out, &err);
    cr_assert_eq(rc, 0, "%s", err);
    cd_expect_in(out, "\ndevice = all ; from a flag\n");
    free(out);
    free(err);
    th_rmtree(s.dir);
}

Test(config_domains, an_instance_named_by_a_number_serves_that_device)
{
    cd_dir s;
    cumod_config cfg;
    char *argv[8], path[400];

    cd_dir_init(&s);
    snprintf(path, sizeof(path), "%s/3.conf", s.dir);
    cd_writef(path, "kernels = %s\n", s.kdir);
    cr_assert_eq(cd_parse(&cfg, argv,
                          (const char *[]){"--instance", "3", "--config-dir",
                                           s.dir, NULL}),
                 CUMOD_CONFIG_RUN);
    cr_expect_eq(cfg.device, 3);
    cr_expect_eq(cfg.ndevices, 1);
    cr_expect_eq(cfg.devices[0], 3);
    cumod__config_fini(&cfg);
    th_rmtree(s.dir);
}

Test(config_domains, a_wrong_device_list_names_the_flag_and_the_item)
{
    char many[400] = "";
    for (int i = 0; i <= CUMOD_CONFIG_MAX_DEVICES; i++)
        snprintf(many + strlen(many), sizeof(many) - strlen(many), "%s%d",
                 i ? "," : "", i);
    const struct {
        const char *value, *says;
    } cases[] = {
        {"0,x", "--device: 'x' is not a number from 0 to 2147483647 in "
                "'0,x' (a device ordinal"},
        {"-1", "--device: '-1' is not a number from 0 to 2147483647 (a "},
        {"1,2,1", "--device: device 1 is listed twice in '1,2,1'"},
        {"all,1", "--device: 'all' stands alone"},
        {"", "--device: an empty list"},
        {" , ", "--device: an empty list"},
        {"99999999999", "'99999999999' is not a number from 0"},
        {many, "--device: at most 64 devices"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *err = cd_err_of((const char *[]){"--kernels", "/", "--device",
                                               cases[i].value, "--check", NULL},
                              64);
        cd_expect_in(err, cases[i].says);
        free(err);
    }
}

/* --- Domains ----------------------------------------------------------------
 */

/* Every key of [domain NAME] and every flag, read into the fields. */
static void
cd_expect_domains(const cumod_config *cfg)
{
    const cumod_domain_cfg *a = cd_domain(cfg, "alpha");
    const cumod_domain_cfg *b = cd_domain(cfg, "beta.2");
    const cumod_domain_cfg *e = cd_domain(cfg, "empty");

    cr_expect_eq(cfg->domains_by, CUMOD_DOMAINS_GID);
    cr_expect_eq(cfg->domain_idle_s, 0);
    cr_expect_eq(cfg->standby, 2);
    cr_expect_eq(cfg->domain_mem_limit, (uint64_t)3 << 30);
    cr_expect_eq(cfg->ndevices, 2);
    cr_assert_eq(cfg->ndomains, 3);
    cr_assert(a && b && e);
    cr_expect_str_eq(cfg->domains[0].name, "alpha", "in order of mention");
    cr_expect_str_eq(cfg->domains[1].name, "beta.2");
    cr_expect_str_eq(cfg->domains[2].name, "empty");
    cr_expect_eq(a->nuids, 3, "root, 1000, 1001 (1000 once)");
    cr_expect_eq(a->uids[0], 0, "user names are resolved");
    cr_expect_eq(a->uids[1], 1000);
    cr_expect_eq(a->uids[2], 1001);
    cr_expect_eq(a->ngids, 2);
    cr_expect_eq(a->gids[0], 0);
    cr_expect_eq(a->gids[1], 50);
    cr_expect_eq(a->start_always, 1);
    cr_expect_eq(a->memory_max, (uint64_t)1 << 30);
    cr_expect_eq(a->device, -1, "none given: the first device");
    cr_expect_null(a->listen);
    cr_expect_eq(b->nuids, 0);
    cr_expect_str_eq(b->listen ? b->listen : "", "ipc:///tmp/cd-beta.sock");
    cr_expect_eq(b->device, 1);
    cr_expect_eq(b->start_always, 0);
    cr_expect_eq(b->memory_max, 512u << 20);
    cr_expect_eq(e->nuids + e->ngids, 0, "a section without keys");
    cr_expect_null(e->listen);
    cr_expect_eq(e->device, -1);
}

Test(config_domains, every_key_of_a_domain_section_is_read)
{
    cd_dir s;
    cumod_config cfg;
    char *argv[8];

    cd_dir_init(&s);
    cd_writef(s.conf,
              "kernels = %s\n"
              "device = 0,1\n"
              "domains = gid\n"
              "domain-idle = 0\n"
              "standby = 2\n"
              "domain-memory-max = 3G\n"
              "[domain alpha]\n"
              "  uids = root, 1000\n"
              "  gids = 0\n"
              "  start = always\n"
              "  memory_max = 1G\n"
              "[domain \"beta.2\"]\n"
              "  listen = ipc:///tmp/cd-beta.sock\n"
              "  device = 1\n"
              "  start = on-demand\n"
              "  memory-max = 512M\n"
              "[domain empty]\n"
              "[domain alpha]\n"
              "  uids = 1001, 1000\n"
              "  gids = 50\n",
              s.kdir);
    cr_assert_eq(
        cd_parse(&cfg, argv, (const char *[]){"--config", s.conf, NULL}),
        CUMOD_CONFIG_RUN);
    cd_expect_domains(&cfg);
    cumod__config_fini(&cfg);
    th_rmtree(s.dir);
}

Test(config_domains, every_flag_says_the_same_as_the_file)
{
    cumod_config cfg;
    char *argv[40];

    cr_assert_eq(
        cd_parse(&cfg, argv,
                 (const char *[]){"--kernels",
                                  "/",
                                  "--device",
                                  "0,1",
                                  "--domains",
                                  "gid",
                                  "--domain-idle",
                                  "0",
                                  "--standby",
                                  "2",
                                  "--domain-memory-max",
                                  "3G",
                                  "--domain-option",
                                  "alpha:uids=root,1000",
                                  "--domain-option",
                                  "alpha:gids=0",
                                  "--domain-option",
                                  "alpha:start=always",
                                  "--domain-option",
                                  "alpha:memory-max=1G",
                                  "--domain-option",
                                  "beta.2:listen=ipc:///tmp/cd-beta.sock",
                                  "--domain-option",
                                  "beta.2:device=1",
                                  "--domain-option",
                                  "beta.2:memory-max=512M",
                                  "--domain-option",
                                  "empty:start=on-demand",
                                  "--domain-option",
                                  "alpha:uids=1001",
                                  "--domain-option",
                                  "alpha: gids = 50",
                                  NULL}),
        CUMOD_CONFIG_RUN);
    cd_expect_domains(&cfg);
    cumod__config_fini(&cfg);
}

Test(config_domains, domains_given_by_flags_replace_the_files)
{
    cd_dir s;
    cumod_config cfg;
    char *argv[8];

    cd_dir_init(&s);
    cd_writef(s.conf,
              "kernels = %s\n[domain a]\nuids = 1000\n[domain b]\n"
              "uids = 1001\n",
              s.kdir);
    cr_assert_eq(
        cd_parse(&cfg, argv,
                 (const char *[]){"--config", s.conf, "--domain-option",
                                  "c:uids=1000", NULL}),
        CUMOD_CONFIG_RUN);
    cr_expect_eq(cfg.ndomains, 1);
    cr_expect_str_eq(cfg.domains[0].name, "c");
    cumod__config_fini(&cfg);
    th_rmtree(s.dir);
}

Test(config_domains, every_error_says_where_and_what)
{
    cd_dir s;

    cd_dir_init(&s);
    cd_writef(s.conf,
              "kernels = %s\n"
              "[domain default]\n"
              "[domain uid-5]\n"
              "[domain gid-x]\n"
              "[domain bad!name]\n"
              "[domain "
              "a123456789b123456789c123456789d123456789e123456789f123456789g123"
              "]\n"
              "[domain ok]\n"
              "uids = nosuchuser-cumod\n"
              "gids = nosuchgroup-cumod\n"
              "bogus = 1\n"
              "start = sometimes\n"
              "device = x\n"
              "memory-max = 1Q\n"
              "uids =\n",
              s.kdir);
    char *err =
        cd_err_of((const char *[]){"--config", s.conf, "--check", NULL}, 78);
    const char *says[] = {
        "cumodd.conf:2: [domain default]: not a domain name (1 to 63 of",
        "cumodd.conf:3: [domain uid-5]: not a domain name",
        "cumodd.conf:4: [domain gid-x]: not a domain name",
        "cumodd.conf:5: [domain bad!name]: not a domain name",
        "cumodd.conf:6: [domain a123456789",
        "cumodd.conf:8: [domain ok] uids: 'nosuchuser-cumod' is not a user "
        "name or number",
        "cumodd.conf:9: [domain ok] gids: 'nosuchgroup-cumod' is not a group "
        "name or number",
        "cumodd.conf:10: [domain ok]: unknown key 'bogus' (uids, gids, "
        "listen, start, device, memory-max, pool)",
        "cumodd.conf:11: [domain ok] start: 'sometimes' is not always or "
        "on-demand",
        "cumodd.conf:12: [domain ok] device: 'x' is not a number from 0 to "
        "2147483647 (a device ordinal)",
        "cumodd.conf:13: [domain ok] memory-max: '1Q' is not a size",
        "cumodd.conf:14: [domain ok] uids: an empty list",
    };
    for (size_t i = 0; i < sizeof(says) / sizeof(says[0]); i++)
        cd_expect_in(err, says[i]);
    free(err);

    /* The flag's errors name the flag. */
    err = cd_err_of((const char *[]){"--kernels", "/", "--domain-option",
                                     "alpha", "--check", NULL},
                    64);
    cd_expect_in(err, "--domain-option: 'alpha' is not NAME:KEY=VALUE");
    free(err);
    err = cd_err_of((const char *[]){"--kernels", "/", "--domain-option",
                                     "default:uids=1", "--check", NULL},
                    64);
    cd_expect_in(err, "--domain-option: [domain default]: not a domain name");
    free(err);
    err = cd_err_of((const char *[]){"--kernels", "/", "--domain-option",
                                     "a:colour=blue", "--check", NULL},
                    64);
    cd_expect_in(err, "--domain-option: [domain a]: unknown key 'colour'");
    free(err);
    err = cd_err_of((const char *[]){"--kernels", "/", "--domains", "user",
                                     "--check", NULL},
                    64);
    cd_expect_in(err, "--domains: 'user' is not none, uid or gid");
    free(err);
    err = cd_err_of(
        (const char *[]){"--kernels", "/", "--standby", "17", "--check", NULL},
        64);
    cd_expect_in(err, "--standby: '17' is not a number from 0 to 16");
    free(err);
    cd_writef(s.conf, "kernels = %s\n", s.kdir);
    for (int i = 0; i <= CUMOD_CONFIG_MAX_DOMAINS; i++) {
        char line[64];
        FILE *f = fopen(s.conf, "a");
        cr_assert(f);
        snprintf(line, sizeof(line), "[domain d%d]\n", i);
        fputs(line, f);
        fclose(f);
    }
    err = cd_err_of((const char *[]){"--config", s.conf, "--check", NULL}, 78);
    cd_expect_in(err, "cumodd.conf:66: [domain d64]: at most 64 domains");
    free(err);
    th_rmtree(s.dir);
}

Test(config_domains, checks_across_settings_name_both_places)
{
    cd_dir s;

    cd_dir_init(&s);
    cd_writef(s.conf,
              "kernels = %s\n"
              "listen = ipc:///tmp/cd-main.sock\n"
              "device = 0,2\n"
              "[domain a]\n"
              "uids = 1000, 1001\n"
              "gids = 100\n"
              "listen = ipc:///tmp/cd-a.sock\n"
              "[domain b]\n"
              "uids = 1001\n"
              "gids = 100\n"
              "listen = ipc:///tmp/cd-main.sock\n"
              "device = 1\n"
              "[domain c]\n"
              "listen = ipc:///tmp/cd-a.sock\n"
              "device = 2\n",
              s.kdir);
    char *err =
        cd_err_of((const char *[]){"--config", s.conf, "--check", NULL}, 78);
    const char *says[] = {
        "cumodd.conf:9: [domain b] uids: uid 1001 is also in [domain a] "
        "(", /* its file and line follow */
        "cumodd.conf:5): a user belongs to one domain",
        "cumodd.conf:10: [domain b] gids: gid 100 is also in [domain a] (",
        "cumodd.conf:6): a group belongs to one domain",
        "cumodd.conf:11: [domain b] listen: ipc:///tmp/cd-main.sock is "
        "cumodd's --listen",
        "cumodd.conf:12: [domain b] device: 1 is not served (--device 0,2)",
        "cumodd.conf:14: [domain c] listen: ipc:///tmp/cd-a.sock is also "
        "[domain a]'s (",
    };
    for (size_t i = 0; i < sizeof(says) / sizeof(says[0]); i++)
        cd_expect_in(err, says[i]);
    cr_expect_null(strstr(err, "[domain c] device"), "device 2 is served: %s",
                   err);
    free(err);

    /* A flag among them: a usage error; --device all serves any. */
    err = cd_err_of((const char *[]){"--config", s.conf, "--listen",
                                     "ipc:///tmp/cd-a.sock", "--check", NULL},
                    64);
    cd_expect_in(err, "cumodd.conf:7: [domain a] listen: ipc:///tmp/cd-a.sock "
                      "is cumodd's --listen");
    free(err);
    err = cd_err_of((const char *[]){"--kernels", "/", "--domain-option",
                                     "x:device=1", "--check", NULL},
                    64);
    cd_expect_in(err, "--domain-option: [domain x] device: 1 is not served "
                      "(--device 0)");
    free(err);
    char *out = NULL;
    int rc = cd_cumodd((const char *[]){"--kernels", s.kdir, "--device", "all",
                                        "--domain-option", "x:device=5",
                                        "--check", NULL},
                       &out, &err);
    cr_expect_eq(rc, 0, "%s", err);
    free(out);
    free(err);
    th_rmtree(s.dir);
}

/* --- --check, --help ------------------------------------------------------
 */

/* The lines of text that set something (not comments), sources cut. */
static char *
cd_settings(const char *text)
{
    char *copy = strdup(text), *res = calloc(1, strlen(text) + 1), *save;
    for (char *l = strtok_r(copy, "\n", &save); l;
         l = strtok_r(NULL, "\n", &save)) {
        if (l[0] == '#')
            continue;
        char *semi = strstr(l, " ; ");
        if (semi)
            *semi = '\0';
        strcat(res, l);
        strcat(res, "\n");
    }
    free(copy);
    return res;
}

Test(config_domains, check_prints_what_reads_back_to_the_same)
{
    cd_dir s;
    char *out = NULL, *err = NULL, *out2 = NULL, again[400];

    cd_dir_init(&s);
    cd_writef(s.conf,
              "kernels = %s\n"
              "device = 3,1\n"
              "domains = uid\n"
              "domain-idle = 60\n"
              "standby = 1\n"
              "domain-memory-max = 2G\n"
              "[domain alpha]\n"
              "uids = root, 1000\n"
              "gids = 0\n"
              "start = always\n"
              "memory-max = 1G\n"
              "[domain beta]\n"
              "listen = ipc:///tmp/cd-beta.sock\n"
              "device = 1\n"
              "[domain empty]\n",
              s.kdir);
    int rc = cd_cumodd((const char *[]){"--config", s.conf, "--check", NULL},
                       &out, &err);
    cr_assert_eq(rc, 0, "%s", err);
    const char *lines[] = {
        "\ndevice = 3,1 ; from the file\n",
        "\ndomains = uid ; from the file\n",
        "\ndomain-idle = 60 ; from the file\n",
        "\nstandby = 1 ; from the file\n",
        "\ndomain-memory-max = 2147483648 ; from the file\n",
        "\ndomain-option = alpha:start=always ; from the file\n"
        "domain-option = alpha:uids=0,1000 ; from the file\n"
        "domain-option = alpha:gids=0 ; from the file\n"
        "domain-option = alpha:memory-max=1073741824 ; from the file\n"
        "domain-option = beta:start=on-demand ; from the file\n"
        "domain-option = beta:listen=ipc:///tmp/cd-beta.sock ; from the file\n"
        "domain-option = beta:device=1 ; from the file\n"
        "domain-option = empty:start=on-demand ; from the file\n",
    };
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
        cd_expect_in(out, lines[i]);

    snprintf(again, sizeof(again), "%s/again.conf", s.dir);
    cr_assert_eq(th_write_file(again, out), 0);
    rc = cd_cumodd((const char *[]){"--config", again, "--check", NULL}, &out2,
                   NULL);
    cr_assert_eq(rc, 0);
    char *a = cd_settings(out), *b = cd_settings(out2);
    cr_expect_str_eq(a, b, "the printed file reads back to the same");
    free(a);
    free(b);

    /* And the same fields, read in this process. */
    cumod_config c1, c2;
    char *argv1[4], *argv2[4];
    cr_assert_eq(
        cd_parse(&c1, argv1, (const char *[]){"--config", s.conf, NULL}),
        CUMOD_CONFIG_RUN);
    cr_assert_eq(
        cd_parse(&c2, argv2, (const char *[]){"--config", again, NULL}),
        CUMOD_CONFIG_RUN);
    cr_expect_eq(c1.ndevices, c2.ndevices);
    cr_expect_eq(memcmp(c1.devices, c2.devices, sizeof(c1.devices)), 0);
    cr_expect_eq(c1.domains_by, c2.domains_by);
    cr_expect_eq(c1.domain_idle_s, c2.domain_idle_s);
    cr_expect_eq(c1.standby, c2.standby);
    cr_expect_eq(c1.domain_mem_limit, c2.domain_mem_limit);
    cr_assert_eq(c1.ndomains, c2.ndomains);
    for (int i = 0; i < c1.ndomains; i++) {
        cumod_domain_cfg x = c1.domains[i], y = c2.domains[i];
        cr_expect_str_eq(x.listen ? x.listen : "", y.listen ? y.listen : "");
        x.listen = y.listen = NULL;
        cr_expect_eq(memcmp(&x, &y, sizeof(x)), 0, "domain %s", x.name);
    }
    cumod__config_fini(&c1);
    cumod__config_fini(&c2);

    /* All devices, too. */
    free(out);
    rc = cd_cumodd(
        (const char *[]){"--config", again, "--device", "all", "--check", NULL},
        &out, NULL);
    cr_assert_eq(rc, 0);
    cd_expect_in(out, "\ndevice = all ; from a flag\n");
    cr_assert_eq(th_write_file(again, out), 0);
    free(out2);
    rc = cd_cumodd((const char *[]){"--config", again, "--check", NULL}, &out2,
                   NULL);
    cr_expect_eq(rc, 0);
    cd_expect_in(out2, "\ndevice = all ; from the file\n");
    free(out);
    free(out2);
    free(err);
    th_rmtree(s.dir);
}

Test(config_domains, help_lists_the_new_flags)
{
    char *out = NULL;
    cr_assert_eq(cd_cumodd((const char *[]){"--help", NULL}, &out, NULL), 0);
    const char *flags[] = {"--device N[,M...]|all",
                           "--domains none|uid|gid",
                           "--domain-option NAME:KEY=VALUE",
                           "--domain-idle SECONDS",
                           "--domain-memory-max BYTES",
                           "--standby N",
                           "[domain NAME]"};
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
        cd_expect_in(out, flags[i]);
    free(out);
}

/* --- SIGHUP -------------------------------------------------------------- */

typedef struct cd_changes {
    char names[16][32];
    int live[16];
    int n;
} cd_changes;

static void
cd_on_change(void *arg, const char *name, int live)
{
    cd_changes *c = arg;
    if (c->n < 16) {
        snprintf(c->names[c->n], sizeof(c->names[0]), "%s", name);
        c->live[c->n++] = live;
    }
}

/* live of the change named name: 1, 0, or -1 when it was not heard. */
static int
cd_heard(const cd_changes *c, const char *name)
{
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->names[i], name) == 0)
            return c->live[i];
    return -1;
}

/* Rereads cur's file (rewritten to text) and applies it; the changes in
 * *ch. */
static void
cd_reread(cumod_config *cur, const char *path, const char *text, cd_changes *ch)
{
    cumod_config next;
    memset(ch, 0, sizeof(*ch));
    cr_assert_eq(th_write_file(path, text), 0);
    cr_assert_eq(cumod__config_reread(cur, &next), 0);
    cumod__config_apply(cur, &next, cd_on_change, ch);
    cumod__config_fini(&next);
}

Test(config_domains, sighup_applies_memory_limits_and_idle_and_not_the_rest)
{
    cd_dir s;
    cumod_config cur;
    cd_changes ch;
    char *argv[4], text[2048];

    cd_dir_init(&s);
    snprintf(text, sizeof(text),
             "kernels = %s\ndevice = 0,1\ndomains = none\n"
             "domain-idle = 300\ndomain-memory-max = 0\nstandby = 0\n"
             "[domain a]\nuids = 1000\nmemory-max = 1G\n",
             s.kdir);
    cr_assert_eq(th_write_file(s.conf, text), 0);
    cr_assert_eq(
        cd_parse(&cur, argv, (const char *[]){"--config", s.conf, NULL}),
        CUMOD_CONFIG_RUN);
    cr_assert_eq(cur.domains[0].memory_max, (uint64_t)1 << 30);

    /* A domain's memory-max, --domain-idle, --domain-memory-max and
     * --standby take effect. */
    snprintf(text, sizeof(text),
             "kernels = %s\ndevice = 0,1\ndomains = none\n"
             "domain-idle = 5\ndomain-memory-max = 4G\nstandby = 2\n"
             "[domain a]\nuids = 1000\nmemory-max = 2G\n",
             s.kdir);
    cd_reread(&cur, s.conf, text, &ch);
    cr_expect_eq(cd_heard(&ch, "domain-option"), 1);
    cr_expect_eq(cd_heard(&ch, "domain-idle"), 1);
    cr_expect_eq(cd_heard(&ch, "domain-memory-max"), 1);
    cr_expect_eq(cd_heard(&ch, "standby"), 1);
    cr_expect_eq(cur.domains[0].memory_max, (uint64_t)2 << 30);
    cr_expect_eq(cur.domain_idle_s, 5);
    cr_expect_eq(cur.domain_mem_limit, (uint64_t)4 << 30);
    cr_expect_eq(cur.standby, 2);

    /* Who a domain takes, --domains and --device need a restart: heard,
     * not applied. */
    snprintf(text, sizeof(text),
             "kernels = %s\ndevice = 1\ndomains = uid\n"
             "domain-idle = 5\ndomain-memory-max = 4G\nstandby = 2\n"
             "[domain a]\nuids = 1001\nmemory-max = 3G\n[domain b]\n",
             s.kdir);
    cd_reread(&cur, s.conf, text, &ch);
    cr_expect_eq(cd_heard(&ch, "domain-option"), 0);
    cr_expect_eq(cd_heard(&ch, "domains"), 0);
    cr_expect_eq(cd_heard(&ch, "device"), 0);
    cr_expect_eq(cur.ndomains, 1);
    cr_expect_eq(cur.domains[0].uids[0], 1000);
    cr_expect_eq(cur.domains[0].memory_max, (uint64_t)2 << 30,
                 "not applied beside a change that needs a restart");
    cr_expect_eq(cur.domains_by, CUMOD_DOMAINS_NONE);
    cr_expect_eq(cur.ndevices, 2);

    /* A file whose domains are wrong changes nothing. */
    cumod_config next;
    snprintf(text, sizeof(text),
             "kernels = %s\n[domain a]\nuids = 1000\n[domain b]\n"
             "uids = 1000\n",
             s.kdir);
    cr_assert_eq(th_write_file(s.conf, text), 0);
    cr_expect_neq(cumod__config_reread(&cur, &next), 0);
    cumod__config_fini(&cur);
    th_rmtree(s.dir);
}
