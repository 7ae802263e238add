#!/bin/sh
# SPDX-License-Identifier: MIT
# The suite guard names a hang (issue 32 point 2): a suite that hangs
# (tests/hang_suite.c) run under cumod_suite_guard with a 2 s deadline
# exits 124, and its report names the test that was running, shows the
# stacks of the suite and of the child it started (where gdb is here),
# the last lines of the log it wrote, and leaves no process behind.
#   guard_check.sh GUARD HANG_SUITE
guard=${1:?usage: guard_check.sh GUARD HANG_SUITE}
suite=${2:?usage: guard_check.sh GUARD HANG_SUITE}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
"$guard" --name hang_demo --deadline 2 --log "$dir/suite.log" -- \
  "$suite" "$dir/child.pid" > "$dir/out" 2>&1
rc=$?
expect() { # what pattern
  if grep -q -- "$2" "$dir/out"; then
    echo "ok: $1"
  else
    echo "FAIL: $1 (no \"$2\" in the guard's report)"; fail=1
  fi
}
if [ "$rc" = 124 ]; then echo "ok: past its deadline the guard exits 124"
else echo "FAIL: the guard exited $rc, not 124"; fail=1; fi
expect "it names the test that was running" "guard::a_test_that_hangs"
expect "it prints the log the suite wrote" "the demo's last words before it hangs"
if command -v gdb > /dev/null 2>&1; then
  expect "the suite's stack" "guard_suite_hangs"
  expect "the stack of the child it started" "guard_child_waits"
else
  echo "skip: no gdb here, so no stacks to look for (cmake/run installs it)"
fi
child=$(cat "$dir/child.pid" 2>/dev/null)
if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
  echo "FAIL: the suite's child $child still runs"; fail=1
  kill -9 "$child" 2>/dev/null
else
  echo "ok: nothing left running"
fi
[ "$fail" = 0 ] || { echo "--- the guard's report:"; cat "$dir/out"; }
exit $fail
