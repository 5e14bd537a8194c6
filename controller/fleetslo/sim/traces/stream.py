"""Read a trace file as a stream of requests: days of traffic in the memory of a minute.

``readers.load_trace`` holds every row, then every ``Request``: about 250 bytes a request, 2.5 GB
for the 10 million of three days at 40 requests/s, and a week of a busy service is several times
that. ``stream_trace`` parses the same formats with the same row rules (``readers``: zero-token rows
skipped and counted, any other bad row a ``ConfigError`` naming the line) but yields requests one
at a time, in arrival order, holding only a reorder buffer.

**Order.** Real logs are written as requests finish or in batches, so a row may come a little before
one stamped earlier. Rows wait in a buffer until ``reorder_s`` of trace time has been read past them
and leave sorted (ties in file order, as ``load_trace``'s stable sort). A row stamped earlier than one
already yielded is out of order by more than the buffer: a ``ConfigError`` naming its line, which says
to sort the file, to widen the buffer (``fleetslo simulate --reorder-s``: a log written as requests
finish lags by its longest answer), or to read it whole, without streaming.

**Time zero** is the earliest request for Azure's datetimes (as ``load_trace``): the first one out of
the buffer. BurstGPT and plain CSVs keep their own seconds. Mooncake timestamps are rounded: requests
sharing a stamp are spread over the rounding unit, as ``readers._spread`` does, with the unit read from
the first ``MOONCAKE_UNIT_ROWS`` rows (the whole-file reader reads it from every row; a unit that a
later row contradicts is narrowed from there on).

``shaped`` is the streaming counterpart of ``compare.shape_trace``: cut, stretch, scale, lazily.
Cut and stretch give the requests ``transforms.window``/``time_scale`` give; ``--rate-scale`` thins and
superposes copies as ``transforms.rate_scale`` does, each copy with its own random stream (so the
result is the same in distribution, not request for request).

Pure of the engine; ``stream_trace`` opens the file through ``readers.reading`` (its read errors the
whole-file reader's), ``stream_lines`` takes lines already open.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, count, islice, starmap
from pathlib import Path

from fleetslo.core.errors import ConfigError
from fleetslo.sim.traces.cells import Row
from fleetslo.sim.traces.csv_rows import EXPECTED, csv_format, csv_numbered
from fleetslo.sim.traces.readers import (
    _numbered,
    mooncake_numbered,
    reading,
    rounding_unit_ms,
    spread_group,
)
from fleetslo.sim.traces.transforms import DEFAULT_JITTER_S
from fleetslo.sim.workload import Request

#: Trace seconds a row may come after one stamped later (the reorder buffer's span).
REORDER_S = 60.0
#: Rows a Mooncake trace's rounding unit is read from.
MOONCAKE_UNIT_ROWS = 100_000


@dataclass(slots=True)
class StreamStats:
    """What the reader did, filled in as the stream is read: the format, rows yielded and skipped."""

    format: str = ""
    requests: int = 0
    skipped: int = 0


def stream_trace(
    path: str | Path, *, reorder_s: float = REORDER_S, stats: StreamStats | None = None
) -> Iterator[Request]:
    """The requests of the trace file at ``path`` in arrival order, read as they are needed.

    Errors are raised where the bad row is read: a caller that must not start work on a bad file
    reads the first request before starting (``first_request``).
    """
    with reading(path) as handle:
        yield from stream_lines(handle, str(path), reorder_s=reorder_s, stats=stats)


def stream_lines(
    lines: Iterable[str], source: str, *, reorder_s: float = REORDER_S, stats: StreamStats | None = None
) -> Iterator[Request]:
    """``stream_trace`` over lines already open (``source`` names them in errors)."""
    if not (math.isfinite(reorder_s) and reorder_s >= 0):
        raise ConfigError(f"reorder window must be a finite number of seconds >= 0, got {reorder_s!r}")
    stats = stats if stats is not None else StreamStats()
    rest = iter(lines)
    numbered = _numbered(rest)
    first = next(numbered, None)
    if first is None:
        raise ConfigError(f"{source}: the file is empty; expected {EXPECTED}")
    rows: Iterator[tuple[int, Row]]
    if first[1].lstrip().startswith("{"):
        stats.format = "mooncake"
        rows = mooncake_numbered(chain([first], numbered), source)
        per_second = 1e3  # milliseconds until spread
    else:
        fmt, parse_row, width = csv_format(first[1], source, first[0])
        stats.format = fmt
        rows = csv_numbered(rest, first[0], source, parse_row, width)
        per_second = 1e6 if fmt == "azure" else 1.0  # Azure's datetimes are read in microseconds
    ordered = _in_order(_nonzero(rows, stats), reorder_s * per_second, reorder_s, source)
    if stats.format == "mooncake":
        out = _spread_stream(ordered)
    else:
        rebase = stats.format == "azure"
        out = _seconds(ordered, per_second, rebase)
    yielded = False
    for request in out:
        yielded = True
        stats.requests += 1
        yield request
    if not yielded:
        raise ConfigError(f"{source}: no requests with tokens in the file ({stats.skipped} rows skipped)")


def first_request(requests: Iterator[Request]) -> tuple[Request, Iterator[Request]]:
    """The stream's first request (reading it raises the file's first error) and the whole stream."""
    head = next(requests)
    return head, chain([head], requests)


def shaped(
    requests: Iterable[Request],
    *,
    start_s: float | None = None,
    duration_s: float | None = None,
    time_scale: float | None = None,
    rate_scale: float | None = None,
    seed: int = 0,
    jitter_s: float = DEFAULT_JITTER_S,
) -> Iterator[Request]:
    """Cut (``start_s``, ``duration_s``, on the trace's clock), stretch, then scale the rate, lazily."""
    if start_s is not None and not (math.isfinite(start_s) and start_s >= 0):
        raise ConfigError(f"start must be a finite number >= 0, got {start_s!r}")
    for name, value in (("duration", duration_s), ("time scale", time_scale), ("rate scale", rate_scale)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise ConfigError(f"{name} must be a finite number > 0, got {value!r}")
    out: Iterator[Request] = iter(requests)
    if start_s is not None or duration_s is not None:
        out = _window(out, start_s or 0.0, duration_s)
    if time_scale is not None:
        factor = time_scale
        out = (Request(r.arrival_s * factor, r.input_tokens, r.output_tokens) for r in out)
    if rate_scale is not None:
        out = _rate_scaled(out, rate_scale, seed, jitter_s)
    return out


# --- reading ----------------------------------------------------------------------------------


def _nonzero(rows: Iterable[tuple[int, Row]], stats: StreamStats) -> Iterator[tuple[int, Row]]:
    for number, row in rows:
        if row[1] > 0 and row[2] > 0:
            yield number, row
        else:
            stats.skipped += 1


def _in_order(
    rows: Iterable[tuple[int, Row]], reorder: float, reorder_s: float, source: str
) -> Iterator[Row]:
    """Rows sorted by time (ties in file order), through a buffer ``reorder`` time units deep (the
    file's own unit: microseconds for Azure, milliseconds for Mooncake; ``reorder_s`` in seconds).

    While the rows come in order (a sorted file) the buffer is a queue; the first row stamped before
    the newest turns it into a heap (a sorted queue already is one) for the rest of the file."""
    queue: deque[tuple[float, int, Row]] = deque()
    sequence = count()
    last = newest = -math.inf
    rows = iter(rows)
    for number, row in rows:
        t = row[0]
        if t < newest:
            if t < last:
                raise _out_of_order(source, number, reorder_s)
            buffer = list(queue)  # sorted: a heap as it is
            heapq.heappush(buffer, (t, next(sequence), row))
            yield from _heap_ordered(
                buffer, rows, newest=newest, last=last, reorder=reorder, reorder_s=reorder_s,
                source=source, sequence=sequence,
            )  # fmt: skip
            return
        queue.append((t, next(sequence), row))
        newest = t
        while queue[0][0] < newest - reorder:
            last, _, out = queue.popleft()
            yield out
    for _, _, row in queue:
        yield row


def _heap_ordered(
    buffer: list[tuple[float, int, Row]],
    rows: Iterator[tuple[int, Row]],
    *,
    newest: float,
    last: float,
    reorder: float,
    reorder_s: float,
    source: str,
    sequence: Iterator[int],
) -> Iterator[Row]:
    """``_in_order`` from the first row out of order on: the buffer a heap."""
    for number, row in rows:
        t = row[0]
        if t < last:
            raise _out_of_order(source, number, reorder_s)
        heapq.heappush(buffer, (t, next(sequence), row))
        newest = max(newest, t)
        while buffer[0][0] < newest - reorder:
            last, _, out = heapq.heappop(buffer)
            yield out
    while buffer:
        yield heapq.heappop(buffer)[2]


def _out_of_order(source: str, number: int, reorder_s: float) -> ConfigError:
    return ConfigError(
        f"{source}:{number}: this row is stamped before a request already read, more than "
        f"{reorder_s:g} s out of time order; sort the file by time, widen the reorder window "
        "(--reorder-s), or read it whole without --stream"
    )


def _seconds(rows: Iterable[Row], per_second: float, rebase: bool) -> Iterator[Request]:
    base: float | None = None if rebase else 0.0
    for t, n_in, n_out in rows:
        if base is None:
            base = t
        yield Request((t - base) / per_second if rebase else t, n_in, n_out)


def _spread_stream(rows: Iterator[Row]) -> Iterator[Request]:
    """Mooncake's rounded milliseconds to seconds, requests sharing a stamp spread over the unit."""
    head = list(islice(rows, MOONCAKE_UNIT_ROWS))
    unit = rounding_unit_ms(r[0] for r in head)
    group: list[Row] = []
    for row in chain(head, rows):
        # narrowed before the group ahead of it is spread: spread over the old unit, that group
        # could reach past this row
        if unit > 0 and not (row[0].is_integer() and int(row[0]) % unit == 0):
            unit = rounding_unit_ms([row[0]], below=unit)
        if group and row[0] != group[0][0]:
            yield from starmap(Request, spread_group(group, unit))
            group = []
        group.append(row)
    yield from starmap(Request, spread_group(group, unit))


def _window(requests: Iterator[Request], start_s: float, duration_s: float | None) -> Iterator[Request]:
    end = math.inf if duration_s is None else start_s + duration_s
    for r in requests:
        if r.arrival_s < start_s:
            continue
        if r.arrival_s >= end:
            return
        yield Request(r.arrival_s - start_s, r.input_tokens, r.output_tokens)


def _rate_scaled(requests: Iterator[Request], factor: float, seed: int, jitter_s: float) -> Iterator[Request]:
    """``transforms.rate_scale``'s thinning and jittered copies, one random stream per copy, sorted
    again through a buffer as deep as the jitter."""
    copies = math.ceil(factor)
    rngs = [random.Random(f"{seed}:{copy}") for copy in range(copies)]
    buffer: list[tuple[float, int, Request]] = []
    sequence = count()
    for r in requests:
        for copy, rng in enumerate(rngs):
            keep = min(1.0, factor - copy)
            if keep < 1.0 and rng.random() >= keep:
                continue
            moved = (
                r
                if copy == 0
                else Request(r.arrival_s + rng.random() * jitter_s, r.input_tokens, r.output_tokens)
            )
            heapq.heappush(buffer, (moved.arrival_s, next(sequence), moved))
        while buffer and buffer[0][0] <= r.arrival_s:
            yield heapq.heappop(buffer)[2]
    while buffer:
        yield heapq.heappop(buffer)[2]
