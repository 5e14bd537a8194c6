"""Trace readers: the real files in traces/, each format by example, and the errors people see."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fleetslo.core.errors import ConfigError
from fleetslo.sim.traces import load_trace, parse_trace, read_trace

REPO = Path(__file__).resolve().parents[3]
TRACES = REPO / "traces"


def parse(text: str, source: str = "t.csv"):  # type: ignore[no-untyped-def]
    return parse_trace(text.splitlines(keepends=True), source)


@pytest.mark.parametrize(
    ("name", "count", "minutes"),
    [
        ("azure2023/AzureLLMInferenceTrace_code.csv", 8819, 57),
        ("azure2023/AzureLLMInferenceTrace_conv.csv", 19366, 58),
        ("mooncake/synthetic_trace.jsonl", 3993, 17),
    ],
)
def test_real_traces_load_sorted_from_zero(name: str, count: int, minutes: int) -> None:
    read = read_trace(TRACES / name)
    arrivals = [r.arrival_s for r in read.trace.requests]
    assert len(read.trace) == count
    assert read.skipped == 0
    assert arrivals[0] == 0.0
    assert arrivals == sorted(arrivals)
    assert int(read.trace.duration_s // 60) == minutes
    assert all(r.input_tokens > 0 and r.output_tokens > 0 for r in read.trace.requests)
    assert read.trace.source == str(TRACES / name)


def test_azure_first_rows_exact() -> None:
    trace = load_trace(TRACES / "azure2023/AzureLLMInferenceTrace_code.csv")
    first = trace.requests[:3]
    assert [(r.input_tokens, r.output_tokens) for r in first] == [(4808, 10), (3180, 8), (110, 27)]
    # 18:17:03.9799600 -> 18:17:04.0319600 -> 18:17:04.0781490: exact to the microsecond
    assert [r.arrival_s for r in first] == [0.0, 0.052, 0.098189]


def test_azure_2024_with_offset_and_unsorted_rows() -> None:
    read = parse(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2024-05-10 00:00:01.5000000+00:00,100,5\n"
        "2024-05-10 00:00:00.0095070+00:00,200,6\n"
        "2024-05-10 02:00:00.0095070+02:00,300,7\n"  # same instant as the second row
    )
    assert read.format == "azure"
    assert [(r.arrival_s, r.input_tokens) for r in read.trace.requests] == [
        (0.0, 200),
        (0.0, 300),
        (1.490493, 100),
    ]


def test_mooncake_spreads_shared_timestamps_within_the_bucket() -> None:
    rows = [(0, 10), (0, 11), (0, 12), (1000, 13), (3000, 14), (3000, 15)]
    text = "".join(
        json.dumps({"timestamp": t, "input_length": n, "output_length": 2}) + "\n" for t, n in rows
    )
    read = parse(text, "m.jsonl")
    got = [(round(r.arrival_s, 6), r.input_tokens) for r in read.trace.requests]
    # every stamp is a whole second, so the bucket is 1 s; file order kept inside a bucket
    assert got == [(0.0, 10), (0.333333, 11), (0.666667, 12), (1.0, 13), (3.0, 14), (3.5, 15)]


def test_mooncake_millisecond_stamps_spread_within_one_ms() -> None:
    text = "\n".join(
        json.dumps({"timestamp": t, "input_length": 5, "output_length": 1, "hash_ids": [1]})
        for t in (7, 7, 9)
    )
    assert [r.arrival_s for r in parse(text).trace.requests] == [0.007, 0.0075, 0.009]


def test_burstgpt_skips_failed_requests_with_a_count() -> None:
    read = parse(
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type,Session ID,Elapsed time\n"
        "5,ChatGPT,472,18,490,Conversation log,1,2.1\n"
        "45,GPT-4,1087,0,1087,API log,2,0.3\n"
        "12.5,ChatGPT,30,100,130,Conversation log,3,4.0\n"
    )
    assert read.format == "burstgpt"
    assert read.skipped == 1
    assert [(r.arrival_s, r.input_tokens, r.output_tokens) for r in read.trace.requests] == [
        (5.0, 472, 18),
        (12.5, 30, 100),
    ]


def test_plain_csv_with_blank_lines_crlf_and_bom(tmp_path: Path) -> None:
    path = tmp_path / "plain.csv"
    path.write_bytes(b"\xef\xbb\xbfarrival_s,input_tokens,output_tokens\r\n0.5,10,20\r\n\r\n0.25,1,2\r\n")
    read = read_trace(path)
    assert read.format == "plain"
    assert [(r.arrival_s, r.input_tokens) for r in read.trace.requests] == [(0.25, 1), (0.5, 10)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("\n\n", "empty"),
        ("time,prompt,reply\n1,2,3\n", "t.csv:1: unrecognised trace format"),
        ("arrival_s,input_tokens,output_tokens\n1,2,3\n\nx,2,3\n", "t.csv:4: arrival_s 'x' is not a number"),
        ("arrival_s,input_tokens,output_tokens\n1,2\n", "t.csv:2: 2 columns, expected 3"),
        ("arrival_s,input_tokens,output_tokens\n-1,2,3\n", ">= 0"),
        ("arrival_s,input_tokens,output_tokens\nnan,2,3\n", "finite"),
        ("arrival_s,input_tokens,output_tokens\n1,2.5,3\n", "whole number"),
        ("arrival_s,input_tokens,output_tokens\n1,2,-3\n", ">= 0"),
        (
            "arrival_s,input_tokens,output_tokens\n1,0,3\n",
            "no requests with tokens in the file (1 rows skipped)",
        ),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,1\n",
            "TIMESTAMP 'yesterday' is not a date-time",
        ),
        ('{"timestamp": 1, "input_length": 5}\n', "t.csv:1: output_length must be a number (got None)"),
        ('{"timestamp": true, "input_length": 5, "output_length": 1}\n', "timestamp must be a number"),
        ('{"timestamp": 1, "input_length": 5, "output_length": 1}\n{oops\n', "t.csv:2: not valid JSON"),
        ("[1, 2]\n", "unrecognised trace format"),
        ('{"timestamp": 1, "input_length": 1e30, "output_length": 1}\n', "tokens <= 10,000,000"),
    ],
)
def test_bad_input_names_file_line_and_expectation(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=None) as info:
        parse(text)
    assert message in str(info.value)


def test_unrecognised_format_lists_what_is_accepted() -> None:
    with pytest.raises(ConfigError) as info:
        parse("hello world\n")
    for expected in ("TIMESTAMP,ContextTokens,GeneratedTokens", "Mooncake JSONL", "arrival_s", "BurstGPT"):
        assert expected in str(info.value)


def test_missing_and_binary_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the trace file"):
        load_trace(tmp_path / "nope.csv")
    with pytest.raises(ConfigError, match="cannot read the trace file"):
        load_trace(tmp_path)
    binary = tmp_path / "trace.bin"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(ConfigError, match=r"trace\.bin: not a text file"):
        load_trace(binary)


def test_deeply_nested_json_is_a_config_error_not_a_crash() -> None:
    with pytest.raises(ConfigError, match="not valid JSON"):
        parse('{"timestamp": ' + "[" * 100_000 + "\n")


def test_gzip_traces_read_as_the_plain_file_and_a_cut_one_is_a_clear_error(tmp_path: Path) -> None:
    import gzip

    plain = TRACES / "azure2023/AzureLLMInferenceTrace_code.csv"
    packed = tmp_path / "code.csv.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert load_trace(packed).requests == load_trace(plain).requests
    cut = tmp_path / "cut.csv.gz"
    cut.write_bytes(packed.read_bytes()[:5000])
    with pytest.raises(ConfigError, match=r"cut\.csv\.gz: cannot read the trace file"):
        load_trace(cut)
    data = packed.read_bytes()
    corrupt = tmp_path / "corrupt.csv.gz"
    corrupt.write_bytes(data[:20] + bytes(200) + data[220:])  # the deflate stream broken
    with pytest.raises(ConfigError, match=r"corrupt\.csv\.gz: cannot read the trace file"):
        load_trace(corrupt)
