/* SPDX-License-Identifier: MIT */
/*
 * cumodctl status: the daemon, its device and executor, then (from a
 * cumodd that names them) every device and fault domain it serves and
 * this session's place among them.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ctl_launch.h"
#include "json.h"

static int
status_fail(int rv)
{
    return cumod__ctl_fail(NULL, rv, NULL);
}

static void
ctl_bytes(char *buf, size_t cap, uint64_t b)
{
    if (b >= (1ull << 30))
        snprintf(buf, cap, "%.1f GiB", (double)b / (double)(1ull << 30));
    else
        snprintf(buf, cap, "%.1f MiB", (double)b / (double)(1ull << 20));
}

/* A wall-clock time in milliseconds as local "YYYY-MM-DD HH:MM:SS". */
static void
ctl_time(char *buf, size_t cap, uint64_t unix_ms)
{
    time_t t = (time_t)(unix_ms / 1000);
    struct tm tm;
    if (unix_ms == 0 || localtime_r(&t, &tm) == NULL ||
        strftime(buf, cap, "%Y-%m-%d %H:%M:%S", &tm) == 0)
        snprintf(buf, cap, "-");
}

/* status --json: the devices and domains (cumod_domains_get). */
static void
ctl_json_domains(cumod_json *j, const cumod_domains *d)
{
    cumod__json_begin_object(j, "session");
    cumod__json_string(j, "domain", d->domain[0] ? d->domain : NULL);
    cumod__json_int(j, "device", d->device);
    cumod__json_end_object(j);
    cumod__json_begin_object(j, "standby");
    cumod__json_uint(j, "executors", d->standby);
    cumod__json_uint(j, "bytes", d->standby_bytes);
    cumod__json_end_object(j);
    cumod__json_uint(j, "max_message", d->max_message);
    cumod__json_begin_array(j, "devices");
    for (size_t i = 0; i < d->ndevices; i++) {
        const cumod_gpu_info *g = &d->devices[i];
        cumod__json_begin_object(j, NULL);
        cumod__json_int(j, "ordinal", g->ordinal);
        cumod__json_string(j, "name", g->name);
        cumod__json_string(j, "uuid", g->uuid[0] ? g->uuid : NULL);
        cumod__json_uint(j, "sm_major", g->sm_major);
        cumod__json_uint(j, "sm_minor", g->sm_minor);
        cumod__json_uint(j, "total_bytes", g->total_memory);
        cumod__json_uint(j, "free_bytes", g->free_memory);
        cumod__json_uint(j, "executors", g->executors);
        cumod__json_uint(j, "standby", g->standby);
        cumod__json_end_object(j);
    }
    cumod__json_end_array(j);
    cumod__json_begin_array(j, "domains");
    for (size_t i = 0; i < d->ndomains; i++) {
        const cumod_domain_info *m = &d->domains[i];
        cumod__json_begin_object(j, NULL);
        cumod__json_string(j, "name", m->name);
        cumod__json_int(j, "device", m->device);
        cumod__json_string(j, "executor_state", m->executor_state);
        cumod__json_int(j, "executor_pid", m->executor_pid);
        cumod__json_uint(j, "sessions", m->sessions);
        cumod__json_uint(j, "memory_bytes", m->memory_bytes);
        cumod__json_uint(j, "memory_max", m->memory_max);
        cumod__json_uint(j, "restarts", m->restarts);
        cumod__json_string(j, "last_fault",
                           m->last_fault[0] ? m->last_fault : NULL);
        cumod__json_uint(j, "last_fault_unix_ms", m->last_fault_unix_ms);
        cumod__json_uint(j, "resident_modules", m->resident_modules);
        cumod__json_uint(j, "pool_member", m->pool_member);
        cumod__json_uint(j, "pool_size", m->pool_size);
        cumod__json_bool(j, "mps", m->mps);
        cumod__json_end_object(j);
    }
    cumod__json_end_array(j);
}

/* status: the lines after the daemon's own, for a cumodd that names its
 * devices and domains (an older one names none: nothing is printed). */
