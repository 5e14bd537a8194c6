"""One cell of a trace row read as a number, or a ``BadRow`` saying what is wrong with it.

The readers (``readers``, ``csv_rows``) add the file and line number to a ``BadRow``.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

#: More tokens than any model's context; a larger count is a broken row, not a request.
MAX_TOKENS = 10_000_000

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_EPOCH_ORDINAL = _EPOCH.toordinal()

#: (arrival, input tokens, output tokens) of one parsed row; the arrival in the file's own unit
#: until the reader converts it (microseconds for Azure's datetimes, milliseconds for Mooncake).
Row = tuple[float, int, int]


class BadRow(ValueError):
    """A row-level problem; the caller adds the file and line number."""


def datetime_micros(cell: str) -> float:
    """Microseconds since the epoch: whole numbers, exact in a float (< 2**53), so rebasing loses nothing."""
    try:
        when = datetime.fromisoformat(cell.strip())
    except ValueError:
        example = "2023-11-16 18:17:03.9799600"
        raise BadRow(f"TIMESTAMP {short(cell)} is not a date-time like {example}") from None
    if when.tzinfo is None:
        # naive means UTC: the same whole microseconds as the timedelta below, without building one
        days = when.toordinal() - _EPOCH_ORDINAL
        seconds = (days * 86_400 + when.hour * 3_600 + when.minute * 60 + when.second) * 1_000_000
        return float(seconds + when.microsecond)
    return float((when - _EPOCH) // _MICROSECOND)


def seconds(cell: str, column: str) -> float:
    try:
        value = float(cell)
    except ValueError:
        raise BadRow(f"{column} {short(cell)} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise BadRow(f"{column} {short(cell)} must be a finite number of seconds >= 0")
    return value


def count(cell: str, column: str) -> int:
    if len(cell) <= 7 and cell.isascii() and cell.isdigit():  # the common case: a plain count
        return int(cell)  # at most 9,999,999 < MAX_TOKENS
    try:
        value = float(cell)
    except ValueError:
        raise BadRow(f"{column} {short(cell)} is not a token count") from None
    if 0 <= value <= MAX_TOKENS and value.is_integer():
        return int(value)  # "12.0", " 12", "1e3": what float() reads as a whole count
    return json_count(value, column)  # says what is wrong with it


def number(value: object, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRow(f"{key} must be a number (got {short(value)})")
    try:
        result = float(value)
    except OverflowError:
        result = math.inf
    if not math.isfinite(result) or result < 0:
        raise BadRow(f"{key} must be a finite number >= 0 (got {short(value)})")
    return result


def json_count(value: object, key: str) -> int:
    result = number(value, key)
    if not result.is_integer() or result > MAX_TOKENS:
        raise BadRow(f"{key} must be a whole number of tokens <= {MAX_TOKENS:,} (got {short(value)})")
    return int(result)


def short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
