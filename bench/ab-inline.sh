#!/usr/bin/env bash
# A/B of the submission threads' own waiting (CUMOD_EXEC_NO_INLINE=1 turns
# it off), same machine, alternating, at a few client counts.
#   bench/ab-inline.sh [COUNTS]
set -u
source .gpu/device-env
o=$OUT/gpu; mkdir -p "$o"
[ -x build-gpu/bench/cumod_bench ] || { cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build build-gpu -j16 --target cumod_bench cumodd > "$o/build.log" 2>&1; }
for n in ${1:-1 8 16 48}; do
  for v in 0 1; do
    printf 'no_inline=%s ' $v
    CUMOD_EXEC_NO_INLINE=$v CUMOD_BENCH_MANY=$n build-gpu/bench/cumod_bench --only many 2>&1 | grep "clients x" | sed 's/ own contexts.*//'
  done
done 2>&1 | tee "$o/ab-inline.txt"
