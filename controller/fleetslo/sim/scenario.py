"""One what-if, end to end: the spec a simulation runs under, the warm starting fleet, one policy's result.

``make_spec`` turns simulator options into the same ``FleetSLOSpec`` a cluster would use (so a policy
cannot tell it is simulated). ``initial_replicas`` finds the warm fleet every policy starts from: the
smallest static fleet that meets the targets over the trace's first minutes, so no policy is judged on
a cold start it could not have avoided. ``run_policy`` replays and judges.

Orchestration only: no engine modelling, no policy logic, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from fleetslo.core.config import load
from fleetslo.core.metrics.buckets import slo_aligned
from fleetslo.core.spec import FleetSLOSpec
from fleetslo.policy.base import Policy
from fleetslo.policy.baselines import StaticPolicy
from fleetslo.sim.profile import EngineProfile
from fleetslo.sim.result import build_result
from fleetslo.sim.result_types import SimResult
from fleetslo.sim.runner import SimConfig, simulate
from fleetslo.sim.traces import window
from fleetslo.sim.vllm_metrics import ITL_BUCKETS, TTFT_BUCKETS
from fleetslo.sim.workload import Trace

#: How much of the trace's start the initial fleet must serve within the targets.
SIZING_HORIZON_S = 300.0


def make_spec(
    profile: EngineProfile,
    *,
    ttft_s: float = 2.0,
    tpot_s: float = 0.05,
    quantile: float = 0.9,
    min_replicas: int = 1,
    max_replicas: int = 100,
    cold_start_s: float | None = None,
    batch_max: int | None = None,
    name: str = "simulated",
) -> FleetSLOSpec:
    """The FleetSLO spec of a simulated target served by ``profile`` replicas."""
    return load(
        FleetSLOSpec,
        {
            "target": {"name": name, "model_name": profile.model},
            "objectives": {
                "ttft": {"threshold": ttft_s, "quantile": quantile},
                "tpot": {"threshold": tpot_s, "quantile": quantile},
            },
            "replicas": {
                "min": min_replicas,
                "max": max_replicas,
                "cold_start": cold_start_s if cold_start_s is not None else profile.cold_start_s,
            },
            # Simulated replicas enforce a live batch limit, as the fleetslo gate does on a real fleet.
            "batch_limit": {"min": 1, "max": batch_max or profile.max_num_seqs, "actuator": "gate"},
            "cost": {
                "per_replica_hour": profile.replica_hour_usd,
                "gpus_per_replica": profile.gpus_per_replica,
            },
        },
        "simulation options",
    )


@dataclass(frozen=True, slots=True)
class Scenario:
    """A trace, the hardware serving it, the objectives, and how the replay is run."""

    trace: Trace
    trace_name: str
    profile: EngineProfile
    spec: FleetSLOSpec
    initial_replicas: int
    seed: int = 0
    window_s: float = 60.0
    scrape_interval_s: float = 15.0
    drain_timeout_s: float = 1800.0
    cold_start_sigma: float = 0.0
    router_queue_limit: int | None = None
    #: Histogram layout the replicas expose: "slo" models a fleet behind the fleetslo gate (exact
    #: per-request latency in buckets with edges at and around the SLO thresholds); "vllm" is
    #: vLLM's defaults, coarse near typical thresholds.
    buckets: str = "slo"

    def bucket_layout(self) -> dict[str, tuple[float, ...]] | None:
        if self.buckets == "vllm":
            return None
        objectives = self.spec.objectives
        return {
            "time_to_first_token": slo_aligned(TTFT_BUCKETS, [objectives.ttft.threshold]),
            "inter_token_latency": slo_aligned(ITL_BUCKETS, [objectives.tpot.threshold]),
        }

    def config(self, progress: Callable[[float, float], None] | None = None) -> SimConfig:
        return SimConfig(
            spec=self.spec,
            profile=self.profile,
            initial_replicas=self.initial_replicas,
            window_s=self.window_s,
            scrape_interval_s=self.scrape_interval_s,
            drain_timeout_s=self.drain_timeout_s,
            seed=self.seed,
            cold_start_sigma=self.cold_start_sigma,
            router_queue_limit=self.router_queue_limit,
            buckets=self.bucket_layout(),
            progress=progress,
        )


def run_policy(
    scenario: Scenario,
    policy: Policy[Any],
    *,
    label: str | None = None,
    progress: Callable[[float, float], None] | None = None,
) -> SimResult:
    """Replay the scenario under ``policy`` and judge it (``result.build_result``, with the settings)."""
    run = simulate(scenario.trace, policy, scenario.config(progress))
    judged = build_result(
        run,
        policy=label or policy.name,
        trace=scenario.trace_name,
        profile=scenario.profile,
        spec=scenario.spec,
    )
    return replace(
        judged,
        initial_replicas=scenario.initial_replicas,
        cold_start_s=scenario.spec.replicas.cold_start,
        seed=scenario.seed,
    )


def initial_replicas(scenario: Scenario, horizon_s: float = SIZING_HORIZON_S) -> int:
    """The smallest static fleet that meets both targets in every minute of the first ``horizon_s``.

    Exponential then binary search over static replays of that head of the trace; its ``min`` (at
    least 1) when the head is empty. Where even the spec's ``max`` misses a minute — minutes whose
    own prompts take longer to prefill than the TTFT target, which no fleet size changes (Mooncake's
    long prompts at a 5 s target) — the smallest fleet that does as well as ``max`` does: starting
    every replay at ``max`` made each policy pay for a fleet it could only shed at its own pace.
    """
    head = window(scenario.trace, 0.0, horizon_s)
    low = max(1, scenario.spec.replicas.min)
    high = max(low, scenario.spec.replicas.max)
    if not head.requests:
        return low
    short = replace(scenario, trace=head, drain_timeout_s=min(scenario.drain_timeout_s, 600.0))

    @cache  # the second search below asks again about sizes the first one replayed
    def attained(n: int) -> tuple[float, int]:
        result = run_policy(replace(short, initial_replicas=n), StaticPolicy(n))
        return result.window_attainment or 0.0, result.rejected

    size = _smallest(low, high, lambda n: attained(n) == (1.0, 0))
    at_max = attained(high) if size == high else (1.0, 0)
    if at_max == (1.0, 0):
        return size

    def as_good_as_max(n: int) -> bool:
        attainment, rejected = attained(n)
        return attainment >= at_max[0] and rejected <= at_max[1]

    return _smallest(low, high, as_good_as_max)


def _smallest(low: int, high: int, meets: Callable[[int], bool]) -> int:
    """The smallest n in [low, high] that ``meets`` (monotone), ``high`` when none does."""
    size = low
    while size < high and not meets(size):
        low = size + 1
        size = min(high, size * 2)
    # the answer is in [low, size]: size meets (or is the maximum), everything below low does not
    while low < size:
        middle = (low + size) // 2
        if meets(middle):
            size = middle
        else:
            low = middle + 1
    return size
