"""Azure and plain CSVs are read in blocks (one regular expression per block of plain lines) for speed: the
rows, line numbers and errors are exactly those of reading the same lines one by one."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import count, islice

import pytest
from fleetslo.core.errors import ConfigError
from fleetslo.sim.traces import csv_rows
from fleetslo.sim.traces.cells import Row, datetime_micros
from fleetslo.sim.traces.csv_rows import BLOCK_LINES, AzureRow, PlainRow, csv_numbered
from fleetslo.sim.traces.stream import stream_lines
from hypothesis import given, settings
from hypothesis import strategies as st

START = datetime(2023, 11, 16, 18, 17, 3, tzinfo=UTC)

PLAIN = st.builds(
    lambda seconds, fraction, n_in, n_out, sep: (
        f"{(START + timedelta(seconds=seconds)):%Y-%m-%d{sep}%H:%M:%S}.{fraction:07d},{n_in},{n_out}\n"
    ),
    st.integers(0, 3 * 86_400),
    st.integers(0, 9_999_999),
    st.integers(0, 9_999_999),
    st.integers(0, 9_999_999),
    st.sampled_from([" ", "T"]),
)
#: 2024's shape: six digits (or none on a whole second) and a UTC offset.
PLAIN_2024 = st.builds(
    lambda seconds, fraction, digits, offset, n_in, n_out: (
        f"{(START + timedelta(seconds=seconds)):%Y-%m-%d %H:%M:%S}"
        f"{'.' + str(fraction).zfill(7)[:digits] if digits else ''}{offset},{n_in},{n_out}\n"
    ),
    st.integers(0, 3 * 86_400),
    st.integers(0, 9_999_999),
    st.sampled_from([0, 1, 3, 6, 6, 6, 7]),
    st.sampled_from(["+00:00", "+00:00", "-03:30", "+05:45", "+0530", "Z", ""]),
    st.integers(0, 9_999_999),
    st.integers(0, 9_999_999),
)
ODD = st.sampled_from(
    [
        "\n",
        "   \n",
        "2023-11-16 18:17:03.9799600,10,5\r\n",  # CRLF
        "2023-11-16 18:17:03.979960,10,5\n",  # six digits
        "2023-11-16 18:17:03,10,5\n",  # whole seconds
        "2024-05-10 00:00:00.0000000+02:00,10,5\n",  # an offset
        "2023-13-16 18:17:03.9799600,10,5\n",  # month 13
        "2023-11-16 18:17:03.9799600,10,5,1\n",  # four columns
        "2023-11-16 18:17:03.97996٠٠,10,5\n",  # Arabic-Indic digits
        "2023-11-16 18:17:03.9799600,10000000,5\n",  # the largest count
        "2023-11-16 18:17:03.9799600,10000001,5\n",  # one more
        "2023-11-16 18:17:03.9799600,1e3,5\n",
        '"2023-11-16 18:17:03.9799600",10,5\n',  # quoted: csv.reader from here on
        "2023-11-16 18:17:03.9799600,0,5\n",  # zero tokens (skipped by the callers)
        "2023-11-16 18:17:03.9799600,x,5\n",
        "2024-05-10 00:00:00.009930+24:00,10,5\n",  # an offset out of range
        "2024-05-10 00:00:00.99999999+00:00,10,5\n",  # eight digits
        "2024-05-10 00:00:00.009930+00:00 ,10,5\n",
    ]
)


PLAIN_CSV = st.one_of(
    st.builds(
        lambda t, n_in, n_out: f"{t},{n_in},{n_out}\n",
        st.one_of(
            st.integers(0, 10**9), st.floats(0, 1e9).map(repr), st.decimals(0, 10**6, places=7).map(str)
        ),
        st.integers(0, 9_999_999),
        st.integers(0, 9_999_999),
    ),
    st.sampled_from(["\n", "1e3,10,5\n", " 12,10,5\n", "-1,10,5\n", "nan,10,5\n", "12.,10,5\n", "1,2\n"]),
)


class _LineByLine:
    """A parser without its block reader: csv_numbered then reads line by line."""

    def __init__(self, row: AzureRow | PlainRow) -> None:
        self.row = row

    def __call__(self, cells: list[str]) -> Row:
        return self.row(cells)


def read(lines: list[str], parse_row: object) -> list[tuple[int, Row]] | str:
    try:
        return list(csv_numbered(iter(lines), 1, "t.csv", parse_row, 3))  # type: ignore[arg-type]
    except ConfigError as exc:
        return str(exc)


def blocks_and_lines(lines: list[str], block: int, parser: type[AzureRow | PlainRow]) -> None:
    original = csv_rows.BLOCK_LINES
    csv_rows.BLOCK_LINES = block  # small blocks: a bad line anywhere in a block, blocks after a good one
    try:
        assert read(lines, parser()) == read(lines, _LineByLine(parser()))
    finally:
        csv_rows.BLOCK_LINES = original


@settings(max_examples=300)
@given(st.lists(st.one_of(PLAIN, PLAIN, PLAIN_2024, PLAIN_2024, ODD), max_size=40), st.integers(1, 7))
def test_azure_blocks_read_what_the_lines_read(lines: list[str], block: int) -> None:
    blocks_and_lines(lines, block, AzureRow)


@settings(max_examples=200)
@given(st.lists(PLAIN_CSV, max_size=40), st.integers(1, 7))
def test_plain_blocks_read_what_the_lines_read(lines: list[str], block: int) -> None:
    blocks_and_lines(lines, block, PlainRow)


@given(
    st.lists(
        st.builds(
            lambda second, fraction, digits, offset: (
                f"{(START + timedelta(seconds=second)):%Y-%m-%d %H:%M:%S}"
                f"{'.' + str(fraction).zfill(7)[:digits] if digits else ''}{offset},10,5\n"
            ),
            st.integers(0, 3),  # a few seconds: most lines share the second before them
            st.integers(0, 9_999_999),
            st.sampled_from([0, 1, 6, 7]),
            st.sampled_from(["", "+00:00", "-03:30"]),
        ),
        min_size=1,
        max_size=60,
    )
)
def test_a_block_reads_each_stamp_as_fromisoformat_does(lines: list[str]) -> None:
    """The block keeps the second (and offset) read last and adds each line's fraction to it."""
    rows = AzureRow().block(lines)
    assert rows is not None
    assert [row[0] for row in rows] == [datetime_micros(line.split(",")[0]) for line in lines]