static void
ctl_text_domains(const cumod_domains *d)
{
    char a[32], b[32], when[32];

    if (d->domain[0])
        printf("session:  domain %s, device %d\n", d->domain, d->device);
    if (d->ndevices == 0 && d->ndomains == 0)
        return;
    ctl_bytes(a, sizeof(a), d->standby_bytes);
    printf("standby:  %u executors (%s)\n", d->standby, a);
    printf("\n%-6s %-40s %-21s %-9s %-7s %s\n", "DEVICE", "UUID", "FREE/TOTAL",
           "EXECUTORS", "STANDBY", "NAME");
    for (size_t i = 0; i < d->ndevices; i++) {
        const cumod_gpu_info *g = &d->devices[i];
        char mem[64];
        ctl_bytes(a, sizeof(a), g->free_memory);
        ctl_bytes(b, sizeof(b), g->total_memory);
        snprintf(mem, sizeof(mem), "%s/%s", a, b);
        printf("%-6d %-40s %-21s %-9u %-7u %s (sm_%u%u)\n", g->ordinal,
               g->uuid[0] ? g->uuid : "-", mem, g->executors, g->standby,
               g->name, g->sm_major, g->sm_minor);
    }
    printf("\n%-16s %-6s %-13s %-8s %-8s %-21s %-8s %s\n", "DOMAIN", "DEVICE",
           "STATE", "PID", "SESSIONS", "MEMORY/MAX", "RESTARTS", "LAST_FAULT");
    int any_mps = 0;
    for (size_t i = 0; i < d->ndomains; i++) {
        const cumod_domain_info *m = &d->domains[i];
        char mem[64], name[96];
        if (m->pool_size > 1)
            snprintf(name, sizeof(name), "%s[%u/%u]%s", m->name,
                     m->pool_member + 1, m->pool_size, m->mps ? "*" : "");
        else
            snprintf(name, sizeof(name), "%s%s", m->name, m->mps ? "*" : "");
        any_mps |= m->mps;
        ctl_bytes(a, sizeof(a), m->memory_bytes);
        if (m->memory_max) {
            ctl_bytes(b, sizeof(b), m->memory_max);
            snprintf(mem, sizeof(mem), "%s/%s", a, b);
        } else {
            snprintf(mem, sizeof(mem), "%s/-", a);
        }
        ctl_time(when, sizeof(when), m->last_fault_unix_ms);
        printf("%-16s %-6d %-13s %-8lld %-8u %-21s %-8u ", name, m->device,
               m->executor_state, (long long)m->executor_pid, m->sessions, mem,
               m->restarts);
        if (m->last_fault[0])
            printf("%s (%s)\n", m->last_fault, when);
        else
            printf("-\n");
    }
    if (any_mps)
        printf("\n* an MPS client: a fatal fault in any MPS client of its "
               "device ends it too (docs/isolation.md)\n");
}

