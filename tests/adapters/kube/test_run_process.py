"""``fleetslo run`` as a real process: kubeconfig → kmock, health and metrics over HTTP, SIGTERM releases
the lease and exits 0."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import yaml

from tests.adapters.kube.kapi import KubeApi
from tests.prometheus import free_port

SLO = """\
apiVersion: fleetslo/v1
kind: FleetSLO
metadata: {name: qwen}
spec:
  target: {kind: Deployment, namespace: infer, name: qwen, model_name: qwen}
  objectives: {ttft: {threshold: 2s}, tpot: {threshold: 50ms}}
  replicas: {min: 3, max: 10}
"""


def write_files(tmp_path: Path, api_url: str, port: int) -> list[str]:
    kubeconfig = {
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "kmock", "cluster": {"server": api_url}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "test", "context": {"cluster": "kmock", "user": "u"}}],
    }  # fmt: skip
    config = {
        "listen": f"127.0.0.1:{port}", "interval": "200ms", "policy": "static",
        "kubernetes": {"in_cluster": False, "kubeconfig": str(tmp_path / "kubeconfig")},
        "source": {"prometheus": {"url": f"http://127.0.0.1:{free_port()}", "timeout": "500ms"}},
        "leader_election": {"namespace": "fleetslo", "identity": "ctl-1"},
    }  # fmt: skip
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(kubeconfig))
    (tmp_path / "controller.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "slo.yaml").write_text(SLO)
    return ["--config", str(tmp_path / "controller.yaml"), "--slo", str(tmp_path / "slo.yaml")]


def wait_until(check: object, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():  # type: ignore[operator]
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    return False


def test_fleetslo_run_scales_serves_and_shuts_down_cleanly(kapi: KubeApi, tmp_path: Path) -> None:
    kapi.put("apps/v1/deployments", {
        "metadata": {"name": "qwen", "namespace": "infer"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "qwen"}}},
        "status": {"replicas": 1, "readyReplicas": 1},
    })  # fmt: skip
    port = free_port()
    args = [sys.executable, "-m", "fleetslo.cli", "run", *write_files(tmp_path, kapi.url, port)]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        assert wait_until(lambda: httpx.get(f"{base}/readyz").status_code == 200)
        assert wait_until(lambda: kapi.get("apps/v1/deployments", "infer", "qwen")["spec"]["replicas"] == 3)
        metrics = httpx.get(f"{base}/metrics").text
        assert "fleetslo_controller_leader 1.0" in metrics
        assert 'fleetslo_controller_decisions_total{reason="FixedSize",target="qwen"}' in metrics
        assert httpx.get(f"{base}/healthz").status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=20)[0].decode()
    assert process.returncode == 0, output
    lease = kapi.get("coordination.k8s.io/v1/leases", "fleetslo", "fleetslo-controller")
    assert lease["spec"].get("holderIdentity") is None  # released on shutdown: a follower takes over at once
    assert '"event": "decision"' in output and '"reason": "FixedSize"' in output
