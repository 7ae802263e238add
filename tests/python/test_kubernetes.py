# SPDX-License-Identifier: MIT
"""deploy/kubernetes (issue 24, point 4), read as a cluster would without
one: every manifest parses (PyYAML); kustomization.yaml lists them (the
client pod aside, an example) and `kubectl kustomize` builds it where
kubectl is installed; the DaemonSet's cumodd flags are options of
`cumodd --help`, its configuration file's keys too, and both pass
`cumodd --check`; the kernel ConfigMap is mounted where --kernels points,
as a whole volume (a subPath never sees an update), and holds module
files cumodd takes; the socket and /dev/shm are the node's, shared with
the client pod, whose CUMOD_URL is the --listen URL and whose groups
open the socket; Prometheus' annotations and the probes name the metrics
listener's port, /metrics, /healthz and /readyz; the GPU comes from the
device plugin's resource on GPU nodes."""
import configparser
import os
import re
import shutil
import subprocess
from typing import Any, Dict, List

import pytest

import conftest
import deploy_common

yaml = pytest.importorskip(
    "yaml", reason="PyYAML is not installed in this Python (cmake/run "
                   "test's environment has it; pip install pyyaml)")

K8S = os.path.join(deploy_common.DEPLOY, "kubernetes")


def manifests() -> Dict[str, List[Dict[str, Any]]]:
    out = {}
    for f in sorted(os.listdir(K8S)):
        if f.endswith((".yaml", ".yml")):
            with open(os.path.join(K8S, f)) as fh:
                out[f] = [d for d in yaml.safe_load_all(fh) if d]
    return out


