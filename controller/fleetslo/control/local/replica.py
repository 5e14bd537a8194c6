"""How one local replica is started and stopped: its loopback ports and its two commands.

A replica is a ``fleetslo sim-server`` (the simulated vLLM) and a ``fleetslo exporter`` with the gate
in front of it (the sidecar), each a ``python -m fleetslo.cli`` process of the running interpreter.
``ReplicaRecipe`` builds their command lines for a given set of ports; ``reap`` ends a process.
Commands and ports only: ``fleetslo.control.local.fleet`` decides when replicas start and stop.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A TCP port the OS has just handed out on loopback (free unless someone races for it)."""
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True, slots=True)
class Ports:
    engine: int
    sidecar: int
    gate: int
    admin: int

    @classmethod
    def pick(cls) -> Ports:
        return cls(free_port(), free_port(), free_port(), free_port())


@dataclass(frozen=True, slots=True)
class ReplicaRecipe:
    """How to start one replica: the two commands, with the ports filled in per replica."""

    profile: str
    model_name: str
    speedup: float
    #: Simulated cold start of replicas started by ``scale`` (the warm ones start with none).
    cold_start_s: float
    token_file: Path
    log_dir: Path
    slo_ttft_s: float
    slo_tpot_s: float
    buckets: Mapping[str, Sequence[float]] | None = None
    #: The gate's limit at start (the engine's ``max_num_seqs``: no tighter than the engine itself).
    max_inflight: int | None = None
    sidecar_interval_s: float = 0.5
    #: Each process's ``--log-level`` (its log file under ``log_dir``): warnings, or everything.
    log_level: str = "warning"
    python: str = sys.executable

    def engine_argv(self, ports: Ports, *, cold_start_s: float, started_at: float) -> list[str]:
        argv = [
            self.python,
            "-m",
            "fleetslo.cli",
            "--log-level",
            self.log_level,
            "sim-server",
            "--profile",
            self.profile,
            "--model-name",
            self.model_name,
            "--listen",
            f"{LOOPBACK}:{ports.engine}",
            "--speedup",
            repr(self.speedup),
            "--cold-start",
            repr(cold_start_s),
            "--started-at",
            repr(started_at),
        ]
        if self.buckets:
            argv += ["--custom-histogram-buckets", json.dumps({k: list(v) for k, v in self.buckets.items()})]
        return argv

    def sidecar_argv(self, ports: Ports) -> list[str]:
        argv = [
            self.python,
            "-m",
            "fleetslo.cli",
            "--log-level",
            self.log_level,
            "exporter",
            "--vllm-url",
            f"http://{LOOPBACK}:{ports.engine}",
            "--listen",
            f"{LOOPBACK}:{ports.sidecar}",
            "--interval",
            f"{self.sidecar_interval_s}s",
            "--gpu-backend",
            "none",
            "--slo-ttft",
            f"{self.slo_ttft_s}s",
            "--slo-tpot",
            f"{self.slo_tpot_s}s",
            "--gate-listen",
            f"{LOOPBACK}:{ports.gate}",
            "--gate-admin-listen",
            f"{LOOPBACK}:{ports.admin}",
            "--admin-token-file",
            str(self.token_file),
            # The queue is the router's business: the gate never turns a request away for waiting.
            "--gate-max-queue",
            "1000000",
            "--gate-queue-timeout",
            "1h",
            # One clock: the gate measures TTFT/TPOT in the sim-server's simulated seconds, as its
            # /metrics page and the SLO targets are (wall seconds would be `speedup` times smaller).
            "--gate-time-scale",
            repr(self.speedup),
        ]
        if self.max_inflight is not None:
            argv += ["--gate-max-inflight", str(self.max_inflight)]
        return argv


def reap(process: subprocess.Popen[bytes], grace: float) -> None:
    """Wait up to ``grace`` seconds for ``process`` to exit after SIGTERM, then kill it."""
    if process.poll() is None and grace <= 0:
        process.kill()
    try:
        process.wait(timeout=grace if grace > 0 else 5.0)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
