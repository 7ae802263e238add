#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 21's further runs after a device-run with REPORT=1: the launch,
# many-clients, GEMM and comparison parts twice more (the spread), the
# Python bench, and the submission threads at 8 clients. On the GPU host
# from the project root, after a build in build-gpu.
set -u
source .gpu/device-env
o=$OUT/gpu; mkdir -p "$o"
[ -x build-gpu/bench/cumod_bench ] || { cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build build-gpu -j16 > "$o/build.log" 2>&1; }
for r in ${RUNS:-2 3}; do
  build-gpu/bench/cumod_bench --record "$o/rec$r.txt" --only launches,many,gemm,compare > "$o/bench$r.txt" 2>&1
  grep -E "answered when complete: p50|clients x|back to back|GEMM waited|one GEMM|first verified|per client, 1 MiB" "$o/bench$r.txt"
done
python3 bench/bench_python.py --build "$PWD/build-gpu" > "$o/python.txt" 2>&1; tail -12 "$o/python.txt"
for t in ${THREADS:-1 2 4}; do
  echo "== submit-threads $t"
  CUMOD_BENCH_DAEMON_ARGS="--submit-threads $t" CUMOD_BENCH_MANY=8 build-gpu/bench/cumod_bench --only many 2>&1 | grep "clients x"
done 2>&1 | tee "$o/submit-ab.txt"
