"""PromQL for an observation: both stored name spellings, legacy aliases only as a fallback, one query."""

from __future__ import annotations

import re

import pytest
from fleetslo.control.sources.promql import (
    Selection,
    Signal,
    duration,
    observation_query,
    pod_regex,
    quote,
    signal_exprs,
)
from fleetslo.core import conventions as cv
from fleetslo.core.spec import Target, TargetKind

TARGET = Target(
    kind=TargetKind.DEPLOYMENT, namespace="infer", name="qwen.big", model_name='Qwen/Qwen3 "A22B"'
)


def test_selectors_match_colon_escaped_and_ray_names() -> None:
    ttft = signal_exprs(Selection(TARGET), 60, 60)[Signal.TTFT]
    for name in (
        "vllm:time_to_first_token_seconds_bucket",
        "vllm_time_to_first_token_seconds_bucket",
        "ray_vllm:time_to_first_token_seconds_bucket",
    ):
        assert name in ttft
    assert "rate(" in ttft and "[60s]" in ttft and "sum by (le)" in ttft


def test_legacy_names_only_fill_in_when_the_current_name_is_absent() -> None:
    exprs = signal_exprs(Selection(TARGET), 60, 60)
    kv = exprs[Signal.KV_CACHE]
    current, legacy = kv.split(" or ", 1)
    assert "kv_cache_usage_perc" in current and "gpu_cache_usage_perc" not in current
    assert "gpu_cache_usage_perc" in legacy
    assert "time_per_output_token_seconds_bucket" in exprs[Signal.ITL].split(" or ", 1)[1]
    # no alias: nothing to fall back to (the legacy name is vLLM's prefix right before "time_per")
    assert not re.search(r"vllm[:_]time_per_output_token", exprs[Signal.TPOT])


def test_aggregations_never_name_the_engine_label() -> None:
    assert "engine" not in observation_query(Selection(TARGET), 60, 60)


def test_label_values_are_quoted_and_names_escaped() -> None:
    selector = Selection(TARGET).vllm(("vllm:num_requests_running",))
    assert 'model_name="Qwen/Qwen3 \\"A22B\\""' in selector
    assert 'namespace="infer"' in selector
    assert quote("a\\b") == '"a\\\\b"'


@pytest.mark.parametrize(
    ("kind", "good", "bad"),
    [
        (TargetKind.DEPLOYMENT, "qwen-7d9f8c6b5-x2kqp", "qwen-big-7d9f8c6b5-x2kqp"),
        (TargetKind.STATEFULSET, "qwen-12", "qwen-canary-0"),
        (TargetKind.LEADERWORKERSET, "qwen-3", "qwen-a-3"),
    ],
)
def test_pod_patterns_do_not_catch_a_longer_named_neighbour(kind: TargetKind, good: str, bad: str) -> None:
    pattern = re.compile(pod_regex(Target(kind=kind, name="qwen", model_name="m")))
    assert pattern.fullmatch(good)
    assert not pattern.fullmatch(bad)


def test_pod_and_namespace_filters_can_be_switched_off_for_unlabelled_series() -> None:
    plain = Selection(TARGET, namespace_label=None, pod_label=None, extra_matchers='job="test"')
    selector = plain.vllm(("vllm:num_requests_running",))
    assert "namespace" not in selector and "pod" not in selector and 'job="test"' in selector
    assert "max by (instance)" in signal_exprs(plain, 60, 60)[Signal.REPORTING]


def test_one_query_tags_every_signal() -> None:
    query = observation_query(Selection(TARGET), 30, 45)
    for signal in Signal:
        assert f'"fleetslo_signal", "{signal.value}"' in query
    assert "time() - 45" in query


def test_durations_are_valid_promql() -> None:
    assert duration(60) == "60s"
    assert duration(1.5) == "1500ms"


def test_the_gate_queue_and_exact_latency_fall_back_to_vllm_without_a_gate() -> None:
    exprs = signal_exprs(Selection(TARGET), 60, 60)
    waiting = exprs[Signal.WAITING]
    summed, alone = waiting.split(" or ", 1)
    assert f"{cv.GATE_QUEUE_LENGTH}{{" in summed and "fleetslo_gate" not in alone
    for signal, gate in ((Signal.TTFT, cv.GATE_TTFT), (Signal.TPOT, cv.GATE_TPOT)):
        expr = exprs[signal]
        assert f"{gate}_bucket{{" in expr and f"{gate}_count{{" in expr
        assert "unless on()" in expr  # vLLM's buckets only when the gate has none: never a mix
    gate_selector = re.search(cv.GATE_QUEUE_LENGTH + r"\{[^}]*\}", waiting)
    assert gate_selector is not None and "model_name" not in gate_selector.group(0)  # the gate has none
    assert "fleetslo_gate" not in exprs[Signal.ITL]  # the gate measures no per-token gaps
