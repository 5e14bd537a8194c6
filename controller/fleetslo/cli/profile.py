"""``fleetslo profile``: benchmark one running vLLM (directly or through the gate), fit the engine
profile the simulator and the capacity model use, write it as YAML with its provenance, and — with
``--validate`` — check it: open-loop runs at fractions of the measured saturation rate, each
measured by the client and predicted by the simulator with the new profile, errors side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import yaml

from fleetslo.cli.common import EXIT_FAILURE, EXIT_OK
from fleetslo.core.errors import ConfigError

DEFAULT_CONCURRENCY = "1,2,4,8"
DEFAULT_PROMPTS = "16,256,768"


def _configure_profile(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", required=True, help="the OpenAI API: vLLM itself or the gate in front of it")
    p.add_argument(
        "--metrics-url", help="vLLM's /metrics page (default URL/metrics; via a sidecar: …/vllm/metrics)"
    )
    p.add_argument("--model", help="served model name (default: the first of /v1/models)")
    p.add_argument("--out", required=True, help="write the engine profile YAML here")
    p.add_argument("--name", help="profile name (default: derived from the model)")
    p.add_argument("--hardware", default="unspecified", help="what the replica runs on, for the record")
    p.add_argument(
        "--concurrency",
        default=DEFAULT_CONCURRENCY,
        help=f"closed-loop sweep (default {DEFAULT_CONCURRENCY})",
    )
    p.add_argument(
        "--prompt-tokens", dest="prompt_tokens", default=DEFAULT_PROMPTS, help="prompt-length sweep"
    )
    p.add_argument(
        "--sweep-prompt", dest="sweep_prompt", type=int, default=64, help="prompt of the concurrency sweep"
    )
    p.add_argument(
        "--output-tokens", dest="output_tokens", type=int, default=32, help="output tokens per request"
    )
    p.add_argument("--requests", type=int, default=6, help="requests per client in each phase (default 6)")
    p.add_argument(
        "--max-num-seqs", dest="max_num_seqs", type=int, default=256, help="the server's --max-num-seqs"
    )
    p.add_argument("--max-num-batched-tokens", dest="max_num_batched_tokens", type=int, default=2048)
    p.add_argument(
        "--cold-start", dest="cold_start", type=float, default=40.0, help="seconds to healthy (default 40)"
    )
    p.add_argument(
        "--server-pid",
        dest="server_pid",
        type=int,
        help="the vLLM API server's pid, for its CPU time (default: whoever listens on --url's port, "
        "when that is a local vLLM; through the gate, give it)",
    )
    p.add_argument(
        "--saturation-repeats",
        dest="saturation_repeats",
        type=int,
        default=3,
        help="short closed-loop phases at the busiest concurrency; their median is the saturation rate",
    )
    p.add_argument(
        "--validate", action="store_true", help="also check the fit open-loop at 30/60/90%% of saturation"
    )
    p.add_argument("--validate-seconds", dest="validate_seconds", type=float, default=25.0)


def _ints(flag: str, text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"--{flag}: {text!r} is not a comma-separated list of integers") from None
    if not values or min(values) < 1:
        raise ConfigError(f"--{flag}: {text!r}: give positive integers")
    return values


def _run_profile(args: argparse.Namespace) -> int:
    import logging

    from rich.console import Console

    from fleetslo.engine.bench import Bench

    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request would bury the table
    concurrency = _ints("concurrency", args.concurrency)
    prompts = _ints("prompt-tokens", args.prompt_tokens)
    url = args.url.rstrip("/")
    console = Console(stderr=True)
    model, max_model_len = _served_model(url, args.model)
    metrics_url = args.metrics_url or f"{url}/metrics"
    page = _page(metrics_url)
    server_pid = args.server_pid if args.server_pid is not None else _local_server(url, args.metrics_url)
    bench = Bench(url, model, metrics_url if page is not None else None, server_pid=server_pid)
    phases = plan_phases(concurrency, prompts, args)
    started, load_before = datetime.now(UTC), os.getloadavg()
    idle = asyncio.run(bench.idle_cpu()) if server_pid is not None else None
    results = _run_with_progress(bench, phases, console)
    results += _saturation_phases(bench, results, args, console)
    host_load = (load_before, os.getloadavg())
    from fleetslo.sim.calibrate import fit

    fitted = fit(results, idle)
    run = ProfileRun(url, model, max_model_len, page, results, fitted, started, server_pid, host_load, idle)
    document = profile_document(args, run)
    Path(args.out).write_text(yaml.safe_dump(document, sort_keys=False, width=110), encoding="utf-8")
    _print_fit(console, results, fitted, args.out)
    if args.validate:
        from fleetslo.cli.profile_check import validate

        ok = validate(bench, args.out, results, args.validate_seconds, console)
        return EXIT_OK if ok else EXIT_FAILURE
    return EXIT_OK


def plan_phases(concurrency: list[int], prompts: list[int], args: argparse.Namespace) -> list[Any]:
    from fleetslo.engine.bench import Phase
    from fleetslo.sim.host_delay import HOST_DELAY_CLIENTS

    out = args.output_tokens
    phases = [Phase(f"c{c}", c, args.sweep_prompt, out, max(4, c * args.requests)) for c in concurrency]
    # Prompt sweep at two clients: prefill chunks then run beside a decoding sequence (mixed steps).
    phases += [Phase(f"p{p}", 2, p, max(8, out // 2), 2 * args.requests) for p in prompts]
    # The host's delay is measured in the phases of few clients: not on reused connections.
    return [replace(p, fresh_connections=p.concurrency <= HOST_DELAY_CLIENTS) for p in phases]


def _local_server(url: str, metrics_url: str | None) -> int | None:
    """The pid listening on ``url``'s port when that is vLLM itself on this machine (not a gate:
    then ``--metrics-url`` points elsewhere and the listener is the sidecar)."""
    from urllib.parse import urlsplit

    from fleetslo.engine.procstat import listening_pid

    parts = urlsplit(url)
    local = parts.hostname in ("127.0.0.1", "localhost", "::1")
    if not local or parts.port is None or (metrics_url and metrics_url.rstrip("/") != f"{url}/metrics"):
        return None
    return listening_pid(parts.port)


def _saturation_phases(bench: Any, results: list[Any], args: argparse.Namespace, console: Any) -> list[Any]:
    """Repeats of the sweep's busiest phase, shorter: one phase's rate swings with the host's other
    load, the median of several is what ``--validate`` takes as the saturation rate."""
    from fleetslo.engine.bench import Phase

    sweep = [r for r in results if r.phase.name.startswith("c") and r.wall_s > 0]
    if not sweep or args.saturation_repeats < 1:
        return []
    busiest = max(sweep, key=lambda r: len(r.ok) / r.wall_s).phase
    repeats = [
        Phase(f"s{busiest.concurrency}-{i}", busiest.concurrency, busiest.prompt_tokens,
              busiest.output_tokens, max(4, busiest.requests // 2))
        for i in range(args.saturation_repeats)
    ]  # fmt: skip
    return _run_with_progress(bench, repeats, console, warm_up=False)


def _served_model(url: str, wanted: str | None) -> tuple[str, int | None]:
    try:
        data = httpx.get(f"{url}/v1/models", timeout=10).json()["data"]
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"--url: {url}/v1/models did not answer with a model list ({exc})") from None
    for entry in data:
        if wanted in (None, entry.get("id")):
            return str(entry["id"]), entry.get("max_model_len")
    raise ConfigError(f"--model: {wanted!r} not served at {url} (serves {[e.get('id') for e in data]})")


def _page(metrics_url: str) -> str | None:
    try:
        response = httpx.get(metrics_url, timeout=10)
    except httpx.HTTPError:
        return None
    return response.text if response.status_code == 200 else None


def _run_with_progress(bench: Any, phases: list[Any], console: Any, *, warm_up: bool = True) -> list[Any]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    total = sum(p.requests for p in phases)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task("warm-up", total=total + (2 if warm_up else 0))

        async def run_all() -> list[Any]:
            from fleetslo.engine.bench import Phase

            if warm_up:
                await bench.closed(Phase("warm-up", 1, 16, 4, 2), lambda n: bar.advance(task, n))
            out = []
            for phase in phases:
                bar.update(
                    task,
                    description=f"{phase.name}: {phase.concurrency} clients, prompt {phase.prompt_tokens}",
                )
                out.append(await bench.closed(phase, lambda n: bar.advance(task, n)))
            return out

        return asyncio.run(run_all())


@dataclass(frozen=True)
class ProfileRun:
    """What one ``fleetslo profile`` run measured, for the document that records it."""

    url: str
    model: str
    max_model_len: int | None
    page: str | None
    results: list[Any]
    fitted: Any
    started: datetime
    server_pid: int | None = None
    #: ``os.getloadavg()`` before and after the benchmark: how busy the host was.
    host_load: tuple[tuple[float, ...], tuple[float, ...]] | None = None
    #: The API server's CPU seconds per second with no traffic (``None``: not measured).
    idle_cpu_per_s: float | None = None


def profile_document(args: argparse.Namespace, run: ProfileRun) -> dict[str, Any]:
    from fleetslo.engine.bench import read_counters

    model, page, results, fitted, started, url = (
        run.model,
        run.page,
        run.results,
        run.fitted,
        run.started,
        run.url,
    )
    max_model_len = run.max_model_len

    kv_tokens = _kv_capacity(page)
    sweep = [r for r in results if r.phase.name.startswith("c")]
    step = fitted.step_time.model_dump()
    doc: dict[str, Any] = {
        "name": args.name or f"fitted-{model.replace('/', '-')}",
        "description": f"fitted by fleetslo profile against {url} on {started.isoformat(timespec='seconds')}",
        "model": model,
        "hardware": args.hardware,
        "gpus_per_replica": 1,
        "tensor_parallel": 1,
        "cold_start_s": args.cold_start,
        "max_num_seqs": args.max_num_seqs,
        "max_num_batched_tokens": max(args.max_num_batched_tokens, args.max_num_seqs),
        "max_model_len": int(max_model_len or 2048),
        "kv_capacity_tokens": int(kv_tokens or 100_000),
        "step_time": {k: float(v) for k, v in step.items()},
    }
    if fitted.frontend is not None:
        doc["frontend"] = {k: float(v) for k, v in fitted.frontend.model_dump().items()}
    if fitted.frontend_queue is not None:
        doc["frontend_queue"] = {k: float(v) for k, v in fitted.frontend_queue.model_dump().items()}
    doc["calibration"] = {
        "workload": {
            "input_tokens": args.sweep_prompt,
            "output_tokens": args.output_tokens,
            "num_prompts_per_concurrency": args.requests,
        },
        "points": [_point(r) for r in sweep if _point(r) is not None],
    }
    steps_how = (
        "the fleetslo engine plugin's per-step totals"
        if fitted.steps_measured
        else "client timings only (no plugin)"
    )
    doc["provenance"] = {
        "measured": [
            f"step_time: non-negative least squares over {len(results)} closed-loop phases, "
            f"from {steps_how}; "
            + "relative residuals "
            + ", ".join(f"{k} {v:+.1%}" for k, v in fitted.residuals.items()),
            "frontend: mean client TTFT/TPOT minus vLLM's own, per phase"
            if fitted.frontend is not None
            else "frontend: not fitted (vLLM's latency sums were not readable)",
            _noise_line(fitted.step_spread),
            _queue_line(fitted.frontend_queue, run.server_pid, run.idle_cpu_per_s),
            _saturation_line(results),
            "kv_capacity_tokens: vllm:cache_config_info num_gpu_blocks x block_size"
            if kv_tokens
            else "kv_capacity_tokens: not on the page (100000 assumed)",
        ],
        "assumed": ["cold_start_s, max_num_seqs, max_num_batched_tokens: given on the command line"],
        "sources": [
            f"fleetslo profile, {started.isoformat(timespec='seconds')}, against {url} (model {model})",
            "phases: " + "; ".join(_phase_line(r) for r in results),
            f"engine page had the plugin: {'fleetslo_engine_steps_total' in read_counters(page or '')}",
            _load_line(run.host_load),
        ],
    }  # fmt: skip
    return doc


def _phase_line(r: Any) -> str:
    p = r.phase
    counts = f"n={len(r.ok)}/{len(r.shots)}"
    server = f" server cpu={r.server.cpu_s:.3f}s wait={r.server.wait_s:.3f}s" if r.server else ""
    line = f"{p.name} c={p.concurrency} prompt={p.prompt_tokens} out={p.output_tokens} {counts}"
    fresh = " fresh-connections" if p.fresh_connections else ""
    return f"{line}{fresh} wall={r.wall_s:.2f}s{server}"


def _noise_line(spread: dict[str, float]) -> str:
    if not spread:
        return "step_time.noise_cv: not measured (no step histogram from the plugin); 0 assumed"
    each = ", ".join(f"{name} {cv:.2f}" for name, cv in spread.items())
    return f"step_time.noise_cv: median step-time spread (lognormal cv, the plugin's histogram): {each}"


def _queue_line(queue: Any, pid: int | None, idle: float | None) -> str:
    if queue is None:
        why = "no API server pid (give --server-pid)" if pid is None else f"pid {pid}'s times unreadable"
        return f"frontend_queue: not fitted ({why}); the simulator uses frontend's fixed delays"
    return (
        f"frontend_queue: the API server process (pid {pid}): CPU seconds per phase from "
        "/proc/PID/task/*/schedstat, non-negative least squares on requests, prompt and output "
        f"tokens beyond its idle use ({_idle(idle)}); cpu_stretch {queue.cpu_stretch:.2f} = "
        "(CPU + run-queue wait) / CPU"
    )


def _idle(idle: float | None) -> str:
    return "fitted" if idle is None else f"{idle * 1e3:.1f} ms/s, measured for 2 s with no traffic"


def _saturation_line(results: list[Any]) -> str:
    from fleetslo.cli.profile_check import saturation_rate

    rate, phase, rates = saturation_rate(results)
    each = ", ".join(f"{r:.2f}" for r in rates)
    clients = phase.concurrency
    return f"saturation: {rate:.2f} req/s, the median of closed-loop phases at {clients} clients ({each})"


def _load_line(host_load: Any) -> str:
    if host_load is None:
        return "host load: not recorded"
    before, after = ("/".join(f"{v:.2f}" for v in values) for values in host_load)
    return f"host load (1/5/15-min load averages): {before} before, {after} after"


def _point(result: Any) -> dict[str, float] | None:
    ttfts = [s.ttft_s for s in result.ok if s.ttft_s is not None]
    tpots = [s.tpot_s for s in result.ok if s.tpot_s is not None]
    if not ttfts or not tpots or result.wall_s <= 0:
        return None
    tokens = sum(s.output_tokens for s in result.ok)
    return {
        "concurrency": result.phase.concurrency,
        "mean_ttft_s": statistics.fmean(ttfts),
        "mean_tpot_s": statistics.fmean(tpots),
        "output_tokens_per_s": tokens / result.wall_s,
    }


def _kv_capacity(page: str | None) -> int | None:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(page or ""):
        if family.name == "vllm:cache_config_info":
            for sample in family.samples:
                blocks, size = sample.labels.get("num_gpu_blocks"), sample.labels.get("block_size")
                if blocks not in (None, "None") and size not in (None, "None"):
                    return int(blocks) * int(size)
    return None


def _print_fit(console: Any, results: list[Any], fitted: Any, out: str) -> None:
    from rich.table import Table

    table = Table(title=f"engine profile written to {out}")
    for col in ("phase", "clients", "prompt", "ok", "req/s", "mean TTFT", "mean TPOT", "step fit"):
        table.add_column(col)
    for r in results:
        point = _point(r) or {}
        table.add_row(
            r.phase.name, str(r.phase.concurrency), str(r.phase.prompt_tokens), f"{len(r.ok)}/{len(r.shots)}",
            f"{len(r.ok) / r.wall_s:.2f}" if r.wall_s else "-",
            f"{point.get('mean_ttft_s', float('nan')) * 1e3:.1f} ms",
            f"{point.get('mean_tpot_s', float('nan')) * 1e3:.1f} ms",
            f"{fitted.residuals.get(r.phase.name, float('nan')):+.1%}",
        )  # fmt: skip
    console.print(table)
    console.print(f"step time: {fitted.step_time.model_dump()}")
    console.print(f"front end: {fitted.frontend.model_dump() if fitted.frontend else 'not fitted'}")
    queue = fitted.frontend_queue
    shown = queue.model_dump() if queue else "not fitted (no API server times)"
    console.print(f"front end as a queue: {shown}")
