/* SPDX-License-Identifier: MIT */
/*
 * The metrics' rendering (metrics.h): the text format, family group by
 * family group (launches, modules, executors, sessions, limits, build,
 * process), from the counters (metrics.c) and what the front holds (its
 * units, sessions, catalog and server), and what /healthz and /readyz
 * answer until the next rendering. Loop thread.
 */
#include <dirent.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cumod/version.h"
#include "front/transport/fdpass.h"
#include "front/metrics_impl.h"

/* --- Rendering (loop thread) --------------------------------------------- */

typedef struct mbuf {
    char *p;
    size_t len, cap;
    int oom;
} mbuf;

static void __attribute__((format(printf, 2, 3)))
mb_printf(mbuf *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        size_t room = b->cap - b->len;
        va_start(ap, fmt);
        int n = b->p ? vsnprintf(b->p + b->len, room, fmt, ap) : -1;
        va_end(ap);
        if (b->p != NULL && n >= 0 && (size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 16384;
        while (n > 0 && cap - b->len <= (size_t)n)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

/* A label value, escaped as the text format wants (\\, \", \n). */
static void
mb_label(mbuf *b, const char *s)
{
    char tmp[1024];
    size_t k = 0;
    for (; *s && k + 2 < sizeof(tmp); s++) {
        if (*s == '\\' || *s == '"') {
            tmp[k++] = '\\';
            tmp[k++] = *s;
        } else if (*s == '\n') {
            tmp[k++] = '\\';
            tmp[k++] = 'n';
        } else {
            tmp[k++] = *s;
        }
    }
    tmp[k] = '\0';
    mb_printf(b, "%s", tmp);
}

/* The UUID of the device of that ordinal as its executor said it
 * ("GPU-..."), "" when not heard yet. */
static const char *
m_uuid(const cumod_front *f, int device)
{
    for (uint32_t i = 0; i < f->ndevs; i++)
        if (f->devs[i].ordinal == device)
            return f->devs[i].uuid;
    return "";
}

/* Ends the labels of a series of one device: every such series carries
 * device (the CUDA ordinal) and gpu_uuid, the UUID DCGM's exporter and
 * Triton label GPUs with, to join on. */
static void
mb_dev_end(mbuf *b, const cumod_front *f, int device)
{
    mb_printf(b, ",gpu_uuid=\"");
    mb_label(b, m_uuid(f, device));
    mb_printf(b, "\"}");
}

static void
mb_head(mbuf *b, const char *name, const char *type, const char *help)
{
    mb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void
mb_value(mbuf *b, const char *name, double v)
{
    mb_printf(b, "%s %.17g\n", name, v);
}

/* Domains, devices and standbys (unit.h). */
static void
m_units(mbuf *b, cumod_front *f)
{
    static const struct {
        const char *name, *type, *help;
    } heads[] = {
        {"cumod_domain_executor_up", "gauge",
         "1 while the domain's executor on the device serves."},
        {"cumod_domain_restarts_total", "counter",
         "Executors of the domain lost (faults, hangs, deaths)."},
        {"cumod_domain_takeovers_total", "counter",
         "Times a standby executor took the domain's place."},
        {"cumod_domain_sessions", "gauge", "Sessions of the domain."},
        {"cumod_domain_memory_bytes", "gauge",
         "Device memory the domain's sessions hold."},
        {"cumod_domain_memory_max_bytes", "gauge",
         "The domain's memory limit; 0: none."},
        {"cumod_domain_resident_modules", "gauge",
         "Modules loaded in the domain's executor."},
        {"cumod_domain_executor_mps", "gauge",
         "1 while the domain's executor is an MPS client (a pool's: a "
         "fatal fault in any MPS client of the device ends it too)."},
    };
    for (size_t k = 0; k < sizeof(heads) / sizeof(heads[0]); k++) {
        mb_head(b, heads[k].name, heads[k].type, heads[k].help);
        for (uint32_t i = 0; i < f->nunits; i++) {
            const cumod_unit *u = f->units[i];
            double v = 0;
            if (!u->serves)
                continue;
            switch (k) {
            case 0:
                v = cumod__unit_ready(u);
                break;
            case 1:
                v = u->restarts;
                break;
            case 2:
                v = u->takeovers;
                break;
            case 3:
                v = u->sessions;
                break;
            case 4:
                v = (double)cumod__unit_mem_used(u);
                break;
            case 5:
                v = (double)cumod__unit_mem_max(u);
                break;
            case 6:
                v = u->replicas_on ? cumod__reps_count(u) : 0;
                break;
            default:
                v = u->mps && cumod__unit_ready(u);
                break;
            }
            mb_printf(b, "%s{device=\"%d\",domain=\"", heads[k].name,
                      u->device);
            mb_label(b, u->domain);
            mb_printf(b, "\"");
            if (u->pool > 1) /* a pool's executors, one series each */
                mb_printf(b, ",member=\"%u\"", u->member);
            mb_dev_end(b, f, u->device);
            mb_printf(b, " %.17g\n", v);
        }
    }
    mb_head(b, "cumod_standby_executors", "gauge",
            "Spare executors ready, with their context made (--standby).");
    mb_head(b, "cumod_standby_memory_bytes", "gauge",
            "Device memory the ready spare executors' contexts took, as "
            "the device's free memory fell when each came up.");
    for (int d = 0; d < f->ndevices; d++) {
        uint32_t n = 0;
        uint64_t bytes = 0;
        for (uint32_t i = 0; i < f->nunits; i++) {
            const cumod_unit *u = f->units[i];
            if (u->role != CUMOD_UNIT_STANDBY || u->device != f->devices[d] ||
                !cumod__unit_ready(u))
                continue;
            n++;
            uint64_t before = f->loader ? f->loader->ready_free : 0;
            if (before > u->ready_free)
                bytes += before - u->ready_free;
        }
        mb_printf(b, "cumod_standby_executors{device=\"%d\"", f->devices[d]);
        mb_dev_end(b, f, f->devices[d]);
        mb_printf(b, " %u\n", n);
        mb_printf(b, "cumod_standby_memory_bytes{device=\"%d\"", f->devices[d]);
        mb_dev_end(b, f, f->devices[d]);
        mb_printf(b, " %llu\n", (unsigned long long)bytes);
    }
    mb_head(b, "cumod_device_info", "gauge",
            "1 for each device served, with its name and UUID.");
    for (uint32_t i = 0; i < f->ndevs; i++) {
        mb_printf(b, "cumod_device_info{device=\"%d\",name=\"",
                  f->devs[i].ordinal);
        mb_label(b, f->devs[i].name);
        mb_printf(b, "\"");
        mb_dev_end(b, f, f->devs[i].ordinal);
        mb_printf(b, " 1\n");
    }
}

static void
mb_module_counter(mbuf *b, cumod_metrics *m, const char *name, const char *help,
                  size_t off)
{
    size_t cur = 0;
    mod_counts *c;
    mb_head(b, name, "counter", help);
    while ((c = cumod__idmap_next(&m->mods, &cur, NULL)) != NULL) {
        mb_printf(b, "%s{module=\"", name);
        mb_label(b, c->name);
        mb_printf(b, "\"} %llu\n",
                  (unsigned long long)*(uint64_t *)((char *)c + off));
    }
}

static void
mb_hist(mbuf *b, const char *name, const char *help, const double *le,
        const hist *h)
{
    mb_head(b, name, "histogram", help);
    for (size_t i = 0; i < NHIST; i++)
        mb_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, le[i],
                  (unsigned long long)h->bucket[i]);
    mb_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n", name,
              (unsigned long long)h->count);
    mb_printf(b, "%s_sum %.9g\n", name, h->sum);
    mb_printf(b, "%s_count %llu\n", name, (unsigned long long)h->count);
}

/* A series of the catalog's executor's device. */
static void
mb_dev_value(mbuf *b, const cumod_front *f, const char *name, int device,
             double v)
{
    mb_printf(b, "%s{device=\"%d\"", name, device);
    mb_dev_end(b, f, device);
    mb_printf(b, " %.17g\n", v);
}

/* The process_ metrics of Prometheus' client libraries, from /proc/self:
 * the front process's (each executor is a process of its own). */
static void
m_process(mbuf *b)
{
    long tck = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    unsigned long long utime = 0, stime = 0, start = 0, vsize = 0, rss = 0;
    char buf[1024];
    FILE *fp;
    if (tck <= 0)
        tck = 100;
    if (page <= 0)
        page = 4096;
    if ((fp = fopen("/proc/self/stat", "re")) != NULL) {
        size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
        buf[n] = '\0';
        fclose(fp);
        /* After the command's ")": state is field 3, utime 14, stime 15,
         * starttime 22, vsize 23, rss 24. */
        char *p = strrchr(buf, ')');
        if (p != NULL &&
            sscanf(p + 2,
                   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu "
                   "%*d %*d %*d %*d %*d %*d %llu %llu %llu",
                   &utime, &stime, &start, &vsize, &rss) != 5)
            utime = stime = start = vsize = rss = 0;
    }
    double btime = 0;
    if ((fp = fopen("/proc/stat", "re")) != NULL) {
        while (fgets(buf, sizeof(buf), fp) != NULL)
            if (strncmp(buf, "btime ", 6) == 0) {
                btime = strtod(buf + 6, NULL);
                break;
            }
        fclose(fp);
    }
    unsigned fds = 0;
    DIR *d = opendir("/proc/self/fd");
    if (d != NULL) {
        for (struct dirent *e; (e = readdir(d)) != NULL;)
            if (e->d_name[0] != '.')
                fds++;
        closedir(d);
        fds--; /* the one opendir holds */
    }
    struct rlimit rl = {0};
    (void)getrlimit(RLIMIT_NOFILE, &rl);
    mb_head(b, "process_cpu_seconds_total", "counter",
            "Total user and system CPU time spent in seconds.");
    mb_value(b, "process_cpu_seconds_total", (double)(utime + stime) / tck);
    mb_head(b, "process_virtual_memory_bytes", "gauge",
            "Virtual memory size in bytes.");
    mb_value(b, "process_virtual_memory_bytes", (double)vsize);
    mb_head(b, "process_resident_memory_bytes", "gauge",
            "Resident memory size in bytes.");
    mb_value(b, "process_resident_memory_bytes", (double)rss * (double)page);
    mb_head(b, "process_start_time_seconds", "gauge",
            "Start time of the process since unix epoch in seconds.");
    mb_value(b, "process_start_time_seconds", btime + (double)start / tck);
    mb_head(b, "process_open_fds", "gauge", "Number of open file descriptors.");
    mb_value(b, "process_open_fds", fds);
    mb_head(b, "process_max_fds", "gauge",
            "Maximum number of open file descriptors.");
    mb_value(b, "process_max_fds",
             rl.rlim_cur == RLIM_INFINITY ? -1 : (double)rl.rlim_cur);
}

/* Launches, device time, refusals, latency, requests, copies. */
static void
m_launches(mbuf *b, cumod_metrics *m, cumod_front *f)
{
    size_t cur;
    mod_counts *c;

    mb_head(b, "cumod_launches_total", "counter",
            "Launches that reached the device, by module and outcome "
            "(completed, or failed on the device).");
    cur = 0;
    while ((c = cumod__idmap_next(&m->mods, &cur, NULL)) != NULL) {
        mb_printf(b, "cumod_launches_total{module=\"");
        mb_label(b, c->name);
        mb_printf(b, "\",outcome=\"completed\"} %llu\n",
                  (unsigned long long)c->launches_ok);
        mb_printf(b, "cumod_launches_total{module=\"");
        mb_label(b, c->name);
        mb_printf(b, "\",outcome=\"failed\"} %llu\n",
                  (unsigned long long)c->launches_failed);
    }
    /* Device time. */
    cumod__metrics_fold(m);
    mb_head(b, "cumod_gpu_seconds_total", "counter",
            "Device time of completed work, by device, domain, module and "
            "kernel (module \"\": kernel \"copy\" or \"gemm\"; kernel "
            "\"\": kernels of a module no longer resident), from "
            "completion timestamps.");
    cur = 0;
    for (gpu_counts *g; (g = cumod__idmap_next(&m->gpu, &cur, NULL));) {
        mb_printf(b, "cumod_gpu_seconds_total{device=\"%d\",domain=\"",
                  g->device);
        mb_label(b, g->domain);
        mb_printf(b, "\",module=\"");
        mb_label(b, g->module);
        mb_printf(b, "\",kernel=\"");
        mb_label(b, g->kernel);
        mb_printf(b, "\"");
        mb_dev_end(b, f, g->device);
        mb_printf(b, " %.9f\n", (double)g->ns / 1e9);
    }
    mb_head(b, "cumod_launches_refused_total", "counter",
            "Launch and batch requests refused before reaching the device "
            "(arguments, limits, modules that cannot load).");
    mb_value(b, "cumod_launches_refused_total", (double)m->refused);
    uint64_t conn_access = 0, conn_limit = 0;
    if (f->srv != NULL)
        cumod__server_refusals(f->srv, &conn_access, &conn_limit);
    mb_head(b, "cumod_refusals_total", "counter",
            "Refusals by reason: connections (connection_access: not "
            "allowed by --allow-uid, --allow-gid or --allow-cert-subject; "
            "connection_limit: over --max-connections), control requests "
            "of peers --control-uid / --control-gid do not admit "
            "(control_access), and launches refused before the device, by "
            "the code they were answered.");
    mb_printf(b, "cumod_refusals_total{reason=\"connection_access\"} %llu\n",
              (unsigned long long)conn_access);
    mb_printf(b, "cumod_refusals_total{reason=\"connection_limit\"} %llu\n",
              (unsigned long long)conn_limit);
    mb_printf(b, "cumod_refusals_total{reason=\"control_access\"} %llu\n",
              (unsigned long long)m->control_refused);
    for (size_t i = 0; i < NREASONS; i++)
        mb_printf(b, "cumod_refusals_total{reason=\"%s\"} %llu\n",
                  refusal_reasons[i].reason,
                  (unsigned long long)m->refused_by[i]);
    mb_head(b, "cumod_launch_latency_seconds", "histogram",
            "Launches and batches from their request to their completion.");
    for (size_t i = 0; i < NLAT; i++)
        mb_printf(b, "cumod_launch_latency_seconds_bucket{le=\"%g\"} %llu\n",
                  lat_le[i], (unsigned long long)m->lat_bucket[i]);
    mb_printf(b, "cumod_launch_latency_seconds_bucket{le=\"+Inf\"} %llu\n",
              (unsigned long long)m->lat_count);
    mb_printf(b, "cumod_launch_latency_seconds_sum %.9g\n", m->lat_sum);
    mb_printf(b, "cumod_launch_latency_seconds_count %llu\n",
              (unsigned long long)m->lat_count);
    mb_head(b, "cumod_requests_total", "counter",
            "Client requests by transport: the fast path (a shared-memory "
            "ring) or nng.");
    mb_printf(b, "cumod_requests_total{transport=\"ring\"} %llu\n",
              (unsigned long long)m->requests[1]);
    mb_printf(b, "cumod_requests_total{transport=\"nng\"} %llu\n",
              (unsigned long long)m->requests[0]);
    mb_head(b, "cumod_direct_launches_total", "counter",
            "Launches and GEMMs an executor took from a ring, checked and "
            "ran itself (direct launches), without the front; counted in "
            "cumod_requests_total{transport=\"ring\"} too.");
    mb_printf(b, "cumod_direct_launches_total %llu\n",
              (unsigned long long)m->direct_launches);
    uint64_t ho[3];
    cumod__fdpass_stats(f->fdpass, &ho[0], &ho[1], &ho[2]);
    mb_head(b, "cumod_handovers_total", "counter",
            "Descriptors handed over on SOCKET.fds (rings' and segments' "
            "memfds): received, refused (not a handover), dropped (evicted "
            "or expired untaken).");
    static const char *const ho_r[] = {"received", "refused", "dropped"};
    for (int i = 0; i < 3; i++)
        mb_printf(b, "cumod_handovers_total{result=\"%s\"} %llu\n", ho_r[i],
                  (unsigned long long)ho[i]);
    mb_head(b, "cumod_queue_depth", "gauge",
            "Requests of clients in progress: work on the device or waiting "
            "for it, and requests parked on modules.");
    mb_value(b, "cumod_queue_depth", (double)f->inflight);
    mb_head(b, "cumod_copied_bytes_total", "counter",
            "Bytes copied by completed work, by direction.");
    static const char *const dirs[] = {"to_device", "to_host", "on_device"};
    for (int i = 0; i < 3; i++)
        mb_printf(b, "cumod_copied_bytes_total{direction=\"%s\"} %llu\n",
                  dirs[i], (unsigned long long)m->bytes[i]);
}

/* Module loads, compiles and the catalog's figures. */
static void
m_modules(mbuf *b, cumod_metrics *m, cumod_front *f)
{
    mb_hist(b, "cumod_module_load_seconds",
            "Module loads and reloads in the catalog's executor (the "
            "driver's load of the image).",
            load_le, &m->load);
    mb_hist(b, "cumod_compile_seconds",
            "NAME.cu compiles, answers from the compile cache and failed "
            "compiles included.",
            compile_le, &m->compile);
    mb_module_counter(b, m, "cumod_module_loads_total",
                      "Generations loaded where none was resident.",
                      offsetof(mod_counts, loads));
    mb_module_counter(b, m, "cumod_module_reloads_total",
                      "Generations that replaced a resident one.",
                      offsetof(mod_counts, reloads));
    mb_module_counter(b, m, "cumod_module_load_failures_total",
                      "Loads and reloads that failed, and files refused.",
                      offsetof(mod_counts, load_failures));
    mb_module_counter(b, m, "cumod_module_quarantines_total",
                      "Times a module's bytes were quarantined.",
                      offsetof(mod_counts, quarantines));
    mb_module_counter(b, m, "cumod_module_evictions_total",
                      "Unloads to make room or of idle modules.",
                      offsetof(mod_counts, evictions));
    uint32_t modules = 0, resident = 0;
    uint64_t resident_bytes = 0;
    int degraded = 0;
    if (f->cat != NULL)
        cumod__catalog_stats(f->cat, &modules, &resident, &resident_bytes,
                             &degraded);
    mb_head(b, "cumod_modules", "gauge", "Modules in the kernel folder.");
    mb_value(b, "cumod_modules", modules);
    mb_head(b, "cumod_resident_modules", "gauge", "Modules loaded.");
    mb_value(b, "cumod_resident_modules", resident);
    mb_head(b, "cumod_resident_bytes", "gauge",
            "Image bytes of the loaded modules.");
    mb_value(b, "cumod_resident_bytes", (double)resident_bytes);
    uint64_t comp[3] = {0, 0, 0};
    if (f->cat != NULL)
        cumod__catalog_compile_stats(f->cat, &comp[0], &comp[1], &comp[2]);
    mb_head(b, "cumod_compiles_total", "counter",
            "NAME.cu compiles by outcome: compiled, cached (taken from the "
            "compile cache), failed.");
    static const char *const outcomes[3] = {"compiled", "cached", "failed"};
    for (int i = 0; i < 3; i++)
        mb_printf(b, "cumod_compiles_total{outcome=\"%s\"} %llu\n", outcomes[i],
                  (unsigned long long)comp[i]);
}

/* The executors (the loader's status in xs, whether it serves in up) and
 * the device. */
static void
m_executors(mbuf *b, cumod_metrics *m, cumod_front *f,
            const cumod_xc_status *xs, int up)
{
    cumod_unit *lu = f->loader;

    uint32_t restarts = xs->restarts;
    if (f->replicas)
        for (uint32_t i = 0; i < f->nunits; i++)
            restarts += f->units[i]->restarts;
    mb_head(b, "cumod_executor_up", "gauge",
            "1 while an executor holds the CUDA context and serves (the "
            "catalog's; with domains, each domain's is "
            "cumod_domain_executor_up).");
    int ldev = lu != NULL ? lu->device : 0;
    mb_dev_value(b, f, "cumod_executor_up", ldev, up);
    mb_head(b, "cumod_executor_restarts_total", "counter",
            "Executors started after the first (faults, hangs, deaths), "
            "all domains together.");
    mb_value(b, "cumod_executor_restarts_total", restarts);
    mb_head(b, "cumod_executor_adoptions_total", "counter",
            "Executors this cumodd adopted from a front that died "
            "(--orphan-grace) instead of starting them.");
    mb_value(b, "cumod_executor_adoptions_total", xs->adoptions);
    m_units(b, f);
    mb_head(b, "cumod_executor_faults_total", "counter",
            "Faults of the device that ended an executor's context.");
    mb_value(b, "cumod_executor_faults_total", (double)m->faults);
    mb_head(b, "cumod_executor_hangs_total", "counter",
            "Launches that ran past their deadline.");
    mb_value(b, "cumod_executor_hangs_total", (double)m->hangs);
    mb_head(b, "cumod_device_memory_total_bytes", "gauge",
            "Device memory in all.");
    mb_dev_value(b, f, "cumod_device_memory_total_bytes", ldev,
                 (double)xs->total_memory);
    mb_head(b, "cumod_device_memory_free_bytes", "gauge",
            "Device memory free, as last heard (see its age).");
    mb_dev_value(b, f, "cumod_device_memory_free_bytes", ldev,
                 (double)xs->free_memory);
    mb_head(b, "cumod_device_memory_used_bytes", "gauge",
            "Device memory in use (total less free), as last heard.");
    mb_dev_value(b, f, "cumod_device_memory_used_bytes", ldev,
                 xs->total_memory >= xs->free_memory
                     ? (double)(xs->total_memory - xs->free_memory)
                     : 0);
    mb_head(b, "cumod_device_memory_age_seconds", "gauge",
            "How old the free and used figures are.");
    mb_dev_value(b, f, "cumod_device_memory_age_seconds", ldev,
                 (double)xs->memory_age_ms / 1e3);
}

/* Sessions, and each one's use. */
static void
m_sessions(mbuf *b, cumod_front *f)
{
    size_t cur;

    size_t nsess = 0;
    cur = 0;
    for (cumod_session *s; (s = cumod__sessions_next(&f->sessions, &cur));)
        nsess++;
    mb_head(b, "cumod_sessions", "gauge", "Client connections with a session.");
    mb_value(b, "cumod_sessions", (double)nsess);
    /* Which path the clients are on, in all (a client that lost its ring
     * shows here as nng). */
    size_t nring = 0;
    cur = 0;
    for (cumod_session *s; (s = cumod__sessions_next(&f->sessions, &cur));)
        nring += cumod__ring_serving(s->ring) != 0;
    mb_head(b, "cumod_sessions_by_transport", "gauge",
            "Sessions whose calls come through their ring, and over nng.");
    mb_printf(b, "cumod_sessions_by_transport{transport=\"ring\"} %zu\n",
              nring);
    mb_printf(b, "cumod_sessions_by_transport{transport=\"nng\"} %zu\n",
              nsess - nring);
    static const struct {
        const char *name, *help;
    } per[] = {
        {"cumod_session_memory_bytes", "Device memory a session holds."},
        {"cumod_session_buffers", "Buffers a session holds."},
        {"cumod_session_streams", "Streams a session created."},
        {"cumod_session_segments", "Shared segments a session mapped."},
        {"cumod_session_inflight", "A session's work not yet complete."},
        {"cumod_session_requests", "A session's requests being answered."},
        {"cumod_session_fast_path",
         "1 while a session's calls come through its shared-memory ring, "
         "0 over nng."},
    };
    for (size_t k = 0; k < sizeof(per) / sizeof(per[0]); k++) {
        mb_head(b, per[k].name, "gauge", per[k].help);
        cur = 0;
        for (cumod_session *s;
             (s = cumod__sessions_next(&f->sessions, &cur));) {
            double v = k == 0   ? (double)s->mem_used
                       : k == 1 ? (double)cumod__idmap_count(&s->bufs)
                       : k == 2 ? (double)cumod__idmap_count(&s->streams)
                       : k == 3 ? (double)cumod__idmap_count(&s->segs)
                       : k == 4 ? (double)s->inflight
                       : k == 5 ? (double)s->requests
                                : (double)cumod__ring_serving(s->ring);
            mb_printf(b,
                      "%s{session=\"%u\",pid=\"%d\",uid=\"%d\",device=\"%d\"",
                      per[k].name, s->id, s->pid, s->uid, s->device);
            mb_dev_end(b, f, s->device);
            mb_printf(b, " %.17g\n", v);
        }
    }
    /* Rendered from the sessions there are: a session's series goes with
     * it. */
    mb_head(b, "cumod_session_gpu_seconds_total", "counter",
            "Device time of a session's completed work.");
    cur = 0;
    for (cumod_session *s; (s = cumod__sessions_next(&f->sessions, &cur));) {
        mb_printf(b,
                  "cumod_session_gpu_seconds_total{session=\"%u\",pid=\"%d\","
                  "uid=\"%d\",domain=\"",
                  s->id, s->pid, s->uid);
        mb_label(b, cumod__session_domain(s));
        mb_printf(b, "\",device=\"%d\"", s->device);
        mb_dev_end(b, f, s->device);
        mb_printf(b, " %.9f\n", (double)s->gpu_ns / 1e9);
    }
}

/* The sessions' limits. */
static void
m_limits(mbuf *b, const cumod_config *cfg)
{
    /* Each limit a metric of its own: one unit a metric. */
    const struct {
        const char *name, *help;
        double v;
    } lim[] = {
        {"cumod_session_limit_memory_bytes",
         "Device memory a session may hold (--session-memory-limit; 0: none).",
         (double)cfg->session_mem_limit},
        {"cumod_session_limit_buffers", "Buffers a session may hold (0: none).",
         cfg->session_max_buffers},
        {"cumod_session_limit_streams",
         "Streams a session may create (0: none).", cfg->session_max_streams},
        {"cumod_session_limit_segments",
         "Shared segments a session may map (0: none).",
         cfg->session_max_segments},
        {"cumod_session_limit_inflight",
         "Work of a session not yet complete, at most (0: none).",
         cfg->session_max_inflight},
        {"cumod_session_limit_requests",
         "Requests of a session being answered, at most (0: none).",
         cfg->session_max_requests},
    };
    for (size_t k = 0; k < sizeof(lim) / sizeof(lim[0]); k++) {
        mb_head(b, lim[k].name, "gauge", lim[k].help);
        mb_value(b, lim[k].name, lim[k].v);
    }
}

/* cumodd's version and protocol. */
static void
m_build(mbuf *b)
{
    mb_head(b, "cumod_build_info", "gauge",
            "1, labelled with cumodd's version and the protocol version it "
            "speaks.");
    mb_printf(b, "cumod_build_info{version=\"");
    mb_label(b, CUMOD_VERSION_STRING);
    mb_printf(b, "\",protocol=\"%d\"} 1\n",
              (int)CUMOD__PROTOCOL_VERSION__PROTOCOL_VERSION_1);
}

/* Publishes rendering b to the scrapes, with what /healthz and /readyz
 * answer until the next (the loader's executor: up, its state_of). */
static void
m_publish(cumod_metrics *m, mbuf *b, int up, const char *state_of)
{
    cumod_front *f = m->f;
    const char *state = state_of != NULL ? state_of : "not started";
    if (!up && strcmp(state, "serving") == 0)
        state = "down"; /* gone, and its client not told yet */
    int healthy = up && strcmp(state, "serving") == 0 && !f->stopping;
    char why[160];
    if (f->stopping)
        snprintf(why, sizeof(why), "cumodd is shutting down");
    else if (!healthy)
        snprintf(why, sizeof(why), "the CUDA executor is %s", state);
    else
        snprintf(why, sizeof(why), "serving");
    uint64_t now = cumod__wall_ms();
    mb_head(b, "cumod_metrics_render_age_seconds", "gauge",
            "How old this rendering is (a scrape serves the last one when "
            "the loop is too busy to render anew).");
    mb_value(b, "cumod_metrics_render_age_seconds", 0);
    if (b->oom) {
        free(b->p);
        return;
    }
    pthread_mutex_lock(&m->mtx);
    m->healthy = healthy;
    snprintf(m->health_why, sizeof(m->health_why), "%s", why);
    m->ready = healthy && f->scanned;
    if (healthy && !f->scanned)
        snprintf(m->ready_why, sizeof(m->ready_why),
                 "the first scan of the kernel folder is not done");
    else
        snprintf(m->ready_why, sizeof(m->ready_why), "%s", why);
    free(m->text);
    m->text = b->p;
    m->len = b->len;
    m->gen++;
    m->render_ms = now;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->mtx);
}

/* One rendering, family group by family group. */
void
cumod__metrics_render(cumod_metrics *m)
{
    cumod_front *f = m->f;
    cumod_xc_status xs = {0};
    cumod_unit *lu = f->loader;
    int up = lu != NULL && cumod__unit_ready(lu);
    mbuf b = {0};

    if (lu != NULL && lu->xc != NULL)
        cumod__xc_status(lu->xc, &xs);
    cumod__metrics_prune(m);
    m_launches(&b, m, f);
    m_modules(&b, m, f);
    m_executors(&b, m, f, &xs, up);
    m_sessions(&b, f);
    m_limits(&b, f->cfg);
    m_build(&b);
    m_process(&b);
    m_publish(m, &b, up, xs.state);
}
