"""The Prometheus source on canned answers: parsing into an Observation, and error classification."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fleetslo.control.sources.prometheus import (
    PrometheusClient,
    PrometheusSource,
    group_samples,
    to_observation,
)
from fleetslo.core.errors import BadQuery, SourceUnavailable
from fleetslo.core.model import ReplicaCounts

from tests.loop_support import make_slo

SLO = make_slo(ttft="0.5s", tpot="50ms", window="60s")
NOW = 1_700_000_000.0


def sample(signal: str, value: float, **labels: str) -> dict[str, Any]:
    return {"metric": {"fleetslo_signal": signal, **labels}, "value": [NOW, repr(value)]}


def ttft_buckets() -> list[dict[str, Any]]:
    # 10 req/s: 6 under 0.25 s, 9 under 0.5 s, all under 1 s
    return [
        sample("ttft", v, le=le) for le, v in (("0.25", 6.0), ("0.5", 9.0), ("1.0", 10.0), ("+Inf", 10.0))
    ]


def answer(result: list[dict[str, Any]], status: int = 200) -> httpx.MockTransport:
    body = {"status": "success", "data": {"resultType": "vector", "result": result}}
    return httpx.MockTransport(lambda request: httpx.Response(status, json=body))


def test_a_full_answer_becomes_an_observation() -> None:
    result = [
        *ttft_buckets(),
        sample("request_rate", 10.0),
        sample("running", 12.0),
        sample("waiting", 3.0),
        sample("kv_cache_usage", 0.4),
        sample("gpu_utilization", 0.7),
        sample("newest_sample", NOW - 4.0),
        sample("replicas_reporting", 2.0),
    ]
    obs = to_observation(SLO, group_samples(result), replicas=ReplicaCounts(2), batch_limit=64, now=NOW)
    assert obs.target == "qwen" and obs.window == 60.0 and obs.batch_limit == 64
    assert obs.ttft.p50 == pytest.approx(0.25 * 5 / 6)
    assert obs.ttft.p90 == pytest.approx(0.5)
    assert obs.ttft_attainment == pytest.approx(0.9)
    assert (obs.request_rate, obs.running, obs.waiting, obs.kv_cache_usage) == (10.0, 12.0, 3.0, 0.4)
    assert obs.gpu_utilization == 0.7
    assert obs.data_age == pytest.approx(4.0) and obs.replicas_reporting == 2
    assert obs.tpot.p90 is None and obs.tpot_attainment is None  # absent, never 0


def test_no_series_at_all_is_an_observation_without_signals() -> None:
    obs = to_observation(SLO, group_samples([]), replicas=ReplicaCounts(3), batch_limit=None, now=NOW)
    assert obs.replicas_reporting == 0 and obs.data_age is None
    assert obs.request_rate is None and obs.running is None and obs.ttft.p90 is None


def test_nan_rates_are_not_measurements() -> None:
    samples = group_samples([{"metric": {"fleetslo_signal": "request_rate"}, "value": [NOW, "NaN"]}])
    assert samples == {}


def test_the_source_posts_one_query_with_the_evaluation_time_and_token() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"status": "success", "data": {"resultType": "vector", "result": []}})

    client = PrometheusClient(
        "http://prom:9090/", token=lambda: "s3cret", transport=httpx.MockTransport(handler)
    )
    PrometheusSource(client).observe(SLO, ReplicaCounts(1), None, NOW)
    assert len(seen) == 1
    request = seen[0]
    assert request.method == "POST" and request.url.path == "/api/v1/query"
    assert request.headers["Authorization"] == "Bearer s3cret"
    form = dict(httpx.QueryParams(request.content.decode()))
    assert float(form["time"]) == NOW and "fleetslo_signal" in form["query"]


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_overload_and_server_errors_are_transient(status: int) -> None:
    client = PrometheusClient("http://prom:9090", transport=answer([], status))
    with pytest.raises(SourceUnavailable):
        client.query("up", NOW)


@pytest.mark.parametrize("exc", [httpx.ConnectError("refused"), httpx.ReadTimeout("slow")])
def test_network_failures_are_transient(exc: Exception) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    client = PrometheusClient("http://prom:9090", transport=httpx.MockTransport(handler))
    with pytest.raises(SourceUnavailable) as caught:
        client.query("up", NOW)
    assert caught.value.__cause__ is exc


def bad(status: int, body: object) -> httpx.MockTransport:
    text = body if isinstance(body, str) else json.dumps(body)
    return httpx.MockTransport(lambda request: httpx.Response(status, text=text))


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, {"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}),
        (422, {"status": "error", "errorType": "execution", "error": "many-to-many matching"}),
        (401, "Unauthorized"),
        (404, "404 page not found"),
        (200, "<html>Grafana</html>"),
        (200, {"status": "success", "data": {"resultType": "matrix", "result": []}}),
    ],
)
def test_refused_queries_and_non_prometheus_answers_are_permanent(status: int, body: object) -> None:
    client = PrometheusClient("http://prom:9090", transport=bad(status, body))
    with pytest.raises(BadQuery):
        client.query("up", NOW)


def test_error_messages_quote_at_most_a_short_body() -> None:
    client = PrometheusClient("http://prom:9090", transport=bad(503, "x" * 10_000))
    with pytest.raises(SourceUnavailable) as caught:
        client.query("up", NOW)
    assert len(str(caught.value)) < 400
