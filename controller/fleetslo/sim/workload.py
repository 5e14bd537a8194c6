"""The unit of simulated traffic: a request with its arrival time and token counts.

Trace readers produce a ``Trace``; the engine model consumes one. Nothing else lives here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Request:
    """One request: when it arrives (seconds from the trace start) and its token counts."""

    arrival_s: float
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class Trace:
    """Requests sorted by arrival, with where they came from (a path or a generator description)."""

    requests: tuple[Request, ...]
    source: str = ""

    @property
    def duration_s(self) -> float:
        return self.requests[-1].arrival_s if self.requests else 0.0

    def __len__(self) -> int:
        return len(self.requests)
