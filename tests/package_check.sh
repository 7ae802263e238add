#!/bin/sh
# SPDX-License-Identifier: MIT
# Installing and packaging (issue 24, point 2). `cmake --install` lists
# every file it installs in install_manifest.txt. `cpack -G DEB` on this
# build (cmake/CumodCPack.cmake) makes libcumod0, libcumod-dev, cumodd and
# cumodctl; each holds exactly the files listed here (dpkg-deb -c), says
# the project's version, takes its dependencies from dpkg-shlibdeps
# (dpkg-deb -I), and cumodd's maintainer scripts make the user and enable
# nothing. lintian, where installed, finds no error (its warnings are
# printed). Unpacked into a scratch root (dpkg -x), cumodd and cumodctl run
# from it, the packaged configuration passes `cumodd --check`, and a
# consumer builds against the unpacked libcumod-dev twice: with pkg-config
# (PKG_CONFIG_SYSROOT_DIR) and with CMake's find_package(cumod), then runs.
# The packages are skipped (77) without cpack or dpkg-deb. It reuses the
# build's programs: cpack only installs and packs them.
# Usage: package_check.sh SOURCE_DIR BUILD_DIR
set -u
src=$1
build=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

# First, what any packager's tool reads: `cmake --install` lists every
# file it installs in install_manifest.txt (the units, the sysusers.d file
# and the configuration file included), and nothing else.
if cmake --install "$build" --prefix "$tmp/inst" > "$tmp/install.log" 2>&1; then
    cp "$build/install_manifest.txt" "$tmp/manifest"
    if ! grep -q "^$tmp/inst/" "$tmp/manifest"; then
        echo "skip: another install rewrote install_manifest.txt meanwhile"
    else
        find "$tmp/inst" ! -type d | sort > "$tmp/installed"
        sort "$tmp/manifest" | diff -u - "$tmp/installed" > "$tmp/manifest.diff" &&
            ok "install_manifest.txt lists the $(wc -l < "$tmp/installed") files installed" ||
            fail "install_manifest.txt (-) against the files installed (+): $(grep '^[-+]/' "$tmp/manifest.diff" | tr '\n' ' ')"
    fi
else
    fail "cmake --install: $(tail -5 "$tmp/install.log")"
fi

for t in cpack dpkg-deb dpkg; do
    if ! command -v $t > /dev/null 2>&1; then
        echo "package_check: SKIPPED: $t is not installed (Debian: cmake, dpkg): the packages are not made"
        [ "$fails" = 0 ] || exit 1
        exit 77
    fi
done

version=$(sed -n 's/^#define CUMOD_VERSION_STRING "\(.*\)"/\1/p' \
    "$build/include/cumod/version.h")
[ -n "$version" ] || { echo "FAIL: no CUMOD_VERSION_STRING in $build/include/cumod/version.h"; exit 1; }
release=$(sed -n 's/^CUMOD_DEB_RELEASE:STRING=//p' "$build/CMakeCache.txt")
debver=$version-${release:-1}
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$build/CMakeCache.txt")
libdir=usr/${libdir:-lib}
arch=$(dpkg --print-architecture)
# A consumer of a sanitized build's libcumod links the sanitizers' runtime
# (ctest runs this check in plain builds only; by hand it runs in any).
cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
san=$(sed -n 's/^CUMOD_SANITIZE:STRING=//p' "$build/CMakeCache.txt")
cflags=${san:+-fsanitize=$san}

# The packages, into a scratch folder (the build's packages/ untouched).
start=$(date +%s)
if ! cpack --config "$build/CPackConfig.cmake" -G DEB -B "$tmp/pkg" > "$tmp/cpack.log" 2>&1; then
    cat "$tmp/cpack.log"
    echo "FAIL: cpack -G DEB"
    exit 1
fi
grep -A4 'CMake Warning' "$tmp/cpack.log" | sed 's/^/cpack: /'
ok "cpack -G DEB in $(($(date +%s) - start)) s"

