"""Days, not hours: two weeks of ServeGen traffic, the policies side by side, per day (issue 19).

ServeGen ``language/m-small`` (43 clients, 14 days, per-window rates, fitted inter-arrival shapes and
length distributions) rate-scaled so its busiest 10 minutes need 60 replicas of
``mi325x-qwen3-235b-fp8-tp4``; replicas 4-60, 5-minute cold start, p90 TTFT 2 s / TPOT 50 ms.

* **Forecasters** (always, seconds; ``days_forecast``): one 10-minute window ahead on the
  aggregate rate, days 8-14: persistence, seasonal naive, Holt-Winters, ARIMA and fleetslo's
  seasonal forecast, per day; its band's calibration and cost; the autocorrelation that bounds them.
* **A known event** (always, two minutes): a x2.5 and a x6 launch at 18:00 on a synthetic day
  curve, fleetslo told of it (the FleetSLO's ``forecast.events``), seasonal but not told, and
  seasonal off: attainment in the launch's first 15 minutes.
* **The quick run** (default, ``DAYS_RUN=quick``): day 8; **the two-week run** (``DAYS_RUN=full``):
  days 8-14 (``days_runs`` says how the work is cut): fleetslo (its default, the seasonal point
  forecast; with the forecast's band; forecast off: what foresight buys over the capacity model
  alone), learning online from day 1 in the two-week run and bootstrapped from days 1-7 (as the
  controller bootstraps from Prometheus) in the quick run and in "restarted nightly"; the oracle
  (per-minute need at calibrated capacity, scheduled a cold start ahead; no repair rounds), the
  no-foresight frontier (the same need, known as each minute ends, the largest of the last 5
  minutes +10 %; and swept: the last minute's alone, +0-30 %) and every baseline; per
  day, with the seasonal forecast's error one cold start ahead on the simulated stream (one-minute
  rates) beside persistence's.

Every policy is made as ``fleetslo simulate`` makes it: the FleetSLO names its engine profile, so
fleetslo's model starts from the profile's step costs. Fleets are simulated with representative
replicas (``fleetslo.sim.sampled``, one in ``DAYS_SAMPLE``, default 2): a fleet of 60 runs as 30,
4-60 as 2-30, inside the range ``benchmarks sim`` validated (one in 8, four times faster, rounds
every size up to 8 real replicas: the oracle +13 % replica-hours and +0.010 attainment over the two
weeks). Replica-hours are scaled back; ``benchmarks sim`` measures what that costs in accuracy.
Arrivals are generated once per day and cached (``days_stream``, ``DAYS_CACHE``).
``DAYS_POLICIES=fleetslo,oracle`` runs only the policies named (comma-separated, as printed);
``DAYS_WORKERS`` (2) processes run at once; results go to ``DAYS_OUT`` (the temp folder) as
``fleetslo-days-<run>-1in<m>.json`` and, day by day, ``.units.jsonl``; ``DAYS_RUN=table`` prints the
two-week table from whatever days have finished.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fleetslo.core.spec import Forecast, ForecastEvent
from fleetslo.policy.forecast import SeasonalForecast, mape_by_day
from fleetslo.sim import oracle
from fleetslo.sim.longrun import DAY_S, simulate_stream
from fleetslo.sim.profile import builtin_profile
from fleetslo.sim.result import JUDGE_WINDOW_S
from fleetslo.sim.runner import SimConfig
from fleetslo.sim.sampled import sampled_spec
from fleetslo.sim.scenario import Scenario, make_spec
from fleetslo.sim.traces import lognormal_tokens
from fleetslo.sim.traces.multiday import MultiDayCurve, Surge
from fleetslo.sim.traces.multiday import arrivals as multiday_arrivals
from fleetslo.sim.traces.servegen import arrivals, load_servegen, window_rates
from fleetslo.sim.workload import Request, Trace

from benchmarks import days_forecast, days_runs, days_stream

ROOT = Path(__file__).resolve().parent.parent
FOLDER = "servegen/language/m-small"
CANDIDATES = (
    ROOT / "traces" / FOLDER,
    ROOT.parent / "shared" / "traces" / FOLDER,
    ROOT.parents[1] / "shared" / "traces" / FOLDER,
)
PROFILE = "mi325x-qwen3-235b-fp8-tp4"
MIN_REPLICAS, MAX_REPLICAS, COLD_START_S = 4, 60, 300.0
HORIZON_S = COLD_START_S
#: Five clients of m-small have no length data: they get a chat-like mix.
FALLBACK_TOKENS = lognormal_tokens(600, 150, 1.0, max_tokens=32_000)


def build_folder() -> Path:
    folder = next((p for p in CANDIDATES if p.is_dir()), None)
    if folder is None:
        raise SystemExit(f"ServeGen data not found (looked in {', '.join(map(str, CANDIDATES))})")
    return folder


def build(m: int) -> days_runs.Plan:
    """The sampled spec, the calibrated capacity and the rate scale; the days' arrivals cached."""
    data = load_servegen(build_folder())
    profile = builtin_profile(PROFILE)
    spec = make_spec(profile, min_replicas=MIN_REPLICAS, max_replicas=MAX_REPLICAS, cold_start_s=COLD_START_S)
    peak_at, peak = max(window_rates(data), key=lambda p: p[1])
    # capacity on 20 minutes of the busiest traffic's mix, at a trial scale, on the exact fleet
    sample = Trace(tuple(
        arrivals(data, rate_scale=0.01, start_s=peak_at, end_s=peak_at + 1200, fallback=FALLBACK_TOKENS)
    ))  # fmt: skip
    calib = Scenario(sample, "servegen calibration", profile, spec, initial_replicas=MAX_REPLICAS)
    capacity = oracle.calibrate(calib)
    scale = MAX_REPLICAS * capacity.requests_per_s / peak
    sampled = sampled_spec(spec, m)
    sc = Scenario(Trace(()), f"servegen m-small x{scale:.4f}", profile, sampled, initial_replicas=1)
    cache = days_stream.cache_folder(scale, m)
    for day in range(14):
        started = time.perf_counter()
        if not days_stream.day_file(cache, day).exists():
            days_stream.ensure_day(data, cache, day, rate_scale=scale, m=m, fallback=FALLBACK_TOKENS)
            print(f"  day {day + 1}: arrivals generated in {time.perf_counter() - started:.0f} s", flush=True)
    return days_runs.Plan(cache, sc, capacity, m, ())


