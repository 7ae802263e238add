# SPDX-License-Identifier: MIT
"""The Python client (client/python) against cumodd on the fake driver:
every call, its errors, and that the package installs into a fresh
virtual environment. The fake driver runs no kernel code; the numbers of
a vector add are checked on the GPU (tests/gpu/device-run runs the
Python examples of docs/python.md)."""
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
import cumod  # noqa: E402


@pytest.fixture
def client(daemon_factory):
    d = daemon_factory(kernels=("vadd", "empty", "scale", "table"))
    with cumod.Client(d.url, timeout=10) as c:
        c.daemon = d
        yield c


def test_a_client_is_a_context_manager_and_knows_its_daemon(client):
    info = client.device()
    assert info.name and info.total_memory > 0 and info.modules == 4
    assert info.executor_state == "serving"
    assert client.fast_path
    c2 = cumod.Client(client.daemon.url)
    with c2:
        assert c2.device().daemon_version == info.daemon_version
    with pytest.raises(cumod.CumodError) as e:
        c2.device()
    assert e.value.name == "CUMOD_ECLOSED"


def test_buffers_from_and_into_numpy_and_any_buffer(client):
    x = np.arange(16, dtype=np.float32)
    b = client.buffer(x)
    assert b.size == 64
    assert np.array_equal(b.to_numpy(np.float32), x)
    b.write(np.float32([100, 101]), offset=8)
    assert b.to_numpy(np.float32, count=4).tolist() == [0, 1, 100, 101]
    raw = bytearray(8)
    b.read_into(raw, offset=8)
    assert struct.unpack("<2f", raw) == (100.0, 101.0)
    b.write(b"\x01\x02\x03\x04")  # bytes: the buffer protocol
    assert b.to_numpy(np.uint8, count=4).tolist() == [1, 2, 3, 4]
    b.fill(0xff, offset=0, length=4)
    # byte 4 is the first of 1.0f (00 00 80 3f)
    assert b.to_numpy(np.uint8, count=5).tolist() == [255] * 4 + [0]
    strided = np.arange(8, dtype=np.int32)[::2]  # not contiguous: copied
    b.write(strided)
    assert b.to_numpy(np.int32, count=4).tolist() == [0, 2, 4, 6]
    with pytest.raises(cumod.CumodError) as e:
        b.write(np.zeros(100, np.float32))  # past its end
    assert e.value.name == "CUMOD_EINVAL" and "64" in e.value.detail
    b.free()
    with pytest.raises(cumod.CumodError) as e:
        client.alloc(1).to_numpy(np.uint8, count=2)
    assert e.value.code == 1  # CUMOD_EINVAL: 2 bytes from a 1-byte buffer


def test_any_size_goes_up_and_comes_back_on_the_fast_path(client):
    """Issue 22 point 1: 80 MiB (over the daemon's 64 MiB message cap) and
    an odd size, through buffer(), write, read_into and to_numpy; the
    client stays on its ring."""
    assert client.fast_path
    a = np.arange(20 << 20, dtype=np.float32)
    b = client.buffer(a)
    got = b.to_numpy()
    assert got.dtype == a.dtype and got.shape == a.shape
    assert np.array_equal(got, a)
    odd = np.frombuffer(os.urandom((3 << 20) + 7), dtype=np.uint8)
    b.write(odd, offset=5)
    back = np.empty_like(odd)
    b.read_into(back, offset=5)
    assert np.array_equal(back, odd)
    assert client.fast_path, client.fast_path_why
    assert client.fast_path_why == ""
    b.free()


