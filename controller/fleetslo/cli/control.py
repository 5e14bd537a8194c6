"""``fleetslo run``: the SLO controller service."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from fleetslo.cli.common import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    merged_options,
    read_yaml_documents,
)

if TYPE_CHECKING:
    from fleetslo.policy.fleetslo.physics import StepCost

# --------------------------------------------------------------------------------------------
# fleetslo run
# --------------------------------------------------------------------------------------------

_RUN_KEYS = ("listen", "interval", "policy", "dry_run", "otlp_endpoint")


def _configure_run(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="controller settings YAML (source, kubernetes, leader_election, …)")
    p.add_argument(
        "--slo",
        help="FleetSLO specs: a YAML file with one document per target (optional "
        "with resources.enabled in --config: then FleetSLO resources are held too)",
    )
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


def read_profile(value: str) -> StepCost:
    """``spec.profile``: a packaged engine profile or a file from ``fleetslo profile``, as the
    step costs the capacity model starts from (``ConfigError`` when missing or broken)."""
    from fleetslo.cli.simulation import load_profile
    from fleetslo.sim.compare import step_cost

    return step_cost(load_profile(value))


#: The state file's name when ``state.file`` is not set (standalone targets).
STATE_FILE = "fleetslo-state.json"


def default_state_file(state_file: str | None, config: str | None, slo: str | None) -> Path | None:
    """``state.file``, else ``fleetslo-state.json`` next to the controller's config (or the specs)."""
    if state_file:
        return Path(state_file)
    beside = config or slo
    return Path(beside).resolve().parent / STATE_FILE if beside else None


def _state_file(state_file: str | None, args: argparse.Namespace, *, standalone: bool) -> Path | None:
    """Standalone targets get the default file; in a cluster the state goes into the resources'
    status, and a file only where one is named (the controller's own filesystem is read-only)."""
    if standalone:
        return default_state_file(state_file, args.config, args.slo)
    return Path(state_file) if state_file else None


def _run_controller(args: argparse.Namespace) -> int:
    import signal
    import socket
    import threading

    from fleetslo.control.kube.client import connect
    from fleetslo.control.service import Environment, Service
    from fleetslo.control.service import read_profile as service_read_profile
    from fleetslo.control.settings import ControllerSettings
    from fleetslo.control.standalone import build_standalone, is_standalone
    from fleetslo.control.watch import serve
    from fleetslo.core.config import load
    from fleetslo.core.errors import ConfigError
    from fleetslo.core.spec import load_fleetslo_documents
    from fleetslo.policy.registry import check_options

    settings = load(ControllerSettings, merged_options(args, _RUN_KEYS), args.config or "controller settings")
    if not args.slo and not settings.resources.enabled:
        raise ConfigError("--slo: required unless the controller file sets resources.enabled: true")
    specs = load_fleetslo_documents(read_yaml_documents(args.slo), args.slo) if args.slo else []
    gate_file = settings.gate.token_file
    standalone = bool(specs) and is_standalone(specs)
    env = Environment(
        in_pod="KUBERNETES_SERVICE_HOST" in os.environ,
        identity=os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}",
        prometheus_token=_token_reader(settings.source.prometheus.bearer_token_file),
        gate_token=_token_reader(gate_file)() if gate_file else None,
        profiles=read_profile,
        state_file=_state_file(settings.state.file, args, standalone=standalone),
    )
    check_options(settings.policy, settings.policy_options)  # a typo is usage (2), before any cluster call
    for slo in specs:  # a missing or broken profile is a config error (2), before anything starts
        if slo.spec.profile is not None:
            service_read_profile(slo, env.profiles)
    stop, received = threading.Event(), []

    def stopping(signum: int, _frame: object) -> None:
        received.append(signum)
        stop.set()

    signal.signal(signal.SIGTERM, stopping)
    signal.signal(signal.SIGINT, stopping)
    if standalone:
        # Static and Local targets need no cluster: the standalone build starts no Kubernetes client.
        Service(build_standalone(settings, specs, env), settings).serve(stop)
        return EXIT_INTERRUPTED if signal.SIGINT in received else EXIT_OK
    try:
        api = connect(settings.kubernetes, in_pod=env.in_pod)
    except ConfigError as exc:
        # The flags and files were valid; the machine has no (usable) cluster credentials: a
        # runtime failure (1), not bad usage (2).
        print(f"fleetslo run: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    serve(settings, specs, env, stop, api=api)
    return EXIT_INTERRUPTED if signal.SIGINT in received else EXIT_OK
