"""Drawn workloads (issue 13): traffic made by a seeded draw, not by hand, to test the defaults on
shapes nobody chose.

Every set before this one (the suite, the held-out set and its variants, the probes, the fresh
shapes) was written by a person who had seen the policy at work, and each was used to choose or
check a default. Here a seed draws every part of a workload from the ranges below, and the first
``COUNT`` seeds are the set; none was looked at before the defaults it is run against were fixed.

* **Arrivals and lengths**: the Azure 2023 conversation or code trace, Mooncake's long prompts
  (looped), a ServeGen hour (a random day and hour of m-small or m-mid, or the reasoning model's
  day, played 1-6 times faster), or a synthetic stream (Poisson or gamma gaps of CV 1.5-4) with
  log-normal lengths (median prompt 64-16k tokens, median answer 16-2k, sigma 0.5-1.5).
* **Lengths reshaped** (traces only): prompts and answers each x 2^U(-2, 2.5) half of the time.
* **Rate curve** over the hour: flat; a step up x1.5-4 or down to x0.25-0.6 at 10-35 min; a ramp
  x2-4 over 5-30 min; a swing (a cosine of period 8-40 min, amplitude 0.3-0.8); a spike x1.5-3
  for 3-15 min; or two of those spikes.
* **Targets and fleet**: p90 TPOT 35-100 ms; p90 TTFT 0.75-8 s, doubled until one replica can
  meet the pair at all; cold start 1-10 minutes; engine profile MI325X TP4 (most), TP8 or MI300X.
* **Scale**: the trace rate-scaled so that its busiest minute needs 6-60 replicas at the oracle's
  calibrated capacity (one calibration at scale 1, the need being proportional to the rate), and
  at most ``MAX_REQUESTS`` requests in the hour (a smaller fleet where requests are very cheap).

``BENCH_POLICY_SET=drawn`` runs them; ``DRAWN_COUNT`` changes how many (default ``COUNT``) and
``DRAWN_FIRST`` the first seed (default 0). Seeds 0-19 were run and traced in stop 34 and a change
was chosen on them, and 20-39 run once after it, so none is unseen any more: a later change is
best checked on seeds nobody has looked at (``DRAWN_FIRST=40`` and up), then reported on all.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fleetslo.sim import oracle
from fleetslo.sim.compare import SimulateOptions, build_scenario
from fleetslo.sim.profile import builtin_profile
from fleetslo.sim.scenario import Scenario
from fleetslo.sim.traces import bursty, load_trace, lognormal_tokens, poisson, rate_scale
from fleetslo.sim.workload import Trace

from benchmarks.heldout import MOONCAKE, looped, servegen_span
from benchmarks.workloads import CODE, CONV, TRACES, Workload, lengths, shaped

COUNT = 20
MAX_REQUESTS = 300_000
#: Requests an hour at the source's own rate below which the draw is taken again.
_FEWEST = 1_000
_HOUR = 3600.0
_DAY = 86_400.0
#: ServeGen's language classes serve 1,200-1,800 requests/s: x0.01 is a fleet's share to start from.
_UNIT = 0.01
#: Profiles and their odds: the reference deployment most of the time.
_PROFILES = ("mi325x-qwen3-235b-fp8-tp4",) * 3 + ("mi325x-qwen3-235b-fp8-tp8", "mi300x-qwen3-235b-fp8-tp4")
_COLD_STARTS = (60.0, 120.0, 180.0, 300.0, 420.0, 600.0)


@dataclass(frozen=True)
class Draw:
    """What a seed drew, before the rate is scaled to the fleet size."""

    seed: int
    source: str
    #: The arrivals and lengths at a rate factor (1: the source's own rate, ``_UNIT`` for ServeGen).
    base: Callable[[float], Trace]
    curve: str
    shape: Callable[[float], float]
    step_at_s: float | None
    ttft_s: float
    tpot_s: float
    cold_start_s: float
    profile: str
    peak_need: int

    @property
    def kind(self) -> str:
        if self.step_at_s is not None:
            return "step"
        return "smooth" if self.curve == "flat" and "gamma" not in self.source else "bursty"


def _source(rng: random.Random) -> tuple[str, Callable[[float], Trace]]:
    pick = rng.choice(("conv", "conv", "code", "mooncake", "servegen", "servegen", "synthetic", "synthetic"))
    if pick in ("conv", "code", "mooncake"):
        path = {"conv": CONV, "code": CODE, "mooncake": MOONCAKE}[pick]
        prompt = output = 1.0
        if rng.random() < 0.5:
            prompt, output = 2 ** rng.uniform(-2, 2.5), 2 ** rng.uniform(-2, 2.5)
        times = 4 if pick == "mooncake" else 1
        seed = rng.randrange(1000)

        def trace(factor: float) -> Trace:
            base = load_trace(TRACES / path)
            base = looped(base, times) if times > 1 else base
            base = lengths(base, prompt, output) if (prompt, output) != (1.0, 1.0) else base
            return rate_scale(base, factor, seed=seed)

        label = f"azure-{pick}" if pick != "mooncake" else "mooncake"
        if (prompt, output) != (1.0, 1.0):
            label = f"{label} (prompts x{prompt:.2g}, answers x{output:.2g})"
        return label, trace
    if pick == "servegen":
        kind = rng.choice(("language/m-small", "language/m-mid", "reason/deepseek-r1"))
        day = 0 if kind.startswith("reason") else rng.randrange(14)
        unit = 1.0 if kind.startswith("reason") else _UNIT
        compress = rng.choice((1.0, 2.0, 4.0, 6.0))
        start = day * _DAY + rng.randrange(24 - math.ceil(compress)) * _HOUR
        label = (
            f"ServeGen {kind.split('/')[1]} day {day + 1} {start % _DAY / _HOUR:02.0f}:00 x{compress:g} speed"
        )
        return label, lambda f: servegen_span(kind, start, compress * _HOUR, unit * f, compress=compress)
    prompt, output = 2 ** rng.uniform(6, 14), 2 ** rng.uniform(4, 11)
    sigma, cv = rng.uniform(0.5, 1.5), rng.choice((1.0, 1.0, rng.uniform(1.5, 4.0)))
    tokens = lognormal_tokens(prompt, output, sigma, max_tokens=30_000)
    seed = rng.randrange(1000)
    label = f"{'Poisson' if cv == 1.0 else f'gamma CV {cv:.1f}'}, prompt ~{prompt:.0f}, answer ~{output:.0f}"
    if cv == 1.0:
        return label, lambda f: poisson(10.0 * f, _HOUR, tokens, seed=seed)
    return label, lambda f: bursty(10.0 * f, _HOUR, cv, tokens, seed=seed)


def _curve(rng: random.Random) -> tuple[str, Callable[[float], float], float | None]:
    pick = rng.choice(("flat", "flat", "step up", "step down", "ramp", "swing", "spike", "spikes"))
    if pick == "step up":
        at, f = rng.uniform(600, 1500), rng.uniform(1.5, 4.0)
        return f"x{f:.1f} step at {at / 60:.0f} min", lambda t: f if t >= at else 1.0, at
    if pick == "step down":
        at, f = rng.uniform(900, 2100), rng.uniform(0.25, 0.6)
        return f"down to x{f:.2f} at {at / 60:.0f} min", lambda t: f if t >= at else 1.0, None
    if pick == "ramp":
        at, span, f = rng.uniform(300, 1200), rng.uniform(300, 1800), rng.uniform(2.0, 4.0)
        return (
            f"x{f:.1f} ramp from {at / 60:.0f} min over {span / 60:.0f}",
            lambda t: 1 + (f - 1) * min(1.0, max(0.0, (t - at) / span)),
            at,
        )
    if pick == "swing":
        period, amp = rng.uniform(480, 2400), rng.uniform(0.3, 0.8)
        phase = rng.uniform(0, period)
        return (
            f"swing +-{amp:.0%} every {period / 60:.0f} min",
            lambda t: 1 + amp * math.cos(2 * math.pi * (t - phase) / period),
            None,
        )
    if pick in ("spike", "spikes"):
        spikes = [(rng.uniform(600, 2400), rng.uniform(180, 900), rng.uniform(1.5, 3.0))]
        if pick == "spikes":
            spikes.append(
                (rng.uniform(spikes[0][0] + spikes[0][1] + 300, 3300), rng.uniform(180, 900), spikes[0][2])
            )
        text = ", ".join(f"x{f:.1f} for {d / 60:.0f} min at {a / 60:.0f}" for a, d, f in spikes)
        return text, lambda t: max([1.0] + [f for a, d, f in spikes if a <= t < a + d]), None
    return "flat", lambda t: 1.0, None


def reshaped(trace: Trace, shape: Callable[[float], float], *, seed: int) -> Trace:
    """``trace`` with its rate multiplied by ``shape(t)`` (``workloads.shaped``), the curve's top
    read on a one-second grid over the trace."""
    top = max(shape(float(t)) for t in range(math.ceil(trace.duration_s) + 1))
    return Trace(shaped(trace, shape, top, seed=seed).requests, f"{trace.source}, reshaped")


def draw(seed: int, attempt: int = 0) -> Draw:
    """What ``seed`` draws; ``attempt`` > 0 draws again (``sized``: a ServeGen hour with no traffic)."""
    rng = random.Random(f"drawn-{seed}" if attempt == 0 else f"drawn-{seed}-{attempt}")
    source, base = _source(rng)
    curve, shape, step_at = _curve(rng)
    return Draw(
        seed=seed, source=source, base=base, curve=curve, shape=shape, step_at_s=step_at,
        ttft_s=rng.choice((0.75, 1.0, 2.0, 3.0, 5.0, 8.0)), tpot_s=rng.choice((0.035, 0.05, 0.075, 0.1)),
        cold_start_s=rng.choice(_COLD_STARTS), profile=rng.choice(_PROFILES), peak_need=rng.randint(6, 60),
    )  # fmt: skip


def _scenario(d: Draw, trace: Trace, ttft_s: float) -> Scenario:
    options = SimulateOptions(ttft_s=ttft_s, tpot_s=d.tpot_s, max_replicas=96, cold_start_s=d.cold_start_s)
    return build_scenario(trace, f"drawn {d.seed}", builtin_profile(d.profile), options)


def sized(d: Draw, attempt: int = 0) -> tuple[Workload, float]:
    """The drawn workload at the rate whose busiest minute needs ``peak_need`` replicas, and that
    rate scale. The TTFT target is doubled until one replica meets the pair at some rate."""

    def built(factor: float) -> Trace:
        one_hour = tuple(r for r in d.base(factor).requests if r.arrival_s < _HOUR)
        return reshaped(Trace(one_hour, d.source), d.shape, seed=d.seed)

    shaped = built(1.0)
    if len(shaped) < _FEWEST:  # ServeGen's data has hours without traffic: draw again
        return sized(draw(d.seed, attempt + 1), attempt + 1)
    ttft = d.ttft_s
    for _ in range(5):
        sc = _scenario(d, shaped, ttft)
        capacity = oracle.calibrate(sc)
        if capacity.requests_per_s > 1e-3:
            break
        ttft *= 2
    busiest = max(oracle.minute_need(sc, capacity)) if capacity.requests_per_s > 1e-3 else 1
    # A fleet of cheap requests (short prompts and answers on TP8) needs hundreds a second per
    # replica: the rate is capped at MAX_REQUESTS an hour to keep the set quick, a smaller fleet.
    scale = min(d.peak_need / max(busiest, 1), MAX_REQUESTS / max(len(shaped), 1))
    name = (
        f"drawn {d.seed}: {d.source}, {d.curve}, x{scale:.3g} "
        f"({ttft:g}s / {d.tpot_s * 1000:.0f}ms, cold {d.cold_start_s:.0f}s, {d.profile.split('-')[0]}"
        f"{' TP8' if 'tp8' in d.profile else ''})"
    )

    def build() -> Trace:
        return built(scale)

    return Workload(
        name, build, d.kind, ttft_s=ttft, tpot_s=d.tpot_s, step_at_s=d.step_at_s,
        profile=d.profile, cold_start_s=d.cold_start_s,
    ), scale  # fmt: skip


def drawn(
    count: int | None = None, words: Sequence[str] = (), first: int | None = None
) -> tuple[Workload, ...]:
    """``count`` drawn workloads (``DRAWN_COUNT``, default ``COUNT``) from seed ``first``
    (``DRAWN_FIRST``, default 0), sized. Words of the form ``drawn N:`` (``BENCH_POLICY_CASES``)
    keep those seeds before any is sized."""
    n = int(os.environ.get("DRAWN_COUNT", COUNT)) if count is None else count
    start = int(os.environ.get("DRAWN_FIRST", "0")) if first is None else first
    seeds: Sequence[int] = range(start, start + n)
    named = {w for w in words if w.startswith("drawn ") and w.endswith(":")}
    if named:
        seeds = [s for s in seeds if f"drawn {s}:" in named]
    return tuple(sized(draw(seed))[0] for seed in seeds)
