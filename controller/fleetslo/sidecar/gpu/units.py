"""Turning whatever a GPU tool printed into a number in base units, or ``None``.

GPU tools mix units freely (amdsmi: W, µW, "MB" that are MiB, MHz, µJ; sysfs: µW, m°C; NVML:
mW, mJ), wrap numbers as ``{"value": N, "unit": "W"}``, print ``"N/A"`` for unsupported values
and sentinels such as 0xFFFF for unreadable ones. Every conversion goes through the one table
here so no backend scales by hand. Anything odd — a bool, NaN, a string that is not a number, a
value outside the physical range of its quantity — becomes ``None``.

Pure functions; nothing here reads devices or files.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from enum import Enum
from typing import Final


class Quantity(Enum):
    """A physical quantity: its base unit and the range a real reading can take."""

    RATIO = ("ratio", 0.0, 1.0)
    BYTES = ("bytes", 0.0, 2.0**50)
    WATTS = ("watts", 0.0, 5_000.0)
    JOULES = ("joules", 0.0, 1e15)
    CELSIUS = ("celsius", -60.0, 250.0)
    HERTZ = ("hertz", 0.0, 1e11)
    COUNT = ("count", 0.0, 2.0**53)

    def __init__(self, unit: str, low: float, high: float) -> None:
        self.base = unit
        self.low = low
        self.high = high


#: Unit spelling (lower case, as tools print it) -> (quantity, factor to the base unit).
#: "MB" from amd-smi and amdsmi is MiB (amd_smi.cc divides by 1024*1024), so the binary factor.
UNITS: Final[Mapping[str, tuple[Quantity, float]]] = {
    "%": (Quantity.RATIO, 0.01),
    "b": (Quantity.BYTES, 1.0),
    "kb": (Quantity.BYTES, 2.0**10),
    "kib": (Quantity.BYTES, 2.0**10),
    "mb": (Quantity.BYTES, 2.0**20),
    "mib": (Quantity.BYTES, 2.0**20),
    "gb": (Quantity.BYTES, 2.0**30),
    "gib": (Quantity.BYTES, 2.0**30),
    "w": (Quantity.WATTS, 1.0),
    "mw": (Quantity.WATTS, 1e-3),
    "uw": (Quantity.WATTS, 1e-6),
    "µw": (Quantity.WATTS, 1e-6),
    "j": (Quantity.JOULES, 1.0),
    "mj": (Quantity.JOULES, 1e-3),
    "uj": (Quantity.JOULES, 1e-6),
    "µj": (Quantity.JOULES, 1e-6),
    "c": (Quantity.CELSIUS, 1.0),
    "°c": (Quantity.CELSIUS, 1.0),
    "mc": (Quantity.CELSIUS, 1e-3),
    "hz": (Quantity.HERTZ, 1.0),
    "khz": (Quantity.HERTZ, 1e3),
    "mhz": (Quantity.HERTZ, 1e6),
    "ghz": (Quantity.HERTZ, 1e9),
    "count": (Quantity.COUNT, 1.0),
}

_FLOAT = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_PLAIN = re.compile(rf"^\s*{_FLOAT}\s*$")
#: "234 W", "35.0", "(300Mhz)": a number, then an optional unit, optionally in parentheses.
_NUMBER = re.compile(rf"^\s*\(?\s*({_FLOAT})\s*([^\s\d()][^\s()]*)?\s*\)?\s*$")


def number(raw: object) -> float | None:
    """A finite float from an int, float or numeric string; ``None`` for anything else (bools too)."""
    if isinstance(raw, bool):
        return None
    if not (isinstance(raw, int | float) or (isinstance(raw, str) and _PLAIN.match(raw))):
        return None
    value = float(raw)
    return value if math.isfinite(value) else None


def quantity(raw: object, default_unit: str | None) -> float | None:
    """``raw`` in the base unit of its quantity, or ``None``.

    ``raw`` may be a number (in ``default_unit``), a string such as ``"234 W"`` or ``"(300Mhz)"``,
    or an amd-smi ``{"value": …, "unit": …}`` object. With no unit printed and no default there is
    nothing safe to assume, so the value is dropped.
    """
    value, unit = _split(raw)
    unit = unit or default_unit
    if value is None or unit is None:
        return None
    known = UNITS.get(unit.strip().lower())
    if known is None:
        return None
    kind, factor = known
    expected = UNITS.get(default_unit.lower()) if default_unit else None
    if expected is not None and expected[0] is not kind:
        return None  # a temperature printed where a power was expected is not a power
    return in_range(value * factor, kind)


def in_range(value: float | None, kind: Quantity) -> float | None:
    """``value`` if it is a plausible reading of ``kind``; sentinels (0xFFFF °C, 655 % …) are ``None``."""
    if value is None or not math.isfinite(value):
        return None
    # A ratio may overshoot 1 by rounding (100.4 %); anything beyond that is a sentinel.
    if kind is Quantity.RATIO and 1.0 < value <= 1.005:
        return 1.0
    return value if kind.low <= value <= kind.high else None


def first(*candidates: float | None) -> float | None:
    """The first value that is not ``None`` (``a or b`` would skip a real 0)."""
    return next((c for c in candidates if c is not None), None)


def _split(raw: object) -> tuple[float | None, str | None]:
    if isinstance(raw, Mapping):
        unit = raw.get("unit")
        return number(raw.get("value")), unit if isinstance(unit, str) else None
    if isinstance(raw, str):
        match = _NUMBER.match(raw)
        if match is None:
            return None, None
        return number(match.group(1)), match.group(2)
    return number(raw), None


def text(raw: object) -> str | None:
    """A printable identity string, or ``None`` for blanks and the tools' "not available" spellings."""
    if not isinstance(raw, str | int) or isinstance(raw, bool):
        return None
    value = str(raw).strip()
    return None if value.upper() in _NOT_AVAILABLE or not value else value


_NOT_AVAILABLE: Final = frozenset({"N/A", "NA", "UNKNOWN", "NOT SUPPORTED", "NONE", "UNSUPPORTED"})
