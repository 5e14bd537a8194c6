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
    stats = GateStats(slo_ttft=0.333, slo_tpot=0.042).model("m")
    assert 0.333 in stats.ttft.bounds and 0.042 in stats.tpot.bounds


def test_a_value_on_an_edge_falls_in_that_edges_bucket() -> None:
    h = Histogram([0.1, 0.2])
    for v in (0.05, 0.1, 0.15, 0.2, 5.0):
        h.observe(v)
    snap = h.snapshot()
    assert snap.counts == (2.0, 4.0, 5.0)
    assert snap.sum == 5.5 and h.count == 5


def test_windows_are_differences_of_snapshots_and_absent_before_history_exists() -> None:
    gate = GateStats(slo_ttft=0.5)
    windows = GateWindows(gate, ring_size=10)
    assert windows.delta(5.0, 0.75, "m") is None
    stats = gate.model("m")
    windows.snapshot(0.0)
    stats.ttft.observe(9.0)  # before the window: must not count
    for t in range(1, 6):
        windows.snapshot(float(t))
        if t == 1:
            for v in (0.1, 0.2, 0.3, 0.6):
                stats.ttft.observe(v)
                gate.model("other").ttft.observe(v)  # another model's requests are its own
    d = windows.delta(4.0, 0.75, "m")
    assert d is not None and d.observations(cv.Histogram.TTFT) == 4
    assert d.attainment(cv.Histogram.TTFT, 0.5) == Fraction(0.75, exact=True)
    assert windows.delta(4.0, 0.75, "never-seen") is None


def _signals(window: float = 5.0) -> WindowSignals:
    vllm = Quantiles(1.0, 2.0, 3.0)
    return WindowSignals("m", window, window, vllm, vllm, vllm, Fraction(0.1, False), Fraction(0.2, False),
                         10.0, 2.0, 50.0)  # fmt: skip


def test_exact_latency_replaces_ttft_and_tpot_where_the_gate_has_data_and_says_so() -> None:
    gate = GateStats(slo_ttft=0.5, slo_tpot=0.05)
    windows = GateWindows(gate, ring_size=10)
    windows.snapshot(0.0)
    for v in (0.1, 0.2, 0.3):
        gate.model("m").ttft.observe(v)  # first seen inside the window: counts from zero
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


def test_the_collector_yields_fresh_gate_families_per_model_and_no_limit_when_there_is_none() -> None:
    admission, gate = Admission(limit=None, max_queue=4), GateStats(slo_ttft=0.5)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GateCollector(admission, gate, lambda: ["m"]))
    get = registry.get_sample_value
    m = {"model_name": "m"}
    assert get(cv.GATE_LIMIT, m) is None
    assert (
        get(cv.GATE_INFLIGHT, m) == 0 and get(cv.GATE_QUEUE_LENGTH, m) == 0 and get(cv.GATE_DRAINING, m) == 0
    )
    assert get(cv.GATE_REJECTED + "_total", {**m, "reason": "queue_full"}) == 0
    assert get(cv.GATE_REQUESTS + "_total", {**m, "outcome": "rejected"}) == 0
    assert get(cv.GATE_TTFT + "_count", m) == 0
    assert "m" not in gate.models  # publishing a served model does not make it an entry
    admission.set_limit(7)
    stats = gate.model("m")
    stats.rejected["draining"] += 2
    stats.outcomes["rejected"] += 2
    stats.ttft.observe(0.4)
    stats.e2e["true"].observe(3.0)
    admission.drain()
    assert get(cv.GATE_LIMIT, m) == 7 and get(cv.GATE_DRAINING, m) == 1
    assert get(cv.GATE_REJECTED + "_total", {**m, "reason": "draining"}) == 2
    assert get(cv.GATE_REQUESTS + "_total", {**m, "outcome": "rejected"}) == 2
    assert get(cv.GATE_TTFT + "_bucket", {**m, "le": "0.5"}) == 1
    assert get(cv.GATE_TTFT + "_bucket", {**m, "le": "0.3"}) == 0
    assert get(cv.GATE_TTFT + "_count", m) == 1 and get(cv.GATE_TTFT + "_sum", m) == 0.4
    assert get(cv.GATE_E2E + "_count", {**m, "stream": "true"}) == 1
    assert get(cv.GATE_E2E + "_count", {**m, "stream": "false"}) == 0


def test_every_gate_family_has_model_name() -> None:
    gate = GateStats()
    gate.model("m").ttft.observe(0.1)
    collector = GateCollector(Admission(limit=3, max_queue=4), gate, lambda: ["m", "n"])
    for family in collector.collect():
        assert family.samples, family.name
        assert all(sample.labels.get("model_name") in ("m", "n") for sample in family.samples), family.name
