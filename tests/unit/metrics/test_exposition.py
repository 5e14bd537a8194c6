"""The vLLM exposition parser on real captures and on every naming variant we must accept."""

from __future__ import annotations

import contextlib

import pytest
from fleetslo.core import conventions as cv
from fleetslo.core.errors import ExpositionError
from fleetslo.core.histogram import quantile
from fleetslo.core.metrics.exposition import parse_page, parse_vllm
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import AFTER_LOAD, IDLE, UNDER_LOAD, capture


def test_after_load_capture_gives_the_p90s_listed_in_its_sources() -> None:
    s = parse_vllm(capture(AFTER_LOAD))["tiny-llama"]
    # Values from tests/fixtures/vllm/SOURCES.md (Prometheus interpolation over the whole file).
    expected = {
        cv.Histogram.TTFT: 5.031,
        cv.Histogram.ITL: 0.0091,
        cv.Histogram.TPOT: 0.0090,
        cv.Histogram.E2E: 7.531,
        cv.Histogram.QUEUE: 5.0625,
    }
    for family, p90 in expected.items():
        assert quantile(0.9, s.histogram(family)) == pytest.approx(p90, abs=5e-4), family
    assert s.counter_by(cv.Counter.REQUEST_SUCCESS)["length"] == 79
    assert s.engines == ("0",)


def test_under_load_capture_shows_running_and_waiting_by_reason() -> None:
    s = parse_vllm(capture(UNDER_LOAD))["tiny-llama"]
    assert s.gauge(cv.Gauge.RUNNING) == 8
    assert s.gauge(cv.Gauge.WAITING) == 32
    assert s.gauge_by(cv.Gauge.WAITING_BY_REASON) == {"capacity": 32.0, "deferred": 0.0}
    assert 0 <= (s.gauge(cv.Gauge.KV_CACHE_USAGE) or 0) <= 1


def test_idle_capture_has_empty_histograms_not_missing_ones() -> None:
    s = parse_vllm(capture(IDLE))["tiny-llama"]
    ttft = s.histogram(cv.Histogram.TTFT)
    assert ttft is not None and ttft.count == 0
    assert quantile(0.9, ttft) is None
    assert s.counter(cv.Counter.PROMPT_TOKENS) == 0


def test_every_histogram_family_is_read_with_the_servers_own_buckets() -> None:
    s = parse_vllm(capture(AFTER_LOAD))["tiny-llama"]
    for family in cv.Histogram:
        h = s.histogram(family)
        assert h is not None, family
        assert h.bounds[-1] == float("inf")
    assert s.histogram(cv.Histogram.TTFT).bounds[:3] == (0.001, 0.005, 0.01)  # type: ignore[union-attr]


def test_missing_families_are_none_not_zero() -> None:
    s = parse_vllm('vllm:num_requests_running{model_name="m",engine="0"} 3\n')["m"]
    assert s.gauge(cv.Gauge.WAITING) is None
    assert s.counter(cv.Counter.PREEMPTIONS) is None
    assert s.histogram(cv.Histogram.TTFT) is None


LEGACY = """\
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="opt"} 0.25
vllm:num_requests_waiting{model_name="opt"} 4.0
vllm:gpu_prefix_cache_hits_total{model_name="opt"} 12.0
vllm:time_per_output_token_seconds_bucket{le="0.01",model_name="opt"} 3.0
vllm:time_per_output_token_seconds_bucket{le="+Inf",model_name="opt"} 4.0
vllm:time_per_output_token_seconds_sum{model_name="opt"} 0.1
vllm:time_per_output_token_seconds_count{model_name="opt"} 4.0
"""


def test_legacy_names_map_to_current_ones_and_a_missing_engine_label_is_fine() -> None:
    s = parse_vllm(LEGACY)["opt"]
    assert s.gauge(cv.Gauge.KV_CACHE_USAGE) == 0.25
    assert s.counter(cv.Counter.PREFIX_CACHE_HITS) == 12
    itl = s.histogram(cv.Histogram.ITL)
    assert itl is not None and itl.count == 4
    assert s.engines == ("",)


