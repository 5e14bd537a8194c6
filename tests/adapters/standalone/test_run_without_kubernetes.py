"""``fleetslo run`` without a cluster, as a user starts it: a Local target whose replicas are
``fleetslo sim-server`` processes from a command template, and a Static target in front of
replicas something else started. Real processes on loopback; decisions read from the audit log."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from fleetslo.control.local.replica import free_port
from fleetslo.core.errors import ConfigError
from fleetslo.core.spec import load_fleetslo_documents

ROOT = Path(__file__).resolve().parents[3]
ENV = {**os.environ, "PYTHONPATH": f"{ROOT / 'controller'}:{ROOT}"}
SIM = [sys.executable, "-m", "fleetslo.cli", "--log-level", "warning", "sim-server",
       "--profile", "mi300x-llama3.1-8b-fp8-tp1", "--model-name", "{model_name}",
       "--listen", "127.0.0.1:{port}", "--cold-start", "0"]  # fmt: skip


def _spec(
    name: str, target: dict[str, Any], replicas: dict[str, int], mode: str = "enforce"
) -> dict[str, Any]:
    return {
        "apiVersion": "fleetslo/v1", "kind": "FleetSLO", "metadata": {"name": name},
        "spec": {
            "target": target, "mode": mode, "replicas": {**replicas, "cold_start": "5s"},
            "objectives": {"ttft": {"threshold": "2s", "window": "10s"},
                           "tpot": {"threshold": "50ms", "window": "10s"}},
            "batch_limit": {"min": 2, "max": 64, "actuator": "gate"},
        },
    }  # fmt: skip


def _run(tmp: Path, spec: dict[str, Any], **settings: Any) -> subprocess.Popen[bytes]:
    (tmp / "slo.yaml").write_text(yaml.safe_dump(spec))
    settings = {"interval": "1s", "listen": f"127.0.0.1:{free_port()}", **settings}
    (tmp / "controller.yaml").write_text(yaml.safe_dump(settings))
    argv = [sys.executable, "-m", "fleetslo.cli", "run", "--config", str(tmp / "controller.yaml"),
            "--slo", str(tmp / "slo.yaml")]  # fmt: skip
    with (tmp / "run.log").open("wb") as log:
        return subprocess.Popen(argv, env=ENV, stdout=subprocess.DEVNULL, stderr=log, cwd=tmp)


def audit(log: Path) -> list[dict[str, Any]]:
    """The controller's JSON log lines so far."""
    return [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]


def _decisions_until(
    process: subprocess.Popen[bytes], log: Path, done: Any, timeout: float
) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if done(audit(log)):
            break
        time.sleep(0.3)
    return audit(log)


def _stop(process: subprocess.Popen[bytes]) -> int:
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=60)


