#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Where the CPU goes while N clients launch, without perf or nsys (the
lent GPU host has neither): a sampler of /proc (bench/notes.md, issue 33
item 7).

    python3 bench/procprof.py BUILD N PER [cumodd arguments...]

Starts BUILD/daemon/cumodd on BUILD/kernels/out and N clients
(`cumod_bench --worker launches`, PER waited empty launches each), started
together; over 1.5 s of the run prints each cumodd thread's user and
system CPU (% of a core) and voluntary / involuntary context switches a
second (the submission threads summed), the clients' together, and 600
samples of each submission thread's state and current system call (202:
futex on x86-64), with the futex words they waited on and the mapping
each lies in (a library's data, the heap, a stack). Then the clients'
mean p50 and rate. Asserts nothing.
"""
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import time
if len(sys.argv) < 4:
    sys.exit(__doc__)
B = sys.argv[1]; N = int(sys.argv[2]); PER = int(sys.argv[3]); extra = sys.argv[4:]
d = tempfile.mkdtemp(); url = f"ipc://{d}/s.sock"
daemon = subprocess.Popen([f"{B}/daemon/cumodd", "--kernels", f"{B}/kernels/out", "--listen", url, "--log-level", "warn"] + extra)
time.sleep(1.5)
def tids(pid):
    try: return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError: return []
def comm(pid, tid):
    try: return open(f"/proc/{pid}/task/{tid}/comm").read().strip()
    except OSError: return "?"
def stat(pid, tid):
    try:
        f = open(f"/proc/{pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()
        st = open(f"/proc/{pid}/task/{tid}/status").read()
        vol = int(st.split("voluntary_ctxt_switches:")[1].split()[0])
        nvol = int(st.split("nonvoluntary_ctxt_switches:")[1].split()[0])
        return (int(f[11]), int(f[12]), vol, nvol, f[0])
    except (OSError, IndexError): return None
def children(pid):
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1]) == pid: out.append(int(p))
            except OSError: pass
    return out
workers = [subprocess.Popen([f"{B}/bench/cumod_bench", "--worker", "launches", url, str(PER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for _ in range(N)]
for w in workers: assert w.stdout.readline().strip() == "ready"
ex = [c for c in children(daemon.pid) if b"--executor" in open(f"/proc/{c}/cmdline","rb").read()]
procs = {"front": daemon.pid}
for i, e in enumerate(ex): procs[f"exec{i}"] = e
def snap():
    s = {}
    for name, pid in procs.items():
        for t in tids(pid):
            v = stat(pid, t)
            if v: s[(name, t, comm(pid, t))] = v
    w = [0,0,0,0]
    for p in workers:
        for t in tids(p.pid):
            v = stat(p.pid, t)
            if v:
                for i in range(4): w[i] += v[i]
    return s, w
for w in workers: w.stdin.write("g"); w.stdin.flush()
time.sleep(0.3)
s0, w0 = snap(); t0 = time.time()
states = collections.Counter(); sysc = collections.Counter()
futexes = collections.Counter()  # (pid, address, op) of futex waits
samples = 0
while time.time() - t0 < 1.5:
    for (name, t, c) in list(s0):
        if not c.startswith("exec-sub"): continue
        try:
            st = open(f"/proc/{procs[name]}/task/{t}/stat").read().rsplit(")",1)[1].split()[0]
            scl = open(f"/proc/{procs[name]}/task/{t}/syscall").read().split()
            sc = scl[0]
        except (OSError, IndexError): continue
        states[st] += 1; sysc[sc] += 1
        if sc == "202" and len(scl) > 2:
            futexes[(procs[name], int(scl[1], 16), int(scl[2], 16))] += 1
    samples += 1
    time.sleep(0.002)
s1, w1 = snap(); dt = time.time() - t0
hz = os.sysconf("SC_CLK_TCK")
print(f"window {dt:.2f} s, {samples} samples")
print("thread                      user%   sys%  vol/s  nonvol/s")
agg = collections.defaultdict(lambda: [0,0,0,0,0])
for k, v1 in s1.items():
    v0 = s0.get(k)
    if not v0: continue
    name, t, c = k
    key = (name, c if not c.startswith("exec-sub") else "exec-sub*")
    a = agg[key]
    for i in range(4): a[i] += v1[i] - v0[i]
    a[4] += 1
for (name, c), a in sorted(agg.items()):
    if a[0] + a[1] + a[2] + a[3] == 0: continue
    print(f"{name:6} {c:18} x{a[4]:<3} {100*a[0]/hz/dt:6.1f} {100*a[1]/hz/dt:6.1f} {a[2]/dt:8.0f} {a[3]/dt:8.0f}")
print(f"workers x{N}: user {100*(w1[0]-w0[0])/hz/dt:.0f}% sys {100*(w1[1]-w0[1])/hz/dt:.0f}% vol/s {(w1[2]-w0[2])/dt:.0f} nonvol/s {(w1[3]-w0[3])/dt:.0f}")
print("exec-sub states:", dict(states)); print("exec-sub syscalls (-1/running=user):", sysc.most_common(8))
def region(pid, addr):
    """The mapping addr lies in: its file, [heap], [stack] or anonymous."""
    try:
        for line in open(f"/proc/{pid}/maps"):
            f = line.split()
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            if lo <= addr < hi:
                return (f[5] if len(f) > 5 else "anonymous") + f" +{addr - lo:#x}"
    except OSError:
        pass
    return "?"
print("exec-sub futex waits by address (samples, op, where):")
for (pid, addr, op), k in futexes.most_common(8):
    print(f"  {k:5d}  op {op & 0x7f:2d}  {region(pid, addr)}")
res = [w.stdout.readline().split() for w in workers]
for w in workers: w.wait()
print("p50 mean us", sum(float(r[3]) for r in res)/len(res), "rate/client mean", sum(int(r[0])/float(r[1]) for r in res)/len(res))
daemon.terminate()
daemon.wait()
shutil.rmtree(d, ignore_errors=True)
