#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 33 point 5 on the GPU host, from the project root after `source
# .gpu/device-env`: a fresh build in build-gpu, the pool's GPU suite, and
# the many-clients bench at 8 and 48 clients with one executor and with
# pools of executors under cumodd's own MPS, each beside MPS itself in the
# same invocation (the bench's MPS clients join cumodd's control daemon:
# CUMOD_BENCH_MPS_PIPE; two control daemons would time-slice). Output in
# $OUT/pool.
# Environment: POINTS ("N:POOL ..." client counts and pool sizes, pool 1 =
# one executor, no MPS), PER (launches per client), SUITES (0: none),
# EXTRA (more cumodd arguments, e.g. "--crowded-at 1000"), TAG (a suffix
# for the output files, so that runs with other EXTRA keep theirs).
set -u
o=${OUT:-/tmp/cumod-gpu}/pool; mkdir -p "$o"
b=build-gpu
if [ ! -x $b/bench/cumod_bench ]; then
  cmake -S . -B $b -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$o/configure.log" 2>&1
  cmake --build $b -j"$(nproc)" > "$o/build.log" 2>&1 || { grep -E "error" "$o/build.log" | head; exit 1; }
fi
echo "== build ok"
if [ "${SUITES:-1}" != 0 ]; then
  for t in ${GPU_SUITES:-gpu_pool_test}; do
    (cd $b && timeout 300 tests/gpu/$t --verbose -j1 > "$o/$t.log" 2>&1); echo "== $t: exit $?"
    grep -hE "Synthesis|\[FAIL\]|Assertion|^gpu_pool|SKIP" "$o/$t.log" | head -20
  done
fi
per=${PER:-5000}
for pt in ${POINTS:-8:1 8:4 8:8 48:1 48:8 48:16}; do
  n=${pt%%:*}; pool=${pt##*:}
  mps=/tmp/cumod-bench-mps-$n-$pool
  if [ "$pool" = 1 ]; then
    args=""; join=""
  else
    rm -rf "$mps"; args="--pool $pool --mps own --mps-pipe-dir $mps"; join=$mps
  fi
  echo "== $n clients, pool $pool${EXTRA:+, $EXTRA}"
  f="$n-$pool${TAG:-}"
  CUMOD_BENCH_DAEMON_ARGS="$args ${EXTRA:-}" CUMOD_BENCH_MPS_PIPE="$join" \
    CUMOD_BENCH_MANY=$n:$per timeout 240 $b/bench/cumod_bench --only many \
    --record "$o/rec-$f.txt" > "$o/many-$f.txt" 2>&1
  echo "   exit $?"; grep -E "clients x|cpu|SOME" "$o/many-$f.txt" | head -4
done
