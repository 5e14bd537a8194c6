"""Bucket-edge resolution: exact edges, the conservative fallback and its advice, and the spec
fields (``buckets``, ``period``) that feed it."""

from __future__ import annotations

import json

import pytest
from fleetslo.core.config import load
from fleetslo.core.errors import ConfigError
from fleetslo.core.spec import Objective, Objectives
from fleetslo.generate.alerts import buckets
from fleetslo.generate.alerts.spec import target_spec

from tests.unit.alerts.promtool_support import spec


def test_le_is_formatted_as_vllm_writes_it() -> None:
    assert [buckets.le_label(v) for v in (1.0, 2.0, 0.05, 10.0, 0.001)] == [
        "1.0",
        "2.0",
        "0.05",
        "10.0",
        "0.001",
    ]


def test_an_exact_edge_is_used_as_is() -> None:
    choice = buckets.choose(0.5, buckets.TTFT_DEFAULT, "time_to_first_token")
    assert (choice.edge, choice.exact, choice.le, choice.advice()) == (0.5, True, "0.5", "")


def test_a_threshold_between_edges_falls_back_to_the_edge_below_and_says_what_to_set() -> None:
    choice = buckets.choose(2.0, buckets.TTFT_DEFAULT, "time_to_first_token")
    assert (choice.edge, choice.exact, choice.le) == (1.0, False, "1.0")
    advice = choice.advice()
    assert "not a bucket edge" in advice and "nearest edge below, 1s" in advice
    flag = advice.split("--custom-histogram-buckets '")[1].split("'")[0]
    edges = json.loads(flag)["time_to_first_token"]
    assert 2.0 in edges and set(buckets.TTFT_DEFAULT) <= set(edges) and edges == sorted(edges)


def test_float_noise_still_matches_an_edge() -> None:
    choice = buckets.choose(0.1 + 0.2 - 0.25 + 0.2, buckets.TTFT_DEFAULT, "x")  # 0.25000000000000006
    assert choice.exact and choice.le == "0.25"


def test_a_threshold_below_every_edge_is_a_config_error() -> None:
    with pytest.raises(
        ConfigError, match=r"tpot.threshold: threshold 0.005s is below the smallest bucket edge"
    ):
        target_spec(spec(tpot={"threshold": "5ms"}))


def test_custom_buckets_from_the_spec_make_a_threshold_exact() -> None:
    edges = [0.5, 1.0, 2.0, 5.0]
    target = target_spec(spec(ttft={"threshold": "2s", "buckets": edges}))
    assert target.slos[0].bucket.exact and target.slos[0].bucket.le == "2.0"
    assert target.warnings() == []
    assert "2s is not a bucket edge" in target_spec(spec(ttft={"threshold": "2s"})).warnings()[0]


@pytest.mark.parametrize("edges", [[], [1.0, 1.0], [2.0, 1.0], [0.0, 1.0], [-1.0, 1.0]])
def test_bad_bucket_lists_fail_at_load(edges: list[float]) -> None:
    with pytest.raises(ConfigError, match="buckets"):
        load(Objective, {"threshold": "1s", "buckets": edges})


def test_period_defaults_to_28d_and_is_bounded() -> None:
    base = {"ttft": {"threshold": 1}, "tpot": {"threshold": 1}}
    assert load(Objectives, base).period == 28 * 86_400
    assert load(Objectives, {**base, "period": "7d"}).period == 7 * 86_400
    for bad in ("12h", "400d"):
        with pytest.raises(ConfigError, match=r"period: must be between 1d and 366d"):
            load(Objectives, {**base, "period": bad})
