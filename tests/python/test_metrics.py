"""cumodd's Prometheus metrics (--metrics-listen), scraped from a running
daemon on the fake driver and read with prometheus_client's own parser."""
import os
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
        assert name.startswith("cumod_"), name
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
    assert value(fams, "cumod_session_limit", resource="buffers") == 65536
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
