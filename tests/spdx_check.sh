#!/bin/sh
# SPDX-License-Identifier: MIT
# Every source file git tracks carries its license in an SPDX line within
# its first three lines (LICENSE: MIT). Fails naming those that do not.
top=${1:?usage: spdx_check.sh SOURCE_DIR}
cd "$top" || exit 1
bad=0
n=0
for f in $(git ls-files '*.c' '*.h' '*.cu' '*.proto' '*.py' '*.sh' '*.cmake' \
    '*.bash' 'CMakeLists.txt' '*/CMakeLists.txt' .ci/run cmake/run \
    tests/gpu/device-run tests/gpu/python-example tests/fuzz/run-fuzzer \
    bench/profile-many bench/report bench/timing-summary \
    deploy/debian/postinst deploy/debian/postrm deploy/debian/prerm \
    deploy/container/Containerfile | grep -v '/corpus/'); do
    n=$((n + 1))
    if ! head -3 "$f" | grep -q 'SPDX-License-Identifier: MIT'; then
        echo "no SPDX line: $f"
        bad=1
    fi
done
[ "$bad" = 0 ] && echo "spdx: all $n source files say SPDX-License-Identifier: MIT"
exit $bad
