#!/bin/sh
# SPDX-License-Identifier: MIT
# One version (issue 24, point 1): project(cumod VERSION ...) in
# CMakeLists.txt is the only place it is written, and every place a user
# reads a version says the same: cumod/version.h, cumodd and cumodctl
# --version, the manual pages' .TH lines (cumodd --man, cumodctl(1),
# libcumod(3) as installed), the shared library's file name, the CMake
# package (cumodConfigVersion.cmake), pkg-config (cumod.pc as installed),
# the Python package (cumod.__version__, which pyproject.toml reads),
# CHANGELOG.md's entry and the Debian changelogs. The license is MIT in
# LICENSE and in the Python package's metadata.
# Usage: version_check.sh SOURCE_DIR BUILD_DIR
set -u
src=$1
build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

v=$(sed -n 's/^project(cumod VERSION \([0-9][0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[ -n "$v" ] || { echo "FAIL: no project(cumod VERSION X.Y.Z) in $src/CMakeLists.txt"; exit 1; }
echo "the project's version: $v"
major=${v%%.*}
rest=${v#*.}
minor=${rest%%.*}
patch=${rest#*.}

h=$build/include/cumod/version.h
grep -q "^#define CUMOD_VERSION_STRING \"$v\"$" "$h" || fail "version.h: $(grep VERSION_STRING "$h")"
grep -q "^#define CUMOD_VERSION_MAJOR $major$" "$h" &&
    grep -q "^#define CUMOD_VERSION_MINOR $minor$" "$h" &&
    grep -q "^#define CUMOD_VERSION_PATCH $patch$" "$h" ||
    fail "version.h's MAJOR, MINOR, PATCH are not $major, $minor, $patch"

[ "$("$build/daemon/cumodd" --version)" = "cumodd $v" ] ||
    fail "cumodd --version: $("$build/daemon/cumodd" --version)"
[ "$("$build/client/cumodctl" --version)" = "cumodctl $v" ] ||
    fail "cumodctl --version: $("$build/client/cumodctl" --version)"
[ -e "$build/client/libcumod.so.$v" ] || fail "no libcumod.so.$v in $build/client"
ok "version.h, cumodd --version, cumodctl --version, libcumod.so.$v"

# The manual pages: the version in the .TH line's source field.
"$build/daemon/cumodd" --man | head -1 > "$tmp/th.cumodd"
head -1 "$build/client/man/cumodctl.1" > "$tmp/th.cumodctl"
head -1 "$build/client/man/libcumod.3" > "$tmp/th.libcumod"
for p in cumodd cumodctl libcumod; do
    grep -q "^\\.TH [A-Z]* [0-9] \"[^\"]*\" \"cumod $v\"" "$tmp/th.$p" ||
        fail "$p's manual page: $(cat "$tmp/th.$p")"
done
# The sources name no version: nothing to forget at a release.
for p in client/ctl/cumodctl.1 client/lib/libcumod.3; do
    head -1 "$src/$p" | grep -q '"cumod"' || fail "$p's .TH line names a version of its own: $(head -1 "$src/$p")"
done
ok "the manual pages say cumod $v"

# The CMake package, and pkg-config as installed.
grep -q "set(PACKAGE_VERSION \"$v\")" "$build/cumodConfigVersion.cmake" ||
    fail "cumodConfigVersion.cmake: $(grep 'set(PACKAGE_VERSION ' "$build/cumodConfigVersion.cmake")"
if cmake --install "$build" --component libcumod-dev --prefix "$tmp/inst" > "$tmp/install.log" 2>&1; then
    pc=$(find "$tmp/inst" -name cumod.pc | head -1)
    if [ -z "$pc" ]; then
        fail "the component libcumod-dev installs no cumod.pc"
    else
        grep -qx "Version: $v" "$pc" || fail "cumod.pc: $(grep Version "$pc")"
        if command -v pkg-config > /dev/null 2>&1; then
            m=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --modversion cumod 2>&1)
            [ "$m" = "$v" ] || fail "pkg-config --modversion cumod: $m"
        fi
    fi
else
    fail "cmake --install --component libcumod-dev: $(tail -5 "$tmp/install.log")"
fi
ok "cumodConfigVersion.cmake and cumod.pc say $v"

# The Python package: __version__, which pyproject.toml reads.
py=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$src/client/python/cumod/__init__.py")
[ "$py" = "$v" ] || fail "client/python/cumod/__init__.py: __version__ = \"$py\", not \"$v\""
grep -q '^version = { attr = "cumod.__version__" }' "$src/client/python/pyproject.toml" ||
    fail "pyproject.toml does not take its version from cumod.__version__"
ok "the Python package is $v"

# CHANGELOG.md and the Debian changelogs.
grep -Eq "^## \\[$v\\] - [0-9]{4}-[0-9]{2}-[0-9]{2}$" "$src/CHANGELOG.md" ||
    fail "CHANGELOG.md has no entry '## [$v] - YYYY-MM-DD'"
n=0
for c in "$build"/debian/*/changelog.Debian.gz; do
    [ -f "$c" ] || continue
    n=$((n + 1))
    gzip -dc "$c" | head -1 | grep -q "^[a-z0-9-]* ($v-[0-9][0-9a-z.~+]*) " ||
        fail "$c: $(gzip -dc "$c" | head -1)"
done
[ "$n" = 4 ] || fail "$n Debian changelogs in $build/debian, not 4"
ok "CHANGELOG.md and the $n Debian changelogs name $v"

# The license.
head -1 "$src/LICENSE" | grep -qx 'MIT License' || fail "LICENSE is not the MIT license"
grep -q '^license = { text = "MIT" }' "$src/client/python/pyproject.toml" ||
    fail "pyproject.toml's license is not MIT"
ok "MIT in LICENSE and pyproject.toml"

[ "$fails" = 0 ] || { echo "$fails failed"; exit 1; }
echo "all passed"
