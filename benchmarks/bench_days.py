"""Days, not hours: two weeks of ServeGen traffic, the policies side by side, per day (issue 19).

ServeGen ``language/m-small`` (43 clients, 14 days, per-window rates, fitted inter-arrival shapes and
length distributions) rate-scaled so its busiest 10 minutes need 60 replicas of
``mi325x-qwen3-235b-fp8-tp4``; replicas 4-60, 5-minute cold start, p90 TTFT 2 s / TPOT 50 ms.

* **The two-week run** (``DAYS_RUN=full``): every policy learns online from day 1; days 8-14 are
  reported, each day: window attainment and replica-hours of fleetslo (seasonal forecast on), of
  fleetslo with the seasonal forecast off (what foresight buys), of every baseline, of the oracle
  (per-minute need at calibrated capacity, scheduled a cold start ahead; no repair rounds: one
  replay per day range) and of the no-foresight frontier (the same need, known as each minute ends,
  +10 %), and the seasonal forecast's error (MAPE of the 5-minute-ahead rate) beside persistence's.
* **The quick run** (default, ``DAYS_RUN=quick``): day 8 alone, the forecaster bootstrapped from
  days 1-7 as the controller bootstraps it from Prometheus at start.
* **A known event** (always, seconds): a x2.5 launch at 18:00 on a synthetic day curve, fleetslo
  told of it, seasonal but not told, and seasonal off: attainment in the launch's first 15 minutes.

Fleets are simulated with representative replicas (``fleetslo.sim.sampled``, one in ``DAYS_SAMPLE``,
default 4): a fleet of 60 runs as 15. Replica-hours are scaled back; ``benchmarks sim`` measures
what that costs in accuracy. ``DAYS_SAMPLE=1`` runs the exact fleet (hours of CPU for two weeks).
``DAYS_POLICIES=fleetslo,oracle`` runs only the policies named (comma-separated, as printed).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fleetslo.policy.forecast import KnownEvent, SeasonalForecast, mape_by_day
from fleetslo.policy.oracle import OraclePolicy
from fleetslo.policy.registry import make_policy
from fleetslo.sim import oracle
from fleetslo.sim.longrun import DAY_S, StreamResult, simulate_stream
from fleetslo.sim.profile import builtin_profile
from fleetslo.sim.result import JUDGE_WINDOW_S
from fleetslo.sim.runner import SimConfig
from fleetslo.sim.sampled import every_mth, sampled_spec
from fleetslo.sim.scenario import Scenario, make_spec
from fleetslo.sim.traces import lognormal_tokens
from fleetslo.sim.traces.multiday import MultiDayCurve, Surge
from fleetslo.sim.traces.multiday import arrivals as multiday_arrivals
from fleetslo.sim.traces.servegen import ServeGenData, arrivals, load_servegen, window_rates
from fleetslo.sim.workload import Request, Trace

ROOT = Path(__file__).resolve().parent.parent
FOLDER = "servegen/language/m-small"
CANDIDATES = (
    ROOT / "traces" / FOLDER,
    ROOT.parent / "shared" / "traces" / FOLDER,
    ROOT.parents[1] / "shared" / "traces" / FOLDER,
)
PROFILE = "mi325x-qwen3-235b-fp8-tp4"
MIN_REPLICAS, MAX_REPLICAS, COLD_START_S = 4, 60, 300.0
BASELINES = ("hpa-util", "hpa-running", "keda-waiting", "llmd-slo")
HORIZON_S = COLD_START_S
#: Five clients of m-small have no length data: they get a chat-like mix.
FALLBACK_TOKENS = lognormal_tokens(600, 150, 1.0, max_tokens=32_000)


@dataclass(frozen=True)
class Setup:
    data: ServeGenData
    rate_scale: float
    m: int
    start_s: float
    end_s: float
    scenario: Scenario  # the spec (sampled), profile and warm fleet every policy starts from
    capacity: oracle.Capacity


def stream(setup: Setup) -> Iterator[Request]:
    """The run's arrivals, times from its start, one in ``m`` kept."""
    raw = arrivals(
        setup.data,
        rate_scale=setup.rate_scale,
        start_s=setup.start_s,
        end_s=setup.end_s,
        fallback=FALLBACK_TOKENS,
    )
    return every_mth(raw, setup.m)