def test_the_2024_shape_reads_as_fromisoformat_reads_it() -> None:
    lines = [
        "2024-05-10 00:00:00.009930+00:00,10,5\n",
        "2024-05-10 00:00:00.019930+00:00,11,6\n",
        "2024-05-10 00:00:01+00:00,12,7\n",
        "2024-05-10 02:00:01.5+02:00,13,8\n",  # the same instant as the row before, plus 0.5 s
        "2024-05-10 02:00:01.5+00:00,14,9\n",  # the same wall clock two hours later
    ]
    rows = AzureRow().block(lines)
    assert rows is not None
    assert [r[0] for r in rows] == [datetime_micros(line.split(",")[0]) for line in lines]
    assert rows[3][0] - rows[2][0] == 500_000
    assert rows[4][0] - rows[3][0] == 7_200_000_000


def test_a_bad_row_deep_in_a_block_is_named_by_its_line() -> None:
    good = [f"2023-11-16 18:17:{i % 60:02d}.{i:07d},10,5\n" for i in range(2 * BLOCK_LINES)]
    lines = [*good[:5000], "2023-11-16 25:17:03.9799600,10,5\n", *good[5000:]]
    with pytest.raises(ConfigError, match=r"^t\.csv:5002: TIMESTAMP '2023-11-16 25:17:03.9799600'"):
        list(csv_numbered(iter(lines), 1, "t.csv", AzureRow(), 3))


def test_a_streamed_azure_trace_reads_no_more_than_a_block_ahead() -> None:
    read = count()

    def endless() -> Iterator[str]:
        yield "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        for i in count():
            next(read)
            yield f"{START + timedelta(seconds=i / 2):%Y-%m-%d %H:%M:%S}.{(i % 2) * 5_000_000:07d},10,10\n"

    first = list(islice(stream_lines(endless(), "endless", reorder_s=60.0), 10))
    assert [r.arrival_s for r in first] == [i * 0.5 for i in range(10)]
    assert next(read) <= BLOCK_LINES  # one block; the reorder window's 120 rows are inside it


def test_a_file_of_long_lines_is_not_held_a_whole_block_at_a_time() -> None:
    """A broken or hostile file of 1 MB lines: a block stops once it holds BLOCK_CHARS characters
    (a few lines), not 4,096 lines (4 GB); the first bad line is still named."""
    read = count()

    def long_lines() -> Iterator[str]:
        for _ in range(BLOCK_LINES):
            next(read)
            yield "9" * 1_000_000 + ",10,5\n"

    rows = csv_numbered(long_lines(), 1, "t.csv", AzureRow(), 3)
    with pytest.raises(ConfigError, match=r"^t\.csv:2: TIMESTAMP '9999"):
        next(rows)
    assert next(read) <= 64 + 2  # one part of lines past the character bound
