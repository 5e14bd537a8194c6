"""Simulated requests per second: the exact engine, representative replicas, and a billion a day.

1. **Exact engine** (issue 4): the Azure 2023 conversation trace at 20x its rate, static fleet; target
   at least 50,000 requests per second of wall time on one core. The warm fleet is sized first (not
   timed), then the replay is timed end to end (build requests, simulate, judge) over a few rounds;
   the best round is reported, as scheduler noise on a shared machine only ever slows a round down.
   Side by side: with the cyclic garbage collector paused (``records.quiet_gc``, what
   ``fleetslo simulate`` does) and running.
2. **Representative replicas** (issue 19): the same trace at 60x (1.16 M requests) on a static fleet
   of ``LARGE_FLEET`` replicas, replayed exactly (``runner`` + ``result``, once) and with one replica
   in m simulated (``fleetslo.sim.sampled``: every m-th request to N/m replicas, streamed, windowed
   judging; timed from the scaled trace, sampling included: that is the start-up); target at least
   200,000 requests of the full trace per second on one core with window attainment, request
   attainment and replica-hours within 1 % of the exact run. The trace is one hour: 59 judged
   windows, so one window that flips is 1.7 % of window attainment. Each row therefore also gives
   how many windows flipped and the mean relative error of the windows' p90 TTFT and TPOT against
   the exact run's same windows, which is not quantised. Each m runs twice: from the trace scaled in
   memory, and from the same 1.16 M requests read from a CSV file (what start-up costs a real trace of
   that size: parsing every row).
3. **Fleet scale** (issue 19): the reference customer's day, about 11,600 requests per second (a
   billion a day) on thousands of replicas, replayed as representative replicas: Poisson arrivals
   with the conversation trace's token mix at 11,600/m per second for ``SCALE_MINUTES`` of simulated
   time on the fleet that carries it, for each m in ``SCALE_MS``; a whole day's time is extrapolated
   from that (the engine's cost is linear in requests at a steady load). The check where both are
   feasible: the first m's simulated fleet (k replicas at 11,600/m per second) against an exact
   fleet ``CHECK_X`` times larger at ``CHECK_X`` times the rate: if k replicas already stand for
   ``CHECK_X``·k, the per-replica picture no longer depends on the fleet's size.

The machine is shared: every figure is given per CPU-second (the one-core measure) and per
wall-second, with the load average at the start of each part. ``BENCH_SIM_LARGE=0`` runs part 1
only. ``python -m benchmarks sim``.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from fleetslo.core.spec import FleetSLOSpec
from fleetslo.policy.baselines import StaticPolicy
from fleetslo.sim.longrun import StreamResult, simulate_stream
from fleetslo.sim.profile import builtin_profile
from fleetslo.sim.records import quiet_gc
from fleetslo.sim.result_types import SimResult, WindowResult
from fleetslo.sim.sampled import every_mth, sampled_spec
from fleetslo.sim.scenario import Scenario, initial_replicas, make_spec, run_policy
from fleetslo.sim.traces import load_trace, poisson, rate_scale, resampled_tokens
from fleetslo.sim.workload import Trace

ROOT = Path(__file__).resolve().parent.parent
TRACE = "azure2023/AzureLLMInferenceTrace_conv.csv"
CANDIDATES = (ROOT / "traces" / TRACE, ROOT.parent / "shared" / "traces" / TRACE)
PROFILE = "mi325x-qwen3-235b-fp8-tp4"
TARGET = 50_000.0
LARGE_TARGET = 200_000.0
LARGE_SCALE = 60.0
LARGE_FLEET = 104  # a multiple of every m below, so the sampled fleets are exactly N/m
SAMPLES = (8, 4)
SCALE_RATE = 11_600.0
SCALE_MS = (64, 128)
SCALE_MINUTES = 10.0
CHECK_X = 4


def _trace_path() -> Path:
    return next((p for p in CANDIDATES if p.exists()), CANDIDATES[0])


def _load() -> str:
    return "load average {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def _timed(run: Callable[[], Any], gc: AbstractContextManager[Any]) -> tuple[Any, float, float]:
    """``run()``'s value, wall seconds and CPU seconds (inside ``gc``)."""
    with gc:
        started, cpu = time.perf_counter(), time.process_time()
        value = run()
        return value, time.perf_counter() - started, time.process_time() - cpu


