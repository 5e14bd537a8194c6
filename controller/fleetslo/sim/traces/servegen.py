"""ServeGen's per-client data (Alibaba Model Studio, two weeks): a reader and a streamed arrival process.

ServeGen does not publish request logs. For each client of a model class it gives, per 10-minute
window, the client's mean request rate and a fitted inter-arrival distribution (``Gamma`` or
``Weibull``, shape and scale), and for some classes the prompt/output length distributions of some
windows (``chunk-N-dataset.json``). This module turns that into requests:

* **Arrivals.** Each client with a positive rate in a window is a renewal process over that window
  whose gaps follow the fitted family *with the fitted shape* (the shape is what sets the burstiness:
  a Gamma's CV is 1/√shape) and a scale chosen so the mean gap is 1/(rate × ``rate_scale``). The
  fitted scales are not used as they are: in the data they do not match the window's stated rate
  (e.g. rate 11.3/s with a Gamma mean gap of 35 ms), and the rate is what the traffic curve is.
  The first arrival of a window falls a uniform fraction of a gap after its start (the renewal
  process's usual equilibrium approximation), so windows join without a gap or a clump.
* **Lengths.** Prompt and output lengths are drawn independently (the data has marginals only;
  0-token entries are left out) from the client's distributions of the nearest earlier dataset
  window (the nearest later one before the first, as the data is sparse: 4–56 entries over two
  weeks); clients without any come from ``fallback``.
* **Streaming.** ``arrivals`` yields requests in arrival order, one 10-minute window at a time:
  memory holds one window of the aggregate, never the two weeks (tens of millions of requests).
* **Determinism.** Every (client, window) draws from its own generator seeded from ``seed``, the
  client and the window (stdlib ``random`` with string seeds, stable across platforms and runs), so
  a sub-span or a subset of clients reproduces exactly the same requests as the whole.

Parsing is strict: a bad row is a ``ConfigError`` naming the file and the line. PDFs are
Python-literal dicts and are parsed with ``ast.literal_eval`` (never ``eval``).
"""

from __future__ import annotations

import ast
import bisect
import csv
import heapq
import json
import math
import random
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path

from fleetslo.core.errors import ConfigError
from fleetslo.sim.traces.synthetic import TokenSampler
from fleetslo.sim.workload import Request

WINDOW_S = 600.0
_Gap = Callable[[], float]
PATTERNS = ("Gamma", "Weibull")
_CHUNK = re.compile(r"chunk-(\d+)-trace\.csv$")


@dataclass(frozen=True, slots=True)
class Window:
    """One client's 10-minute window: its rate and fitted inter-arrival family and shape."""

    start_s: float
    rate: float
    cv: float
    pattern: str  # "Gamma", "Weibull", or "" when idle
    shape: float


@dataclass(frozen=True, slots=True)
class LengthPdf:
    """A discrete length distribution as sorted values and their cumulative probabilities."""

    values: tuple[int, ...]
    cumulative: tuple[float, ...]

    def draw(self, rng: random.Random) -> int:
        i = bisect.bisect_left(self.cumulative, rng.random() * self.cumulative[-1])
        return self.values[min(i, len(self.values) - 1)]

    def mean(self) -> float:
        probs = [b - a for a, b in zip((0.0, *self.cumulative), self.cumulative, strict=False)]
        return sum(v * p for v, p in zip(self.values, probs, strict=True)) / self.cumulative[-1]


@dataclass(slots=True)
class Client:
    """One client: its windows (every window of the data, idle ones included) and its lengths."""

    ident: int
    windows: tuple[Window, ...]
    #: Dataset window starts (sorted) and their raw entries, parsed on first use.
    dataset_starts: tuple[float, ...] = ()
    dataset_raw: tuple[dict[str, str], ...] = ()
    source: str = ""
    _parsed: dict[int, tuple[LengthPdf, LengthPdf]] = field(default_factory=dict)

    def lengths_at(self, start_s: float) -> tuple[LengthPdf, LengthPdf] | None:
        """The (prompt, output) distributions in force at ``start_s``: the nearest earlier entry."""
        if not self.dataset_starts:
            return None
        i = max(0, bisect.bisect_right(self.dataset_starts, start_s) - 1)
        if i not in self._parsed:
            raw = self.dataset_raw[i]
            where = f"{self.source} window {self.dataset_starts[i]:g}"
            self._parsed[i] = (_pdf(raw, "input_tokens", where), _pdf(raw, "output_tokens", where))
        return self._parsed[i]


