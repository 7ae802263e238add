# SPDX-License-Identifier: MIT
"""Client.gemm and Batch.gemm against cumodd on the fake driver and the
fake cuBLAS (tests/fakecuda/libfakecublas.so), which computes small GEMMs
in stream order: each result checked against NumPy, for every type (BF16
as bit patterns, cumod.to_bf16), both orders, transposes, alpha and beta,
strided batches and a GEMM inside a batch; and the errors, naming the
operand."""
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
import cumod  # noqa: E402


@pytest.fixture
def client(daemon_factory):
    d = daemon_factory(kernels=("vadd", "empty"))
    with cumod.Client(d.url, timeout=10) as c:
        c.daemon = d
        yield c


def quarters(rng, shape):
    """Multiples of 1/4 in [-2, 2]: exact in every type."""
    return rng.integers(-8, 9, size=shape).astype(np.float64) / 4


TYPES = [(np.float32, 1e-6), (np.float64, 1e-12), (np.float16, 1e-3),
         ("bf16", 8e-3)]


def as_type(x, dtype):
    return cumod.to_bf16(x) if dtype == "bf16" else x.astype(dtype)


def from_type(raw, dtype, shape):
    if dtype == "bf16":
        return cumod.from_bf16(np.frombuffer(raw, np.uint16)).reshape(shape)
    return np.frombuffer(raw, dtype).reshape(shape).astype(np.float64)


@pytest.mark.parametrize("dtype,tol", TYPES)
@pytest.mark.parametrize("order", ["row", "col"])
def test_every_type_and_order_matches_numpy(client, dtype, tol, order):
    rng = np.random.default_rng(7)
    m, n, k = 5, 6, 7
    for transa in (False, True):
        for transb in (False, True):
            a = quarters(rng, (k, m) if transa else (m, k))
            b = quarters(rng, (n, k) if transb else (k, n))
            c = quarters(rng, (m, n))
            # Column-major storage is the transpose's row-major bytes.
            lay = (lambda x: x) if order == "row" else (lambda x: x.T)
            da = client.buffer(np.ascontiguousarray(lay(as_type(a, dtype))))
            db = client.buffer(np.ascontiguousarray(lay(as_type(b, dtype))))
            dc = client.buffer(np.ascontiguousarray(lay(as_type(c, dtype))))
            client.gemm(da, db, dc, m, n, k, dtype, order=order,
                        transa=transa, transb=transb, alpha=1.5, beta=-0.5)
            want = 1.5 * ((a.T if transa else a) @ (b.T if transb else b)) \
                - 0.5 * c
            raw = dc.to_numpy(np.uint8).tobytes()
            got = from_type(raw, dtype, (m, n) if order == "row" else (n, m))
            got = got if order == "row" else got.T
            scale = 1.5 * (np.abs(a.T if transa else a) @
                           np.abs(b.T if transb else b)) + 0.5 * np.abs(c)
            assert np.all(np.abs(got - want) <= tol * scale + 1e-30), \
                (dtype, order, transa, transb, got, want)


def test_fp32_results_from_fp16_batches_and_tickets(client):
    rng = np.random.default_rng(3)
    batch, m, n, k = 3, 4, 2, 5
    a = quarters(rng, (batch, m, k))
    b = quarters(rng, (k, n))  # one B for the whole batch: stride 0
    da = client.buffer(a.astype(np.float16))
    db = client.buffer(b.astype(np.float16))
    dc = client.alloc(batch * m * n * 4)
    s = client.stream()
    t = client.gemm(da, db, dc, m, n, k, np.float16, c_dtype=np.float32,
                    batch=batch, stride_a=m * k, stride_b=0,
                    stride_c=m * n, stream=s, wait=False)
    assert isinstance(t, cumod.Ticket)
    t.wait()
    got = dc.to_numpy(np.float32).reshape(batch, m, n)
    assert np.array_equal(got, (a @ b).astype(np.float32))


def test_a_gemm_in_a_batch_sees_the_writes_before_it(client):
    m = k = 4
    a = np.eye(m, dtype=np.float64)
    da, db, dc = client.alloc(a.nbytes), client.alloc(a.nbytes), \
        client.alloc(a.nbytes)
    with client.batch() as bt:
        bt.write(da, a).write(db, np.full((k, m), 2.0)) \
            .gemm(da, db, dc, m, m, k, np.float64) \
            .launch("empty:empty")
        bt.submit()
    assert np.array_equal(dc.to_numpy(np.float64).reshape(m, m),
                          np.full((m, m), 2.0))


