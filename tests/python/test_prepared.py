# SPDX-License-Identifier: MIT
"""Prepared launches (Client.prepare): built once, launched many times with
one foreign call each. On the fake driver kernels compute nothing, so what
a launch carried is read where it arrives: the fake driver's log
(CUMOD_FAKE_LOG) has each cuLaunchKernel's shape and parameter bytes."""
import os
import shutil
import struct
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
import cumod  # noqa: E402


@pytest.fixture
def client(daemon_factory):
    d = daemon_factory(kernels=("vadd", "empty", "scale", "affine"))
    with cumod.Client(d.url, timeout=10) as c:
        c.daemon = d
        yield c


@pytest.fixture
def logged(logged_client):
    return logged_client


def test_a_prepared_launch_carries_what_launch_carries(logged):
    c = logged
    x = c.buffer(np.ones(256, np.float32))
    args = [x, np.float32(2), cumod.i32(256)]
    assert c.launch("scale:scale", grid=2, block=128, args=args) == 1
    k = c.prepare("scale:scale", grid=2, block=128, args=args)
    assert isinstance(k, cumod.PreparedLaunch)
    assert k() == 1  # the generation that ran it, as launch says
    assert k() == 1
    t = k(wait=False)
    assert isinstance(t, cumod.Ticket)
    t.wait()
    got = c.log.launches("scale")
    assert len(got) == 4
    assert got[1] == got[0] and got[2] == got[0] and got[3] == got[0], got
    assert got[0][0][:3] == ("2,1,1", "128,1,1", "0")
    # the float and the int after the 8-byte pointer, as the kernel takes
    assert got[0][1][16:] == struct.pack("<fi", 2.0, 256).hex()
    # no arguments, a stream, dynamic shared memory, a 3-D shape
    s = c.stream()
    e = c.prepare("empty:empty", grid=(2, 3), block=(4, 5, 6), stream=s,
                  shared_mem=64)
    assert e() == 1 and e() == 1
    c.launch("empty:empty", grid=(2, 3), block=(4, 5, 6), stream=s,
             shared_mem=64)
    got = c.log.launches("empty")
    assert got[0] == got[1] == got[2], got
    assert got[0][0][:3] == ("2,3,1", "4,5,6", "64")
    assert "PreparedLaunch('empty:empty', grid=(2, 3, 1)" in repr(e)


def test_set_arg_and_set_shape_change_the_next_launch_in_place(logged):
    c = logged
    x, y = c.alloc(1024), c.alloc(1024)
    k = c.prepare("scale:scale", grid=1, block=256,
                  args=[x, np.float32(2), cumod.i32(256)])
    k()
    k.set_arg(1, cumod.f32(3.5))
    k.set_arg(2, np.int32(7))
    k.set_arg(0, y.at(16))
    k.set_shape(grid=(4, 2), block=32, shared_mem=128)
    k()
    c.launch("scale:scale", grid=(4, 2), block=32, shared_mem=128,
             args=[y.at(16), cumod.f32(3.5), np.int32(7)])
    first, second, plain = c.log.launches("scale")
    assert second == plain, (second, plain)
    assert second[0][:3] == ("4,2,1", "32,1,1", "128")
    assert second[1][16:] == struct.pack("<fi", 3.5, 7).hex()
    assert first[1][:16] != second[1][:16], "the pointer moved to y + 16"
    assert k.args[0] == (y, 16) and k.args[2] == np.int32(7)

    # A struct by value (24 bytes: carried apart from the cumod_arg).
    p1 = struct.pack("<f4xdic3x", 2.0, 1.0, 16, b"a")
    p2 = struct.pack("<f4xdic3x", 4.0, 0.5, 8, b"b")
    a = c.prepare("affine:affine", args=[p1, x, y])
    a()
    a.set_arg(0, bytearray(p2))
    a()
    got = c.log.launches("affine")
    assert [g[1][:48] for g in got] == [p1.hex(), p2.hex()]


def test_bad_arguments_fail_at_prepare_with_launchs_errors(client):
    a = client.alloc(1024)

    def both(exc, kernel, args):
        with pytest.raises(exc) as e1:
            client.launch(kernel, args=args)
        with pytest.raises(exc) as e2:
            client.prepare(kernel, args=args)
        assert str(e1.value) == str(e2.value)
        return str(e2.value)

    # Counted from 1, as the daemon counts: the fourth is "argument 4".
    assert both(TypeError, "vadd:vadd", [a, a, a, 256]).startswith(
        "argument 4: a Python int has no C type: give cumod.i32(256)")
    assert "NumPy float16" in both(TypeError, "vadd:vadd",
                                   [a, a, a, np.float16(1)])
    assert "is not a kernel argument" in both(TypeError, "vadd:vadd",
                                              [a, a, a, "256"])
    assert "no bytes" in both(ValueError, "vadd:vadd", [a, a, a, b""])
    both(OverflowError, "vadd:vadd", [a, a, a, cumod.i32(2**40)])

    # What only the daemon knows (the kernel, its parameters) fails when
    # launched, as launch fails.
    def daemon(kernel, args):
        with pytest.raises(cumod.CumodError) as e1:
            client.launch(kernel, args=args)
        k = client.prepare(kernel, args=args)
        with pytest.raises(cumod.CumodError) as e2:
            k()
        with pytest.raises(cumod.CumodError) as e3:
            k(wait=False)
        assert e1.value.name == e2.value.name == e3.value.name
        assert e1.value.detail == e2.value.detail == e3.value.detail
        return e2.value

    e = daemon("vadd:vadd", [a, a, a])
    assert e.name == "CUMOD_EINVAL" and "argument" in e.detail
    e = daemon("vadd:vadd", [a, a, a, cumod.f64(1.0)])
    assert "8 bytes" in e.detail, e.detail
    assert daemon("nosuch:kernel", []).name == "CUMOD_ENOENT"
    assert daemon("nocolon", []).name == "CUMOD_EINVAL"


