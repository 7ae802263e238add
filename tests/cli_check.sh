#!/bin/sh
# SPDX-License-Identifier: MIT
# The command-line habits (issue 12, point 5; issue 22, point 7): --version
# and --help of both programs, the manual pages cumodd(8) and cumodctl(1)
# against --help (every option and command documented; groff finds nothing
# to warn of), cumodd's help and page naming every kind of file the kernel
# folder takes, libcumod(3) against cumod/cumod.h (every function declared
# there, every variable libcumod reads), the bash completion (commands,
# options, module names and MODULE:KERNEL, with a stand-in cumodctl that
# answers like the real one, run by its path and not on PATH), and an
# install into a temporary prefix that puts all of them where man and bash
# look.
# Usage: cli_check.sh SOURCE_DIR BUILD_DIR
set -u
src=$1
build=$2
cumodd=$build/daemon/cumodd
ctl=$build/client/cumodctl
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

# --version and --help.
"$cumodd" --version | grep -q '^cumodd [0-9]' || fail "cumodd --version"
"$ctl" --version | grep -q '^cumodctl [0-9]' || fail "cumodctl --version"
"$cumodd" --help > "$tmp/d.help" || fail "cumodd --help exits 0"
"$ctl" --help > "$tmp/c.help" || fail "cumodctl --help exits 0"

# cumodd(8): made by cumodd --man; every option of --help is in it.
"$cumodd" --man > "$tmp/cumodd.8" || fail "cumodd --man"
grep -o -- '--[a-z][a-z-]*' "$tmp/d.help" | sort -u > "$tmp/d.opts"
n=0
while read -r o; do
    n=$((n + 1))
    esc=$(printf '%s' "$o" | sed 's/-/\\-/g')
    grep -qF -- "$esc" "$tmp/cumodd.8" || fail "cumodd.8 lacks $o"
done < "$tmp/d.opts"
ok "cumodd.8 documents the $n options --help names"

# cumodctl(1): every command and option of --help.
sed -n '/^Commands:/,/^Options:/p' "$tmp/c.help" |
    sed -n 's/^  \([a-z][a-z]*\).*/\1/p' | sort -u > "$tmp/c.cmds"
grep -o -- '--[a-z][a-z-]*' "$tmp/c.help" | sort -u > "$tmp/c.opts"
n=0
while read -r c; do
    n=$((n + 1))
    grep -qE "^(\\.BI? |\\\\fB)$c( |\\\\fR|\$)" "$src/client/ctl/cumodctl.1" ||
        fail "cumodctl.1 lacks the command $c"
done < "$tmp/c.cmds"
while read -r o; do
    esc=$(printf '%s' "$o" | sed 's/-/\\-/g')
    grep -qF -- "$esc" "$src/client/ctl/cumodctl.1" ||
        fail "cumodctl.1 lacks $o"
done < "$tmp/c.opts"
ok "cumodctl.1 documents the $n commands and $(wc -l < "$tmp/c.opts") options of --help"

# Every kind of file the kernel folder takes, in --help's --kernels and in
# cumodd(8)'s DESCRIPTION (its fonts taken out).
awk '/^  -k, --kernels /{p=1; print; next}
    p && substr($0, 1, 29) ~ /^ +$/ && substr($0, 30, 1) != " " {print; next}
    {p=0}' \
    "$tmp/d.help" > "$tmp/d.kernels"
sed -n '/^\.SH DESCRIPTION/,/^\.SH OPTIONS/p' "$tmp/cumodd.8" |
    sed 's/\\f[BIRP]//g' > "$tmp/d.desc"
for ext in cubin fatbin ptx cu; do
    grep -qE "\\.$ext([^a-z.]|\$)" "$tmp/d.kernels" ||
        fail "cumodd --help's --kernels does not name .$ext: $(cat "$tmp/d.kernels")"
    grep -qE "\\.$ext([^a-z.]|\$)" "$tmp/d.desc" ||
        fail "cumodd.8's DESCRIPTION does not name .$ext"
done
ok "cumodd --help and cumodd.8 name .cubin, .fatbin, .ptx and .cu"