# What each package holds: files and links (folders aside), exactly.
cat > "$tmp/libcumod0.list" << EOF
./$libdir/libcumod.so.0
./$libdir/libcumod.so.$version
./usr/share/doc/libcumod0/changelog.Debian.gz
./usr/share/doc/libcumod0/copyright
EOF
cat > "$tmp/libcumod-dev.list" << EOF
./$libdir/cmake/cumod/cumodConfig.cmake
./$libdir/cmake/cumod/cumodConfigVersion.cmake
./$libdir/cmake/cumod/cumodTargets-*.cmake
./$libdir/cmake/cumod/cumodTargets.cmake
./$libdir/libcumod.so
./$libdir/pkgconfig/cumod.pc
./usr/include/cumod/cumod.h
./usr/include/cumod/errors.h
./usr/include/cumod/version.h
./usr/share/doc/libcumod-dev/changelog.Debian.gz
./usr/share/doc/libcumod-dev/copyright
./usr/share/man/man3/libcumod.3.gz
EOF
cat > "$tmp/cumodd.list" << EOF
./etc/cumod/cumodd.conf
./usr/lib/systemd/system/cumodd.service
./usr/lib/systemd/system/cumodd@.service
./usr/lib/sysusers.d/cumod.conf
./usr/sbin/cumodd
./usr/share/doc/cumod/README.md
./usr/share/doc/cumodd/changelog.Debian.gz
./usr/share/doc/cumodd/copyright
./usr/share/man/man8/cumodd.8.gz
EOF
cat > "$tmp/cumodctl.list" << EOF
./usr/bin/cumodctl
./usr/share/bash-completion/completions/cumodctl
./usr/share/doc/cumodctl/changelog.Debian.gz
./usr/share/doc/cumodctl/copyright
./usr/share/man/man1/cumodctl.1.gz
EOF
for p in libcumod0 libcumod-dev cumodd cumodctl; do
    deb=$tmp/pkg/${p}_${debver}_$arch.deb
    if [ ! -f "$deb" ]; then
        fail "no $(basename "$deb") (made: $(cd "$tmp/pkg" && ls ./*.deb 2> /dev/null | tr '\n' ' '))"
        continue
    fi
    dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {print $6}' | sort > "$tmp/$p.has"
    # The one name that depends on the build type: a pattern, matched here.
    sort "$tmp/$p.list" | while read -r want; do
        got=$(grep -x -- "$(printf '%s' "$want" | sed 's/[.]/[.]/g; s/[*]/.*/g')" "$tmp/$p.has" | head -1)
        echo "${got:-$want}"
    done | sort > "$tmp/$p.want"
    if diff -u "$tmp/$p.want" "$tmp/$p.has" > "$tmp/$p.diff"; then
        ok "$p holds its $(wc -l < "$tmp/$p.has") files"
    else
        fail "$p's files differ from the list (- missing, + unexpected): $(grep '^[-+]\.' "$tmp/$p.diff" | tr '\n' ' ')"
    fi
    for f in Package Version Architecture Maintainer Description Section; do
        [ -n "$(dpkg-deb -f "$deb" $f)" ] || fail "$p has no $f field"
    done
    [ "$(dpkg-deb -f "$deb" Version)" = "$debver" ] ||
        fail "$p's version is $(dpkg-deb -f "$deb" Version), not $debver"
    dpkg-deb -I "$deb" > "$tmp/$p.info"
done
grep -q cumod-demo "$tmp"/*.has && fail "cumod-demo (the demo names a file of the build) is packaged"

# Dependencies: from dpkg-shlibdeps, and between the packages.
dep() { dpkg-deb -f "$tmp/pkg/${1}_${debver}_$arch.deb" Depends 2> /dev/null; }
if command -v dpkg-shlibdeps > /dev/null 2>&1; then
    for lib in libc6 libnng1 libuv1 libprotobuf-c1 libinih1 libsystemd0; do
        dep cumodd | grep -q "\\b$lib\\b" || fail "cumodd does not depend on $lib: $(dep cumodd)"
    done
    for p in libcumod0 cumodctl; do
        dep $p | grep -q "\\blibnng1\\b" || fail "$p does not depend on libnng1: $(dep $p)"
    done
    dep cumodd | grep -qi cuda && fail "cumodd depends on a CUDA package (it loads the driver itself): $(dep cumodd)"
    ok "dependencies from dpkg-shlibdeps: cumodd: $(dep cumodd)"
else
    echo "skip: dpkg-shlibdeps is not installed (Debian: dpkg-dev): dependencies not checked"
fi
dep libcumod-dev | grep -q "libcumod0 (= $debver)" ||
    fail "libcumod-dev does not depend on libcumod0 (= $debver): $(dep libcumod-dev)"
mkdir -p "$tmp/ctl"
dpkg-deb -e "$tmp/pkg/libcumod0_${debver}_$arch.deb" "$tmp/ctl/libcumod0"
grep -q "^libcumod 0 libcumod0" "$tmp/ctl/libcumod0/shlibs" 2> /dev/null ||
    fail "libcumod0 has no shlibs line for libcumod.so.0"

# cumodd's maintainer scripts: the user, a conffile, nothing enabled.
dpkg-deb -e "$tmp/pkg/cumodd_${debver}_$arch.deb" "$tmp/ctl/cumodd"
c=$tmp/ctl/cumodd
grep -qx /etc/cumod/cumodd.conf "$c/conffiles" 2> /dev/null ||
    fail "cumodd's conffiles do not list /etc/cumod/cumodd.conf"
grep -q 'systemd-sysusers cumod.conf' "$c/postinst" 2> /dev/null ||
    fail "cumodd's postinst does not make the user with systemd-sysusers"
grep -q 'useradd --system' "$c/postinst" 2> /dev/null ||
    fail "cumodd's postinst has no fallback without systemd"
sed 's/#.*//' "$c/postinst" |
    grep -Eq 'systemctl[^|;]*(enable|start|restart)|deb-systemd-helper +enable' &&
    fail "cumodd's postinst enables or starts a unit"