def test_ray_and_escaped_prefixes_are_read_and_extra_labels_are_summed() -> None:
    page = (
        'ray_vllm:num_requests_running{model_name="q",engine="0",WorkerId="a"} 2\n'
        'ray_vllm:num_requests_running{model_name="q",engine="0",WorkerId="b"} 3\n'
        'vllm_num_requests_waiting{model_name="q",engine="1"} 7\n'
    )
    s = parse_vllm(page)["q"]
    assert s.gauge(cv.Gauge.RUNNING) == 5
    assert s.gauge(cv.Gauge.WAITING) == 7


def test_data_parallel_engines_are_summed_and_kv_usage_averaged() -> None:
    page = "".join(
        f'vllm:num_requests_running{{engine="{e}",model_name="m"}} {e + 1}\n'
        f'vllm:kv_cache_usage_perc{{engine="{e}",model_name="m"}} {0.2 * (e + 1)}\n'
        f'vllm:time_to_first_token_seconds_bucket{{engine="{e}",le="1.0",model_name="m"}} {e + 1}\n'
        f'vllm:time_to_first_token_seconds_bucket{{engine="{e}",le="+Inf",model_name="m"}} {2 * (e + 1)}\n'
        for e in range(4)
    )
    s = parse_vllm(page)["m"]
    assert s.engines == ("0", "1", "2", "3")
    assert s.gauge(cv.Gauge.RUNNING) == 10
    assert s.gauge(cv.Gauge.KV_CACHE_USAGE) == pytest.approx(0.5)
    assert s.histogram(cv.Histogram.TTFT).counts == (10.0, 20.0)  # type: ignore[union-attr]


def test_admission_rejections_without_an_engine_label_are_kept_by_reason() -> None:
    page = 'vllm:admission_rejections_total{model_name="m",reason="max_num_queued_reqs"} 16.0\n'
    assert parse_vllm(page)["m"].counter_by(cv.Counter.ADMISSION_REJECTIONS) == {"max_num_queued_reqs": 16.0}


def test_custom_buckets_are_taken_as_they_come() -> None:
    page = "".join(
        f'vllm:time_to_first_token_seconds_bucket{{engine="0",le="{le}",model_name="m"}} {c}\n'
        for le, c in (("0.005", 1), ("0.2", 5), ("0.5", 9), ("5.0", 10), ("+Inf", 10))
    )
    h = parse_vllm(page)["m"].histogram(cv.Histogram.TTFT)
    assert h is not None and h.bounds == (0.005, 0.2, 0.5, 5.0, float("inf"))


def test_label_values_with_escapes_commas_and_braces_parse() -> None:
    page = 'vllm:num_requests_running{model_name="a \\"b\\", {c}",engine="0"} 1\n'
    assert list(parse_vllm(page)) == ['a "b", {c}']


def test_a_malformed_line_in_a_family_we_use_is_an_error_naming_the_line() -> None:
    with pytest.raises(ExpositionError, match="line 2"):
        parse_vllm('vllm:num_requests_running{model_name="m"} 1\nvllm:num_requests_waiting{model_name=m} 2\n')
    with pytest.raises(ExpositionError, match="not a number"):
        parse_vllm('vllm:num_requests_running{model_name="m"} many\n')


def test_lines_of_families_we_do_not_use_are_skipped_even_when_malformed() -> None:
    page = (
        "vllm:cache_config_info{weird stuff\n"
        "http_requests_total{{{ x\n"
        'vllm:num_requests_running{model_name="m"} 1\n'
    )
    assert parse_vllm(page)["m"].gauge(cv.Gauge.RUNNING) == 1


def test_a_page_without_vllm_series_is_empty() -> None:
    assert parse_vllm("<html>502 Bad Gateway</html>\n") == {}
    assert parse_vllm("") == {}


@settings(max_examples=300)
@given(st.text())
def test_the_parser_never_fails_with_anything_but_an_exposition_error(text: str) -> None:
    with contextlib.suppress(ExpositionError):
        parse_vllm(text)


