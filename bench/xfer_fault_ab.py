#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""One process of bench/xfer-fault-ab.sh: Buffer.to_numpy of 60 MiB and
1 GiB (ROUNDS each), then cupy.asnumpy of the same, as GB/s on one line.
The variant is in the environment (CUMOD_COPY_THREADS).
    python3 bench/xfer_fault_ab.py URL LABEL [ROUNDS]"""
import os, sys, time
import numpy as np
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "client", "python"))
import cumod
url, label = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
try:
    import cupy as cp
except Exception:
    cp = None
line = [label]
with cumod.Client(url, timeout=60) as c:
    for mib in (60, 1024):
        n = mib << 20
        host = np.arange(n // 4, dtype=np.float32)
        b = c.buffer(host)
        best = 0.0
        for _ in range(rounds):
            t0 = time.perf_counter()
            out = b.to_numpy()
            best = max(best, n / (time.perf_counter() - t0) / 1e9)
            if out[-1] != host[-1] or out[n // 8] != host[n // 8]:
                sys.exit(f"{label}: {mib} MiB came back wrong")
            del out
        line.append(f"{mib}MiB {best:.2f}")
        b.free()
        if cp is not None:
            d = cp.asarray(host)
            best = 0.0
            for _ in range(rounds):
                t0 = time.perf_counter()
                x = cp.asnumpy(d)
                best = max(best, n / (time.perf_counter() - t0) / 1e9)
                del x
            line.append(f"cupy{mib} {best:.2f}")
            del d
print("  ".join(line), flush=True)
