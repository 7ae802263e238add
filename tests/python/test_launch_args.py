# SPDX-License-Identifier: MIT
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


AXPY = "axpy<float>(float, const float*, float*, int)"


def test_typed_scalars_must_match_a_cpp_kernels_signature(daemon_factory):
    """cumod.f32 and kin, NumPy scalars and buffers carry their type: a C++
    kernel's parameter of another type refuses them, naming both types and
    counting arguments from 1; bytes are checked by size only."""
    d = daemon_factory(kernels=("axpy",))
    with cumod.Client(d.url, timeout=10) as c:
        x, y = c.alloc(64), c.alloc(64)

        def refused(args):
            with pytest.raises(cumod.CumodError) as e:
                c.launch("axpy:axpy<float>", block=16, args=args)
            assert e.value.name == "CUMOD_EINVAL"
            return e.value.detail

        good = [cumod.f32(2), x, y, cumod.i32(16)]
        assert c.launch("axpy:axpy<float>", block=16, args=good) == 1
        assert c.launch("axpy:axpy<float>", block=16,
                        args=[np.float32(2), x, y, np.uint32(16)]) == 1
        want = f"argument 4 of {AXPY}: a float (f32) where the kernel takes int"
        assert refused([cumod.f32(2), x, y, cumod.f32(16)]) == want
        assert refused([cumod.f32(2), x, y, np.float32(16)]) == want
        assert refused([x, x, y, cumod.i32(16)]) == (
            f"argument 1 of {AXPY}: a buffer (a device pointer) where the "
            "kernel takes float")
        assert refused([cumod.f32(2), cumod.u64(0), y, cumod.i32(16)]) == (
            f"argument 2 of {AXPY}: an unsigned 64-bit integer (u64) where "
            "the kernel takes const float* (a buffer)")
        # Bytes carry no type: their size is all that is checked.
        assert c.launch("axpy:axpy<float>", block=16,
                        args=[cumod.f32(2), x, y, struct.pack("<f", 16)]) == 1

        # A prepared launch's set_arg carries the new value's type.
        k = c.prepare("axpy:axpy<float>", block=16, args=good)
        k.set_arg(3, cumod.f32(16))
        with pytest.raises(cumod.CumodError) as e:
            k()
        assert e.value.detail == want
        k.set_arg(3, cumod.u32(16))
        assert k() == 1


def test_cumodctl_types_its_values_and_counts_arguments_from_1(
        daemon_factory):
    """cumodctl launch's i32:/f32:... values carry their type; hex: bytes
    do not; its buffers print as "arg N" counted from 1."""
    import json
    d = daemon_factory(kernels=("axpy", "scale"))
    r = d.ctl("launch", "axpy:axpy<float>", "--block", "16", "f32:2",
              "buf:64", "buf:64:f32", "f32:16")
    assert r.returncode == 1, r.stderr
    assert (f"argument 4 of {AXPY}: a float (f32) where the kernel takes "
            "int") in r.stderr, r.stderr
    r = d.ctl("launch", "axpy:axpy<float>", "--block", "16", "f32:2",
              "buf:64", "buf:64:f32", "hex:10000000")
    assert r.returncode == 0, r.stderr
    r = d.ctl("launch", "axpy:axpy<float>", "--block", "16", "f32:2",
              "buf:64", "buf:64:f32", "u32:16")
    assert r.returncode == 0, r.stderr
    assert "arg 2: buffer of 64 bytes, hex:" in r.stdout, r.stdout
    assert "arg 3: buffer of 64 bytes, f32:" in r.stdout, r.stdout
    r = d.ctl("launch", "--json", "scale:scale", "--block", "4",
              "buf:16:f32=1,2,3,4", "f32:2", "i32:4")
    assert r.returncode == 0, r.stderr
    assert [b["arg"] for b in json.loads(r.stdout)["buffers"]] == [1]
