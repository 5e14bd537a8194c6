"""The plugin's bookkeeping: running totals a capacity fit can difference, exact request records,
and a page that a Prometheus parser reads back (no vLLM needed: the adapter is tested in tests/realvllm)."""

from __future__ import annotations

import io
import json
import math

import pytest
from fleetslo.engine.bench import TTFT_HISTOGRAM, bucket_key, counter_deltas, read_counters
from fleetslo.engine.book import EngineBook, RequestRecord, StepRecord
from fleetslo.sim.host_delay import engine_ttfts
from prometheus_client import CollectorRegistry, generate_latest

from tests.support import AFTER_LOAD, IDLE, capture


def _page(book: EngineBook) -> dict[str, float]:
    registry = CollectorRegistry()
    registry.register(book)
    return read_counters(generate_latest(registry).decode())


def test_step_totals_are_sums_a_window_mean_can_be_taken_from() -> None:
    book = EngineBook("m")
    before = _page(book)
    book.add_step(StepRecord(prefill_seqs=1, prefill_tokens=100, decode_seqs=3, kv_tokens=512, seconds=0.02))
    book.add_step(StepRecord(prefill_seqs=0, prefill_tokens=0, decode_seqs=4, kv_tokens=640, seconds=0.01))
    deltas = counter_deltas(before, _page(book))
    assert deltas["fleetslo_engine_steps"] == 2
    assert deltas["fleetslo_engine_step_seconds"] == 0.03
    assert deltas["fleetslo_engine_step_prefill_tokens"] == 100
    assert deltas["fleetslo_engine_step_decode_seqs"] == 7
    assert deltas["fleetslo_engine_step_kv_tokens"] == 1152
    # vLLM's own sums are not on this page: missing, not zero
    assert deltas["vllm:time_to_first_token_seconds_sum"] is None


def test_request_records_are_exact_and_written_as_json_lines() -> None:
    sink = io.StringIO()
    book = EngineBook("m", records=sink)
    book.add_request(RequestRecord(10, 5, 0.001, 0.004, 0.03, 0.005, 0.0075, 0, "length"))
    book.add_request(RequestRecord(10, 1, 0.001, 0.004, 0.0, 0.005, None, 0, "length"))
    page = _page(book)
    assert page["fleetslo_engine_requests_total"] == 2
    assert page["fleetslo_engine_request_tpot_seconds_count"] == 1  # a one-token request has no TPOT
    lines = [json.loads(line) for line in sink.getvalue().splitlines()]
    assert [line["kind"] for line in lines] == ["request", "request"]
    assert lines[0]["tpot_s"] == 0.0075


def test_no_step_yet_means_no_last_step_gauge() -> None:
    page = _page(EngineBook("m"))
    assert "fleetslo_engine_last_step_decode_seqs" not in page
    assert page["fleetslo_engine_steps_total"] == 0


def test_vllms_ttft_buckets_are_differenced_at_the_bounds_of_its_page() -> None:
    # Two real vLLM 0.32 pages: idle, and after 79 requests (every TTFT bucket filled).
    before, after = read_counters(capture(IDLE)), read_counters(capture(AFTER_LOAD))
    deltas = counter_deltas(before, after)
    buckets = {k: v for k, v in deltas.items() if k.startswith(TTFT_HISTOGRAM)}
    assert len(buckets) > 10  # every bound of this vLLM's histogram, none assumed
    assert buckets[bucket_key(math.inf, TTFT_HISTOGRAM)] == deltas["vllm:time_to_first_token_seconds_count"]
    points = engine_ttfts(deltas)
    assert points is not None and len(points) == deltas["vllm:time_to_first_token_seconds_count"]
    assert sum(points) == pytest.approx(deltas["vllm:time_to_first_token_seconds_sum"])