def stream_forecast_errors(plan: days_runs.Plan, days: tuple[int, ...]) -> dict[int, dict[str, Any]]:
    """Per day: MAPE (%) of the seasonal forecast of the request rate one cold start ahead (one-minute
    rates of the simulated stream, learned online from day 1), of persistence, and how often the
    rate came in above the band's top."""
    rates: list[float] = []
    for day in range(days[-1] + 1):
        rates += [a / JUDGE_WINDOW_S for a in days_runs.minute_counts(plan.folder, day)[0]]
    steps = int(HORIZON_S // JUDGE_WINDOW_S)
    forecast = SeasonalForecast()
    seasonal, persistence, above = [], [], {}
    for k, rate in enumerate(rates[:-steps]):
        t = k * JUDGE_WINDOW_S
        forecast = forecast.observe(t, rate)
        actual, target = rates[k + steps], t + HORIZON_S
        if int(target // DAY_S) not in days:
            continue
        predicted, top = forecast.ahead(t, HORIZON_S), forecast.upper(t, HORIZON_S)
        if predicted is not None:
            seasonal.append((target, predicted, actual))
        if top is not None:
            above.setdefault(int(target // DAY_S), []).append(actual > top)
        persistence.append((target, rate, actual))
    s = {d.day: d.mape_pct for d in mape_by_day(seasonal)}
    p = {d.day: d.mape_pct for d in mape_by_day(persistence)}
    return {
        day: {"seasonal": s.get(day), "persistence": p.get(day),
              "above_band": sum(above[day]) / len(above[day]) if above.get(day) else None}
        for day in days
    }  # fmt: skip


def report(
    label: str, plan: days_runs.Plan, policies: list[str], out: Path, *, run: bool = True
) -> dict[str, Any]:
    """Run every unit (``run``) or read what has finished, and print the per-day table."""
    started = time.perf_counter()
    units_file = out.with_suffix(".units.jsonl")
    errors_file = out.with_suffix(".forecast.json")
    if run:
        errors = stream_forecast_errors(plan, plan.days)
        errors_file.write_text(json.dumps(errors))
        units_file.unlink(missing_ok=True)
        workers = int(os.environ.get("DAYS_WORKERS", "2"))
        days_runs.run_all(plan, policies, units_file, workers)
    else:
        errors = {int(k): v for k, v in json.loads(errors_file.read_text()).items()}
    rows = days_runs.read_rows(units_file)
    table, total = print_table(label, plan, policies, rows, errors)
    print(f"({time.perf_counter() - started:.0f} s)")
    result = {"label": label, "m": plan.m, "rows": table, "total": total, "forecast": errors}
    out.write_text(json.dumps(result, indent=1))
    return result


def print_table(
    label: str, plan: days_runs.Plan, policies: list[str], rows: list[dict[str, Any]],
    errors: dict[int, dict[str, Any]],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:  # fmt: skip
    """The per-day table and, over several days, the benchmark's row for all of them (``totals``)."""
    by = {(r["policy"], r["day"]): r for r in rows}
    print(
        f"\n{label}: one replica in {plan.m} simulated, capacity {plan.capacity.requests_per_s:.2f} req/s "
        "per replica; per day: window attainment / replica-hours; forecast MAPE % seasonal / persistence"
    )
    print("day | " + " | ".join(policies) + " | MAPE s / p | above band")
    table = []
    for d in plan.days:
        cells, row = [], {"day": d + 1}
        for name in policies:
            r = by.get((name, d + 1))
            row[name] = r
            cells.append(
                "not run" if r is None else f"{_fmt(r['window_attainment'], 3)} / {r['replica_hours']:.0f}"
            )
        e = errors.get(d, {})
        row["forecast"] = e
        print(f"{d + 1} | " + " | ".join(cells) + f" | {_fmt(e.get('seasonal'), 1)} / "
              f"{_fmt(e.get('persistence'), 1)} | {_fmt(e.get('above_band'), 3)}")  # fmt: skip
        table.append(row)
    days = [d + 1 for d in plan.days]
    total = days_runs.totals(rows, policies, days)
    if len(days) > 1:
        cells = []
        for name in policies:
            t = total.get(name)
            ratio = "" if t is None or t["vs_oracle"] is None else f" ({t['vs_oracle']:.2f}x)"
            figures = "-" if t is None else f"{_fmt(t['window_attainment'], 3)} / {t['replica_hours']:.0f}"
            cells.append(figures + ratio)
        note = "(mean of the days' attainment; replica-hours summed)"
        print(f"{days[0]}-{days[-1]} | " + " | ".join(cells) + f" | {note}")
    return table, total


def _fmt(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _policies() -> list[str]:
    every = [
        *days_runs.FLEETSLO_VARIANTS,
        *days_runs.FRONTIERS,
        *days_runs.FRONTIER_SWEEP,
        *days_runs.BASELINES,
    ]
    wanted = os.environ.get("DAYS_POLICIES")
    return [p for p in every if p in wanted.split(",")] if wanted else every


def quick(plan: days_runs.Plan, out: Path) -> dict[str, Any]:
    """Day 8 alone, fleetslo's forecast bootstrapped from days 1-7 (the Prometheus bootstrap)."""
    plan = replace(plan, days=(7,), online_from=None)
    # started at day 8 every fleetslo variant is a restarted controller: "restarted nightly" would
    # repeat "fleetslo"
    policies = [p for p in _policies() if p != days_runs.RESTARTED]
    return report("quick: day 8, bootstrapped from days 1-7", plan, policies, out)


FULL_LABEL = (
    "two weeks, days 8-14: fleetslo learning online from day 1 (one fleet, one controller, days 1-7 "
    "simulated and not reported; 'restarted nightly': a chain of days 8-14, each resuming what the "
    "day before learned, its forecast bootstrapped from every earlier day), the others day by day"
)


def full(plan: days_runs.Plan, out: Path, *, run: bool = True) -> dict[str, Any]:
    plan = replace(plan, days=tuple(range(7, 14)), online_from=0)
    return report(FULL_LABEL, plan, _policies(), out, run=run)


def launch_history(curve: MultiDayCurve, start: float, *, seed: int) -> list[tuple[float, float]]:
    """What the metrics store holds when the launch's controllers start at ``start``: the
    per-minute token rate (prompt + output per second: the unit the controller observes live and
    the Prometheus bootstrap reads) of the requests the same curve brought over ``[0, start)``,
    times from ``start``. Observed, not the curve itself: a noise-free history let one step
    swing the seasonal forecast's candidate weights whole (its errors were all near zero)."""
    return launch_stream(curve, start, start, seed=seed)[0]


def launch_stream(
    curve: MultiDayCurve, start: float, end: float, *, seed: int
) -> tuple[list[tuple[float, float]], list[Request]]:
    """One pass over the curve's arrivals up to ``end``: the metrics store's history before
    ``start`` (``launch_history``) and the requests from ``start`` on, their clock starting there.
    The history is the very stream the replay continues, not a second draw of it."""
    minutes = int(start // JUDGE_WINDOW_S)
    tokens = [0] * minutes
    after: list[Request] = []
    for r in multiday_arrivals(curve, end, FALLBACK_TOKENS, seed=seed):
        if r.arrival_s >= start:
            after.append(replace(r, arrival_s=r.arrival_s - start))
        else:
            tokens[min(minutes - 1, int(r.arrival_s // JUDGE_WINDOW_S))] += r.input_tokens + r.output_tokens
    history = [(k * JUDGE_WINDOW_S - start, n / JUDGE_WINDOW_S) for k, n in enumerate(tokens)]
    return history, after


#: The launches replayed: one the capacity model absorbs unwarned (its margins and the engine's
#: slack at the evening's per-replica load cover x2.5 for a cold start), and one it cannot, where
#: only the warning holds the first minutes.
LAUNCH_FACTORS = (2.5, 6.0)


def launch() -> dict[str, Any]:
    """The known launches, ``LAUNCH_FACTORS``: per factor, each controller's result (``launch_at``)."""
    return {f"x{factor:g}": launch_at(factor) for factor in LAUNCH_FACTORS}


def launch_at(factor: float) -> dict[str, Any]:
    """A launch at 18:00 of day 2 (x``factor`` for an hour) on a synthetic day curve: told, seasonal
    only, off.

    Each controller starts 90 minutes before the launch with the day and a half before in its
    metrics store (``days_runs.Foresight``: the Prometheus bootstrap, nothing learned carried);
    "told" is told as an operator tells it, in the FleetSLO's ``forecast.events``."""
    profile = builtin_profile(PROFILE)
    spec = make_spec(profile, min_replicas=2, max_replicas=MAX_REPLICAS, cold_start_s=COLD_START_S)
    at = DAY_S + 18 * 3600.0
    curve = MultiDayCurve(12.0, amplitude=0.3, surges=(Surge(at, 3600.0, factor),))
    start, end = at - 5400.0, at + 3600.0
    history, requests = launch_stream(curve, start, end, seed=3)
    # The simulation's clock starts at ``start``: the event is written at that offset.
    event_start = datetime.fromtimestamp(at - start, UTC).isoformat().replace("+00:00", "Z")
    told = spec.model_copy(update={"forecast": Forecast(events=(
        ForecastEvent(name="launch", start=event_start, duration=3600.0, rate_factor=factor),
    ))})  # fmt: skip

    def controller(mode: str, fleetslo: Any) -> tuple[days_runs.Foresight, Any]:
        """The controller of one variant and the FleetSLO it runs under (``told`` names the event)."""
        scenario = Scenario(Trace(()), "launch", profile, fleetslo, initial_replicas=4)
        policy = days_runs.named(scenario, "fleetslo")
        return days_runs.Foresight(policy, mode=mode, history=history, learned=None), fleetslo

    variants = {
        "told of the launch": controller("point", told),
        "seasonal, not told": controller("point", spec),
        "seasonal off": controller("off", spec),
    }
    print(f"\nknown event: a x{factor:g} launch at 18:00 (synthetic day curve, exact fleet)")
    out = {}
    for name, (policy, fleetslo) in variants.items():
        result = simulate_stream(iter(requests), policy, SimConfig(fleetslo, profile, 4))
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
    m = int(os.environ.get("DAYS_SAMPLE", "2"))
    which = os.environ.get("DAYS_RUN", "quick")
    out_dir = Path(os.environ.get("DAYS_OUT", tempfile.gettempdir()))
    out_dir.mkdir(parents=True, exist_ok=True)  # a DAYS_OUT not made yet lost a finished run
    if which == "table":  # the two-week run's table from what has finished so far
        return {"full": full(build(m), out_dir / f"fleetslo-days-full-1in{m}.json", run=False)}
    out: dict[str, Any] = {"launch": launch()}
    aggregate = [r for _, r in load_servegen(build_folder()).aggregate_rates()]
    out["forecasters"] = days_forecast.compare(aggregate)
    days_forecast.print_comparison(out["forecasters"])
    plan = build(m)
    if which == "full":
        out["full"] = full(plan, out_dir / f"fleetslo-days-full-1in{m}.json")
    else:
        out["quick"] = quick(plan, out_dir / f"fleetslo-days-quick-1in{m}.json")
    return out


if __name__ == "__main__":
    main()
