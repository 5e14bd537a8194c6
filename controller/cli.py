"""The ``fleetslo`` command line: the only place that reads argv, the environment and files.

Each subcommand is a ``Command``: a name, a function that adds its flags to a parser, and a
function that turns parsed flags into validated settings and runs. Flags may also come from a YAML
``--config`` file (flags win). Bad input exits with status 2 and a message naming the key, the value
and what is allowed; runtime failures exit 1.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from controller import __version__, logs
from controller.errors import ConfigError

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2

log = logging.getLogger("fleetslo")


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


# --------------------------------------------------------------------------------------------
# helpers shared by commands
# --------------------------------------------------------------------------------------------


def read_yaml_file(path: str) -> Any:
    """One YAML document from ``path``; a ``ConfigError`` that names the file otherwise."""
    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})") from exc


def read_yaml_documents(path: str) -> list[Any]:
    """Every YAML document in ``path`` (for multi-document spec files)."""
    try:
        return list(yaml.safe_load_all(Path(path).read_text(encoding="utf-8")))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})") from exc


def merged_options(args: argparse.Namespace, keys: Sequence[str]) -> dict[str, Any]:
    """Settings from ``--config`` (if any) overlaid with the flags the user gave explicitly."""
    options: dict[str, Any] = {}
    config = getattr(args, "config", None)
    if config:
        loaded = read_yaml_file(config)
        if loaded is not None and not isinstance(loaded, Mapping):
            raise ConfigError(f"{config}: expected a mapping of settings at the top level")
        options.update({str(k).replace("-", "_"): v for k, v in (loaded or {}).items()})
    for key in keys:
        value = getattr(args, key, None)
        if value is not None:
            options[key] = value
    return options


# --------------------------------------------------------------------------------------------
# fleetslo exporter
# --------------------------------------------------------------------------------------------

_EXPORTER_KEYS = (
    "vllm_url", "listen", "interval", "timeout", "windows", "slo_ttft", "slo_tpot",
    "otlp_endpoint", "otlp_interval",
)  # fmt: skip


def _configure_exporter(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="YAML file with any of the settings below (flags win)")
    p.add_argument("--vllm-url", dest="vllm_url", help="vLLM server base URL (default http://127.0.0.1:8000)")
    p.add_argument("--listen", help="address to serve /metrics, /healthz, /readyz on (default 0.0.0.0:9400)")
    p.add_argument("--interval", help="scrape interval, e.g. 5s (default 5s)")
    p.add_argument("--timeout", help="timeout of one scrape (default: the interval, at most 10s)")
    p.add_argument("--windows", help="comma-separated windows for quantiles, e.g. 30s,1m,5m")
    p.add_argument("--slo-ttft", dest="slo_ttft", help="TTFT threshold for SLO attainment, e.g. 2s")
    p.add_argument("--slo-tpot", dest="slo_tpot", help="TPOT threshold for SLO attainment, e.g. 50ms")
    p.add_argument("--otlp-endpoint", dest="otlp_endpoint", help="also push signals over OTLP/HTTP here")
    p.add_argument("--otlp-interval", dest="otlp_interval", help="OTLP export interval (default 15s)")
    p.add_argument(
        "--gpu-backend",
        dest="gpu_backend",
        choices=["auto", "amdsmi", "amd-smi", "sysfs", "rocm-smi", "nvml", "none"],
        help="where GPU telemetry comes from (default auto: the first that finds GPUs)",
    )
    p.add_argument(
        "--gpus",
        help="GPUs of this replica: 0,1,2,3 or UUIDs or PCI addresses, or 'all' "
        "(default: HIP/ROCR/CUDA_VISIBLE_DEVICES, else the kubelet PodResources socket, else all)",
    )
    p.add_argument("--sysfs-root", dest="sysfs_root", help="where the host's /sys is mounted (default /sys)")
    p.add_argument("--gpu-interval", dest="gpu_interval", help="how often GPUs are read (default 5s)")
    p.add_argument(
        "--gpu-timeout",
        dest="gpu_timeout",
        help="timeout of one amd-smi/rocm-smi call (default: the GPU interval, at most 10s)",
    )
    _configure_gate(p.add_argument_group("admission gate (optional; on with --gate-listen)"))


#: The gate's flags: (flag, help); each flag's dest is its name with underscores.
_GATE_FLAGS = (
    ("--gate-listen", "serve vLLM's API through the gate here, e.g. 0.0.0.0:8080"),
    ("--gate-upstream", "vLLM's API base URL (default: --vllm-url)"),
    ("--gate-max-inflight", "requests in flight to vLLM at most (default: no limit until one is set)"),
    ("--gate-max-queue", "requests waiting for a slot at most (default 1024)"),
    ("--gate-queue-timeout", "longest wait for a slot, e.g. 30s (default 30s)"),
    ("--gate-admin-listen", "admin API address (default 127.0.0.1:8081; off without --admin-token-file)"),
    ("--admin-token-file", "file holding the admin API's bearer token (a mounted Secret)"),
    ("--gate-max-body", "largest request body, e.g. 10MiB (default 10MiB)"),
)


def _configure_gate(g: argparse._ArgumentGroup) -> None:
    for flag, help_text in _GATE_FLAGS:
        g.add_argument(flag, dest=flag[2:].replace("-", "_"), help=help_text)


#: GPU flags (and config keys) -> GpuSettings fields.
_GPU_KEYS = {"gpu_backend": "backend", "gpus": "gpus", "sysfs_root": "sysfs_root", "gpu_interval": "interval",
             "gpu_timeout": "timeout"}  # fmt: skip
#: Environment the replica's GPUs and this pod's identity are read from -> GpuSettings fields.
_GPU_ENV = {"HIP_VISIBLE_DEVICES": "hip_visible_devices", "ROCR_VISIBLE_DEVICES": "rocr_visible_devices",
            "CUDA_VISIBLE_DEVICES": "cuda_visible_devices", "POD_NAME": "pod_name",
            "POD_NAMESPACE": "pod_namespace"}  # fmt: skip


def _gpu_options(options: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """Move the GPU keys out of the exporter options, and add the visible-devices environment."""
    gpu = {field: options.pop(key) for key, field in _GPU_KEYS.items() if key in options}
    gpu.update({field: environ[name] for name, field in _GPU_ENV.items() if name in environ})
    return gpu


#: Gate flags (and config keys) -> GateSettings fields; ``admin_token_file`` is read here.
_GATE_KEYS = {"gate_listen": "listen", "gate_upstream": "upstream", "gate_max_inflight": "max_inflight",
              "gate_max_queue": "max_queue", "gate_queue_timeout": "queue_timeout",
              "gate_admin_listen": "admin_listen", "gate_max_body": "max_body"}  # fmt: skip


def _gate_options(options: dict[str, Any]) -> dict[str, Any] | None:
    """Move the gate keys out of the exporter options; ``None`` when the gate is off."""
    given = [key for key in (*_GATE_KEYS, "admin_token_file") if key in options]
    gate = {field: options.pop(key) for key, field in _GATE_KEYS.items() if key in options}
    token_file = options.pop("admin_token_file", None)
    if "listen" not in gate:
        if given:
            raise ConfigError(f"gate settings: {', '.join(given)} given without gate_listen (--gate-listen)")
        return None
    gate.setdefault("upstream", options.get("vllm_url", "http://127.0.0.1:8000"))
    gate["admin_token"] = read_token_file(token_file) if token_file else None
    if gate["admin_token"] is None:
        log.info("gate admin API off: %s", "no --admin-token-file" if not token_file else "no usable token")
    return gate


def read_token_file(path: str) -> str | None:
    """The bearer token in ``path`` (surrounding whitespace dropped); ``None`` if unreadable or empty.

    A missing or empty file turns the admin API off rather than failing the sidecar: serving
    traffic matters more than being steerable, and off is the safe side. The token is never logged.
    """
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("admin token file %s cannot be read (%s): the gate admin API stays off", path,
                    getattr(exc, "strerror", None) or type(exc).__name__)  # fmt: skip
        return None
    if not token:
        log.warning("admin token file %s is empty: the gate admin API stays off", path)
        return None
    return token


def _run_exporter(args: argparse.Namespace) -> int:
    from controller.exporter.app import run_exporter
    from controller.gpu.settings import GpuSettings
    from controller.settings import ExporterSettings, GateSettings, load

    options = merged_options(args, (*_EXPORTER_KEYS, *_GPU_KEYS, *_GATE_KEYS, "admin_token_file"))
    gpu = load(GpuSettings, _gpu_options(options, os.environ), "gpu settings")
    gate_options = _gate_options(options)
    gate = None if gate_options is None else load(GateSettings, gate_options, "gate settings")
    settings = load(ExporterSettings, options, "exporter settings")
    return run_exporter(settings, gpu, gate)


# --------------------------------------------------------------------------------------------
# fleetslo fake-vllm
# --------------------------------------------------------------------------------------------


def _configure_fake_vllm(p: argparse.ArgumentParser) -> None:
    p.add_argument("--capture", required=True, help="a real vLLM /metrics capture to replay")
    p.add_argument("--listen", default="127.0.0.1:8000", help="address to serve /metrics on")
    p.add_argument("--rps", type=float, default=10.0, help="finished requests per second to show")


def _run_fake_vllm(args: argparse.Namespace) -> int:
    import signal
    import threading

    from controller.settings import parse_listen
    from controller.testing import FakeVllmServer, replay_page

    try:
        host, port = parse_listen(args.listen)
        text = Path(args.capture).read_text(encoding="utf-8")
    except (ValueError, OSError) as exc:
        raise ConfigError(str(exc)) from exc
    if args.rps < 0:
        raise ConfigError(f"--rps must be >= 0 (got {args.rps})")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with FakeVllmServer(replay_page(text, args.rps), host=host, port=port) as fake:
        log.info("replaying %s on %s at %g requests/s", args.capture, fake.url, args.rps)
        stop.wait()
    return EXIT_OK


# --------------------------------------------------------------------------------------------
# fleetslo simulate
# --------------------------------------------------------------------------------------------


def _configure_simulate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trace", required=True, help="request trace (Azure/BurstGPT/plain CSV, Mooncake JSONL)")
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
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--report", help="also write a self-contained HTML report here")
    p.add_argument("--title", help="report title")


def _run_simulate(args: argparse.Namespace) -> int:
    import json

    from rich.console import Console

    from controller.settings import parse_duration
    from controller.sim import compare
    from controller.sim.profile import builtin_profile, profile_from_mapping
    from controller.sim.traces import load_trace

    def seconds(flag: str, value: str | None) -> float | None:
        try:
            return None if value is None else parse_duration(value)
        except ValueError as exc:
            raise ConfigError(f"--{flag}: {exc}") from None

    is_file = args.profile.endswith((".yaml", ".yml")) or Path(args.profile).is_file()
    profile = (
        profile_from_mapping(read_yaml_file(args.profile), args.profile) if is_file
        else builtin_profile(args.profile)
    )  # fmt: skip
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
    )  # fmt: skip
    trace = compare.shape_trace(load_trace(args.trace), options)
    scenario = compare.build_scenario(trace, Path(args.trace).name, profile, options)
    results = _simulate_with_progress(scenario, options, show=not args.json)
    title = args.title or compare.title_for(scenario)
    if args.report:
        from controller.sim.report import render_report

        Path(args.report).write_text(render_report(results, title), encoding="utf-8")
    if args.json:
        print(json.dumps(results[0] if len(results) == 1 else {"title": title, "results": results}))
    else:
        console = Console()
        if not console.is_terminal:
            console.width = 200  # a pipe or file: do not squeeze the table into 80 columns
        console.print(compare.summary_table(results, title))
    return EXIT_OK


def _simulate_with_progress(scenario: Any, options: Any, *, show: bool) -> list[dict[str, Any]]:
    from rich.console import Console
    from rich.progress import Progress

    from controller.sim import compare

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
    from controller.sim.profile import builtin_profile, profile_from_mapping

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

    from controller.settings import load
    from controller.simserver.server import SimServerSettings, run_sim_server

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
    from controller.demo.scenario import DEFAULT_PROFILE, DEFAULT_TRACE, SCENARIOS

    which = p.add_mutually_exclusive_group()
    which.add_argument("--trace", default=DEFAULT_TRACE, help=f"trace to replay (default {DEFAULT_TRACE})")
    which.add_argument("--scenario", choices=SCENARIOS, help="synthetic traffic instead of a trace")
    p.add_argument("--duration", default="120s", help="wall time of the replay (default 120s)")
    p.add_argument("--speedup", type=float, default=10.0, help="simulated seconds per wall second (10)")
    p.add_argument("--rps", type=float, default=2.5, help="mean simulated requests/s before the spike (2.5)")
    p.add_argument("--spike", type=float, default=2.5, help="traffic ×N from 40%% to 60%% of the run (2.5)")
    p.add_argument("--profile", default=DEFAULT_PROFILE, help=f"engine profile (default {DEFAULT_PROFILE})")
    p.add_argument("--slo-ttft", dest="slo_ttft", default="2s", help="p90 TTFT target (default 2s)")
    p.add_argument("--slo-tpot", dest="slo_tpot", default="50ms", help="p90 TPOT target (default 50ms)")
    p.add_argument("--min-replicas", dest="min_replicas", type=int, default=1)
    p.add_argument("--max-replicas", dest="max_replicas", type=int, default=8)
    p.add_argument("--cold-start", dest="cold_start", help="simulated replica start-up (the profile's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--report", default="out/demo-report.html", help="HTML report (out/demo-report.html)")
    p.add_argument("--prometheus", action="store_true", help="also run a local Prometheus with the rules")


def _run_demo(args: argparse.Namespace) -> int:
    from rich.console import Console

    from controller.demo.app import run_demo
    from controller.demo.scenario import DemoOptions
    from controller.settings import parse_duration
    from controller.sim.traces import load_trace

    def seconds(flag: str, value: str | None) -> float | None:
        try:
            return None if value is None else parse_duration(value)
        except ValueError as exc:
            raise ConfigError(f"--{flag}: {exc}") from None

    options = DemoOptions(
        trace=None if args.scenario else args.trace, scenario=args.scenario,
        duration_s=seconds("duration", args.duration) or 0.0, speedup=args.speedup, rps=args.rps,
        spike=args.spike, profile=args.profile, ttft_s=seconds("slo-ttft", args.slo_ttft) or 0.0,
        tpot_s=seconds("slo-tpot", args.slo_tpot) or 0.0, min_replicas=args.min_replicas,
        max_replicas=args.max_replicas, cold_start_s=seconds("cold-start", args.cold_start), seed=args.seed,
        report=args.report, prometheus=args.prometheus,
    ).check()  # fmt: skip
    if options.trace is not None and not Path(options.trace).is_file():
        raise ConfigError(f"--trace: {options.trace} not found (run from the repository or give a file)")
    base = load_trace(options.trace) if options.trace is not None else None
    console = Console()
    if not console.is_terminal:
        console.width = 200  # a pipe or a CI log: lines as long as they are
    return run_demo(options, base, load_profile(options.profile), console)


# --------------------------------------------------------------------------------------------
# fleetslo alerts build / fleetslo dashboards build
# --------------------------------------------------------------------------------------------


def _sync_generated(files: Mapping[str, str], out: Path, check: bool, patterns: Sequence[str]) -> int:
    """Write generated files into ``out`` (removing stale ones), or with ``check`` report drift."""
    from alerts.build import drift

    existing = {f for pattern in patterns for f in out.glob(pattern)} if out.is_dir() else set()
    on_disk = {f.name: f.read_text(encoding="utf-8") for f in existing}
    if check:
        problems = drift(files, on_disk)
        for problem in problems:
            print(f"drift: {out / problem}", file=sys.stderr)
        if problems:
            print("regenerate with the same command without --check and commit the result", file=sys.stderr)
        return EXIT_FAILURE if problems else EXIT_OK
    out.mkdir(parents=True, exist_ok=True)
    for name in set(on_disk) - set(files):
        (out / name).unlink()
    for name, text in sorted(files.items()):
        if on_disk.get(name) != text:
            (out / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(files)} files to {out}")
    return EXIT_OK


def _configure_alerts(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = sub.add_parser("build", help="FleetSLO specs -> rule files and Alertmanager config")
    build.add_argument("--slo", action="append", required=True, help="FleetSLO spec file (repeatable)")
    build.add_argument("--out", default="alerts/generated", help="output folder (default alerts/generated)")
    build.add_argument("--check", action="store_true", help="compare with --out instead; exit 1 on drift")


def _run_alerts(args: argparse.Namespace) -> int:
    from alerts.build import ALERTMANAGER_FILE, RULES_SUFFIX, generate
    from controller.settings import load_fleetslo_documents

    specs = [(Path(f).name, load_fleetslo_documents(read_yaml_documents(f), f)) for f in args.slo]
    output = generate(specs)
    for warning in output.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return _sync_generated(output.files, Path(args.out), args.check, (f"*{RULES_SUFFIX}", ALERTMANAGER_FILE))


def _configure_dashboards(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = sub.add_parser("build", help="Grafana dashboards (JSON, Grafana 11)")
    build.add_argument(
        "--out", default="dashboards/generated", help="output folder (default dashboards/generated)"
    )
    build.add_argument("--check", action="store_true", help="compare with --out instead; exit 1 on drift")


def _run_dashboards(args: argparse.Namespace) -> int:
    from dashboards.build import generate

    return _sync_generated(generate(), Path(args.out), args.check, ("*.json",))


# --------------------------------------------------------------------------------------------
# fleetslo run
# --------------------------------------------------------------------------------------------

_RUN_KEYS = ("listen", "interval", "policy", "dry_run", "otlp_endpoint")


def _configure_run(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="controller settings YAML (source, kubernetes, leader_election, …)")
    p.add_argument("--slo", required=True, help="FleetSLO specs: a YAML file with one document per target")
    p.add_argument(
        "--dry-run",
        dest="dry_run",
        action="store_true",
        default=None,
        help="advisory for every target: log and report what would be done, write nothing",
    )
    p.add_argument("--listen", help="address of /healthz, /readyz, /metrics (default 0.0.0.0:9500)")
    p.add_argument("--interval", help="scheduler tick, e.g. 5s (each policy decides at its own interval)")
    p.add_argument("--policy", help="policy for every target (default fleetslo)")
    p.add_argument("--otlp-endpoint", dest="otlp_endpoint", help="export a trace span per reconcile here")


def _token_reader(path: str | None) -> Callable[[], str | None]:
    """Read a token file at each use, so a rotated (projected) token is picked up."""
    if path is None:
        return lambda: None
    return lambda: Path(path).read_text(encoding="utf-8").strip() or None


def _run_controller(args: argparse.Namespace) -> int:
    import signal
    import socket
    import threading

    from controller.controller_settings import ControllerSettings
    from controller.service import Environment, Service, build
    from controller.settings import load, load_fleetslo_documents

    settings = load(ControllerSettings, merged_options(args, _RUN_KEYS), args.config or "controller settings")
    specs = load_fleetslo_documents(read_yaml_documents(args.slo), args.slo)
    gate_file = settings.gate.token_file
    env = Environment(
        in_pod="KUBERNETES_SERVICE_HOST" in os.environ,
        identity=os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}",
        prometheus_token=_token_reader(settings.source.prometheus.bearer_token_file),
        gate_token=_token_reader(gate_file)() if gate_file else None,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    Service(build(settings, specs, env), settings).serve(stop)
    return EXIT_OK


COMMANDS: list[Command] = [
    Command("exporter", "sidecar: scrape vLLM, publish latency quantiles and SLO attainment",
            _configure_exporter, _run_exporter),
    Command("fake-vllm", "serve a recorded vLLM /metrics capture as a live, growing page (try-outs, tests)",
            _configure_fake_vllm, _run_fake_vllm),
    Command("simulate", "replay a request trace through a simulated fleet under one or several policies",
            _configure_simulate, _run_simulate),
    Command("run", "SLO controller: hold each FleetSLO's latency objectives at the lowest replica cost",
            _configure_run, _run_controller),
    Command("sim-server", "a simulated vLLM replica (OpenAI API, vLLM /metrics) driven by the engine model",
            _configure_sim_server, _run_sim_server),
    Command("demo", "the whole loop on this machine: simulated fleet, sidecars, controller, a real trace",
            _configure_demo, _run_demo),
    Command("alerts", "alert rules and Alertmanager routing from FleetSLO specs (alerts build)",
            _configure_alerts, _run_alerts),
    Command("dashboards", "Grafana dashboards for the fleet, GPUs and the controller (dashboards build)",
            _configure_dashboards, _run_dashboards),
]  # fmt: skip


# --------------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fleetslo",
        description="Fleet observability and SLO controller for vLLM inference servers.",
    )
    parser.add_argument("--version", action="version", version=f"fleetslo {__version__}")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help, description=command.help)
        command.configure(p)
        p.set_defaults(_run=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return EXIT_USAGE
    logs.configure(args.log_level)
    try:
        return int(args._run(args))
    except ConfigError as exc:
        print(f"fleetslo {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
