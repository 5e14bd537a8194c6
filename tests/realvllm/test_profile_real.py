"""``fleetslo profile`` end to end against the real engine: it benchmarks, fits from the plugin's
per-step totals, writes a profile that ``fleetslo simulate`` loads, and checks itself open-loop.

The open-loop prediction errors are recorded in the tier's figures, not asserted: on two cores
shared with other work the client's latency carries scheduling noise no profile can predict.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from fleetslo.sim.profile import profile_from_mapping

from tests.realvllm.engine import REPO


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": f"{REPO / 'controller'}:{REPO}", "PATH": "/usr/bin:/bin", "COLUMNS": "160"}
    return subprocess.run([sys.executable, "-m", "fleetslo.cli", *args], capture_output=True, text=True,
                          env=env, timeout=480, check=False)  # fmt: skip


def test_profile_fits_a_loadable_profile_and_reports_its_error(
    replica_url: str, tmp_path: Path, figures: dict[str, Any]
) -> None:
    out = tmp_path / "tiny.yaml"
    done = _cli(
        "profile", "--url", replica_url, "--out", str(out), "--name", "tiny-llama-cpu",
        "--hardware", "shared 2-core CPU", "--max-num-seqs", "16", "--concurrency", "1,2,4,8",
        "--prompt-tokens", "16,128,384", "--requests", "4", "--validate", "--validate-seconds", "15",
    )  # fmt: skip
    # 0: within the tolerance everywhere; 1: measured and written, but outside it somewhere.
    assert done.returncode in (0, 1), done.stderr[-3000:]
    profile = profile_from_mapping(yaml.safe_load(out.read_text()), str(out))
    assert profile.frontend is not None, "vLLM's own latency sums were on the page"
    measured = " ".join(profile.provenance.measured)
    assert "the fleetslo engine plugin's per-step totals" in measured
    assert "validation (open loop" in measured
    validation = json.loads((tmp_path / "tiny.yaml.validation.json").read_text())
    # At 30 and 60 % of the saturation just measured nothing fails. At 90 % a host busy with other
    # work can take that much capacity away (CI, eda3171..8b9a53e: one request of the 90 % run
    # failed beside two benchmark processes): the queue then grows and a request may outlive the
    # client's timeout; anything else (an error from the server, a broken stream) is a defect.
    # The message names each failure's reason: pytest elides a long row, and one failed request of
    # 65 at 30 % (CI on 5b1b18c, the host otherwise idle) left no trace of why.
    reasons = [(row["fraction"], row["failed"], row.get("errors")) for row in validation]
    assert [row["failed"] for row in validation[:2]] == [0, 0], reasons
    assert set(validation[2]["errors"]) <= {"ReadTimeout", "PoolTimeout", "ConnectTimeout"}, validation
    assert validation[2]["failed"] == sum(validation[2]["errors"].values())
    figures["profile"] = {
        "step_time": profile.step_time.model_dump(), "frontend": profile.frontend.model_dump(),
        "frontend_queue": None if profile.frontend_queue is None else profile.frontend_queue.model_dump(),
        "validation": validation, "within_20pct": done.returncode == 0,
    }  # fmt: skip

    trace = tmp_path / "trace.csv"
    trace.write_text(
        "arrival_s,input_tokens,output_tokens\n" + "".join(f"{i * 0.2},64,32\n" for i in range(50))
    )
    simulated = _cli("simulate", "--trace", str(trace), "--profile", str(out), "--replicas", "1",
                     "--initial-replicas", "1", "--json")  # fmt: skip
    assert simulated.returncode == 0, simulated.stderr[-2000:]
    assert json.loads(simulated.stdout)["p90_ttft_s"] > 0
