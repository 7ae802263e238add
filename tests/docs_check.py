#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The documentation's commands, run (issue 24 point 5): docs cannot rot.

README.md and docs/*.md mark the shell and Python blocks a test can run
with an HTML comment on the line just before the block's fence:

    <!-- test: fake -->                 the test daemon serves it
    <!-- test: fake, own daemon -->     the test daemon is stopped first
                                        (the page starts its own, or
                                        needs none)
    ... , shows errors                  the block shows commands that
                                        fail: it runs without `set -e`,
                                        but a usage error (exit 2), a
                                        command not found (126, 127) or
                                        a signal still fails it
    ... , needs TOOL                    skipped, saying so, where TOOL
                                        is not on PATH

Every marked block of a page runs in one bash (`set -e`), in order, as a
reader runs them in one terminal; a Python block runs as a file, after
the blocks of its example before it (a block that starts with an import
starts an example, else it goes on from the one before). They run on the
test driver, in a temporary folder:

- the working folder holds links to the source tree's top entries and
  `build` (the build under test), so `build/...`, `client/python`, ...
  are where they are at the top of a checkout;
- `/tmp/` in a block is that folder (so `/tmp/k` and
  `ipc:///tmp/cumodd.sock` are the test's own), `127.0.0.1:9464` the test
  daemon's metrics port, `~` a home of its own;
- PATH starts with build/daemon and build/client; CUMOD_CUDA_LIBRARY and
  CUMOD_CUBLAS_LIBRARY name the fake driver and the fake cuBLAS (so a
  cumodd a block starts runs on them); CUMOD_URL is the test daemon's;
  PYTHONPATH holds client/python and CUMOD_LIBRARY the build's libcumod;
- the test daemon is `cumodd --kernels /tmp/k --listen
  ipc:///tmp/cumodd.sock --metrics-listen 127.0.0.1:9464`, on a copy of
  build/kernels/out plus `bad` (a vadd whose launches fault, launched once
  at start, so it is quarantined);
- a line that starts cumodd in the background (`cumodd ... &`) is
  followed by a wait until it answers at its --listen URL (10 s at most),
  as a reader waits before typing the next command.

It also checks that each page starts with a table of contents that lists
its sections, and that every relative link of README.md, docs/,
CONTRIBUTING.md and SECURITY.md leads to a file and a heading that exist.
It prints, per page, how many command blocks (sh, bash, console, shell,
python) run and how many do not.

Usage: docs_check.py SOURCE_DIR BUILD_DIR [--no-run] [--fix-toc] [--verbose]
Environment: CUMOD_TEST_PYTHON, the python for the Python blocks (with
NumPy; default: this one).
"""
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

COMMAND_LANGS = {"sh", "bash", "console", "shell", "python"}
MARK_RE = re.compile(r"^\s*<!--\s*test:\s*(.*?)\s*-->\s*$")
FENCE_RE = re.compile(r"^(\s*)```(\S*)\s*$")
HEAD_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK_RE = re.compile(r"(?<!!)\[([^\]]*)\]\(([^)\s]+)\)")
PAGE_TIMEOUT = 60
VERBOSE = "--verbose" in sys.argv


class Block:
    def __init__(self, page, line, lang, text, options):
        self.page, self.line, self.lang = page, line, lang
        self.text, self.options = text, options  # options: None = unmarked

    @property
    def marked(self):
        return self.options is not None

    def where(self):
        return f"{self.page}:{self.line}"


def parse_options(spec, where, errors):
    """`fake, own daemon, needs curl` -> dict; errors noted."""
    parts = [p.strip() for p in spec.split(",")]
    opts = {"own": False, "errors": False, "needs": []}
    if not parts or parts[0] != "fake":
        errors.append(f"{where}: a test marker starts `test: fake` "
                      f"(got `{spec}`)")
        return opts
    for p in parts[1:]:
        if p == "own daemon":
            opts["own"] = True
        elif p == "shows errors":
            opts["errors"] = True
        elif p.startswith("needs "):
            opts["needs"].append(p[6:].strip())
        else:
            errors.append(f"{where}: unknown test option `{p}`")
    return opts


def scan(path, rel, errors):
    """The fenced blocks of a page, and its headings (outside blocks)."""
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks, heads = [], []
    i = 0
    while i < len(lines):
        m = FENCE_RE.match(lines[i])
        if not m:
            h = HEAD_RE.match(lines[i])
            if h:
                heads.append((len(h.group(1)), h.group(2), i + 1))
            if MARK_RE.match(lines[i]) and not (
                    i + 1 < len(lines) and FENCE_RE.match(lines[i + 1])):
                errors.append(f"{rel}:{i + 1}: a test marker not followed "
                              f"by a fenced block on the next line")
            i += 1
            continue
        indent, lang = m.group(1), m.group(2)
        start = i
        body = []
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            ln = lines[i]
            body.append(ln[len(indent):] if ln.startswith(indent) else ln)
            i += 1
        if i == len(lines):
            errors.append(f"{rel}:{start + 1}: a fence that never closes")
        i += 1
        mark = MARK_RE.match(lines[start - 1]) if start > 0 else None
        opts = None
        if mark:
            opts = parse_options(mark.group(1), f"{rel}:{start}", errors)
            if lang not in COMMAND_LANGS:
                errors.append(f"{rel}:{start}: a test marker on a "
                              f"```{lang} block")
        blocks.append(Block(rel, start + 1, lang, "\n".join(body), opts))
    # A closing fence with text after it (```` ``` text ````) is no fence:
    for n, ln in enumerate(lines):
        if re.match(r"^\s*```\s+\S", ln):
            errors.append(f"{rel}:{n + 1}: text after a fence")
    return blocks, heads


def slug(title, seen):
    """GitHub's anchor for a heading."""
    s = re.sub(r"`|\*\*|\[|\]\([^)]*\)", "", title).strip().lower()
    s = re.sub(r"[^\w\- ]", "", s).replace(" ", "-")
    n = seen.get(s, 0)
    seen[s] = n + 1
    return s if n == 0 else f"{s}-{n}"


def anchors(heads):
    seen = {}
    return [slug(t, seen) for _, t, _ in heads]


def toc_lines(heads):
    """The table of contents a page starts with: its ## and ### headings."""
    out = []
    for (level, title, _), a in zip(heads, anchors(heads)):
        if level in (2, 3):
            text = re.sub(r"\*\*", "", title)
            out.append("  " * (level - 2) + f"- [{text}](#{a})")
    return out


def check_toc(path, rel, heads, fix, errors):
    lines = open(path, encoding="utf-8").read().split("\n")
    if not lines or not lines[0].startswith("# "):
        errors.append(f"{rel}:1: a page starts with its title (`# ...`)")
        return
    want = toc_lines(heads)
    i = 1
    while i < len(lines) and lines[i] == "":
        i += 1
    j = i
    while j < len(lines) and re.match(r"^\s*- \[", lines[j]):
        j += 1
    have = lines[i:j]
    if have == want:
        return
    if fix:
        lines[1:j] = [""] + want + [""]
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
        print(f"{rel}: table of contents rewritten")
        return
    errors.append(f"{rel}: its table of contents (after the title) is not "
                  f"its sections; `docs_check.py SRC BUILD --no-run "
                  f"--fix-toc` writes it:\n  " + "\n  ".join(want))


def check_links(src, rel, errors, heads_of):
    path = os.path.join(src, rel)
    text = open(path, encoding="utf-8").read()
    # Links inside code are not links.
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    for m in LINK_RE.finditer(text):
        target = m.group(2)
        if re.match(r"^[a-z]+:", target):
            continue
        file, _, frag = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) \
            if file else path
        if not os.path.exists(dest):
            errors.append(f"{rel}: link to {target}: no such file")
            continue
        if frag and dest.endswith(".md"):
            if frag not in heads_of(dest):
                errors.append(f"{rel}: link to {target}: no heading "
                              f"#{frag} in {os.path.relpath(dest, src)}")


# --- running ---------------------------------------------------------------

PRELUDE = r'''
__block() { __where=$1; echo "@@docs-block $1"; }
__report() {
  local rc=$?
  [ $rc = 0 ] || echo "@@docs-failed $__where exit $rc"
}
trap __report EXIT
__ready() { # URL: wait until a cumodd answers there
  local i
  for i in $(seq 1 200); do
    cumodctl --url "$1" --timeout 1000 status > /dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "docs_check: no cumodd answered at $1 within 10 s"; return 1
}
__fixture_pid() {
  [ -s "$__T/fixture.pid" ] && kill -0 "$(cat "$__T/fixture.pid")" 2> /dev/null
}
__fixture_up() {
  __fixture_pid && return 0
  setsid cumodd --kernels "$__T/k" --listen "ipc://$__T/cumodd.sock" \
    --metrics-listen "127.0.0.1:$__PORT" >> "$__T/fixture.log" 2>&1 \
    < /dev/null &
  echo $! > "$__T/fixture.pid"
  __ready "ipc://$__T/cumodd.sock" || { cat "$__T/fixture.log"; return 1; }
  if [ ! -e "$__T/bad-quarantined" ]; then
    # bad's launch faults (the fake's poison): cumodd quarantines it.
    cumodctl --url "ipc://$__T/cumodd.sock" launch bad:vadd --grid 1 \
      --block 1 buf:4 buf:4 buf:4 i32:1 > /dev/null 2>&1 || true
    touch "$__T/bad-quarantined"
    __ready "ipc://$__T/cumodd.sock"
  fi
}
__fixture_down() {
  __fixture_pid || return 0
  local pid i
  pid=$(cat "$__T/fixture.pid")
  kill -TERM "$pid"
  for i in $(seq 1 300); do
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.05
  done
  rm -f "$__T/fixture.pid"
}
__errors_shown() { # an ERR trap: a usage error, not found or a signal fails
  local rc=$1
  case $rc in
  2 | 126 | 127)
    echo "@@docs-failed $__where exit $rc (usage, or not found)"
    exit 99
    ;;
  esac
  if [ "$rc" -ge 128 ]; then
    echo "@@docs-failed $__where exit $rc (signal)"
    exit 99
  fi
}
set -e
'''


def map_text(text, tmp, port):
    text = text.replace("/tmp/", tmp + "/")
    return text.replace("127.0.0.1:9464", f"127.0.0.1:{port}")


def with_waits(text):
    """After each line that starts cumodd in the background, a wait until
    it answers at its --listen URL."""
    out, cont = [], ""
    for ln in text.split("\n"):
        out.append(ln)
        logical = cont + ln
        if ln.rstrip().endswith("\\"):
            cont = logical.rstrip()[:-1] + " "
            continue
        cont = ""
        if re.match(r"^\s*(\S*/)?cumodd\s.*&\s*$", logical):
            m = re.search(r"(?:--listen|-l)[ =](\S+)", logical)
            url = m.group(1) if m else "ipc:///run/cumod/cumodd.sock"
            out.append(f"__ready {url}")
    return "\n".join(out)


