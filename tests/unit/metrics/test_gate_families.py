"""The gate's families folded into a pod's vLLM snapshot: its queue counts as waiting, its exact
TTFT/TPOT (from arrival at the gate) replace vLLM's, and the window math applies unchanged."""

from __future__ import annotations

import pytest
from fleetslo.core import conventions as cv
from fleetslo.core.histogram import quantile
from fleetslo.core.metrics.exposition import parse_vllm
from fleetslo.core.metrics.gate_families import GATE_ENGINE, GateReading, read_gate, with_gate
from fleetslo.core.metrics.window import window_delta
from fleetslo.core.model import EngineSnapshot
from prometheus_client.parser import text_string_to_metric_families

from tests.gate_support import gate_page, vllm_page
from tests.support import AFTER_LOAD, capture

TTFT, TPOT = cv.Histogram.TTFT, cv.Histogram.TPOT


def reading(page: str) -> GateReading | None:
    return read_gate(text_string_to_metric_families(page))


def vllm(requests: int, waiting: int = 1) -> EngineSnapshot:
    return parse_vllm(vllm_page(requests, waiting))["tiny-llama"]


def test_a_page_without_gate_families_has_no_gate() -> None:
    gpu_only = 'fleetslo_gpu_utilization_ratio{gpu="0"} 0.5\n'
    assert reading(gpu_only) is None
    assert with_gate(vllm(10), None) == vllm(10)


def test_the_real_collectors_page_is_read_under_the_canonical_names() -> None:
    gate = reading(gate_page(queued=7, ttft=[2.9, 3.1], tpot=[0.03]))
    assert gate is not None and gate.queue_length == 7.0
    assert set(gate.histograms) == {TTFT, TPOT}
    ttft = gate.histograms[TTFT]
    assert ttft.count == 2.0 and ttft.sum == pytest.approx(6.0)
    assert 0.5 in ttft.bounds and ttft.bounds[-1] == float("inf")  # the SLO threshold is an edge


def test_the_gate_queue_is_added_to_vllms_waiting() -> None:
    snapshot = with_gate(vllm(10, waiting=1), reading(gate_page(queued=7)))
    assert snapshot.gauge(cv.Gauge.WAITING) == 8.0
    assert snapshot.gauge(cv.Gauge.RUNNING) == 4.0  # in flight at the gate is vLLM's running already


def test_an_unknown_vllm_waiting_stays_unknown() -> None:
    bare = EngineSnapshot("tiny-llama")
    assert with_gate(bare, reading(gate_page(queued=7))).gauge(cv.Gauge.WAITING) is None


def test_the_gates_ttft_replaces_vllms_once_it_has_observations() -> None:
    snapshot = with_gate(vllm(10), reading(gate_page(queued=0, ttft=[3.0] * 10, tpot=[0.03] * 10)))
    assert snapshot.histograms[TTFT].keys() == {GATE_ENGINE}
    assert quantile(0.9, snapshot.histogram(TTFT)) == pytest.approx(2.95)  # vLLM said 0.09
    assert snapshot.histogram(TPOT) is not None  # vLLM's page had none; the gate's fills in


def test_vllms_ttft_stays_while_the_gate_saw_no_streamed_request() -> None:
    snapshot = with_gate(vllm(10), reading(gate_page(queued=0)))
    assert snapshot.histograms[TTFT].keys() == {"0"}
    # Nothing anywhere yet: the gate's empty layout, so pods of one fleet share one layout.
    empty = with_gate(vllm(0), reading(gate_page(queued=0)))
    assert empty.histograms[TTFT].keys() == {GATE_ENGINE}


def test_vllms_created_timestamp_no_longer_applies_to_the_gates_series() -> None:
    real = parse_vllm(capture(AFTER_LOAD))["tiny-llama"]
    assert (TTFT, "0") in real.created
    snapshot = with_gate(real, reading(gate_page(queued=0, ttft=[1.0])))
    assert not any(family == TTFT for family, _ in snapshot.created)
    assert any(family != TTFT for family, _ in snapshot.created)  # other families keep theirs


def test_windows_over_gated_snapshots_give_the_gates_latency() -> None:
    older = with_gate(vllm(10), reading(gate_page(queued=2, ttft=[3.0] * 10)))
    newer = with_gate(vllm(30), reading(gate_page(queued=5, ttft=[3.0] * 10 + [1.0] * 20)))
    delta = window_delta(newer, older, 15.0)
    assert delta.observations(TTFT) == 20.0  # only the window's requests
    assert delta.quantiles(TTFT).p90 == pytest.approx(0.99)  # in the 0.9-1.0 s bucket
    attainment = delta.attainment(TTFT, 0.5)
    assert attainment is not None and attainment.value == 0.0 and attainment.exact
    # The first gated scrape after vLLM-only ones: a different layout reads as a reset, and every
    # gate observation is then inside the window (the gate had none before), so none is lost.
    first = with_gate(vllm(30), reading(gate_page(queued=0, ttft=[1.0] * 20)))
    assert window_delta(first, vllm(10), 15.0).observations(TTFT) == 20.0
