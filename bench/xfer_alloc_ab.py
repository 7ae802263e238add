#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Where a large Buffer.to_numpy's time goes: the array's memory. Reads a
60 MiB and a 1 GiB buffer into arrays on NumPy's memory (np.empty, which
asks for huge pages), on private anonymous memory of 4 KiB pages, and on
such memory populated at mmap time, beside cupy.asnumpy, alternating:
    python3 bench/xfer_alloc_ab.py URL [ROUNDS]
(bench/notes.md "Transfers of any size" has its figures on the H100.)"""
import mmap, os, sys, time
import numpy as np
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "client", "python"))
import cumod
url, rounds = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3
try:
    import cupy as cp
except Exception:
    cp = None
with cumod.Client(url, timeout=60) as c:
    for mib in (60, 1024):
        n = mib << 20
        host = np.arange(n // 4, dtype=np.float32)
        b = c.buffer(host)
        for r in range(rounds):
            line = [f"{mib} MiB round {r}:"]
            for how in ("numpy", "private", "populate"):
                t0 = time.perf_counter()
                if how == "numpy":
                    out = np.empty(host.shape, host.dtype)
                else:
                    flags = mmap.MAP_PRIVATE | (
                        mmap.MAP_POPULATE if how == "populate" else 0)
                    out = np.frombuffer(mmap.mmap(-1, n, flags=flags),
                                        dtype=host.dtype)
                b.read_into(out)
                g = n / (time.perf_counter() - t0) / 1e9
                ok = bool(out[-1] == host[-1])
                del out
                line.append(f"{how} {g:.2f}{'' if ok else ' WRONG'}")
            if cp is not None:
                d = cp.asarray(host)
                t0 = time.perf_counter()
                x = cp.asnumpy(d)
                line.append(f"cupy {n / (time.perf_counter() - t0) / 1e9:.2f}")
                del x, d
            print("  ".join(line), flush=True)
        b.free()
