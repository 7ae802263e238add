/* SPDX-License-Identifier: MIT */
/* What cumod_bench_domains's files share (bench_domains.c, the cumod side
 * and the table; bench_domains_floor.c, the floor). */
#ifndef CUMOD_BENCH_DOMAINS_H
#define CUMOD_BENCH_DOMAINS_H

#include <stddef.h>

/* The rounds of a checking tenant: when each ended (cumod__bench_now_us)
 * and whether it was right. One thread writes it. */
typedef struct cumod_bench_round {
    double t;
    int ok;
} cumod_bench_round;

typedef struct cumod_bench_trace {
    cumod_bench_round *r;
    size_t n, cap;
} cumod_bench_trace;

/* Adds a round; a round that finds no memory is dropped (the trace is a
 * few MiB at most). */
void cumod__bench_trace_add(cumod_bench_trace *tr, double t, int ok);
void cumod__bench_trace_free(cumod_bench_trace *tr);

/* What the tenant saw in the window [w0, w1] (us): its failed rounds; its
 * longest gap between two successful rounds, counting the one before w0
 * and the first after w1 (w1 itself when none came after: a lower bound);
 * and, when report > 0, the time from report to its first success after
 * its first failure in the window (its first success after report when
 * it had none); -1 when none came. */
typedef struct cumod_bench_window {
    long failed;
    double gap_ms;
    double back_ms;
} cumod_bench_window;

void cumod__bench_window(const cumod_bench_trace *tr, double w0, double w1,
                         double report, cumod_bench_window *out);

/* The floor of one fault: two plain processes with contexts of their own
 * (this program run as a worker), one checking vadd sums in a loop while
 * the other launches kernel of faults.cubin (and, with a deadline, is
 * killed that long after its launch, as cumodd kills a hung executor).
 * report_ms: the faulting launch to its error (or to the kill); b: the
 * checker over [the launch, + window_ms]. 0, or -1 (a worker failed; a
 * message is printed). */
typedef struct cumod_bench_floor_fault {
    double report_ms;
    char error[64]; /* the CUDA error the faulting process saw */
    cumod_bench_window b;
} cumod_bench_floor_fault;

int cumod__bench_domains_floor(const char *self, const char *dir,
                               const char *vadd_cubin, const char *faults_cubin,
                               const char *kernel, unsigned deadline_ms,
                               double window_ms, cumod_bench_floor_fault *out);

/* The worker modes: argv[1] is "--floor-worker". Its exit status. */
int cumod__bench_domains_worker(int argc, char **argv);

#endif
