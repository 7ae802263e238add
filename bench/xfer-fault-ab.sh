#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A/B of what a large to_numpy() costs on the GPU host (issue 22): copy
# threads (THREADS, default "4 8"), alternating, ROUNDS times (default
# 3), on the host as it is and then with its free memory fragmented
# (bench/fragment.c). From the project root after a build in build-gpu.
# (The faulting-in variant of bench/notes.md was a trial build's, not
# kept.)
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
    for n in ${THREADS:-4 8}; do
      CUMOD_COPY_THREADS=$n python3 bench/xfer_fault_ab.py \
        "ipc://$d/s" "$state r$r threads=$n" 2 2>&1 | tee -a "$o/fault-ab.txt"
    done
  done
  [ $state = fragmented ] && kill $fpid
done
kill $dpid; wait
rm -rf "$d"