for s in postinst prerm postrm; do
    [ -x "$c/$s" ] || fail "cumodd's $s is not executable"
    sh -n "$c/$s" || fail "cumodd's $s is not valid sh"
done
# Run against stand-ins that log their calls: with systemd-sysusers, then
# without (a container), where getent finds no cumod and useradd makes it.
stub=$tmp/stub
mkdir -p "$stub/with" "$stub/without"
for t in systemd-sysusers systemctl getent groupadd useradd; do
    for d in with without; do
        [ $d = without ] && [ $t = systemd-sysusers ] && continue
        printf '#!/bin/sh\necho "${0##*/} $*" >> %s/calls.%s\n[ "${0##*/}" != getent ]\n' \
            "$stub" $d > "$stub/$d/$t"
        chmod +x "$stub/$d/$t"
    done
done
for d in with without; do
    PATH=$stub/$d /bin/sh "$c/postinst" configure > /dev/null 2>&1 ||
        fail "cumodd's postinst configure ($d systemd-sysusers) failed"
done
grep -qx 'systemd-sysusers cumod.conf' "$stub/calls.with" 2> /dev/null ||
    fail "postinst with systemd-sysusers: $(cat "$stub/calls.with" 2> /dev/null)"
grep -q '^useradd --system --gid cumod .* cumod$' "$stub/calls.without" 2> /dev/null &&
    grep -q '^groupadd --system cumod$' "$stub/calls.without" ||
    fail "postinst without systemd-sysusers: $(cat "$stub/calls.without" 2> /dev/null)"
grep -h '^systemctl' "$stub"/calls.* | grep -v '^systemctl daemon-reload$' &&
    fail "postinst ran systemctl for more than daemon-reload"
ok "cumodd: conffile, postinst makes the user cumod (systemd-sysusers, else useradd), enables nothing"

