"""Replay days of traffic in bounded memory: streamed arrivals in, windowed results out.

``runner.simulate`` holds every request of a trace and judges them at the end; two weeks of a fleet
of 60 replicas are tens of millions of requests. ``simulate_stream`` runs the same loop — the one
``control_plane.ControlPlane.run``: arrivals, engine runs, replicas becoming ready, scrapes, and the
production ``Controller`` deciding and applying, on the same ``Fleet`` — but takes arrivals from an
iterator, and judges each one-minute window as soon as every request that arrived in it is done:
memory holds the requests in flight and the windows still open, never the trace. Its windows equal
``result.build_result``'s on any trace both can run (``tests/unit/sim/test_longrun.py``).

What it adds: per-day figures (window and request attainment, replica-hours exactly from every
replica's request and gone times, p90s). Overall p90s over days are not kept (every value would
have to be); the per-day and per-window p90s are exact.

The runner drives; the controller decides. This module takes arrivals and judges; it decides nothing
and models no engine.
"""

from __future__ import annotations

import functools
import heapq
import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from fleetslo.control.instruments import ControllerMetrics
from fleetslo.control.ports import Source
from fleetslo.policy.base import Policy
from fleetslo.sim.control_plane import ControlPlane, FleetSample, SimConfig
from fleetslo.sim.fleet import Replica
from fleetslo.sim.records import SimRequest
from fleetslo.sim.result import JUDGE_WINDOW_S, judge_window
from fleetslo.sim.result_types import ScaleEventRecord, WindowResult
from fleetslo.sim.workload import Request

DAY_S = 86_400.0


@dataclass(slots=True)
class _OpenWindow:
    ttfts: list[float] = field(default_factory=list)
    tpots: list[float] = field(default_factory=list)


@dataclass(slots=True)
class StreamResult:
    """Windows (the same ``WindowResult``s as ``build_result``'s), scale events, and totals."""

    windows: list[WindowResult] = field(default_factory=list)
    events: list[ScaleEventRecord] = field(default_factory=list)
    requests: int = 0
    met_requests: int = 0
    completed: int = 0
    rejected: int = 0
    in_flight_at_end: int = 0
    end: float = 0.0
    replica_seconds: float = 0.0
    replica_seconds_by_day: dict[int, float] = field(default_factory=dict)
    requests_by_day: dict[int, tuple[int, int]] = field(default_factory=dict)  # (requests, met)
    preemptions: int = 0
    wall_seconds: float = 0.0
    #: The controller's own metrics over the replay (decisions by reason, errors, tick durations).
    controller: ControllerMetrics | None = None
    #: Reconciles that failed and were backed off: (t, stage, error kind).
    failures: list[tuple[float, str, str]] = field(default_factory=list)

    def window_attainment(self, start_s: float = 0.0, end_s: float = math.inf) -> float | None:
        judged = [w.met for w in self.windows if w.met is not None and start_s <= w.start_s < end_s]
        return sum(judged) / len(judged) if judged else None

    def day(self, day: int, day_s: float = DAY_S) -> dict[str, Any]:
        """One day's figures (attainment over that day's windows, replica-hours paid that day)."""
        windows = [w for w in self.windows if day * day_s <= w.start_s < (day + 1) * day_s]
        requests, met = self.requests_by_day.get(day, (0, 0))
        p90_ttft = [w.p90_ttft_s for w in windows if w.p90_ttft_s is not None]
        return {
            "day": day,
            "window_attainment": self.window_attainment(day * day_s, (day + 1) * day_s),
            "request_attainment": met / requests if requests else None,
            "requests": requests,
            "replica_hours": self.replica_seconds_by_day.get(day, 0.0) / 3600,
            "worst_window_p90_ttft_s": max(p90_ttft) if p90_ttft else None,
        }


def simulate_stream(
    arrivals: Iterable[Request],
    policy: Policy[Any],
    config: SimConfig,
    *,
    day_s: float = DAY_S,
    wrap_source: Callable[[Source], Source] | None = None,
) -> StreamResult:
    """Replay ``arrivals`` (sorted by arrival) through a warm fleet under ``policy``.

    ``wrap_source`` wraps the simulated fleet's source, as ``runner.simulate``'s does.
    """
    started = time.perf_counter()
    loop = _StreamLoop(iter(arrivals), policy, config, day_s, wrap_source)
    loop.run()
    result = loop.finish()
    result.wall_seconds = time.perf_counter() - started
    return result


