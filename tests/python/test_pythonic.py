# SPDX-License-Identifier: MIT
"""What a Python user expects of cumod (issue 22): buffers that keep an
array's dtype and shape and free themselves in a `with` block, an error
class per cumod error, tickets with done() and wait(timeout=) and asyncio,
timeouts in seconds, docstrings and cumod.__version__, and run() for NumPy
arrays in one call. Against cumodd on the fake driver, which runs no
kernel code: run() is checked for its plumbing (the arrays' bytes through
the daemon's buffers and back, the launch's shape and arguments in the
fake driver's log), not for sums."""
import array
import asyncio
import ctypes
import inspect
import os
import re
import struct
import time
import warnings

import numpy as np
import pytest

import conftest
import cumod


@pytest.fixture
def client(daemon_factory):
    d = daemon_factory(kernels=("vadd", "empty", "scale"))
    with cumod.Client(d.url, timeout=10) as c:
        c.daemon = d
        yield c


# --- b. Buffers --------------------------------------------------------------

def test_a_buffer_keeps_its_arrays_dtype_and_shape(client):
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    b = client.buffer(a)
    assert (b.dtype, b.shape, b.nbytes, b.size) == (np.float32, (4, 6), 96,
                                                    96)
    out = b.to_numpy()
    assert out.dtype == np.float32 and out.shape == (4, 6)
    assert np.array_equal(out, a)
    # Asked otherwise: flat, of the dtype asked.
    assert b.to_numpy(np.uint8).shape == (96,)
    assert np.array_equal(b.to_numpy(np.float32, count=6, offset=24), a[1])
    # Bytes: uint8, as before.
    raw = client.alloc(10)
    assert (raw.dtype, raw.shape, raw.nbytes) == (np.uint8, (10,), 10)
    e = client.empty((3, 2), np.int16)
    assert (e.dtype, e.shape, e.nbytes) == (np.int16, (3, 2), 12)
    like = client.empty_like(a)
    assert (like.dtype, like.shape) == (np.float32, (4, 6))
    assert client.empty_like(like).shape == (4, 6)
    assert "float32" in repr(b) and "(4, 6)" in repr(b)


def test_a_buffer_is_a_context_manager_that_frees_it(client):
    with client.buffer(np.ones(8, np.float64)) as b:
        h = b.handle
        assert b.to_numpy().sum() == 8
    assert b.handle == 0
    # The handle is gone in the daemon too.
    gone = cumod.Buffer(client, h, 64)
    with pytest.raises(cumod.CumodError) as e:
        gone.to_numpy()
    assert e.value.name in ("CUMOD_ENOENT", "CUMOD_EINVAL"), e.value
    # Freed inside the block: leaving it is no error.
    with client.alloc(4) as b2:
        b2.free()


class OnlyArrayInterface:
    """An object that shares memory only through __array_interface__."""

    def __init__(self, arr):
        self._arr = arr
        self.__array_interface__ = arr.__array_interface__


def test_a_buffer_takes_the_buffer_protocol_and_array_interface(client):
    d = array.array("d", [1.5, 2.5, 3.5])
    b = client.buffer(d)
    assert (b.dtype, b.shape) == (np.float64, (3,))
    assert list(b.to_numpy()) == [1.5, 2.5, 3.5]
    assert client.buffer(bytearray(b"abc")).to_numpy().tobytes() == b"abc"
    c_arr = (ctypes.c_int32 * 4)(1, 2, 3, 4)
    cb = client.buffer(c_arr)
    assert cb.nbytes == 16 and list(cb.to_numpy(np.int32)) == [1, 2, 3, 4]
    src = np.arange(6, dtype=np.int64).reshape(2, 3)
    ai = client.buffer(OnlyArrayInterface(src))
    assert (ai.dtype, ai.shape) == (np.int64, (2, 3))
    assert np.array_equal(ai.to_numpy(), src)
    # written from and read into one too
    dst = np.zeros_like(src)
    ai.write(OnlyArrayInterface(src * 2))
    ai.read_into(OnlyArrayInterface(dst))
    assert np.array_equal(dst, src * 2)
    with pytest.raises(TypeError, match="buffer protocol"):
        client.buffer([1, 2, 3])


# --- c. Errors ---------------------------------------------------------------

