#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""cumod's Python client against CuPy on the same kernel (issue 21: "p50
<= 1.3x CuPy RawModule in the same run").

    python3 bench/bench_python.py [--build DIR] [--url URL] [-n N]
                                  [--cuda-library LIB] [--cumod-only]
                                  [--record FILE]

In one process: the empty kernel (build/kernels/out/empty.cubin) launched
and waited for, p50 and p99 over N calls (default 20,000, in four rounds
taken in turns), through (i) Client.launch, (ii) a prepared launch
(Client.prepare) and (iii) CuPy's RawModule on the same cubin, synchronized
through its stream and through the device; then unbatched launches
answered when enqueued, one wait at the end (launches/s, best of three):
the prepared launch against CuPy. Prints a table, then every figure as a
"key value" line (--record FILE writes those lines to FILE too).

Starts its own cumodd (DIR/daemon/cumodd on a copy of DIR/kernels/out,
--cuda-library LIB if given) unless --url names one serving empty.cubin.
Without CuPy or a GPU it says why and exits 0, unless --cumod-only: then
only cumod's figures, e.g. on the fake driver:

    python3 bench/bench_python.py --cumod-only \\
        --cuda-library build/tests/fakecuda/libfakecuda.so

Needs NumPy (the cumod package does); nothing is asserted.
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def say(*a):
    print(*a, flush=True)


