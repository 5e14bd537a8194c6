"""The typed result of one judged run, and its JSON serialisation (``to_dict``).

``fleetslo.sim.result.build_result`` fills these; every report and comparison reads their
attributes. ``to_dict`` is the contract of ``fleetslo simulate --json``, the demo's
``results.json`` and the HTML report's data: its keys and values are exactly those the dict-built
result had. The optional fields (run settings, the demo's stop and host, the tried baselines) are
absent from the JSON when not set, as they were when nobody passed them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True, slots=True)
class SLOTarget:
    """The objectives the run was judged against: p``quantile`` TTFT and TPOT thresholds (seconds)."""

    ttft_s: float
    tpot_s: float
    quantile: float

    def to_dict(self) -> dict[str, Any]:
        return {"ttft_s": self.ttft_s, "tpot_s": self.tpot_s, "quantile": self.quantile}


@dataclass(frozen=True, slots=True)
class WindowResult:
    """One judging minute: the requests that arrived in it and the fleet at its end.

    ``met`` is ``None`` for a minute without arrivals (nothing to judge); the fleet fields are
    ``None`` for a minute without a fleet sample.
    """

    start_s: float
    requests: int
    arrival_rate: float
    p90_ttft_s: float | None
    p90_tpot_s: float | None
    met: bool | None
    ready_replicas: int | None
    starting_replicas: int | None
    batch_limit: int | None
    queue_length: float | None

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class DecisionRecord:
    """One decision and the p90s the policy predicted behind it, beside what its observation showed
    (bucket-interpolated, over the last window), as the control plane records it: the raw material
    of the model-quality report."""

    t_s: float
    replicas: int
    ready: int
    starting: int
    predicted_ttft_s: float | None
    predicted_tpot_s: float | None
    observed_ttft_s: float | None
    observed_tpot_s: float | None

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class ScaleEventRecord:
    """A scaling action, as the control plane records it and the result reports it (``t_s``:
    simulated seconds since the start)."""

    t_s: float
    replicas_from: int
    replicas_to: int
    batch_limit: int
    reason: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def replica_changes(events: Iterable[ScaleEventRecord]) -> int:
    """How many events changed the replica count (the others moved only the batch limit)."""
    return sum(1 for e in events if e.replicas_from != e.replicas_to)


@dataclass(frozen=True, slots=True)
class BaselineTried:
    """One of the baselines the demo tried before keeping the best (``SimResult.baselines_tried``)."""

    policy: str
    window_attainment: float | None
    request_attainment: float | None
    replica_hours: float

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class RunStop:
    """Why a live demo run ended early: the signal or ``host``, and how far it was judged."""

    interrupted: bool
    stopped_by: str
    #: Simulated seconds of the trace that were judged; ``None`` when all of it was.
    judged_until_s: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "interrupted": self.interrupted,
            "stopped_by": self.stopped_by,
            "judged_until_s": self.judged_until_s,
        }


@dataclass(frozen=True, slots=True)
class SimResult:
    """One run judged: what it served, how well, for how much (see ``fleetslo.sim.result``).

    Attainments, p90s, ``cost_per_million_tokens`` and ``mean_replicas`` are ``None`` when there
    was nothing to measure them on (no judged minute, no request, no token, no time).
    """

    policy: str
    trace: str
    profile: str
    slo: SLOTarget
    requests: int
    completed: int
    rejected: int
    in_flight_at_end: int
    window_attainment: float | None
    request_attainment: float | None
    p90_ttft_s: float | None
    p90_tpot_s: float | None
    replica_hours: float
    gpu_hours: float
    cost_usd: float
    tokens: int
    cost_per_million_tokens: float | None
    mean_replicas: float | None
    scale_events: int
    preemptions: int
    sim_seconds: float
    wall_seconds: float
    windows: tuple[WindowResult, ...]
    #: The decisions with the p90s predicted behind them (empty where none were recorded).
    decisions: tuple[DecisionRecord, ...] = ()
    events: tuple[ScaleEventRecord, ...] = ()
    # The run's settings, when the caller ran a scenario (``fleetslo.sim.scenario``).
    initial_replicas: int | None = None
    cold_start_s: float | None = None
    seed: int | None = None
    # The demo's settings: its speed-up, and the batch limit that means "no limit".
    speedup: float | None = None
    max_num_seqs: int | None = None
    #: A live demo run that ended early.
    stop: RunStop | None = None
    #: A live demo run's host check (``HostCheck.summary()``).
    host: Mapping[str, Any] | None = None
    #: The best baseline: every baseline tried, the kept one among them.
    baselines_tried: tuple[BaselineTried, ...] | None = None
    #: Representative replicas (``fleetslo.sim.sampled``): one replica in ``sample`` was simulated,
    #: and the sizes, costs and counts above are the simulated ones × ``sample``.
    sample: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready result: today's keys, in today's order; unset optional fields left out."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "slo":
                out["slo"] = self.slo.to_dict()
            elif f.name in ("windows", "decisions", "events", "baselines_tried"):
                if value is not None:
                    out[f.name] = [item.to_dict() for item in value]
            elif f.name == "stop":
                if self.stop is not None:  # the demo's keys, flat at the top level
                    out.update(self.stop.to_dict())
            elif f.name == "host":
                if self.host is not None:
                    out["host"] = dict(self.host)
            elif value is not None or f.name not in _OPTIONAL:
                out[f.name] = value
        return out


_OPTIONAL = frozenset(("initial_replicas", "cold_start_s", "seed", "speedup", "max_num_seqs", "stop", "host"))
_OPTIONAL |= {"baselines_tried", "sample"}
