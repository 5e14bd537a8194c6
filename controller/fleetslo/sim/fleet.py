"""A simulated fleet: replica lifecycle, the router, scrapes, and what the fleet costs.

Replicas go requested → starting (cold start) → ready → draining (finish what they hold, take
nothing new) → gone; cost runs from request to gone. Scaling down cancels starting replicas first
(newest first, as a ReplicaSet deletes not-ready pods first), then drains the ready replicas with
the fewest outstanding requests. The router sends each request to the ready replica with the
fewest outstanding requests; with none ready, requests wait at the router (bounded, counted).

The fleet owns the engines' pending-event heap: the runner pops the earliest event and hands it
back here. This module applies decisions; it must not make them, and it must not judge results.
"""

from __future__ import annotations

import heapq
import math
import random
from bisect import bisect_left, insort
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from fleetslo.core import conventions as cv
from fleetslo.core.metrics.window import SnapshotRing
from fleetslo.core.model import EngineSnapshot, ReplicaCounts
from fleetslo.sim.engine import Engine
from fleetslo.sim.profile import EngineProfile
from fleetslo.sim.records import SimRequest
from fleetslo.sim.vllm_metrics import EngineMetrics

#: Histograms every engine records; the others only when a scrape keeps them.
#: Histograms recorded whatever the engine's ``request_histograms``: the latency ones by the engine,
#: the request lengths by the fleet itself at admission.
_ALWAYS_RECORDED = frozenset({cv.Histogram.TTFT, cv.Histogram.ITL, cv.Histogram.TPOT,
                              cv.Histogram.PROMPT_LENGTH, cv.Histogram.OUTPUT_LENGTH})  # fmt: skip


class Phase(StrEnum):
    STARTING = "starting"
    READY = "ready"
    DRAINING = "draining"
    GONE = "gone"


@dataclass(frozen=True, slots=True)
class ReplicaSample:
    """One scrape of one replica: its vLLM page and how long its GPUs had been busy."""

    at: float
    snapshot: EngineSnapshot
    busy_seconds: float


@dataclass(frozen=True, slots=True)
class FleetConfig:
    """How the fleet behaves, apart from the engine profile."""

    model_name: str
    cold_start_s: float
    #: Sigma of a lognormal factor on each cold start (0: every start takes exactly cold_start_s).
    cold_start_sigma: float = 0.0
    router_queue_limit: int | None = None
    #: Samples kept per replica; enough for the longest observation window.
    ring_size: int = 16
    buckets: Mapping[str, Sequence[float]] | None = None
    #: Histogram families a scrape keeps (all of them when None). The observation reads TTFT,
    #: ITL and TPOT only; the rest are recorded but left off scrapes to keep big fleets fast.
    scrape_histograms: tuple[str, ...] | None = (
        cv.Histogram.TTFT,
        cv.Histogram.ITL,
        cv.Histogram.TPOT,
        cv.Histogram.PROMPT_LENGTH,
        cv.Histogram.OUTPUT_LENGTH,
    )


class Replica:
    """One replica's lifecycle and engine; the engine exists from the moment it is ready."""

    __slots__ = (
        "engine", "gone_at", "ident", "load", "load_seq", "pending", "phase", "ready_at",
        "requested_at", "ring",
    )  # fmt: skip

    def __init__(self, ident: int, requested_at: float, ready_at: float) -> None:
        self.ident = ident
        self.phase = Phase.STARTING
        self.requested_at = requested_at
        self.ready_at = ready_at
        self.gone_at: float | None = None
        self.engine: Engine | None = None
        self.pending = -1  # sequence number of this replica's live entry in the event heap
        self.load = 0  # outstanding requests when its live router entry was pushed
        self.load_seq = -1  # sequence number of that entry; -1 while it takes no requests
        self.ring: SnapshotRing[ReplicaSample] | None = None

    def outstanding(self) -> int:
        return 0 if self.engine is None else self.engine.outstanding