vllm_lines = st.builds(
    lambda name, labels, value: f"{name}{{{labels}}} {value}",
    st.sampled_from(
        [
            "vllm:num_requests_running",
            "vllm:time_to_first_token_seconds_bucket",
            "vllm:request_success_total",
            "vllm:kv_cache_usage_perc",
            "ray_vllm:num_requests_waiting",
        ]
    ),
    st.text(alphabet='abc=",\\{} le+Inf0.5', max_size=30),
    st.one_of(st.floats(allow_nan=True).map(repr), st.text(max_size=8)),
)


@settings(max_examples=300)
@given(st.lists(vllm_lines, max_size=20))
def test_vllm_looking_lines_either_parse_or_raise_exposition_error(lines: list[str]) -> None:
    with contextlib.suppress(ExpositionError):
        parse_vllm("\n".join(lines))


def test_a_family_under_both_its_current_and_its_legacy_name_is_read_once_under_the_current() -> None:
    # Issue 15 defect 10: vLLM 0.9-0.10 pages carry both names; summing them gave KV usage 1.2.
    page = (
        'vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.6\n'
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.6\n'
        'vllm:gpu_prefix_cache_hits_total{engine="0",model_name="m"} 5\n'
        'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 7\n'
        'vllm:time_per_output_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 9\n'
    )
    s = parse_vllm(page)["m"]
    assert s.gauge(cv.Gauge.KV_CACHE_USAGE) == 0.6
    assert s.counter(cv.Counter.PREFIX_CACHE_HITS) == 7
    assert s.histogram(cv.Histogram.ITL) is not None  # legacy only: still read


def test_a_repeated_sample_line_counts_once_as_in_prometheus() -> None:
    # Issue 15 defect 11: a duplicated line was summed.
    line = 'vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 10\n'
    page = parse_page(line + line + line.replace(" 10", " 99"))
    assert page.models["m"].counter(cv.Counter.REQUEST_SUCCESS) == 10
    assert page.rejected["duplicate"] == 2
    # The same series with its labels in another order is the same series.
    other = 'vllm:request_success_total{model_name="m",finished_reason="stop",engine="0"} 10\n'
    assert parse_vllm(line + other)["m"].counter(cv.Counter.REQUEST_SUCCESS) == 10


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} NaN', "non_finite"),
        ('vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} +Inf', "non_finite"),
        ('vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} -3', "negative"),
        ('vllm:num_requests_running{engine="0",model_name="m"} NaN', "non_finite"),
        ('vllm:num_requests_running{engine="0",model_name="m"} -1', "negative"),
        ('vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="m"} NaN', "non_finite"),
        ('vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="m"} 1e20', "not_monotonic"),
        ('vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} NaN', "non_finite"),
    ],
)
def test_an_impossible_value_rejects_its_family_for_that_model_with_a_reason(line: str, reason: str) -> None:
    # Issue 15 defect 9: one NaN or 1e20 poisoned the windows until a restart.
    good = (
        'vllm:request_success_total{engine="1",finished_reason="stop",model_name="m"} 5\n'
        'vllm:num_requests_running{engine="1",model_name="m"} 2\n'
        'vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 1\n'
        'vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 4\n'
        'vllm:time_to_first_token_seconds_bucket{engine="1",le="0.1",model_name="m"} 1\n'
        'vllm:time_to_first_token_seconds_bucket{engine="1",le="+Inf",model_name="m"} 4\n'
        'vllm:num_requests_waiting{engine="0",model_name="m"} 3\n'
        'vllm:num_requests_waiting{engine="0",model_name="other"} 1\n'
    )
    page = parse_page(good + line + "\n")
    assert page.rejected[reason] == 1
    [family] = page.rejected_families["m"]
    s = page.models["m"]
    assert s.gauge(family) is None and s.counter(family) is None and s.histogram(family) is None
    assert s.gauge(cv.Gauge.WAITING) == 3  # the rest of the page stands
    assert "other" not in page.rejected_families
