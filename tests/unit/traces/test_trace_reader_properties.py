"""Property tests: whatever bytes a trace file holds, the readers return a sorted trace or a ConfigError."""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path

from fleetslo.core.errors import ConfigError
from fleetslo.sim.traces import parse_trace, read_trace
from fleetslo.sim.traces.csv_rows import AZURE_HEADER, BURSTGPT_HEADER, PLAIN_HEADER
from hypothesis import given, settings
from hypothesis import strategies as st

HEADERS = [",".join(AZURE_HEADER), ",".join(BURSTGPT_HEADER), ",".join(PLAIN_HEADER)]
CELL = st.one_of(
    st.integers(-5, 10**12).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(
        ["", "2023-11-16 18:17:03.9799600", "2024-05-10 00:00:00+02:00", '"a,b"', "1e999", "ChatGPT"]
    ),
    st.text(max_size=8),
)
JSON_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**30), 10**30),
    st.floats(),
    st.text(max_size=5),
    st.lists(st.integers()),
)


def check(lines: list[str]) -> None:
    try:
        read = parse_trace(lines, "prop")
    except ConfigError:
        return
    arrivals = [r.arrival_s for r in read.trace.requests]
    assert arrivals == sorted(arrivals)
    assert all(t >= 0 for t in arrivals)
    assert all(r.input_tokens > 0 and r.output_tokens > 0 for r in read.trace.requests)


@given(st.text())
def test_arbitrary_text(text: str) -> None:
    check(text.splitlines(keepends=True))


@given(st.sampled_from(HEADERS), st.lists(st.lists(CELL, min_size=0, max_size=9).map(",".join), max_size=8))
def test_csv_like_rows(header: str, rows: list[str]) -> None:
    check([header + "\n", *(row + "\n" for row in rows)])


@given(
    st.lists(
        st.one_of(
            st.fixed_dictionaries(
                {"timestamp": JSON_VALUE, "input_length": JSON_VALUE, "output_length": JSON_VALUE}
            ).map(json.dumps),
            st.text(max_size=10).map(lambda s: "{" + s),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_jsonl_like_rows(rows: list[str]) -> None:
    check([row + "\n" for row in rows])


@settings(max_examples=50)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_on_disk(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace"
        path.write_bytes(data)
        with contextlib.suppress(ConfigError):
            read_trace(path)
