"""The direct source without sockets: GPU busy time integrated per pod, forgotten pods, the shared builder."""

from __future__ import annotations

import httpx
import pytest
from fleetslo.control.ports import PodEndpoint
from fleetslo.control.sources.direct import DirectSource
from fleetslo.core.model import ReplicaCounts
from fleetslo.testing import FakePodDirectory, grow_capture

from tests.loop_support import make_slo
from tests.support import AFTER_LOAD, capture

SLO = make_slo("qwen", model="tiny-llama", window="30s")
TEXT = capture(AFTER_LOAD)


def source_for(
    pages: dict[str, list[str]], utilization: float | None
) -> tuple[DirectSource, FakePodDirectory]:
    served = {name: iter(p) for name, p in pages.items()}

    def handler(request: httpx.Request) -> httpx.Response:
        pod = request.url.host
        if request.url.path == "/metrics":
            if utilization is None:
                return httpx.Response(200, text="")
            return httpx.Response(200, text=f'fleetslo_gpu_utilization_ratio{{gpu="0"}} {utilization}\n')
        return httpx.Response(200, text=next(served[pod]))

    pods = FakePodDirectory()
    pods.set(SLO.spec.target, [PodEndpoint(name, name, ready=True) for name in pages])
    source = DirectSource(pods, interval=15.0, transport=httpx.MockTransport(handler))
    return source, pods


def test_gpu_busy_seconds_are_integrated_from_the_sidecars_gauge() -> None:
    source, _ = source_for({"a": [grow_capture(TEXT, f) for f in (1.0, 1.5, 2.0)]}, utilization=0.5)
    for now in (1000.0, 1015.0, 1030.0):
        obs = source.observe(SLO, ReplicaCounts(1), None, now)
    assert obs.gpu_utilization == pytest.approx(0.5)
    assert obs.replicas_reporting == 1 and obs.request_rate is not None and obs.request_rate > 0
    source.close()


def test_pods_gone_for_longer_than_the_window_are_forgotten() -> None:
    source, pods = source_for({"a": [TEXT] * 10, "b": [TEXT] * 10}, utilization=None)
    source.observe(SLO, ReplicaCounts(2), None, 1000.0)
    pods.set(SLO.spec.target, [PodEndpoint("a", "a", ready=True)])
    obs = source.observe(SLO, ReplicaCounts(1), None, 1060.0)
    assert set(source._histories["qwen"]) == {"a"}
    assert obs.replicas_reporting == 1 and obs.gpu_utilization is None
    source.close()


def test_a_window_start_is_found_when_observations_come_slower_than_the_scheduler_ticks() -> None:
    source, _ = source_for({"a": [grow_capture(TEXT, 1.0 + i) for i in range(10)]}, utilization=None)
    source.interval = 5.0  # the scheduler's tick; the policy observes every 15 s
    for i in range(6):  # windows of 30 s: starts 30 s back are found at 15 s spacing
        obs = source.observe(SLO, ReplicaCounts(1), None, 1000.0 + 15 * i)
    per_step = (_finished(grow_capture(TEXT, 2.0)) - _finished(TEXT)) / 15
    assert obs.request_rate == pytest.approx(per_step)
    source.close()


def _finished(text: str) -> float:
    from fleetslo.core.metrics.exposition import parse_vllm

    return parse_vllm(text)["tiny-llama"].counter("request_success") or 0.0
