#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A/B of what a large to_numpy() costs on the GPU host (issue 22): copy
# threads 4 and 8, the destination faulted in first (CUMOD_POPULATE=1) or
# by memcpy (0), alternating, ROUNDS times (default 3), on the host as it
# is and then with its free memory fragmented (bench/fragment.c). From the
# project root after a build in build-gpu.
set -u
source .gpu/device-env
export CUMOD_LIBRARY=$PWD/build-gpu/client/libcumod.so.0
b=$PWD/build-gpu; o=${OUT:-/tmp}/gpu; mkdir -p "$o"
d=$(mktemp -d); mkdir "$d/k"; cp "$b"/kernels/out/*.cubin "$d/k/"
"$b/daemon/cumodd" --kernels "$d/k" --listen "ipc://$d/s" --log-level warn \
  > "$d/log" 2>&1 & dpid=$!
sleep 2
grep -E "^(Anon|Huge|MemAvail)" /proc/meminfo; cat /sys/kernel/mm/transparent_hugepage/{enabled,defrag}
cc -O2 -pthread -o "$d/fragment" bench/fragment.c
for state in as-is fragmented; do
  if [ $state = fragmented ]; then
    "$d/fragment" "${KEEP_MIB:-3072}" > "$d/frag.out" & fpid=$!
    until grep -q ready "$d/frag.out" 2>/dev/null; do sleep 1; done
    cat "$d/frag.out"; grep -E "^MemFree" /proc/meminfo
  fi
  for r in $(seq 1 "${ROUNDS:-3}"); do
    for v in "4 1" "4 0" "8 1" "8 0"; do
      set -- $v
      CUMOD_COPY_THREADS=$1 CUMOD_POPULATE=$2 python3 bench/xfer_fault_ab.py \
        "ipc://$d/s" "$state r$r threads=$1 populate=$2" 2 2>&1 | tee -a "$o/fault-ab.txt"
    done
  done
  [ $state = fragmented ] && kill $fpid
done
kill $dpid; wait
rm -rf "$d"
