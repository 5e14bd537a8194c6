"""The admission gate's families on a sidecar page, folded into that pod's vLLM ``EngineSnapshot``.

Behind a gate, a request first waits in the gate's FIFO queue and reaches vLLM only when a slot
frees up. vLLM's ``num_requests_waiting`` does not count that queue and its TTFT histogram starts
when the request reaches vLLM, so a source reading vLLM alone never sees the latency a tight batch
limit causes. ``with_gate`` makes the snapshot tell the whole story, under the canonical names, so
``build_observation`` and the window math (resets included) apply unchanged:

- **waiting**: the gate's queue length is added to vLLM's waiting gauge, as one more series beside
  vLLM's engines (key ``GATE_ENGINE``), so summing over engines counts both. A page without vLLM's
  gauge stays without it: a total with an unknown part is unknown.
- **TTFT and TPOT**: the gate's exact per-request histograms (arrival at the gate to the first
  token, so its queueing is included; fine buckets with the SLO thresholds as edges) replace vLLM's
  for the pod. vLLM's stay when the gate has none, or when the gate saw no streamed request while
  vLLM saw requests (only non-streamed traffic so far): turning the gate on never hides a signal.
  Both are cumulative, so the choice is per scrape; the sidecar's own ``prefer_exact`` chooses per
  window, which a snapshot cannot.

Pure: the caller fetches the page. A family that is absent is ``None``, never 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

from fleetslo.core import conventions as cv
from fleetslo.core.histogram import BucketHistogram
from fleetslo.core.model import EngineSnapshot, SeriesKey

#: The engine key the gate's series get inside a snapshot: one gate per pod, apart from vLLM's
#: data-parallel ranks (labelled by number, or "" on pages without the label).
GATE_ENGINE = "gate"

#: Canonical vLLM histogram each gate histogram stands in for.
_HISTOGRAMS: Mapping[str, str] = {cv.GATE_TTFT: cv.Histogram.TTFT, cv.GATE_TPOT: cv.Histogram.TPOT}


@dataclass(frozen=True, slots=True)
class GateReading:
    """What one sidecar page says about its gate; a family that is absent is left out."""

    queue_length: float | None = None
    #: Cumulative histograms by the canonical vLLM name they stand in for.
    histograms: Mapping[str, BucketHistogram] = field(default_factory=dict)


def read_gate(families: Iterable[Metric], model: str | None = None) -> GateReading | None:
    """The gate's queue and latency histograms from parsed families; ``None`` without a gate.

    With ``model``, only that model's series (the gate labels every series with ``model_name``;
    series without the label, from sidecars before it had one, count for every model).
    """
    queue: float | None = None
    histograms: dict[str, BucketHistogram] = {}
    for family in families:
        samples = [s for s in family.samples if _of_model(s.labels, model)]
        if family.name == cv.GATE_QUEUE_LENGTH and samples:
            queue = math.fsum(s.value for s in samples)
        elif family.name in _HISTOGRAMS and (h := _histogram(samples)) is not None:
            histograms[_HISTOGRAMS[family.name]] = h
    if queue is None and not histograms:
        return None
    return GateReading(queue, histograms)


def _of_model(labels: Mapping[str, str], model: str | None) -> bool:
    return model is None or labels.get(cv.MODEL_LABEL, model) == model


def _histogram(samples: Iterable[Sample]) -> BucketHistogram | None:
    """Samples' buckets summed by ``le`` (one series per model per gate)."""
    buckets: dict[float, float] = {}
    total: float | None = None
    for s in samples:
        if s.name.endswith("_bucket") and "le" in s.labels:
            le = float(s.labels["le"])
            buckets[le] = buckets.get(le, 0.0) + s.value
        elif s.name.endswith("_sum"):
            total = (total or 0.0) + s.value
    if not buckets:
        return None
    bounds = tuple(sorted(buckets))
    return BucketHistogram(bounds, tuple(buckets[b] for b in bounds), total)


def with_gate(snapshot: EngineSnapshot, gate: GateReading | None) -> EngineSnapshot:
    """``snapshot`` as the pod's users see it: the gate's queue and latencies folded in."""
    if gate is None:
        return snapshot
    histograms = dict(snapshot.histograms)
    created = dict(snapshot.created)
    for family, h in gate.histograms.items():
        if _prefer_gate(h, snapshot.histogram(family)):
            histograms[family] = {GATE_ENGINE: h}
            # vLLM's ``_created`` would flag the gate's series as restarted whenever vLLM restarts.
            created = {key: at for key, at in created.items() if key[0] != family}
    return replace(
        snapshot,
        gauges=_with_queue(snapshot.gauges, gate.queue_length),
        histograms=histograms,
        created=created,
    )


def _prefer_gate(gate: BucketHistogram, vllm: BucketHistogram | None) -> bool:
    # An empty gate histogram still wins over an empty vLLM one: every pod of a streaming fleet
    # then keeps the gate's bucket layout, and merging pods never falls back to the common edges.
    return gate.count > 0 or vllm is None or vllm.count <= 0


def _with_queue(
    gauges: Mapping[str, Mapping[SeriesKey, float]], queue: float | None
) -> Mapping[str, Mapping[SeriesKey, float]]:
    waiting = gauges.get(cv.Gauge.WAITING)
    if queue is None or not waiting:
        return gauges
    return {**gauges, cv.Gauge.WAITING: {**waiting, (GATE_ENGINE, ""): queue}}
