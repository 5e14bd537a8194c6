"""Gate histograms and windows, the collector's families, and exact latency preferred in signals."""

from __future__ import annotations

from fleetslo.core import conventions as cv
from fleetslo.core.histogram import Fraction
from fleetslo.core.model import Quantiles
from fleetslo.sidecar.exporter.signals import WindowSignals, prefer_exact
from fleetslo.sidecar.gate.admission import Admission
from fleetslo.sidecar.gate.collector import GateCollector
from fleetslo.sidecar.gate.stats import TPOT_BUCKETS, GateStats, GateWindows, Histogram, buckets_with
from fleetslo.sidecar.thresholds import SloThresholds
from prometheus_client.registry import CollectorRegistry


def test_configured_thresholds_become_bucket_edges() -> None:
    edges = buckets_with(TPOT_BUCKETS, 0.042, None)
    assert 0.042 in edges and list(edges) == sorted(set(edges))
    stats = GateStats(slo_ttft=0.333, slo_tpot=0.042)
    assert 0.333 in stats.ttft.bounds and 0.042 in stats.tpot.bounds


def test_a_value_on_an_edge_falls_in_that_edges_bucket() -> None:
    h = Histogram([0.1, 0.2])
    for v in (0.05, 0.1, 0.15, 0.2, 5.0):
        h.observe(v)
    snap = h.snapshot()
    assert snap.counts == (2.0, 4.0, 5.0)
    assert snap.sum == 5.5 and h.count == 5


def test_windows_are_differences_of_snapshots_and_absent_before_history_exists() -> None:
    stats = GateStats(slo_ttft=0.5)
    windows = GateWindows(stats, ring_size=10)
    assert windows.delta(5.0, 0.75) is None
    windows.snapshot(0.0)
    stats.ttft.observe(9.0)  # before the window: must not count
    for t in range(1, 6):
        windows.snapshot(float(t))
        if t == 1:
            for v in (0.1, 0.2, 0.3, 0.6):
                stats.ttft.observe(v)
    d = windows.delta(4.0, 0.75)
    assert d is not None and d.observations(cv.Histogram.TTFT) == 4
    assert d.attainment(cv.Histogram.TTFT, 0.5) == Fraction(0.75, exact=True)


def _signals(window: float = 5.0) -> WindowSignals:
    vllm = Quantiles(1.0, 2.0, 3.0)
    return WindowSignals("m", window, window, vllm, vllm, vllm, Fraction(0.1, False), Fraction(0.2, False),
                         10.0, 2.0, 50.0)  # fmt: skip


def test_exact_latency_replaces_ttft_and_tpot_where_the_gate_has_data_and_says_so() -> None:
    stats = GateStats(slo_ttft=0.5, slo_tpot=0.05)
    windows = GateWindows(stats, ring_size=10)
    windows.snapshot(0.0)
    for v in (0.1, 0.2, 0.3):
        stats.ttft.observe(v)
    windows.snapshot(5.0)
    slo = SloThresholds(ttft=0.5, tpot=0.05)
    [s] = prefer_exact([_signals()], windows, 0.75, slo)
    assert (s.ttft_source, s.source_of("ttft")) == ("gate", "gate")
    assert s.ttft.p50 is not None and 0.1 <= s.ttft.p50 <= 0.3
    assert s.ttft_attainment == Fraction(1.0, exact=True)
    # No TPOT observation in the window (one-token answers): vLLM's stays, labelled vllm.
    assert (s.tpot_source, s.tpot, s.tpot_attainment) == (
        "vllm",
        Quantiles(1.0, 2.0, 3.0),
        Fraction(0.2, False),
    )
    assert s.source_of("itl") == "vllm" and s.itl == Quantiles(1.0, 2.0, 3.0)
    # A window the gate has no history for keeps vLLM's values.
    [long] = prefer_exact([_signals(60.0)], windows, 0.75, slo)
    assert long.ttft_source == "vllm" and long.ttft == Quantiles(1.0, 2.0, 3.0)


def test_the_collector_yields_fresh_gate_families_and_no_limit_when_there_is_none() -> None:
    admission, stats = Admission(limit=None, max_queue=4), GateStats(slo_ttft=0.5)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GateCollector(admission, stats))
    get = registry.get_sample_value
    assert get(cv.GATE_LIMIT) is None
    assert get(cv.GATE_INFLIGHT) == 0 and get(cv.GATE_QUEUE_LENGTH) == 0 and get(cv.GATE_DRAINING) == 0
    assert get(cv.GATE_REJECTED + "_total", {"reason": "queue_full"}) == 0
    assert get(cv.GATE_REQUESTS + "_total", {"outcome": "client_disconnected"}) == 0
    admission.set_limit(7)
    stats.rejected["draining"] += 2
    stats.ttft.observe(0.4)
    stats.e2e["true"].observe(3.0)
    admission.drain()
    assert get(cv.GATE_LIMIT) == 7 and get(cv.GATE_DRAINING) == 1
    assert get(cv.GATE_REJECTED + "_total", {"reason": "draining"}) == 2
    assert get(cv.GATE_TTFT + "_bucket", {"le": "0.5"}) == 1
    assert get(cv.GATE_TTFT + "_bucket", {"le": "0.3"}) == 0
    assert get(cv.GATE_TTFT + "_count") == 1 and get(cv.GATE_TTFT + "_sum") == 0.4
    assert get(cv.GATE_E2E + "_count", {"stream": "true"}) == 1
    assert get(cv.GATE_E2E + "_count", {"stream": "false"}) == 0
