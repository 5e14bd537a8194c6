"""The ``fleetslo`` command line: the only place that reads argv, the environment and files.

Each subcommand is a ``Command``: a name, a function that adds its flags to a parser, and a
function that turns parsed flags into validated settings and runs. Flags may also come from a YAML
``--config`` file (flags win). Bad input exits with status 2 and a message naming the key, the value
and what is allowed; runtime failures exit 1 with a one-line message; an interrupt (Ctrl-C, SIGINT)
exits 130 (``fleetslo.cli.common`` lists them, the README documents them).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from fleetslo import __version__
from fleetslo.cli.common import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    Command,
    merged_options,
    read_token_file,
    read_yaml_documents,
    read_yaml_file,
)
from fleetslo.cli.control import _configure_run, _run_controller
from fleetslo.cli.generate import (
    _configure_alerts,
    _configure_autoscaler,
    _configure_dashboards,
    _run_alerts,
    _run_autoscaler,
    _run_dashboards,
)
from fleetslo.cli.profile import _configure_profile, _run_profile
from fleetslo.cli.sidecar import (
    _EXPORTER_KEYS,
    _GATE_KEYS,
    _GPU_KEYS,
    _configure_exporter,
    _configure_fake_vllm,
    _gate_options,
    _gpu_options,
    _run_exporter,
    _run_fake_vllm,
)
from fleetslo.cli.simulation import (
    _configure_demo,
    _configure_sim_server,
    _configure_simulate,
    _run_demo,
    _run_sim_server,
    _run_simulate,
    load_profile,
)
from fleetslo.core import logs
from fleetslo.core.errors import ConfigError, FleetSLOError

__all__ = [
    "COMMANDS", "EXIT_FAILURE", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "_EXPORTER_KEYS", "_GATE_KEYS",
    "_GPU_KEYS",
    "Command", "_gate_options", "_gpu_options", "build_parser", "load_profile", "main", "merged_options",
    "read_token_file", "read_yaml_documents", "read_yaml_file",
]  # fmt: skip

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
    Command("profile", "benchmark a running vLLM, fit an engine profile for the simulator and capacity model",
            _configure_profile, _run_profile),
    Command("alerts", "alert rules and Alertmanager routing from FleetSLO specs (alerts build)",
            _configure_alerts, _run_alerts),
    Command("dashboards", "Grafana dashboards for the fleet, GPUs and the controller (dashboards build)",
            _configure_dashboards, _run_dashboards),
    Command("autoscaler", "the KEDA ScaledObject or HPA that follows fleetslo (replicas.actuator: external)",
            _configure_autoscaler, _run_autoscaler),
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
    parser.add_argument("--log-level", default="info", choices=logs.LEVELS, help="default info")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help, description=command.help)
        # Also after the subcommand (`fleetslo demo --log-level debug`); SUPPRESS keeps a value
        # given before it when it is not repeated after.
        p.add_argument("--log-level", choices=logs.LEVELS, default=argparse.SUPPRESS, help="default info")
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
        return EXIT_INTERRUPTED
    except (FleetSLOError, OSError) as exc:  # the machine or the cluster, not the command line
        print(f"fleetslo {args.command}: {exc}", file=sys.stderr)
        return EXIT_FAILURE
