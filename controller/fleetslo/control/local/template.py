"""Local replicas of any engine from a command template (a ``Local`` target of ``fleetslo run``):
real vLLM, ``fleetslo sim-server``, or anything that serves the OpenAI API and a vLLM /metrics
page, each with a ``fleetslo exporter`` and its gate in front, bound to its own CPUs.

``CommandRecipe`` is a recipe for ``LocalFleet``: the engine's argv comes from the spec's template
(``{port}``, ``{model_name}``, ``{cpus}``, ``{replica}``; ``env`` values too), prefixed with
``taskset`` when the spec binds CPUs, and the sidecar's is ``ReplicaRecipe``'s. ``TemplateFleet``
is ``LocalFleet`` with what a real engine needs: a start timeout (a replica not healthy in time is
stopped, and the policy sees it gone), signals to each replica's whole process group (vLLM's
engine core and workers are children of its API server), and ``endpoints.json`` in its folder —
the gates taking requests now — for whatever routes clients to the fleet.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import shutil
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fleetslo.control.local.fleet import LocalFleet, LocalReplica, Phase
from fleetslo.control.local.replica import Ports, ReplicaRecipe
from fleetslo.core.errors import ConfigError
from fleetslo.core.spec import LocalFleet as LocalFleetSpec
from fleetslo.core.spec import Target

log = logging.getLogger("fleetslo.actuators.local")


@dataclass
class CommandRecipe:
    """Engine command from the spec's template, the standard sidecar in front of it."""

    spec: LocalFleetSpec
    model_name: str
    token_file: Path
    log_dir: Path
    slo_ttft_s: float
    slo_tpot_s: float
    max_inflight: int | None = None
    sidecar_interval_s: float = 1.0
    python: str = sys.executable
    #: A replica started by ``scale`` needs no simulated cold start: its real start is its cold start.
    cold_start_s: float = 0.0
    _ordinal: itertools.count[int] = field(default_factory=itertools.count)

    def engine_argv(self, ports: Ports, *, cold_start_s: float, started_at: float) -> list[str]:
        replica = next(self._ordinal)
        cpus = self.spec.cpus[replica % len(self.spec.cpus)] if self.spec.cpus else ""
        values = {
            "port": str(ports.engine),
            "model_name": self.model_name,
            "cpus": cpus,
            "replica": str(replica),
        }
        argv = [_fill(part, values) for part in self.spec.command]
        env = [f"{k}={_fill(v, values)}" for k, v in self.spec.env.items()]
        prefix = ["env", *env] if env else []
        if cpus:
            prefix = [_taskset(), "-c", cpus, *prefix]
        return [*prefix, *argv]

    def sidecar_argv(self, ports: Ports) -> list[str]:
        standard = ReplicaRecipe(
            profile="", model_name=self.model_name, speedup=1.0, cold_start_s=0.0, token_file=self.token_file,
            log_dir=self.log_dir, slo_ttft_s=self.slo_ttft_s, slo_tpot_s=self.slo_tpot_s,
            max_inflight=self.max_inflight, sidecar_interval_s=self.sidecar_interval_s, python=self.python,
        )  # fmt: skip
        return standard.sidecar_argv(ports)


def _fill(template: str, values: dict[str, str]) -> str:
    try:
        return template.format(**values)
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(
            f"target.local: {template!r}: unknown placeholder {exc} (known: {', '.join(sorted(values))})"
        ) from None


def _taskset() -> str:
    found = shutil.which("taskset")
    if found is None:
        raise ConfigError("target.local.cpus: binding replicas to CPUs needs taskset (util-linux)")
    return found


#: Where a ``TemplateFleet`` lists the gates that take requests now (for a router or a client).
ENDPOINTS_FILE = "endpoints.json"


class TemplateFleet(LocalFleet):
    """``LocalFleet`` with a start timeout, process-group signals and a live endpoints file."""

    def __init__(
        self, target: Target, recipe: CommandRecipe, clock: Callable[[], float], **kw: float
    ) -> None:
        # CommandRecipe has every member of ReplicaRecipe that LocalFleet uses (argvs, names, log_dir).
        super().__init__(target, recipe, clock, **kw)  # type: ignore[arg-type]
        self.start_timeout = recipe.spec.start_timeout
        self.endpoints_path = recipe.log_dir / ENDPOINTS_FILE
        self._published: list[tuple[str, str]] | None = None

    def _step(self, replica: LocalReplica, poll_ready: bool) -> None:
        if replica.phase is Phase.STARTING and self.clock() - replica.requested_at > self.start_timeout:
            log.warning("%s: not healthy after %.0fs, stopping it (logs in %s)", replica.name,
                        self.start_timeout, self.recipe.log_dir)  # fmt: skip
            with self._lock:
                self._terminate(replica)
            return
        super()._step(replica, poll_ready)

    def _publish(self) -> None:
        """LocalFleet's snapshot, and the endpoints file whenever the serving gates change (written
        atomically: a reader never sees half a file)."""
        super()._publish()
        gates = self.gates()
        if not hasattr(self, "endpoints_path") or gates == self._published:
            return  # unchanged, or LocalFleet's own constructor publishing before ours has run
        self._published = gates
        temporary = self.endpoints_path.with_suffix(".tmp")
        temporary.write_text(json.dumps([{"name": n, "url": u} for n, u in gates]) + "\n", encoding="utf-8")
        temporary.replace(self.endpoints_path)

    def _terminate(self, replica: LocalReplica) -> None:
        super()._terminate(replica)
        _signal_groups(replica, signal.SIGTERM)

    def _retire(self, replica: LocalReplica) -> None:
        _signal_groups(replica, signal.SIGKILL)  # whatever the leader left behind
        super()._retire(replica)


def _signal_groups(replica: LocalReplica, sig: signal.Signals) -> None:
    # Each process was started in its own session, so its pid is its process group's id.
    for process in replica.processes:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