# lintian at error level; its warnings listed.
if command -v lintian > /dev/null 2>&1; then
    lintian --no-tag-display-limit "$tmp"/pkg/*.deb > "$tmp/lintian.log" 2>&1
    grep '^W: ' "$tmp/lintian.log" | sed 's/^/lintian warning: /'
    if grep -q '^E: ' "$tmp/lintian.log"; then
        fail "lintian errors: $(grep '^E: ' "$tmp/lintian.log")"
    else
        ok "lintian: no error ($(grep -c '^W: ' "$tmp/lintian.log") warnings)"
    fi
else
    echo "skip: lintian is not installed: the packages are not linted"
fi

# Unpacked into a scratch root: the programs run from it.
root=$tmp/root
for p in libcumod0 libcumod-dev cumodd cumodctl; do
    dpkg -x "$tmp/pkg/${p}_${debver}_$arch.deb" "$root" || fail "dpkg -x $p"
done
export LD_LIBRARY_PATH="$root/$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
v=$("$root/usr/sbin/cumodd" --version 2>&1)
[ "$v" = "cumodd $version" ] || fail "unpacked cumodd --version: $v"
v=$("$root/usr/bin/cumodctl" --version 2>&1)
[ "$v" = "cumodctl $version" ] || fail "unpacked cumodctl --version: $v"
mkdir -p "$tmp/kernels"
"$root/usr/sbin/cumodd" --config "$root/etc/cumod/cumodd.conf" --kernels "$tmp/kernels" \
    --check > "$tmp/check.out" 2>&1 || fail "the packaged cumodd.conf: $(cat "$tmp/check.out")"
grep -q '^ExecStart=/usr/sbin/cumodd --config /etc/cumod/cumodd.conf$' \
    "$root/usr/lib/systemd/system/cumodd.service" ||
    fail "cumodd.service does not run /usr/sbin/cumodd with /etc/cumod/cumodd.conf: $(grep ExecStart "$root/usr/lib/systemd/system/cumodd.service")"
# What cumodd has compiled in is where the packages put it (a build for
# prefix /usr; cpack warned above otherwise).
if grep -qx 'CMAKE_INSTALL_PREFIX:PATH=/usr' "$build/CMakeCache.txt"; then
    "$root/usr/sbin/cumodd" --help | tr -s ' \n' ' ' > "$tmp/help"
    grep -q 'NAME.conf (default /etc/cumod)' "$tmp/help" ||
        fail "the packaged cumodd's --config-dir is not /etc/cumod: $(grep -o 'NAME.conf (default [^)]*)' "$tmp/help")"
fi
ok "unpacked: cumodd and cumodctl $version run, the configuration checks, the unit names /usr/sbin/cumodd"

# A consumer of the unpacked libcumod-dev.
cat > "$tmp/consumer.c" << 'EOF'
#include <cumod/cumod.h>
#include <cumod/version.h>
#include <stdio.h>

int
main(void)
{
    cumod_client *c = NULL;
    int rv = cumod_open("ipc:///nonexistent/cumodd.sock", 100, &c);
    printf("%s %s\n", CUMOD_VERSION_STRING, cumod_errname(rv));
    return c == NULL ? 0 : 1;
}
EOF
flags=$(PKG_CONFIG_SYSROOT_DIR=$root PKG_CONFIG_PATH=$root/$libdir/pkgconfig \
    pkg-config --cflags --libs cumod 2> "$tmp/pc.err")
if [ -z "$flags" ]; then
    fail "pkg-config cumod in the unpacked root: $(cat "$tmp/pc.err")"
elif ! "${cc:-cc}" $cflags -o "$tmp/consumer" "$tmp/consumer.c" $flags 2> "$tmp/cc.err"; then
    fail "cc consumer.c $flags: $(cat "$tmp/cc.err")"
else
    case $flags in *"-I$root/usr/include"*) ;; *) fail "pkg-config's -I is not the unpacked root's: $flags" ;; esac
    out=$("$tmp/consumer" 2>&1)
    [ "$out" = "$version CUMOD_ECONNREFUSED" ] || fail "the pkg-config consumer printed: $out"
    ok "pkg-config consumer: $flags"
fi
mkdir -p "$tmp/cm"
cp "$tmp/consumer.c" "$tmp/cm/"
cat > "$tmp/cm/CMakeLists.txt" << EOF
cmake_minimum_required(VERSION 3.22)
project(consumer LANGUAGES C)
find_package(cumod $version EXACT REQUIRED)
add_executable(consumer consumer.c)
target_link_libraries(consumer PRIVATE cumod::cumod)
EOF
if cmake -S "$tmp/cm" -B "$tmp/cm/b" -DCMAKE_PREFIX_PATH="$root/usr" \
    -DCMAKE_C_COMPILER="${cc:-cc}" -DCMAKE_C_FLAGS="$cflags" \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF > "$tmp/cm.log" 2>&1 &&
    cmake --build "$tmp/cm/b" > "$tmp/cm.log" 2>&1; then
    out=$("$tmp/cm/b/consumer" 2>&1)
    [ "$out" = "$version CUMOD_ECONNREFUSED" ] || fail "the CMake consumer printed: $out"
    grep -q "$root" "$tmp/cm/b/CMakeCache.txt" || fail "find_package(cumod) did not find the unpacked root"
    ok "find_package(cumod $version EXACT) consumer"
else
    fail "the CMake consumer: $(tail -15 "$tmp/cm.log")"
fi

[ "$fails" = 0 ] || { echo "$fails failed"; exit 1; }
echo "all passed"
