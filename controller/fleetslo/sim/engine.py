"""One vLLM replica: continuous batching with chunked prefill, simulated event by event.

The scheduler follows vLLM V1: every step first gives each decoding sequence one token, then
spends the rest of ``max_num_batched_tokens`` on prefill chunks, running requests first, then
waiting ones in FIFO order while the admission cap (the live batch limit, at most
``max_num_seqs``) and the KV cache allow. When the KV cache cannot hold the next decode step,
the most recently admitted request is preempted: its KV is freed and it goes back to the front of
the queue to recompute its prompt and the tokens it had generated (vLLM's recompute mode).

**Event-driven.** Steps that contain prefill are simulated one at a time. A run of pure decode
steps keeps the same batch until the next sequence finishes, so the engine plans the whole run
at once: step ``i`` of the run takes ``a + b·i`` seconds (the KV read grows by one token per
sequence per step), and finish times, token counts and inter-token histograms follow in closed
form. An arrival cuts a run short at the next step boundary; a scrape only looks inside it.

Time is virtual and passed in. This module must not route, scale, or know about other replicas.
"""

from __future__ import annotations

import random
from bisect import bisect_left
from collections import deque
from heapq import heappop, heappush

from fleetslo.sim.frontend import FrontendServer
from fleetslo.sim.profile import EngineProfile
from fleetslo.sim.records import SimRequest
from fleetslo.sim.runs import noise_sampler, steps_within
from fleetslo.sim.vllm_metrics import EngineMetrics

_UNBOUNDED = 1 << 62

#: A finish-heap entry: (finish step, request index, request epoch, request).
_Entry = tuple[int, int, int, SimRequest]


