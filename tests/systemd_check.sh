#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs the build into a temp prefix and checks its systemd units with
# systemd-analyze verify and rates them with systemd-analyze security
# (skipped, with a message, where it is missing).
# Usage: systemd_check.sh BUILD_DIR
set -eu
build=$1
if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "systemd_check: SKIPPED: systemd-analyze is not installed (Debian: systemd)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; exit 1; }
units=$tmp/lib/systemd/system
for f in cumodd.service cumodd@.service; do
  [ -f "$units/$f" ] || { echo "systemd_check: $units/$f was not installed"; exit 1; }
done
# SIGTERM to the front alone: it drains, then closes its executors.
for f in cumodd.service cumodd@.service; do
  grep -q '^KillMode=mixed$' "$units/$f" ||
    { echo "systemd_check: $f does not say KillMode=mixed"; exit 1; }
done
[ -f "$tmp/lib/sysusers.d/cumod.conf" ] || { echo "systemd_check: no sysusers.d file"; exit 1; }
[ -f "$tmp/etc/cumod/cumodd.conf" ] || { echo "systemd_check: no configuration file in $tmp/etc/cumod"; exit 1; }
grep -q "^ExecStart=$tmp/sbin/cumodd --instance %i --config-dir $tmp/etc/cumod\$" "$units/cumodd@.service" ||
  { echo "systemd_check: the template's ExecStart does not name the install:"; grep ExecStart "$units/cumodd@.service"; exit 1; }
# The installed configuration file is valid (the kernel folder aside).
"$tmp/sbin/cumodd" --config "$tmp/etc/cumod/cumodd.conf" --kernels "$tmp" --check >/dev/null
# verify names instances of the template by a path beside it.
out=$(systemd-analyze verify "$units/cumodd.service" "$units/cumodd@0.service" "$units/cumodd@alice.service" 2>&1) || {
  echo "systemd_check: systemd-analyze verify failed:"; echo "$out"; exit 1; }
if [ -n "$out" ]; then
  echo "systemd_check: systemd-analyze verify warned:"; echo "$out"; exit 1
fi
# The exposure systemd-analyze security gives the units: printed, and no
# higher than the level they reached (lower it here when a unit hardens
# further). systemd before 252 cannot rate a unit file offline.
max_exposure=1.9
if systemd-analyze security --help 2>&1 | grep -q -- '--offline'; then
  for u in cumodd.service cumodd@.service; do
    rating=$(systemd-analyze security --offline=true --no-pager "$units/$u" 2>&1) || true
    level=$(printf '%s\n' "$rating" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
    [ -n "$level" ] || { echo "systemd_check: no exposure level for $u:"; echo "$rating"; exit 1; }
    echo "systemd_check: $u exposure $level (at most $max_exposure)"
    if awk -v l="$level" -v m="$max_exposure" 'BEGIN { exit !(l > m) }'; then
      echo "systemd_check: $u is more exposed than $max_exposure:"
      printf '%s\n' "$rating" | grep -v '✓'
      exit 1
    fi
  done
else
  echo "systemd_check: exposure not rated: this systemd-analyze has no --offline (systemd < 252)"
fi
# A second install keeps the operator's configuration file.
echo "# edited" >> "$tmp/etc/cumod/cumodd.conf"
cmake --install "$build" --prefix "$tmp" >/dev/null 2>&1
grep -q "^# edited" "$tmp/etc/cumod/cumodd.conf" || { echo "systemd_check: reinstall replaced the configuration"; exit 1; }
echo "systemd_check: cumodd.service and cumodd@.service verify clean ($(systemd-analyze --version | head -1))"
