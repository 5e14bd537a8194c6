"""Parse + derive of a large vLLM page versus prometheus_client's parser alone, side by side.

Target (issue 2): our full parse + derive (parse the page, fold it into the tracker's totals,
compute every windowed signal for three windows) takes at most 0.5x the time prometheus_client's
``text_string_to_metric_families`` needs just to parse the same page. Runs interleaved, reports
the median of each and their ratio.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from fleetslo.core.metrics.exposition import parse_vllm
from fleetslo.sidecar.exporter.tracker import EngineTracker
from fleetslo.sidecar.thresholds import SloThresholds
from fleetslo.testing import grow_capture
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.pages import large_page, sample_count

WINDOWS = (30.0, 60.0, 300.0)
SLO = SloThresholds(ttft=2.0, tpot=0.05)


def prometheus_client_parse(page: str) -> Callable[[], object]:
    return lambda: [f.samples for f in text_string_to_metric_families(page)]


def fleetslo_parse_and_derive(pages: list[str]) -> Callable[[], object]:
    tracker = EngineTracker(ring_size=70, interval=5.0)
    for i, page in enumerate(pages[:-1]):  # history so every window has a start
        tracker.record_success(5.0 * i * 10, 0.0, parse_vllm(page))
    clock = [5.0 * len(pages) * 10]

    def run() -> object:
        clock[0] += 5.0
        tracker.record_success(clock[0], 0.0, parse_vllm(pages[-1]))
        return tracker.signals(WINDOWS, SLO)

    return run


def measure(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main(rounds: int = 15) -> dict[str, float]:
    page = large_page()
    history = [grow_capture(page, 1.0 + i) for i in range(8)]
    ours, theirs = fleetslo_parse_and_derive(history), prometheus_client_parse(history[-1])
    ours(), theirs()  # warm up
    a, b = [], []
    for _ in range(rounds):
        a.append(measure(ours))
        b.append(measure(theirs))
    result = {
        "samples": float(sample_count(page)),
        "fleetslo_parse_derive_ms": statistics.median(a) * 1000,
        "prometheus_client_parse_ms": statistics.median(b) * 1000,
    }
    result["ratio"] = result["fleetslo_parse_derive_ms"] / result["prometheus_client_parse_ms"]
    print(
        f"page: {int(result['samples'])} samples (8 models x 4 engines)\n"
        f"fleetslo parse+derive:   {result['fleetslo_parse_derive_ms']:8.2f} ms (median of {rounds})\n"
        f"prometheus_client parse: {result['prometheus_client_parse_ms']:8.2f} ms\n"
        f"ratio: {result['ratio']:.3f}  (target <= 0.5)"
    )
    return result


if __name__ == "__main__":
    main()
