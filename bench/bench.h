/* SPDX-License-Identifier: MIT */
/* What the benchmark's files share. */
#ifndef CUMOD_BENCH_H
#define CUMOD_BENCH_H

#include <stddef.h>
#include <stdint.h>

double cumod__bench_now_us(void);
/* A whole file in memory with a NUL after it (the caller frees), or NULL;
 * its size in *len. */
void *cumod__bench_file(const char *path, size_t *len);

/* Sorts v and returns its q-quantile (0..1). */
double cumod__bench_quantile(double *v, size_t n, double q);

/* The in-process floors on the real driver (bench_floor.c). 0, or -1 when
 * there is no usable driver. kdir holds empty.cubin. */
typedef struct cumod_bench_floors {
    double launch_sync_p50_us;  /* empty launch + cuStreamSynchronize */
    double launch_event_p50_us; /* launch, record, spin on cuEventQuery */
    double async_launches_per_s;
    double h2d_pinned_gbps; /* 256 MiB, registered host memory */
    double d2h_pinned_gbps;
    double h2d_shm_gbps;      /* the same from a registered POSIX shm
                                 mapping, what a segment is */
    double h2d_pageable_gbps; /* 64 MiB from plain malloc'd memory, as
                                 CuPy's asarray copies a NumPy array */
    double d2h_pageable_gbps; /* and back, as cupy.asnumpy */
    double load_cubin_p50_us; /* cuModuleLoadData + GetFunction */
} cumod_bench_floors;

int cumod__bench_floors(const char *kdir, cumod_bench_floors *out);

/* In process, for each of n argument sizes (args.cubin's argsN kernels):
 * launch + cuStreamSynchronize p50 into p50[i]. 0, or -1. */
int cumod__bench_floor_args(const char *cubin, const unsigned *sizes, int n,
                            double *p50);

/* --record FILE: every figure also as a "key value" line, for
 * bench/report, which writes BENCHMARKS.md from them. */
void cumod__bench_record_open(const char *path);
void cumod__bench_record(const char *key, double v);
void cumod__bench_recordf(double v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* nng req/rep ipc round trip, 128 bytes, in this process: p50 of 5,000;
 * or n samples into t (0, or -1). The pair stays open for the run. */
double cumod__bench_nng_rtt_p50_us(const char *dir);
int cumod__bench_nng_rtt(const char *dir, double *t, int n);

/* bench_compare.c: the worker modes (argv[1] is "--worker"), and the
 * parts that run them: against a context of one's own and MPS; many
 * client processes at once. */
int cumod__bench_worker(int argc, char **argv);
void cumod__bench_compare(const char *self, const char *url, const char *kdir,
                          const char *dir, const cumod_bench_floors *f,
                          double ring_p50);
/* Many client processes started together, 1 to 256 (MPS up to 48, own
 * contexts up to 8; MPS's control daemon's pipes in dir): the curve. */
void cumod__bench_many(const char *self, const char *url, const char *kdir,
                       const char *dir, int daemon_pid);

/* bench_cpu.c: every thread of the process root and its descendants, with
 * its time on a CPU so far; the threads over 3% of a core between two
 * snapshots, printed on one line. */
#define CUMOD_BENCH_CPU_MAX 256
typedef struct cumod_bench_cpu {
    int n;
    struct {
        int pid, tid, depth;
        char name[24];
        unsigned long long ns;
    } t[CUMOD_BENCH_CPU_MAX];
} cumod_bench_cpu;
void cumod__bench_cpu_snap(int root, cumod_bench_cpu *s);
void cumod__bench_cpu_print(const cumod_bench_cpu *a, const cumod_bench_cpu *b,
                            double wall_s, const char *indent);

/* bench_gemm.c: a 4096^3 BF16 GEMM through cumod (client c) against the
 * same cublasGemmEx in this process, printed and recorded. */
struct cumod_client;
void cumod__bench_gemm(struct cumod_client *c);

#endif