def page_script(blocks, tmp, port, pydir, py, skipped):
    """One bash script for a page's marked blocks."""
    s = [PRELUDE]
    chain = []  # the Python blocks of the current example
    for b in blocks:
        if b.lang == "python":
            first = b.text.lstrip().split("\n", 1)[0]
            if re.match(r"^(import|from)\s", first) or not chain:
                chain = []
            chain.append(b.text)
        if not b.marked:
            continue
        missing = [t for t in b.options["needs"] if not shutil.which(t)]
        if b.lang == "python" and py is None:
            missing.append("a python with NumPy (CUMOD_TEST_PYTHON)")
        if missing:
            skipped.append((b, ", ".join(missing)))
            continue
        s.append(f"__block {b.where()}")
        s.append("__fixture_down" if b.options["own"] else "__fixture_up")
        if b.lang == "python":
            f = os.path.join(pydir, f"{b.page.replace('/', '_')}-{b.line}.py")
            with open(f, "w") as fh:
                fh.write(map_text("\n".join(chain), tmp, port) + "\n")
            body = f'"$__PY" {f}'
        else:
            body = with_waits(map_text(b.text, tmp, port))
        if b.options["errors"]:
            s += ["set +e", "trap '__errors_shown $?' ERR", body,
                  "trap - ERR", "set -e"]
        else:
            s.append(body)
    s.append("__block end")
    return "\n".join(s) + "\n"