class Fleet:
    """Replicas, the router in front of them, and the heap of their next engine events."""

    def __init__(self, profile: EngineProfile, config: FleetConfig, limit: int, rng: random.Random) -> None:
        self.profile = profile
        self.config = config
        self.limit = max(1, min(limit, profile.max_num_seqs))
        self.rng = rng
        self.replicas: list[Replica] = []
        #: Replicas whose sample history may still be read, in ``ident`` order (as ``replicas``): a
        #: gone replica's history is dropped once no window can reach it, so a week of scaling up
        #: and down keeps a bounded set of histories and each decision reads only those.
        self._histories: list[Replica] = []
        self.ready: list[Replica] = []
        self.starting: list[Replica] = []
        self.draining: list[Replica] = []
        self.events: list[tuple[float, int, Replica]] = []
        #: The router's lazy min-heap of (outstanding, seq, replica); entries whose seq is not the
        #: replica's ``load_seq`` are stale. Ties go to the replica whose load changed longest ago.
        self.loads: list[tuple[int, int, Replica]] = []
        self.lifecycle: list[tuple[float, int, Replica]] = []
        self.router_queue: deque[SimRequest] = deque()
        self.rejected = 0
        self.last_scrape: float | None = None
        self._seq = 0
        self._max_tokens = min(profile.max_model_len, profile.kv_capacity_tokens)
        kept = config.scrape_histograms
        #: Whether any scrape reads the per-request histograms beyond TTFT, ITL and TPOT.
        self._request_histograms = kept is None or bool(set(kept) - _ALWAYS_RECORDED)

    # ----------------------------------------------------------------------------- lifecycle

    def add_ready(self, n: int, now: float) -> None:
        """Start with ``n`` warm replicas: ready at ``now`` and paid for from ``now``."""
        for _ in range(n):
            replica = self._new_replica(now, now)
            self._make_ready(replica, now)

    def scale_to(self, desired: int, now: float) -> None:
        """Make ready + starting equal ``desired``: start new replicas or remove existing ones."""
        current = len(self.ready) + len(self.starting)
        for _ in range(desired - current):
            delay = self.config.cold_start_s
            if self.config.cold_start_sigma > 0:
                delay *= self.rng.lognormvariate(0.0, self.config.cold_start_sigma)
            replica = self._new_replica(now, now + delay)
            self.starting.append(replica)
            heapq.heappush(self.lifecycle, (replica.ready_at, replica.ident, replica))
        for _ in range(current - desired):
            self._remove_one(now)

    def next_ready_at(self) -> float:
        while self.lifecycle and self.lifecycle[0][2].phase is not Phase.STARTING:
            heapq.heappop(self.lifecycle)  # cancelled while starting
        return self.lifecycle[0][0] if self.lifecycle else math.inf

    def promote_due(self, now: float) -> None:
        """Replicas whose cold start has ended become ready and take the router's queue."""
        while self.next_ready_at() <= now:
            _, _, replica = heapq.heappop(self.lifecycle)
            self.starting.remove(replica)
            self._make_ready(replica, replica.ready_at)
        while self.router_queue and self.ready:
            self.route(self.router_queue.popleft(), now)

    def _new_replica(self, requested_at: float, ready_at: float) -> Replica:
        replica = Replica(len(self.replicas), requested_at, ready_at)
        self.replicas.append(replica)
        return replica

    def _make_ready(self, replica: Replica, now: float) -> None:
        metrics = EngineMetrics(self.config.model_name, self.config.buckets)
        engine = Engine(
            self.profile, metrics, limit=self.limit, rng=self.rng, request_histograms=self._request_histograms
        )
        engine.clock = now
        replica.engine = engine
        replica.phase = Phase.READY
        replica.ring = SnapshotRing(self.config.ring_size)
        # A fresh vLLM starts its counters at zero; this first sample anchors its first window. It
        # is stamped with the last scrape's time (its counters were zero then too), so that every
        # serving replica's newest sample carries the same time and none looks stale or gone.
        stamp = now if self.last_scrape is None else min(now, self.last_scrape)
        replica.ring.append(stamp, ReplicaSample(stamp, self._snapshot(engine), 0.0))
        insort(self._histories, replica, key=_ident)
        self.ready.append(replica)
        self._track_load(replica, engine)

    def _remove_one(self, now: float) -> None:
        if self.starting:
            replica = self.starting.pop()  # the newest: it has the longest left to wait
            replica.phase = Phase.GONE
            replica.gone_at = now
            return
        if not self.ready:
            return
        replica = min(self.ready, key=Replica.outstanding)
        self.ready.remove(replica)
        replica.phase = Phase.DRAINING
        replica.load_seq = -1
        self.draining.append(replica)
        self._retire_if_empty(replica, now)

    def _retire_if_empty(self, replica: Replica, now: float) -> None:
        if replica.phase is Phase.DRAINING and replica.outstanding() == 0:
            replica.phase = Phase.GONE
            replica.gone_at = now
            self.draining.remove(replica)

    # ------------------------------------------------------------------------- routing, events

    def route(self, req: SimRequest, now: float) -> None:
        """Send a request to the least-loaded ready replica, or queue it at the router."""
        if req.input_tokens + req.output_tokens > self._max_tokens:
            self._reject(req)  # vLLM refuses a prompt longer than the context it can hold
            return
        if not self.ready:
            limit = self.config.router_queue_limit
            if limit is not None and len(self.router_queue) >= limit:
                self._reject(req)
            else:
                self.router_queue.append(req)
            return
        replica = self._least_loaded()
        engine = replica.engine
        assert engine is not None
        # not inlined: a front-end stage (profile.frontend) may make submit more than a queue append
        engine.submit(req, now)
        # The request's lengths, as vLLM's request_prompt/generation_tokens histograms count them
        # (vLLM at the finish, here at admission: over a window the same distribution).
        # Hist.observe, inlined (twice per request).
        metrics = engine.metrics
        hist, value = metrics.prompt_len, req.input_tokens
        hist.counts[bisect_left(hist.bounds, value)] += 1
        hist.sum += value
        hist, value = metrics.output_len, req.output_tokens
        hist.counts[bisect_left(hist.bounds, value)] += 1
        hist.sum += value
        # _track_load, but the replica's live entry is the heap's top: replace it in one step
        # (the same live entries as a push, so the same choices, and no stale entry left behind)
        self._seq = seq = self._seq + 1
        replica.load = load = engine.outstanding
        replica.load_seq = seq
        heapq.heapreplace(self.loads, (load, seq, replica))
        left = engine.run_left
        if left == 0:
            if engine.start(now):
                self._push(replica, engine)
        elif left > 1 and len(engine.running) < engine.limit:  # engine.can_admit()
            # The newcomer can join at the next step boundary: cut the planned run there.
            engine.cut(now)
            self._push(replica, engine)

    def _least_loaded(self) -> Replica:
        loads = self.loads
        top = loads[0]
        while top[1] != top[2].load_seq:
            heapq.heappop(loads)
            top = loads[0]
        return top[2]

    def _track_load(self, replica: Replica, engine: Engine) -> None:
        """Record a ready replica's new outstanding count in the router's heap."""
        self._seq = seq = self._seq + 1
        replica.load = load = engine.outstanding
        replica.load_seq = seq
        loads = self.loads
        heapq.heappush(loads, (load, seq, replica))
        if len(loads) > 8 * len(self.ready) + 64:
            # Entries for loads that went down are stale and never surface: rebuild now and then.
            self.loads = [(r.load, r.load_seq, r) for r in self.ready]
            heapq.heapify(self.loads)

    def _reject(self, req: SimRequest) -> None:
        req.rejected = True
        self.rejected += 1

    def _push(self, replica: Replica, engine: Engine) -> None:
        self._seq += 1
        replica.pending = self._seq
        heapq.heappush(self.events, (engine.run_end, self._seq, replica))

    def next_event_at(self) -> float:
        events = self.events
        while events and events[0][1] != events[0][2].pending:
            heapq.heappop(events)  # superseded by a truncated or re-planned run
        return events[0][0] if events else math.inf

    def run_next_event(self) -> None:
        """Complete the earliest planned run (call ``next_event_at`` first)."""
        events = self.events
        end, _, replica = events[0]  # left in place: the next run replaces it in one step
        engine = replica.engine
        assert engine is not None
        busy = engine.complete()
        if busy:
            # _push, inlined (once per event), as a heapreplace of the entry just completed
            self._seq = seq = self._seq + 1
            replica.pending = seq
            heapq.heapreplace(events, (engine.run_end, seq, replica))
        else:
            heapq.heappop(events)
        if replica.load_seq >= 0:
            if engine.outstanding != replica.load:
                self._track_load(replica, engine)
        elif not busy and replica.phase is Phase.DRAINING:
            self._retire_if_empty(replica, end)

    def set_limit(self, limit: int, now: float) -> None:
        """A new live batch limit on every replica, effective at each one's next step boundary."""
        limit = max(1, min(limit, self.profile.max_num_seqs))
        raised = limit > self.limit
        self.limit = limit
        for replica in self.serving():
            engine = replica.engine
            assert engine is not None
            engine.set_limit(limit)
            if raised and engine.waiting and engine.run_left > 1 and engine.can_admit():
                engine.sync(now)
                engine.truncate()
                self._push(replica, engine)

    # ------------------------------------------------------------------------------ reporting

    def serving(self) -> Iterator[Replica]:
        """Replicas with an engine that still holds or takes requests: ready and draining."""
        yield from self.ready
        yield from self.draining

    def scrape(self, now: float) -> None:
        """Every serving replica's page as of ``now``, appended to its history."""
        self.last_scrape = now
        for replica in self.serving():
            engine = replica.engine
            assert engine is not None and replica.ring is not None
            engine.sync(now)
            sample = ReplicaSample(now, self._snapshot(engine), engine.busy)
            replica.ring.append(now, sample)

    def _snapshot(self, engine: Engine) -> EngineSnapshot:
        return engine.refresh_gauges().snapshot(self.config.scrape_histograms)

    def histories(self, now: float, window: float) -> list[SnapshotRing[ReplicaSample]]:
        """Sample histories that still matter for a window ending at ``now`` (gone ones too).

        A gone replica whose newest sample is older than the window is forgotten: time only moves
        on, so no later window of the same length reaches it again.
        """
        out, kept = [], []
        for replica in self._histories:
            ring = replica.ring
            newest = ring.newest() if ring is not None else None
            if ring is not None and newest is not None and newest[0] >= now - window:
                out.append(ring)
            elif replica.phase is Phase.GONE:
                replica.ring = None
                continue
            kept.append(replica)
        self._histories = kept
        return out

    def counts(self) -> ReplicaCounts:
        return ReplicaCounts(len(self.ready), len(self.starting), len(self.draining))

    def outstanding(self) -> int:
        """Requests accepted and not finished: at the router or on any replica."""
        return len(self.router_queue) + sum(r.outstanding() for r in self.serving())

    def queue_length(self) -> int:
        """Requests waiting for a batch slot: at the router plus in every engine's queue."""
        waiting = sum(len(r.engine.waiting) for r in self.serving() if r.engine is not None)
        return len(self.router_queue) + waiting

    def replica_seconds(self, now: float) -> float:
        """Paid replica time: from request to gone (or to ``now`` for those still here)."""
        return sum((r.gone_at if r.gone_at is not None else now) - r.requested_at for r in self.replicas)

    def preemptions(self) -> int:
        return sum(r.engine.metrics.preemptions for r in self.replicas if r.engine is not None)


def _ident(replica: Replica) -> int:
    return replica.ident
