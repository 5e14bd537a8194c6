"""The forecast bootstrap against a real Prometheus holding three days of a fleet's counters.

``promtool tsdb create-blocks-from openmetrics`` backfills three days of vLLM's request and token
counters (a daily curve, one sample a minute) into a fresh TSDB; the real Prometheus serves it;
``PrometheusSource.load_history`` reads it through ``/api/v1/query_range`` as the controller does
at start, and the ``fleetslo`` policy's seasonal forecast, filled from it, forecasts the curve.
A Prometheus that is down is a start without history, never zeros.
"""

from __future__ import annotations

import math
import subprocess
import time
from collections.abc import Iterator

import pytest
from fleetslo.control.sources.prometheus import PrometheusClient, PrometheusSource
from fleetslo.control.state import Restorer
from fleetslo.core.errors import SourceUnavailable
from fleetslo.policy.fleetslo import FleetSLOPolicy

from tests.loop_support import make_slo
from tests.prometheus import PrometheusServer, free_port
from tests.support import require_tool

SLO = make_slo("qwen", namespace="infer", model="Qwen/Qwen3")
DAY = 86_400.0
PROMPT, OUTPUT = 1500.0, 250.0
LABELS = 'model_name="Qwen/Qwen3",namespace="infer",pod="qwen-6d4f9b7c8-x2x9k"'


def rate(t: float) -> float:
    """Requests/s: 10 at night, 30 in the afternoon."""
    return 20.0 - 10.0 * math.cos(2 * math.pi * (t % DAY) / DAY)


def openmetrics(start: float, end: float) -> str:
    """vLLM's three counters, cumulative, one sample a minute from ``start`` to ``end``."""
    families = {"request_success": 1.0, "prompt_tokens": PROMPT, "generation_tokens": OUTPUT}
    lines = []
    for family, per_request in families.items():
        lines.append(f"# TYPE vllm:{family} counter")
        total = 0.0
        t = start
        while t <= end:
            total += rate(t) * 60.0 * per_request
            lines.append(f"vllm:{family}_total{{{LABELS}}} {total:.1f} {t:.0f}")
            t += 60.0
    return "\n".join([*lines, "# EOF", ""])


@pytest.fixture
def source(request: pytest.FixtureRequest) -> Iterator[PrometheusSource]:
    """A source on the module's Prometheus, closed after the test."""
    server, _ = request.getfixturevalue("prometheus")
    source = PrometheusSource(PrometheusClient(server.url, timeout=30.0))
    yield source
    source.close()


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PrometheusServer, float]]:
    promtool = require_tool("promtool", "apt-get install prometheus")
    workdir = tmp_path_factory.mktemp("prometheus")
    now = time.time()
    data = workdir / "history.om"
    # up to half a minute ago, as a Prometheus that scrapes every 30 s holds it
    data.write_text(openmetrics(now - 3 * DAY, now - 30.0), encoding="utf-8")
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(data), str(workdir / "tsdb")],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    with PrometheusServer(workdir, targets=[]) as server:
        yield server, now


def test_the_source_reads_three_days_of_load_at_the_forecaster_s_bin(
    prometheus: tuple[PrometheusServer, float], source: PrometheusSource
) -> None:
    _, now = prometheus
    history = source.load_history(SLO, now, days=14, step=300.0)
    # 14 days asked, 3 held: one sample per 5 minutes where there is data, none before it
    assert 3 * 288 - 4 <= len(history) <= 3 * 288 + 1
    # each sample is dated in the middle of its aligned step: the first step may start before the data
    assert history[0].at >= now - 3 * DAY - 150.0
    for sample in history[1:]:  # the first step is only partly after the first sample
        assert sample.requests is not None and sample.tokens is not None
        # a counter's rate over the 5 minutes before the sample: the curve's mean there
        assert sample.requests == pytest.approx(rate(sample.at - 150.0), rel=0.05)
        assert sample.tokens == pytest.approx((PROMPT + OUTPUT) * sample.requests, rel=1e-3)


def test_the_controller_bootstraps_the_seasonal_forecast_from_it(
    prometheus: tuple[PrometheusServer, float], source: PrometheusSource
) -> None:
    _, now = prometheus
    policy = FleetSLOPolicy()
    restorer = Restorer({}, history_days=14)
    state = restorer.start(SLO, policy, source, policy.initial_state(SLO.spec), now)
    assert restorer.started["qwen"].history_used >= 3 * 288 - 4
    assert state.forecast.seasonal is not None and state.forecast.seasonal.ready()
    # the first live sample, then the forecast one cold start ahead follows the daily curve
    tokens_now = (PROMPT + OUTPUT) * rate(now)
    ahead = state.forecast.update(now, tokens_now, 600.0).seasonal_ahead(300.0)
    assert ahead == pytest.approx((PROMPT + OUTPUT) * rate(now + 300.0), rel=0.1)


def test_a_prometheus_that_is_down_is_a_start_without_history() -> None:
    source = PrometheusSource(PrometheusClient(f"http://127.0.0.1:{free_port()}", timeout=2.0))
    try:
        with pytest.raises(SourceUnavailable):
            source.load_history(SLO, time.time(), days=14, step=300.0)
        policy = FleetSLOPolicy()
        restorer = Restorer({}, history_days=14)
        state = restorer.start(SLO, policy, source, policy.initial_state(SLO.spec), time.time())
    finally:
        source.close()
    assert restorer.started["qwen"].history_used == 0
    assert state.forecast.seasonal is not None and state.forecast.seasonal.bins == ()
