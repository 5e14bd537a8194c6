"""Fuzz the vLLM page parser with mutations of the real captures, against a PromQL reference.

Each input is a real capture from ``tests/fixtures/vllm/`` with a few seeded mutations: a value
set to NaN, ±Inf, a negative number or 1e20; a line repeated (with its value or another); a line
dropped; a family repeated under its legacy name; an extra label (Ray's ``WorkerId``); another
engine; another prefix; and, for one input in eight, a byte-level corruption. The reference reads
the same text with prometheus-client's own parser (a second tokenizer) and computes what the
PromQL path computes, written out independently of ``exposition``:

- the first sample of a series counts, a repeated one is dropped (Prometheus);
- a family is read under its current name when the page has it, else its legacy name
  (``current or legacy``);
- ``sum by (model_name, engine)`` over every other label, then over engines (KV usage averaged),
  histograms ``sum by (le)`` over every ``le`` any series has;
- a family with a value that cannot be true (non-finite, negative, buckets going down) is absent.

An input is a **crash** when the parser raises anything but ``ExpositionError``, and **wrong**
when it parses but disagrees with the reference (a family present in one and not the other, or a
value off by more than 1e-9 relative). Corrupted inputs may raise ``ExpositionError``; valid ones
must not.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

from fleetslo.core import conventions as cv
from fleetslo.core.errors import ExpositionError
from fleetslo.core.histogram import BucketHistogram, quantile
from fleetslo.core.metrics.exposition import parse_page
from prometheus_client.parser import text_string_to_metric_families

CAPTURES = sorted((Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "vllm").glob("*.txt"))
_LEGACY = {new: old for old, new in cv.VLLM_ALIASES.items()}


@dataclass
class FuzzResult:
    tried: int = 0
    crashes: int = 0
    wrong: int = 0
    refused: int = 0  # corrupted inputs answered with ExpositionError, as they should be
    skipped: int = 0  # valid inputs the reference parser could not read
    examples: list[str] = field(default_factory=list)


def fuzz(n: int, seed: int = 20261201) -> FuzzResult:
    """Parse ``n`` mutated captures and compare each with the reference."""
    rng = random.Random(seed)
    pages = [p.read_text(encoding="utf-8") for p in CAPTURES]
    result = FuzzResult()
    for i in range(n):
        corrupt = i % 8 == 7
        text = mutate(rng.choice(pages), rng, corrupt)
        result.tried += 1
        try:
            page = parse_page(text)
        except ExpositionError:
            if corrupt:
                result.refused += 1
            else:
                _note(result, "wrong", f"input {i}: valid page refused")
            continue
        except Exception as exc:
            _note(result, "crashes", f"input {i}: {type(exc).__name__}: {exc}")
            continue
        if corrupt:
            continue  # what a corrupted page means is not defined; not crashing is the check
        try:
            expected = reference(text)
        except ValueError:
            result.skipped += 1  # prometheus-client's parser refused it: no reference to compare
            continue
        problem = compare(page.models, expected)
        if problem:
            _note(result, "wrong", f"input {i}: {problem}")
    return result


def _note(result: FuzzResult, kind: str, example: str) -> None:
    setattr(result, kind, getattr(result, kind) + 1)
    if len(result.examples) < 5:
        result.examples.append(example)


def mutate(text: str, rng: random.Random, corrupt: bool) -> str:
    lines = text.splitlines()
    for _ in range(rng.randint(1, 4)):
        i = rng.choice([i for i, line in enumerate(lines) if _family_of(line) is not None])
        kind = rng.randrange(8)
        if kind == 0:
            lines[i] = _with_value(lines[i], rng.choice(["NaN", "+Inf", "-Inf", "-1", "1e20", "0"]))
        elif kind == 1:
            lines.insert(i + 1, lines[i] if rng.random() < 0.5 else _with_value(lines[i], "12345"))
        elif kind == 2:
            lines[i] = "# dropped"
        elif kind == 3:
            lines.extend(list(_as_legacy(lines)))
        elif kind == 4:
            lines[i] = lines[i].replace("{", '{WorkerId="w1",', 1)
        elif kind == 5:
            lines[i] = lines[i].replace('engine="0"', 'engine="1"')
        elif kind == 6:
            lines[i] = lines[i].replace("vllm:", rng.choice(["ray_vllm:", "vllm_"]), 1)
        else:
            lines.insert(rng.randrange(len(lines)), lines[i])  # a repeat somewhere else
    page = "\n".join(lines) + "\n"
    if corrupt:
        cut = rng.randrange(len(page))
        page = page[:cut] + rng.choice(['"', "{", "}", "\x00", " x ", "\n{", "é", "=", ","]) + page[cut + 1 :]
    return page


def _with_value(line: str, value: str) -> str:
    head, _, _ = line.rpartition(" ")
    return f"{head} {value}"


def _as_legacy(lines: list[str]) -> Iterator[str]:
    """Every line of one family that has a legacy name, again under that name (0.9-0.10 pages)."""
    for line in lines:
        family = _family_of(line)
        if family in _LEGACY and line.startswith("vllm:"):
            yield line.replace(f"vllm:{family}", f"vllm:{_LEGACY[family]}", 1)


def _family_of(line: str) -> str | None:
    if line.startswith("#"):
        return None
    found = _classify(line.split("{", 1)[0].split(" ", 1)[0])
    return None if found is None else found[0]


# ---------------------------------------------------------------------------------------------
# The reference
# ---------------------------------------------------------------------------------------------


@dataclass
class _Series:
    """Every sample of one (model, family) in one naming (current or legacy), after dedup."""

    values: list[tuple[str, dict[str, str], float]] = field(default_factory=list)


def reference(text: str) -> dict[str, dict[str, object]]:
    """model -> family -> value (gauge/counter: float; histogram: BucketHistogram)."""
    seen: set[tuple[str, frozenset[tuple[str, str]]]] = set()
    current: dict[tuple[str, str], _Series] = defaultdict(_Series)
    legacy: dict[tuple[str, str], _Series] = defaultdict(_Series)
    for metric in text_string_to_metric_families(text):
        for s in metric.samples:
            key = (s.name, frozenset(s.labels.items()))
            if key in seen:
                continue
            seen.add(key)
            found = _classify(s.name)
            if found is None:
                continue
            family, suffix, is_legacy = found
            table = legacy if is_legacy else current
            table[(s.labels.get(cv.MODEL_LABEL, ""), family)].values.append((suffix, dict(s.labels), s.value))
    chosen = dict(current)
    for key, series in legacy.items():
        chosen.setdefault(key, series)
    out: dict[str, dict[str, object]] = defaultdict(dict)
    for (model, family), series in chosen.items():
        out[model]  # a model with only rejected families is still on the page
        value = _value_of(family, series)
        if value is not None:
            out[model][family] = value
    return out


def _classify(name: str) -> tuple[str, str, bool] | None:
    bare = cv.strip_vllm_prefix(name)
    if bare is None:
        return None
    for suffix in ("_bucket", "_sum", "_count", "_created"):
        if bare.endswith(suffix) and cv.canonical_vllm_name(bare[: -len(suffix)]) in cv.HISTOGRAM_NAMES:
            base = bare[: -len(suffix)]
            return cv.canonical_vllm_name(base), suffix, base in cv.VLLM_ALIASES
    for suffix in ("_total", "_created"):
        if bare.endswith(suffix) and cv.canonical_vllm_name(bare[: -len(suffix)]) in cv.COUNTER_NAMES:
            base = bare[: -len(suffix)]
            return cv.canonical_vllm_name(base), suffix, base in cv.VLLM_ALIASES
    if cv.canonical_vllm_name(bare) in cv.GAUGE_NAMES:
        return cv.canonical_vllm_name(bare), "", bare in cv.VLLM_ALIASES
    return None


def _value_of(family: str, series: _Series) -> object | None:
    for suffix, _, value in series.values:
        if not math.isfinite(value) or (value < 0 and suffix != "_sum"):
            return None  # an impossible value: the family is absent
    if family in cv.HISTOGRAM_NAMES:
        return _histogram(series)
    samples = [
        (labels.get(cv.ENGINE_LABEL, ""), v) for suffix, labels, v in series.values if suffix != "_created"
    ]
    if not samples:
        return None
    if family == cv.Gauge.KV_CACHE_USAGE:
        per_engine: dict[str, float] = defaultdict(float)
        for engine, v in samples:
            per_engine[engine] += v
        return math.fsum(per_engine.values()) / len(per_engine)
    return math.fsum(v for _, v in samples)


def _histogram(series: _Series) -> BucketHistogram | None:
    per_engine: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    sums: dict[str, float] = defaultdict(float)
    for suffix, labels, v in series.values:
        engine = labels.get(cv.ENGINE_LABEL, "")
        if suffix == "_bucket":
            per_engine[engine][float(labels["le"])] += v
        elif suffix == "_sum":
            sums[engine] += v
    for buckets in per_engine.values():
        counts = [buckets[b] for b in sorted(buckets)]
        if any(b < a for a, b in pairwise(counts)):
            return None  # buckets going down: rejected
    total: dict[float, float] = defaultdict(float)
    for buckets in per_engine.values():
        for le, c in buckets.items():
            total[le] += c
    if not total:
        return None
    bounds = tuple(sorted(total))
    return BucketHistogram(bounds, tuple(total[b] for b in bounds))


def compare(ours: dict[str, object], theirs: dict[str, dict[str, object]]) -> str | None:
    """Why ours differs from the reference, or ``None``."""
    from fleetslo.core.model import EngineSnapshot

    if set(ours) != set(theirs):
        return f"models {sorted(ours)} vs {sorted(theirs)}"
    for model, snapshot in ours.items():
        assert isinstance(snapshot, EngineSnapshot)
        expected = theirs[model]
        for family in (*cv.GAUGE_NAMES, *cv.COUNTER_NAMES, *cv.HISTOGRAM_NAMES):
            want = expected.get(family)
            if family in cv.HISTOGRAM_NAMES:
                got_h = snapshot.histogram(family)
                if (got_h is None) != (want is None):
                    return f"{model}/{family}: {got_h} vs {want}"
                if got_h is not None and isinstance(want, BucketHistogram):
                    if got_h.bounds != want.bounds or not _close_all(got_h.counts, want.counts):
                        return f"{model}/{family}: buckets differ"
                    for q in (0.5, 0.9, 0.99):
                        a, b = quantile(q, got_h), quantile(q, want)
                        if (a is None) != (b is None) or (
                            a is not None and b is not None and not _close(a, b)
                        ):
                            return f"{model}/{family}: p{q} {a} vs {b}"
                continue
            got = snapshot.gauge(family) if family in cv.GAUGE_NAMES else snapshot.counter(family)
            if (got is None) != (want is None):
                return f"{model}/{family}: {got} vs {want}"
            if got is not None and isinstance(want, float) and not _close(got, want):
                return f"{model}/{family}: {got} vs {want}"
    return None


def _same(a: float | None, b: float | None) -> bool:
    return a is b or (a is not None and b is not None and _close(a, b))


def _close(a: float, b: float) -> bool:
    return a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1.0)


def _close_all(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
