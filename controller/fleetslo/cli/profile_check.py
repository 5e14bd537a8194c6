"""``fleetslo profile --validate``: does the fitted profile predict what a client sees at loads the
fit never saw? Open-loop Poisson arrivals at 30, 60 and 90 % of the saturation rate (the median of
the repeated short phases at the sweep's busiest concurrency: one phase swings with the host's other
load), each replayed against the real server and through ``fleetslo simulate``'s code (one
static replica with the new profile) on exactly the same arrivals; p90 TTFT and TPOT side by side.
The result is appended to the profile's provenance, so the file says how good it is; each row of
``FILE.validation.json`` also says how busy the host was (``os.getloadavg()``) and how long the API
server waited for a CPU during that run, against the profile's ``cpu_stretch``.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import yaml

#: Fractions of the measured saturation rate to check at, and the error a pass allows.
FRACTIONS = (0.3, 0.6, 0.9)
TOLERANCE = 0.20


def saturation_rate(results: list[Any]) -> tuple[float, Any, list[float]]:
    """The saturation rate, the phase it was measured with, and every rate it is the median of: the
    repeats (phases ``s<N>-<i>``) if there are any, else the concurrency sweep's best (``c<N>``)."""
    repeats = [r for r in results if r.phase.name.startswith("s") and r.wall_s > 0]
    if repeats:
        rates = [len(r.ok) / r.wall_s for r in repeats]
        return statistics.median(rates), repeats[0].phase, rates
    sweep = [r for r in results if r.phase.name.startswith("c") and r.wall_s > 0]
    best = max(sweep, key=lambda r: len(r.ok) / r.wall_s)
    return len(best.ok) / best.wall_s, best.phase, [len(best.ok) / best.wall_s]


def poisson_arrivals(
    rate: float, seconds: float, prompt: int, output: int, seed: int
) -> list[tuple[float, int, int]]:
    rng, t = random.Random(seed), 0.0
    out: list[tuple[float, int, int]] = []
    while True:
        t += rng.expovariate(rate)
        if t > seconds:
            return out
        out.append((t, prompt, output))


def client_p90s(shots: list[Any]) -> tuple[float | None, float | None, int]:
    from fleetslo.sim.result import exact_quantile

    ttfts = [s.ttft_s for s in shots if s.ok and s.ttft_s is not None]
    tpots = [s.tpot_s for s in shots if s.ok and s.tpot_s is not None]
    return exact_quantile(0.9, ttfts), exact_quantile(0.9, tpots), sum(1 for s in shots if not s.ok)


def failure_reasons(shots: list[Any]) -> dict[str, int]:
    """How many requests failed, by the client's reason (an exception's name, the server's message,
    or a stream that ended before its first token): a timeout under a busy host reads differently
    from an engine error."""
    return dict(Counter(s.error or "no first token" for s in shots if not s.ok))


def simulated_p90s(
    profile_path: str, arrivals: list[tuple[float, int, int]], engine_only: bool = False
) -> tuple[float | None, float | None]:
    """What ``fleetslo simulate --profile FILE --policy static --replicas 1`` says for these arrivals;
    ``engine_only``: with the profile's front end and host delay left out, the latency on vLLM's
    own clock (what its histograms measure), so that a check says which side of the model missed."""
    from fleetslo.cli.common import read_yaml_file
    from fleetslo.sim import compare
    from fleetslo.sim.profile import profile_from_mapping
    from fleetslo.sim.traces import load_trace

    profile = profile_from_mapping(read_yaml_file(profile_path), profile_path)
    if engine_only:
        profile = profile.model_copy(update={"frontend": None, "frontend_queue": None})
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False, encoding="utf-8") as f:
        f.write("arrival_s,input_tokens,output_tokens\n")
        f.writelines(f"{t:.6f},{p},{o}\n" for t, p, o in arrivals)
    try:
        options = compare.SimulateOptions(replicas=1, initial_replicas=1, min_replicas=1, max_replicas=1)
        trace = compare.shape_trace(load_trace(f.name), options)
        scenario = compare.build_scenario(trace, "profile-validation", profile, options)
        result = compare.run_all(scenario, options)[0]
    finally:
        Path(f.name).unlink()
    return result.p90_ttft_s, result.p90_tpot_s


def _engine_counters(bench: Any) -> dict[str, float]:
    from fleetslo.engine.bench import read_counters

    if bench.metrics_url is None:
        return {}
    try:
        return read_counters(httpx.get(bench.metrics_url, timeout=10).text)
    except httpx.HTTPError:
        return {}


def _engine_means(before: dict[str, float], after: dict[str, float]) -> dict[str, float | None]:
    """What the engine itself saw during an open-loop run (where the client's excess comes from)."""
    from fleetslo.engine.bench import counter_deltas
    from fleetslo.sim.host_delay import engine_ttfts
    from fleetslo.sim.result import exact_quantile

    d = counter_deltas(before, after) if before and after else {}

    def ratio(total: str, count: str) -> float | None:
        t, c = d.get(total), d.get(count)
        return t / c if t is not None and c else None

    points = engine_ttfts(d)
    return {
        "engine_p90_ttft_s": exact_quantile(0.9, points) if points else None,
        "engine_mean_ttft_s": ratio(
            "vllm:time_to_first_token_seconds_sum", "vllm:time_to_first_token_seconds_count"
        ),
        "engine_mean_tpot_s": ratio(
            "vllm:request_time_per_output_token_seconds_sum",
            "vllm:request_time_per_output_token_seconds_count",
        ),
        "engine_mean_step_s": ratio("fleetslo_engine_step_seconds", "fleetslo_engine_steps"),
    }


