# SPDX-License-Identifier: MIT
"""The suite finds what it tests without variables (conftest.py): a
build tree's daemon, fake driver, kernels and libcumod, or says clearly
why every test is skipped."""
import os

import conftest


def test_the_build_is_found_or_every_test_says_why_it_is_skipped():
    if conftest.SKIP_REASON:
        import pytest
        pytest.skip(conftest.SKIP_REASON)
    for name in conftest.BUILD_FILES:
        path = os.environ.get(name)
        assert path and os.path.exists(path), (name, path)
    import cumod
    assert os.path.samefile(cumod._lib.lib._name,
                            os.environ["CUMOD_LIBRARY"]), \
        "the package loads the libcumod the suite was pointed at"
