#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""How long adopting an orphaned executor takes, against starting one
(issue 34): runs cumodd with --orphan-grace, kills its front with SIGKILL
(as a crash would), then adopts the executor over its socket as a new
front would (daemon/common/channel.h: cumod_adopt_req, SCM_RIGHTS) and
times the answer and the READY on the new channel. The fresh start's time
is the executor's own, from its log (spawned to "context up"). Prints
figures; asserts nothing.

  bench/adopt_probe.py CUMODD KERNEL_DIR [--cuda-library PATH] [ROUNDS]
"""
import os, re, signal, socket, struct, subprocess, sys, tempfile, time

MAGIC, VERSION = 0x74706F64, 1
REPLY = struct.Struct("<IIiiiI240s")


def stamp(line):
    m = re.match(r"(\d+)-(\d+)-(\d+)T(\d+):(\d+):([\d.]+)Z", line)
    h, mi, s = int(m.group(4)), int(m.group(5)), float(m.group(6))
    return (h * 3600 + mi * 60 + s) * 1000.0


def one(cumodd, kdir, extra):
    d = tempfile.mkdtemp(prefix="cumod-adopt-")
    log = open(os.path.join(d, "log"), "w+")
    front = subprocess.Popen([cumodd, "--kernels", kdir, "--listen",
                              "ipc://%s/c.sock" % d, "--orphan-grace", "20",
                              "--log-level", "info"] + extra,
                             stdout=log, stderr=log)
    ready = None
    for _ in range(3000):
        text = open(log.name).read()
        if "CUMOD-READY" in text:
            ready = text
            break
        time.sleep(0.005)
    spawn = [l for l in ready.splitlines() if "CUMOD-EXEC-SPAWN" in l][0]
    up = [l for l in ready.splitlines() if "CUMOD-EXEC-READY" in l][0]
    fresh_ms = stamp(up) - stamp(spawn)
    pid = int(re.search(r"pid (\d+)", spawn).group(1))
    front.send_signal(signal.SIGKILL)
    front.wait()
    path = os.path.join(d, "exec-%d.sock" % pid)
    for _ in range(2000):
        if os.path.exists(path):
            break
        time.sleep(0.001)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    t0 = time.perf_counter()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(path)
    socket.send_fds(s, [struct.pack("<IIiI", MAGIC, VERSION, os.getpid(), 0)],
                    [theirs.fileno()])
    msg, fds, _, _ = socket.recv_fds(s, REPLY.size, 1)
    t1 = time.perf_counter()
    status = REPLY.unpack(msg)[2]
    hdr = ours.recv(65536)  # READY: op 1 in the channel header
    t2 = time.perf_counter()
    op = struct.unpack_from("<I", hdr)[0]
    for f in fds:
        os.close(f)
    # cumod_chan_hdr: op, status, seq, flags, pad, len; CUMOD_CHAN_STOP
    ours.send(struct.pack("<IiQIIQ", 31, 0, 0, 0, 0, 0))
    ours.close()
    s.close()
    time.sleep(0.3)
    return fresh_ms, (t1 - t0) * 1e3, (t2 - t0) * 1e3, status, op, len(fds)


def main():
    cumodd, kdir = sys.argv[1], sys.argv[2]
    extra, rounds = [], 3
    rest = sys.argv[3:]
    if rest[:1] == ["--cuda-library"]:
        extra, rest = rest[:2], rest[2:]
    if rest:
        rounds = int(rest[0])
    for r in range(rounds):
        fresh, ans, rdy, st, op, nfd = one(cumodd, kdir, extra)
        print("round %d: a new executor's context up %.1f ms; adoption "
              "answered %.2f ms, READY on the new channel %.2f ms (status %d, "
              "op %d, ledger %s)" % (r + 1, fresh, ans, rdy, st, op,
                                     "passed" if nfd else "none"))
        sys.stdout.flush()


main()