def quantiles(ts):
    ts = sorted(ts)
    n = len(ts)
    return ts[n // 2], ts[min(n - 1, int(n * 0.99))]


def timed(fn, n, out):
    """n calls of fn, each timed (us), appended to out."""
    clock = time.perf_counter_ns
    for _ in range(n):
        t0 = clock()
        fn()
        out.append((clock() - t0) / 1e3)


def round_trips(cases, n, rounds=4, warm=1000):
    """Each case's p50 and p99 (us) over n calls, in rounds taken in turns
    (what drifts during the run falls on every case alike)."""
    for _, fn in cases:
        for _ in range(warm):
            fn()
    got = {name: [] for name, _ in cases}
    for _ in range(rounds):
        for name, fn in cases:
            timed(fn, n // rounds, got[name])
    return {name: quantiles(ts) for name, ts in got.items()}


def rate(enqueue, finish, n, best_of=3):
    """Launches/s: n calls of enqueue then finish(), best of best_of."""
    best = 0.0
    for _ in range(best_of):
        t0 = time.perf_counter()
        for _ in range(n):
            enqueue()
        finish()
        best = max(best, n / (time.perf_counter() - t0))
    return best


def start_daemon(build, cuda_library):
    cumodd = os.path.join(build, "daemon", "cumodd")
    if not os.access(cumodd, os.X_OK):
        sys.exit(f"bench_python: no {cumodd}: build first (cmake --build "
                 f"{build}) or give --url")
    d = tempfile.mkdtemp(prefix="cumod-bench-py.")
    kdir = os.path.join(d, "k")
    os.mkdir(kdir)
    for f in glob.glob(os.path.join(build, "kernels", "out", "*.cubin")):
        shutil.copy(f, kdir)
    url = f"ipc://{d}/cumodd.sock"
    args = [cumodd, "--kernels", kdir, "--listen", url, "--log-level", "warn"]
    if cuda_library:
        args += ["--cuda-library", cuda_library]
    log = open(os.path.join(d, "cumodd.log"), "w+")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    return proc, d, url, log


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--url", help="a running cumodd (else one is started)")
    ap.add_argument("-n", type=int, default=20000,
                    help="round trips per case (default 20000)")
    ap.add_argument("--async-n", type=int, default=20000,
                    help="launches per round of the async rate")
    ap.add_argument("--cuda-library", help="the started cumodd's libcuda")
    ap.add_argument("--cumod-only", action="store_true",
                    help="measure cumod alone (no CuPy, e.g. fake driver)")
    ap.add_argument("--record", help="also write the key value lines here")
    ap.add_argument("--no-transfers", action="store_true",
                    help="skip the 60 MiB and 1 GiB NumPy round trips")
    a = ap.parse_args()
    build = os.path.abspath(a.build)

    cp = None
    if not a.cumod_only:
        try:
            import cupy as cp
            if cp.cuda.runtime.getDeviceCount() < 1:
                raise RuntimeError("no CUDA device")
        except Exception as e:  # ImportError, or CUDA's own errors
            say(f"skipped: CuPy with a GPU is needed to compare ({e!r}); "
                "--cumod-only measures cumod alone")
            return 0
    cubin = os.path.join(build, "kernels", "out", "empty.cubin")
    if cp is not None and not os.path.exists(cubin):
        sys.exit(f"bench_python: no {cubin}: build first")

    os.environ.setdefault("CUMOD_LIBRARY",
                          os.path.join(build, "client", "libcumod.so.0"))
    if not os.path.exists(os.environ["CUMOD_LIBRARY"]):
        sys.exit(f"bench_python: no {os.environ['CUMOD_LIBRARY']}: build "
                 f"the shared library first (cmake --build {build} --target "
                 "cumod_shared), or set CUMOD_LIBRARY")
    sys.path.insert(0, os.path.join(ROOT, "client", "python"))
    import cumod

    proc = tmp = log = None
    url = a.url
    if url is None:
        proc, tmp, url, log = start_daemon(build, a.cuda_library)
    try:
        c = None
        for _ in range(600):
            try:
                c = cumod.Client(url, timeout=5)
                c.device()
                break
            except cumod.CumodError:
                if proc is not None and proc.poll() is not None:
                    break
                time.sleep(0.05)
        if c is None:
            log and log.seek(0)
            sys.exit("bench_python: cumodd did not answer" +
                     (":\n" + log.read() if log else ""))
        try:
            return measure(a, c, cp, cubin, cumod)
        finally:
            c.close()
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            shutil.rmtree(tmp, ignore_errors=True)


def measure(a, c, cp, cubin, cumod):
    info = c.device()
    say(f"device: {info.name} (driver {info.driver_version}); cumod fast "
        f"path {'on' if c.fast_path else 'OFF'}; {a.n} round trips a case")
    k = c.prepare("empty:empty")
    cases = [("cumod launch", lambda: c.launch("empty:empty")),
             ("cumod prepared", k)]
    if cp is not None:
        f = cp.RawModule(path=cubin).get_function("empty")
        stream = cp.cuda.get_current_stream()
        dev = cp.cuda.Device()

        def cupy_stream():
            f((1,), (1,), ())
            stream.synchronize()

        def cupy_device():
            f((1,), (1,), ())
            dev.synchronize()
        cases += [("cupy, stream sync", cupy_stream),
                  ("cupy, device sync", cupy_device)]
    q = round_trips(cases, a.n)

    rates = {"cumod prepared": rate(lambda: k(wait=False), lambda: k(),
                                    a.async_n),
             "cumod prepared, posted": rate(k.post, lambda: k(), a.async_n),
             "cumod launch": rate(
                 lambda: c.launch("empty:empty", wait=False),
                 lambda: c.launch("empty:empty"), a.async_n)}
    if cp is not None:
        rates["cupy"] = rate(lambda: f((1,), (1,), ()), stream.synchronize,
                             a.async_n)

    say("")
    say(f"{'empty kernel, launched and waited':36s} {'p50 us':>8s} "
        f"{'p99 us':>8s}")
    for name, (p50, p99) in q.items():
        say(f"  {name:34s} {p50:8.1f} {p99:8.1f}")
    say(f"{'unbatched, answered when enqueued':36s} {'per s':>8s}")
    for name, r in rates.items():
        say(f"  {name:34s} {r:8.0f}")

    keys = {"py_launch_p50_us": q["cumod launch"][0],
            "py_launch_p99_us": q["cumod launch"][1],
            "py_prepared_p50_us": q["cumod prepared"][0],
            "py_prepared_p99_us": q["cumod prepared"][1],
            "py_prepared_async_per_s": rates["cumod prepared"],
            "py_posted_async_per_s": rates["cumod prepared, posted"],
            "py_launch_async_per_s": rates["cumod launch"]}
    if cp is not None:
        # The reference is CuPy's faster way to wait (the harder target).
        best = min(q["cupy, stream sync"][0], q["cupy, device sync"][0])
        keys.update({
            "cupy_stream_p50_us": q["cupy, stream sync"][0],
            "cupy_stream_p99_us": q["cupy, stream sync"][1],
            "cupy_device_p50_us": q["cupy, device sync"][0],
            "cupy_device_p99_us": q["cupy, device sync"][1],
            "cupy_async_per_s": rates["cupy"],
            "py_prepared_over_cupy_p50": q["cumod prepared"][0] / best,
            "py_launch_over_cupy_p50": q["cumod launch"][0] / best,
            "py_prepared_async_of_cupy": rates["cumod prepared"] /
            rates["cupy"],
            "py_posted_async_of_cupy": rates["cumod prepared, posted"] /
            rates["cupy"]})
        say(f"prepared launch p50 / CuPy's p50 (the faster wait): "
            f"{keys['py_prepared_over_cupy_p50']:.2f}x (target: 1.3x); "
            f"plain launch {keys['py_launch_over_cupy_p50']:.2f}x")
    if not a.no_transfers:
        transfers(c, cp, keys)
    say("")
    lines = [f"{key} {v:.4g}" for key, v in keys.items()]
    for line in lines:
        say(line)
    if a.record:
        with open(a.record, "w") as out:
            out.write("\n".join(lines) + "\n")
    return 0


def best_gbps(fn, nbytes, rounds):
    """The best rate (GB/s) of rounds calls of fn moving nbytes."""
    best = 0.0
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        best = max(best, nbytes / (time.perf_counter() - t0) / 1e9)
    return best


def transfers(c, cp, keys):
    """Issue 22 point 1: a NumPy array up (Client.buffer: allocation and
    write) and down (Buffer.to_numpy: a new array) through cumod, against
    cupy.asarray / cupy.asnumpy in the same run (target: cumod >= 2x)."""
    import numpy as np
    say(f"{'NumPy round trips':36s} {'up GB/s':>8s} {'down GB/s':>9s}")
    for mib in (60, 1024):
        n = mib << 20
        host = np.arange(n // 4, dtype=np.float32)
        rounds = 3 if mib >= 1024 else 5
        held = []

        def up():
            if held:
                held.pop().free()
            held.append(c.buffer(host))
        cu = best_gbps(up, n, rounds)
        b = held[0]
        got = []
        cd = best_gbps(lambda: got.append(b.to_numpy(np.float32)), n,
                       rounds)
        right = bool(np.array_equal(got[-1], host))
        got.clear()
        b.free()
        keys[f"py_xfer_{mib}m_up_gbps"] = cu
        keys[f"py_xfer_{mib}m_down_gbps"] = cd
        keys[f"py_xfer_{mib}m_right"] = float(right)
        say(f"  cumod {mib:5d} MiB{'':21s} {cu:8.2f} {cd:9.2f}"
            f"{'' if right else '  WRONG BYTES'}")
        if cp is not None:
            dev = []

            def cup():
                dev.clear()
                dev.append(cp.asarray(host))
                cp.cuda.get_current_stream().synchronize()
            pu = best_gbps(cup, n, rounds)
            pd = best_gbps(lambda: cp.asnumpy(dev[0]), n, rounds)
            dev.clear()
            keys[f"cupy_xfer_{mib}m_up_gbps"] = pu
            keys[f"cupy_xfer_{mib}m_down_gbps"] = pd
            keys[f"py_xfer_{mib}m_up_of_cupy"] = cu / pu
            keys[f"py_xfer_{mib}m_down_of_cupy"] = cd / pd
            say(f"  cupy  {mib:5d} MiB{'':21s} {pu:8.2f} {pd:9.2f}   "
                f"cumod/cupy {cu / pu:.2f}x up, {cd / pd:.2f}x down "
                "(target: 2x)")
        del host


if __name__ == "__main__":
    sys.exit(main())
