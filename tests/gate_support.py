"""A sidecar ``/metrics`` page with the gate's families, rendered by the gate's real collector.

The queue is set directly (``QueuedAdmission``) so a page can show a binding limit with requests
waiting behind it without an event loop; the histograms are the gate's own ``GateStats``.
"""

from __future__ import annotations

from collections.abc import Iterable

from fleetslo.sidecar.gate.admission import Admission
from fleetslo.sidecar.gate.collector import GateCollector
from fleetslo.sidecar.gate.stats import GateStats
from prometheus_client import CollectorRegistry, generate_latest


class QueuedAdmission(Admission):
    """An admission whose limit binds: ``limit`` in flight and ``queued`` waiting behind them."""

    def __init__(self, limit: int, queued: int) -> None:
        super().__init__(limit, max_queue=1024)
        self.inflight = limit
        self.waiting = queued

    @property
    def queued(self) -> int:
        return self.waiting


def render(admission: Admission, stats: GateStats) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GateCollector(admission, stats))
    return generate_latest(registry).decode()


def gate_page(
    queued: int,
    ttft: Iterable[float] = (),
    tpot: Iterable[float] = (),
    limit: int = 4,
    model: str = "tiny-llama",
) -> str:
    """A page whose gate has ``queued`` requests of ``model`` waiting and saw the given TTFT/TPOT."""
    gate = GateStats(slo_ttft=0.5, slo_tpot=0.05)
    stats = gate.model(model)
    stats.inflight, stats.queued = limit, queued
    for value in ttft:
        stats.ttft.observe(value)
    for value in tpot:
        stats.tpot.observe(value)
    return render(QueuedAdmission(limit, queued), gate)


def vllm_page(requests: int, waiting: int = 1, ttft: float = 0.08, model: str = "tiny-llama") -> str:
    """A vLLM page after ``requests`` requests whose TTFT inside vLLM was ``ttft`` each (fast: the
    queue is in the gate), with ``waiting`` requests in vLLM's own queue."""
    labels = f'engine="0",model_name="{model}"'
    lines = [
        f"vllm:num_requests_running{{{labels}}} 4.0",
        f"vllm:num_requests_waiting{{{labels}}} {float(waiting)}",
        f'vllm:request_success_total{{{labels},finished_reason="length"}} {float(requests)}',
    ]
    for le in ("0.1", "0.25", "0.5", "1.0", "2.5", "+Inf"):
        count = requests if ttft <= float(le) else 0
        lines.append(f'vllm:time_to_first_token_seconds_bucket{{{labels},le="{le}"}} {float(count)}')
    lines.append(f"vllm:time_to_first_token_seconds_sum{{{labels}}} {requests * ttft!r}")
    lines.append(f"vllm:time_to_first_token_seconds_count{{{labels}}} {float(requests)}")
    return "\n".join(lines) + "\n"
