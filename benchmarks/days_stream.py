"""The two-week run's arrivals, generated once per day and replayed to every policy.

Generating ServeGen's arrivals costs more than simulating a sampled fleet: a day of m-small at the
benchmark's scale is 9.7 M requests (about 50 s here) of which a 1-in-8 fleet keeps 1.2 M. Every
policy sees the same arrivals, so each day is generated once, every m-th request kept
(``fleetslo.sim.sampled.every_mth``, counted within the day), and written as three flat arrays
(arrival seconds from the start of the data, prompt and output tokens) to
``<cache>/day-<d>.bin``; a run replays the days it needs from there. A day's file depends only on
the data, the seed, the rate scale and m (they name the folder), never on the span asked for, so
the quick run (day 8) and the two-week run share it.

Benchmark plumbing, not the product: the simulator takes any iterator of requests.
"""

from __future__ import annotations

import os
import tempfile
from array import array
from collections.abc import Iterator
from pathlib import Path

from fleetslo.sim.longrun import DAY_S
from fleetslo.sim.sampled import every_mth
from fleetslo.sim.traces import TokenSampler
from fleetslo.sim.traces.servegen import ServeGenData, arrivals
from fleetslo.sim.workload import Request


def cache_folder(rate_scale: float, m: int, seed: int = 0) -> Path:
    root = Path(os.environ.get("DAYS_CACHE", Path(tempfile.gettempdir()) / "fleetslo-days"))
    return root / f"m-small-x{rate_scale:.6f}-1in{m}-seed{seed}"


def day_file(folder: Path, day: int) -> Path:
    return folder / f"day-{day}.bin"


def ensure_day(
    data: ServeGenData, folder: Path, day: int, *, rate_scale: float, m: int, fallback: TokenSampler
) -> Path:
    """Write day ``day``'s sampled arrivals unless a complete file is already there."""
    path = day_file(folder, day)
    if path.exists():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    start = day * DAY_S
    times, prompts, outputs = array("d"), array("i"), array("i")
    raw = arrivals(data, rate_scale=rate_scale, start_s=start, end_s=start + DAY_S, fallback=fallback)
    for r in every_mth(raw, m):
        times.append(start + r.arrival_s)
        prompts.append(r.input_tokens)
        outputs.append(r.output_tokens)
    partial = path.with_suffix(".partial")
    with partial.open("wb") as f:
        array("q", [len(times)]).tofile(f)
        times.tofile(f)
        prompts.tofile(f)
        outputs.tofile(f)
    partial.rename(path)  # a run killed mid-write leaves no file that looks complete
    return path


def read_day(folder: Path, day: int) -> tuple[array[float], array[int], array[int]]:
    path = day_file(folder, day)
    with path.open("rb") as f:
        count = array("q")
        count.fromfile(f, 1)
        n = count[0]
        times, prompts, outputs = array("d"), array("i"), array("i")
        times.fromfile(f, n)
        prompts.fromfile(f, n)
        outputs.fromfile(f, n)
    return times, prompts, outputs


def replay(folder: Path, first_day: int, end_day: int) -> Iterator[Request]:
    """Days ``[first_day, end_day)`` from the cache, times from the start of ``first_day``."""
    origin = first_day * DAY_S
    for day in range(first_day, end_day):
        times, prompts, outputs = read_day(folder, day)
        for t, p, o in zip(times, prompts, outputs, strict=True):
            yield Request(t - origin, p, o)
