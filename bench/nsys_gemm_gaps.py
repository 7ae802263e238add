#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Where a waited GEMM's time goes, from an nsys trace (bench/notes.md,
"GEMM waited one at a time"): for each process, its GEMM kernels in
order, the gap from one's end to the next one's start, and the launch
call (cuLaunchKernel* of the driver API, as cuBLAS makes it) between
them: from the previous kernel's end to the call (the answer going out,
the next request coming in) and from the call to the kernel's start.
    nsys export --type sqlite -o T.sqlite T.nsys-rep
    python3 bench/nsys_gemm_gaps.py T.sqlite [LAST_N]"""
import sqlite3, statistics, sys

db = sqlite3.connect(sys.argv[1])
last = int(sys.argv[2]) if len(sys.argv) > 2 else 60
names = dict(db.execute("SELECT id, value FROM StringIds"))
k = db.execute("SELECT start, end, globalPid, shortName FROM "
               "CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start").fetchall()
gemm = [r for r in k if "gemm" in names.get(r[3], "").lower()
        or "sm90" in names.get(r[3], "").lower()]
api = []
for tbl in ("CUPTI_ACTIVITY_KIND_DRIVER", "CUPTI_ACTIVITY_KIND_RUNTIME"):
    try:
        api += db.execute(f"SELECT start, end, globalTid, nameId FROM {tbl}").fetchall()
    except sqlite3.Error:
        pass
launch = sorted((s, e, t) for s, e, t, n in api
                if names.get(n, "").startswith("cuLaunchKernel"))
by = {}
for r in gemm:
    by.setdefault(r[2] >> 24, []).append(r)  # globalPid: pid in bits 24+
def q(v):
    v = sorted(v)
    return (f"p50 {statistics.median(v) / 1e3:.1f} us, "
            f"p10 {v[len(v) // 10] / 1e3:.1f}, p90 {v[9 * len(v) // 10] / 1e3:.1f}")
for pid, ks in by.items():
    ks = ks[-last:]
    gaps = [b[0] - a[1] for a, b in zip(ks, ks[1:]) if b[0] - a[1] < 1e6]
    dur = [b[1] - b[0] for b in ks]
    pre, lat = [], []
    for a, b in zip(ks, ks[1:]):
        c = [l for l in launch if a[1] - 5e6 < l[0] < b[0] and (l[2] >> 24) == pid]
        if c:
            pre.append(c[-1][0] - a[1])
            lat.append(b[0] - c[-1][0])
    print(f"process {pid}: {len(ks)} GEMM kernels, each {q(dur)}")
    if gaps:
        print(f"  end to next start: {q(gaps)}")
    if pre:
        print(f"  end to the next launch call: {q(pre)}; call to start: {q(lat)}")