def python_for_blocks():
    py = os.environ.get("CUMOD_TEST_PYTHON") or sys.executable
    r = subprocess.run([py, "-c", "import numpy"], capture_output=True)
    return py if r.returncode == 0 else None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_pages(src, build, pages, errors):
    """Runs every page's marked blocks; returns the skipped ones."""
    tmp = tempfile.mkdtemp(prefix="cumod-docs.", dir="/tmp")
    port = free_port()
    py = python_for_blocks()
    skipped = []
    work = os.path.join(tmp, "work")
    home = os.path.join(tmp, "home")
    pydir = os.path.join(tmp, "py")
    for d in (work, home, pydir, os.path.join(tmp, "k")):
        os.makedirs(d)
    for e in os.listdir(src):
        if e not in ("build", ".git"):
            os.symlink(os.path.join(src, e), os.path.join(work, e))
    os.symlink(build, os.path.join(work, "build"))
    for f in glob.glob(os.path.join(build, "kernels", "out", "*")):
        shutil.copy(f, os.path.join(tmp, "k"))
    shutil.copy(os.path.join(build, "tests", "bad_kernels", "vadd.cubin"),
                os.path.join(tmp, "k", "bad.cubin"))
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("CUMOD_") and k != "CUMOD_TEST_PYTHON":
            del env[k]
    env.update({
        "PATH": f"{build}/daemon:{build}/client:{env.get('PATH', '')}",
        "HOME": home,
        "CUMOD_CUDA_LIBRARY": f"{build}/tests/fakecuda/libfakecuda.so",
        "CUMOD_CUBLAS_LIBRARY": f"{build}/tests/fakecuda/libfakecublas.so",
        "CUMOD_FAKE_FAULT": "poison:cumod_fake_poison",
        "CUMOD_URL": f"ipc://{tmp}/cumodd.sock",
        "CUMOD_LIBRARY": f"{build}/client/libcumod.so.0",
        "PYTHONPATH": os.path.join(src, "client", "python"),
        "__T": tmp, "__PORT": str(port), "__PY": py or "false",
    })
    env.pop("XDG_CACHE_HOME", None)
    env.pop("CACHE_DIRECTORY", None)
    try:
        for rel, blocks in pages:
            if not any(b.marked for b in blocks):
                continue
            script = os.path.join(tmp, rel.replace("/", "_") + ".sh")
            with open(script, "w") as f:
                f.write(page_script(blocks, tmp, port, pydir, py, skipped))
            t0 = time.monotonic()
            p = subprocess.Popen(["bash", script], cwd=work, env=env,
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True,
                                 start_new_session=True)
            try:
                out, _ = p.communicate(timeout=PAGE_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                out, _ = p.communicate()
                errors.append(f"{rel}: its blocks ran past {PAGE_TIMEOUT} s "
                              f"(last: {last_block(out)})\n{tail(out)}")
                continue
            finally:
                try:  # what the page left running (its own cumodd)
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            failed = re.findall(r"^@@docs-failed (.*)$", out, re.M)
            if p.returncode != 0 or failed:
                errors.append(f"{rel}: the block at "
                              f"{failed[0] if failed else last_block(out)} "
                              f"failed; its page's output:\n{tail(out)}")
            else:
                print(f"ok: {rel}: its blocks ran "
                      f"({time.monotonic() - t0:.1f} s)")
                if VERBOSE:
                    print(tail(out, 10000))
    finally:
        pidf = os.path.join(tmp, "fixture.pid")
        if os.path.exists(pidf):
            try:
                os.kill(int(open(pidf).read()), signal.SIGTERM)
                time.sleep(0.5)
            except (ProcessLookupError, ValueError):
                pass
        if os.environ.get("CUMOD_DOCS_KEEP"):
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return skipped


def last_block(out):
    b = re.findall(r"^@@docs-block (.*)$", out, re.M)
    return b[-1] if b else "(none)"


def tail(out, n=40):
    lines = out.rstrip("\n").split("\n")
    return "\n".join("    " + ln for ln in lines[-n:])


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = {a for a in sys.argv[1:] if a.startswith("--")}
    if len(args) != 2:
        print(__doc__.split("\n\n")[-2], file=sys.stderr)
        return 2
    src, build = (os.path.abspath(a) for a in args)
    errors = []
    rels = ["README.md"] + sorted(
        os.path.relpath(p, src) for p in glob.glob(os.path.join(src, "docs",
                                                                "*.md")))
    if len(rels) < 2:
        errors.append("no docs/*.md pages")
    pages, head_cache = [], {}

    def heads_of(path):
        if path not in head_cache:
            head_cache[path] = set(anchors(scan(path, path, [])[1]))
        return head_cache[path]

    for rel in rels:
        blocks, heads = scan(os.path.join(src, rel), rel, errors)
        pages.append((rel, blocks))
        if rel != "README.md":
            check_toc(os.path.join(src, rel), rel, heads, "--fix-toc" in flags,
                      errors)
    # The two set-up commands stay README.md's first block: CI and people
    # run them first.
    first = pages[0][1][0] if pages[0][1] else None
    if first is None or first.lang != "sh" or [
            ln.split()[:2] for ln in first.text.split("\n")] != [
            ["cmake/run", "demo"], ["cmake/run", "test"]]:
        errors.append("README.md: its first block is not the two set-up "
                      "commands, `cmake/run demo` and `cmake/run test`")
    for rel in rels + ["CONTRIBUTING.md", "SECURITY.md"]:
        if os.path.exists(os.path.join(src, rel)):
            check_links(src, rel, errors, heads_of)
    skipped = []
    if "--no-run" not in flags:
        skipped = run_pages(src, build, pages, errors)
    # The count, per page.
    total_run = total_not = 0
    print("command blocks, per page (run: marked `<!-- test: fake ... -->`):")
    for rel, blocks in pages:
        cmd = [b for b in blocks if b.lang in COMMAND_LANGS]
        run = [b for b in cmd if b.marked]
        total_run += len(run)
        total_not += len(cmd) - len(run)
        print(f"  {rel:24} {len(run):3} run, {len(cmd) - len(run):3} not"
              + ("  (not: lines " + ", ".join(str(b.line) for b in cmd
                                              if not b.marked) + ")"
                 if len(cmd) > len(run) else ""))
    print(f"  {'all':24} {total_run:3} run, {total_not:3} not")
    for b, why in skipped:
        print(f"skipped: {b.where()}: needs {why}")
    for e in errors:
        print(f"FAIL: {e}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