int
cumod__ctl_status(cumod_client *c, const ctl *o)
{
    cumod_device_info di;
    cumod_domains *dom = NULL;
    char total[32], free_b[32], age[48], since[32];
    int rv;

    if ((rv = cumod_device_info_get(c, &di)) != CUMOD_OK ||
        (rv = cumod_domains_get(c, &dom)) != CUMOD_OK)
        return status_fail(rv);
    if (o->json) {
        cumod_json j;
        char sm[16], drv[16];
        snprintf(sm, sizeof(sm), "%u.%u", di.sm_major, di.sm_minor);
        snprintf(drv, sizeof(drv), "%d.%d", di.driver_version / 1000,
                 (di.driver_version % 1000) / 10);
        cumod__json_init(&j, stdout, 1);
        cumod__json_begin_object(&j, NULL);
        cumod__json_string(&j, "url", o->url);
        cumod__json_string(&j, "daemon_version", di.daemon_version);
        cumod__json_uint(&j, "protocol_version", di.protocol_version);
        cumod__json_begin_object(&j, "device");
        cumod__json_int(&j, "ordinal", di.ordinal);
        cumod__json_string(&j, "name", di.name);
        cumod__json_string(&j, "sm", sm);
        cumod__json_uint(&j, "sm_major", di.sm_major);
        cumod__json_uint(&j, "sm_minor", di.sm_minor);
        cumod__json_uint(&j, "multiprocessors", di.multiprocessors);
        cumod__json_end_object(&j);
        cumod__json_begin_object(&j, "driver");
        cumod__json_string(&j, "version", drv);
        cumod__json_int(&j, "cuda_version", di.driver_version);
        cumod__json_end_object(&j);
        cumod__json_begin_object(&j, "memory");
        cumod__json_uint(&j, "total_bytes", di.total_memory);
        cumod__json_uint(&j, "free_bytes", di.free_memory);
        cumod__json_end_object(&j);
        cumod__json_string(&j, "kernel_dir", di.kernel_dir);
        cumod__json_bool(&j, "kernel_dir_degraded", di.kernel_dir_degraded);
        cumod__json_uint(&j, "modules", di.modules);
        cumod__json_uint(&j, "resident_modules", di.resident_modules);
        cumod__json_uint(&j, "resident_bytes", di.resident_bytes);
        cumod__json_int(&j, "executor_pid", di.executor_pid);
        cumod__json_begin_object(&j, "executor");
        cumod__json_int(&j, "pid", di.executor_pid);
        cumod__json_string(&j, "state", di.executor_state);
        cumod__json_uint(&j, "since_unix_ms", di.executor_state_since_unix_ms);
        cumod__json_uint(&j, "restarts", di.executor_restarts);
        cumod__json_string(&j, "last_fault",
                           di.last_fault[0] ? di.last_fault : NULL);
        cumod__json_uint(&j, "last_fault_unix_ms", di.last_fault_unix_ms);
        cumod__json_end_object(&j);
        cumod__json_uint(&j, "free_memory_age_ms", di.free_memory_age_ms);
        cumod__json_uint(&j, "launch_deadline_ms", di.launch_deadline_ms);
        cumod__json_uint(&j, "max_launch_deadline_ms",
                         di.max_launch_deadline_ms);
        ctl_json_domains(&j, dom);
        cumod__json_end_object(&j);
        cumod__json_finish(&j);
        cumod_domains_free(dom);
        return 0;
    }
    ctl_bytes(total, sizeof(total), di.total_memory);
    ctl_bytes(free_b, sizeof(free_b), di.free_memory);
    if (di.free_memory_age_ms < 1000)
        snprintf(age, sizeof(age), "now");
    else
        snprintf(age, sizeof(age), "as of %.1f s ago",
                 (double)di.free_memory_age_ms / 1000.0);
    printf("daemon:   cumodd %s (protocol %u) at %s\n", di.daemon_version,
           di.protocol_version, o->url);
    printf("device:   %d: %s\n", di.ordinal, di.name);
    printf("sm:       %u.%u (sm_%u%u), %u multiprocessors\n", di.sm_major,
           di.sm_minor, di.sm_major, di.sm_minor, di.multiprocessors);
    printf("driver:   CUDA %d.%d (%d)\n", di.driver_version / 1000,
           (di.driver_version % 1000) / 10, di.driver_version);
    printf("memory:   %s total, %s free (%llu / %llu bytes, %s)\n", total,
           free_b, (unsigned long long)di.total_memory,
           (unsigned long long)di.free_memory, age);
    printf("kernels:  %s%s\n", di.kernel_dir,
           di.kernel_dir_degraded ? " (DEGRADED: the folder is gone)" : "");
    printf("modules:  %u (%u resident, %llu bytes)\n", di.modules,
           di.resident_modules, (unsigned long long)di.resident_bytes);
    ctl_time(since, sizeof(since), di.executor_state_since_unix_ms);
    printf("executor: %s since %s, pid %lld, %u restarts\n", di.executor_state,
           since, (long long)di.executor_pid, di.executor_restarts);
    if (di.last_fault[0]) {
        ctl_time(since, sizeof(since), di.last_fault_unix_ms);
        printf("fault:    %s (%s)\n", di.last_fault, since);
    }
    printf("deadline: %s", di.launch_deadline_ms ? "" : "none by default");
    if (di.launch_deadline_ms)
        printf("%u ms by default", di.launch_deadline_ms);
    if (di.max_launch_deadline_ms)
        printf(", at most %u ms", di.max_launch_deadline_ms);
    printf("\n");
    ctl_text_domains(dom);
    cumod_domains_free(dom);
    return 0;
}
