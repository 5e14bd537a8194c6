"""Observations from a Prometheus-compatible HTTP API (Prometheus, Thanos Query, Mimir, VictoriaMetrics).

Only ``POST /api/v1/query`` is used (form-encoded, so long selectors never hit URL limits), with an
optional bearer token and TLS options, and ``/api/v1/query_range`` once per leadership term for the
load history the seasonal forecast is bootstrapped from (``PrometheusSource.load_history``).
One query per target per tick (see ``promql``). The answer
becomes an ``Observation``: quantiles and the SLO attainment come from the windowed bucket rates by
the same Prometheus-exact math as everywhere else, ``data_age`` from the newest sample's own
timestamp (not the evaluation time, which is always "now"), ``replicas_reporting`` from the pods
whose newest sample is younger than ``max_age``. A target with no series at all gives an
observation with every signal ``None`` — the policy holds on that; the source never invents zeros.

Failures are classified: connect errors, timeouts, 429 and 5xx are ``SourceUnavailable``
(transient); 4xx, a non-JSON answer or an error status are ``BadQuery`` (permanent). This module
never decides and never retries; the loop does that.
"""

from __future__ import annotations

import math
import ssl
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx

from fleetslo.control.sources.promql import SIGNAL_LABEL, Selection, Signal, observation_query, signal_exprs
from fleetslo.core.errors import BadQuery, SourceUnavailable
from fleetslo.core.histogram import BucketHistogram, fraction_at_or_below
from fleetslo.core.metrics.window import quantiles_of
from fleetslo.core.model import Observation, ReplicaCounts
from fleetslo.core.spec import FleetSLO
from fleetslo.policy.base import LoadSample

#: Bodies quoted in error messages are cut here: a proxy's HTML error page is no log line.
_BODY_MAX = 256

#: The samples of one answer, by signal: ``(labels, value)`` pairs.
Samples = dict[str, list[tuple[Mapping[str, str], float]]]


class PrometheusClient:
    """``/api/v1/query`` over httpx; ``transport`` lets tests answer with ``httpx.MockTransport``."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 5.0,
        token: Callable[[], str | None] = lambda: None,
        verify: ssl.SSLContext | bool = True,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._token = token
        self._http = httpx.Client(timeout=timeout, verify=verify, transport=transport)

    def close(self) -> None:
        self._http.close()

    def query(self, promql: str, at: float) -> list[dict[str, Any]]:
        """The instant vector ``promql`` evaluates to at ``at`` (Unix seconds)."""
        token = self._token()
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            response = self._http.post(
                f"{self.url}/api/v1/query", data={"query": promql, "time": repr(at)}, headers=headers
            )
        except httpx.TransportError as exc:
            raise SourceUnavailable(f"{self.url}: {type(exc).__name__}: {exc}") from exc
        return _vector(self.url, response)

    def query_range(self, promql: str, start: float, end: float, step: float) -> list[tuple[float, float]]:
        """The first series of the range query ``promql`` as (time, value) pairs; NaNs left out."""
        token = self._token()
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        form = {"query": promql, "start": repr(start), "end": repr(end), "step": repr(step)}
        try:
            response = self._http.post(f"{self.url}/api/v1/query_range", data=form, headers=headers)
        except httpx.TransportError as exc:
            raise SourceUnavailable(f"{self.url}: {type(exc).__name__}: {exc}") from exc
        return _matrix(self.url, response)


def _matrix(url: str, response: httpx.Response) -> list[tuple[float, float]]:
    if response.status_code == 429 or response.status_code >= 500:
        raise SourceUnavailable(f"{url}: HTTP {response.status_code}: {response.text[:_BODY_MAX]}")
    try:
        body = response.json()
    except ValueError as exc:
        raise BadQuery(f"{url}: HTTP {response.status_code}, not a Prometheus API answer") from exc
    data = body.get("data") if isinstance(body, dict) and body.get("status") == "success" else None
    if not isinstance(data, dict) or data.get("resultType") != "matrix":
        raise BadQuery(f"{url}: expected a range matrix: {response.text[:_BODY_MAX]}")
    series = data.get("result") or []
    values = series[0].get("values", []) if series else []
    points = [(float(t), float(v)) for t, v in values]
    return [(t, v) for t, v in points if not math.isnan(v)]


def _vector(url: str, response: httpx.Response) -> list[dict[str, Any]]:
    status = response.status_code
    if status == 429 or status >= 500:
        raise SourceUnavailable(f"{url}: HTTP {status}: {response.text[:_BODY_MAX]}")
    try:
        body = response.json()
    except ValueError as exc:
        raise BadQuery(
            f"{url}: HTTP {status}, not a Prometheus API answer: {response.text[:_BODY_MAX]}"
        ) from exc
    if status >= 400 or not isinstance(body, dict) or body.get("status") != "success":
        error = body.get("error") if isinstance(body, dict) else None
        raise BadQuery(f"{url}: HTTP {status}: {error or response.text[:_BODY_MAX]}")
    data = body.get("data") or {}
    if data.get("resultType") != "vector":
        raise BadQuery(f"{url}: expected an instant vector, got {data.get('resultType')!r}")
    result: list[dict[str, Any]] = data.get("result") or []
    return result


def group_samples(result: Sequence[Mapping[str, Any]]) -> Samples:
    """The samples of a combined answer, grouped by their ``fleetslo_signal`` tag."""
    out: Samples = {}
    for item in result:
        labels: Mapping[str, str] = item.get("metric", {})
        value = float(item["value"][1])
        if math.isnan(value):
            continue  # 0/0 in a rate: not a measurement
        out.setdefault(labels.get(SIGNAL_LABEL, ""), []).append((labels, value))
    return out


def buckets(samples: Sequence[tuple[Mapping[str, str], float]]) -> BucketHistogram | None:
    """A bucket histogram from ``sum by (le)`` samples; ``None`` without any bucket."""
    pairs = sorted((float(labels["le"]), value) for labels, value in samples if "le" in labels)
    if not pairs:
        return None
    return BucketHistogram(tuple(b for b, _ in pairs), tuple(c for _, c in pairs))


class PrometheusSource:
    """``Source`` over a Prometheus-compatible API."""

    def __init__(
        self,
        client: PrometheusClient,
        *,
        max_age: float = 60.0,
        namespace_label: str | None = "namespace",
        pod_label: str | None = "pod",
        extra_matchers: str = "",
    ) -> None:
        self.client = client
        self.max_age = max_age
        self._labels = (namespace_label, pod_label, extra_matchers)

    def close(self) -> None:
        self.client.close()

    def selection(self, slo: FleetSLO) -> Selection:
        namespace_label, pod_label, extra = self._labels
        return Selection(slo.spec.target, namespace_label, pod_label, extra)

    def observe(
        self, slo: FleetSLO, replicas: ReplicaCounts, batch_limit: int | None, now: float
    ) -> Observation:
        window = slo.spec.objectives.observation_window
        query = observation_query(self.selection(slo), window, self.max_age)
        samples = group_samples(self.client.query(query, now))
        return to_observation(slo, samples, replicas=replicas, batch_limit=batch_limit, now=now)

    def arrival_history(
        self, slo: FleetSLO, now: float, *, days: float = 14.0, step: float = 300.0
    ) -> list[tuple[float, float]]:
        """The target's arrival rate (requests/s over ``step``) for the last ``days``."""
        expr = signal_exprs(self.selection(slo), step, self.max_age)[Signal.REQUESTS]
        return self.client.query_range(expr, now - days * 86_400.0, now, step)

    def load_history(self, slo: FleetSLO, now: float, *, days: float, step: float) -> list[LoadSample]:
        """The target's requests/s and tokens/s (prompt + generated), each the rate over one
        ``step`` (the forecaster's bin), for the last ``days``: what the seasonal forecast is
        bootstrapped from at start, so a restart does not forget the week. Two range queries;
        a step where neither has a value is left out (missing, never 0).

        The steps are aligned to multiples of ``step`` and each sample is dated at the middle of
        the step its rate covers, so it lands in the forecaster's bin for that step, not the next.
        """
        exprs = signal_exprs(self.selection(slo), step, self.max_age)
        end = math.floor(now / step) * step
        start = end - math.floor(days * 86_400.0 / step) * step
        requests = dict(self.client.query_range(exprs[Signal.REQUESTS], start, end, step))
        tokens_expr = f"({exprs[Signal.PROMPT_TOKENS]}) + ({exprs[Signal.GENERATION_TOKENS]})"
        tokens = dict(self.client.query_range(tokens_expr, start, end, step))
        times = sorted(requests.keys() | tokens.keys())
        return [LoadSample(t - step / 2, requests.get(t), tokens.get(t)) for t in times]


