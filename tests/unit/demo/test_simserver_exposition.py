"""The sim-server's /metrics against a real vLLM page: same families, help texts, types, labels."""

from __future__ import annotations

import random

from fleetslo.core import conventions as cv
from fleetslo.core.metrics.exposition import parse_vllm
from fleetslo.sim.harness import deliver
from fleetslo.sim.records import SimRequest
from fleetslo.sim.server.exposition import PageSource, render, vllm_registry
from fleetslo.sim.server.families import RequestStats, request_token_buckets
from fleetslo.sim.vllm_metrics import EngineMetrics
from prometheus_client.parser import text_string_to_metric_families

from tests.support import AFTER_LOAD, capture
from tests.unit.sim.sim_support import tiny_profile

MODEL = "tiny-model"


def shape(text: str) -> dict[str, tuple[str, str, frozenset[str]]]:
    """family → (type, help, label names) for every vllm: family on a page."""
    out = {}
    for family in text_string_to_metric_families(text):
        if family.name.startswith("vllm:"):
            labels = frozenset(k for s in family.samples for k in s.labels if k != "le")
            out[family.name] = (family.type, family.documentation, labels)
    return out


def served_page(custom: dict[str, list[float]] | None = None, accept: str | None = None) -> tuple[bytes, str]:
    """A page after some requests went through an engine (driven directly, in virtual time)."""
    return render(vllm_registry(page_source(custom)), accept)


def page_source(custom: dict[str, list[float]] | None = None) -> PageSource:
    """What the sim-server's page shows after 20 requests through a tiny engine."""
    from fleetslo.sim.engine import Engine

    profile = tiny_profile()
    metrics = EngineMetrics(MODEL, custom)
    engine = Engine(profile, metrics, rng=random.Random(0))
    stats = RequestStats(profile.max_model_len)
    engine.finished = []
    for i in range(20):
        deliver(engine, SimRequest(i, i * 0.05, 100 + 37 * i, 5 + i), max(engine.clock, i * 0.05))
    while engine.run_left:
        engine.complete()
    for req in engine.finished:
        stats.record(req.input_tokens, req.output_tokens, req.output_tokens, req.preemptions)
    return PageSource(engine.refresh_gauges, stats, MODEL, 1.7e9, profile.kv_capacity_tokens)


def test_every_family_matches_a_real_vllm_page_in_type_help_and_labels() -> None:
    body, content_type = served_page()
    assert content_type.startswith("text/plain; version=0.0.4")
    ours, real = shape(body.decode()), shape(capture(AFTER_LOAD))
    assert set(ours) <= set(real), sorted(set(ours) - set(real))
    for name, (kind, help_text, labels) in ours.items():
        assert (kind, help_text) == real[name][:2], name
        if name.endswith("_info"):
            assert labels <= real[name][2], name  # an info gauge: a subset of vLLM's config labels
        else:
            assert labels == real[name][2], name
    # What the controller and the dashboards read is all there.
    for needed in (
        "num_requests_running",
        "num_requests_waiting",
        "kv_cache_usage_perc",
        "prompt_tokens",
        "generation_tokens",
        "request_success",
        "num_preemptions",
        *cv.HISTOGRAM_NAMES,
    ):
        assert f"vllm:{needed}" in ours, needed


def test_every_counter_and_histogram_has_its_created_series() -> None:
    text = served_page()[0].decode()
    families = {f.name for f in text_string_to_metric_families(text)}
    for name, (kind, _, _) in shape(text).items():
        if kind in ("counter", "histogram"):
            assert f"{name}_created" in families, name


def test_the_page_parses_into_the_engine_numbers() -> None:
    text = served_page()[0].decode()
    snapshot = parse_vllm(text)[MODEL]
    assert snapshot.counter(cv.Counter.REQUEST_SUCCESS) == 20
    assert snapshot.counter_by(cv.Counter.REQUEST_SUCCESS)["length"] == 20
    ttft = snapshot.histogram(cv.Histogram.TTFT)
    assert ttft is not None and ttft.count == 20
    assert snapshot.gauge(cv.Gauge.RUNNING) == 0
    assert snapshot.created, "the parser sees the _created series (restart detection)"


def test_custom_buckets_replace_the_defaults_like_vllms_flag() -> None:
    text = served_page({"time_to_first_token": [0.1, 0.5, 2.0]})[0].decode()
    ttft = parse_vllm(text)[MODEL].histogram(cv.Histogram.TTFT)
    assert ttft is not None and ttft.bounds[:3] == (0.1, 0.5, 2.0) and len(ttft.bounds) == 4


def test_openmetrics_is_served_when_asked_for_as_vllm_does() -> None:
    body, content_type = served_page(accept="application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text")
    assert body.rstrip().endswith(b"# EOF")


def test_request_token_buckets_follow_vllms_one_two_five_series() -> None:
    assert request_token_buckets(512) == (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0)
    assert request_token_buckets(1) == (1.0,)
