"""``fleetslo exporter`` (the sidecar, with GPU telemetry and the gate) and ``fleetslo fake-vllm``."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fleetslo.cli.common import (
    EXIT_OK,
    log,
    merged_options,
    read_token_file,
)
from fleetslo.core.errors import ConfigError
from fleetslo.sidecar.gpu import backends as gpu_backends

# --------------------------------------------------------------------------------------------
# fleetslo exporter
# --------------------------------------------------------------------------------------------

_EXPORTER_KEYS = (
    "vllm_url", "listen", "interval", "timeout", "windows", "slo_ttft", "slo_tpot",
    "otlp_endpoint", "otlp_interval", "max_page_bytes",
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
    p.add_argument("--max-page-bytes", dest="max_page_bytes", help="largest vLLM page read (default 16MiB)")
    p.add_argument(
        "--gpu-backend",
        dest="gpu_backend",
        choices=gpu_backends.choices(),
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
    ("--gate-header-timeout", "time a connection has to send a whole request (default 15s)"),
    ("--gate-body-timeout", "time a request body has to arrive, else 408 (default 30s)"),
    ("--gate-max-pending-bodies", "request bodies held before admission at most (default 2048)"),
    ("--gate-max-pending-bytes", "bytes of request bodies held before admission at most (default 128MiB)"),
    ("--gate-served-model-name", "model_name of the gate's series before the first scrape names it"),
    ("--gate-time-scale", "upstream seconds per wall second (default 1; a sim-server's --speedup)"),
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


#: Gate flags (and config keys) -> GateServerSettings fields; ``admin_token_file`` is read here.
_GATE_KEYS = {"gate_listen": "listen", "gate_upstream": "upstream", "gate_max_inflight": "max_inflight",
              "gate_max_queue": "max_queue", "gate_queue_timeout": "queue_timeout",
              "gate_admin_listen": "admin_listen", "gate_max_body": "max_body",
              "gate_header_timeout": "header_timeout", "gate_body_timeout": "body_timeout",
              "gate_max_pending_bodies": "max_pending_bodies", "gate_max_pending_bytes": "max_pending_bytes",
              "gate_served_model_name": "served_model_name", "gate_time_scale": "time_scale"}  # fmt: skip


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
    if gate["admin_token"] is not None:
        gate["admin_token_file"] = token_file  # the gate re-reads it when the Secret rotates
    else:
        log.info("gate admin API off: %s", "no --admin-token-file" if not token_file else "no usable token")
    return gate


def _run_exporter(args: argparse.Namespace) -> int:
    from fleetslo.core.config import load
    from fleetslo.sidecar.app import run_exporter
    from fleetslo.sidecar.root import SidecarSettings

    options = merged_options(args, (*_EXPORTER_KEYS, *_GPU_KEYS, *_GATE_KEYS, "admin_token_file"))
    gpu, gate = _gpu_options(options, os.environ), _gate_options(options)
    root = load(SidecarSettings, {"exporter": options, "gpu": gpu, "gate": gate}, "sidecar settings")
    return run_exporter(root.exporter, root.gpu, root.gate)


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

    from fleetslo.core.config import parse_listen
    from fleetslo.testing import FakeVllmServer, replay_page

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