def test_each_error_has_its_class_and_except_cumoderror_still_catches(
        client):
    with pytest.raises(cumod.NotFound) as e:
        client.launch("nosuch:kernel")
    assert isinstance(e.value, cumod.CumodError)
    assert (e.value.code, e.value.name) == (3, "CUMOD_ENOENT")
    assert e.value.detail and e.value.detail in str(e.value)
    a = client.alloc(16)
    try:  # the old way still works
        client.launch("vadd:vadd", args=[a])
    except cumod.CumodError as err:
        assert type(err) is cumod.InvalidArgument
        assert err.code == cumod.InvalidArgument.errcode == 1
        assert err.name == "CUMOD_EINVAL" and "argument" in err.detail
    else:
        raise AssertionError("a launch with too few arguments ran")
    client.close()
    with pytest.raises(cumod.Closed) as e:
        client.alloc(4)
    assert e.value.name == "CUMOD_ECLOSED"
    # Built from a code (as the package does), a code's class comes out;
    # an unknown code is a plain CumodError.
    assert type(cumod.CumodError(23, "x")) is cumod.Quarantined
    assert type(cumod.CumodError(18, "x")) is cumod.ContextLost
    assert type(cumod.CumodError(24, "x")) is cumod.LimitExceeded
    assert type(cumod.CumodError(999, "x")) is cumod.CumodError
    assert issubclass(cumod.TimedOut, TimeoutError)
    import pickle
    p = pickle.loads(pickle.dumps(cumod.CumodError(6, "slow")))
    assert type(p) is cumod.TimedOut and p.detail == "slow"


# --- d. Tickets and asyncio --------------------------------------------------

def _hold(daemon):
    with open(daemon.hold, "w"):
        pass  # an empty hold file holds all work


def test_a_ticket_says_done_and_waits_with_a_timeout_in_seconds(client):
    t0 = client.launch("empty:empty", wait=False)
    t0.wait()
    assert t0.done()
    _hold(client.daemon)
    try:
        t = client.launch("empty:empty", wait=False)
        assert isinstance(t, cumod.Ticket) and t.generation >= 1
        assert not t.done()
        start = time.monotonic()
        with pytest.raises(cumod.TimedOut) as e:
            t.wait(timeout=0.3)
        took = time.monotonic() - start
        assert 0.25 <= took < 5, took
        assert isinstance(e.value, TimeoutError)
        assert not t.done()
    finally:
        os.unlink(client.daemon.hold)
    t.wait(timeout=10)
    assert t.done()


def test_launch_async_leaves_the_event_loop_running(client):
    _hold(client.daemon)
    ticks = []

    async def ticker(stop):
        while not stop.is_set():
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)

    async def main():
        stop = asyncio.Event()
        tk = asyncio.ensure_future(ticker(stop))
        launched = asyncio.ensure_future(client.launch_async("empty:empty"))
        await asyncio.sleep(0.3)
        held_ticks = len(ticks)
        assert not launched.done(), "the held launch completed"
        os.unlink(client.daemon.hold)
        gen = await asyncio.wait_for(launched, 10)
        # A ticket is awaitable too.
        t = client.launch("empty:empty", wait=False)
        await t
        assert t.done()
        stop.set()
        await tk
        return gen, held_ticks

    gen, held_ticks = asyncio.run(main())
    assert isinstance(gen, int) and gen >= 1
    assert held_ticks >= 5, f"the loop ran {held_ticks} ticks in 0.3 s"


def test_timeouts_are_seconds_and_the_ms_forms_are_deprecated(client):
    url = client.daemon.url
    with pytest.warns(DeprecationWarning, match="timeout_ms"):
        cumod.Client(url, 5000).close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cumod.Client(url, timeout=5).close()
        client.launch("empty:empty", deadline=2.5)
        client.events(timeout=0)
    with pytest.warns(DeprecationWarning, match="deadline_ms"):
        client.launch("empty:empty", deadline_ms=2500)
    with pytest.warns(DeprecationWarning, match="timeout_ms"):
        client.events(timeout_ms=0)
    with pytest.raises(ValueError):
        client.launch("empty:empty", deadline=-1)
    # Every timeout or deadline parameter of the package is in seconds; a
    # *_ms one only as the deprecated twin of one.
    for cls in (cumod.Client, cumod.Buffer, cumod.Batch, cumod.Ticket,
                cumod.Stream, cumod.PreparedLaunch):
        for name, f in inspect.getmembers(cls, inspect.isfunction):
            if name.startswith("_") and (cls, name) != (cumod.Client,
                                                        "__init__"):
                continue  # made by the package (PreparedLaunch's)
            params = inspect.signature(f).parameters
            for p in params:
                if p.endswith("_ms"):
                    assert p[:-3] in params, f"{cls.__name__}.{name}({p})"


