#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A/B of two source trees on one machine, alternating: the many-clients
# bench (`cumod_bench --only many`, one count at a time) of tree A (an
# older commit's files, e.g. `git archive REV | tar -x -C .ab/old`) and
# of this tree, built side by side. Run on the GPU host from the project
# root; figures into $OUT/gpu/ab-builds.txt.
#   bench/ab-builds.sh OLD_TREE "COUNTS" [ROUNDS]
set -u
source .gpu/device-env
old=$1 counts=${2:-"1 8 16 48"} rounds=${3:-2}
o=$OUT/gpu; mkdir -p "$o"
build() { # SRC BUILD
  [ -x "$2/bench/cumod_bench" ] && return 0
  cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null &&
    cmake --build "$2" -j16 --target cumod_bench cumodd > "$o/build-$(basename "$2").log" 2>&1
}
build "$old" build-ab-old || { echo "A does not build"; exit 1; }
build . build-gpu || { echo "B does not build"; exit 1; }
for r in $(seq 1 "$rounds"); do
  for n in $counts; do
    for side in A B; do
      b=build-gpu; [ $side = A ] && b=build-ab-old
      printf '%s round %s: ' $side "$r"
      CUMOD_BENCH_MANY=$n $b/bench/cumod_bench --only many 2>&1 | grep "clients x" | sed 's/ own contexts.*//'
    done
  done
done 2>&1 | tee "$o/ab-builds.txt"
