#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Where a fresh client's first verified vector add goes (issue 21, target
# 5: cold start <= 3 ms): cumodd on the example kernels, then N fresh
# worker processes (default 10) timed whole, each printing its steps. On
# the GPU host from the project root, after a build in build-gpu.
set -u
b=${BUILD:-build-gpu}
d=$(mktemp -d /tmp/cumod-cold.XXXXXX)
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$d"' EXIT
"$b/daemon/cumodd" --kernels "$b/kernels/out" --listen "ipc://$d/s.sock" ${CUMOD_DAEMON_ARGS:-} 2> "$d/log" &
pid=$!
for _ in $(seq 1 200); do
  "$b/client/cumodctl" --url "ipc://$d/s.sock" status > /dev/null 2>&1 && break
  sleep 0.05
done
for i in $(seq 1 "${N:-10}"); do
  s=$(date +%s%N)
  CUMOD_BENCH_STEPS=1 "$b/bench/cumod_bench" --worker first-cumod "ipc://$d/s.sock" || echo "worker failed"
  e=$(date +%s%N)
  echo "  whole process: $(( (e - s) / 1000 )) us"
done