# --- e. Documentation and names ----------------------------------------------

def test_every_public_class_and_method_has_a_docstring():
    missing = []
    for n in cumod.__all__:
        o = getattr(cumod, n)
        if (inspect.isclass(o) or inspect.isfunction(o)) and not o.__doc__:
            missing.append(n)
        if not inspect.isclass(o) or issubclass(o, cumod.CumodError):
            continue
        for m, v in vars(o).items():
            if m.startswith("_") and m not in ("__call__", "__await__",
                                               "__enter__", "__exit__"):
                continue
            f = v.fget if isinstance(v, property) else v
            if callable(f) and not getattr(f, "__doc__", None):
                missing.append(f"{n}.{m}")
    assert not missing, missing


def test_version_and_events_now_by_name():
    pyproject = open(os.path.join(conftest.ROOT, "client", "python",
                                  "pyproject.toml")).read()
    assert re.match(r"\d+\.\d+\.\d+", cumod.__version__)
    assert 'attr = "cumod.__version__"' in pyproject
    cmake = open(os.path.join(conftest.ROOT, "CMakeLists.txt")).read()
    assert f"VERSION {cumod.__version__}" in cmake, \
        "the package's version is the project's"
    assert repr(cumod.EVENTS_NOW) == "cumod.EVENTS_NOW"
    assert cumod.EVENTS_NOW == 2**64 - 1


# --- f. run() ----------------------------------------------------------------

def test_run_uploads_launches_and_downloads_the_outputs(logged_client,
                                                       monkeypatch):
    c = logged_client
    n = 1000
    a = np.arange(n, dtype=np.float32)
    b = np.full(n, 2, dtype=np.float32)
    out = np.linspace(0, 1, n, dtype=np.float32)
    expect = out.copy()
    read = []
    real = cumod.Buffer.read_into

    def spy(self, dst, *args, **kw):
        dst[...] = -1  # what comes back must come from the daemon
        read.append(self)
        return real(self, dst, *args, **kw)

    monkeypatch.setattr(cumod.Buffer, "read_into", spy)
    r = c.run("vadd:vadd", (n + 255) // 256, 256, a, b, out, cumod.i32(n),
              out=out)
    assert r is out
    # The fake driver runs no kernel: out holds what was uploaded, read
    # back from its buffer (the spy had spoilt it first).
    assert np.array_equal(out, expect)
    assert len(read) == 1 and read[0].handle == 0, \
        "only out was read back, and its buffer is freed"
    assert np.array_equal(a, np.arange(n, dtype=np.float32))
    (shape, params), = c.log.launches("vadd")
    assert shape[:2] == ("4,1,1", "256,1,1")
    ptrs = [params[i:i + 16] for i in (0, 16, 32)]
    assert len(set(ptrs)) == 3 and "0" * 16 not in ptrs
    assert params[48:56] == struct.pack("<i", n).hex()
    # Several outputs: a tuple back; an out not among the arguments: no.
    x, y = np.ones(4, np.float32), np.zeros(4, np.float32)
    got = c.run("vadd:vadd", 1, 4, x, y, y, cumod.i32(4), out=(x, y))
    assert isinstance(got, tuple) and got[0] is x and got[1] is y
    assert x.sum() == 4 and y.sum() == 0
    with pytest.raises(ValueError, match="arguments"):
        c.run("vadd:vadd", 1, 4, x, y, y, cumod.i32(4), out=np.ones(4))
    # Arrays of any size: 80 MiB (over the daemon's 64 MiB message cap)
    # goes up staged, and comes back right, the fast path kept.
    big = np.arange(20 << 20, dtype=np.float32)
    bout = big[::-1].copy()
    want = bout.copy()
    got = c.run("vadd:vadd", 1, 1, big, big, bout, cumod.i32(1), out=bout)
    assert got is bout and np.array_equal(bout, want)
    assert c.fast_path
