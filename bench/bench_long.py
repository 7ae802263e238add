#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Waited long work through cumod against the same work in process
(issue 33 point 7: "a waited BF16 4096^3 GEMM >= 97% of in-process").

    python3 bench/bench_long.py [--build DIR] [-n N] [--record FILE]

In one process, each case waited for one at a time, p50 and p99 over N
calls (default 300) taken in blocks of 50 a side, so that the GPU switches
between cumodd's context and this process's once a block, not once a call
(a switch costs both sides ~170 us, bench/notes.md): (i) bench/spin.cu's
kernel spinning 0, 20, 100 and 400 us through a prepared launch against
CuPy's RawModule on the same cubin; (ii) a 4096^3 BF16 GEMM (FP32
accumulation) through c.gemm against torch.matmul. The gap (cumod minus in
process) is what waiting on long work costs besides the GPU's time: the
hops, and each waiter's way from spinning to sleeping.

Starts its own cumodd (DIR/daemon/cumodd on a copy of DIR/kernels/out and
DIR/bench/kernels/spin.cubin). Without CuPy, PyTorch or a GPU, the cases
that need them are left out with the reason; nothing is asserted.
"""
import argparse
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_python  # noqa: E402  (start_daemon, quantiles, say)

say = bench_python.say


def blocks(cases, n, block=50, warm=20):
    """p50, p99 (us) of each case over n waited calls, in blocks a side."""
    for _, fn in cases:
        for _ in range(warm):
            fn()
    got = {name: [] for name, _ in cases}
    clock = time.perf_counter_ns
    for _ in range(max(1, n // block)):
        for name, fn in cases:
            fn()  # the block's first call pays the context switch
            for _ in range(block):
                t0 = clock()
                fn()
                got[name].append((clock() - t0) / 1e3)
    return {name: bench_python.quantiles(ts) for name, ts in got.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(bench_python.ROOT,
                                                    "build"))
    ap.add_argument("-n", type=int, default=300)
    ap.add_argument("--record", help="also write key value lines here")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    os.environ.setdefault("CUMOD_LIBRARY",
                          os.path.join(build, "client", "libcumod.so.0"))
    sys.path.insert(0, os.path.join(bench_python.ROOT, "client", "python"))
    import numpy as np
    import cumod
    try:
        import cupy as cp
        if cp.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("no CUDA device")
    except Exception as e:
        say(f"skipped: CuPy with a GPU is needed to compare ({e!r})")
        return 0
    spin = os.path.join(build, "bench", "kernels", "spin.cubin")
    proc, d, url, log = bench_python.start_daemon(build, None)
    shutil.copy(spin, os.path.join(d, "k", "spin.cubin"))
    rec = []
    try:
        c = None
        for _ in range(200):
            try:
                c = cumod.Client(url, timeout=5)
                c.device()
                break
            except cumod.CumodError:
                time.sleep(0.05)
        for _ in range(100):
            if any(m.name == "spin" for m in c.modules()):
                break
            time.sleep(0.05)
        mod = cp.RawModule(path=spin)
        fn = mod.get_function("spin")
        s = cp.cuda.Stream(non_blocking=True)
        say(f"waited one at a time, p50 / p99 us over {a.n} (blocks of 50 "
            "a side):")
        for us in (0, 20, 100, 400):
            ns = us * 1000
            k = c.prepare("spin:spin", (1, 1, 1), (1, 1, 1), [cumod.u64(ns)])

            def own(ns=ns):
                fn((1,), (1,), (np.uint64(ns),), stream=s)
                s.synchronize()
            # With a deadline the launch goes through the front (the
            # executor serves plain launches only): the front's hops.
            kf = c.prepare("spin:spin", (1, 1, 1), (1, 1, 1), [cumod.u64(ns)],
                           deadline=30)
            r = blocks([("cumod", k), ("front", kf), ("cupy", own)], a.n)
            (cp50, cp99), (op50, op99) = r["cumod"], r["cupy"]
            fp50, fp99 = r["front"]
            say(f"  spin {us:4d} us: cumod {cp50:7.1f} / {cp99:7.1f}; "
                f"through the front {fp50:7.1f} / {fp99:7.1f}; "
                f"CuPy {op50:7.1f} / {op99:7.1f}; gap p50 "
                f"{cp50 - op50:+.1f} us, front {fp50 - op50:+.1f} us")
            rec += [(f"long_spin{us}_cumod_p50_us", cp50),
                    (f"long_spin{us}_front_p50_us", fp50),
                    (f"long_spin{us}_cupy_p50_us", op50)]
        try:
            import torch
            if not torch.cuda.is_available():
                raise RuntimeError("no CUDA device")
        except Exception as e:
            say(f"  GEMM: left out, PyTorch with a GPU is needed ({e!r})")
            torch = None
        if torch is not None:
            n = 4096
            ta = torch.rand(n, n, device="cuda").to(torch.bfloat16)
            tb = torch.rand(n, n, device="cuda").to(torch.bfloat16)
            tc = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
            ha = cumod.to_bf16(ta.float().cpu().numpy())
            hb = cumod.to_bf16(tb.float().cpu().numpy())
            da, db = c.buffer(ha), c.buffer(hb)
            dc = c.alloc(n * n * 2)

            def via_cumod():  # C in BF16, as torch's
                c.gemm(da, db, dc, n, n, n, "bf16", c_dtype="bf16")

            prepared = c.prepare_gemm(da, db, dc, n, n, n, "bf16",
                                      c_dtype="bf16")

            def via_torch():
                torch.matmul(ta, tb, out=tc)
                torch.cuda.synchronize()
            r = blocks([("cumod", via_cumod), ("prepared", prepared),
                        ("torch", via_torch)], a.n)
            (cp50, cp99), (op50, op99) = r["cumod"], r["torch"]
            pp50, pp99 = r["prepared"]
            say(f"  GEMM 4096^3 BF16: c.gemm {cp50:7.1f} / {cp99:7.1f}; "
                f"prepare_gemm {pp50:7.1f} / {pp99:7.1f}; "
                f"torch {op50:7.1f} / {op99:7.1f}; cumod at "
                f"{100 * op50 / cp50:.1f}% / {100 * op50 / pp50:.1f}% (gap "
                f"{cp50 - op50:+.1f} / {pp50 - op50:+.1f} us)")
            rec += [("long_gemm_cumod_p50_us", cp50),
                    ("long_gemm_prepared_p50_us", pp50),
                    ("long_gemm_torch_p50_us", op50)]
        c.close()
    finally:
        proc.terminate()
        proc.wait()
        log.close()
        shutil.rmtree(d, ignore_errors=True)
    for k, v in rec:
        say(f"{k} {v:.2f}")
    if a.record:
        with open(a.record, "w") as f:
            f.writelines(f"{k} {v:.3f}\n" for k, v in rec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
