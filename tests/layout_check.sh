#!/bin/sh
# SPDX-License-Identifier: MIT
# docs/architecture.md "Folders, and who may include what": folders say
# who may include what. Fails, naming the line, when a folder includes a
# room its rule forbids (below), or when the executor's handlers call each
# other (the star).
top=${1:?usage: layout_check.sh SOURCE_DIR}
bad=0
check() { # folder pattern why
  hits=$(grep -rnE "#include \"($2)" "$top/$1" 2>/dev/null)
  if [ -n "$hits" ]; then
    echo "$3:"; echo "$hits"; bad=1
  fi
}
# The rules docs/architecture.md states ("Folders, and who may include what").
check daemon/common 'front/|catalog/|exec/|compile/|data/' "common/ (shared by both processes) includes a room above it"
check daemon/data 'front/|catalog/|exec/|compile/' "data/ (the data path both processes run) includes a room above it"
check daemon/exec 'front/|catalog/|compile/' "the executor includes front, catalog or compile state"
check daemon/catalog 'front/|exec/' "the catalog includes the front or the executor"
check daemon/compile 'front/|exec/|catalog/catalog|catalog_internal|catalog/demangle' "the compile side includes front, executor or catalog internals (it may use catalog/image/ only)"
check daemon/front 'exec/' "the front includes executor state (it talks to it through common/channel.h)"
# front/'s rooms (docs/architecture.md "Inside the front"): transport/
# hands requests up by the callbacks it was opened with; state/ never
# answers; obs/ counts and tells, taking no front; units/ talks to the
# executors; serve/ answers requests and may use them all; the root
# (front.c, front.h, the metrics) holds them together.
check daemon/front/transport 'front/(state|obs|units|serve)/|front/front\.h|front/metrics' "transport/ includes a room above it (it calls up only through its callbacks)"
check daemon/front/state 'front/(transport|obs|units|serve)/|front/front\.h|front/metrics' "state/ includes another room (it holds sessions and checks, and answers nothing)"
check daemon/front/obs 'front/(state|units|serve)/|front/front\.h|front/metrics' "obs/ includes a room other than transport/ (it takes what it counts, never the front)"
# units/ never reaches serve/, but for the two splits still to make, named
# here: fault.c reads the work call's fields (it needs an in-flight record
# of its own) and gemm.c builds the GEMM's work item (the gate and the
# building are to part). units/ reads struct cumod_front (front.h) still.
hits=$(grep -rnE '#include "front/serve/' "$top/daemon/front/units" 2>/dev/null |
  grep -vE '/units/(fault|gemm)\.c:')
if [ -n "$hits" ]; then
  echo "units/ includes serve/ (only fault.c and gemm.c may, until they are split):"
  echo "$hits"; bad=1
fi
check proto 'front/|catalog/|exec/|compile/|common/|client_internal' "proto/ depends on daemon or client code"
check client 'front/|catalog/|exec/|compile/|common/|channel\.h|log\.h' "client/ includes daemon internals"
# The executor is a star (daemon/exec/exec.h): one dispatcher
# (executor.c, and executor_*.c where it is split), handlers (exec_*.c)
# and services (the other .c files). A
# handler names no function defined in another handler or in the
# dispatcher; a service names none defined in a handler or the dispatcher.
# "Names" is any mention outside comments and strings (a call, or a
# pointer taken); a definition is a cumod__ name at the start of a line,
# the house style's.
star() { # folder
  hits=$(awk -v dir="$1" -v n="$(ls "$top/$1"/*.c | wc -l)" '
    function base(f) { sub(/.*\//, "", f); return f }
    function role(f) {
      f = base(f)
      return f ~ /^executor(_[a-z_]+)?\.c$/ ? "dispatcher" : f ~ /^exec_/ ? "handler" : "service"
    }
    FNR == 1 { nf++; inc = 0 }
    nf <= n { if (match($0, /^cumod__[A-Za-z0-9_]*\(/)) def[substr($0, 1, RLENGTH - 1)] = FILENAME; next }
    {
      l = $0
      if (inc) { i = index(l, "*/"); if (i == 0) next; l = substr(l, i + 2); inc = 0 }
      gsub(/\047([^\047\\]|\\.)*\047/, "", l)
      gsub(/"([^"\\]|\\.)*"/, "", l)
      gsub(/\/\*([^*]|\*+[^*\/])*\*+\//, " ", l)
      if ((i = index(l, "/*")) > 0) { l = substr(l, 1, i - 1); inc = 1 }
      if ((i = index(l, "//")) > 0) l = substr(l, 1, i - 1)
      me = role(FILENAME)
      if (me == "dispatcher") next
      while (match(l, /[A-Za-z_][A-Za-z0-9_]*/)) {
        t = substr(l, RSTART, RLENGTH); l = substr(l, RSTART + RLENGTH)
        if (!(t in def) || def[t] == FILENAME) continue
        r = role(def[t])
        if (r == "dispatcher" || r == "handler")
          printf "%s/%s:%d: the %s names %s of the %s %s\n", dir, base(FILENAME), FNR, me, t, r, base(def[t])
      }
    }' "$top/$1"/*.c "$top/$1"/*.c)
  if [ -n "$hits" ]; then
    echo "the executor is not a star (daemon/exec/exec.h):"; echo "$hits"; bad=1
  fi
}
star daemon/exec
[ $bad = 0 ] && echo "layout: every folder includes only what it may; the executor is a star"
exit $bad
