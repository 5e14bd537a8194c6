"""The streaming trace reader: the whole-file reader's requests, one at a time, in bounded memory."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from itertools import count, islice
from pathlib import Path

import pytest
from fleetslo.core.errors import ConfigError
from fleetslo.sim.traces import load_trace, parse_trace, time_scale, window
from fleetslo.sim.traces.csv_rows import BLOCK_LINES
from fleetslo.sim.traces.stream import StreamStats, first_request, shaped, stream_lines, stream_trace
from fleetslo.sim.workload import Request
from hypothesis import given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[3]
TRACES = REPO / "traces"
REAL = (
    "azure2023/AzureLLMInferenceTrace_code.csv",
    "azure2023/AzureLLMInferenceTrace_conv.csv",
    "mooncake/synthetic_trace.jsonl",
)


def streamed(text: str, source: str = "t.csv", **kw: float) -> tuple[list[Request], StreamStats]:
    stats = StreamStats()
    return list(stream_lines(text.splitlines(keepends=True), source, stats=stats, **kw)), stats


@pytest.mark.parametrize("name", REAL)
def test_real_traces_stream_exactly_what_the_whole_file_reader_reads(name: str) -> None:
    stats = StreamStats()
    got = tuple(stream_trace(TRACES / name, stats=stats))
    assert got == load_trace(TRACES / name).requests  # request for request, to the float
    assert stats.requests == len(got) and stats.skipped == 0
    assert stats.format == ("mooncake" if name.endswith("jsonl") else "azure")


@pytest.mark.parametrize(
    "text",
    [
        # rows a little out of order, offsets, the same instant twice (Azure 2024)
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2024-05-10 00:00:01.5000000+00:00,100,5\n"
        "2024-05-10 00:00:00.0095070+00:00,200,6\n"
        "2024-05-10 02:00:00.0095070+02:00,300,7\n",
        # BurstGPT with a failed request (0 output tokens) skipped
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type,Session ID,Elapsed time\n"
        "5,ChatGPT,472,18,490,Conversation log,1,2.1\n"
        "45,GPT-4,1087,0,1087,API log,2,0.3\n"
        "12.5,ChatGPT,30,100,130,Conversation log,3,4.0\n",
        # plain, blank lines and CRLF
        "arrival_s,input_tokens,output_tokens\r\n0.5,10,20\r\n\r\n0.25,1,2\r\n",
        # Mooncake: whole seconds (spread over 1 s) and milliseconds (spread over 1 ms)
        "".join(
            json.dumps({"timestamp": t, "input_length": n, "output_length": 2}) + "\n"
            for t, n in [(0, 10), (0, 11), (0, 12), (1000, 13), (3000, 14), (3000, 15)]
        ),
        "".join(
            json.dumps({"timestamp": t, "input_length": 5, "output_length": 1}) + "\n" for t in (7, 7, 9)
        ),
    ],
)
def test_every_format_streams_as_it_reads_whole(text: str) -> None:
    whole = parse_trace(text.splitlines(keepends=True), "t.csv")
    got, stats = streamed(text)
    assert tuple(got) == whole.trace.requests
    assert (stats.format, stats.skipped) == (whole.format, whole.skipped)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "t.csv: the file is empty"),
        ("time,prompt,reply\n1,2,3\n", "t.csv:1: unrecognised trace format"),
        ("arrival_s,input_tokens,output_tokens\n1,2,3\n\nx,2,3\n", "t.csv:4: arrival_s 'x' is not a number"),
        ("arrival_s,input_tokens,output_tokens\n1,2\n", "t.csv:2: 2 columns, expected 3"),
        (
            "arrival_s,input_tokens,output_tokens\n1,0,3\n",
            "no requests with tokens in the file (1 rows skipped)",
        ),
        ('{"timestamp": 1, "input_length": 5, "output_length": 1}\n{oops\n', "t.csv:2: not valid JSON"),
    ],
)
def test_bad_rows_are_the_same_errors_as_the_whole_file_readers(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        streamed(text)
    assert message in str(info.value)


def test_a_row_out_of_order_beyond_the_window_names_its_line_and_says_to_sort() -> None:
    text = "arrival_s,input_tokens,output_tokens\n0,1,1\n100,1,1\n200,1,1\n30,1,1\n"
    with pytest.raises(ConfigError) as info:
        streamed(text, reorder_s=60.0)
    assert "t.csv:5:" in str(info.value) and "60 s out of time order" in str(info.value)
    assert "sort the file" in str(info.value)
    # within the window it is only sorted
    got, _ = streamed(text, reorder_s=180.0)
    assert [r.arrival_s for r in got] == [0.0, 30.0, 100.0, 200.0]


def test_reading_is_lazy_the_first_requests_need_only_the_first_lines() -> None:
    read = count()

    def endless() -> Iterator[str]:
        yield "arrival_s,input_tokens,output_tokens\n"
        for i in count():
            next(read)
            yield f"{i * 0.5},10,10\n"  # two a second, forever

    first = list(islice(stream_lines(endless(), "endless", reorder_s=60.0), 10))
    assert [r.arrival_s for r in first] == [i * 0.5 for i in range(10)]
    # the ten and the reorder window's rows behind them, read in one block of lines
    assert next(read) <= max(BLOCK_LINES, 10 + 2 * 60 + 2)


def test_first_request_raises_a_bad_file_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the trace file"):
        first_request(stream_trace(tmp_path / "nope.csv"))
    binary = tmp_path / "trace.bin"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(ConfigError, match=r"trace\.bin: not a text file"):
        first_request(stream_trace(binary))
    good = tmp_path / "ok.csv"
    good.write_text("arrival_s,input_tokens,output_tokens\n1,2,3\n2,3,4\n", encoding="utf-8")
    head, everything = first_request(stream_trace(good))
    assert head == Request(1.0, 2, 3) and list(everything) == [Request(1.0, 2, 3), Request(2.0, 3, 4)]


def test_cut_and_stretch_give_the_whole_trace_transforms_requests() -> None:
    trace = load_trace(TRACES / REAL[1])
    cut = shaped(iter(trace.requests), start_s=600.0, duration_s=900.0, time_scale=0.5)
    assert tuple(cut) == time_scale(window(trace, 600.0, 900.0), 0.5).requests


@pytest.mark.parametrize("factor", [0.3, 1.0, 2.5])
def test_rate_scale_thins_and_copies_sorted_and_deterministic(factor: float) -> None:
    trace = load_trace(TRACES / REAL[1])
    a = list(shaped(iter(trace.requests), rate_scale=factor, seed=4))
    assert a == list(shaped(iter(trace.requests), rate_scale=factor, seed=4))
    assert a != list(shaped(iter(trace.requests), rate_scale=factor, seed=5)) or factor == 1.0
    arrivals = [r.arrival_s for r in a]
    assert arrivals == sorted(arrivals)
    n, expected = len(a), factor * len(trace)
    spread = math.sqrt(len(trace) * (factor % 1) * (1 - factor % 1))  # the thinned copy's binomial
    assert abs(n - expected) <= 4 * spread + 1
    # every request's lengths are one of the trace's: copies keep the joint length distribution
    lengths = {(r.input_tokens, r.output_tokens) for r in trace.requests}
    assert all((r.input_tokens, r.output_tokens) in lengths for r in a)
    assert arrivals[-1] < trace.requests[-1].arrival_s + 1.0


@pytest.mark.parametrize("bad", [{"start_s": -1.0}, {"duration_s": 0.0}, {"rate_scale": math.nan}])
def test_bad_shaping_is_a_config_error(bad: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        list(shaped(iter([Request(0.0, 1, 1)]), **bad))


ROWS = st.lists(
    st.tuples(st.floats(0, 1e5, allow_nan=False), st.integers(0, 50), st.integers(0, 50)), max_size=60
)


@settings(max_examples=80, deadline=None)
@given(rows=ROWS, jitter=st.floats(0, 30))
def test_any_nearly_sorted_plain_trace_streams_as_it_reads_whole(
    rows: list[tuple[float, int, int]], jitter: float
) -> None:
    # sorted, then each row moved back by up to ``jitter`` s: always within a 30 s window
    rows = sorted(rows)
    moved = [(max(0.0, t - jitter * ((i * 7919) % 13) / 12), a, b) for i, (t, a, b) in enumerate(rows)]
    text = "arrival_s,input_tokens,output_tokens\n" + "".join(f"{t!r},{a},{b}\n" for t, a, b in moved)
    try:
        whole = parse_trace(text.splitlines(keepends=True), "p.csv").trace.requests
    except ConfigError as exc:
        with pytest.raises(ConfigError) as info:
            streamed(text, "p.csv", reorder_s=31.0)
        assert str(info.value) == str(exc)
        return
    got, _ = streamed(text, "p.csv", reorder_s=31.0)
    assert tuple(got) == whole


def test_a_gzip_trace_streams_as_the_plain_one(tmp_path: Path) -> None:
    import gzip

    plain = TRACES / REAL[2]
    packed = tmp_path / "m.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert list(stream_trace(packed)) == list(stream_trace(plain))
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(packed.read_bytes()[:3000])
    with pytest.raises(ConfigError, match=r"cut\.jsonl\.gz: cannot read the trace file"):
        list(stream_trace(cut))


def test_a_mooncake_unit_a_later_row_contradicts_is_narrowed_from_there_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from fleetslo.sim.traces import stream

    monkeypatch.setattr(stream, "MOONCAKE_UNIT_ROWS", 2)  # the unit is read from the first two rows
    stamps = (0, 1000, 2000, 2000, 3000, 3000, 3000, 3100)
    text = "".join(json.dumps({"timestamp": t, "input_length": 5, "output_length": 2}) + "\n" for t in stamps)
    got = [round(r.arrival_s, 6) for r in streamed(text, "m.jsonl")[0]]
    # 1 s from the first rows: the pair at 2 s is spread over a second; 3100 narrows the unit to
    # 100 ms before the three at 3 s are spread, so they stay ahead of it
    assert got == [0.0, 1.0, 2.0, 2.5, 3.0, 3.033333, 3.066667, 3.1]


@settings(max_examples=80, deadline=None)
@given(
    stamps=st.lists(
        st.sampled_from([0, 1, 10, 100, 1000]).flatmap(lambda u: st.integers(0, 50).map(lambda k: k * u))
    ),
    head=st.integers(1, 5),
)
def test_any_mooncake_stream_comes_out_sorted_whatever_its_first_rows_say(
    stamps: list[int], head: int
) -> None:
    from fleetslo.sim.traces import stream

    if not stamps:
        return
    original = stream.MOONCAKE_UNIT_ROWS
    stream.MOONCAKE_UNIT_ROWS = head
    try:
        lines = [json.dumps({"timestamp": t, "input_length": 3, "output_length": 2}) + "\n" for t in stamps]
        got = [r.arrival_s for r in streamed("".join(lines), "m.jsonl")[0]]
    finally:
        stream.MOONCAKE_UNIT_ROWS = original
    assert len(got) == len(stamps) and got == sorted(got)
    # each request stays within its stamp's rounding unit: never before its stamp, under a second after
    for t, ms in zip(got, sorted(stamps), strict=True):
        assert ms / 1000 <= t < ms / 1000 + 1.0
