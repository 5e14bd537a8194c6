"""The API server in front of a simulated replica, as a queue (``profile.frontend_queue``).

vLLM's OpenAI server is one Python process with one event loop: it parses, validates and tokenises
every request before the engine sees it, and detokenises and streams every token of every stream
after. Its time is CPU time, and on a busy host that CPU is shared: a fixed delay per request
(``profile.frontend``) cannot grow with load, a queue can. Modelled as one FIFO server:

* each request brings pre-processing work ``(a + b·prompt)·k`` seconds, served in arrival order
  (the Lindley recursion: it starts when both it and the server are there);
* streaming is a fluid beside it: ``c·k`` seconds per output token, at the rate output tokens
  arrive (an exponentially weighted mean over ``RATE_WINDOW_S``: in steady state the engine makes
  tokens as fast as requests bring them), takes the share ``ρ = c·k·tokens/s`` of the server, so
  pre-processing runs at ``1 − ρ`` of its speed and each streamed token takes ``c·k / (1 − ρ)``;
* the client's first token comes that request's wait, pre-processing and one streamed token later
  than the engine made it; later tokens are pipelined behind it, so TPOT keeps the engine's pace;
* on a busy host every hop of the request's path (client, API server, engine core) also waits to
  be scheduled: a lognormal delay (``host_delay_*``, measured by ``fleetslo profile`` as the
  client's TTFT beyond vLLM's own at low load), drawn from a seeded generator for the first token
  and again, independently, for the last: a stall that delays the end of a stream and not its
  start stretches the client's TPOT (and one at the start shortens it), as a busy host does.

``a``, ``b``, ``c`` are CPU seconds the API server process spent (``fleetslo profile`` reads them
from ``/proc``), ``k`` the wall seconds per CPU second it got while profiled (its run time plus
its run-queue wait, over its run time): 1 on an idle host, more when it waits for a core.

The engine is not delayed (its arrivals keep their order, so its own queue is the same, shifted):
only the client's timestamps move. Pure arithmetic in simulated time: no I/O, no clock.
"""

from __future__ import annotations

import math
import random

from fleetslo.sim.profile import FrontendQueue

#: Simulated seconds over which the output-token rate is averaged (the streaming load).
RATE_WINDOW_S = 10.0
#: The streaming share is held below this: at 1 the server would never pre-process again, and a
#: client would see its request never start instead of a long but finite wait.
MAX_STREAMING_SHARE = 0.95


class FrontendServer:
    """One API server's queue; ``admit`` is called once per request, in arrival order, and the
    request's delays are read back by index (the last one read when it finishes forgets it)."""

    def __init__(self, queue: FrontendQueue, seed: int = 0) -> None:
        self.per_request = queue.per_request_cpu_s * queue.cpu_stretch
        self.per_prompt = queue.per_prompt_token_cpu_s * queue.cpu_stretch
        self.per_token = queue.per_output_token_cpu_s * queue.cpu_stretch
        self.free_at = -math.inf  # when the pre-processing already queued is done
        self.token_rate = 0.0  # output tokens per second arriving (the streaming load)
        self.rate_at = 0.0
        self.host_median, self.host_sigma = queue.host_delay_median_s, queue.host_delay_sigma
        self._rng = random.Random(seed)
        self._delays: dict[int, tuple[float, float]] = {}

    def streaming_share(self) -> float:
        return min(MAX_STREAMING_SHARE, self.per_token * self.token_rate)

    def admit(self, index: int, now: float, input_tokens: int, output_tokens: int) -> float:
        """Seconds the client's first token comes after the engine's, for a request arriving now."""
        self._count_tokens(now, output_tokens)
        speed = 1.0 - self.streaming_share()
        start = max(now, self.free_at)
        self.free_at = start + (self.per_request + self.per_prompt * input_tokens) / speed
        queued = self.free_at - now + self.per_token / speed
        first = queued + self._host_delay()
        self._delays[index] = (first, queued + self._host_delay())
        return first

    def first_delay(self, index: int) -> float:
        """How much later than the engine's the client sees request ``index``'s first token."""
        return self._delays.get(index, (0.0, 0.0))[0]

    def last_delay(self, index: int) -> float:
        """How much later than the engine's the client sees its last token (and forget it)."""
        return self._delays.pop(index, (0.0, 0.0))[1]

    def _host_delay(self) -> float:
        if self.host_median <= 0:
            return 0.0
        return self.host_median * math.exp(self.host_sigma * self._rng.gauss(0.0, 1.0))

    def _count_tokens(self, now: float, output_tokens: int) -> None:
        """Decay the rate to ``now`` and add this request's tokens (an EWMA of arrivals, per second)."""
        elapsed = max(0.0, now - self.rate_at)
        self.token_rate *= math.exp(-elapsed / RATE_WINDOW_S)
        self.token_rate += output_tokens / RATE_WINDOW_S
        self.rate_at = now
