"""The Prometheus source against a real Prometheus that scrapes vLLM pages and gated sidecar pages.

Each pod has two scrape targets, as a PodMonitor would make them: vLLM's ``/metrics`` and the
sidecar's, both labelled with the pod. ``qwen``'s gate holds 7 requests behind a binding limit and
measured ~2.9 s TTFTs (vLLM, which starts the clock only at admission, saw 0.08 s). ``plain``'s gate
has an empty queue and saw no streamed request (non-streamed traffic only): vLLM's signals stay.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fleetslo.control.sources.prometheus import PrometheusClient, PrometheusSource
from fleetslo.core import conventions as cv
from fleetslo.core.model import Observation, ReplicaCounts
from fleetslo.core.spec import FleetSLO
from fleetslo.testing import FakeVllmServer

from tests.gate_support import gate_page, vllm_page
from tests.loop_support import make_slo
from tests.prometheus import PrometheusServer

pytestmark = pytest.mark.integration

GATED = make_slo("qwen", model="tiny-llama", window="5s", ttft="0.5s")
PLAIN = make_slo("plain", kind="StatefulSet", model="tiny-plain", window="5s", ttft="0.5s")
PODS = {"qwen": "qwen-7d9f8c6b5-x2kqp", "plain": "plain-0"}
RATE = 10.0  # requests per second on each pod


def growing(render: Callable[[int], str]) -> Callable[[], str]:
    """A page of ``RATE`` requests per second since the server started."""
    started = time.monotonic()
    return lambda: render(int(RATE * (time.monotonic() - started)))


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    servers = {
        PODS["qwen"]: [
            FakeVllmServer(growing(lambda n: vllm_page(n, waiting=1))),
            FakeVllmServer(growing(lambda n: gate_page(queued=7, ttft=[2.9] * n, tpot=[0.03] * n))),
        ],
        PODS["plain"]: [
            FakeVllmServer(growing(lambda n: vllm_page(n, waiting=1, model="tiny-plain"))),
            FakeVllmServer(gate_page(queued=0)),
        ],
    }
    static = [
        {"targets": [f"127.0.0.1:{s.start().port}"], "labels": {"namespace": "infer", "pod": pod}}
        for pod, pair in servers.items()
        for s in pair
    ]
    jobs = [{"job_name": "pods", "static_configs": static}]
    workdir: Path = tmp_path_factory.mktemp("prom-gate")
    with PrometheusServer(workdir, [], scrape_configs=jobs) as server:
        source = PrometheusSource(PrometheusClient(server.url), max_age=10.0)
        yield {"server": server, "source": source, "settled": False}
        source.close()
    for pair in servers.values():
        for s in pair:
            s.stop()


def observe_settled(prom: dict[str, Any], slo: FleetSLO, timeout: float = 20.0) -> Observation:
    """Once a full window of data is in (rates at a series' start are extrapolated less)."""
    source: PrometheusSource = prom["source"]
    deadline = time.monotonic() + timeout
    while source.observe(slo, ReplicaCounts(1), 4, time.time()).ttft.p90 is None:
        assert time.monotonic() < deadline, "no TTFT in time"
        time.sleep(0.3)
    if not prom["settled"]:
        time.sleep(slo.spec.objectives.ttft.window + 2.0)
        prom["settled"] = True
    return source.observe(slo, ReplicaCounts(1), 4, time.time())


def test_waiting_adds_the_gate_queue_and_ttft_comes_from_the_gate(prom: dict[str, Any]) -> None:
    obs = observe_settled(prom, GATED)
    assert obs.waiting == 8.0  # 1 in vLLM's queue + 7 in the gate's
    assert obs.ttft.p90 == pytest.approx(2.95)  # the gate's, queueing included; vLLM saw 0.08 s
    assert obs.ttft_attainment == 0.0
    assert obs.tpot.p90 is not None and obs.tpot_attainment == 1.0  # the gate's exact TPOT
    assert obs.request_rate == pytest.approx(RATE, rel=0.35) and obs.replicas_reporting == 1


def test_the_quantile_equals_prometheus_own_on_the_gate_buckets(prom: dict[str, Any]) -> None:
    observe_settled(prom, GATED)
    at = time.time()
    obs = prom["source"].observe(GATED, ReplicaCounts(1), None, at)
    rates = f'rate({cv.GATE_TTFT}_bucket{{pod="{PODS["qwen"]}"}}[5s])'
    expected = float(
        prom["server"].query(f"histogram_quantile(0.9, sum by (le) ({rates}))", at=at)[0]["value"][1]
    )
    assert obs.ttft.p90 == pytest.approx(expected, abs=1e-9)


def test_a_gate_without_queue_or_streamed_requests_leaves_vllms_signals(prom: dict[str, Any]) -> None:
    obs = observe_settled(prom, PLAIN)
    assert obs.waiting == 1.0  # vLLM's, plus an empty gate queue: counted once, not blanked
    assert obs.ttft.p90 == pytest.approx(0.09)  # vLLM's buckets, not the gate's empty ones
    assert obs.ttft_attainment == 1.0
