/* SPDX-License-Identifier: MIT */
/*
 * Where cumodd's CPU time goes while a benchmark runs: every thread of the
 * daemon and of the processes it started (executors, compile workers),
 * from /proc/PID/task/TID/schedstat (nanoseconds on a CPU). A thread near
 * 100% of a core is the one that limits the rate (bench/notes.md).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* ppid of pid from /proc/PID/stat, or -1. */
static int
cpu_ppid(int pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    char *close = strrchr(buf, ')');
    int pp = -1;
    if (close == NULL || sscanf(close + 2, "%*c %d", &pp) != 1)
        return -1;
    return pp;
}

static void
cpu_read_line(const char *path, char *out, size_t cap)
{
    FILE *f = fopen(path, "r");
    out[0] = 0;
    if (f == NULL)
        return;
    if (fgets(out, (int)cap, f) == NULL)
        out[0] = 0;
    fclose(f);
    out[strcspn(out, "\n")] = 0;
}

static void
cpu_threads(int pid, int depth, cumod_bench_cpu *s)
{
    char dir[64], path[128], line[128];
    snprintf(dir, sizeof(dir), "/proc/%d/task", pid);
    DIR *d = opendir(dir);
    struct dirent *e;
    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL && s->n < CUMOD_BENCH_CPU_MAX) {
        int tid = atoi(e->d_name);
        if (tid <= 0)
            continue;
        snprintf(path, sizeof(path), "%s/%d/schedstat", dir, tid);
        cpu_read_line(path, line, sizeof(line));
        unsigned long long ns = strtoull(line, NULL, 10);
        snprintf(path, sizeof(path), "%s/%d/comm", dir, tid);
        cpu_read_line(path, line, sizeof(line));
        s->t[s->n].pid = pid;
        s->t[s->n].tid = tid;
        s->t[s->n].depth = depth;
        s->t[s->n].ns = ns;
        snprintf(s->t[s->n].name, sizeof(s->t[s->n].name), "%.23s", line);
        s->n++;
    }
    closedir(d);
}

void
cumod__bench_cpu_snap(int root, cumod_bench_cpu *s)
{
    int procs[64], depth[64], np = 1;
    procs[0] = root;
    depth[0] = 0;
    s->n = 0;
    /* Descendants, breadth first: /proc scanned once per level. */
    for (int lo = 0; lo < np && np < 64;) {
        int hi = np;
        DIR *d = opendir("/proc");
        struct dirent *e;
        while (d != NULL && (e = readdir(d)) != NULL && np < 64) {
            int pid = atoi(e->d_name);
            if (pid <= 0)
                continue;
            int pp = cpu_ppid(pid);
            for (int i = lo; i < hi; i++)
                if (pp == procs[i]) {
                    depth[np] = depth[i] + 1;
                    procs[np++] = pid;
                    break;
                }
        }
        if (d != NULL)
            closedir(d);
        lo = hi;
    }
    for (int i = 0; i < np; i++)
        cpu_threads(procs[i], depth[i], s);
}

void
cumod__bench_cpu_print(const cumod_bench_cpu *a, const cumod_bench_cpu *b,
                       double wall_s, const char *indent)
{
    char out[1024];
    size_t at = 0;
    out[0] = 0;
    for (int i = 0; i < b->n; i++) {
        unsigned long long before = 0;
        for (int j = 0; j < a->n; j++)
            if (a->t[j].tid == b->t[i].tid)
                before = a->t[j].ns;
        double pct = (double)(b->t[i].ns - before) / (wall_s * 1e7);
        if (pct < 3.0 || at + 64 >= sizeof(out))
            continue;
        at += (size_t)snprintf(out + at, sizeof(out) - at, " %s%s/%d %.0f%%",
                               b->t[i].depth == 0 ? "front:" : "child:",
                               b->t[i].name, b->t[i].tid, pct);
    }
    printf("%scumodd's threads over 3%% of a core:%s\n", indent,
           at ? out : " none");
}
