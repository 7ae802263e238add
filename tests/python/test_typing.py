# SPDX-License-Identifier: MIT
"""The package itself is clean under mypy --strict (its py.typed says it
is typed; test_install.py checks a user's script against the installed
package)."""
import os
import subprocess
import sys

import pytest

import conftest


def test_the_package_is_clean_under_mypy_strict():
    try:
        import mypy  # noqa: F401
    except ImportError:
        pytest.skip("mypy is not installed (pip install mypy into this "
                    "Python): the package's type check was not run")
    pkg = os.path.join(conftest.ROOT, "client", "python")
    assert os.path.exists(os.path.join(pkg, "cumod", "py.typed"))
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict",
                        "--no-incremental", "-p", "cumod"],
                       capture_output=True, text=True, timeout=300,
                       cwd=pkg, env=dict(os.environ, MYPYPATH=pkg))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success" in r.stdout
