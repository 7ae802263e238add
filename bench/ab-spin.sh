#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A/B of how long clients spin on their replies before yielding
# (CUMOD_RING_SPIN_US, libcumod's ring), same machine, alternating.
#   bench/ab-spin.sh "COUNTS" "SPINS_US"
set -u
source .gpu/device-env
o=$OUT/gpu; mkdir -p "$o"
[ -x build-gpu/bench/cumod_bench ] || { cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build build-gpu -j16 --target cumod_bench cumodd > "$o/build.log" 2>&1; }
for n in ${1:-1 8 16 48}; do
  for us in ${2:-50 5}; do
    printf 'spin=%-3s us ' "$us"
    CUMOD_RING_SPIN_US=$us CUMOD_BENCH_MANY=$n build-gpu/bench/cumod_bench --only many 2>&1 | grep "clients x" | sed 's/ own contexts.*//'
  done
done 2>&1 | tee "$o/ab-spin.txt"