class Engine:
    """A replica's scheduler state, its planned run of steps, and its vLLM metrics."""

    def __init__(
        self,
        profile: EngineProfile,
        metrics: EngineMetrics,
        *,
        limit: int | None = None,
        rng: random.Random | None = None,
        max_run_steps: int | None = None,
        request_histograms: bool = True,
    ) -> None:
        st = profile.step_time
        self.c0, self.c_seq, self.c_pf = st.overhead_s, st.per_seq_s, st.per_prefill_token_s
        self.c_kv, self.c_attn = st.per_kv_token_s, st.per_attention_token2_s
        self.max_seqs = profile.max_num_seqs
        self.max_tokens = profile.max_num_batched_tokens
        self.kv_cap = profile.kv_capacity_tokens
        self.limit = self.max_seqs if limit is None else max(1, min(limit, self.max_seqs))
        self.metrics = metrics
        # The API server's time, which vLLM's page does not see: fixed delays to the first token and each
        # later one (profile.frontend), or a queue growing with load (frontend_queue, seeded per replica).
        fe = profile.frontend if (fq := profile.frontend_queue) is None else None
        self.fe_request = fe.per_request_s if fe else 0.0
        self.fe_prompt = fe.per_prompt_token_s if fe else 0.0
        self.fe_output = fe.per_output_token_s if fe else 0.0
        self.fe_queue = FrontendServer(fq, (rng or random.Random(0)).getrandbits(63)) if fq else None
        self.frontend = fe is not None or fq is not None  # else the client's times are the engine's
        self._noise = noise_sampler(st.noise_cv, rng)
        self.noisy = st.noise_cv > 0
        #: Forces runs of at most this many steps (the step-by-step reference in tests).
        self.max_run_steps = max_run_steps or _UNBOUNDED
        self.clock = 0.0  # end of the last applied step: the start of the next one
        self.step = 0  # steps executed; every step gives each decoding sequence one token
        self.busy = 0.0  # seconds spent executing steps (the GPU-busy time)
        self.waiting: deque[SimRequest] = deque()
        self.prefilling: list[SimRequest] = []
        self.running: dict[int, SimRequest] = {}  # admission order: the last one is preempted first
        self.heap: list[_Entry] = []
        self.n_dec = 0
        self.ctx_base = 0  # Σ(target − join_step) over decoding sequences: Σctx = ctx_base + n_dec·step
        self.prefill_kv = 0  # KV tokens held by sequences still prefilling
        self.outstanding = 0  # requests submitted and not finished (running + waiting)
        # the planned run: run_left steps, the next taking run_a seconds, each later one run_b more
        self.run_left = 0
        self.run_a = 0.0
        self.run_b = 0.0
        self.run_end = 0.0
        self.chunks: list[tuple[SimRequest, int]] = []
        #: When set, every finished request is appended here (closed-loop drivers need to know).
        self.finished: list[SimRequest] | None = None
        #: False: leave the queue/prefill/e2e/decode/inference histograms alone (a fleet whose scrapes
        #: never read them saves five observations per request; TTFT, ITL and TPOT are always kept).
        self.request_histograms = request_histograms

    # ---------------------------------------------------------------------------------- inputs

    def submit(self, req: SimRequest, now: float) -> None:
        """A request reaches this replica at ``now`` (the caller has synced the engine to ``now``)."""
        req.engine_arrival = now
        if self.fe_queue is not None:
            self.fe_queue.admit(req.index, now, req.input_tokens, req.output_tokens)
        self.waiting.append(req)
        self.outstanding += 1

    def set_limit(self, limit: int) -> None:
        """The live batch limit: applies from the next step; running sequences are never evicted."""
        self.limit = max(1, min(limit, self.max_seqs))

    def can_admit(self) -> bool:
        """Whether a request that arrives now could join the batch at the next step boundary."""
        return len(self.running) < self.limit

    # -------------------------------------------------------------------------------- stepping

    def start(self, now: float) -> bool:
        """Leave idleness at ``now`` and plan the next run; False if there is nothing to do."""
        if self.run_left:
            return True
        self.clock = max(self.clock, now)
        return self._plan()

    def sync(self, now: float) -> None:
        """Apply the steps of the current run that end by ``now`` (the last one stays planned)."""
        if self.run_left <= 1 or now <= self.clock:
            return
        n = min(steps_within(self.run_a, self.run_b, now - self.clock), self.run_left - 1)
        if n > 0:
            self._decode(n)

    def truncate(self) -> None:
        """Stop the current run after the step in progress (call ``sync`` first)."""
        if self.run_left > 1:
            self.run_left = 1
            self.run_end = self.clock + self.run_a

    def cut(self, now: float) -> None:
        """Stop the current run after the step in progress at ``now`` (``sync`` then ``truncate``)."""
        self.sync(now)
        self.truncate()

    def complete(self) -> bool:
        """Finish the planned run and plan the next; False when the engine goes idle."""
        if self.chunks:
            self._mixed_step()
        elif self.run_left:
            self._decode(self.run_left)
        return self._plan()

    # -------------------------------------------------------------------------------- planning

    def _plan(self) -> bool:
        """Schedule the next step (or run of decode steps) starting at ``self.clock``."""
        while True:
            running = self.running
            if not running and not self.waiting:
                self.run_left = 0
                return False
            n, step = self.n_dec, self.step
            free = self.kv_cap - self.ctx_base - n * step - self.prefill_kv
            if free < n:
                while free < self.n_dec and running:
                    free += self._preempt_last()
                n = self.n_dec
            # Fast path: nothing to prefill and nobody admissible (the common case between arrivals).
            admissible = self.waiting and len(running) < self.limit
            if (self.prefilling or admissible) and self._schedule_prefill(free):
                return True
            if n:
                self._plan_decode_run(n, step, free)
                return True
            if not running:
                # Waiting requests that cannot get any KV (only possible with a tiny cache).
                self.run_left = 0
                return False
            # Only partial prefills that cannot get KV: evict one so the others can progress.
            self._preempt_last()

    def _schedule_prefill(self, free: int) -> bool:
        n_dec = self.n_dec
        budget = self.max_tokens - n_dec
        chunks: list[tuple[SimRequest, int]] = []
        # the step's prefill tokens and attention work, summed chunk by chunk as they are chosen
        prefill = attention = 0.0
        for req in self.prefilling:
            if budget <= 0 or free <= 0:
                break
            chunk = min(req.target - req.computed, budget, free)
            chunks.append((req, chunk))
            budget -= chunk
            free -= chunk
            prefill += chunk
            attention += chunk * (req.computed + chunk / 2)
        cap = self.limit
        waiting, running = self.waiting, self.running
        while waiting and len(running) < cap and budget > 0 and free > 0:
            req = waiting.popleft()
            running[req.index] = req
            self.prefilling.append(req)
            if req.scheduled is None:
                req.scheduled = self.clock
            chunk = min(req.target, budget, free)
            chunks.append((req, chunk))
            budget -= chunk
            free -= chunk
            prefill += chunk
            attention += chunk * (req.computed + chunk / 2)
        if not chunks:
            return False
        # Σ chunk == prefill exactly (whole numbers far below 2**53)
        self.prefill_kv += int(prefill)
        ctx = self.ctx_base + n_dec * self.step
        a = (
            self.c0
            + self.c_seq * (n_dec + len(chunks))
            + self.c_pf * prefill
            + self.c_kv * ctx
            + self.c_attn * attention
        )
        self.chunks = chunks
        self.run_left, self.run_a, self.run_b = 1, a * self._noise(1) if self.noisy else a, 0.0
        self.run_end = self.clock + self.run_a
        return True

    def _plan_decode_run(self, n: int, step: int, free: int) -> None:
        """Plan decode steps for the ``n`` decoders until the next one finishes (or the KV runs out)."""
        heap = self.heap
        top = heap[0]
        while top[2] != top[3].epoch:
            heappop(heap)  # a preempted sequence's stale entry
            top = heap[0]
        steps = min(top[0] - step, free // n, self.max_run_steps)
        f = self._noise(steps) if self.noisy else 1.0
        self.run_a = a = (self.c0 + self.c_seq * n + self.c_kv * (self.ctx_base + n * step)) * f
        self.run_b = b = self.c_kv * n * f
        self.run_left = steps
        # run_time, inlined: this runs once per planned run
        self.run_end = self.clock + steps * a + b * steps * (steps - 1) / 2

    # ------------------------------------------------------------------------------- execution

    def _decode(self, n: int) -> None:
        """Apply ``n`` steps of the planned pure-decode run."""
        a, b, batch = self.run_a, self.run_b, self.n_dec
        t0, step0 = self.clock, self.step
        dt = n * a + b * n * (n - 1) / 2  # _run_time, inlined (hot path)
        m = self.metrics
        itl = m.itl
        bounds = itl.bounds
        lo = bisect_left(bounds, a)
        if b <= 0 or lo == bisect_left(bounds, a + b * (n - 1)):
            # Hist.observe_linear's one-bucket case, inlined: the same count and the same sum
            itl.counts[lo] += n * batch
            itl.sum += batch * dt
        else:
            itl.observe_linear(a, b, n, batch)
        m.generation_tokens += n * batch
        self.clock = t0 + dt
        self.busy += dt
        self.step = step = step0 + n
        self.run_a = a + b * n
        self.run_left -= n
        heap, running = self.heap, self.running
        while heap and heap[0][0] <= step:
            fs, _, epoch, req = heappop(heap)
            if epoch == req.epoch:
                k = fs - step0
                # _finish_decoder, inlined (once per request)
                del running[req.index]
                self.n_dec -= 1
                self.ctx_base -= req.target - req.join_step
                req.join_step = -1
                self._record_finish(req, t0 + k * a + b * k * (k - 1) / 2)

    def _mixed_step(self) -> None:
        """Apply the planned step that carries prefill chunks (and one token per decoder)."""
        dt = self.run_a
        m = self.metrics
        if self.n_dec:
            # itl.observe_linear(dt, 0.0, 1, n_dec), inlined: one gap of dt for every decoder
            itl = m.itl
            itl.counts[bisect_left(itl.bounds, dt)] += self.n_dec
            itl.sum += self.n_dec * (dt + 0.0)
            m.generation_tokens += self.n_dec
        self.clock += dt
        self.busy += dt
        self.step += 1
        self.run_left = 0
        heap = self.heap
        while heap and heap[0][0] <= self.step:
            _, _, epoch, req = heappop(heap)
            if epoch == req.epoch:
                self._finish_decoder(req, self.clock)
        chunks, self.chunks = self.chunks, []
        completed = False
        for req, chunk in chunks:
            req.computed += chunk
            if req.computed >= req.target:
                self._prefill_done(req)
                completed = True
        if completed:
            self.prefilling = [r for r in self.prefilling if r.computed < r.target]

    def _prefill_done(self, req: SimRequest) -> None:
        """The last prefill chunk ran: the request emits a token and starts decoding (or is done)."""
        now, m = self.clock, self.metrics
        self.prefill_kv -= req.target
        m.generation_tokens += 1
        if req.first_token is None:
            req.first_token = now + self._frontend_first(req) if self.frontend else now
            ttft = m.ttft  # Hist.observe, inlined (once per request)
            value = now - req.engine_arrival
            ttft.counts[bisect_left(ttft.bounds, value)] += 1
            ttft.sum += value
            if self.request_histograms:
                m.queue.observe((req.scheduled or now) - req.engine_arrival)
                m.prefill.observe(now - (req.scheduled or now))
            m.prompt_tokens += req.input_tokens
        remaining = req.output_tokens - req.emitted - 1
        if remaining <= 0:
            del self.running[req.index]
            self._record_finish(req, now)
            return
        req.join_step = step = self.step
        self.n_dec += 1
        self.ctx_base += req.target - step
        heappush(self.heap, (step + remaining, req.index, req.epoch, req))

    def _finish_decoder(self, req: SimRequest, when: float) -> None:
        del self.running[req.index]
        self.n_dec -= 1
        self.ctx_base -= req.target - req.join_step
        req.join_step = -1
        self._record_finish(req, when)

    def _frontend_first(self, req: SimRequest) -> float:
        """The front end's delay before the client sees the first token."""
        queue = self.fe_queue
        return queue.first_delay(req.index) if queue else self.fe_request + self.fe_prompt * req.input_tokens

    def _record_finish(self, req: SimRequest, when: float) -> None:
        if self.frontend:
            shift = self._frontend_first(req)
            last = self.fe_queue.last_delay(req.index) if self.fe_queue is not None else shift
            req.finish = when + last + self.fe_output * (req.output_tokens - 1)
            first = req.first_token - shift if req.first_token is not None else when
        else:
            # No front end: the client sees the engine's own times (the shifts would all be 0.0).
            req.finish = when
            first = req.first_token if req.first_token is not None else when
        self.outstanding -= 1
        if self.finished is not None:
            self.finished.append(req)
        m = self.metrics
        m.success += 1
        if self.request_histograms:
            scheduled = req.scheduled if req.scheduled is not None else when
            m.e2e.observe(when - req.engine_arrival)
            m.decode.observe(when - first)
            m.inference.observe(when - scheduled)
        # vLLM observes 0 for a one-token request (stats.py: "if num_generation_tokens - 1 > 0 else 0").
        n = req.output_tokens - 1
        value = (when - first) / n if n > 0 else 0.0
        tpot = m.tpot  # Hist.observe, inlined (once per request)
        tpot.counts[bisect_left(tpot.bounds, value)] += 1
        tpot.sum += value

    def _preempt_last(self) -> int:
        """Preempt the most recently admitted running request; the KV tokens it freed."""
        _, req = self.running.popitem()
        m = self.metrics
        m.preemptions += 1
        if req.join_step < 0:
            freed = req.computed
            self.prefill_kv -= freed
            self.prefilling.remove(req)
        else:
            decoded = self.step - req.join_step
            freed = req.target + decoded
            self.n_dec -= 1
            self.ctx_base -= req.target - req.join_step
            req.emitted += 1 + decoded
            req.epoch += 1
            req.join_step = -1
        req.target = req.input_tokens + req.emitted
        req.computed = 0
        req.preemptions += 1
        self.waiting.appendleft(req)
        return freed

    # -------------------------------------------------------------------------------- reporting

    def kv_used(self) -> int:
        return self.ctx_base + self.n_dec * self.step + self.prefill_kv

    def refresh_gauges(self) -> EngineMetrics:
        """Set the gauges to the state after the last applied step and return the metrics."""
        m = self.metrics
        m.running = len(self.running)
        m.waiting = len(self.waiting)
        m.kv_usage = self.kv_used() / self.kv_cap
        return m
