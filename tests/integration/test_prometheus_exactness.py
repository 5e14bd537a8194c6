"""Our histogram quantiles equal a real Prometheus server's ``histogram_quantile`` on the same data.

A loopback server exposes many histograms (random layouts, the real vLLM captures, and every
edge case: empty, all in +Inf, first bucket, non-positive first bound, non-monotonic buckets, no
+Inf bucket); Prometheus scrapes them; both compute quantiles; they must agree to 1e-9 (NaN where
we say None). A second part compares window deltas via PromQL's ``@`` modifier.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from fleetslo.core import conventions as cv
from fleetslo.core.histogram import INF, BucketHistogram, delta, quantile
from fleetslo.core.metrics.exposition import parse_vllm
from fleetslo.testing import FakeVllmServer, grow_capture

from tests.prometheus import PrometheusServer
from tests.support import AFTER_LOAD, UNDER_LOAD, capture

pytestmark = pytest.mark.integration

QS = (0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0)
NAME = "fleetslo_exactness_test"


def edge_cases() -> dict[str, BucketHistogram]:
    return {
        "empty": BucketHistogram((0.1, 1.0, INF), (0.0, 0.0, 0.0)),
        "all_in_inf": BucketHistogram((0.1, 1.0, INF), (0.0, 0.0, 7.0)),
        "first_bucket": BucketHistogram((0.1, 1.0, INF), (9.0, 9.0, 9.0)),
        "non_positive_first": BucketHistogram((-1.0, 0.0, 1.0, INF), (3.0, 4.0, 9.0, 10.0)),
        "non_monotonic": BucketHistogram((0.1, 0.2, 0.4, INF), (5.0, 4.0, 8.0, 10.0)),
        "only_inf": BucketHistogram((INF,), (5.0,)),
        "no_inf": BucketHistogram((0.1, 1.0), (3.0, 5.0)),
        "fractional": BucketHistogram((0.005, 0.02, 0.3, INF), (0.5, 1.25, 3.75, 4.0)),
    }


def random_cases(rng: random.Random, n: int) -> dict[str, BucketHistogram]:
    cases = {}
    for i in range(n):
        edges = sorted({round(rng.uniform(0.001, 100), rng.randint(1, 6)) for _ in range(rng.randint(1, 25))})
        counts, total = [], 0.0
        for _ in range(len(edges) + 1):
            total += rng.choice([0, 0, 1, rng.randint(0, 50), rng.randint(0, 100000)])
            counts.append(total)
        cases[f"r{i}"] = BucketHistogram((*edges, INF), tuple(counts))
    return cases


def exposition(cases: dict[str, BucketHistogram]) -> str:
    lines = [f"# TYPE {NAME} histogram"]
    for case, h in cases.items():
        for le, c in zip(h.bounds, h.counts, strict=True):
            label = "+Inf" if le == INF else repr(le)
            lines.append(f'{NAME}_bucket{{case="{case}",le="{label}"}} {c!r}')
    return "\n".join(lines) + "\n"


def by_case(result: list[dict[str, object]]) -> dict[str, float]:
    return {r["metric"]["case"]: float(r["value"][1]) for r in result}  # type: ignore[index]


def assert_same(ours: float | None, theirs: float, what: str) -> None:
    if ours is None:
        assert math.isnan(theirs), f"{what}: we say NaN, Prometheus says {theirs!r}"
    elif math.isinf(ours):
        assert ours == theirs, what
    else:
        assert abs(ours - theirs) <= 1e-9, f"{what}: ours {ours!r} vs Prometheus {theirs!r}"


def test_histogram_quantile_matches_prometheus_exactly(tmp_path: Path) -> None:
    cases = {**edge_cases(), **random_cases(random.Random(20261130), 60)}
    with (
        FakeVllmServer(exposition(cases)) as fake,
        PrometheusServer(tmp_path, [f"127.0.0.1:{fake.port}"]) as prom,
    ):
        prom.wait_for(f'count({NAME}_bucket{{case="r0"}})')
        checked = 0
        for q in QS:
            theirs = by_case(prom.query(f"histogram_quantile({q!r}, {NAME}_bucket)"))
            for case, h in cases.items():
                if case in theirs:
                    assert_same(quantile(q, h), theirs[case], f"{case} q={q}")
                    checked += 1
                else:
                    assert quantile(q, h) is None, f"{case} q={q}: Prometheus gave no sample"
    assert checked >= len(cases) * len(QS) - 2 * len(QS)


def test_quantiles_of_real_vllm_captures_match_prometheus(tmp_path: Path) -> None:
    text = capture(AFTER_LOAD) + "\n".join(capture(UNDER_LOAD).splitlines()[:0])
    snapshot = parse_vllm(text)["tiny-llama"]
    with FakeVllmServer(text) as fake, PrometheusServer(tmp_path, [f"127.0.0.1:{fake.port}"]) as prom:
        prom.wait_for("count(vllm:time_to_first_token_seconds_bucket)")
        for family in cv.Histogram:
            for q in (0.5, 0.9, 0.99):
                result = prom.query(f"histogram_quantile({q}, sum by (le) (vllm:{family}_bucket))")
                assert len(result) == 1, family
                assert_same(
                    quantile(q, snapshot.histogram(family)), float(result[0]["value"][1]), f"{family} {q}"
                )


def test_window_deltas_match_prometheus_differences_between_two_scrapes(tmp_path: Path) -> None:
    base = capture(AFTER_LOAD)
    fake = FakeVllmServer(grow_capture(base, 1.0)).start()
    try:
        with PrometheusServer(tmp_path, [f"127.0.0.1:{fake.port}"]) as prom:
            metric = "vllm:time_to_first_token_seconds_bucket"
            first = prom.wait_for(f'timestamp({metric}{{le="+Inf"}})')
            t1 = float(first[0]["value"][1])
            fake.page = grow_capture(base, 3.5)
            second = prom.wait_for(f'timestamp({metric}{{le="+Inf"}}) > {t1!r}')
            t2 = float(second[0]["value"][1])
            older = parse_vllm(grow_capture(base, 1.0))["tiny-llama"]
            newer = parse_vllm(grow_capture(base, 3.5))["tiny-llama"]
            for family in (cv.Histogram.TTFT, cv.Histogram.ITL, cv.Histogram.E2E):
                d = delta(newer.histogram(family), older.histogram(family))  # type: ignore[arg-type]
                for q in (0.5, 0.9, 0.99):
                    expr = (
                        f"histogram_quantile({q}, sum by (le) (vllm:{family}_bucket @ {t2!r})"
                        f" - sum by (le) (vllm:{family}_bucket @ {t1!r}))"
                    )
                    result = prom.query(expr, at=t2)
                    assert_same(quantile(q, d), float(result[0]["value"][1]), f"{family} {q}")
    finally:
        fake.stop()