def _profile_stretch(profile_path: str) -> float | None:
    queue = (yaml.safe_load(Path(profile_path).read_text(encoding="utf-8")) or {}).get("frontend_queue")
    return float(queue["cpu_stretch"]) if isinstance(queue, dict) and "cpu_stretch" in queue else None


def _host(
    load_before: tuple[float, ...], before: Any, after: Any, profile_stretch: float | None
) -> dict[str, Any]:
    """How busy the host was during one open-loop run, and what that did to the API server."""
    from fleetslo.engine.bench import difference

    server = difference(before, after)
    stretch = (server.cpu_s + server.wait_s) / server.cpu_s if server and server.cpu_s > 0 else None
    return {
        "loadavg_before": list(load_before),
        "loadavg_after": list(os.getloadavg()),
        "server_cpu_s": server.cpu_s if server else None,
        "server_cpu_stretch": stretch,
        "profile_cpu_stretch": profile_stretch,
    }


def _error(predicted: float | None, measured: float | None) -> float | None:
    return None if predicted is None or not measured else predicted / measured - 1


def validate(bench: Any, profile_path: str, results: list[Any], seconds: float, console: Any) -> bool:
    from rich.table import Table

    rate, phase, _ = saturation_rate(results)
    stretch = _profile_stretch(profile_path)
    table = Table(title=f"open-loop check of {profile_path} (saturation {rate:.2f} req/s)")
    for col in (
        "load",
        "req/s",
        "requests",
        "failed",
        "p90 TTFT client",
        "sim",
        "error",
        "p90 TPOT client",
        "sim",
        "error",
        "vLLM's TTFT error",
    ):
        table.add_column(col)
    rows, passed = [], True
    for i, fraction in enumerate(FRACTIONS):
        arrivals = poisson_arrivals(
            rate * fraction, seconds, phase.prompt_tokens, phase.output_tokens, seed=i
        )
        before, server_before, load_before = _engine_counters(bench), bench.server_times(), os.getloadavg()
        shots = asyncio.run(bench.run_open(arrivals))
        engine = _engine_means(before, _engine_counters(bench))
        host = _host(load_before, server_before, bench.server_times(), stretch)
        ttft, tpot, failed = client_p90s(shots)
        sim_ttft, sim_tpot = simulated_p90s(profile_path, arrivals)
        sim_engine_ttft, _ = simulated_p90s(profile_path, arrivals, engine_only=True)
        e_ttft, e_tpot = _error(sim_ttft, ttft), _error(sim_tpot, tpot)
        passed &= failed == 0 and all(e is not None and abs(e) <= TOLERANCE for e in (e_ttft, e_tpot))
        rows.append(
            {"fraction": fraction, "rate": rate * fraction, "requests": len(arrivals), "failed": failed,
             "errors": failure_reasons(shots),
             "client_p90_ttft_s": ttft, "sim_p90_ttft_s": sim_ttft, "ttft_error": e_ttft,
             "client_p90_tpot_s": tpot, "sim_p90_tpot_s": sim_tpot, "tpot_error": e_tpot,
             "sim_engine_p90_ttft_s": sim_engine_ttft,
             "engine_ttft_error": _error(sim_engine_ttft, engine["engine_p90_ttft_s"]), **engine, **host}
        )  # fmt: skip
        table.add_row(
            f"{fraction:.0%}", f"{rate * fraction:.2f}", str(len(arrivals)), str(failed),
            _ms(ttft), _ms(sim_ttft), _pct(e_ttft), _ms(tpot), _ms(sim_tpot), _pct(e_tpot),
            _pct(rows[-1]["engine_ttft_error"]),
        )  # fmt: skip
    console.print(table)
    _record(profile_path, rows)
    return passed


def _record(profile_path: str, rows: list[dict[str, Any]]) -> None:
    """Into the profile's provenance as a line, and every number beside it as ``FILE.validation.json``."""
    path = Path(profile_path)
    path.with_name(path.name + ".validation.json").write_text(
        json.dumps(rows, indent=2) + "\n", encoding="utf-8"
    )
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    doc.setdefault("provenance", {}).setdefault("measured", []).append(
        "validation (open loop, p90 sim vs client): "
        + "; ".join(
            f"{r['fraction']:.0%} load TTFT {_pct(r['ttft_error'])} (on vLLM's clock "
            f"{_pct(r.get('engine_ttft_error'))}) TPOT {_pct(r['tpot_error'])}"
            for r in rows
        )
    )
    path.write_text(yaml.safe_dump(doc, sort_keys=False, width=110), encoding="utf-8")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.1f} ms"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1%}"