def one(kind: str, name: str = "") -> Dict[str, Any]:
    found = [d for docs in manifests().values() for d in docs
             if d.get("kind") == kind and
             (not name or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"{len(found)} {kind} {name}"
    return found[0]


def cumodd_container() -> Dict[str, Any]:
    ds = one("DaemonSet")
    cs = [c for c in ds["spec"]["template"]["spec"]["containers"]
          if c.get("command", [""])[0].endswith("/cumodd")]
    assert len(cs) == 1, "no container runs cumodd (command: [cumodd])"
    return cs[0]


def volume(pod_spec: Dict[str, Any], name: str) -> Dict[str, Any]:
    vs = [v for v in pod_spec.get("volumes", []) if v["name"] == name]
    assert len(vs) == 1, f"no volume {name}"
    return vs[0]


def mount_at(pod_spec: Dict[str, Any], container: Dict[str, Any],
             path: str) -> Dict[str, Any]:
    """The volume mounted at path in the container (its mount's fields
    too, under 'mount')."""
    ms = [m for m in container.get("volumeMounts", [])
          if m["mountPath"].rstrip("/") == path.rstrip("/")]
    assert len(ms) == 1, f"nothing is mounted at {path}"
    return dict(volume(pod_spec, ms[0]["name"]), mount=ms[0])


def conf_text() -> str:
    cfg = one("ConfigMap", "cumodd-config")
    return str(cfg["data"]["cumodd.conf"])


def test_every_manifest_parses_and_kustomize_lists_them():
    ms = manifests()
    assert "kustomization.yaml" in ms
    for f, docs in ms.items():
        assert docs, f"{f} is empty"
        for d in docs:
            assert d.get("apiVersion") and d.get("kind"), f
            if d["kind"] != "Kustomization":
                assert d["metadata"].get("name"), f
    kz = ms["kustomization.yaml"][0]
    listed = set(kz["resources"])
    for r in listed:
        assert os.path.exists(os.path.join(K8S, r)), f"{r} is listed, " \
                                                     f"not there"
    rest = set(ms) - listed - {"kustomization.yaml"}
    assert rest == {"client-pod.yaml"}, f"not in kustomization.yaml: {rest}"
    # The image's tag is the project's version.
    v = re.search(r"project\(cumod VERSION ([0-9.]+)",
                  open(os.path.join(conftest.ROOT, "CMakeLists.txt")).read())
    assert v
    for img in kz.get("images", []):
        assert img["newTag"] == v.group(1), img
    for c in one("DaemonSet")["spec"]["template"]["spec"]["containers"]:
        assert c["image"].endswith(f":{v.group(1)}"), c["image"]


def test_kubectl_kustomize_builds_it():
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed: kustomize's build not run")
    r = subprocess.run(["kubectl", "kustomize", K8S], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    kinds = sorted(d["kind"] for d in yaml.safe_load_all(r.stdout) if d)
    assert kinds == ["ConfigMap", "ConfigMap", "DaemonSet", "Namespace"]


def test_cumodd_flags_and_config_keys_are_its_own():
    known = deploy_common.long_options()
    args = cumodd_container()["args"]
    for flag in deploy_common.flags_in(args):
        assert flag in known, f"--{flag} is not an option of cumodd --help"
    parser = configparser.ConfigParser(inline_comment_prefixes=("#", ";"))
    parser.read_string(conf_text())
    keys = list(parser["cumodd"])
    assert keys
    for k in keys:
        assert k in known, f"{k} (cumodd.conf) is not an option of " \
                           f"cumodd --help"
    # The flags and the file as cumodd reads them, with the file and the
    # kernel folder where the pod has them replaced by copies here.
    tmp = os.path.join(os.environ.get("TMPDIR", "/tmp"),
                       f"cumod-k8s-{os.getpid()}")
    os.makedirs(tmp, exist_ok=True)
    try:
        with open(os.path.join(tmp, "cumodd.conf"), "w") as f:
            f.write(conf_text())
        a = list(args)
        a[a.index("--config") + 1] = os.path.join(tmp, "cumodd.conf")
        a[a.index("--kernels") + 1] = tmp
        rc, out = deploy_common.cumodd_check(a)
        assert rc == 0, out
        for k in keys:
            assert re.search(rf"^{k} = .* ; from the file$", out, re.M), \
                f"{k}: not taken from the file:\n{out}"
    finally:
        shutil.rmtree(tmp)


def test_the_kernel_configmap_is_the_kernel_folder():
    ds = one("DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    c = cumodd_container()
    kernels = deploy_common.option_value(c["args"], "kernels")
    assert kernels, "no --kernels"
    v = mount_at(spec, c, kernels)
    assert "configMap" in v, f"{kernels} is not a ConfigMap volume"
    assert "subPath" not in v["mount"], \
        "a subPath mount never sees the ConfigMap's updates"
    cm = one("ConfigMap", v["configMap"]["name"])
    files = list(cm.get("data", {})) + list(cm.get("binaryData", {}))
    assert files
    for f in files:
        assert re.fullmatch(r"[A-Za-z0-9_.-]{1,128}\.(cu|ptx|cubin|fatbin)",
                            f), f"{f}: not a module file cumodd takes"
    # The example kernel is the repository's.
    with open(os.path.join(conftest.ROOT, "kernels", "vadd.cu")) as fh:
        assert cm["data"]["vadd.cu"] == fh.read()
    conf = mount_at(spec, c, os.path.dirname(
        deploy_common.option_value(c["args"], "config")))
    assert conf["configMap"]["name"] == "cumodd-config"


def test_the_socket_and_shm_are_the_nodes_and_the_client_shares_them():
    spec = one("DaemonSet")["spec"]["template"]["spec"]
    c = cumodd_container()
    listen = deploy_common.option_value(c["args"], "listen")
    assert listen.startswith("ipc:///")
    sock_dir = os.path.dirname(listen[len("ipc://"):])
    sock = mount_at(spec, c, sock_dir)
    shm = mount_at(spec, c, "/dev/shm")
    assert shm["hostPath"]["path"] == "/dev/shm"
    pod = one("Pod", "cumod-client")["spec"]
    client = pod["containers"][0]
    csock = mount_at(pod, client, sock_dir)
    assert csock["hostPath"]["path"] == sock["hostPath"]["path"]
    assert pod.get("hostIPC") or \
        mount_at(pod, client, "/dev/shm")["hostPath"]["path"] == "/dev/shm"
    env = {e["name"]: e.get("value") for e in client.get("env", [])}
    assert env.get("CUMOD_URL") == listen
    # The socket's group (cumodd.conf) opens it to the client.
    group = re.search(r"^socket-group = (\d+)", conf_text(), re.M)
    mode = re.search(r"^socket-mode = (\d+)", conf_text(), re.M)
    assert group and mode
    sec = c.get("securityContext", {})
    assert str(sec.get("runAsGroup")) == group.group(1)
    assert int(group.group(1)) in pod["securityContext"][
        "supplementalGroups"]
    assert int(mode.group(1), 8) & 0o060 == 0o060, "the group cannot " \
                                                   "open the socket"
    # The client needs no GPU: cumodd holds the context.
    limits = client.get("resources", {}).get("limits", {})
    assert "nvidia.com/gpu" not in limits


def test_metrics_annotations_and_probes_name_the_listener():
    tmpl = one("DaemonSet")["spec"]["template"]
    c = cumodd_container()
    ml = deploy_common.option_value(c["args"], "metrics-listen")
    host, port = ml.rsplit(":", 1)
    assert host == "0.0.0.0", "the kubelet and Prometheus come from " \
                              "outside the pod"
    ann = tmpl["metadata"]["annotations"]
    assert ann["prometheus.io/scrape"] == "true"
    assert ann["prometheus.io/port"] == port
    assert ann["prometheus.io/path"] == "/metrics"
    ports = {p.get("name"): p["containerPort"] for p in c["ports"]}
    assert str(ports.get("metrics")) == port

    def probe(kind: str) -> str:
        p = c[kind]["httpGet"]
        assert p["port"] in ("metrics", int(port)), p
        return str(p["path"])

    assert probe("livenessProbe") == "/healthz"
    assert probe("readinessProbe") == "/readyz"
    assert probe("startupProbe") == "/healthz"


def test_one_cumodd_per_gpu_node_with_the_device_plugins_gpu():
    ds = one("DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    assert spec["nodeSelector"].get("nvidia.com/gpu.present") == "true"
    c = cumodd_container()
    limits = c["resources"]["limits"]
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    assert "nvidia.com/gpu" in limits or \
        env.get("NVIDIA_VISIBLE_DEVICES") == "all"
    # cumodd drains within the grace period: --drain-timeout plus the
    # executor's 2 s.
    drain = re.search(r"^drain-timeout = (\d+)", conf_text(), re.M)
    assert drain
    assert spec["terminationGracePeriodSeconds"] * 1000 >= \
        int(drain.group(1)) + 2000
    # Every capability dropped but the one the fast path needs.
    caps = c["securityContext"]["capabilities"]
    assert caps["drop"] == ["ALL"]
    assert set(caps.get("add", [])) <= {"DAC_OVERRIDE"}
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
