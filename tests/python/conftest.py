# SPDX-License-Identifier: MIT
"""cumodd on the fake driver, for the Python tests.

What they run is found in the build: $CUMOD_BUILD_DIR, else build/ at the
top of the repository (`cmake -S . -B build && cmake --build build`);
ctest names each file instead (CUMOD_TEST_CUMODD, CUMOD_TEST_CUMODCTL,
CUMOD_TEST_FAKECUDA, CUMOD_TEST_FAKECUBLAS, CUMOD_TEST_KERNEL_DIR,
CUMOD_LIBRARY), and a variable set wins. Without a build, every test is
skipped saying what is missing (test_setup.py)."""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
BUILD = os.environ.get("CUMOD_BUILD_DIR") or os.path.join(ROOT, "build")

# Each variable's file in a build tree.
BUILD_FILES = {
    "CUMOD_TEST_CUMODD": "daemon/cumodd",
    "CUMOD_TEST_CUMODCTL": "client/cumodctl",
    "CUMOD_TEST_FAKECUDA": "tests/fakecuda/libfakecuda.so",
    "CUMOD_TEST_FAKECUBLAS": "tests/fakecuda/libfakecublas.so",
    "CUMOD_TEST_KERNEL_DIR": "kernels/out",
    "CUMOD_LIBRARY": "client/libcumod.so.0",
}


def _find_build():
    """Sets each variable not set to its file in BUILD; returns what is
    missing, as sentences."""
    missing = []
    for name, rel in BUILD_FILES.items():
        if os.environ.get(name):
            continue
        path = os.path.join(BUILD, rel)
        if os.path.exists(path):
            os.environ[name] = path
        else:
            missing.append(f"{name} is not set and {path} does not exist")
    return missing


MISSING = _find_build()
if MISSING:
    SKIP_REASON = ("no cumod build to test: " + "; ".join(MISSING) +
                   " (build with `cmake -S . -B build && cmake --build "
                   "build`, set CUMOD_BUILD_DIR to a build tree, or run "
                   "ctest -R python_tests)")
else:
    SKIP_REASON = ""
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
if not SKIP_REASON:
    try:
        import cumod  # noqa: F401
    except ImportError as e:
        SKIP_REASON = f"the cumod package does not import: {e}"
# Without what they need, only test_setup.py is collected: it is skipped
# with the reason (not a collection error per file).
collect_ignore_glob = ["test_[!s]*.py"] if SKIP_REASON else []


def env_path(name):
    v = os.environ.get(name)
    if not v:
        pytest.skip(SKIP_REASON or f"{name} is not set")
    return v


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    def __init__(self, kernels=("vadd", "empty", "scale"), args=(), env=None,
                 metrics=False):
        self.dir = tempfile.mkdtemp(prefix="cumod-py.")
        self.kdir = os.path.join(self.dir, "k")
        os.mkdir(self.kdir)
        for k in kernels:
            shutil.copy(os.path.join(env_path("CUMOD_TEST_KERNEL_DIR"),
                                     k + ".cubin"), self.kdir)
        self.url = f"ipc://{self.dir}/cumodd.sock"
        self.port = free_port()
        if metrics:
            args = [*args, "--metrics-listen", f"127.0.0.1:{self.port}"]
        self.hold = os.path.join(self.dir, "hold")
        e = dict(os.environ)
        e["CUMOD_FAKE_HOLD"] = self.hold
        e.update(env or {})
        self.log = open(os.path.join(self.dir, "cumodd.log"), "w+")
        # Never the machine's cuBLAS on the fake driver.
        blas = os.environ.get("CUMOD_TEST_FAKECUBLAS")
        blas_args = ["--cublas-library", blas] if blas else []
        self.proc = subprocess.Popen(
            [env_path("CUMOD_TEST_CUMODD"), "--kernels", self.kdir,
             "--listen", self.url, "--cuda-library",
             env_path("CUMOD_TEST_FAKECUDA"), *blas_args, *args],
            stdout=self.log, stderr=subprocess.STDOUT, env=e)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                break
            if self.ctl("status").returncode == 0:
                return
            time.sleep(0.05)
        raise AssertionError("cumodd did not start:\n" + self.log_text())

    def ctl(self, *args, timeout=30):
        return subprocess.run(
            [env_path("CUMOD_TEST_CUMODCTL"), "--url", self.url, *args],
            capture_output=True, text=True, timeout=timeout)

    def log_text(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def daemon_factory():
    made = []

    def make(**kw):
        d = Daemon(**kw)
        made.append(d)
        return d

    yield make
    for d in made:
        d.stop()


class LaunchLog:
    """The fake driver's log of launches (CUMOD_FAKE_LOG=path in the
    daemon's environment): what each cuLaunchKernel was given, since the
    fake runs no kernel code."""

    def __init__(self, path):
        self.path = path

    def launches(self, fn):
        """Kernel fn's launches: ((grid, block, shmem, stream), the
        parameter bytes in hex) each."""
        out = []
        if not os.path.exists(self.path):
            return out
        with open(self.path) as f:
            for line in f:
                i = line.find("launch fn=" + fn + " ")
                if i < 0:
                    continue
                w = dict(x.split("=", 1) for x in line[i:].split()[1:]
                         if "=" in x)
                out.append(((w["grid"], w["block"], w["shmem"],
                             w["stream"]), w["params"]))
        return out


@pytest.fixture
def launch_log(tmp_path):
    return LaunchLog(str(tmp_path / "fake-launches.log"))


@pytest.fixture
def logged_client(daemon_factory, launch_log):
    """A client whose daemon's fake driver logs every launch (CUMOD_FAKE_LOG:
    each cuLaunchKernel's shape and parameter bytes), as c.log."""
    import cumod
    d = daemon_factory(kernels=("vadd", "empty", "scale", "affine"),
                       env={"CUMOD_FAKE_LOG": launch_log.path})
    with cumod.Client(d.url, timeout=10) as c:
        c.log = launch_log
        yield c
