# SPDX-License-Identifier: MIT
"""What the deployment tests (test_container.py, test_kubernetes.py) ask
of cumodd itself: its long options as `cumodd --help` lists them (every
flag is also a key of the configuration file), and whether a set of
flags or a configuration file passes `cumodd --check`."""
import functools
import re
import subprocess
from typing import List, Set, Tuple

import conftest

DEPLOY = f"{conftest.ROOT}/deploy"


@functools.lru_cache(maxsize=None)
def cumodd_help() -> str:
    r = subprocess.run([conftest.env_path("CUMOD_TEST_CUMODD"), "--help"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def long_options() -> Set[str]:
    """Every --option `cumodd --help` names, without the dashes."""
    return set(re.findall(r"^ {2,6}(?:-\w, )?--([a-z][a-z0-9-]*)",
                          cumodd_help(), re.M))


def flags_in(args: List[str]) -> List[str]:
    """The long options of an argument list (--name or --name=value)."""
    return [a[2:].split("=", 1)[0] for a in args if a.startswith("--")]


def cumodd_check(args: List[str]) -> Tuple[int, str]:
    """cumodd ARGS --check: the settings as cumodd reads them."""
    r = subprocess.run([conftest.env_path("CUMOD_TEST_CUMODD"), *args,
                        "--check"], capture_output=True, text=True,
                       timeout=30)
    return r.returncode, r.stdout + r.stderr


def option_value(args: List[str], name: str) -> str:
    """The value of --name in an argument list (the last one given)."""
    value = ""
    for i, a in enumerate(args):
        if a == f"--{name}" and i + 1 < len(args):
            value = args[i + 1]
        elif a.startswith(f"--{name}="):
            value = a.split("=", 1)[1]
    return value
