#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A/B of how the executor sees a direct launch complete (issue 33, point 4):
# a word the device writes (cuStreamWriteValue32, the default) against an
# event per launch (CUMOD_EXEC_COMPLETION=event), same build, alternating,
# ROUNDS rounds.
#   bench/ab-completion.sh "COUNTS" [ROUNDS] ["MODES"]
set -u
source .gpu/device-env
o=$OUT/gpu; mkdir -p "$o"
b=${CUMOD_AB_BUILD:-build-gpu}
[ -x $b/bench/cumod_bench ] || { cmake -S . -B $b -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build $b -j16 --target cumod_bench cumodd cumod_kernels > "$o/build.log" 2>&1; }
for r in $(seq 1 "${2:-2}"); do
  for n in ${1:-1 8 16 48}; do
    for mode in ${3:-word event}; do
      printf 'round %s %-5s ' "$r" "$mode"
      CUMOD_EXEC_COMPLETION=$mode CUMOD_BENCH_MANY=$n:${CUMOD_AB_PER:-20000} $b/bench/cumod_bench --only many 2>&1 | grep "clients x"
    done
  done
done 2>&1 | tee "$o/ab-completion.txt"