def build(days: tuple[float, float], m: int) -> Setup:
    folder = next((p for p in CANDIDATES if p.is_dir()), None)
    if folder is None:
        raise SystemExit(f"ServeGen data not found (looked in {', '.join(map(str, CANDIDATES))})")
    data = load_servegen(folder)
    profile = builtin_profile(PROFILE)
    spec = make_spec(profile, min_replicas=MIN_REPLICAS, max_replicas=MAX_REPLICAS, cold_start_s=COLD_START_S)
    rates = window_rates(data)
    peak_at, peak = max(rates, key=lambda p: p[1])
    # capacity on an hour of the busiest traffic's mix, at a trial scale, on the exact fleet
    trial_scale = 0.01
    sample = Trace(
        tuple(
            arrivals(
                data, rate_scale=trial_scale, start_s=peak_at, end_s=peak_at + 1200, fallback=FALLBACK_TOKENS
            )
        )
    )
    calib = Scenario(sample, "servegen calibration", profile, spec, initial_replicas=MAX_REPLICAS)
    capacity = oracle.calibrate(calib)
    scale = MAX_REPLICAS * capacity.requests_per_s / peak
    sampled = sampled_spec(spec, m)
    sc = Scenario(
        Trace(()), f"servegen m-small ×{scale:.4f}", profile, sampled, initial_replicas=sampled.replicas.min
    )
    return Setup(data, scale, m, days[0] * DAY_S, days[1] * DAY_S, sc, capacity)


@dataclass
class Minutes:
    arrivals: list[int]
    prefill: list[int]
    output: list[int]


