"""Number formatting for the report: every value may be missing, and missing shows as "—", never 0."""

from __future__ import annotations

import math
from typing import Any


def num(value: Any) -> float | None:
    """A finite number, or None for null, strings, booleans, NaN and infinities."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def percent(v: Any) -> str:
    n = num(v)
    return "—" if n is None else f"{n * 100:.1f} %"


def seconds(v: Any) -> str:
    n = num(v)
    if n is None:
        return "—"
    if n < 1:
        return f"{n * 1000:.3g} ms"
    return f"{n:.3g} s" if n < 100 else f"{n:,.0f} s"


def number(v: Any, digits: int) -> str:
    n = num(v)
    return "—" if n is None else f"{n:,.{digits}f}"


def money(v: Any) -> str:
    n = num(v)
    return "—" if n is None else f"${n:,.2f}"


def duration(v: float | None) -> str:
    return "—" if v is None else f"{clock(v)} (h:mm:ss)"


def clock(v: float | None) -> str:
    if v is None:
        return "—"
    whole = round(v)
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"