def test_launches_with_typed_arguments_and_their_errors(client):
    a = client.buffer(np.ones(256, np.float32))
    b = client.buffer(np.ones(256, np.float32))
    out = client.alloc(a.size)
    gen = client.launch("vadd:vadd", grid=1, block=256,
                        args=[a, b, out, cumod.i32(256)])
    assert gen == 1
    t = client.launch("vadd:vadd", grid=(1, 1, 1), block=(256, 1, 1),
                      args=[a, b.at(0), out, np.int32(256)], wait=False)
    assert isinstance(t, cumod.Ticket)
    t.wait()
    client.launch("scale:scale", grid=1, block=256,
                  args=[out, np.float32(2), cumod.i32(256)])
    with pytest.raises(TypeError, match=r"cumod\.i32"):
        client.launch("vadd:vadd", args=[a, b, out, 256])
    with pytest.raises(cumod.CumodError) as e:
        client.launch("vadd:vadd", args=[a, b, out])
    assert e.value.name == "CUMOD_EINVAL" and "argument" in e.value.detail
    with pytest.raises(cumod.CumodError) as e:
        client.launch("vadd:vadd", args=[a, b, out, cumod.f64(1.0)])
    assert "8 bytes" in e.value.detail, e.value.detail
    with pytest.raises(cumod.CumodError) as e:
        client.launch("nosuch:kernel")
    assert e.value.name == "CUMOD_ENOENT", e.value


def test_streams_tickets_and_batches(client):
    a = client.buffer(np.zeros(64, np.float32))
    s = client.stream()
    t = client.launch("empty:empty", stream=s, wait=False)
    t.wait()
    a.fill(0, stream=s, wait=False).wait()
    s.synchronize()
    s.destroy()
    with client.batch() as bt:
        bt.write(a, np.float32([7, 8]))
        bt.memset(a, 0, offset=8, length=8)
        for _ in range(10):
            bt.launch("empty:empty")
        assert len(bt) == 12
        bt.submit()
        tk = bt.submit(wait=False)
        tk.wait()
    assert a.to_numpy(np.float32, count=3).tolist() == [7, 8, 0]
    with client.batch() as bt:
        bt.launch("empty:empty").launch("vadd:vadd", args=[a])
        with pytest.raises(cumod.CumodError) as e:
            bt.submit()
        assert e.value.failed_index == 1 and "item 1" in e.value.detail


def test_modules_globals_and_events(client):
    names = {m.name for m in client.modules()}
    assert names == {"vadd", "empty", "scale", "table"}
    m = client.load("vadd")
    assert m.state == "resident" and m.generation == 1 and m.kernels == ["vadd"]
    assert client.pin("vadd").pinned
    assert not client.unpin("vadd").pinned
    assert client.reload("vadd").name == "vadd"
    assert client.unload("vadd").state in ("available", "resident")
    assert "not quarantined" in client.unquarantine("vadd").note
    with pytest.raises(cumod.CumodError) as e:
        client.load("nosuch")
    assert e.value.name == "CUMOD_ENOENT" and "nosuch" in e.value.detail
    client.write_global("table", "scale", np.float32([2.5]))
    got = client.read_global("table", "scale", np.zeros(1, np.float32))
    assert got[0] == 2.5
    events, after, missed = client.events(after=0)
    kinds = [(e.kind, e.module) for e in events]
    assert ("loaded", "vadd") in kinds and ("catalogued", "table") in kinds
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert after == events[-1].seq and missed == 0
    client.set_carveout("vadd:vadd", 50)
    client.set_carveout("vadd:vadd", None)


def test_a_load_with_jit_options_makes_a_generation_built_with_them(
        daemon_factory):
    d = daemon_factory(kernels=())
    shutil.copy(os.path.join(os.environ["CUMOD_TEST_KERNEL_DIR"],
                             "scale_ptx.ptx"), d.kdir)
    with cumod.Client(d.url, timeout=10) as c:
        m = c.load("scale_ptx")
        assert m.loaded_kind == "ptx" and m.jit_options.startswith("none")
        m = c.load("scale_ptx", jit_opt_level=1, jit_max_registers=32)
        assert m.generation == 2
        assert m.jit_options == ("opt-level 1 (cumodctl load), "
                                 "max-registers 32 (cumodctl load)")
        m = c.load("scale_ptx", jit_max_registers=-1)
        assert m.generation == 3
        assert m.jit_options == "opt-level 1 (cumodctl load)"
        with pytest.raises(cumod.CumodError) as e:
            c.load("scale_ptx", jit_opt_level=7)
        assert e.value.name == "CUMOD_EINVAL"
        assert "jit.opt_level: 7 is not from 0 to 4" in e.value.detail


