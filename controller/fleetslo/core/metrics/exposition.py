"""Parse a vLLM server's Prometheus text exposition into per-model ``EngineSnapshot``s.

A sidecar parses a page every few seconds next to a GPU server, so this parser is built for the
one job: it looks only at the vLLM families fleetslo uses (see ``conventions``) and skips every
other line after a prefix check, without tokenizing it. It accepts text format 0.0.4 and the
OpenMetrics text that prometheus-client writes, every vLLM version's names, the ``vllm:``,
``ray_vllm:`` and escaped ``vllm_`` prefixes, any bucket layout, and pages with or without the
``engine`` label.

A malformed line in a family we use raises ``ExpositionError`` with its line number: a half-read
histogram would give a wrong quantile, which is worse than none. Malformed lines in families we do
not use are not our business and are skipped. Well-formed lines with values that cannot be true
are rejected, counted by reason in ``Page.rejected`` (issue 15 defect 9), and never reach a
window: a non-finite value (``non_finite``), a negative count or gauge (``negative``), cumulative
buckets that go down (``not_monotonic``: one bucket at 1e20 would move every quantile). A family
with such a value is left out of that model's snapshot (``Page.rejected_families``), as a whole,
so a sum over engines never silently loses one. As Prometheus and PromQL would read the page:

- a sample line repeated with the same labels counts once, the first (``duplicate``);
- a family on a page with both its current and its legacy name (vLLM 0.9-0.10 expose both) is
  read under the current name only, as the PromQL source's ``current or legacy`` does.

This module does no I/O; the sidecar runs it on a worker thread, off its event loop.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Generic, TypeVar

from fleetslo.core import conventions as cv
from fleetslo.core.errors import ExpositionError
from fleetslo.core.histogram import BucketHistogram
from fleetslo.core.model import EngineSnapshot, SeriesKey

_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')
_PREFIX_STARTS = ("vllm", "ray_vllm")
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}
_HIST_SUFFIXES = ("_bucket", "_sum", "_count", "_created")
_COUNTER_SUFFIXES = ("_total", "_created")


#: Reasons a sample is rejected (``fleetslo_engine_rejected_samples_total{reason}``).
NON_FINITE, NEGATIVE, NOT_MONOTONIC, DUPLICATE = "non_finite", "negative", "not_monotonic", "duplicate"
REJECTION_REASONS = (NON_FINITE, NEGATIVE, NOT_MONOTONIC, DUPLICATE)

K = TypeVar("K")
V = TypeVar("V")


class _BoundedCache(Generic[K, V]):
    """A memo that holds at most ``max_bytes`` of keys (issue 15 defect 13: an ``lru_cache`` of
    16,384 entries let a hostile page pin 16,384 huge label blocks). Emptied when full: the
    next page refills what it repeats. Safe to share between threads (dict operations are atomic)."""

    def __init__(self, compute: Callable[[K], V], max_bytes: int, size: Callable[[K], int]) -> None:
        self.compute, self.max_bytes, self.size = compute, max_bytes, size
        self.bytes = 0
        self._items: dict[K, V] = {}

    def __call__(self, key: K) -> V:
        found = self._items.get(key)
        if found is not None:
            return found
        value = self.compute(key)
        cost = 3 * self.size(key) + 200  # the key, the value built from it, and the dict slot
        if cost <= self.max_bytes // 16:  # a huge key is computed, never kept
            if self.bytes + cost > self.max_bytes:
                self._items.clear()
                self.bytes = 0
            self._items[key] = value
            self.bytes += cost
        return value


@dataclass(frozen=True, slots=True)
class Page:
    """One parsed page: the models on it and what was rejected, by reason and by family."""

    models: dict[str, EngineSnapshot]
    rejected: Counter[str] = field(default_factory=Counter)
    #: The families left out of each model's snapshot because one of their values was rejected.
    rejected_families: Mapping[str, frozenset[str]] = field(default_factory=dict)


@dataclass
class _HistogramParts:
    buckets: dict[float, float] = field(default_factory=dict)
    sum: float | None = None


@dataclass
class _ModelParts:
    gauges: dict[str, dict[SeriesKey, float]] = field(default_factory=lambda: defaultdict(dict))
    counters: dict[str, dict[SeriesKey, float]] = field(default_factory=lambda: defaultdict(dict))
    histograms: dict[str, dict[str, _HistogramParts]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(_HistogramParts))
    )
    created: dict[tuple[str, str], float] = field(default_factory=dict)
    #: Families with a rejected value, and why.
    rejected: dict[str, str] = field(default_factory=dict)

    def families(self) -> set[str]:
        return {*self.gauges, *self.counters, *self.histograms, *(f for f, _ in self.created)}


@dataclass
class _PageParts:
    """Everything read so far: current and legacy names apart, the series seen, rejections."""

    current: dict[str, _ModelParts] = field(default_factory=lambda: defaultdict(_ModelParts))
    legacy: dict[str, _ModelParts] = field(default_factory=lambda: defaultdict(_ModelParts))
    seen: set[tuple[str, frozenset[tuple[str, str]]]] = field(default_factory=set)
    rejected: Counter[str] = field(default_factory=Counter)


def parse_vllm(text: str) -> dict[str, EngineSnapshot]:
    """Every model on the page, by ``model_name``. An empty dict means no vLLM series at all."""
    return parse_page(text).models


def parse_page(text: str) -> Page:
    """The models on the page and the values rejected from it (see the module docstring)."""
    page = _PageParts()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.startswith(_PREFIX_STARTS):
            continue
        try:
            _take(line, page)
        except ValueError as exc:
            raise ExpositionError(f"line {number}: {exc}: {line[:200]!r}") from exc
    models = _prefer_current(page.current, page.legacy)
    for parts in models.values():
        _check_histograms(parts, page.rejected)
    return Page(
        models={name: _freeze(name, parts) for name, parts in models.items()},
        rejected=page.rejected,
        rejected_families={n: frozenset(p.rejected) for n, p in models.items() if p.rejected},
    )


def _prefer_current(
    current: dict[str, _ModelParts], legacy: dict[str, _ModelParts]
) -> dict[str, _ModelParts]:
    """Legacy families join a model only where its current name is absent from the page."""
    for name, old in legacy.items():
        parts = current[name]
        present = parts.families() | set(parts.rejected)
        for family, table in old.gauges.items():
            if family not in present:
                parts.gauges[family] = table
        for family, table in old.counters.items():
            if family not in present:
                parts.counters[family] = table
        for family, per_engine in old.histograms.items():
            if family not in present:
                parts.histograms[family] = per_engine
        for (family, engine), at in old.created.items():
            if family not in present:
                parts.created[(family, engine)] = at
        for family, reason in old.rejected.items():
            if family not in present:
                parts.rejected[family] = reason
    return current


def _take(line: str, page: _PageParts) -> None:
    """Route one sample line into the family it belongs to, if it is one we use."""
    kind, family, suffix, legacy = _classify(_name_of(line))
    if kind is None:
        return
    name, labels_text, rest = _split(line)
    labels = _labels(labels_text)
    value = _value(rest)
    series = (name, frozenset(labels.items()))
    if series in page.seen:
        page.rejected[DUPLICATE] += 1  # Prometheus keeps the first sample of a series
        return
    page.seen.add(series)
    parts = (page.legacy if legacy else page.current)[labels.get(cv.MODEL_LABEL, "")]
    problem = _problem(kind, suffix, value)
    if problem is not None:
        page.rejected[problem] += 1
        parts.rejected.setdefault(family, problem)
        return
    engine = labels.get(cv.ENGINE_LABEL, "")
    # Series that differ only in labels we do not keep (Ray Serve adds WorkerId, NodeAddress…)
    # are summed, as ``sum by (model_name, engine)`` would.
    if suffix == "_created":
        parts.created[(family, engine)] = max(value, parts.created.get((family, engine), value))
    elif kind in ("gauge", "counter"):
        table = parts.gauges[family] if kind == "gauge" else parts.counters[family]
        key = (engine, labels.get(cv.SUBLABEL.get(family, ""), ""))
        table[key] = table.get(key, 0.0) + value
    else:
        _take_histogram(parts.histograms[family][engine], suffix, labels, value)


def _take_histogram(hist: _HistogramParts, suffix: str, labels: Mapping[str, str], value: float) -> None:
    if suffix == "_bucket":
        if "le" not in labels:
            raise ValueError("bucket without an le label")
        le = _number(labels["le"])
        hist.buckets[le] = hist.buckets.get(le, 0.0) + value
    elif suffix == "_sum":
        hist.sum = value + (hist.sum or 0.0)
    # ``_count`` equals the +Inf bucket on a valid page; the buckets are the source of truth.


def _problem(kind: str, suffix: str, value: float) -> str | None:
    """Why a value cannot be true for its series, or ``None``."""
    if not math.isfinite(value):
        return NON_FINITE
    if value < 0 and suffix != "_sum":
        return NEGATIVE  # counts, gauges and timestamps are never negative
    return None


def _check_histograms(parts: _ModelParts, rejected: Counter[str]) -> None:
    """Reject a family whose cumulative buckets go down anywhere: no real histogram does that."""
    for family, per_engine in list(parts.histograms.items()):
        for h in per_engine.values():
            counts = [h.buckets[b] for b in sorted(h.buckets)]
            if any(later < earlier for earlier, later in pairwise(counts)):
                rejected[NOT_MONOTONIC] += 1
                parts.rejected.setdefault(family, NOT_MONOTONIC)
                break
    for family in parts.rejected:
        parts.gauges.pop(family, None)
        parts.counters.pop(family, None)
        parts.histograms.pop(family, None)
        for key in [k for k in parts.created if k[0] == family]:
            del parts.created[key]


def _classify_name(name: str) -> tuple[str | None, str, str, bool]:
    """(kind, canonical family, suffix, legacy name?) for a metric name; kind None if unused."""
    bare = cv.strip_vllm_prefix(name)
    if bare is None:
        return None, "", "", False
    for suffix in _HIST_SUFFIXES:
        if bare.endswith(suffix):
            family = cv.canonical_vllm_name(bare[: -len(suffix)])
            if family in cv.HISTOGRAM_NAMES:
                return "histogram", family, suffix, family != bare[: -len(suffix)]
    for suffix in _COUNTER_SUFFIXES:
        if bare.endswith(suffix):
            family = cv.canonical_vllm_name(bare[: -len(suffix)])
            if family in cv.COUNTER_NAMES:
                return "counter", family, suffix, family != bare[: -len(suffix)]
    family = cv.canonical_vllm_name(bare)
    if family in cv.GAUGE_NAMES:
        return "gauge", family, "", family != bare
    return None, family, "", False


#: Memoized: a page repeats a few hundred names thousands of times, scrape after scrape.
_classify = _BoundedCache(_classify_name, max_bytes=1 << 20, size=len)


def _name_of(line: str) -> str:
    """The metric name: everything up to the label block or the first space."""
    end = len(line)
    for stop in ("{", " "):
        found = line.find(stop)
        if 0 <= found < end:
            end = found
    return line[:end]


def _split(line: str) -> tuple[str, str, str]:
    """(metric name, label block without braces, value and timestamp)."""
    brace = line.find("{")
    if brace < 0:
        name, _, rest = line.partition(" ")
        return name, "", rest
    close = line.rfind("}")
    if close < brace:
        raise ValueError("unterminated label block")
    return line[:brace].rstrip(), line[brace + 1 : close], line[close + 1 :]


def _parse_labels(text: str) -> Mapping[str, str]:
    """Label block text to a mapping (read-only: the result is memoized)."""
    labels: dict[str, str] = {}
    pos, end = 0, len(text.rstrip())
    while pos < end:
        match = _LABEL.match(text, pos)
        if match is None:
            raise ValueError(f"bad label syntax at {text[pos : pos + 40]!r}")
        value = match.group(2)
        if "\\" in value:
            value = re.sub(r"\\[\\\"n]", lambda m: _ESCAPES[m.group(0)], value)
        labels[match.group(1)] = value
        pos = match.end()
    return labels


#: Memoized by label text (series repeat every scrape), at most 4 MiB of it.
_labels = _BoundedCache(_parse_labels, max_bytes=4 << 20, size=len)


def _value(rest: str) -> float:
    fields = rest.split()
    if not fields or len(fields) > 2:
        raise ValueError("expected a value and an optional timestamp")
    return _number(fields[0])


def _number(text: str) -> float:
    lowered = text.lower()
    if lowered in ("+inf", "inf"):
        return math.inf
    if lowered == "-inf":
        return -math.inf
    if lowered == "nan":
        return math.nan
    if not text or text[0] not in "+-.0123456789":
        raise ValueError(f"not a number: {text!r}")
    return float(text)


def _freeze(model_name: str, parts: _ModelParts) -> EngineSnapshot:
    histograms = {
        family: {engine: _histogram(h) for engine, h in per_engine.items() if h.buckets}
        for family, per_engine in parts.histograms.items()
    }
    return EngineSnapshot(
        model_name=model_name,
        gauges={k: dict(v) for k, v in parts.gauges.items()},
        counters={k: dict(v) for k, v in parts.counters.items()},
        histograms={k: v for k, v in histograms.items() if v},
        created=dict(parts.created),
    )


def _histogram(parts: _HistogramParts) -> BucketHistogram:
    bounds = tuple(sorted(parts.buckets))
    return BucketHistogram(bounds, tuple(parts.buckets[b] for b in bounds), parts.sum)
