"""The engine model driven by the wall clock: requests in, token progress and finished requests out.

``EngineDriver`` owns one ``fleetslo.sim.engine.Engine`` and keeps it at the current simulated
time. The engine is event-driven, so nothing runs per step: on every arrival, and on a timer set for
the end of the engine's planned run (a prefill step, or a run of decode steps that ends when the next
sequence finishes), the driver applies every step that has ended by now. First tokens and finishes
therefore happen at the engine's exact simulated times; tokens in the middle of a decode run are
released by a stream tick every ``stream_interval`` wall seconds, so a long answer streams at the
model's pace without a wake-up per step.

An arrival is handled exactly as the simulator's router hands one to a replica
(``fleetslo.sim.harness.deliver``): a newcomer that could join the batch cuts the planned run at
the next step boundary. A client that disconnects does not abort its request (the engine model has
no abort): it runs to its end, as if the client had stayed.

Every wake-up records how late it ran (``lag``, wall seconds): on a host that cannot keep up with
the speed-up, steps end on time in simulated seconds but reach the clients late, and ``fleetslo
demo`` reads that lag to say so (``/lag``).

It must not know about HTTP or the exposition format; it must not block (it runs on the event loop).
"""

from __future__ import annotations

import asyncio
import math
import random
from collections import deque
from collections.abc import Callable

from fleetslo.sim.engine import Engine
from fleetslo.sim.harness import deliver
from fleetslo.sim.profile import EngineProfile
from fleetslo.sim.records import SimRequest
from fleetslo.sim.server.clock import SpeedClock
from fleetslo.sim.vllm_metrics import EngineMetrics

#: Default wall seconds between two releases of tokens generated inside a decode run.
STREAM_INTERVAL_S = 0.05
#: Wake-ups whose lateness is kept (the most recent ones).
LAG_SAMPLES = 2_000


class Generation:
    """One request inside the engine, as its HTTP handler follows it."""

    __slots__ = ("changed", "max_tokens", "req", "sent")

    def __init__(self, req: SimRequest, max_tokens: int) -> None:
        self.req = req
        self.max_tokens = max_tokens
        #: Set when more tokens are available or the request finished; the handler clears it.
        self.changed = asyncio.Event()
        #: Tokens the handler has already written to its client.
        self.sent = 0

    @property
    def finished(self) -> bool:
        return self.req.finish is not None


class EngineDriver:
    """One replica's engine, advanced to the simulated present on an asyncio loop."""

    def __init__(
        self,
        profile: EngineProfile,
        metrics: EngineMetrics,
        clock: SpeedClock,
        *,
        stream_interval: float = STREAM_INTERVAL_S,
        seed: int = 0,
        on_finish: Callable[[Generation], None] | None = None,
    ) -> None:
        self.engine = Engine(profile, metrics, rng=random.Random(seed))
        self.engine.finished = []
        self.engine.clock = clock.now()
        self.clock = clock
        self.stream_interval = stream_interval
        self.on_finish = on_finish
        self._live: dict[int, Generation] = {}
        self._next_index = 0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        #: (loop time, wall seconds late) of recent wake-ups.
        self.lag: deque[tuple[float, float]] = deque(maxlen=LAG_SAMPLES)

    @property
    def outstanding(self) -> int:
        return self.engine.outstanding

    def submit(self, input_tokens: int, output_tokens: int) -> Generation:
        """A request arrives now; its ``Generation`` reports progress from here on."""
        now = self._advance()
        req = SimRequest(self._next_index, now, input_tokens, output_tokens)
        self._next_index += 1
        generation = Generation(req, output_tokens)
        self._live[req.index] = generation
        deliver(self.engine, req, now)
        self._settle()
        return generation

    def produced(self, generation: Generation) -> int:
        """Tokens the engine has generated for this request so far (never fewer than already sent)."""
        req = generation.req
        if req.finish is not None:
            count = req.output_tokens
        elif req.join_step >= 0:  # decoding: one token at prefill end, one per decode step since
            count = req.emitted + 1 + self.engine.step - req.join_step
        else:  # waiting or prefilling (again, after a preemption): what it had before
            count = req.emitted
        return max(count, generation.sent)

    def metrics(self) -> EngineMetrics:
        """The engine's metrics as of now (gauges refreshed), for a ``/metrics`` scrape."""
        self._advance()
        self._settle()
        return self.engine.refresh_gauges()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # ------------------------------------------------------------------------------------------

    def _advance(self, floor: float = -math.inf) -> float:
        """Apply every step that has ended by now (at least ``floor``); returns the simulated now."""
        now = max(self.clock.now(), floor)
        engine = self.engine
        while engine.run_left and engine.run_end <= now:
            engine.complete()
        if engine.run_left:
            engine.sync(now)
        return now

    def _settle(self) -> None:
        """Wake handlers whose request made progress, retire finished ones, set the next timer."""
        finished = self.engine.finished
        assert finished is not None
        for req in finished:
            generation = self._live.pop(req.index, None)
            if generation is not None:
                generation.changed.set()
                if self.on_finish is not None:
                    self.on_finish(generation)
        finished.clear()
        if self.engine.n_dec:
            for generation in self._live.values():
                if self.produced(generation) > generation.sent:
                    generation.changed.set()
        self._schedule()

    def _schedule(self) -> None:
        engine = self.engine
        loop = asyncio.get_running_loop()
        run_end = self.clock.wall_at(engine.run_end) if engine.run_left else math.inf
        tick = loop.time() + self.stream_interval if engine.n_dec else math.inf
        at = min(run_end, tick)
        if at == self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = at
        if at < math.inf:
            # A timer for the run's end carries it: at that instant the run has ended, whatever
            # the float round-off of converting between the two clocks says.
            due = engine.run_end if run_end <= tick else -math.inf
            self._timer = loop.call_at(at, self._wake, due, at)

    def _wake(self, due: float, at: float) -> None:
        now = asyncio.get_running_loop().time()
        self.lag.append((now, max(0.0, now - at)))
        self._timer, self._timer_at = None, math.inf
        self._advance(floor=due)
        self._settle()
