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


def _run_exporter(args: argparse.Namespace) -> int:
    from controller.exporter.app import run_exporter
    from controller.gpu.settings import GpuSettings
    from controller.settings import ExporterSettings, load

    options = merged_options(args, (*_EXPORTER_KEYS, *_GPU_KEYS))
    gpu = load(GpuSettings, _gpu_options(options, os.environ), "gpu settings")
    settings = load(ExporterSettings, options, "exporter settings")
    return run_exporter(settings, gpu)


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


COMMANDS: list[Command] = [
    Command("exporter", "sidecar: scrape vLLM, publish latency quantiles and SLO attainment",
            _configure_exporter, _run_exporter),
    Command("fake-vllm", "serve a recorded vLLM /metrics capture as a live, growing page (try-outs, tests)",
            _configure_fake_vllm, _run_fake_vllm),
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