class _StreamLoop:
    def __init__(
        self,
        arrivals: Iterator[Request],
        policy: Policy[Any],
        config: SimConfig,
        day_s: float,
        wrap_source: Callable[[Source], Source] | None,
    ) -> None:
        self.arrivals = arrivals
        self.config, self.spec = config, config.spec
        self.day_s = day_s
        # Decision samples are not kept: over days they would grow with the run, not the fleet.
        self.plane = ControlPlane(
            policy, config, on_sample=self._sample, record_decisions=False, wrap_source=wrap_source
        )
        self.fleet = self.plane.fleet
        self.result = StreamResult()
        self.now = 0.0
        self.count = 0
        self.next: SimRequest | None = None
        self.last_arrival = 0.0
        self.deadline = math.inf
        self._pull()
        # judging: requests in arrival order until done; windows open until their last is done
        self.in_flight: deque[SimRequest] = deque()
        self.open: dict[int, _OpenWindow] = {}
        self.samples: dict[int, list[FleetSample]] = {}
        self.judged_upto = 0  # windows below this index are final
        slo = self.spec.objectives
        self.slo = (slo.ttft.threshold, slo.tpot.threshold, slo.ttft.quantile)

    # --- arrivals ---------------------------------------------------------------------------

    def _pull(self) -> None:
        request = next(self.arrivals, None)
        if request is None:
            self.next = None
            self.deadline = self.last_arrival + self.config.drain_timeout_s
            return
        self.next = SimRequest.of(self.count, request)
        self.count += 1
        self.last_arrival = request.arrival_s

    def run(self) -> None:
        """Arrivals and engine runs (``_pump``) between the control plane's events, to the end."""
        self.plane.run(self._pump, self._stop, self._after_control)

    def _pump(self, until: float) -> None:
        """Process arrivals and engine events up to ``until`` (inclusive), earliest first."""
        fleet, in_flight = self.fleet, self.in_flight
        route, run_event, events = fleet.route, fleet.run_next_event, fleet.events
        req = self.next
        t_arrival = req.arrival if req is not None else math.inf
        while True:
            while events and events[0][1] != events[0][2].pending:
                heapq.heappop(events)
            t_event = events[0][0] if events else math.inf
            if t_event <= t_arrival:
                if t_event > until:
                    break
                run_event()
                self.now = t_event
            else:
                if t_arrival > until:
                    break
                assert req is not None
                route(req, t_arrival)
                in_flight.append(req)
                self.now = t_arrival
                self._pull()
                req = self.next
                t_arrival = req.arrival if req is not None else math.inf

    def _stop(self, t_ctrl: float) -> bool:
        done = self.next is None and self.fleet.outstanding() == 0
        return done or t_ctrl > self.deadline

    def _after_control(self, now: float) -> None:
        self.now = now
        self._judge_done()

    def _sample(self, sample: FleetSample) -> None:
        self.samples.setdefault(int(sample.t // JUDGE_WINDOW_S), []).append(sample)

    # --- judging ----------------------------------------------------------------------------

    def _judge_done(self, final: bool = False) -> None:
        """Fold finished requests (in arrival order) into their windows; close complete windows."""
        in_flight = self.in_flight
        while in_flight and (final or in_flight[0].finish is not None or in_flight[0].rejected):
            self._record(in_flight.popleft())
        if final:
            return
        oldest = in_flight[0].arrival if in_flight else (self.next.arrival if self.next else self.now)
        # the window of ``now`` and the one before stay open: the end may still fold into them
        upto = int(min(oldest, self.now) // JUDGE_WINDOW_S) - 1
        self._close_windows_below(upto)

    def _record(self, r: SimRequest) -> None:
        ttft_s, tpot_s, _ = self.slo
        k = int(r.arrival // JUDGE_WINDOW_S)
        window = self.open.get(k)
        if window is None:
            window = self.open[k] = _OpenWindow()
        first, finish = r.first_token, r.finish
        ttft = math.inf if first is None else first - r.arrival
        n = r.output_tokens - 1
        tpot = None if finish is None or first is None or n < 1 else (finish - first) / n
        window.ttfts.append(ttft)
        if tpot is not None:
            window.tpots.append(tpot)
        met = finish is not None and ttft <= ttft_s and (tpot is None or tpot <= tpot_s)
        day = int(r.arrival // self.day_s)
        total, good = self.result.requests_by_day.get(day, (0, 0))
        self.result.requests_by_day[day] = (total + 1, good + met)
        res = self.result
        res.requests += 1
        res.met_requests += met
        res.completed += finish is not None
        res.in_flight_at_end += finish is None and not r.rejected

    def _close_windows_below(self, upto: int) -> None:
        for k in range(self.judged_upto, upto):
            self.result.windows.append(self._window(k, self.open.pop(k, None), self.samples.pop(k, [])))
        self.judged_upto = max(self.judged_upto, upto)

    def _window(self, k: int, window: _OpenWindow | None, samples: list[FleetSample]) -> WindowResult:
        """The judge's own window rule (``result.judge_window``) over this window's requests."""
        ttfts = window.ttfts if window else []
        tpots = window.tpots if window else []
        return judge_window(k, ttfts, tpots, samples, self.slo)

    def finish(self) -> StreamResult:
        res, fleet = self.result, self.fleet
        end = self.now
        res.end = end
        self._judge_done(final=True)
        # as build_result: windows up to the end; requests past it fall into the last one
        count = max(1, math.ceil(end / JUDGE_WINDOW_S))
        tail = [self.open.pop(k) for k in sorted(self.open) if k >= count - 1]
        if tail:
            self.open[count - 1] = functools.reduce(_merge, tail)
        self._close_windows_below(count)
        records = self.plane.records
        res.events, res.failures, res.controller = records.events, records.failures, self.plane.metrics
        res.replica_seconds = fleet.replica_seconds(end)
        res.replica_seconds_by_day = _replica_seconds_by_day(fleet.replicas, end, self.day_s)
        res.rejected = fleet.rejected
        res.preemptions = fleet.preemptions()
        return res


def _merge(a: _OpenWindow, b: _OpenWindow) -> _OpenWindow:
    return _OpenWindow(a.ttfts + b.ttfts, a.tpots + b.tpots)


def _replica_seconds_by_day(replicas: list[Replica], end: float, day_s: float) -> dict[int, float]:
    """Paid time (request → gone, or the end) of every replica, split at day boundaries."""
    out: dict[int, float] = {}
    for r in replicas:
        start, stop = r.requested_at, r.gone_at if r.gone_at is not None else end
        day = int(start // day_s)
        while start < stop:
            boundary = min(stop, (day + 1) * day_s)
            out[day] = out.get(day, 0.0) + boundary - start
            start, day = boundary, day + 1
    return out