def test_a_local_target_is_started_from_its_template_and_scaled_to_its_minimum(tmp_path: Path) -> None:
    work = tmp_path / "fleet"
    target = {"kind": "Local", "name": "lt", "model_name": "lt-model",
              "local": {"command": SIM, "warm": 1, "start_timeout": "60s", "workdir": str(work)}}  # fmt: skip
    process = _run(tmp_path, _spec("local-target", target, {"min": 2, "max": 3}))
    try:
        lines = _decisions_until(
            process,
            tmp_path / "run.log",
            lambda ls: any(line.get("replicas_written") == 2 for line in ls),
            timeout=120,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(json.loads((work / "endpoints.json").read_text())) < 2:
            time.sleep(0.5)
        endpoints = json.loads((work / "endpoints.json").read_text())
        assert len(endpoints) == 2, "both replicas serve behind their gates"
        answer = httpx.post(
            f"{endpoints[1]['url']}/v1/completions", json={"model": "lt-model", "prompt": "hi"}, timeout=30
        )
        assert answer.status_code == 200
    finally:
        code = _stop(process)
    decided = [line for line in lines if "reason" in line and line.get("target") == "local-target"]
    assert decided, "the controller audited its decisions"
    assert any(line.get("replicas_written") == 2 for line in decided)
    assert code == 0
    assert (
        "--model-name lt-model"
        not in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    )


def test_a_static_target_is_observed_and_never_scaled(tmp_path: Path) -> None:
    port, sidecar, admin = free_port(), free_port(), free_port()
    token = tmp_path / "token"
    token.write_text("static-target-token-0123\n")
    endpoint = {
        "name": "st-0",
        "sidecar_url": f"http://127.0.0.1:{sidecar}",
        "admin_url": f"http://127.0.0.1:{admin}",
    }
    target = {"kind": "Static", "name": "st", "model_name": "st-model", "endpoints": [endpoint]}
    started: list[subprocess.Popen[bytes]] = []  # the replica something else runs: engine, sidecar
    try:
        started.append(subprocess.Popen([a.format(port=port, model_name="st-model") for a in SIM], env=ENV))
        started.append(subprocess.Popen(
            [sys.executable, "-m", "fleetslo.cli", "--log-level", "warning", "exporter",
             "--vllm-url", f"http://127.0.0.1:{port}", "--listen", f"127.0.0.1:{sidecar}", "--interval", "1s",
             "--gpu-backend", "none", "--gate-listen", f"127.0.0.1:{free_port()}",
             "--gate-admin-listen", f"127.0.0.1:{admin}", "--admin-token-file", str(token)],
            env=ENV,
        ))  # fmt: skip
        process = _run(tmp_path, _spec("static-target", target, {"min": 1, "max": 4}, mode="advisory"),
                       gate={"token_file": str(token)})  # fmt: skip
        try:
            lines = _decisions_until(
                process,
                tmp_path / "run.log",
                lambda ls: sum("reason" in line for line in ls) >= 3,
                timeout=90,
            )
        finally:
            code = _stop(process)
        # what it learned is in the state file next to its config; a restart resumes it
        saved = json.loads((tmp_path / "fleetslo-state.json").read_text())["targets"]["static-target"]
        (tmp_path / "run.log").rename(tmp_path / "first-run.log")
        again = _run(tmp_path, _spec("static-target", target, {"min": 1, "max": 4}, mode="advisory"),
                     gate={"token_file": str(token)})  # fmt: skip
        try:
            restarted = _decisions_until(
                again, tmp_path / "run.log", lambda ls: any("reason" in x for x in ls), 90
            )
        finally:
            _stop(again)
    finally:
        for p in reversed(started):
            p.terminate()
            p.wait(timeout=20)
    decided = [line for line in lines if "reason" in line and line.get("target") == "static-target"]
    assert len(decided) >= 3
    assert all(line.get("replicas_before") == 1 for line in decided), "nothing scaled a static target"
    assert any(line.get("replicas_reporting") == 1 for line in decided), "its sidecar was read"
    assert code == 0
    assert saved["schema"] == 1 and saved["policy"] == "fleetslo" and saved["learned"]["model"]
    first = [x for x in audit(tmp_path / "first-run.log") if x.get("event") == "state_restored"]
    resumed = [x for x in restarted if x.get("event") == "state_restored"]
    assert [x["learned"] for x in first] == ["prior"] and [x["learned"] for x in resumed] == ["resumed"]


def test_a_static_target_in_enforce_mode_must_pin_its_size() -> None:
    target = {
        "kind": "Static",
        "name": "st",
        "model_name": "m",
        "endpoints": [{"name": "a", "sidecar_url": "http://h:1"}],
    }
    with pytest.raises(ConfigError, match="Static target cannot be scaled"):
        load_fleetslo_documents([_spec("s", target, {"min": 1, "max": 4})], "slo.yaml")
    load_fleetslo_documents([_spec("s", target, {"min": 1, "max": 1})], "slo.yaml")


def test_a_local_target_needs_its_command() -> None:
    with pytest.raises(ConfigError, match="local"):
        load_fleetslo_documents(
            [_spec("l", {"kind": "Local", "name": "l", "model_name": "m"}, {"min": 1, "max": 2})], "x"
        )