def test_errors_name_the_operand(client):
    a, b, c = client.alloc(4096), client.alloc(4096), client.alloc(64)
    with pytest.raises(cumod.CumodError) as e:
        client.gemm(a, b, c, 16, 16, 16)
    assert e.value.name == "CUMOD_EINVAL"
    assert e.value.detail.startswith("C: needs 1024 bytes at offset 0")
    with pytest.raises(cumod.CumodError) as e:
        client.gemm(a, b, (c, 2), 2, 2, 2, order="col", ldb=1)
    assert "B: ld 1 < 2 rows" in e.value.detail
    with pytest.raises(cumod.CumodError) as e:
        client.gemm(a, b, c, 2, 2, 2, np.float64, c_dtype=np.float16)
    assert e.value.name == "CUMOD_ENOTSUP"
    with pytest.raises(TypeError):
        client.gemm(a, b, c, 2, 2, 2, np.int32)
    with pytest.raises(ValueError):
        client.gemm(a, b, c, 2, 2, 2, order="diagonal")
    with pytest.raises(ValueError):
        client.gemm(a, b, c, 2, 2, 2, order=["row"])
    with pytest.raises(TypeError):
        client.gemm(a, b, c, True, 2, 2)
    with pytest.raises(TypeError):
        client.gemm(a, b, c, 2, -1, 2)
    with pytest.raises(TypeError):
        client.gemm(a, b, c, 2, 2, 2, [np.float32])  # unhashable: refused
    client.gemm(a, b, c, np.int64(2), np.uint8(2), 2)  # NumPy counts do
    with client.batch() as bt:
        bt.memset(c, 0).gemm(a, b, c, 2, 2, 2, lda=1)
        with pytest.raises(cumod.CumodError) as e:
            bt.submit()
        assert e.value.failed_index == 1
        assert "item 1: A: ld 1 < 2 columns" in e.value.detail


def test_a_prepared_gemm_runs_again_on_new_data_and_is_checked_each_time(
        client):
    """prepare_gemm converts once; each call runs the GEMM on what the
    buffers hold then, waited or by ticket; the daemon still checks every
    call (a freed operand is refused at the next one), and a closed client
    raises Closed."""
    rng = np.random.default_rng(11)
    m, n, k = 6, 5, 4
    a, b = quarters(rng, (m, k)), quarters(rng, (k, n))
    da, db = client.buffer(a.astype(np.float32)), \
        client.buffer(b.astype(np.float32))
    dc = client.alloc(m * n * 4)
    g = client.prepare_gemm(da, db, dc, m, n, k, np.float32, alpha=2.0)
    assert isinstance(g, cumod.PreparedGemm)
    assert g() is None
    want = 2 * a @ b
    assert np.array_equal(dc.to_numpy(np.float32).reshape(m, n), want)
    a2 = quarters(rng, (m, k))
    da.write(a2.astype(np.float32))
    t = g(wait=False)
    assert isinstance(t, cumod.Ticket)
    t.wait()
    assert np.array_equal(dc.to_numpy(np.float32).reshape(m, n), 2 * a2 @ b)
    with pytest.raises(TypeError):
        client.prepare_gemm(da, db, dc, m, n, k, np.int8)
    db.free()
    with pytest.raises(cumod.NotFound) as e:
        g()
    assert "B: buffer" in e.value.detail
    client.close()
    with pytest.raises(cumod.Closed):
        g()


def test_bf16_helpers_round_to_nearest_even():
    x = np.array([1.0, 1.00390625, 1.01171875, -2.5, np.inf], np.float32)
    # 1 + 2^-8 is halfway: to even (1.0); 1 + 3 * 2^-8: up to 1 + 2^-6.
    assert cumod.from_bf16(cumod.to_bf16(x)).tolist() == \
        [1.0, 1.0, 1.015625, -2.5, np.inf]
    assert np.isnan(cumod.from_bf16(cumod.to_bf16(np.float32(np.nan))))