def scenario(scale: float = 20.0) -> Scenario:
    path = _trace_path()
    trace = rate_scale(load_trace(path), scale)
    profile = builtin_profile(PROFILE)
    spec = make_spec(profile, max_replicas=200)
    base = Scenario(trace, f"{path.name} x{scale:g}", profile, spec, initial_replicas=1)
    return Scenario(trace, base.trace_name, profile, spec, initial_replicas=initial_replicas(base))


def exact_engine(rounds: int = 3) -> dict[str, Any]:
    """Part 1: best of ``rounds`` with the collector paused, beside one round with it running."""
    sc = scenario()
    n = sc.initial_replicas
    print(f"{sc.trace_name}: {len(sc.trace):,} requests on {n} x {PROFILE} ({_load()})")
    out: dict[str, Any] = {"requests": float(len(sc.trace)), "replicas": float(n), "target": TARGET}
    for label, tries, gc in (("gc paused", rounds, quiet_gc), ("gc running", 1, nullcontext)):
        best = best_cpu = float("inf")
        for _ in range(tries):
            result, wall, cpu = _timed(lambda: run_policy(sc, StaticPolicy(n)), gc())
            best, best_cpu = min(best, wall), min(best_cpu, cpu)
        rate, per_cpu = len(sc.trace) / best, len(sc.trace) / best_cpu
        out[label] = {"wall_seconds": best, "requests_per_second": rate, "requests_per_cpu_second": per_cpu}
        print(
            f"  {label}: {result.sim_seconds:.0f} s simulated in {best:.2f} s wall ({best_cpu:.2f} CPU s) -> "
            f"{rate:,.0f} requests/s, {per_cpu:,.0f} per CPU-second "
            f"(target >= {TARGET:,.0f} per CPU-second: {'met' if per_cpu >= TARGET else 'MISSED'})"
        )
    return out


def large(samples: tuple[int, ...] = SAMPLES) -> dict[str, Any]:
    """Part 2: exact against representative replicas on 1.16 M requests (see the module docstring)."""
    base = load_trace(_trace_path())
    profile = builtin_profile(PROFILE)
    spec = make_spec(profile, max_replicas=400)
    print(f"representative replicas ({_load()}):")

    def exact_run() -> tuple[int, SimResult]:
        trace = rate_scale(base, LARGE_SCALE)
        sc = Scenario(trace, f"x{LARGE_SCALE:g}", profile, spec, initial_replicas=LARGE_FLEET)
        return len(trace), run_policy(sc, StaticPolicy(LARGE_FLEET))

    (n, exact), wall, cpu = _timed(exact_run, quiet_gc())
    reference = {
        "window_attainment": exact.window_attainment,
        "request_attainment": exact.request_attainment,
        "replica_hours": exact.replica_hours,
    }
    rows: dict[str, Any] = {"exact": {**_speed(n, wall, cpu), **reference}}
    print(
        f"  exact: {n:,} requests on {LARGE_FLEET} replicas in {wall:.1f} s wall ({cpu:.1f} CPU s): "
        f"{n / cpu:,.0f} per CPU-second; window attainment {exact.window_attainment:.4f} "
        f"({len(_judged(exact.windows))} windows), request attainment {exact.request_attainment:.4f}, "
        f"{exact.replica_hours:.2f} replica-hours"
    )
    with tempfile.TemporaryDirectory() as folder:
        # the same 1.16 M requests as a plain CSV file: start-up as a real trace of that size has it
        path = Path(folder) / "conv-x60.csv"
        _write_plain(path, rate_scale(base, LARGE_SCALE))
        sources: dict[str, Callable[[], Trace]] = {
            "scaled in memory": lambda: rate_scale(base, LARGE_SCALE),
            f"read from a {n:,}-row CSV": lambda: load_trace(path),
        }
        for source, load in sources.items():
            for m in samples:
                rows[f"1 in {m}, {source}"] = _sampled_row(m, source, load, spec=spec, exact=exact, n=n)
    return rows


