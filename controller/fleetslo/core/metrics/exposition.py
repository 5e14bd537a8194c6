"""Parse a vLLM server's Prometheus text exposition into per-model ``EngineSnapshot``s.

A sidecar parses a page every few seconds next to a GPU server, so this parser is built for the
one job: it looks only at the vLLM families fleetslo uses (see ``conventions``) and skips every
other line after a prefix check, without tokenizing it. It accepts text format 0.0.4 and the
OpenMetrics text that prometheus-client writes, every vLLM version's names, the ``vllm:``,
``ray_vllm:`` and escaped ``vllm_`` prefixes, any bucket layout, and pages with or without the
``engine`` label.

A malformed line in a family we use raises ``ExpositionError`` with its line number: a half-read
histogram would give a wrong quantile, which is worse than none. Malformed lines in families we do
not use are not our business and are skipped. This module does no I/O.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from fleetslo.core import conventions as cv
from fleetslo.core.errors import ExpositionError
from fleetslo.core.histogram import BucketHistogram
from fleetslo.core.model import EngineSnapshot, SeriesKey

_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')
_PREFIX_STARTS = ("vllm", "ray_vllm")
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}
_HIST_SUFFIXES = ("_bucket", "_sum", "_count", "_created")
_COUNTER_SUFFIXES = ("_total", "_created")


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


def parse_vllm(text: str) -> dict[str, EngineSnapshot]:
    """Every model on the page, by ``model_name``. An empty dict means no vLLM series at all."""
    models: dict[str, _ModelParts] = defaultdict(_ModelParts)
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.startswith(_PREFIX_STARTS):
            continue
        try:
            _take(line, models)
        except ValueError as exc:
            raise ExpositionError(f"line {number}: {exc}: {line[:200]!r}") from exc
    return {name: _freeze(name, parts) for name, parts in models.items()}


def _take(line: str, models: dict[str, _ModelParts]) -> None:
    """Route one sample line into the family it belongs to, if it is one we use."""
    kind, family, suffix = _classify(_name_of(line))
    if kind is None:
        return
    _, labels_text, rest = _split(line)
    labels = _labels(labels_text)
    value = _value(rest)
    parts = models[labels.get(cv.MODEL_LABEL, "")]
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


@lru_cache(maxsize=4096)
def _classify(name: str) -> tuple[str | None, str, str]:
    """(kind, canonical family, suffix) for a metric name; kind None if it is not one we use.

    Memoized: a page repeats a few hundred names thousands of times, scrape after scrape.
    """
    bare = cv.strip_vllm_prefix(name)
    if bare is None:
        return None, "", ""
    for suffix in _HIST_SUFFIXES:
        if bare.endswith(suffix):
            family = cv.canonical_vllm_name(bare[: -len(suffix)])
            if family in cv.HISTOGRAM_NAMES:
                return "histogram", family, suffix
    for suffix in _COUNTER_SUFFIXES:
        if bare.endswith(suffix):
            family = cv.canonical_vllm_name(bare[: -len(suffix)])
            if family in cv.COUNTER_NAMES:
                return "counter", family, suffix
    family = cv.canonical_vllm_name(bare)
    if family in cv.GAUGE_NAMES:
        return "gauge", family, ""
    return None, family, ""


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


@lru_cache(maxsize=16384)
def _labels(text: str) -> Mapping[str, str]:
    """Label block text to a mapping. Memoized (read-only result): series repeat every scrape."""
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