def minutes(setup: Setup) -> Minutes:
    """Per-minute arrivals and tokens of the run (one pass over the stream, no engine)."""
    n = math.ceil((setup.end_s - setup.start_s) / JUDGE_WINDOW_S)
    out = Minutes([0] * n, [0] * n, [0] * n)
    for r in stream(setup):
        k = min(n - 1, int(r.arrival_s // JUDGE_WINDOW_S))
        out.arrivals[k] += 1
        out.prefill[k] += r.input_tokens
        out.output[k] += r.output_tokens
    return out


def need(setup: Setup, mins: Minutes) -> list[int]:
    """The oracle's per-minute replica need (as ``oracle.minute_need``), of the sampled fleet."""
    cap = setup.capacity
    bounds = setup.scenario.spec.replicas
    out = []
    for a, p, o in zip(mins.arrivals, mins.prefill, mins.output, strict=True):
        per_s = 1.0 / JUDGE_WINDOW_S
        wanted = per_s * max(
            a / cap.requests_per_s, p / cap.prefill_tokens_per_s, o / cap.output_tokens_per_s
        )
        out.append(max(bounds.min, min(bounds.max, math.ceil(wanted - 1e-9))))
    return out


def forecast_errors(
    mins: Minutes, start_s: float, history: list[tuple[float, float]]
) -> dict[int, tuple[float | None, float | None]]:
    """Per day: MAPE (%) of the seasonal forecast of the rate 5 minutes ahead, and of persistence."""
    rates = [a / JUDGE_WINDOW_S for a in mins.arrivals]
    steps = int(HORIZON_S // JUDGE_WINDOW_S)
    forecast = SeasonalForecast().observe_many(history)
    seasonal, persistence = [], []
    for k, rate in enumerate(rates):
        t = start_s + k * JUDGE_WINDOW_S
        forecast = forecast.observe(t, rate)
        if k + steps < len(rates):
            actual = rates[k + steps]
            target = t + HORIZON_S
            predicted = forecast.ahead(t, HORIZON_S)
            if predicted is not None:
                seasonal.append((target, predicted, actual))
            persistence.append((target, rate, actual))
    s = {d.day: d.mape_pct for d in mape_by_day(seasonal)}
    p = {d.day: d.mape_pct for d in mape_by_day(persistence)}
    return {day: (s.get(day), p.get(day)) for day in sorted(p)}


class _Foresight:
    """Wraps a policy: its state's seasonal forecast is off, or bootstrapped from history."""

    def __init__(
        self, inner: Any, *, off: bool = False, history: list[tuple[float, float]] | None = None
    ) -> None:
        self.inner, self.off, self.history = inner, off, history or []
        self.name, self.interval = inner.name, inner.interval

    def initial_state(self, spec: Any) -> Any:
        state = self.inner.initial_state(spec)
        forecast = getattr(state, "forecast", None)
        if forecast is None or not hasattr(forecast, "seasonal"):
            return state  # a policy without a seasonal forecast: nothing to switch
        if self.off:
            return replace(state, forecast=replace(forecast, seasonal=None))
        return replace(state, forecast=forecast.bootstrapped(self.history)) if self.history else state

    def decide(self, obs: Any, state: Any, spec: Any, now: float) -> Any:
        return self.inner.decide(obs, state, spec, now)


def policies(setup: Setup, need_: list[int], history: list[tuple[float, float]]) -> dict[str, Any]:
    spec = setup.scenario.spec
    lead = spec.replicas.cold_start + OraclePolicy.interval
    out: dict[str, Any] = {
        "fleetslo": _Foresight(make_policy("fleetslo", spec), history=history),
        "fleetslo-no-seasonal": _Foresight(make_policy("fleetslo", spec), off=True),
        "oracle": OraclePolicy(oracle.schedule_for(need_, lead, spec.replicas.min)),
        "no-foresight +10%": OraclePolicy(
            oracle.no_foresight_schedule(need_, 0.1, 5, setup.scenario.initial_replicas, spec.replicas.min)
        ),
    }
    for name in BASELINES:
        out[name] = make_policy(name, spec)
    return out


def run(setup: Setup, policy: Any) -> StreamResult:
    return simulate_stream(stream(setup), policy, replace(setup.scenario, trace=Trace(())).config())


def report(label: str, setup: Setup, days: range, history: list[tuple[float, float]]) -> dict[str, Any]:
    started = time.perf_counter()
    mins = minutes(setup)
    need_ = need(setup, mins)
    scenario = replace(setup.scenario, initial_replicas=max(need_[:10]))
    setup = replace(setup, scenario=scenario)
    errors = forecast_errors(mins, 0.0, history)
    results: dict[str, StreamResult] = {}
    wanted = os.environ.get("DAYS_POLICIES")
    chosen = policies(setup, need_, history)
    if wanted:
        chosen = {n: p for n, p in chosen.items() if n in wanted.split(",")}
    for name, policy in chosen.items():
        t = time.perf_counter()
        results[name] = run(setup, policy)
        print(
            f"  {name}: {results[name].requests:,} requests simulated in {time.perf_counter() - t:.0f} s",
            flush=True,
        )
    first_day = int(setup.start_s // DAY_S)
    print(
        f"\n{label}: ServeGen m-small ×{setup.rate_scale:.4f}, one replica in {setup.m} simulated, "
        f"capacity {setup.capacity.requests_per_s:.2f} req/s per replica"
    )
    names = list(results)
    print("day | " + " | ".join(f"{n} att / rh" for n in names) + " | MAPE seasonal / persistence %")
    table = []
    for d in days:
        row: dict[str, Any] = {"day": first_day + d + 1}
        cells = []
        for n in names:
            day = results[n].day(d)
            rh = day["replica_hours"] * setup.m
            row[n] = {"window_attainment": day["window_attainment"], "replica_hours": rh}
            att = day["window_attainment"]
            cells.append(f"{att:.3f} / {rh:.0f}" if att is not None else f"- / {rh:.0f}")
        seasonal, persistence = errors.get(d, (None, None))
        row["mape_seasonal_pct"], row["mape_persistence_pct"] = seasonal, persistence
        mape = (
            f"{seasonal:.1f} / {persistence:.1f}" if seasonal is not None and persistence is not None else "-"
        )
        print(f"{first_day + d + 1} | " + " | ".join(cells) + f" | {mape}")
        table.append(row)
    print(f"({time.perf_counter() - started:.0f} s)")
    return {"label": label, "rows": table}


def quick(m: int) -> dict[str, Any]:
    """Day 8 alone, the forecaster bootstrapped from days 1-7 (the Prometheus bootstrap)."""
    setup = build((7, 8), m)
    # what a metrics store holds: the arrival rate of the days before, here each 10-minute window's
    history = [
        (t - 7 * DAY_S + j * JUDGE_WINDOW_S, rate / m)
        for t, rate in window_rates(setup.data, setup.rate_scale)
        if t < 7 * DAY_S
        for j in range(10)
    ]
    return report("quick: day 8, bootstrapped from days 1-7", setup, range(1), history)


def full(m: int) -> dict[str, Any]:
    setup = build((0, 14), m)
    return report("two weeks, learning online from day 1 (days 8-14 shown)", setup, range(7, 14), [])


class _Told(_Foresight):
    """The seasonal forecast bootstrapped and told of a known event."""

    def __init__(self, inner: Any, history: list[tuple[float, float]], event: KnownEvent) -> None:
        super().__init__(inner, history=history)
        self.event = event

    def initial_state(self, spec: Any) -> Any:
        state = super().initial_state(spec)
        forecast = getattr(state, "forecast", None)
        if forecast is None or getattr(forecast, "seasonal", None) is None:
            return state
        return replace(
            state, forecast=replace(forecast, seasonal=forecast.seasonal.with_events([self.event]))
        )


def launch() -> dict[str, Any]:
    """A launch at 18:00 of day 2 (x2.5 for an hour) on a synthetic day curve: told, seasonal only, off."""
    profile = builtin_profile(PROFILE)
    spec = make_spec(profile, min_replicas=2, max_replicas=MAX_REPLICAS, cold_start_s=COLD_START_S)
    at = DAY_S + 18 * 3600.0
    curve = MultiDayCurve(12.0, amplitude=0.3, surges=(Surge(at, 3600.0, 2.5),))
    start, end = at - 5400.0, at + 3600.0
    history = [(t - start, curve.rate(t)) for t in (k * 60.0 for k in range(int(start / 60)))]
    event = KnownEvent(at - start, at - start + 3600.0, 2.5)

    def requests() -> Iterator[Request]:
        for r in multiday_arrivals(curve, end, FALLBACK_TOKENS, seed=3):
            if r.arrival_s >= start:
                yield replace(r, arrival_s=r.arrival_s - start)

    variants = {
        "told of the launch": _Told(make_policy("fleetslo", spec), history, event),
        "seasonal, not told": _Foresight(make_policy("fleetslo", spec), history=history),
        "seasonal off": _Foresight(make_policy("fleetslo", spec), off=True),
    }
    print("\nknown event: a x2.5 launch at 18:00 (synthetic day curve, exact fleet)")
    out = {}
    for name, policy in variants.items():
        result = simulate_stream(requests(), policy, SimConfig(spec, profile, 4))
        first = [w for w in result.windows if at - start <= w.start_s < at - start + 900]
        met = sum(1 for w in first if w.met) / max(1, len(first))
        out[name] = {"attainment": result.window_attainment(), "first_15_min": met,
                     "replica_hours": result.replica_seconds / 3600}  # fmt: skip
        print(
            f"  {name}: window attainment {result.window_attainment():.3f}, first 15 minutes after launch "
            f"{met:.3f}, {result.replica_seconds / 3600:.1f} replica-hours"
        )
    return out


def main() -> dict[str, Any]:
    m = int(os.environ.get("DAYS_SAMPLE", "4"))
    which = os.environ.get("DAYS_RUN", "quick")
    out = {"launch": launch(), "quick": quick(m)}
    if which == "full":
        out["full"] = full(m)
    return out


if __name__ == "__main__":
    main()