# libcumod(3): every function cumod/cumod.h and cumod/errors.h declare
# (comments taken out, so a name a comment mentions does not count), and
# every variable of the environment libcumod reads.
lib3=$src/client/lib/libcumod.3
cat "$src/client/include/cumod/cumod.h" "$src/proto/include/cumod/errors.h" |
    tr '\n' ' ' | sed 's:/\*[^*]*\*\+\([^/*][^*]*\*\+\)*/::g' |
    grep -oE '\bcumod_[a-z0-9_]+ *\(' | tr -d ' (' | sort -u > "$tmp/api"
n=$(wc -l < "$tmp/api")
[ "$n" -gt 60 ] || fail "only $n functions found in cumod/cumod.h"
while read -r f; do
    grep -qE "(^|[^a-z0-9_])$f\(" "$lib3" || fail "libcumod.3 lacks $f()"
done < "$tmp/api"
grep -rhoE 'getenv\("[A-Z_]+"\)' "$src/client/lib" | sed 's/getenv("\(.*\)")/\1/' |
    sort -u > "$tmp/env"
grep -rhoE '"CUMOD_TLS_[A-Z]+"' "$src/client/lib" | tr -d '"' >> "$tmp/env"
while read -r v; do
    grep -qF -- "$v" "$lib3" || fail "libcumod.3 lacks \$$v (libcumod reads it)"
done < "$tmp/env"
ok "libcumod.3 documents the $n functions of the header and $(sort -u "$tmp/env" | wc -l) variables"

if command -v groff > /dev/null; then
    for m in "$tmp/cumodd.8" "$src/client/ctl/cumodctl.1" "$lib3"; do
        w=$(groff -man -Tutf8 -ww -z "$m" 2>&1)
        [ -z "$w" ] || fail "groff warns about $(basename "$m"): $w"
        groff -man -Tutf8 -P -cbou "$m" 2> /dev/null | grep -q 'SYNOPSIS' ||
            fail "$(basename "$m") renders no SYNOPSIS"
    done
    ok "groff renders the three pages without a warning"
else
    echo "skip: groff is not installed, the pages are not rendered"
fi

# Bash completion, against a stand-in cumodctl that answers only the plain
# lines of `cumodctl __complete` (no JSON), run by its path as bash gives
# it ($1, else COMP_WORDS[0]), with no cumodctl on PATH.
if command -v bash > /dev/null; then
    mkdir -p "$tmp/bin"
    cat > "$tmp/bin/cumodctl" << 'STUB'
#!/bin/sh
case " $* " in
*" --json "*) exit 1 ;;
*" __complete modules ") printf 'vadd\nempty\n' ;;
*" __complete kernels vadd ") printf 'vadd:vadd\nvadd:vsub\n' ;;
*) exit 1 ;;
esac
STUB
    chmod +x "$tmp/bin/cumodctl"
    cat > "$tmp/complete.bash" << EOF2