@dataclass(frozen=True, slots=True)
class ServeGenData:
    """The clients of one model class (one ServeGen folder)."""

    clients: tuple[Client, ...]
    source: str

    @property
    def span_s(self) -> float:
        starts = [w.start_s for c in self.clients for w in c.windows[-1:]]
        return max(starts) + WINDOW_S if starts else 0.0

    def aggregate_rates(self) -> list[tuple[float, float]]:
        """(window start, sum of the clients' rates) for every window: the traffic curve."""
        total: dict[float, float] = {}
        for client in self.clients:
            for w in client.windows:
                total[w.start_s] = total.get(w.start_s, 0.0) + w.rate
        return sorted(total.items())


def load_servegen(folder: str | Path, clients: Iterable[int] | None = None) -> ServeGenData:
    """Read a ServeGen folder (``chunk-N-trace.csv`` and, where present, ``chunk-N-dataset.json``)."""
    root = Path(folder)
    if not root.is_dir():
        raise ConfigError(f"{root}: not a ServeGen folder (a directory of chunk-N-trace.csv files)")
    wanted = None if clients is None else set(clients)
    found: list[Client] = []
    for path in sorted(root.glob("chunk-*-trace.csv"), key=_chunk_number):
        ident = _chunk_number(path)
        if wanted is not None and ident not in wanted:
            continue
        client = Client(ident, _read_windows(path), source=str(path))
        dataset = path.with_name(f"chunk-{ident}-dataset.json")
        if dataset.exists():
            client.dataset_starts, client.dataset_raw = _read_dataset(dataset)
        found.append(client)
    if not found:
        raise ConfigError(f"{root}: no chunk-N-trace.csv file (for the clients asked for)")
    return ServeGenData(tuple(found), str(root))


def parse_windows(lines: Iterable[str], source: str = "<text>") -> tuple[Window, ...]:
    """Parse a ``chunk-N-trace.csv`` (no header): ``start_s,rate,cv,pattern,shape,scale``."""
    out: list[Window] = []
    for number, row in enumerate(csv.reader(lines), start=1):
        if not row:
            continue
        out.append(_window(row, f"{source}:{number}"))
    starts = [w.start_s for w in out]
    if starts != sorted(starts):
        raise ConfigError(f"{source}: window starts must increase")
    return tuple(out)


def arrivals(
    data: ServeGenData,
    *,
    seed: int = 0,
    rate_scale: float = 1.0,
    start_s: float = 0.0,
    end_s: float | None = None,
    fallback: TokenSampler,
) -> Iterator[Request]:
    """The requests of ``[start_s, end_s)``, streamed in arrival order, times from ``start_s``."""
    if not (math.isfinite(rate_scale) and rate_scale > 0):
        raise ConfigError(f"rate_scale: must be a positive number (got {rate_scale!r})")
    end = data.span_s if end_s is None else min(end_s, data.span_s)
    for window_start in _window_starts(data, start_s, end):
        batch: list[list[Request]] = []
        for client in data.clients:
            window = _window_at(client, window_start)
            if window is not None and window.rate > 0:
                runs = _client_window(
                    client,
                    window,
                    seed=seed,
                    rate_scale=rate_scale,
                    fallback=fallback,
                    origin=start_s,
                    end=end,
                )
                batch.append(list(runs))
        yield from heapq.merge(*batch, key=_arrival)


def window_rates(data: ServeGenData, rate_scale: float = 1.0) -> list[tuple[float, float]]:
    """The aggregate curve scaled as ``arrivals`` scales it: (window start, requests per second)."""
    return [(t, r * rate_scale) for t, r in data.aggregate_rates()]


# --- generation -------------------------------------------------------------------------------


def _client_window(
    client: Client,
    window: Window,
    *,
    seed: int,
    rate_scale: float,
    fallback: TokenSampler,
    origin: float,
    end: float,
) -> Iterator[Request]:
    key = f"{seed}:{client.ident}:{window.start_s:g}"
    times = random.Random(f"arrivals:{key}")
    tokens = random.Random(f"tokens:{key}")
    gap = _gap_sampler(window, window.rate * rate_scale, times)
    lengths = client.lengths_at(window.start_s)
    stop = min(window.start_s + WINDOW_S, end)
    t = window.start_s + times.random() * gap()
    while t < stop:
        if t >= origin:
            if lengths is None:
                n_in, n_out = fallback(tokens)
            else:
                n_in, n_out = lengths[0].draw(tokens), lengths[1].draw(tokens)
            yield Request(t - origin, max(1, n_in), max(1, n_out))
        t += gap()


