"""A positive series in fixed time bins: the memory every seasonal forecast reads.

Observations are averaged into bins of ``bin_s`` seconds, addressed by their absolute bin number
(``floor(t / bin_s)``), so "the same time yesterday" is ``b - day_bins`` whatever the history's
start. Bins with no observation (the controller was down, the metrics store had a gap) are
``None``: missing, never 0. At most ``keep`` bins are kept. Pure value type.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class BinnedHistory:
    bin_s: float
    keep: int
    #: Absolute bin number of ``bins[0]``.
    first_bin: int | None = None
    #: Completed bins, oldest first; None where nothing was observed.
    bins: tuple[float | None, ...] = ()
    #: The bin being filled: (bin number, sum of values, count).
    current: tuple[int, float, int] | None = None

    def bin_of(self, t: float) -> int:
        return math.floor(t / self.bin_s)

    def value(self, b: int) -> float | None:
        """The mean of completed bin ``b``; None if missing, not completed or forgotten."""
        if self.first_bin is None:
            return None
        i = b - self.first_bin
        return self.bins[i] if 0 <= i < len(self.bins) else None

    def current_mean(self) -> float | None:
        cur = self.current
        return None if cur is None or cur[2] == 0 else cur[1] / cur[2]

    @property
    def last_closed(self) -> int | None:
        """The newest completed bin's number."""
        return None if self.first_bin is None or not self.bins else self.first_bin + len(self.bins) - 1

    def add(self, samples: Sequence[tuple[float, float]]) -> tuple[BinnedHistory, list[int]]:
        """Fold in (time, value) samples (already checked and de-evented), in time order; a sample
        older than the bin being filled is dropped (a late sample of a closed bin). Returns the new
        history and the numbers of the bins this closed (missing ones included), oldest first."""
        closed: list[float | None] = []
        first, cur = self.first_bin, self.current
        for t, value in samples:
            b = self.bin_of(t)
            if cur is None:
                first = b if first is None else first
                cur = (b, value, 1)
            elif b == cur[0]:
                cur = (b, cur[1] + value, cur[2] + 1)
            elif b > cur[0]:
                closed.extend([cur[1] / cur[2], *([None] * (b - cur[0] - 1))])
                cur = (b, value, 1)
        if cur is None:
            return self, []
        if not closed:
            return replace(self, first_bin=first, current=cur), []
        assert first is not None
        start = first + len(self.bins)
        bins = (*self.bins, *closed)
        if len(bins) > self.keep:
            first += len(bins) - self.keep
            bins = bins[-self.keep :]
        history = replace(self, first_bin=first, bins=bins, current=cur)
        return history, list(range(start, start + len(closed)))