PATH=$tmp/nothing
command -v cumodctl > /dev/null && echo "FAIL: a cumodctl on PATH: \$(command -v cumodctl)"
source $src/client/ctl/cumodctl.bash
# As bash calls it: the command as typed, the word, the word before.
t() { COMP_WORDS=($tmp/bin/cumodctl "\$@"); COMP_CWORD=\$((\${#COMP_WORDS[@]} - 1)); COMPREPLY=(); _cumodctl "\${COMP_WORDS[0]}" "\${COMP_WORDS[COMP_CWORD]}" "\${COMP_WORDS[COMP_CWORD - 1]}"; echo "\${COMPREPLY[*]}"; }
[ "\$(t l)" = "ls load launch" ] || echo "FAIL: commands: \$(t l)"
[ "\$(t --ver)" = "--version" ] || echo "FAIL: options: \$(t --ver)"
[ "\$(t load '')" = "vadd empty" ] || echo "FAIL: modules: \$(t load '')"
[ "\$(t -u ipc:///x pin e)" = "empty" ] || echo "FAIL: after --url: \$(t -u ipc:///x pin e)"
[ "\$(t --device 1 pin e)" = "empty" ] || echo "FAIL: after --device: \$(t --device 1 pin e)"
[ "\$(t --dev)" = "--device" ] || echo "FAIL: --device: \$(t --dev)"
[ "\$(t launch va)" = "vadd:" ] || echo "FAIL: launch module: \$(t launch va)"
[ "\$(t launch vadd:v)" = "vadd vsub" ] || echo "FAIL: launch kernels: \$(t launch vadd:v)"
[ "\$(t launch vadd:vadd --co)" = "--cooperative" ] || echo "FAIL: launch options"
[ "\$(t global vadd g --type f)" = "f32 f64" ] || echo "FAIL: --type: \$(t global vadd g --type f)"
[ "\$(t watch --a)" = "--all" ] || echo "FAIL: watch: \$(t watch --a)"
[ "\$(t gemm b)" = "bf16" ] || echo "FAIL: gemm type: \$(t gemm b)"
[ "\$(t gemm bf16 8 8 8 --tr)" = "--transa --transb" ] || echo "FAIL: gemm options: \$(t gemm bf16 8 8 8 --tr)"
[ "\$(t gemm fp16 8 8 8 --c-type fp3)" = "fp32" ] || echo "FAIL: gemm --c-type: \$(t gemm fp16 8 8 8 --c-type fp3)"
[ "\$(t carveout --json va)" = "vadd:" ] || echo "FAIL: carveout after --json: \$(t carveout --json va)"
[ "\$(t launch --grid 2 vadd:v)" = "vadd vsub" ] || echo "FAIL: launch kernels after --grid: \$(t launch --grid 2 vadd:v)"
[ "\$(t launch vadd:vadd f)" = "f32: f64:" ] || echo "FAIL: launch ARG: \$(t launch vadd:vadd f)"
# Without \$1 (an older caller): COMP_WORDS[0].
COMP_WORDS=($tmp/bin/cumodctl pin e); COMP_CWORD=2; COMPREPLY=(); _cumodctl
[ "\${COMPREPLY[*]}" = "empty" ] || echo "FAIL: by COMP_WORDS[0]: \${COMPREPLY[*]}"
EOF2
    out=$(bash "$tmp/complete.bash" 2>&1)
    if [ -n "$out" ]; then fail "bash completion: $out"; else ok "bash completion: commands, options, modules, MODULE:KERNEL"; fi
else
    echo "skip: no bash"
fi

# --device N: a usage error (2) unless N is an ordinal, before any
# command, launch included (nothing listens at the URL: never reached).
for a in "--device one status" "--device -1 ls" "-d 1x launch vadd:vadd" \
    "--device=2.5 top" "status --device"; do
    # shellcheck disable=SC2086
    "$ctl" --url ipc:///nonexistent/cumodd.sock $a > /dev/null 2> "$tmp/dev.err"
    rc=$?
    [ "$rc" = 2 ] || fail "cumodctl $a: exit $rc, want 2 (usage)"
done
grep -q "is not a device ordinal" "$tmp/dev.err" ||
    grep -q "needs a value" "$tmp/dev.err" || fail "--device: $(cat "$tmp/dev.err")"
"$ctl" --url ipc:///nonexistent/cumodd.sock --device 0 status > /dev/null 2>&1
[ $? = 1 ] || fail "cumodctl --device 0 status: a connection error (1)"
ok "--device takes an ordinal, before any command"

# Installed where man and bash-completion look.
if cmake --install "$build" --prefix "$tmp/inst" > "$tmp/install.log" 2>&1; then
    for f in share/man/man8/cumodd.8.gz share/man/man1/cumodctl.1.gz \
        share/man/man3/libcumod.3.gz \
        share/bash-completion/completions/cumodctl; do
        [ -s "$tmp/inst/$f" ] || fail "not installed: $f"
    done
    # Compressed (Debian policy; man reads them), and each the page.
    for p in man8/cumodd.8 man1/cumodctl.1 man3/libcumod.3; do
        gzip -dc "$tmp/inst/share/man/$p.gz" 2> /dev/null | head -1 |
            grep -q '^\.TH ' || fail "$p.gz is not a gzipped manual page"
    done
    ok "installed: cumodd.8.gz, cumodctl.1.gz, libcumod.3.gz, bash completion"
else
    fail "cmake --install: $(tail -5 "$tmp/install.log")"
fi

[ "$fails" = 0 ] || { echo "$fails failed"; exit 1; }
echo "all passed"