def test_the_package_installs_into_a_fresh_virtual_environment(tmp_path):
    if os.environ.get("CUMOD_TEST_OFFLINE") == "1":
        pytest.skip("CUMOD_TEST_OFFLINE=1: no package index to install from")
    venv = tmp_path / "venv"
    # pip and the new Python run without a sanitizer runtime preloaded.
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True,
                   env=env)
    py = str(venv / "bin" / "python")
    r = subprocess.run([py, "-m", "pip", "install", "-q",
                        "--disable-pip-version-check",
                        os.path.join(ROOT, "client", "python")],
                       capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run(
        [py, "-c", "import cumod, sys; print(cumod.Client.__doc__ and "
         "cumod.__file__)"], capture_output=True, text=True,
        cwd=str(tmp_path), env=dict(os.environ, PYTHONPATH=""))
    # (with the sanitized library, the runtime it needs stays preloaded)
    assert r.returncode == 0, r.stderr
    assert str(venv) in r.stdout, r.stdout


def test_a_device_is_chosen_by_argument_or_environment(client, monkeypatch):
    """Choosing a device (libcumod's SetDevice): what needs no daemon
    support. A cumodd of several devices answering it is the daemon's
    suite's (domains)."""
    import inspect
    p = inspect.signature(cumod.Client).parameters["device"]
    assert p.default is None and p.kind == p.POSITIONAL_OR_KEYWORD
    assert client.device_ordinal == 0, "Hello's device before any choice"
    assert isinstance(cumod.Client.device_ordinal, property)
    for bad in (-1, 2**31):
        with pytest.raises(cumod.CumodError) as e:
            client.set_device(bad)
        assert e.value.name == "CUMOD_EINVAL", e.value
    for bad in ("1", 1.0, True):
        with pytest.raises(TypeError):
            client.set_device(bad)
        with pytest.raises(TypeError):
            cumod.Client(client.daemon.url, device=bad)
    monkeypatch.setenv("CUMOD_DEVICE", "one")
    with pytest.raises(cumod.CumodError) as e:
        cumod.Client(client.daemon.url)
    assert e.value.name == "CUMOD_EINVAL" and "CUMOD_DEVICE" in e.value.detail
    monkeypatch.setenv("CUMOD_DEVICE", "")
    with cumod.Client(client.daemon.url) as c2:
        assert c2.device_ordinal == 0


CLOSE_RACE = r'''
import sys, threading, time
sys.path.insert(0, sys.argv[3])
import cumod
url, rounds = sys.argv[1], int(sys.argv[2])
ended = {}
for r in range(rounds):
    c = cumod.Client(url, timeout=10)
    started = threading.Barrier(5)

    def work(i):
        k = c.prepare("empty:empty", 1, 32)
        started.wait()
        try:
            while True:
                if i % 2:
                    k()
                else:
                    c.launch("empty:empty", 1, 32)
        except cumod.CumodError as e:
            name = type(e).__name__
            ended[name] = ended.get(name, 0) + 1
    ths = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ths:
        t.start()
    started.wait()
    time.sleep(0.001 * (r % 5))
    c.close()
    for t in ths:
        t.join()
print(sorted(ended.items()))
'''


@pytest.mark.parametrize("ring", [True, False], ids=["ring", "nng"])
def test_close_under_threads_still_launching_raises_closed_in_each(
        daemon_factory, ring):
    """Client.close while other threads launch (plain and prepared): each
    thread's next call raises Closed; the process neither crashes (it
    aborted in nng, a use after free, before cumod_shutdown) nor hangs."""
    d = daemon_factory(kernels=("empty",))
    env = dict(os.environ)
    if not ring:
        env["CUMOD_NO_RING"] = "1"
    p = subprocess.run(
        [sys.executable, "-c", CLOSE_RACE, d.url, "20",
         os.path.join(ROOT, "client", "python")],
        capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.strip() == "[('Closed', 80)]", p.stdout + p.stderr
