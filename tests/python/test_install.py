# SPDX-License-Identifier: MIT
"""`pip install ./client/python` gives a package that finds an installed
libcumod by itself (no CUMOD_LIBRARY): libcumod installed into a prefix
of its own (`cmake --install`), found through pkg-config's cumod.pc, the
package installed into a fresh virtual environment offline (no index,
no build isolation: setuptools and NumPy come from this Python's
site-packages through a .pth file), and a session opened with the
daemon. Where mypy is there, a user's script is checked with --strict
against the installed package: its py.typed is honest."""
import os
import site
import subprocess
import sys
import textwrap

import pytest

import conftest

USER_SCRIPT = '''
import asyncio
from typing import List, Tuple

import numpy as np
import cumod


def main(url: str) -> Tuple[int, cumod.Ticket, List[str]]:
    with cumod.Client(url, timeout=10) as c:
        a = np.ones(256, dtype=np.float32)
        with c.buffer(a) as buf:
            back: np.ndarray = buf.to_numpy()
            shape: Tuple[int, ...] = buf.shape
        gen: int = c.launch("empty:empty")
        ticket: cumod.Ticket = c.launch("empty:empty", wait=False)
        done: bool = ticket.done()
        ticket.wait(timeout=1.5)
        g2: int = asyncio.run(c.launch_async("empty:empty"))
        k = c.prepare("empty:empty")
        g3: int = k()
        t3: cumod.Ticket = k(wait=False)
        try:
            c.launch("nosuch:k")
        except cumod.NotFound as e:
            code: int = e.code
            print(e.name, e.detail, code)
        names = [m.name for m in c.modules()]
        out = c.run("vadd:vadd", 1, 256, a, a, a, cumod.i32(256), out=a)
        return gen + g2 + g3 + len(shape) + int(done) + int(back[0]), t3, names
'''

# Each line a type error mypy must find: the types say something.
WRONG_SCRIPT = '''
import cumod
c = cumod.Client()
s: str = c.launch("empty:empty")
t: cumod.Ticket = c.launch("empty:empty")
n: int = c.launch("empty:empty", wait=False)
'''


def _env():
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "CUMOD_LIBRARY", "LD_LIBRARY_PATH",
                        "PYTHONPATH", "PKG_CONFIG_PATH")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def test_pip_install_finds_the_installed_libcumod_without_cumod_library(
        tmp_path, daemon_factory):
    if "san" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("a sanitized libcumod needs its runtime preloaded in "
                    "the new Python too: checked on the plain build")
    try:
        import setuptools
        if tuple(int(x) for x in setuptools.__version__.split(".")[:2]) \
                < (70, 1):
            import wheel  # noqa: F401  (bdist_wheel before setuptools 70.1)
    except ImportError as e:
        pytest.skip(f"an offline build of the package needs setuptools and "
                    f"wheel in this Python ({e})")
    env = _env()
    prefix = tmp_path / "prefix"
    # libcumod and cumod.pc (the client's part of `cmake --install build`)
    r = subprocess.run(["cmake", "--install",
                        os.path.join(conftest.BUILD, "client"), "--prefix",
                        str(prefix)], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    pc = [os.path.join(dp, "cumod.pc") for dp, _, fs in os.walk(prefix)
          if "cumod.pc" in fs]
    assert len(pc) == 1, pc
    env["PKG_CONFIG_PATH"] = os.path.dirname(pc[0])

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True,
                   env=env, timeout=120)
    py = str(venv / "bin" / "python")
    sp = subprocess.run([py, "-c", "import sysconfig; "
                         "print(sysconfig.get_paths()['purelib'])"],
                        capture_output=True, text=True, check=True,
                        env=env).stdout.strip()
    # NumPy, setuptools (and mypy, if there) from this Python: offline.
    with open(os.path.join(sp, "_outer.pth"), "w") as f:
        f.write("\n".join(site.getsitepackages()) + "\n")
    r = subprocess.run([py, "-m", "pip", "install", "-q", "--no-index",
                        "--no-build-isolation",
                        os.path.join(conftest.ROOT, "client", "python")],
                       capture_output=True, text=True, timeout=300, env=env,
                       cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr

    d = daemon_factory(kernels=("empty", "vadd"))
    probe = textwrap.dedent("""
        import sys, cumod
        with cumod.Client(sys.argv[1], timeout=10) as c:
            gen = c.launch("empty:empty")
            print(cumod.__file__)
            print(cumod._lib.lib._name)
            print(gen, c.device().daemon_version)
    """)
    r = subprocess.run([py, "-c", probe, d.url], capture_output=True,
                       text=True, timeout=60, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    where, lib, ran = r.stdout.splitlines()
    assert where.startswith(str(venv)), "the installed package, not the tree"
    assert lib.startswith(str(prefix)), (
        f"libcumod from the install prefix, found through pkg-config: {lib}")
    assert int(ran.split()[0]) >= 1

    # Without pkg-config's help nor the variable: the error says what to do.
    env2 = dict(env)
    del env2["PKG_CONFIG_PATH"]
    r = subprocess.run([py, "-c", "import cumod"], capture_output=True,
                       text=True, timeout=60, env=env2, cwd=str(tmp_path))
    if r.returncode != 0:  # (unless one is installed system-wide)
        assert "CUMOD_LIBRARY" in r.stderr and "PKG_CONFIG_PATH" in r.stderr

    # py.typed honest: a user's script is clean under mypy --strict against
    # the installed package, and a wrong one is caught.
    r = subprocess.run([py, "-c", "import mypy"], capture_output=True,
                       env=env)
    if r.returncode != 0:
        pytest.skip("mypy is not installed (pip install mypy): the user "
                    "script's type check was not run")
    (tmp_path / "user.py").write_text(USER_SCRIPT)
    (tmp_path / "wrong.py").write_text(WRONG_SCRIPT)
    mypy = [py, "-m", "mypy", "--strict", "--no-incremental",
            "--python-executable", py]
    r = subprocess.run(mypy + ["user.py"], capture_output=True, text=True,
                       timeout=300, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run(mypy + ["wrong.py"], capture_output=True, text=True,
                       timeout=300, env=env, cwd=str(tmp_path))
    errs = [line for line in r.stdout.splitlines() if ": error:" in line]
    assert [e.split(":")[1] for e in errs] == ["4", "5", "6"], r.stdout
