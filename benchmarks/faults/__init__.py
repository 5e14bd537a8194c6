"""Fault suites measured as figures (``python -m benchmarks faults``).

Each module here exposes ``run(quick: bool) -> list[Figure]``: the sidecar's (parser fuzz against a
PromQL reference, misbehaving upstreams, gate concurrency and slow clients) and the controller's
(no / stale / partial / NaN data, API errors and time-outs, Lease loss mid-tick, concurrent scale).
``quick`` is the size ``make test`` can afford; the benchmark runs the full size.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Figure:
    """One measured figure of a fault suite: what was tried and what went wrong."""

    suite: str
    name: str
    value: float | int | str
    #: What the figure must be for the suite to pass (``"0"``, ``">= 10000"``), for the reader.
    goal: str = ""

    def line(self) -> str:
        goal = f"  (goal {self.goal})" if self.goal else ""
        return f"{self.suite:<12} {self.name:<48} {self.value}{goal}"
