"""The policy's view: per-replica windows summed, bucket-interpolated quantiles, None for no data."""

from __future__ import annotations

import pytest
from fleetslo.core.histogram import quantile
from fleetslo.core.metrics.window import SnapshotRing
from fleetslo.core.model import Observation, ReplicaCounts
from fleetslo.sim.fleet import ReplicaSample
from fleetslo.sim.observe import build_observation
from fleetslo.sim.result import exact_quantile
from fleetslo.sim.vllm_metrics import EngineMetrics

from tests.unit.sim.sim_support import spec_for, tiny_profile

SPEC = spec_for(tiny_profile(), ttft_s=0.5, tpot_s=0.05)


def history(samples: list[tuple[float, EngineMetrics, float]]) -> SnapshotRing[ReplicaSample]:
    ring: SnapshotRing[ReplicaSample] = SnapshotRing(16)
    for at, metrics, busy in samples:
        ring.append(at, ReplicaSample(at, metrics.snapshot(), busy))
    return ring


def observe(rings: list[SnapshotRing[ReplicaSample]], now: float = 120.0) -> Observation:
    return build_observation(
        "t",
        now,
        60.0,
        histories=rings,
        replicas=ReplicaCounts(len(rings)),
        batch_limit=8,
        spec=SPEC,
        slack=7.5,
    )


def test_policy_sees_bucket_interpolated_p90_while_the_judge_uses_exact_values() -> None:
    ttfts = [0.26 + 0.01 * i for i in range(20)]  # 0.26 … 0.45, all in vLLM's (0.25, 0.5] bucket
    old, new = EngineMetrics("m"), EngineMetrics("m")
    for v in ttfts:
        new.ttft.observe(v)
    new.success = len(ttfts)
    obs = build_observation(
        "t", 120.0, 60.0, histories=[history([(60.0, old, 0.0), (120.0, new, 30.0)])],
        replicas=ReplicaCounts(1), batch_limit=8, spec=SPEC,
    )  # fmt: skip
    assert obs.ttft.p90 == pytest.approx(0.25 + 0.25 * 0.9)  # PromQL: linear inside the bucket
    assert exact_quantile(0.9, ttfts) == pytest.approx(0.43)
    assert obs.ttft.p90 != pytest.approx(exact_quantile(0.9, ttfts))
    assert obs.request_rate == pytest.approx(20 / 60)
    assert obs.ttft_attainment == pytest.approx(1.0)
    assert obs.gpu_utilization == pytest.approx(0.5)
    assert obs.replicas_reporting == 1 and obs.data_age == 0.0 and obs.batch_limit == 8


def test_replica_windows_are_summed_before_the_quantile() -> None:
    rings = []
    for values in ([0.02] * 9, [3.0] * 1):
        old, new = EngineMetrics("m"), EngineMetrics("m")
        for v in values:
            new.ttft.observe(v)
        rings.append(history([(60.0, old, 0.0), (120.0, new, 60.0)]))
    obs = observe(rings)
    merged = EngineMetrics("m")
    for v in [0.02] * 9 + [3.0]:
        merged.ttft.observe(v)
    assert obs.ttft.p90 == quantile(0.9, merged.ttft.cumulative())
    assert obs.gpu_utilization == pytest.approx(1.0)


def test_no_scrapes_means_no_signals_not_zeros() -> None:
    obs = observe([])
    assert obs.ttft.p90 is None and obs.request_rate is None and obs.gpu_utilization is None
    assert obs.running is None and obs.replicas_reporting == 0 and obs.data_age is None


def test_an_idle_fleet_has_rates_of_zero_but_no_quantiles() -> None:
    m = EngineMetrics("m")
    obs = observe([history([(60.0, m, 0.0), (120.0, m, 0.0)])])
    assert obs.request_rate == 0.0
    assert obs.ttft.p90 is None and obs.ttft_attainment is None
    assert obs.running == 0.0 and obs.gpu_utilization == 0.0


def test_young_and_gone_replicas() -> None:
    young_start, young_now = EngineMetrics("m"), EngineMetrics("m")
    young_now.success = 6
    gone = EngineMetrics("m")
    gone.success = 100
    rings = [
        history([(90.0, young_start, 0.0), (120.0, young_now, 15.0)]),  # ready 30 s ago
        history([(0.0, EngineMetrics("m"), 0.0), (45.0, gone, 40.0)]),  # last scraped before the window
    ]
    obs = observe(rings)
    assert obs.request_rate == pytest.approx(6 / 60)
    assert obs.replicas_reporting == 1
    assert obs.gpu_utilization == pytest.approx(0.5)
