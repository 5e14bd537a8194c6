"""The direct source scraping real fleetslo sidecars in front of live-looking vLLM pages.

Each "pod" is a real sidecar (``fleetslo.sidecar.app``) on its own loopback address (127.0.0.N,
one port for all, as pods share a container port) in front of a fake vLLM replaying a real
capture. A pod whose vLLM goes down stops reporting; it never counts as idle.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fleetslo.control.ports import PodEndpoint
from fleetslo.control.sources.direct import DirectSource, mean_gauge
from fleetslo.core.model import Observation, ReplicaCounts
from fleetslo.sidecar.app import serve
from fleetslo.sidecar.settings import ExporterSettings
from fleetslo.testing import FakePodDirectory, FakeVllmServer, replay_page

from tests.loop_support import make_slo
from tests.support import AFTER_LOAD, capture

SLO = make_slo("qwen", model="tiny-llama", window="2s", ttft="0.5s")
TARGET = SLO.spec.target


class SidecarThread:
    """A real sidecar on its own event loop thread."""

    def __init__(self, vllm_url: str, listen: str) -> None:
        settings = ExporterSettings(vllm_url=vllm_url, listen=listen, interval=0.1, windows=[1.0])
        self._loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()
        self._thread = threading.Thread(
            target=self._loop.run_until_complete, args=(serve(settings, self._stop),)
        )
        self._thread.start()

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=10)
        self._loop.close()


def shared_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def fleet() -> Iterator[dict[str, Any]]:
    text, port = capture(AFTER_LOAD), shared_port()
    vllms = [FakeVllmServer(replay_page(text, rps)).start() for rps in (4.0, 2.0)]
    ips = ["127.0.0.2", "127.0.0.3"]
    sidecars = [SidecarThread(v.url, f"{ip}:{port}") for v, ip in zip(vllms, ips, strict=True)]
    pods = FakePodDirectory()
    pods.set(TARGET, [
        PodEndpoint("qwen-a", ips[0], ready=True),
        PodEndpoint("qwen-b", ips[1], ready=True),
        PodEndpoint("qwen-c", "127.0.0.4", ready=False),  # starting: not scraped
    ])  # fmt: skip
    source = DirectSource(pods, port=port, timeout=1.0, interval=0.25)
    time.sleep(0.4)  # the sidecars' first scrapes
    yield {"source": source, "vllms": vllms}
    source.close()
    for s in sidecars:
        s.stop()
    for v in vllms:
        v.stop()


def run(source: DirectSource, seconds: float, step: float = 0.25) -> Observation:
    end = time.monotonic() + seconds
    while True:
        obs = source.observe(SLO, ReplicaCounts(3, 0), 64, time.time())
        if time.monotonic() >= end:
            return obs
        time.sleep(step)


def test_sums_ready_pods_over_the_window(fleet: dict[str, Any]) -> None:
    obs = run(fleet["source"], 2.6)
    assert obs.replicas_reporting == 2
    assert obs.request_rate == pytest.approx(6.0, rel=0.3)
    assert obs.ttft.p90 is not None and obs.ttft_attainment is not None
    assert obs.ttft.p90_bucket is not None
    assert obs.ttft.p90_bucket[0] <= obs.ttft.p90 <= obs.ttft.p90_bucket[1]
    assert obs.running is not None and obs.data_age is not None and obs.data_age < 0.5
    assert obs.gpu_utilization is None  # these sidecars read no GPU: unknown, not idle


def test_a_pod_whose_vllm_is_down_stops_reporting_and_never_looks_idle(fleet: dict[str, Any]) -> None:
    both = run(fleet["source"], 1.0)
    fleet["vllms"][1].status = 503
    time.sleep(0.5)  # the sidecar notices at its next scrape and answers /vllm/metrics with 503
    one = run(fleet["source"], 0.5)
    assert both.replicas_reporting == 2 and one.replicas_reporting == 1
    assert one.running is not None and both.running is not None
    assert one.running == pytest.approx(both.running / 2)  # the survivor's own gauge, not averaged with 0


def test_no_pod_answering_gives_an_observation_without_signals() -> None:
    pods = FakePodDirectory()
    pods.set(TARGET, [PodEndpoint("qwen-a", "127.0.0.9", ready=True)])
    source = DirectSource(pods, port=shared_port(), timeout=0.5)
    obs = source.observe(SLO, ReplicaCounts(1), None, time.time())
    source.close()
    assert obs.replicas_reporting == 0 and obs.request_rate is None and obs.data_age is None


def test_gpu_utilization_is_the_mean_over_a_pods_gpus() -> None:
    page = "\n".join([
        "# TYPE fleetslo_gpu_utilization_ratio gauge",
        'fleetslo_gpu_utilization_ratio{gpu="0"} 0.5',
        'fleetslo_gpu_utilization_ratio{gpu="1"} 1.0',
    ]) + "\n"  # fmt: skip
    assert mean_gauge(page, "fleetslo_gpu_utilization_ratio") == pytest.approx(0.75)
    assert mean_gauge("", "fleetslo_gpu_utilization_ratio") is None
