"""``fleetslo simulate``, ``fleetslo sim-server`` and ``fleetslo demo``: the simulated side."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetslo.cli.common import (
    EXIT_OK,
    prepare_output,
    read_yaml_file,
)
from fleetslo.core.errors import ConfigError

if TYPE_CHECKING:
    from fleetslo.sim.result_types import SimResult

# --------------------------------------------------------------------------------------------
# fleetslo simulate
# --------------------------------------------------------------------------------------------


def _configure_simulate(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--trace",
        required=True,
        help="request trace (Azure/BurstGPT/plain CSV, Mooncake JSONL; gzipped or not)",
    )
    p.add_argument(
        "--profile", default="mi325x-qwen3-235b-fp8-tp4", help="engine profile: a name or a YAML file"
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument("--policy", default="static", help="policy to replay (default static)")
    which.add_argument("--compare", help="comma-separated policies to run on the same trace")
    p.add_argument("--slo-ttft", dest="slo_ttft", default="2s", help="p90 TTFT target (default 2s)")
    p.add_argument("--slo-tpot", dest="slo_tpot", default="50ms", help="p90 TPOT target (default 50ms)")
    p.add_argument("--quantile", type=float, default=0.9, help="quantile both targets apply to (default 0.9)")
    p.add_argument("--min-replicas", dest="min_replicas", type=int, default=1)
    p.add_argument("--max-replicas", dest="max_replicas", type=int, default=100)
    p.add_argument("--replicas", type=int, help="static policy's fixed size (default: the initial fleet)")
    p.add_argument(
        "--initial-replicas",
        dest="initial_replicas",
        type=int,
        help="warm replicas at t=0 (default: smallest static fleet meeting the SLO for 5 minutes)",
    )
    p.add_argument("--cold-start", dest="cold_start", help="replica start-up time (default: the profile's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rate-scale", dest="rate_scale", type=float, help="multiply the arrival rate")
    p.add_argument("--time-scale", dest="time_scale", type=float, help="stretch (>1) or compress (<1) time")
    p.add_argument("--start", help="replay from this offset into the trace, e.g. 10m")
    p.add_argument("--duration", help="replay this long, e.g. 30m")
    p.add_argument("--scrape-interval", dest="scrape_interval", default="15s", help="metrics scrape period")
    p.add_argument("--window", default="60s", help="observation window the policy sees")
    p.add_argument(
        "--policy-option", dest="policy_options", action="append", default=[], metavar="KEY=VALUE",
        help="a policy tunable, repeatable (e.g. headroom=0.2 for fleetslo; each takes those it knows)",
    )  # fmt: skip
    p.add_argument(
        "--sample", type=int, metavar="M",
        help="representative replicas: simulate one replica in M on every M-th request (replica bounds, "
        "--replicas and --initial-replicas divided by M); sizes, costs and counts are scaled back by M "
        "and the result says sample: M",
    )  # fmt: skip
    p.add_argument(
        "--stream", action="store_true",
        help="read the trace as a stream and judge each minute as it ends: days or weeks of traffic in "
        "bounded memory (per-day figures; the oracle without repair rounds; no --report, no p90 over the "
        "whole run)",
    )  # fmt: skip
    p.add_argument(
        "--reorder-s", type=float, metavar="SECONDS",
        help="with --stream: how far (trace seconds) a row may come after one stamped later, for logs "
        "written as requests finish (default 60; a log of answers lasting minutes needs their length)",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--report", help="also write a self-contained HTML report here")
    p.add_argument("--title", help="report title")


def _run_simulate(args: argparse.Namespace) -> int:
    from fleetslo.core.config import parse_duration
    from fleetslo.sim import compare
    from fleetslo.sim.records import quiet_gc
    from fleetslo.sim.traces import load_trace

    def seconds(flag: str, value: str | None) -> float | None:
        try:
            return None if value is None else parse_duration(value)
        except ValueError as exc:
            raise ConfigError(f"--{flag}: {exc}") from None

    profile = load_profile(args.profile)
    options = compare.SimulateOptions(
        policies=compare.parse_policies(args.compare or args.policy),
        ttft_s=seconds("slo-ttft", args.slo_ttft) or 0.0, tpot_s=seconds("slo-tpot", args.slo_tpot) or 0.0,
        quantile=args.quantile, min_replicas=args.min_replicas, max_replicas=args.max_replicas,
        replicas=args.replicas, initial_replicas=args.initial_replicas,
        cold_start_s=seconds("cold-start", args.cold_start), seed=args.seed, rate_scale=args.rate_scale,
        time_scale=args.time_scale, start_s=seconds("start", args.start),
        duration_s=seconds("duration", args.duration),
        scrape_interval_s=seconds("scrape-interval", args.scrape_interval) or 15.0,
        window_s=seconds("window", args.window) or 60.0,
        policy_options=compare.parse_policy_options(args.policy_options), sample=args.sample,
    )  # fmt: skip
    if args.sample is not None and args.sample < 1:
        raise ConfigError(
            f"--sample: must be a whole number >= 1 (one replica simulated in M; got {args.sample})"
        )
    if args.reorder_s is not None and not args.stream:
        raise ConfigError("--reorder-s: only with --stream (a trace read whole is sorted whole)")
    if args.stream:
        return _run_streamed(args, profile, options)
    _hint_stream(Path(args.trace))
    report = prepare_output(args.report, "--report") if args.report else None  # before the work
    with quiet_gc():  # a replay piles up no cyclic garbage while it runs (records.quiet_gc)
        trace = compare.shape_trace(load_trace(args.trace), options)
        scenario = compare.build_scenario(trace, Path(args.trace).name, profile, options)
        simulated = _simulate_with_progress(scenario, options, show=not args.json)
    # the report's "no limit": the batch limit the profile's replicas start with
    results = [replace(r, max_num_seqs=profile.max_num_seqs) for r in simulated]
    title = args.title or compare.title_for(scenario, args.sample)
    # The results first: a report that cannot be written after all must not lose them.
    _print_results(results, title, as_json=args.json, tables=[compare.summary_table(results, title)])
    if report is not None:
        from fleetslo.sim.report import render_report

        report.write_text(render_report(results, title), encoding="utf-8")
    return EXIT_OK


#: A trace file this large is worth streaming: the whole-file replay holds about 550 bytes a request
#: (a row is 35-40 bytes of CSV), so 500 MB of CSV is some 7 GB resident.
_STREAM_HINT_BYTES = 500_000_000


def _hint_stream(path: Path) -> None:
    import logging

    try:
        size = path.stat().st_size
    except OSError:
        return  # the reader says what is wrong with it
    if size >= _STREAM_HINT_BYTES:
        logging.getLogger("fleetslo.simulate").warning(
            "%s is %.1f GB: the whole-file replay holds every request in memory (about 15 times the "
            "file); --stream replays it in bounded memory",
            path.name,
            size / 1e9,
        )


def _run_streamed(args: argparse.Namespace, profile: Any, options: Any) -> int:
    """``--stream``: every policy over its own read of the file (``sim.streamed``)."""
    import math
    import sys

    from fleetslo.sim import compare, streamed
    from fleetslo.sim.records import quiet_gc
    from fleetslo.sim.traces.stream import REORDER_S, first_request, shaped, stream_trace

    if args.report:
        raise ConfigError("--report: not with --stream (the report plots every request; drop one of them)")
    reorder_s = REORDER_S if args.reorder_s is None else args.reorder_s
    if not (math.isfinite(reorder_s) and reorder_s >= 0):
        raise ConfigError(f"--reorder-s: a finite number of seconds >= 0 (got {args.reorder_s!r})")

    def arrivals() -> Any:
        # a bad file fails here, before any work
        _, stream = first_request(stream_trace(args.trace, reorder_s=reorder_s))
        return shaped(
            stream, start_s=options.start_s, duration_s=options.duration_s, time_scale=options.time_scale,
            rate_scale=options.rate_scale, seed=options.seed,
        )  # fmt: skip

    def announce(line: str) -> None:
        if not args.json:
            print(line, file=sys.stderr)

    with quiet_gc():
        scenario, results = streamed.run_streamed(arrivals, Path(args.trace).name, profile, options, announce)
    title = args.title or f"{compare.title_for(scenario, args.sample)}, streamed"
    tables = [compare.summary_table(results, title, streamed.COLUMNS), streamed.days_table(results)]
    _print_results(results, title, as_json=args.json, tables=tables)
    return EXIT_OK


def _print_results(results: Sequence[Any], title: str, *, as_json: bool, tables: Sequence[Any]) -> None:
    """One JSON object (a lone result, or the title and every result), or the tables."""
    import json

    from rich.console import Console

    if as_json:
        dicts = [r.to_dict() for r in results]
        print(json.dumps(dicts[0] if len(dicts) == 1 else {"title": title, "results": dicts}))
        return
    console = Console()
    if not console.is_terminal:
        console.width = 200  # a pipe or file: do not squeeze the table into 80 columns
    for table in tables:
        console.print(table)


def _simulate_with_progress(scenario: Any, options: Any, *, show: bool) -> list[SimResult]:
    from rich.console import Console
    from rich.progress import Progress

    from fleetslo.sim import compare

    if not show:
        return compare.run_all(scenario, options)
    with Progress(console=Console(stderr=True), transient=True) as bar:
        tasks: dict[str, Any] = {}

        def progress(label: str, done: float, total: float) -> None:
            if label not in tasks:
                tasks[label] = bar.add_task(f"simulating {label}", total=max(total, 1.0))
            bar.update(tasks[label], completed=min(done, total))

        return compare.run_all(scenario, options, progress)


# --------------------------------------------------------------------------------------------
# fleetslo sim-server
# --------------------------------------------------------------------------------------------


def load_profile(value: str) -> Any:
    """An engine profile: a packaged name, or a YAML file (a path ending in .yaml/.yml or existing)."""
    from fleetslo.sim.profile import builtin_profile, profile_from_mapping

    if value.endswith((".yaml", ".yml")) or Path(value).is_file():
        return profile_from_mapping(read_yaml_file(value), value)
    return builtin_profile(value)


def _configure_sim_server(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--profile", default="mi300x-llama3.1-8b-fp8-tp1", help="engine profile: a name or a YAML file"
    )
    p.add_argument("--listen", default="127.0.0.1:8000", help="address to serve on (port 0: a free one)")
    p.add_argument("--speedup", type=float, default=1.0, help="simulated seconds per wall second (default 1)")
    p.add_argument("--model-name", dest="model_name", help="served model name (default: the profile's model)")
    p.add_argument("--cold-start", dest="cold_start", help="simulated start-up time (default: the profile's)")
    p.add_argument(
        "--started-at",
        dest="started_at",
        type=float,
        help="epoch seconds the cold start counts from (default: now; a supervisor passes when it asked)",
    )
    p.add_argument(
        "--stream-interval", dest="stream_interval", help="wall time between token releases (default 50ms)"
    )
    p.add_argument(
        "--custom-histogram-buckets",
        dest="custom_histogram_buckets",
        help='vLLM\'s flag: JSON such as {"time_to_first_token": [0.1, 0.5, 2.0]}',
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the engine's step-time noise")


def _run_sim_server(args: argparse.Namespace) -> int:
    import json

    from fleetslo.core.config import load
    from fleetslo.sim.server.server import SimServerSettings, run_sim_server

    profile = load_profile(args.profile)
    options = {k: v for k, v in vars(args).items() if k in SimServerSettings.model_fields and v is not None}
    if args.custom_histogram_buckets:
        try:
            options["custom_histogram_buckets"] = json.loads(args.custom_histogram_buckets)
        except ValueError as exc:
            raise ConfigError(f"--custom-histogram-buckets: not valid JSON ({exc})") from None
    return run_sim_server(load(SimServerSettings, options, "sim-server settings"), profile)


# --------------------------------------------------------------------------------------------
# fleetslo demo
# --------------------------------------------------------------------------------------------


def _configure_demo(p: argparse.ArgumentParser) -> None:
    from fleetslo.sim.demo.scenario import DEFAULT_PROFILE, DEFAULT_TRACE, ENGINES, SCENARIOS
    from fleetslo.sim.demo.vllm import PROFILE as VLLM_PROFILE

    which = p.add_mutually_exclusive_group()
    which.add_argument("--trace", default=DEFAULT_TRACE, help=f"trace to replay (default {DEFAULT_TRACE})")
    which.add_argument("--scenario", choices=SCENARIOS, help="synthetic traffic instead of a trace")
    p.add_argument("--duration", help="wall time of the replay (default 120s; 180s with --engine vllm)")
    p.add_argument(
        "--speedup", type=float, help="simulated seconds per wall second (10; 1 with --engine vllm)"
    )
    p.add_argument(
        "--rps", type=float, help="mean simulated requests/s before the spike (2.5; 1 with --engine vllm)"
    )
    p.add_argument("--spike", type=float, default=2.5, help="traffic ×N from 40%% to 60%% of the run (2.5)")
    p.add_argument(
        "--profile", help=f"engine profile (default {DEFAULT_PROFILE}; {VLLM_PROFILE} with --engine vllm)"
    )
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="sim",
        help="sim: simulated replicas (default); vllm: real vLLM replicas on this machine, one per core "
        "(needs `bash scripts/install-vllm.sh`)",
    )
    p.add_argument("--vllm-python", dest="vllm_python", help="the vLLM environment's python (.venv-vllm)")
    p.add_argument("--slo-ttft", dest="slo_ttft", default="2s", help="p90 TTFT target (default 2s)")
    p.add_argument("--slo-tpot", dest="slo_tpot", default="50ms", help="p90 TPOT target (default 50ms)")
    p.add_argument("--min-replicas", dest="min_replicas", type=int, default=1)
    p.add_argument("--max-replicas", dest="max_replicas", type=int, default=8)
    p.add_argument("--cold-start", dest="cold_start", help="simulated replica start-up (the profile's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--report", default="out/demo-report.html", help="HTML report (out/demo-report.html)")
    p.add_argument("--prometheus", action="store_true", help="also run a local Prometheus with the rules")


def _real_fleet_options(options: Any) -> Any:
    """``--engine vllm``: a clear error now if the environment is missing, and at most as many
    replicas as this machine holds (a core and ≈3.6 GB each)."""
    from fleetslo.sim.demo import vllm

    vllm.find_python(options.vllm_python)
    room = len(vllm.capacity())
    if room < options.min_replicas:
        raise ConfigError(f"--min-replicas: this machine holds {room} vLLM replicas (a core and 3.6 GB each)")
    return replace(options, max_replicas=min(options.max_replicas, room))


def _run_demo(args: argparse.Namespace) -> int:
    from rich.console import Console

    from fleetslo.core.config import parse_duration
    from fleetslo.sim.demo.app import run_demo
    from fleetslo.sim.demo.scenario import DEFAULT_PROFILE, DemoOptions
    from fleetslo.sim.demo.vllm import PROFILE as VLLM_PROFILE
    from fleetslo.sim.traces import load_trace

    def seconds(flag: str, value: str | None) -> float | None:
        try:
            return None if value is None else parse_duration(value)
        except ValueError as exc:
            raise ConfigError(f"--{flag}: {exc}") from None

    real = args.engine == "vllm"
    options = DemoOptions(
        trace=None if args.scenario else args.trace, scenario=args.scenario,
        duration_s=seconds("duration", args.duration or ("180s" if real else "120s")) or 0.0,
        speedup=args.speedup if args.speedup is not None else (1.0 if real else 10.0),
        rps=args.rps if args.rps is not None else (1.0 if real else 2.5),
        spike=args.spike, profile=args.profile or (VLLM_PROFILE if real else DEFAULT_PROFILE),
        ttft_s=seconds("slo-ttft", args.slo_ttft) or 0.0,
        tpot_s=seconds("slo-tpot", args.slo_tpot) or 0.0, min_replicas=args.min_replicas,
        max_replicas=args.max_replicas, cold_start_s=seconds("cold-start", args.cold_start), seed=args.seed,
        report=args.report, prometheus=args.prometheus, log_level=args.log_level, engine=args.engine,
        vllm_python=args.vllm_python,
    ).check()  # fmt: skip
    if real:
        options = _real_fleet_options(options)
    prepare_output(options.report, "--report")  # before minutes of live run, not after
    if options.trace is not None and not Path(options.trace).is_file():
        raise ConfigError(f"--trace: {options.trace} not found (run from the repository or give a file)")
    base = load_trace(options.trace) if options.trace is not None else None
    console = Console()
    if not console.is_terminal:
        console.width = 200  # a pipe or a CI log: lines as long as they are
    return run_demo(options, base, load_profile(options.profile), console)