def test_set_arg_refuses_what_the_launch_was_not_prepared_with(client):
    a, b = client.alloc(1024), client.alloc(1024)
    k = client.prepare("vadd:vadd", args=[a, a, a, cumod.i32(256)])
    with pytest.raises(TypeError, match=r"cumod\.i32"):
        k.set_arg(3, 5)
    with pytest.raises(TypeError, match="not a kernel argument"):
        k.set_arg(0, "a")
    with pytest.raises(ValueError, match="argument 4: 8 bytes where the "
                       "launch was prepared with 4 bytes"):
        k.set_arg(3, cumod.i64(5))
    with pytest.raises(ValueError, match=r"a buffer \(8 bytes\) where the "
                       "launch was prepared with 4 bytes"):
        k.set_arg(3, b)
    with pytest.raises(ValueError, match="4 bytes where the launch was "
                       "prepared with 8 bytes"):
        k.set_arg(0, cumod.f32(1))
    with pytest.raises(OverflowError):
        k.set_arg(3, cumod.i32(2**40))
    for i in (4, -1, "0", True):
        with pytest.raises(IndexError, match="the launch has 4 arguments, "
                           "indexes 0 to 3"):
            k.set_arg(i, cumod.i32(1))
    # every refusal left the launch as it was
    assert k.args == (a, a, a, cumod.i32(256))
    assert k() == 1
    k.set_arg(2, b)
    assert k() == 1 and k.args[2] is b


def test_a_freed_buffer_and_a_closed_client_fail_the_launch(client):
    a, b = client.alloc(1024), client.alloc(1024)
    k = client.prepare("vadd:vadd", args=[a, a, a, cumod.i32(256)])
    assert k() == 1
    k.set_arg(1, b)
    b.free()
    with pytest.raises(cumod.CumodError) as e:
        k()
    assert e.value.name == "CUMOD_ENOENT"
    assert "argument 2 of vadd: buffer" in e.value.detail, e.value.detail
    k.set_arg(1, a)
    assert k() == 1
    client.close()
    for call in (k, lambda: k(wait=False)):
        with pytest.raises(cumod.CumodError) as e:
            call()
        assert e.value.name == "CUMOD_ECLOSED"
    with pytest.raises(cumod.CumodError) as e:
        client.prepare("empty:empty")
    assert e.value.name == "CUMOD_ECLOSED"


def test_a_prepared_launch_runs_the_modules_current_generation(
        daemon_factory):
    d = daemon_factory(kernels=())
    shutil.copy(os.path.join(os.environ["CUMOD_TEST_KERNEL_DIR"],
                             "scale_ptx.ptx"), d.kdir)
    with cumod.Client(d.url, timeout=10) as c:
        x = c.alloc(1024)
        k = c.prepare("scale_ptx:scale",
                      args=[x, np.float32(2), cumod.i32(256)])
        assert k() == 1
        # New JIT options: a new generation, which the next launch runs
        # (the daemon resolves the generation per launch).
        assert c.load("scale_ptx", jit_opt_level=1).generation == 2
        assert k() == 2
        assert k() == 2
        # Unloaded: the next launch loads it again, a generation anew.
        c.unload("scale_ptx")
        assert k() == 3
        assert [m.generation for m in c.modules()] == [3]
        # Pinned to generation 1, which has gone: refused, saying so.
        old = c.prepare("scale_ptx:scale", generation=1,
                        args=[x, np.float32(2), cumod.i32(256)])
        with pytest.raises(cumod.CumodError) as e:
            old()
        assert e.value.name == "CUMOD_ENOENT", e.value


def test_posted_launches_run_and_a_refused_one_raises_at_its_wait(logged):
    c = logged
    x = c.buffer(np.ones(256, np.float32))
    k = c.prepare("scale:scale", grid=2, block=128,
                  args=[x, np.float32(3), cumod.i32(256)])
    assert k() == 1
    tickets = [k.post() for _ in range(50)]
    assert all(isinstance(t, cumod.Ticket) for t in tickets)
    # each its own ticket, the posted bit set: none waited for cumodd
    assert len({t.value for t in tickets}) == 50
    assert all(t.value & (1 << 61) for t in tickets), tickets[0].value
    for t in reversed(tickets):
        t.wait()
    got = c.log.launches("scale")
    assert len(got) == 51 and all(g == got[0] for g in got), got[-1]
    # A freed buffer: the post returns, its ticket's wait raises why.
    b = c.alloc(1024)
    k.set_arg(0, b)
    b.free()
    t = k.post()
    with pytest.raises(cumod.CumodError) as e:
        t.wait()
    assert e.value.name == "CUMOD_ENOENT", e.value
    assert "argument 1 of scale: buffer" in e.value.detail, e.value.detail
    k.set_arg(0, x)
    k.post().wait()
    c.close()
    with pytest.raises(cumod.CumodError) as e:
        k.post()
    assert e.value.name == "CUMOD_ECLOSED"