def _sampled_row(
    m: int, source: str, load: Callable[[], Trace], *, spec: FleetSLOSpec, exact: SimResult, n: int
) -> dict[str, Any]:
    """One representative-replica run of the ×60 trace, timed from ``load()``, against ``exact``."""
    profile = builtin_profile(PROFILE)
    k = LARGE_FLEET // m

    def sampled_run() -> StreamResult:
        trace = load()
        small = Scenario(trace, f"x{LARGE_SCALE:g}", profile, sampled_spec(spec, m), initial_replicas=k)
        return simulate_stream(every_mth(trace.requests, m), StaticPolicy(k), small.config())

    result, wall, cpu = _timed(sampled_run, quiet_gc())
    row = {
        **_speed(n, wall, cpu),
        "window_attainment": result.window_attainment(),
        "request_attainment": result.met_requests / result.requests,
        "replica_hours": result.replica_seconds / 3600 * m,
        **_window_errors(exact.windows, result.windows),
    }
    reference = {
        "window_attainment": exact.window_attainment,
        "request_attainment": exact.request_attainment,
        "replica_hours": exact.replica_hours,
    }
    errors = {key: _relative(row[key], ref) for key, ref in reference.items()}
    ok = row["requests_per_cpu_second"] >= LARGE_TARGET and all(abs(e) < 0.01 for e in errors.values())
    print(
        f"  1 replica in {m} ({k} simulated), {source}: {wall:.1f} s wall ({cpu:.1f} CPU s) -> "
        f"{row['requests_per_cpu_second']:,.0f} per CPU-second "
        f"({row['requests_per_second']:,.0f} per wall-second); "
        f"window attainment {row['window_attainment']:.4f} ({errors['window_attainment']:+.2%}, "
        f"{row['windows_flipped']} of {row['windows']} windows flipped), "
        f"request attainment {row['request_attainment']:.4f} ({errors['request_attainment']:+.2%}), "
        f"replica-hours {row['replica_hours']:.2f} ({errors['replica_hours']:+.2%}); "
        f"windows' p90 TTFT {_pct(row['p90_ttft_error'])}, "
        f"p90 TPOT {_pct(row['p90_tpot_error'])} off on average "
        f"(target >= {LARGE_TARGET:,.0f} per CPU-second within 1 %: {'met' if ok else 'MISSED'})"
    )
    return row


def _write_plain(path: Path, trace: Trace) -> None:
    """``arrival_s,input_tokens,output_tokens`` with every float written exactly (repr)."""
    with path.open("w", encoding="utf-8") as out:
        out.write("arrival_s,input_tokens,output_tokens\n")
        out.writelines(f"{r.arrival_s!r},{r.input_tokens},{r.output_tokens}\n" for r in trace.requests)


def fleet_scale(
    rate: float = SCALE_RATE, ms: tuple[int, ...] = SCALE_MS, minutes: float = SCALE_MINUTES
) -> dict[str, Any]:
    """Part 3: slices of the billion-a-day fleet, simulated as one replica in m (see the docstring)."""
    profile = builtin_profile(PROFILE)
    tokens = resampled_tokens(load_trace(_trace_path()))
    spec = make_spec(profile, max_replicas=10_000)
    duration = minutes * 60
    out: dict[str, Any] = {}
    print(f"fleet scale, {rate:,.0f} requests/s ({_load()}):")
    sizes: dict[int, int] = {}
    for m in ms:
        probe = poisson(rate / m, 300.0, tokens, seed=1)
        name = f"poisson {rate:g}/s / {m}"
        k = sizes[m] = initial_replicas(
            Scenario(probe, name, profile, sampled_spec(spec, m), initial_replicas=1)
        )

        def replay(m: int = m, k: int = k, name: str = name) -> StreamResult:
            trace = poisson(rate / m, duration, tokens, seed=2)
            config = Scenario(trace, name, profile, sampled_spec(spec, m), initial_replicas=k).config()
            return simulate_stream(iter(trace.requests), StaticPolicy(k), config)

        result, wall, cpu = _timed(replay, quiet_gc())
        day_wall, day_cpu = wall * 86_400.0 / duration, cpu * 86_400.0 / duration
        out[f"1 in {m}"] = {
            "replicas": k * m,
            "simulated": k,
            "requests_simulated": result.requests,
            "wall_seconds": wall,
            "cpu_seconds": cpu,
            "day_wall_seconds": day_wall,
            "day_cpu_seconds": day_cpu,
            "window_attainment": result.window_attainment(),
        }
        print(
            f"  1 in {m}: {k * m:,} replicas ({k} simulated); {minutes:g} simulated minutes "
            f"({result.requests:,} requests simulated, {result.requests * m:,} represented) "
            f"in {wall:.1f} s wall "
            f"({cpu:.1f} CPU s), window attainment {result.window_attainment():.4f} -> one day in about "
            f"{day_cpu / 60:.0f} CPU-minutes ({day_wall / 60:.0f} wall-minutes here)"
        )
    out["check"] = _size_check(rate / ms[0], sizes[ms[0]], tokens, duration)
    return out


