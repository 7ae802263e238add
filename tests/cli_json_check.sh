#!/bin/sh
# SPDX-License-Identifier: MIT
# cumodctl --json against a real cumodd on the fake driver (issue 22,
# points 5 and 7c): every command's output parses as JSON, wherever --json
# is given; with --json an error is one object on stdout, {"error": true,
# "command", "context", "code", "name", "detail"}, with the exit status
# kept, so a script tells "no such module" (CUMOD_ENOENT) from "no cumodd
# there" (CUMOD_ECONNREFUSED); launch --cluster and --cooperative reach the
# daemon (its refusals name them; the fake driver logs them); and the bash
# completion runs the cumodctl being completed, by its path, off PATH.
# Usage: cli_json_check.sh SOURCE_DIR BUILD_DIR FAKECUDA FAKECUBLAS KERNEL_DIR
# Needs python3 (or $CUMOD_TEST_PYTHON) to read the JSON: skipped (77)
# without one.
set -u
src=$1
build=$2
fakecuda=$3
fakecublas=$4
kdir=$5
cumodd=$build/daemon/cumodd
ctl=$build/client/cumodctl
py=${CUMOD_TEST_PYTHON:-python3}
if ! "$py" -c 'import json' > /dev/null 2>&1; then
    echo "skip: no python3 to read the JSON with"
    exit 77
fi
tmp=$(mktemp -d)
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2> /dev/null && wait "$pid" 2> /dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

mkdir "$tmp/k"
for m in vadd empty scale table cluster coop; do
    cp "$kdir/$m.cubin" "$tmp/k/" || { echo "no $kdir/$m.cubin"; exit 1; }
done
url=ipc://$tmp/cumodd.sock
down=ipc://$tmp/nobody.sock
CUMOD_FAKE_LOG=$tmp/fake.log "$cumodd" --kernels "$tmp/k" --listen "$url" \
    --cuda-library "$fakecuda" --cublas-library "$fakecublas" \
    > "$tmp/cumodd.log" 2>&1 &
pid=$!
i=0
until "$ctl" --url "$url" status > /dev/null 2>&1; do
    i=$((i + 1))
    if [ $i -gt 300 ] || ! kill -0 "$pid" 2> /dev/null; then
        echo "cumodd did not start:"
        cat "$tmp/cumodd.log"
        exit 1
    fi
    sleep 0.1
done

# run URL ARGS...: cumodctl's stdout in $tmp/out, stderr in $tmp/err, its
# exit status in $rc.
run() {
    u=$1
    shift
    "$ctl" --url "$u" "$@" > "$tmp/out" 2> "$tmp/err"
    rc=$?
}

# Checks the JSON of $tmp/out with a Python expression over d (the
# document; every line's for JSON lines: lines=1); prints what is wrong.
pycheck() {
    "$py" - "$tmp/out" "$1" "${2:-0}" << 'PY'
import json, sys
path, expr, lines = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
text = open(path).read()
try:
    docs = ([json.loads(l) for l in text.splitlines() if l.strip()]
            if lines else [json.loads(text)])
except ValueError as e:
    sys.exit(f"not JSON ({e}): {text!r}")
if not docs:
    sys.exit("no output")
for d in docs:
    if not eval("(" + expr + ")"):
        sys.exit(f"{expr} is false of {d!r}")
PY
}

# ok_json EXPR ARGS...: a success (0, nothing on stderr) whose stdout is
# JSON of which EXPR holds.
ok_json() {
    expr=$1
    shift
    run "$url" "$@"
    [ "$rc" = 0 ] || { fail "cumodctl $*: exit $rc: $(cat "$tmp/err")"; return; }
    [ -s "$tmp/err" ] && fail "cumodctl $*: stderr: $(cat "$tmp/err")"
    why=$(pycheck "$expr" 0 2>&1) || fail "cumodctl $*: $why"
}

