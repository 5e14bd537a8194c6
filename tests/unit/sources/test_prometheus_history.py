"""The arrival-rate history the seasonal forecast is bootstrapped from at start (query_range)."""

from __future__ import annotations

import math

import httpx
import pytest
from fleetslo.control.sources.prometheus import PrometheusClient, PrometheusSource
from fleetslo.core.errors import BadQuery, SourceUnavailable
from fleetslo.policy.fleetslo.forecast import RateForecast

from tests.loop_support import make_slo

SLO = make_slo(ttft="0.5s", tpot="50ms", window="60s")
NOW = 1_700_000_000.0
DAY = 86_400.0


def day_curve(t: float) -> float:
    return 10.0 * (1 + 0.5 * math.cos(2 * math.pi * (t % DAY) / DAY))


def test_history_is_one_range_query_and_bootstraps_the_seasonal_forecast() -> None:
    seen: list[dict[str, str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        form = dict(httpx.QueryParams(request.content.decode()))
        seen.append({"path": request.url.path, **form})
        start, end, step = float(form["start"]), float(form["end"]), float(form["step"])
        values = [
            [start + k * step, repr(day_curve(start + k * step))]
            for k in range(int((end - start) / step) + 1)
        ]
        values[3][1] = "NaN"  # a 0/0 rate: not a measurement
        body = {
            "status": "success",
            "data": {"resultType": "matrix", "result": [{"metric": {}, "values": values}]},
        }
        return httpx.Response(200, json=body)

    source = PrometheusSource(PrometheusClient("http://prom:9090", transport=httpx.MockTransport(handler)))
    history = source.arrival_history(SLO, NOW, days=3, step=300)
    assert len(seen) == 1 and seen[0]["path"] == "/api/v1/query_range"
    assert float(seen[0]["start"]) == NOW - 3 * DAY and float(seen[0]["step"]) == 300
    assert "rate(" in seen[0]["query"] and "[300s]" in seen[0]["query"]
    assert len(history) == 3 * 288  # one NaN left out of 3·288 + 1
    # at start, before the first observation: the history, then the live samples
    forecast = RateForecast().bootstrapped(history).update(NOW, day_curve(NOW), 600)
    predicted = forecast.seasonal_ahead(300)
    assert predicted == pytest.approx(day_curve(NOW + 300), rel=0.03)
    assert RateForecast().update(NOW, day_curve(NOW), 600).seasonal_ahead(300) is None  # no history


def test_history_errors_are_classified() -> None:
    def answer(status: int, body: object) -> PrometheusClient:
        transport = httpx.MockTransport(lambda request: httpx.Response(status, json=body))
        return PrometheusClient("http://prom:9090", transport=transport)

    with pytest.raises(SourceUnavailable):
        answer(503, {}).query_range("up", 0, 1, 1)
    with pytest.raises(BadQuery, match="matrix"):
        answer(200, {"status": "success", "data": {"resultType": "vector", "result": []}}).query_range(
            "up", 0, 1, 1
        )
    empty = {"status": "success", "data": {"resultType": "matrix", "result": []}}
    assert answer(200, empty).query_range("up", 0, 1, 1) == []  # no series: no history, not zeros


def test_load_history_reads_requests_and_tokens_over_the_forecaster_s_bin() -> None:
    """Two range queries (requests/s, prompt + generated tokens/s) at the same step, joined by
    time; a step one of them lacks stays missing there, never 0."""
    queries: list[dict[str, str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        form = dict(httpx.QueryParams(request.content.decode()))
        queries.append(form)
        start, step = float(form["start"]), float(form["step"])
        tokens = "+" in form["query"]
        times = [start + k * step for k in range(4) if not (tokens and k == 2)]
        values = [[t, repr(1750.0 * day_curve(t) if tokens else day_curve(start))] for t in times]
        body = {
            "status": "success",
            "data": {"resultType": "matrix", "result": [{"metric": {}, "values": values}]},
        }
        return httpx.Response(200, json=body)

    source = PrometheusSource(PrometheusClient("http://prom:9090", transport=httpx.MockTransport(handler)))
    history = source.load_history(SLO, NOW, days=14, step=300)
    assert len(queries) == 2 and {float(q["step"]) for q in queries} == {300.0}
    end = NOW // 300 * 300  # aligned to the forecaster's bins
    assert all(float(q["start"]) == end - 14 * DAY and float(q["end"]) == end for q in queries)
    requests, tokens = sorted(queries, key=lambda q: "+" in q["query"])
    assert "request_success" in requests["query"] and "[300s]" in requests["query"]
    assert "prompt_tokens" in tokens["query"] and "generation_tokens" in tokens["query"]
    # each dated at the middle of the 5 minutes its rate covers: in the bin of those 5 minutes
    assert [s.at for s in history] == [end - 14 * DAY + k * 300 - 150 for k in range(4)]
    assert history[2].tokens is None and history[2].requests is not None  # missing, not 0
    assert history[1].tokens == pytest.approx(1750.0 * day_curve(end - 14 * DAY + 300))
