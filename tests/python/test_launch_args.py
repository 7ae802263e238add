"""How Client.launch converts its arguments (packed with struct and handed
to libcumod as bytes, not built as ctypes structs field by field): the
bytes that reach the driver, and the errors, are what they were."""
import os
import struct
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
import cumod  # noqa: E402


@pytest.fixture
def client(logged_client):
    return logged_client


def test_what_a_launch_carries_reaches_the_driver(client):
    x = client.alloc(1024)
    s = client.stream()
    client.launch("scale:scale", grid=(3, 2), block=128, shared_mem=32,
                  stream=s, args=[x.at(8), cumod.f32(2.5), np.int32(-7)])
    client.launch("scale:scale", args=[x, np.float32(1), cumod.i32(2**31 - 1)],
                  wait=False).wait()
    p = struct.pack("<f4xdic3x", 2.0, 1.0, 16, b"a")  # 24 bytes: borrowed
    client.launch("affine:affine", args=[p, x, x])
    (shape, params), (shape2, params2) = client.log.launches("scale")
    assert shape[:3] == ("3,2,1", "128,1,1", "32") and shape[3] != "0x0"
    assert shape2[:3] == ("1,1,1", "1,1,1", "0")
    assert params[16:] == struct.pack("<fi", 2.5, -7).hex()
    assert params2[16:] == struct.pack("<fi", 1.0, 2**31 - 1).hex()
    # x + 8 as the device pointer: 8 more than x's
    base, moved = (int.from_bytes(bytes.fromhex(v[:16]), "little")
                   for v in (params2, params))
    assert moved == base + 8
    assert [v for _, v in client.log.launches("affine")][0][:48] == p.hex()


def test_plain_launch_converts_as_before(client):
    """Out-of-range numbers still reach the daemon as ctypes converted
    them (wrapped), and refusals keep their messages."""
    a = client.alloc(1024)
    with pytest.raises(cumod.CumodError) as e:
        client.launch("empty:empty", grid=-1)
    assert "grid.x = 4294967295" in e.value.detail, e.value.detail
    with pytest.raises(cumod.CumodError) as e:
        client.launch("vadd:vadd", args=[a.at(-8), a, a, cumod.i32(1)])
    assert "offset 18446744073709551608" in e.value.detail, e.value.detail
    with pytest.raises(TypeError):
        client.launch("vadd:vadd", args=[a.at(1.5), a, a, cumod.i32(1)])
    with pytest.raises(TypeError):
        client.launch("empty:empty", grid=2.0)
    with pytest.raises(OverflowError):
        client.launch("vadd:vadd", args=[a, a, a, cumod.i32(2**40)])
    assert client.launch("empty:empty", cluster=1, carveout=50) == 1
    with client.batch() as bt:
        bt.launch("empty:empty", cluster=1).launch("scale:scale",
                                                   args=[a, np.float32(1),
                                                         cumod.i32(1)])
        bt.submit()
    # Kernel names are kept encoded; names made up per call are not kept
    # without bound.
    for i in range(1100):
        with pytest.raises(cumod.CumodError):
            client.launch(f"nosuch{i}:k")
    assert len(cumod._KERNEL_NAMES) <= 1024