# err_json URL NAME ARGS...: exit status 1, stdout one error object named
# NAME (code, name, detail), nothing on stderr.
err_json() {
    u=$1
    want=$2
    shift 2
    run "$u" "$@"
    [ "$rc" = 1 ] || fail "cumodctl $*: exit $rc, want 1"
    [ -s "$tmp/err" ] && fail "cumodctl $*: stderr with --json: $(cat "$tmp/err")"
    why=$(pycheck "d.get('error') is True and type(d.get('code')) is int
        and d['code'] > 0 and d.get('name') == '$want'
        and isinstance(d.get('detail'), str) and d['detail'] != ''
        and 'command' in d and 'context' in d" 1 2>&1) ||
        fail "cumodctl $*: $why"
}

# usage_json ARGS...: a wrong command line with --json: exit status 2, the
# words on stderr as without it, and one object with "usage": true on
# stdout.
usage_json() {
    run "$url" "$@"
    [ "$rc" = 2 ] || fail "cumodctl $*: exit $rc, want 2"
    [ -s "$tmp/err" ] || fail "cumodctl $*: no words on stderr"
    why=$(pycheck "d.get('error') is True and d.get('usage') is True
        and d.get('name') == 'CUMOD_EINVAL' and type(d.get('code')) is int
        and not d['detail'].startswith('cumodctl')
        and d['detail'].rstrip() == d['detail'] and d['detail'] != ''" 1 2>&1) ||
        fail "cumodctl $*: $why"
}
usage_json launch --json --bogus x
usage_json launch vadd:vadd --json --cluster 0,a
usage_json top --interval x --json
usage_json watch --json --after x
usage_json gemm --json fp99 1 1 1
usage_json global --json
usage_json carveout --json vadd:vadd 200
usage_json --json
usage_json --json --timeout
usage_json --json ls extra
usage_json --json load
usage_json --json --device x ls
# Bytes that are not text (control bytes, invalid UTF-8) in what an error
# echoes: still JSON, the bad bytes as U+FFFD, the good ones kept.
usage_json launch --json "$(printf -- '--bo\001g\377\376"x')"
why=$(pycheck "'\\ufffd\\ufffd' in d['detail'] and '\\x01' in d['detail']" 1 2>&1) ||
    fail "launch with bytes that are not text: $why"
run "$url" show --json "$(printf 'caf\303\251\342\202')"
why=$(pycheck "d.get('error') is True and d['name'] in ('CUMOD_EINVAL', 'CUMOD_ENOENT')" 1 2>&1) ||
    fail "show with invalid UTF-8: $why"
# Without --json a usage error prints nothing on stdout.
run "$url" launch --bogus x
[ "$rc" = 2 ] && [ ! -s "$tmp/out" ] || fail "launch --bogus without --json: exit $rc, stdout $(cat "$tmp/out")"

# Every command's --json, after the command and (a few) before it.
ok_json "d['url'] == '$url' and isinstance(d['daemon_version'], str)" status --json
ok_json "isinstance(d, list) and 'vadd' in [m['name'] for m in d]" ls --json
ok_json "isinstance(d, list)" --json ls
ok_json "d['name'] == 'vadd' and d['kernel_params'][0]['name'] == 'vadd'" \
    show vadd --json
ok_json "d['name'] == 'table' and 'scale' in [g['name'] for g in d['globals']]" \
    --json show table
for c in load pin unpin reload unload unquarantine; do
    ok_json "d['name'] == 'vadd' and isinstance(d['note'], str)" $c vadd --json
done
ok_json "d['name'] == 'vadd'" load vadd --jit-opt-level 2 --json
ok_json "d['kernel'] == 'scale:scale' and d['generation'] >= 1 and
    d['buffers'][0]['values'] == [0.0] * 4" \
    launch scale:scale --json --block 4 buf:16:f32 f32:2 i32:4
ok_json "d['kernel'] == 'scale:scale'" --json launch scale:scale buf:4:f32 f32:1 i32:1
# Each buffer read back and printed as its own (the fake runs no kernel
# code: the inputs come back as written).
ok_json "[(x['arg'], x['values']) for x in d['buffers']] ==
    [(1, [1.0, 2.0]), (2, [5.0, 6.0]), (3, [0.0, 0.0])]" launch --json \
    vadd:vadd buf:8:f32=1,2 buf:8:f32=5,6 buf:8:f32 i32:2
ok_json "d['name'] == 'scale' and d['type'] == 'f32' and len(d['values']) == 1" \
    global table scale --type f32 --json
ok_json "d == {'kernel': 'empty:empty', 'carveout': 50}" \
    carveout empty:empty 50 --json
ok_json "d == {'kernel': 'empty:empty', 'carveout': None}" \
    carveout --json empty:empty default
ok_json "d['seq'] >= 1 and isinstance(d['kind'], str)" \
    watch --json --all --count 1
ok_json "d['type'] == 'fp32' and d['m'] == 8 and d['repeat'] == 1" \
    gemm fp32 8 8 8 --repeat 1 --json
ok_json "isinstance(d['sessions'], list)" top --json --interval 0.1
ok "every command's --json output parses"

# Errors: a module that is not there, then no daemon at all.
err_json "$url" CUMOD_ENOENT show nosuch --json
err_json "$url" CUMOD_ENOENT --json load nosuch
err_json "$url" CUMOD_ENOENT launch nosuch:k --json
err_json "$url" CUMOD_ENOENT global table nosuch --json
err_json "$url" CUMOD_ENOENT carveout nosuch:k 10 --json
run "$url" show nosuch --json
"$py" -c 'import json,sys; d=json.load(open(sys.argv[1]))
assert d["command"] == "show" and "nosuch" in d["detail"], d
assert d["code"] == 3, d' "$tmp/out" || fail "show nosuch: $(cat "$tmp/out")"
# Without --json: words on stderr, nothing on stdout, the same status.
run "$url" show nosuch
[ "$rc" = 1 ] && [ ! -s "$tmp/out" ] && grep -q "^cumodctl: show: " "$tmp/err" ||
    fail "show nosuch in words: $rc: $(cat "$tmp/out" "$tmp/err")"
for c in status ls "show vadd" "load vadd" "unload vadd" "pin vadd" \
    "unpin vadd" "reload vadd" "unquarantine vadd" "launch vadd:vadd" \
    "global table scale" "carveout vadd:vadd 10" "watch" \
    "gemm fp32 8 8 8" "top --interval 0.1"; do
    # shellcheck disable=SC2086
    err_json "$down" CUMOD_ECONNREFUSED $c --json
done
run "$down" --json ls
"$py" -c 'import json,sys; d=json.load(open(sys.argv[1]))
assert d["code"] == 8 and d["context"] == "connect", d' "$tmp/out" ||
    fail "ls on no daemon: $(cat "$tmp/out")"
# A usage error stays words on stderr (exit 2).
run "$url" launch --json --grid x vadd:vadd
[ "$rc" = 2 ] && grep -q -- "--grid" "$tmp/err" || fail "usage: $rc $(cat "$tmp/err")"
ok "errors with --json: objects with code, name and detail; ENOENT vs ECONNREFUSED"

# launch --cluster and --cooperative reach the daemon: what it accepts runs
# with them (the fake driver's log), what it refuses says why.
ok_json "d['kernel'] == 'cluster:cluster_any'" launch --json \
    cluster:cluster_any --grid 8 --block 32 --cluster 4 buf:64:i32
grep -q "launch fn=cluster_any.* cluster=4,1,1" "$tmp/fake.log" ||
    fail "--cluster 4: not in the driver's launch: $(grep cluster_any "$tmp/fake.log")"
ok_json "d['kernel'] == 'cluster:cluster_any'" launch cluster:cluster_any \
    --grid 8,2 --block 32 --cluster 2,2,1 --json buf:64:i32
grep -q "launch fn=cluster_any.* cluster=2,2,1" "$tmp/fake.log" ||
    fail "--cluster 2,2,1: not in the driver's launch: $(grep cluster_any "$tmp/fake.log")"
err_json "$url" CUMOD_EINVAL launch --json cluster:cluster_pair --grid 8 \
    --block 32 --cluster 4 buf:64:i32
grep -q "cluster_pair was compiled for clusters of 2x1x1" "$tmp/out" ||
    fail "--cluster 4 on cluster_pair: $(cat "$tmp/out")"
run "$url" launch cluster:cluster_pair --grid 8 --block 32 --cluster 4 buf:64:i32
[ "$rc" = 1 ] && grep -q "cumodctl: launch: .*clusters of 2x1x1" "$tmp/err" ||
    fail "--cluster in words: $rc $(cat "$tmp/err")"
ok_json "d['kernel'] == 'coop:grid_sum'" launch --json coop:grid_sum \
    --grid 1 --block 256 --cooperative buf:400 buf:64 buf:4 i32:100
grep -q "launch fn=grid_sum.* cooperative=1" "$tmp/fake.log" ||
    fail "--cooperative: not in the driver's launch: $(grep grid_sum "$tmp/fake.log")"
err_json "$url" CUMOD_EINVAL launch --json coop:grid_sum --grid 100000 \
    --block 256 --cooperative buf:400 buf:64 buf:4 i32:100
grep -q "a cooperative launch of" "$tmp/out" ||
    fail "--cooperative, too large a grid: $(cat "$tmp/out")"
ok "launch --cluster and --cooperative reach cumodd"

# The hidden plain-text listing the completion reads.
run "$url" __complete modules
sort "$tmp/out" > "$tmp/names"
run "$url" ls --json
"$py" -c 'import json,sys; print("\n".join(sorted(m["name"] for m in json.load(open(sys.argv[1])))))' \
    "$tmp/out" > "$tmp/names.json"
cmp -s "$tmp/names" "$tmp/names.json" ||
    fail "__complete modules: $(cat "$tmp/names") vs ls: $(cat "$tmp/names.json")"

# Bash completion with the real cumodctl, by its path, PATH without it.
if command -v bash > /dev/null; then
    out=$(env PATH="$tmp/nothing" CTL="$ctl" URL="$url" \
        "$(command -v bash)" -c '
        source "$0"
        t() {
            COMP_WORDS=("$CTL" --url "$URL" "$@")
            COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
            COMPREPLY=()
            _cumodctl "$CTL" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
            printf "$1 %s\n" "${COMPREPLY[@]}"
        }
        t load ""
        t pin s
        t launch cluster:c' \
        "$src/client/ctl/cumodctl.bash" 2>&1)
    got() { echo "$out" | sed -n "s/^$1 //p" | sort | tr '\n' ' '; }
    [ "$(got load)" = "cluster coop empty scale table vadd " ] ||
        fail "completion of modules: $out"
    [ "$(got pin)" = "scale " ] || fail "completion of pin s: $out"
    [ "$(got launch)" = "cluster_any cluster_pair " ] ||
        fail "completion of MODULE:KERNEL: $out"
    ok "bash completion runs $ctl off PATH"
else
    echo "skip: no bash for the completion"
fi

[ "$fails" = 0 ] || { echo "$fails failed"; exit 1; }
echo "all passed"
