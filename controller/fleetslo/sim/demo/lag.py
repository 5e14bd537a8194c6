"""Whether this machine keeps up with the demo's speed-up: lag measured, judged against a budget.

The demo compresses time ``speedup`` times, so every wall millisecond the host loses is ``speedup``
simulated ones added to some request: a load generator that sends late, an event loop (the
clients', the router's, a replica's engine) that wakes late, a controller tick that starts late. On
a busy machine that lag, not the controller, would decide the verdict. ``LagMeter`` collects the
lag of each part (wall seconds, by source) and ``HostCheck`` turns it into a verdict per check
period: the p90 lag of any source over the last ``window_s`` wall seconds, in simulated seconds,
above ``budget_s`` (a share of the TTFT target: the error the judge may tolerate; for the token
path's sources, also the lag that moves the median request's TPOT by that share of its target,
``token_budget``) means the host is **behind**; behind for ``patience`` checks in a row (one, by
default) means the run cannot be judged at this speed-up, and the demo starts again slower
(``app``).

Arithmetic only: the parts measure, the demo decides.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from fleetslo.sim.result import exact_quantile

#: The lag sources, as the live view and the report name them.
LOADGEN, CLIENTS, ENGINES, CONTROLLER = "load generator", "clients and router", "engines", "controller"
#: Share of the TTFT target the host's p90 lag may take (in simulated seconds): beyond it, requests
#: near the target are judged by the host. 5 %: 0.1 s of a 2 s target (10 ms of wall time at 10×).
BUDGET_SHARE = 0.05
#: The sources on a token's path from the engine to the client: their lag moves when a request's
#: first and last tokens are seen, so it reaches TPOT ((last - first) / (tokens - 1)) divided by
#: the request's tokens after its first. The load generator's lag moves whole requests, and the
#: controller's its decisions: neither reaches TPOT.
TOKEN_PATH = frozenset({CLIENTS, ENGINES})
#: Wall seconds each check looks back over, and how many behind checks in a row give up on a run.
#: One: a check spans ``WINDOW_S × speedup`` simulated seconds (50 s at 10×), most of the minute
#: the policy's p90s cover, and it decides four times a minute. With two, a run behind for one
#: check was judged: on 2 cores with two busy loops beside it, such runs bought 0.5-1.2 replicas
#: more than the simulation (TPOT carries the lag divided by the output's tokens: 13 at the
#: demo trace's median), while every run without a behind check agreed to 0.5.
WINDOW_S, PATIENCE = 5.0, 1
#: Lag samples kept per source (at most; older ones fall out of every window anyway).
KEEP = 5_000


@dataclass(frozen=True, slots=True)
class Behind:
    """The worst lagging source of one check: its p90 lag in wall and simulated seconds."""

    source: str
    p90_wall_s: float
    p90_simulated_s: float
    budget_s: float

    @property
    def over(self) -> float:
        """How many times its budget the lag is (above 1: behind)."""
        return self.p90_simulated_s / self.budget_s

    def describe(self) -> str:
        return (
            f"{self.source} p90 lag {self.p90_wall_s * 1000:.0f} ms of wall time = "
            f"{self.p90_simulated_s:.2f} s simulated (budget {self.budget_s:.2f} s)"
        )


class LagMeter:
    """Lag samples (wall seconds late, at a monotonic wall time) by source."""

    def __init__(self) -> None:
        self._samples: dict[str, deque[tuple[float, float]]] = {}
        #: The largest lag seen per source over the whole run, for the report.
        self.worst: dict[str, float] = {}

    def record(self, source: str, late_s: float, at: float) -> None:
        late = max(0.0, late_s)
        self._samples.setdefault(source, deque(maxlen=KEEP)).append((at, late))
        self.worst[source] = max(self.worst.get(source, 0.0), late)

    def p90(self, source: str, now: float, window_s: float = WINDOW_S) -> float | None:
        """p90 of the source's lag over ``[now - window_s, now]``; ``None`` without samples."""
        values = [late for at, late in self._samples.get(source, ()) if at >= now - window_s]
        return exact_quantile(0.9, values)

    def sources(self) -> list[str]:
        return sorted(self._samples)


def token_budget(tpot_target_s: float, output_tokens: Sequence[int]) -> float | None:
    """Simulated seconds of lag on the token path that move the median request's TPOT by
    ``BUDGET_SHARE`` of its target: that share × the target × the tokens after its first (the demo
    trace's median output is 13 tokens, so 5 % of 50 ms × 12 = 0.03 s, where TTFT allows 0.1 s).
    ``None`` without requests."""
    if not output_tokens:
        return None
    return BUDGET_SHARE * tpot_target_s * max(1.0, statistics.median(output_tokens) - 1.0)


class HostCheck:
    """Checks a ``LagMeter`` every call of ``check``; ``gave_up`` once behind ``patience`` times in a row.

    Every source is judged against ``BUDGET_SHARE`` of the TTFT target; the token path's sources
    also against ``token_budget_s`` (``token_budget``), whichever is smaller.
    """

    def __init__(
        self,
        meter: LagMeter,
        speedup: float,
        ttft_target_s: float,
        *,
        token_budget_s: float | None = None,
        patience: int = PATIENCE,
    ):
        self.meter, self.speedup = meter, speedup
        self.budget_s = BUDGET_SHARE * ttft_target_s
        self.token_budget_s = self.budget_s if token_budget_s is None else min(self.budget_s, token_budget_s)
        self.patience = patience
        self.behind_in_a_row = 0
        self.last: Behind | None = None
        #: Checks made, and how many found the host behind (for the report).
        self.checks = 0
        self.behind_checks = 0
        self.gave_up: Behind | None = None

    def check(self, now: float) -> Behind | None:
        """The worst source over budget now (``None``: the host keeps up)."""
        worst: Behind | None = None
        for source in self.meter.sources():
            p90 = self.meter.p90(source, now)
            if p90 is None:
                continue
            budget = self.token_budget_s if source in TOKEN_PATH else self.budget_s
            found = Behind(source, p90, p90 * self.speedup, budget)
            if found.over > 1 and (worst is None or found.over > worst.over):
                worst = found
        self.checks += 1
        self.behind_checks += worst is not None
        self.behind_in_a_row = self.behind_in_a_row + 1 if worst is not None else 0
        self.last = worst
        if worst is not None and self.behind_in_a_row >= self.patience and self.gave_up is None:
            self.gave_up = worst
        return worst

    def summary(self) -> dict[str, object]:
        """What the report and ``results.json`` say about the host."""
        worst = {s: round(v * 1000, 1) for s, v in sorted(self.meter.worst.items())}
        return {
            "speedup": self.speedup,
            "lag_budget_simulated_s": self.budget_s,
            "token_lag_budget_simulated_s": self.token_budget_s,
            "checks": self.checks,
            "checks_behind": self.behind_checks,
            "kept_up": self.gave_up is None,
            "worst_lag_wall_ms": worst,
            "gave_up": None if self.gave_up is None else self.gave_up.describe(),
        }


def slower(speedup: float, behind: Behind, floor: float) -> float | None:
    """The next speed-up to try after ``behind``: low enough to bring its lag within budget (at
    least halved), not below ``floor``; ``None`` when already at the floor."""
    if speedup <= floor:
        return None
    needed = speedup * behind.budget_s / max(behind.p90_simulated_s, 1e-9)
    return max(floor, min(speedup / 2, math.floor(needed * 10) / 10 or floor))
