"""``fleetslo demo --engine vllm`` briefly, over real vLLM replicas: the demo starts its fleet (the
Local fleet of ``fleetslo run``), replays a short trace, judges it against the simulator with the
fitted profile, and stops everything it started. Asserted: the verdict and its files, decisions
with their reasons, every request served; never absolute latency (two shared cores)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from fleetslo.core.model import Reason

from tests.realvllm.engine import REPO

#: Wall seconds of traffic: two controller ticks after the first; with one replica's start and the
#: judging, a minute and a half (the tier has its 1 -> 2 scaling test already).
DURATION = "20s"


def test_the_demo_runs_on_real_vllm_replicas(
    vllm_env: Path, exclusive_machine: None, tmp_path: Path, figures: dict[str, Any]
) -> None:
    report = tmp_path / "demo" / "report.html"
    env = {"PYTHONPATH": f"{REPO / 'controller'}:{REPO}", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    argv = [sys.executable, "-m", "fleetslo.cli", "demo", "--engine", "vllm", "--vllm-python", str(vllm_env),
            "--duration", DURATION, "--rps", "1", "--spike", "1", "--max-replicas", "1",
            "--report", str(report)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600, check=False, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    verdict = done.stdout.strip().splitlines()[-1]
    assert verdict.startswith("fleetslo held the SLO in"), verdict
    assert "best baseline" in verdict

    files = report.parent / "report-files"
    results = json.loads((files / "results.json").read_text())
    assert set(results) == {"live", "simulated", "baseline", "simulate_command"}
    live = results["live"]
    assert live["profile"] == "cpu-tiny-llama-vllm" and live["speedup"] == 1.0
    assert live["requests"] > 0
    assert live["rejected"] == 0 and live["completed"] == live["requests"]  # no failed request
    assert report.stat().st_size > 0

    decisions = [
        json.loads(line) for line in (files / "demo.log").read_text().splitlines()
        if '"event": "decision"' in line
    ]  # fmt: skip
    assert len(decisions) >= 2
    assert {d["reason"] for d in decisions} <= {r.value for r in Reason}
    assert all(d["replicas_reporting"] >= 1 for d in decisions[1:])  # the controller saw the real replicas

    pgrep = ["pgrep", "-f", str(files / "tiny-llama")]
    leftover = subprocess.run(pgrep, capture_output=True, text=True, check=False)
    assert leftover.stdout.strip() == "", "a vLLM replica outlived the demo"
    figures["demo"] = {
        "requests": live["requests"], "rejected": live["rejected"],
        "initial_replicas": live["initial_replicas"], "window_attainment": live["window_attainment"],
        "request_attainment": live["request_attainment"],
        "simulated_request_attainment": results["simulated"]["request_attainment"],
        "wall_s": live["wall_seconds"], "reasons": sorted({d["reason"] for d in decisions}),
        "verdict": verdict,
    }  # fmt: skip
