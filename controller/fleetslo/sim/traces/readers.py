"""Readers for real request-trace formats, detected from the file's content.

Formats (see traces/README.md for provenance):

* Azure LLM inference CSV, 2023 and 2024 — ``TIMESTAMP,ContextTokens,GeneratedTokens``; timestamps are
  datetimes (7-digit fractions, optionally an offset; naive ones are read as UTC), converted to seconds
  from the earliest request.
* Mooncake JSONL — ``{"timestamp": ms, "input_length", "output_length", ...}``. Timestamps are rounded,
  so requests sharing one are spread evenly over the rounding bucket (see ``_spread``).
* BurstGPT CSV — ``Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type[,...]``
  (seconds from start).
* Plain CSV — ``arrival_s,input_tokens,output_tokens`` (seconds from start).

Any of them may be gzip-compressed (``.csv.gz``, ``.jsonl.gz``): detected from the file's first bytes.

Rows with 0 input or 0 output tokens are *skipped and counted* (``TraceRead.skipped``), in every format:
BurstGPT records failed requests that way, and a request that produces no token has no TTFT or TPOT.
Every other bad row is a ``ConfigError`` naming the file, the line and what was expected. Requests come
back sorted by arrival (stable, so equal arrivals keep file order).

This module parses text; ``open_text`` is the one function that opens a file (``reading`` wraps it
with the errors a reader raises). It knows nothing of the
engine model or policies.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import chain, starmap
from operator import itemgetter
from pathlib import Path
from typing import IO

from fleetslo.core.errors import ConfigError
from fleetslo.sim.workload import Request, Trace

AZURE_HEADER = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
BURSTGPT_HEADER = ("Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type")
PLAIN_HEADER = ("arrival_s", "input_tokens", "output_tokens")

EXPECTED = (
    "an Azure LLM inference CSV (header TIMESTAMP,ContextTokens,GeneratedTokens), "
    "a BurstGPT CSV (header Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type), "
    "a plain CSV (header arrival_s,input_tokens,output_tokens) "
    'or Mooncake JSONL (lines like {"timestamp": 0, "input_length": 10, "output_length": 5})'
)

#: More tokens than any model's context; a larger count is a broken row, not a request.
MAX_TOKENS = 10_000_000

#: Rounding units (ms) a Mooncake trace may have been rounded to; the largest dividing every timestamp wins.
_MOONCAKE_UNITS_MS = (1000, 100, 10, 1)

_GZIP_MAGIC = b"\x1f\x8b"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_EPOCH_ORDINAL = _EPOCH.toordinal()

#: (arrival seconds, input tokens, output tokens) of one parsed row.
Row = tuple[float, int, int]


@dataclass(frozen=True, slots=True)
class TraceRead:
    """A parsed trace with what the reader did to it: the detected format and the rows it skipped."""

    trace: Trace
    format: str
    skipped: int = 0


class _BadRow(ValueError):
    """A row-level problem; the caller adds the file and line number."""


def load_trace(path: str | Path) -> Trace:
    """The trace in ``path``, format detected from its content; ``ConfigError`` for anything else."""
    return read_trace(path).trace


def read_trace(path: str | Path) -> TraceRead:
    """Like ``load_trace``, also reporting the detected format and the count of skipped 0-token rows."""
    with reading(path) as handle:
        return parse_trace(handle, str(path))


@contextmanager
def reading(path: str | Path) -> Iterator[IO[str]]:
    """The trace file open as text (``open_text``), its read errors as ``ConfigError``s naming it:
    the whole-file reader's and the streamed one's (``stream.stream_trace``, whose reads happen
    inside the block as the stream is consumed)."""
    source = str(path)
    try:
        with open_text(path) as handle:
            yield handle
    except (OSError, EOFError, zlib.error) as exc:  # a gzip file cut short or corrupt
        raise ConfigError(f"{source}: cannot read the trace file ({_why(exc)})") from exc
    except UnicodeDecodeError as exc:
        problem = f"not a text file (byte {exc.start} is not UTF-8)"
        raise ConfigError(f"{source}: {problem}; expected {EXPECTED}") from exc


def open_text(path: str | Path) -> IO[str]:
    """The file as text, gunzipped on the fly when it is gzip (traces are often shipped as .csv.gz)."""
    with Path(path).open("rb") as probe:
        magic = probe.read(2)
    if magic == _GZIP_MAGIC:
        return gzip.open(path, "rt", encoding="utf-8-sig", newline="")
    return Path(path).open(encoding="utf-8-sig", newline="")


def _why(exc: BaseException) -> str:
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc) or type(exc).__name__


def parse_trace(lines: Iterable[str], source: str) -> TraceRead:
    """Parse trace text (an iterable of lines, e.g. an open file); ``source`` names it in errors."""
    numbered = _numbered(lines)
    first = next(numbered, None)
    if first is None:
        raise ConfigError(f"{source}: the file is empty; expected {EXPECTED}")
    number, line = first
    if line.lstrip().startswith("{"):
        fmt = "mooncake"
        rows, skipped = _keep_nonzero(_mooncake_rows(chain([first], numbered), source))
        rows = _spread(rows)
    else:
        fmt, parse_row, width = _csv_format(line, source, number)
        rows, skipped = _keep_nonzero(_csv_rows(numbered, source, parse_row, width))
        if fmt == "azure":
            rows = _rebase(rows)
    if not rows:
        raise ConfigError(f"{source}: no requests with tokens in the file ({skipped} rows skipped)")
    rows.sort(key=itemgetter(0))
    return TraceRead(Trace(tuple(starmap(Request, rows)), source), fmt, skipped)


# --- line plumbing ----------------------------------------------------------------------------


def _numbered(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """Non-blank lines with their 1-based line numbers."""
    for number, line in enumerate(lines, start=1):
        if line.strip():
            yield number, line


def _keep_nonzero(rows: Iterable[Row]) -> tuple[list[Row], int]:
    """Rows with at least one input and one output token, and how many were dropped."""
    kept: list[Row] = []
    skipped = 0
    for row in rows:
        if row[1] > 0 and row[2] > 0:
            kept.append(row)
        else:
            skipped += 1
    return kept, skipped


# --- CSV formats ------------------------------------------------------------------------------


def _csv_format(header_line: str, source: str, number: int) -> tuple[str, Callable[[list[str]], Row], int]:
    """Which CSV format a header names: (format name, row parser, number of columns)."""
    try:
        header = tuple(cell.strip() for cell in next(csv.reader([header_line])))
    except (csv.Error, StopIteration) as exc:
        raise ConfigError(f"{source}:{number}: unreadable header; expected {EXPECTED}") from exc
    if header == AZURE_HEADER:
        return "azure", _azure_row, len(header)
    if header[: len(BURSTGPT_HEADER)] == BURSTGPT_HEADER:
        return "burstgpt", _burstgpt_row, len(header)
    if header == PLAIN_HEADER:
        return "plain", _plain_row, len(header)
    shown = header_line.strip()[:120]
    problem = f"unrecognised trace format (first line {shown!r})"
    raise ConfigError(f"{source}:{number}: {problem}; expected {EXPECTED}")


def _csv_rows(
    numbered: Iterator[tuple[int, str]], source: str, parse_row: Callable[[list[str]], Row], width: int
) -> Iterator[Row]:
    return (row for _, row in csv_numbered(numbered, source, parse_row, width))


def csv_numbered(
    numbered: Iterator[tuple[int, str]], source: str, parse_row: Callable[[list[str]], Row], width: int
) -> Iterator[tuple[int, Row]]:
    """(line number, row) of CSV lines parsed by ``parse_row``."""
    where = [0]  # the line number of the row csv.reader is on (blank lines are not fed to it)

    def text() -> Iterator[str]:
        for number, line in numbered:
            where[0] = number
            yield line

    try:
        for cells in csv.reader(text()):
            if len(cells) != width:
                raise ConfigError(f"{source}:{where[0]}: {len(cells)} columns, expected {width}")
            try:
                yield where[0], parse_row(cells)
            except _BadRow as exc:
                raise ConfigError(f"{source}:{where[0]}: {exc}") from None
    except csv.Error as exc:
        raise ConfigError(f"{source}:{where[0]}: unreadable CSV ({exc})") from None


def _azure_row(cells: list[str]) -> Row:
    return _datetime_micros(cells[0]), _count(cells[1], "ContextTokens"), _count(cells[2], "GeneratedTokens")


def _burstgpt_row(cells: list[str]) -> Row:
    arrival = _seconds(cells[0], "Timestamp")
    return arrival, _count(cells[2], "Request tokens"), _count(cells[3], "Response tokens")


def _plain_row(cells: list[str]) -> Row:
    arrival = _seconds(cells[0], "arrival_s")
    return arrival, _count(cells[1], "input_tokens"), _count(cells[2], "output_tokens")


def _rebase(rows: list[Row]) -> list[Row]:
    """Absolute timestamps (µs) to seconds from the earliest request."""
    start = min((row[0] for row in rows), default=0.0)
    return [((t - start) / 1e6, n_in, n_out) for t, n_in, n_out in rows]


# --- Mooncake JSONL ---------------------------------------------------------------------------


def _mooncake_rows(numbered: Iterator[tuple[int, str]], source: str) -> Iterator[tuple[float, int, int]]:
    """Rows with the timestamp still in milliseconds (``_spread`` converts them)."""
    return (row for _, row in mooncake_numbered(numbered, source))


def mooncake_numbered(numbered: Iterator[tuple[int, str]], source: str) -> Iterator[tuple[int, Row]]:
    """(line number, row) of Mooncake JSONL lines, the timestamp still in milliseconds."""
    for number, line in numbered:
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise _BadRow("expected a JSON object per line")
            row = (
                _number(record.get("timestamp"), "timestamp"),
                _json_count(record.get("input_length"), "input_length"),
                _json_count(record.get("output_length"), "output_length"),
            )
        except _BadRow as exc:
            raise ConfigError(f"{source}:{number}: {exc}") from None
        except (ValueError, RecursionError) as exc:
            raise ConfigError(f"{source}:{number}: not valid JSON ({type(exc).__name__})") from None
        yield number, row


def _spread(rows_ms: list[Row]) -> list[Row]:
    """Millisecond rows to seconds, spreading requests that share a timestamp over its rounding bucket.

    The bucket is the largest of 1 s, 100 ms, 10 ms and 1 ms that divides every timestamp. The k requests
    stamped ``t`` arrive at ``t + i·bucket/k`` (i = 0..k-1, file order): deterministic, the first one keeps
    its stamp, and none crosses into the next bucket.
    """
    unit = rounding_unit_ms([row[0] for row in rows_ms])
    ordered = sorted(rows_ms, key=lambda row: row[0])
    out: list[Row] = []
    i = 0
    while i < len(ordered):
        j = i
        while j < len(ordered) and ordered[j][0] == ordered[i][0]:
            j += 1
        out.extend(spread_group(ordered[i:j], unit))
        i = j
    return out


def spread_group(group: list[Row], unit: float) -> Iterator[Row]:
    """Rows sharing one millisecond stamp, in seconds, spread evenly over the rounding ``unit``."""
    k = len(group)
    for i, (ms, n_in, n_out) in enumerate(group):
        yield (ms + i * unit / k) / 1000.0, n_in, n_out


def rounding_unit_ms(stamps: Iterable[float], below: float = math.inf) -> float:
    """The largest rounding unit (ms, at most ``below``) dividing every stamp; 0 for fractional ones."""
    stamps = list(stamps)
    if any(not s.is_integer() for s in stamps):
        return 0.0  # fractional milliseconds: not rounded, nothing to spread
    for unit in _MOONCAKE_UNITS_MS:
        if unit <= below and all(int(s) % unit == 0 for s in stamps):
            return float(unit)
    return 1.0


# --- cells ------------------------------------------------------------------------------------


def _datetime_micros(cell: str) -> float:
    """Microseconds since the epoch: whole numbers, exact in a float (< 2**53), so rebasing loses nothing."""
    try:
        when = datetime.fromisoformat(cell.strip())
    except ValueError:
        example = "2023-11-16 18:17:03.9799600"
        raise _BadRow(f"TIMESTAMP {_short(cell)} is not a date-time like {example}") from None
    if when.tzinfo is None:
        # naive means UTC: the same whole microseconds as the timedelta below, without building one
        days = when.toordinal() - _EPOCH_ORDINAL
        seconds = (days * 86_400 + when.hour * 3_600 + when.minute * 60 + when.second) * 1_000_000
        return float(seconds + when.microsecond)
    return float((when - _EPOCH) // _MICROSECOND)


def _seconds(cell: str, column: str) -> float:
    try:
        value = float(cell)
    except ValueError:
        raise _BadRow(f"{column} {_short(cell)} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise _BadRow(f"{column} {_short(cell)} must be a finite number of seconds >= 0")
    return value


def _count(cell: str, column: str) -> int:
    try:
        value = float(cell)
    except ValueError:
        raise _BadRow(f"{column} {_short(cell)} is not a token count") from None
    if 0 <= value <= MAX_TOKENS and value.is_integer():
        return int(value)  # the common case, checked in one line (two cells of every row of a long trace)
    return _json_count(value, column)  # says what is wrong with it


def _number(value: object, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _BadRow(f"{key} must be a number (got {_short(value)})")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number) or number < 0:
        raise _BadRow(f"{key} must be a finite number >= 0 (got {_short(value)})")
    return number


def _json_count(value: object, key: str) -> int:
    number = _number(value, key)
    if not number.is_integer() or number > MAX_TOKENS:
        raise _BadRow(f"{key} must be a whole number of tokens <= {MAX_TOKENS:,} (got {_short(value)})")
    return int(number)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
