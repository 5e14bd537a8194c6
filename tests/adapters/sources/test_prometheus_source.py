"""The Prometheus source against a real Prometheus scraping live-looking vLLM pages.

Two "pods" replay a real vLLM capture: one with vLLM's ``vllm:`` names, one as newer client
libraries let Prometheus 2.x store them (``vllm_``, the colon escaped). Each carries the
``namespace``/``pod`` target labels a PodMonitor would add. The source's p90 must equal
Prometheus's own ``histogram_quantile`` on the same data; stale data and a dead Prometheus must
show as such.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fleetslo.control.sources.prometheus import PrometheusClient, PrometheusSource
from fleetslo.core.errors import SourceUnavailable
from fleetslo.core.model import Observation, ReplicaCounts
from fleetslo.core.spec import FleetSLO
from fleetslo.testing import FakeVllmServer, replay_page

from tests.loop_support import make_slo
from tests.prometheus import PrometheusServer, free_port
from tests.support import AFTER_LOAD, capture

pytestmark = pytest.mark.integration

COLON = make_slo("qwen", model="tiny-llama", window="5s", ttft="0.5s")
ESCAPED = make_slo("escaped", kind="StatefulSet", model="tiny-escaped", window="5s", ttft="0.5s")
PODS = {"qwen": "qwen-7d9f8c6b5-x2kqp", "escaped": "escaped-0"}


def escaped_page(text: str) -> str:
    return text.replace("vllm:", "vllm_").replace('model_name="tiny-llama"', 'model_name="tiny-escaped"')


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    text = capture(AFTER_LOAD)
    colon = FakeVllmServer(replay_page(text, 5.0)).start()
    grow = replay_page(text, 5.0)
    escaped = FakeVllmServer(lambda: escaped_page(grow())).start()
    workdir: Path = tmp_path_factory.mktemp("prom")
    labels = {"qwen": (colon, PODS["qwen"]), "escaped": (escaped, PODS["escaped"])}
    static = [
        {"targets": [f"127.0.0.1:{fake.port}"], "labels": {"namespace": "infer", "pod": pod}}
        for fake, pod in labels.values()
    ]
    server = PrometheusServer(workdir, [], scrape_configs=[{"job_name": "vllm", "static_configs": static}])
    with server:
        source = PrometheusSource(PrometheusClient(server.url), max_age=10.0)
        yield {"server": server, "source": source, "colon": colon, "escaped": escaped, "settled": False}
        source.close()
    for fake in (colon, escaped):
        fake.stop()


def observe_when_ready(prom: dict[str, Any], slo: FleetSLO, timeout: float = 20.0) -> Observation:
    """The observation once rates are settled: Prometheus extrapolates less at a series' start, so
    the first windows of a new series under-report; wait one window past the first data."""
    source: PrometheusSource = prom["source"]
    deadline = time.monotonic() + timeout
    while True:
        obs = source.observe(slo, ReplicaCounts(1), 64, time.time())
        if (obs.request_rate is not None and obs.ttft.p90 is not None) or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    if not prom["settled"]:
        time.sleep(slo.spec.objectives.ttft.window + 2.0)
        prom["settled"] = True
    return source.observe(slo, ReplicaCounts(1), 64, time.time())


@pytest.mark.parametrize("slo", [COLON, ESCAPED], ids=["vllm-colon", "vllm-underscore"])
def test_observes_a_live_target_under_either_name_spelling(prom: dict[str, Any], slo: FleetSLO) -> None:
    obs = observe_when_ready(prom, slo)
    assert obs.request_rate == pytest.approx(5.0, rel=0.35)
    assert obs.ttft.p50 is not None and obs.ttft.p90 is not None and obs.itl.p90 is not None
    assert obs.ttft_attainment is not None and 0.0 <= obs.ttft_attainment <= 1.0
    assert obs.running is not None and obs.waiting is not None and obs.kv_cache_usage is not None
    assert obs.replicas_reporting == 1
    assert obs.data_age is not None and obs.data_age < 3.0
    assert obs.gpu_utilization is None  # no GPU exporter here: unknown, not 0


def test_quantiles_equal_prometheus_histogram_quantile(prom: dict[str, Any]) -> None:
    observe_when_ready(prom, COLON)
    at = time.time()
    obs = prom["source"].observe(COLON, ReplicaCounts(1), None, at)
    query = (
        'histogram_quantile(0.9, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{pod="%s"}[5s])))'
    )
    expected = float(prom["server"].query(query % PODS["qwen"], at=at)[0]["value"][1])
    assert obs.ttft.p90 == pytest.approx(expected, abs=1e-9)
    # and the bucket it was interpolated in, whose edges are the histogram's own
    assert obs.ttft.p90_bucket is not None
    low, high = obs.ttft.p90_bucket
    assert low <= obs.ttft.p90 <= high and low < high


def test_a_clock_ahead_of_the_data_sees_stale_data_and_no_reporting_replicas(prom: dict[str, Any]) -> None:
    observe_when_ready(prom, COLON)
    obs = prom["source"].observe(COLON, ReplicaCounts(1), None, time.time() + 40.0)
    assert obs.data_age is not None and obs.data_age >= 39.0
    assert obs.replicas_reporting == 0


def test_a_prometheus_that_is_down_is_a_transient_failure() -> None:
    source = PrometheusSource(PrometheusClient(f"http://127.0.0.1:{free_port()}", timeout=1.0))
    with pytest.raises(SourceUnavailable):
        source.observe(COLON, ReplicaCounts(1), None, time.time())
    source.close()


def test_a_target_that_stops_answering_vanishes_instead_of_looking_idle(prom: dict[str, Any]) -> None:
    observe_when_ready(prom, ESCAPED)
    prom["escaped"].status = 503
    deadline = time.monotonic() + 15
    while True:
        obs = prom["source"].observe(ESCAPED, ReplicaCounts(1), None, time.time())
        if obs.replicas_reporting == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert obs.replicas_reporting == 0
    assert obs.running is None and obs.waiting is None  # never 0