def _size_check(rate: float, k: int, tokens: Any, duration: float) -> dict[str, Any]:
    """k replicas at ``rate`` against ``CHECK_X``·k replicas at ``CHECK_X``·rate, both exact."""
    profile = builtin_profile(PROFILE)
    spec = make_spec(profile, max_replicas=10_000)
    rows: dict[str, Any] = {}
    for x in (1, CHECK_X):
        trace = poisson(rate * x, duration, tokens, seed=2)
        sc = Scenario(trace, f"poisson {rate * x:g}/s", profile, spec, initial_replicas=k * x)
        result, _, cpu = _timed(lambda sc=sc, n=k * x: run_policy(sc, StaticPolicy(n)), quiet_gc())
        rows[f"{k * x} replicas"] = row = {
            "window_attainment": result.window_attainment,
            "request_attainment": result.request_attainment,
            "p90_ttft_s": result.p90_ttft_s,
            "p90_tpot_s": result.p90_tpot_s,
            "replica_hours_per_replica": result.replica_hours / (k * x),
            "cpu_seconds": cpu,
        }
        print(
            f"  check: {k * x} replicas at {rate * x:,.0f} requests/s, exact ({cpu:.1f} CPU s): "
            f"window attainment {_num(row['window_attainment'])}, "
            f"request attainment {_num(row['request_attainment'])}, "
            f"p90 TTFT {_num(row['p90_ttft_s'])} s, p90 TPOT {_num(row['p90_tpot_s'])} s"
        )
    return rows


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _speed(n: int, wall: float, cpu: float) -> dict[str, float]:
    return {
        "wall_seconds": wall,
        "cpu_seconds": cpu,
        "requests_per_second": n / wall,
        "requests_per_cpu_second": n / cpu,
    }


def _judged(windows: tuple[WindowResult, ...] | list[WindowResult]) -> dict[float, WindowResult]:
    return {w.start_s: w for w in windows if w.met is not None}


def _window_errors(exact: tuple[WindowResult, ...], sampled: list[WindowResult]) -> dict[str, Any]:
    """Windows judged differently, and the mean relative error of the windows' p90s (same minutes)."""
    ours, theirs = _judged(sampled), _judged(exact)
    common = sorted(set(ours) & set(theirs))
    flipped = sum(ours[t].met != theirs[t].met for t in common)

    def mean_error(pairs: Iterator[tuple[float | None, float | None]]) -> float | None:
        errors = [abs(a / b - 1) for a, b in pairs if a is not None and b]
        return sum(errors) / len(errors) if errors else None  # no window to compare: missing

    return {
        "windows": len(theirs),
        "windows_flipped": flipped + len(set(theirs) ^ set(ours)),
        "p90_ttft_error": mean_error((ours[t].p90_ttft_s, theirs[t].p90_ttft_s) for t in common),
        "p90_tpot_error": mean_error((ours[t].p90_tpot_s, theirs[t].p90_tpot_s) for t in common),
    }


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _relative(value: float | None, reference: float | None) -> float:
    if value is None or reference is None or reference == 0:
        return float("inf")
    return (value - reference) / reference


def main(rounds: int = 3) -> dict[str, Any]:
    out = {"exact": exact_engine(rounds)}
    if os.environ.get("BENCH_SIM_LARGE", "1") != "0":
        out["large"] = large()
        out["fleet_scale"] = fleet_scale()
    return out


if __name__ == "__main__":
    main()
