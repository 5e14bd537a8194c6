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
with the errors a reader raises). The CSV formats are in ``csv_rows``, the cells' rules in ``cells``.
It knows nothing of the engine model or policies.
"""

from __future__ import annotations

import gzip
import json
import math
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain, starmap
from operator import itemgetter
from pathlib import Path
from typing import IO

from fleetslo.core.errors import ConfigError
from fleetslo.sim.traces import cells
from fleetslo.sim.traces.cells import BadRow, Row
from fleetslo.sim.traces.csv_rows import EXPECTED, csv_format, numbered_blocks
from fleetslo.sim.workload import Request, Trace

#: Rounding units (ms) a Mooncake trace may have been rounded to; the largest dividing every timestamp wins.
_MOONCAKE_UNITS_MS = (1000, 100, 10, 1)

_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True, slots=True)
class TraceRead:
    """A parsed trace with what the reader did to it: the detected format and the rows it skipped."""

    trace: Trace
    format: str
    skipped: int = 0


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
    rest = iter(lines)
    numbered = _numbered(rest)
    first = next(numbered, None)
    if first is None:
        raise ConfigError(f"{source}: the file is empty; expected {EXPECTED}")
    number, line = first
    if line.lstrip().startswith("{"):
        fmt = "mooncake"
        rows, skipped = _keep_nonzero([list(_mooncake_rows(chain([first], numbered), source))])
        rows = _spread(rows)
    else:
        fmt, parse_row, width = csv_format(line, source, number)
        blocks = numbered_blocks(rest, number, source, parse_row, width)
        rows, skipped = _keep_nonzero(block for _, block in blocks)
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


def _keep_nonzero(blocks: Iterable[list[Row]]) -> tuple[list[Row], int]:
    """Rows with at least one input and one output token, and how many were dropped."""
    kept: list[Row] = []
    read = 0
    for block in blocks:
        read += len(block)
        kept.extend([row for row in block if row[1] > 0 and row[2] > 0])
    return kept, read - len(kept)


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
                raise BadRow("expected a JSON object per line")
            row = (
                cells.number(record.get("timestamp"), "timestamp"),
                cells.json_count(record.get("input_length"), "input_length"),
                cells.json_count(record.get("output_length"), "output_length"),
            )
        except BadRow as exc:
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
