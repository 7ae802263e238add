/* SPDX-License-Identifier: MIT */
/*
 * cumodctl watch: cumodd's change events as they happen (or all it kept,
 * with --all), one line each, or one JSON object a line with --json.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "ctl_launch.h"
#include "json.h"

const char cumod__ctl_watch_usage[] =
    "  watch [--json] [--all] [--count N]\n"
    "                print change events as they happen: a module\n"
    "                catalogued, loaded, reloaded (old and new generation\n"
    "                and sha256), failing to load (the error), evicted,\n"
    "                unloaded, removed, quarantined or let out; the\n"
    "                executor restarted. --all: first the ones cumodd\n"
    "                kept (its last 4,096); --count: stop after N;\n"
    "                --json: one object a line\n";

static void
watch_time(uint64_t unix_ms, char *out, size_t cap)
{
    time_t t = (time_t)(unix_ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    size_t k = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + k, cap - k, ".%03uZ", (unsigned)(unix_ms % 1000));
}

static void
watch_print(const cumod_event *e, int json)
{
    if (json) {
        cumod_json j;
        cumod__json_init(&j, stdout, 0);
        cumod__json_begin_object(&j, NULL);
        cumod__json_uint(&j, "seq", e->seq);
        cumod__json_string(&j, "kind", cumod_event_kind_name(e->kind));
        cumod__json_string(&j, "module", e->module[0] ? e->module : NULL);
        cumod__json_uint(&j, "generation", e->generation);
        cumod__json_uint(&j, "old_generation", e->old_generation);
        cumod__json_string(&j, "sha256", e->sha256[0] ? e->sha256 : NULL);
        cumod__json_string(&j, "old_sha256",
                           e->old_sha256[0] ? e->old_sha256 : NULL);
        cumod__json_string(&j, "detail", e->detail[0] ? e->detail : NULL);
        cumod__json_uint(&j, "unix_ms", e->unix_ms);
        cumod__json_end_object(&j);
        cumod__json_finish(&j);
        return;
    }
    char when[40];
    watch_time(e->unix_ms, when, sizeof(when));
    printf("%s #%llu %s", when, (unsigned long long)e->seq,
           cumod_event_kind_name(e->kind));
    if (e->module[0])
        printf(" %s", e->module);
    if (e->generation)
        printf(" generation %llu", (unsigned long long)e->generation);
    if (e->sha256[0])
        printf(" (sha256 %.12s)", e->sha256);
    if (e->old_generation || e->old_sha256[0]) {
        printf(" after");
        if (e->old_generation)
            printf(" generation %llu", (unsigned long long)e->old_generation);
        if (e->old_sha256[0])
            printf(" (sha256 %.12s)", e->old_sha256);
    }
    if (e->detail[0])
        printf(": %s", e->detail);
    putchar('\n');
}

int
cumod__ctl_watch(int argc, char **argv, ctl *o)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},
        {"all", no_argument, NULL, 'a'},
        {"count", required_argument, NULL, 'n'},
        {NULL, 0, NULL, 0},
    };
    long count = -1;
    int all = 0, ch, rv;
    cumod_client *c;

    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":jan:", opts, NULL)) != -1) {
        switch (ch) {
        case 'j':
            o->json = 1;
            break;
        case 'a':
            all = 1;
            break;
        case 'n': {
            char *end;
            errno = 0;
            count = strtol(optarg, &end, 10);
            if (errno || end == optarg || *end || count <= 0) {
                return cumod__ctl_usage(
                    "cumodctl watch: --count: '%s' is not a number of "
                    "events above 0\n",
                    optarg);
            }
            break;
        }
        case ':':
            return cumod__ctl_usage("cumodctl watch: option %s needs a value\n",
                                    argv[optind - 1]);
        default:
            return cumod__ctl_usage(
                "cumodctl watch: unknown option %s (see cumodctl "
                "--help)\n",
                argv[optind - 1]);
        }
    }
    if (optind < argc) {
        return cumod__ctl_usage("cumodctl watch: unexpected argument '%s'\n",
                                argv[optind]);
    }
    /* Each event as it comes, even into a pipe. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    if ((rv = cumod_open_tls(o->url, o->timeout_ms, &o->tls, &c)) != CUMOD_OK) {
        return cumod__ctl_fail("connect", rv, NULL);
    }
    uint64_t after = all ? 0 : CUMOD_EVENTS_NOW;
    static cumod_event evs[64];
    /* Each wait as long as this cumodd allows (--max-watch-wait refuses
     * longer ones): the first that is taken is kept. */
    static const uint32_t waits[] = {30000, 10000, 1000, 100, 0};
    size_t wi = 0;
    for (long seen = 0; count < 0 || seen < count;) {
        size_t n;
        uint64_t missed;
        rv = cumod_events_wait(c, &after, waits[wi], evs, 64, &n, &missed);
        if (rv == CUMOD_EINVAL && wi + 1 < sizeof(waits) / sizeof(waits[0]) &&
            strstr(cumod_last_detail(), "--max-watch-wait") != NULL) {
            wi++;
            continue;
        }
        if (rv == CUMOD_OK && n == 0 && waits[wi] < 100)
            usleep(100000); /* a cumodd that allows no long poll */
        if (rv != CUMOD_OK) {
            cumod__ctl_fail(NULL, rv, NULL);
            cumod_close(c);
            return 1;
        }
        if (missed > 0 && !all) {
            if (o->json)
                printf("{\"missed\":%llu}\n", (unsigned long long)missed);
            else
                printf("(%llu events were not kept)\n",
                       (unsigned long long)missed);
        }
        for (size_t i = 0; i < n && (count < 0 || seen < count); i++, seen++)
            watch_print(&evs[i], o->json);
    }
    cumod_close(c);
    return 0;
}