def to_observation(
    slo: FleetSLO, samples: Samples, *, replicas: ReplicaCounts, batch_limit: int | None, now: float
) -> Observation:
    """The observation a grouped answer describes (pure; tested without a server)."""
    objectives = slo.spec.objectives
    ttft, itl, tpot = (buckets(samples.get(s, [])) for s in (Signal.TTFT, Signal.ITL, Signal.TPOT))
    newest = _scalar(samples, Signal.NEWEST)
    return Observation(
        target=slo.metadata.name,
        at=now,
        window=slo.spec.objectives.observation_window,
        replicas=replicas,
        batch_limit=batch_limit,
        replicas_reporting=int(_scalar(samples, Signal.REPORTING) or 0),
        data_age=None if newest is None else max(0.0, now - newest),
        ttft=quantiles_of(ttft),
        itl=quantiles_of(itl),
        tpot=quantiles_of(tpot),
        ttft_attainment=_attainment(ttft, objectives.ttft.threshold),
        tpot_attainment=_attainment(tpot, objectives.tpot.threshold),
        request_rate=_scalar(samples, Signal.REQUESTS),
        prompt_tokens_rate=_scalar(samples, Signal.PROMPT_TOKENS),
        generation_tokens_rate=_scalar(samples, Signal.GENERATION_TOKENS),
        preemption_rate=_scalar(samples, Signal.PREEMPTIONS),
        running=_scalar(samples, Signal.RUNNING),
        waiting=_scalar(samples, Signal.WAITING),
        kv_cache_usage=_scalar(samples, Signal.KV_CACHE),
        gpu_utilization=_scalar(samples, Signal.GPU_UTILIZATION),
    )


def _scalar(samples: Samples, signal: Signal) -> float | None:
    values = samples.get(signal.value)
    return values[0][1] if values else None


def _attainment(h: BucketHistogram | None, threshold: float) -> float | None:
    fraction = fraction_at_or_below(h, threshold)
    return None if fraction is None else fraction.value
