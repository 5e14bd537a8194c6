"""The simulator's mutable record of one request as it moves through router and engine.

The engine updates these in place on its hot path (hence a plain class with ``__slots__``); the
result builder reads the timestamps afterwards to judge each request exactly. Times are virtual
seconds from the trace start. Nothing here computes anything.

``quiet_gc`` is for whoever runs a long replay: see its docstring.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from fleetslo.sim.workload import Request


class SimRequest:
    """One request: the trace's numbers, where it is now, and what happened to it."""

    __slots__ = (
        "arrival", "computed", "emitted", "engine_arrival", "epoch", "finish", "first_token", "index",
        "input_tokens", "join_step", "output_tokens", "preemptions", "rejected", "scheduled", "target",
    )  # fmt: skip

    def __init__(self, index: int, arrival: float, input_tokens: int, output_tokens: int) -> None:
        self.index = index
        self.arrival = arrival
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens if output_tokens > 1 else 1  # max(1, ·) without the call
        #: When the request reached its replica (vLLM's ``arrival_time``); later than ``arrival``
        #: when it waited at the router for a ready replica.
        self.engine_arrival = arrival
        self.scheduled: float | None = None
        self.first_token: float | None = None
        self.finish: float | None = None
        self.rejected = False
        #: Tokens to prefill now: the prompt, plus the tokens already generated after a preemption
        #: (vLLM recomputes them).
        self.target = input_tokens
        self.computed = 0
        #: Tokens emitted before the current decode phase began (0 unless preempted).
        self.emitted = 0
        #: Engine step count when the current decode phase began; -1 while not decoding.
        self.join_step = -1
        #: Bumped on preemption so stale entries in the engine's finish heap are skipped.
        self.epoch = 0
        self.preemptions = 0

    @classmethod
    def of(cls, index: int, request: Request, arrival_shift: float = 0.0) -> SimRequest:
        return cls(index, request.arrival_s - arrival_shift, request.input_tokens, request.output_tokens)

    @property
    def ttft(self) -> float | None:
        """Time from the client's arrival (at the router) to the first token."""
        return None if self.first_token is None else self.first_token - self.arrival

    @property
    def tpot(self) -> float | None:
        """Mean time per output token after the first; ``None`` unfinished or with one token."""
        if self.finish is None or self.first_token is None or self.output_tokens < 2:
            return None
        return (self.finish - self.first_token) / (self.output_tokens - 1)


@contextmanager
def quiet_gc() -> Iterator[None]:
    """Run a replay without the cyclic garbage collector; collect once at the end.

    A replay holds a million request records (the trace, the requests in flight), and CPython's
    full collections walk every one of them again and again: 15-20 % of a 1.16 M-request replay's
    CPU went there (``benchmarks sim``). A replay makes no garbage that only the collector could
    free while it runs: requests are freed by reference counting as they are judged. Its own state
    at the end is cyclic (the control plane's objects refer to each other) and is freed by the
    first collection after the run; a streamed replay four times longer leaves no more of it
    (``tests/unit/sim/test_quiet_gc.py``). On the way out the collector is left as it was found.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
