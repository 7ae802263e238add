# SPDX-License-Identifier: MIT
"""cumodd's Prometheus metrics (--metrics-listen), scraped from a running
daemon on the fake driver and read with prometheus_client's own parser."""
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families


def scrape(port, timeout=5):
    t0 = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                timeout=timeout) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    return text, time.monotonic() - t0


def families(text):
    return {f.name: f for f in text_string_to_metric_families(text)}


def value(fams, family, sample=None, **labels):
    for s in fams[family].samples:
        if (sample is None or s.name == sample) and all(
                s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    raise KeyError(f"{family} {sample} {labels}")


VADD = ["launch", "vadd:vadd", "--grid", "1", "--block", "4",
        "buf:16:f32=1,2,3,4", "buf:16:f32=1,1,1,1", "buf:16:f32", "i32:4"]


def test_a_scrape_parses_and_counts_what_happened(daemon_factory):
    d = daemon_factory(metrics=True)
    for _ in range(3):
        r = d.ctl(*VADD)
        assert r.returncode == 0, r.stderr
    r = d.ctl("launch", "vadd:vadd", "i32:4")  # refused: 1 argument of 4
    assert r.returncode != 0
    with open(os.path.join(d.kdir, "broken.cubin"), "w") as f:
        f.write("not an ELF file\n")
    deadline = time.time() + 10
    while time.time() < deadline:
        fams = families(scrape(d.port)[0])
        try:
            if value(fams, "cumod_module_load_failures", module="broken") >= 1:
                break
        except KeyError:
            pass
        time.sleep(0.1)

    # Names and types as Prometheus wants them.
    for name, f in fams.items():
        assert name.startswith(("cumod_", "process_")), name
        if f.type == "counter":
            assert all(s.name.endswith(("_total", "_created"))
                       for s in f.samples), name
    assert fams["cumod_launches"].type == "counter"
    assert fams["cumod_launch_latency_seconds"].type == "histogram"
    assert fams["cumod_queue_depth"].type == "gauge"

    assert value(fams, "cumod_launches", module="vadd",
                 outcome="completed") == 3
    assert value(fams, "cumod_launches", module="vadd", outcome="failed") == 0
    assert value(fams, "cumod_launches_refused") >= 1
    assert value(fams, "cumod_launch_latency_seconds",
                 "cumod_launch_latency_seconds_count") == 3
    assert value(fams, "cumod_launch_latency_seconds",
                 "cumod_launch_latency_seconds_bucket", le="+Inf") == 3
    assert value(fams, "cumod_launch_latency_seconds",
                 "cumod_launch_latency_seconds_sum") > 0
    # 3 launches: two 16-byte buffers written, one read back each.
    assert value(fams, "cumod_copied_bytes", direction="to_device") == 96
    assert value(fams, "cumod_copied_bytes", direction="to_host") == 48 * 3
    assert value(fams, "cumod_module_loads", module="vadd") == 1
    assert value(fams, "cumod_module_load_failures", module="broken") >= 1
    assert value(fams, "cumod_resident_modules") >= 1
    assert value(fams, "cumod_resident_bytes") > 0
    assert value(fams, "cumod_modules") == 4
    assert value(fams, "cumod_executor_up") == 1
    assert value(fams, "cumod_executor_restarts") == 0
    assert value(fams, "cumod_device_memory_total_bytes") > 0
    assert value(fams, "cumod_device_memory_free_bytes") > 0
    assert value(fams, "cumod_device_memory_age_seconds") >= 0
    assert value(fams, "cumod_session_limit_buffers") == 65536
    assert value(fams, "cumod_session_limit_memory_bytes") == 0
    assert value(fams, "cumod_metrics_render_age_seconds") < 1


def test_per_session_use_and_a_held_kernel_never_hold_a_scrape(daemon_factory):
    d = daemon_factory(metrics=True)
    with open(d.hold, "w") as f:
        f.write("empty\n")  # the fake runs empty until the file goes
    # Two clients: one whose empty launch is held on the "GPU".
    held = subprocess.Popen(
        [os.environ["CUMOD_TEST_CUMODCTL"], "--url", d.url, "launch",
         "empty:empty"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 10
        while time.time() < deadline:
            text, took = scrape(d.port)
            fams = families(text)
            if value(fams, "cumod_queue_depth") >= 1:
                break
            time.sleep(0.05)
        assert took < 1.0, f"a scrape took {took:.2f} s with a kernel held"
        assert value(fams, "cumod_queue_depth") >= 1
        assert value(fams, "cumod_sessions") >= 1
        inflight = [s for s in fams["cumod_session_inflight"].samples
                    if s.value >= 1]
        assert inflight and {"session", "pid", "uid"} <= set(
            inflight[0].labels), inflight
        assert int(inflight[0].labels["pid"]) == held.pid
    finally:
        os.unlink(d.hold)
        held.wait(timeout=30)
    assert held.returncode == 0, held.stderr.read()


def test_off_unless_asked_and_a_bad_address_is_refused(daemon_factory):
    d = daemon_factory()
    with pytest.raises(urllib.error.URLError):
        scrape(d.port, timeout=2)
    r = subprocess.run(
        [os.environ["CUMOD_TEST_CUMODD"], "--kernels", d.kdir, "--listen",
         d.url + "2", "--cuda-library", os.environ["CUMOD_TEST_FAKECUDA"],
         "--metrics-listen", "not-an-address"],
        capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "--metrics-listen not-an-address" in r.stderr, r.stderr


def test_faults_hangs_quarantines_restarts_and_transports(daemon_factory):
    d = daemon_factory(metrics=True,
                       args=["--quarantine-after", "1"],
                       env={"CUMOD_FAKE_FAULT": "launch:scale"})
    # A fault: scale's launch meets CUDA_ERROR_ILLEGAL_ADDRESS.
    r = d.ctl("launch", "scale:scale", "--block", "4", "buf:16",
              "f32:2", "i32:4")
    assert r.returncode != 0 and "ILLEGAL_ADDRESS" in r.stderr, r.stderr
    # A hang: empty held on the "GPU" past a 200 ms deadline.
    deadline = time.time() + 15
    while time.time() < deadline:  # the executor is back first
        if d.ctl("launch", "empty:empty").returncode == 0:
            break
        time.sleep(0.1)
    with open(d.hold, "w") as f:
        f.write("empty\n")
    r = d.ctl("launch", "empty:empty", "--deadline", "200")
    os.unlink(d.hold)
    assert r.returncode != 0 and "deadline" in r.stderr, r.stderr
    deadline = time.time() + 15
    while time.time() < deadline:
        fams = families(scrape(d.port)[0])
        if (value(fams, "cumod_executor_restarts") >= 2 and
                value(fams, "cumod_executor_up") == 1):
            break
        time.sleep(0.1)
    assert value(fams, "cumod_executor_faults") >= 1
    assert value(fams, "cumod_executor_hangs") == 1
    assert value(fams, "cumod_executor_restarts") >= 2
    assert value(fams, "cumod_module_quarantines", module="scale") == 1
    assert value(fams, "cumod_launches", module="scale", outcome="failed") == 1
    # cumodctl's launches come through the fast path; its status over nng.
    assert value(fams, "cumod_requests", transport="ring") >= 1
    assert value(fams, "cumod_requests", transport="nng") >= 1


def wait_for(port, pred, what, timeout=15):
    """The scrape's families once pred holds of them."""
    deadline = time.time() + timeout
    while True:
        fams = families(scrape(port)[0])
        try:
            if pred(fams):
                return fams
        except KeyError:
            pass
        if time.time() > deadline:
            raise AssertionError(f"never {what}")
        time.sleep(0.05)


def client_module():
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    sys.path.insert(0, os.path.join(root, "client", "python"))
    import cumod
    return cumod


def of_module(fams, module):
    """(family, sample) of each series of module."""
    return [(f.name, s) for f in fams.values() for s in f.samples
            if s.labels.get("module") == module]


def series_lines(text):
    return [ln for ln in text.splitlines() if ln and not ln.startswith("#")]


def test_every_series_of_a_device_carries_its_gpu_uuid(daemon_factory):
    """device and gpu_uuid on every series of one device, the UUID as the
    driver says it (cuDeviceGetUuid, "GPU-..." as DCGM's exporter and
    Triton label GPUs), so that an operator can join them."""
    d = daemon_factory(metrics=True, env={"CUMOD_FAKE_DEVICES": "2"},
                       args=["--device", "0,1", "--domains", "uid"])
    cumod = client_module()
    held = []
    for dev in (0, 1):  # a session on each device, with device time
        c = cumod.Client(d.url, timeout=10)
        c.set_device(dev)
        c.launch("empty:empty")
        held.append(c)
    r = d.ctl("status")
    assert r.returncode == 0, r.stderr
    fams = wait_for(d.port, lambda f: len(
        f["cumod_gpu_seconds"].samples) >= 2, "device time on 2 devices")
    uuids = {s.labels["device"]: s.labels["gpu_uuid"]
             for s in fams["cumod_device_info"].samples}
    assert set(uuids) == {"0", "1"}, uuids
    for dev, uuid in uuids.items():
        assert uuid.startswith("GPU-") and len(uuid) == 40, uuid
        assert uuid in r.stdout, (uuid, r.stdout)  # status tells the same
    assert uuids["0"] != uuids["1"]
    with_device = set()
    for f in fams.values():
        for s in f.samples:
            if "device" in s.labels or "gpu_uuid" in s.labels:
                assert s.labels["gpu_uuid"] == uuids[s.labels["device"]], s
                with_device.add(f.name)
    assert {"cumod_gpu_seconds", "cumod_device_info", "cumod_executor_up",
            "cumod_device_memory_total_bytes", "cumod_domain_executor_up",
            "cumod_domain_sessions", "cumod_standby_executors"} <= with_device
    for fam in ("cumod_gpu_seconds", "cumod_session_gpu_seconds"):
        devs = {s.labels["device"] for s in fams[fam].samples}
        assert devs == {"0", "1"}, fams[fam].samples
    for c in held:
        c.close()


def test_build_info_and_process_metrics(daemon_factory):
    t0 = time.time()
    d = daemon_factory(metrics=True)
    fams = families(scrape(d.port)[0])
    version = subprocess.run([os.environ["CUMOD_TEST_CUMODD"], "--version"],
                             capture_output=True, text=True).stdout.split()
    info = fams["cumod_build_info"].samples
    assert len(info) == 1 and info[0].value == 1
    assert info[0].labels["version"] == version[-1], (info, version)
    assert info[0].labels["protocol"] == "1"
    pid = d.proc.pid
    assert value(fams, "process_open_fds") == pytest.approx(
        len(os.listdir(f"/proc/{pid}/fd")), abs=4)
    with open(f"/proc/{pid}/limits") as f:
        soft = [ln.split()[3] for ln in f if ln.startswith("Max open files")]
    assert value(fams, "process_max_fds") == int(soft[0])
    assert value(fams, "process_start_time_seconds") == pytest.approx(
        t0, abs=5)
    with open(f"/proc/{pid}/status") as f:
        st = dict(ln.split(":", 1) for ln in f if ":" in ln)
    rss = int(st["VmRSS"].split()[0]) * 1024
    vsz = int(st["VmSize"].split()[0]) * 1024
    assert value(fams, "process_resident_memory_bytes") == pytest.approx(
        rss, rel=0.5)
    assert value(fams, "process_virtual_memory_bytes") == pytest.approx(
        vsz, rel=0.2)
    cpu = value(fams, "process_cpu_seconds")
    assert fams["process_cpu_seconds"].type == "counter"
    assert 0 <= cpu < time.time() - t0 + 5


def test_a_thousand_sessions_leave_the_series_count_flat(daemon_factory):
    """A long-running daemon's series stay bounded: a session's series go
    with it."""
    cumod = client_module()
    d = daemon_factory(metrics=True)

    def cycle():
        with cumod.Client(d.url, timeout=10) as c:
            b = c.buffer(bytes(16))
            c.launch("empty:empty")
            del b

    for _ in range(5):
        cycle()
    with cumod.Client(d.url, timeout=10) as c:  # a session's series exist
        b = c.buffer(bytes(16))
        fams = wait_for(d.port, lambda f: value(f, "cumod_sessions") == 1,
                        "one session")
        assert value(fams, "cumod_session_buffers") == 1
        assert value(fams, "cumod_session_memory_bytes") == 16
        del b
    wait_for(d.port, lambda f: value(f, "cumod_sessions") == 0, "no session")
    before = series_lines(scrape(d.port)[0])
    for _ in range(1000):
        cycle()
    wait_for(d.port, lambda f: value(f, "cumod_sessions") == 0, "no session")
    text = scrape(d.port)[0]
    after = series_lines(text)
    assert value(families(text), "cumod_launches", module="empty",
                 outcome="completed") >= 1005
    assert len(after) == len(before), (
        sorted(set(after) - set(before)))


def test_a_removed_module_s_series_vanish(daemon_factory):
    d = daemon_factory(metrics=True)
    for k in ("empty:empty", "vadd:vadd"):
        args = VADD[1:] if k == "vadd:vadd" else [k]
        r = d.ctl("launch", *args)
        assert r.returncode == 0, r.stderr

    fams = wait_for(d.port, lambda f: value(
        f, "cumod_gpu_seconds", module="empty", kernel="empty") > 0,
        "device time of empty")
    names = {n for n, _ in of_module(fams, "empty")}
    assert {"cumod_launches", "cumod_gpu_seconds",
            "cumod_module_loads"} <= names, names
    os.unlink(os.path.join(d.kdir, "empty.cubin"))
    fams = wait_for(d.port, lambda f: value(f, "cumod_modules") == 2 and
                    not of_module(f, "empty"), "empty's series gone")
    assert {n for n, _ in of_module(fams, "vadd")} == names  # the others stay


def test_a_launch_completing_after_its_module_s_removal_leaves_no_series(
        daemon_factory):
    d = daemon_factory(metrics=True)
    with open(d.hold, "w") as f:
        f.write("empty\n")  # the fake runs empty until the file goes
    held = subprocess.Popen(
        [os.environ["CUMOD_TEST_CUMODCTL"], "--url", d.url, "launch",
         "empty:empty"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(d.port, lambda f: value(f, "cumod_queue_depth") >= 1,
                 "the launch on the device")
        os.unlink(os.path.join(d.kdir, "empty.cubin"))
        wait_for(d.port, lambda f: not of_module(f, "empty"),
                 "empty's series gone at its removal")
    finally:
        os.unlink(d.hold)
        held.wait(timeout=30)
    assert held.returncode == 0, held.stderr.read()
    # Its completion counted it again; the scrapes drop that once the
    # catalog lets the module go (its generation drained).
    fams = wait_for(d.port, lambda f: value(f, "cumod_modules") == 2 and
                    not of_module(f, "empty"), "empty's series gone")
    assert of_module(fams, "vadd")  # the others stay


def test_refusals_by_reason_and_load_and_compile_histograms(daemon_factory):
    nvrtc = os.path.join(os.path.dirname(os.environ["CUMOD_TEST_FAKECUDA"]),
                         "libfakenvrtc.so")
    d = daemon_factory(metrics=True, args=["--nvrtc-library", nvrtc,
                                           "--compile-cache", "none"])
    assert d.ctl(*VADD).returncode == 0
    assert d.ctl("launch", "vadd:vadd", "i32:4").returncode != 0
    assert d.ctl("launch", "vadd:vadd", "i32:4").returncode != 0
    with open(os.path.join(d.kdir, "bad.cu"), "w") as f:
        f.write("// FAKE_NVRTC_LOG bad.cu(1): error: no\n")
    fams = wait_for(d.port, lambda f: value(
        f, "cumod_compile_seconds", "cumod_compile_seconds_count") >= 1,
        "a compile timed")
    assert value(fams, "cumod_refusals", reason="invalid_argument") == 2
    assert value(fams, "cumod_refusals", reason="connection_access") == 0
    assert value(fams, "cumod_compiles", outcome="failed") >= 1
    for h in ("cumod_compile_seconds", "cumod_module_load_seconds"):
        assert fams[h].type == "histogram"
        n = value(fams, h, h + "_count")
        assert n >= 1
        assert value(fams, h, h + "_bucket", le="+Inf") == n
        assert value(fams, h, h + "_sum") > 0
    assert value(fams, "cumod_module_load_seconds",
                 "cumod_module_load_seconds_count") == value(
        fams, "cumod_module_loads", module="vadd")


def test_connection_and_control_refusals_are_counted(daemon_factory, tmp_path):
    """A TCP peer has no uid: its control request is refused
    (control_access); with --allow-uid, its connection is (connection_
    access)."""
    for allow, reason in ((None, "control_access"),
                          ("65533", "connection_access")):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        conf = tmp_path / f"c{reason}.conf"
        conf.write_text(f"[domain net]\nlisten = tcp://127.0.0.1:{port}\n")
        args = ["--config", str(conf)]
        if allow:
            args += ["--allow-uid", allow]
        d = daemon_factory(metrics=True, args=args)
        r = subprocess.run(
            [os.environ["CUMOD_TEST_CUMODCTL"], "--url",
             f"tcp://127.0.0.1:{port}", "--timeout", "3000",
             "reload", "vadd"], capture_output=True, text=True, timeout=30)
        assert r.returncode != 0
        fams = wait_for(d.port, lambda f: value(
            f, "cumod_refusals", reason=reason) >= 1, f"{reason} counted")
        other = ({"control_access", "connection_access"} - {reason}).pop()
        assert value(fams, "cumod_refusals", reason=other) == 0


def probe(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}",
                                    timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def executor_pid(daemon_pid):
    with open(f"/proc/{daemon_pid}/task/{daemon_pid}/children") as f:
        for pid in f.read().split():
            with open(f"/proc/{pid}/cmdline", "rb") as c:
                if b"--executor" in c.read().split(b"\0"):
                    return int(pid)
    return None


def wait_probe(port, path, want, timeout=15):
    deadline = time.time() + timeout
    while True:
        got = probe(port, path)
        if got[0] == want or time.time() > deadline:
            return got
        time.sleep(0.05)


def test_readyz_waits_for_the_executor_and_the_first_scan(tmp_path):
    """/readyz is 503 until the executor serves and the folder is scanned;
    /healthz the same while the executor is starting."""
    kdir = tmp_path / "k"
    kdir.mkdir()
    shutil.copy(os.path.join(os.environ["CUMOD_TEST_KERNEL_DIR"],
                             "vadd.cubin"), kdir)
    from conftest import free_port
    port = free_port()
    env = dict(os.environ, CUMOD_FAKE_INIT_DELAY_MS="1500")
    p = subprocess.Popen(
        [os.environ["CUMOD_TEST_CUMODD"], "--kernels", str(kdir), "--listen",
         f"ipc://{tmp_path}/s.sock", "--cuda-library",
         os.environ["CUMOD_TEST_FAKECUDA"], "--metrics-listen",
         f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, env=env)
    try:
        early = None
        deadline = time.time() + 10
        while early is None and time.time() < deadline:
            try:
                early = (probe(port, "/readyz"), probe(port, "/healthz"))
            except urllib.error.URLError:
                time.sleep(0.02)
        assert early is not None
        (rc, text), (hc, htext) = early
        assert rc == 503 and "executor is starting" in text, early
        assert hc == 503 and "starting" in htext, early
        code, text = wait_probe(port, "/readyz", 200)
        assert code == 200 and text == "cumodd: ready\n", text
        assert probe(port, "/healthz") == (200, "cumodd: serving\n")
    finally:
        p.terminate()
        p.wait(timeout=30)


def test_healthz_is_503_while_the_executor_is_down_or_stuck(daemon_factory):
    d = daemon_factory(metrics=True, env={"CUMOD_FAKE_INIT_DELAY_MS": "2000"})
    assert wait_probe(d.port, "/healthz", 200) == (200, "cumodd: serving\n")
    assert probe(d.port, "/readyz")[0] == 200
    # Down: the executor killed, and its successor slow to come up.
    pid = executor_pid(d.proc.pid)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    code, text = wait_probe(d.port, "/healthz", 503)
    assert code == 503 and ("executor is restarting" in text or
                            "executor is down" in text), text
    assert probe(d.port, "/readyz")[0] == 503
    assert wait_probe(d.port, "/healthz", 200)[0] == 200
    # Stuck: the executor stops answering its heartbeat.
    pid = executor_pid(d.proc.pid)
    os.kill(pid, signal.SIGSTOP)
    try:
        code, text = wait_probe(d.port, "/healthz", 503)
        assert code == 503 and "executor is stuck" in text, text
    finally:
        os.kill(pid, signal.SIGCONT)
    assert wait_probe(d.port, "/healthz", 200)[0] == 200


def test_the_docs_list_every_metric(daemon_factory):
    """Every family a scrape shows is in docs/metrics.md's table, so the
    table cannot drift from the daemon."""
    nvrtc = os.path.join(os.path.dirname(os.environ["CUMOD_TEST_FAKECUDA"]),
                         "libfakenvrtc.so")
    d = daemon_factory(metrics=True, args=["--nvrtc-library", nvrtc])
    assert d.ctl(*VADD).returncode == 0
    text = scrape(d.port)[0]
    scraped = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    with open(os.path.join(root, "docs", "metrics.md")) as f:
        page = f.read()
    section = page.split("\n## The metrics\n", 1)[1].split("\n## ", 1)[0]
    table = "\n".join(ln for ln in section.splitlines()
                      if ln.startswith("| `"))
    listed = set(re.findall(r"`((?:cumod|process)_[a-z0-9_]+)", table))
    assert len(scraped) > 40
    assert scraped - listed == set(), "not in docs/metrics.md's table"
    assert listed - scraped == set(), "in docs/metrics.md's table, not scraped"


def test_each_session_s_path_is_shown(daemon_factory, monkeypatch):
    """Which path each client is on (issue 22 point 2): a session on its
    ring and one over nng, in the series and in the sums."""
    cumod = client_module()
    d = daemon_factory(metrics=True)
    with cumod.Client(d.url, timeout=10) as ring:
        monkeypatch.setenv("CUMOD_NO_RING", "1")
        with cumod.Client(d.url, timeout=10) as plain:
            monkeypatch.delenv("CUMOD_NO_RING")
            assert ring.fast_path and ring.fast_path_why == ""
            assert not plain.fast_path
            assert "CUMOD_NO_RING" in plain.fast_path_why
            ring.launch("empty:empty")
            plain.launch("empty:empty")
            fams = wait_for(d.port,
                            lambda f: value(f, "cumod_sessions") == 2,
                            "two sessions")
            assert value(fams, "cumod_sessions_by_transport",
                         transport="ring") == 1
            assert value(fams, "cumod_sessions_by_transport",
                         transport="nng") == 1
            paths = sorted(s.value for s in
                           fams["cumod_session_fast_path"].samples)
            assert paths == [0, 1]
