"""The CSV trace formats: which one a header names, and its rows with their line numbers.

A day of a busy service is a billion rows, so the common case is read in blocks: a block of
Azure lines that all have the usual shape (``2023-11-16 18:17:03.9799600,374,44``, or 2024's
``2024-05-10 00:00:00.009930+00:00,374,44``) is matched by one regular expression, and a line
within the second before it reads only its fraction; so is a block of plain-CSV lines
(``12.5,374,44``). Any other block is read line by line (split on commas; through ``csv.reader``
from the first quote on), which is also where a bad row is found and named.
Both give the same rows, line numbers and errors (``tests/unit/traces/test_trace_csv_blocks.py``).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Iterator, Sequence
from itertools import chain, islice

from fleetslo.core.errors import ConfigError
from fleetslo.sim.traces.cells import BadRow, Row, count, datetime_micros, seconds

AZURE_HEADER = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
BURSTGPT_HEADER = ("Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type")
PLAIN_HEADER = ("arrival_s", "input_tokens", "output_tokens")

EXPECTED = (
    "an Azure LLM inference CSV (header TIMESTAMP,ContextTokens,GeneratedTokens), "
    "a BurstGPT CSV (header Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type), "
    "a plain CSV (header arrival_s,input_tokens,output_tokens) "
    'or Mooncake JSONL (lines like {"timestamp": 0, "input_length": 10, "output_length": 5})'
)

#: Lines read per block, and the characters after which a block stops early (a file of long
#: lines, broken or hostile, must not be held 4,096 lines at a time: a trace's lines are ~40).
BLOCK_LINES = 4096
BLOCK_CHARS = 1 << 20
#: Lines read at a time while a block fills.
_PART_LINES = 64

#: One Azure line of the usual shapes: a datetime to the second, its fraction (7 digits in 2023,
#: 6 in 2024, none on a whole second; the group keeps the six ``fromisoformat`` keeps), its UTC
#: offset (2024: ``+00:00``) if any, two counts.
_AZURE_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)(?:\.(\d{1,6})\d?)?((?:[+-]\d\d:?\d\d|Z)?),(\d{1,7}),(\d{1,7})\r?$",
    re.MULTILINE | re.ASCII,
)
#: Microseconds per unit of a fraction of n digits (``fromisoformat`` pads fewer than six).
_FRACTION_UNIT = (0, 100_000, 10_000, 1_000, 100, 10, 1)

#: One plain-CSV line in its common shape: decimal seconds and two counts.
_PLAIN_LINE = re.compile(r"^(\d{1,20}(?:\.\d{1,20})?),(\d{1,7}),(\d{1,7})\r?$", re.MULTILINE | re.ASCII)

RowParser = Callable[[list[str]], Row]


def csv_format(header_line: str, source: str, number: int) -> tuple[str, RowParser, int]:
    """Which CSV format a header names: (format name, a row parser for this file, number of columns)."""
    try:
        header = tuple(cell.strip() for cell in next(csv.reader([header_line])))
    except (csv.Error, StopIteration) as exc:
        raise ConfigError(f"{source}:{number}: unreadable header; expected {EXPECTED}") from exc
    if header == AZURE_HEADER:
        return "azure", AzureRow(), len(header)
    if header[: len(BURSTGPT_HEADER)] == BURSTGPT_HEADER:
        return "burstgpt", _burstgpt_row, len(header)
    if header == PLAIN_HEADER:
        return "plain", PlainRow(), len(header)
    shown = header_line.strip()[:120]
    problem = f"unrecognised trace format (first line {shown!r})"
    raise ConfigError(f"{source}:{number}: {problem}; expected {EXPECTED}")


def csv_numbered(
    lines: Iterator[str], after: int, source: str, parse_row: RowParser, width: int
) -> Iterator[tuple[int, Row]]:
    """(line number, row) of the CSV lines left in ``lines``, the first of them line ``after + 1``
    (blank lines are skipped and counted)."""
    for numbers, rows in numbered_blocks(lines, after, source, parse_row, width):
        yield from zip(numbers, rows, strict=True)


def numbered_blocks(
    lines: Iterator[str], after: int, source: str, parse_row: RowParser, width: int
) -> Iterator[tuple[Sequence[int], list[Row]]]:
    """``csv_numbered``'s rows ``BLOCK_LINES`` lines at a time: (their line numbers, the rows). A
    parser that reads blocks (``AzureRow``, ``PlainRow``) reads a block of lines at once; a block
    it does not take, and every block of a parser that reads none, is read line by line."""
    block_rows = getattr(parse_row, "block", None)
    number = after
    while block := _block(lines):
        rows = block_rows(block) if block_rows is not None else None
        if rows is not None:
            yield range(number + 1, number + 1 + len(rows)), rows
        else:
            here, rest = enumerate(block, start=number + 1), enumerate(lines, start=number + len(block) + 1)
            numbered = _lines_numbered(here, rest, source, parse_row, width)
            # After a quote csv.reader reads ``rest`` too, to the end of the file: then the next
            # block is empty and the loop ends.
            while pairs := list(islice(numbered, BLOCK_LINES)):
                yield [n for n, _ in pairs], [row for _, row in pairs]
        number += len(block)


def _block(lines: Iterator[str]) -> list[str]:
    """The next ``BLOCK_LINES`` lines, or fewer once they hold ``BLOCK_CHARS`` characters."""
    block: list[str] = []
    chars = 0
    while len(block) < BLOCK_LINES and chars < BLOCK_CHARS:
        part = list(islice(lines, _PART_LINES))
        if not part:
            break
        block += part
        chars += sum(map(len, part))
    return block


def _lines_numbered(
    numbered: Iterator[tuple[int, str]],
    rest: Iterator[tuple[int, str]],
    source: str,
    parse_row: RowParser,
    width: int,
) -> Iterator[tuple[int, Row]]:
    """``numbered``'s rows, split on commas; from a line with a quote on, ``csv.reader`` reads it,
    the lines after it and ``rest`` (a quoted cell may hold commas and line breaks)."""
    for number, line in numbered:
        if not line.strip():
            continue
        if '"' in line:
            yield from _csv_module_numbered(chain([(number, line)], numbered, rest), source, parse_row, width)
            return
        yield number, _row(line.rstrip("\r\n").split(","), number, source, parse_row, width)


def _row(cells: list[str], number: int, source: str, parse_row: RowParser, width: int) -> Row:
    if len(cells) != width:
        raise ConfigError(f"{source}:{number}: {len(cells)} columns, expected {width}")
    try:
        return parse_row(cells)
    except BadRow as exc:
        raise ConfigError(f"{source}:{number}: {exc}") from None


def _csv_module_numbered(
    numbered: Iterator[tuple[int, str]], source: str, parse_row: RowParser, width: int
) -> Iterator[tuple[int, Row]]:
    """``csv_numbered`` through ``csv.reader``, for lines with quotes."""
    where = [0]  # the line number of the row csv.reader is on (blank lines are not fed to it)

    def text() -> Iterator[str]:
        for number, line in numbered:
            if line.strip():
                where[0] = number
                yield line

    try:
        for cells in csv.reader(text()):
            yield where[0], _row(cells, where[0], source, parse_row, width)
    except csv.Error as exc:
        raise ConfigError(f"{source}:{where[0]}: unreadable CSV ({exc})") from None


class AzureRow:
    """The Azure row parser: a row by ``cells.datetime_micros``, or a block of lines at once
    (``block``), where a line within the second before it reads only its fraction."""

    __slots__ = ()

    def __call__(self, cells: list[str]) -> Row:
        return datetime_micros(cells[0]), count(cells[1], "ContextTokens"), count(cells[2], "GeneratedTokens")

    def block(self, lines: list[str]) -> list[Row] | None:
        """The rows of ``lines`` if every one is an Azure line of the usual shape with a valid
        date-time, else None (the caller reads them one by one, and names the line that is wrong).
        Each new second (and offset) is read by ``datetime_micros``; the fraction is added to it."""
        found = _AZURE_LINE.findall("".join(lines))
        if len(found) != len(lines):  # one match per line, anchored at both ends: every line plain
            return None
        second_read = offset_read = ""
        base = 0
        rows: list[Row] = []
        append = rows.append
        unit = _FRACTION_UNIT
        for second, fraction, offset, n_in, n_out in found:
            if second != second_read or offset != offset_read:
                try:
                    base = int(datetime_micros(second + offset))
                except BadRow:
                    return None
                second_read, offset_read = second, offset
            if len(fraction) == 6:  # both years' usual rows (2023's 7th digit is dropped): no scaling
                append((float(base + int(fraction)), int(n_in), int(n_out)))
            else:
                append((float(base + int(fraction or 0) * unit[len(fraction)]), int(n_in), int(n_out)))
        return rows


def _burstgpt_row(cells: list[str]) -> Row:
    arrival = seconds(cells[0], "Timestamp")
    return arrival, count(cells[2], "Request tokens"), count(cells[3], "Response tokens")


class PlainRow:
    """The plain CSV's row parser, which also reads a block of lines of the common shape
    (``12.5,374,44``) by one regular expression: ``float`` and ``int`` of the same text."""

    def __call__(self, cells: list[str]) -> Row:
        arrival = seconds(cells[0], "arrival_s")
        return arrival, count(cells[1], "input_tokens"), count(cells[2], "output_tokens")

    def block(self, lines: list[str]) -> list[Row] | None:
        """The rows of ``lines`` if every one has the common shape, else None (read one by one)."""
        found = _PLAIN_LINE.findall("".join(lines))
        if len(found) != len(lines):
            return None
        return [(float(arrival), int(n_in), int(n_out)) for arrival, n_in, n_out in found]
