#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 22's transfer figures on the GPU host, from the project root after
# a build in build-gpu: cumod_bench --only transfers,copies and the Python
# NumPy round trips against CuPy, RUNS times (default 3).
set -u
source .gpu/device-env
o=$OUT/gpu; mkdir -p "$o"
for r in $(seq 1 "${RUNS:-3}"); do
  echo "== run $r"
  build-gpu/bench/cumod_bench --record "$o/xfer$r.rec" --only transfers,copies 2>&1 | tee "$o/xfer$r.txt" | grep -E "^ +(4096|65536|62914560|268435456|1073741824) B|shared-segment|transfers through"
  python3 bench/bench_python.py --build "$PWD/build-gpu" -n 2000 --async-n 2000 --record "$o/py$r.rec" > "$o/py$r.txt" 2>&1
  grep -E "cumod +[0-9]+ MiB|cupy +[0-9]+ MiB" "$o/py$r.txt"
done