def _gap_sampler(window: Window, rate: float, rng: random.Random) -> _Gap:
    mean = 1.0 / rate
    k = window.shape
    if window.pattern == "Gamma":
        theta = mean / k
        return lambda: rng.gammavariate(k, theta)
    lam = mean / math.gamma(1.0 + 1.0 / k)
    return lambda: rng.weibullvariate(lam, k)


def _window_starts(data: ServeGenData, start_s: float, end_s: float) -> list[float]:
    starts = sorted({w.start_s for c in data.clients for w in c.windows})
    return [s for s in starts if s + WINDOW_S > start_s and s < end_s]


def _window_at(client: Client, start_s: float) -> Window | None:
    windows = client.windows
    i = bisect.bisect_left(windows, start_s, key=_start)
    return windows[i] if i < len(windows) and windows[i].start_s == start_s else None


def _start(w: Window) -> float:
    return w.start_s


def _arrival(r: Request) -> float:
    return r.arrival_s


# --- parsing ----------------------------------------------------------------------------------


def _chunk_number(path: Path) -> int:
    match = _CHUNK.search(path.name)
    if match is None:
        raise ConfigError(f"{path}: expected a name like chunk-N-trace.csv")
    return int(match.group(1))


def _read_windows(path: Path) -> tuple[Window, ...]:
    with path.open(encoding="utf-8") as handle:
        return parse_windows(handle, str(path))


def _window(row: Sequence[str], where: str) -> Window:
    if len(row) != 6:
        raise ConfigError(f"{where}: expected 6 fields start_s,rate,cv,pattern,shape,scale (got {row!r})")
    try:
        start, rate, cv, shape = float(row[0]), float(row[1]), float(row[2]), float(row[4])
    except ValueError:
        raise ConfigError(f"{where}: start_s, rate, cv and shape must be numbers (got {row!r})") from None
    pattern = row[3]
    if not (math.isfinite(start) and math.isfinite(rate) and rate >= 0):
        raise ConfigError(f"{where}: start_s must be finite and rate >= 0 (got {row!r})")
    if rate > 0:
        if pattern not in PATTERNS:
            raise ConfigError(f"{where}: pattern must be one of {', '.join(PATTERNS)} (got {pattern!r})")
        if not (math.isfinite(shape) and shape > 0):
            raise ConfigError(f"{where}: the fitted shape must be a positive number (got {row[4]!r})")
    return Window(start, rate, cv, pattern if rate > 0 else "", shape)


def _read_dataset(path: Path) -> tuple[tuple[float, ...], tuple[dict[str, str], ...]]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path}: not JSON ({err})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected an object keyed by window start")
    entries: list[tuple[float, dict[str, str]]] = []
    for key, fields in raw.items():
        if not isinstance(fields, dict) or not isinstance(fields.get("input_tokens"), str):
            raise ConfigError(f"{path}: window {key}: expected input_tokens/output_tokens pdf strings")
        if fields["input_tokens"].strip() in ("{}", "") or fields.get("output_tokens", "").strip() in (
            "{}",
            "",
        ):
            continue  # an empty distribution: no requests were characterised there
        try:
            entries.append((float(key), fields))
        except ValueError:
            raise ConfigError(f"{path}: window key {key!r} is not a number") from None
    entries.sort(key=lambda e: e[0])
    return tuple(e[0] for e in entries), tuple(e[1] for e in entries)


def _empty(text: object) -> bool:
    return not isinstance(text, str) or text.strip() in ("{}", "")


def _pdf(raw: dict[str, str], name: str, where: str) -> LengthPdf:
    text = raw.get(name)
    if not isinstance(text, str):
        raise ConfigError(f"{where}: no {name} distribution")
    try:
        parsed = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise ConfigError(f"{where}: {name} is not a Python-literal dict") from None
    if not isinstance(parsed, dict) or not parsed:
        raise ConfigError(f"{where}: {name} must be a non-empty {{tokens: probability}} dict")
    try:
        pairs = [(int(k), float(v)) for k, v in parsed.items()]
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {name} must map token counts to probabilities") from None
    # 0-token entries are left out, as the trace readers skip 0-token rows: such a request has no
    # first token to time (renormalised by drawing against the cumulative total)
    items = sorted((k, p) for k, p in pairs if p > 0 and k >= 1)
    if not items:
        raise ConfigError(f"{where}: {name} needs positive token counts with positive probability")
    values = tuple(v for v, _ in items)
    return LengthPdf(values, tuple(accumulate(p for _, p in items)))
