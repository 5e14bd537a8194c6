"""How one local replica is started and stopped: its loopback ports and its two commands.

A replica is a ``fleetslo sim-server`` (the simulated vLLM) and a ``fleetslo exporter`` with the gate
in front of it (the sidecar), each a ``python -m fleetslo.cli`` process of the running interpreter.
``ReplicaRecipe`` builds their command lines for a given set of ports; ``reap`` ends a process.
Commands and ports only: ``fleetslo.control.local.fleet`` decides when replicas start and stop.
"""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

LOOPBACK = "127.0.0.1"


#: Linux's default ephemeral range, used where ``/proc`` does not say (another OS, a sandbox).
_EPHEMERAL_DEFAULT = (32768, 60999)
#: How many ports below the ephemeral range ``free_port`` draws from.
_BAND = 12000
_handed_out: set[int] = set()
_handed_out_lock = threading.Lock()


def ephemeral_range(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> tuple[int, int]:
    """The ports the kernel gives outgoing connections (and ``bind(port 0)``), inclusive."""
    try:
        low, high = (int(field) for field in path.read_text().split())
    except (OSError, ValueError):
        return _EPHEMERAL_DEFAULT
    return (low, high) if 0 < low <= high <= 65535 else _EPHEMERAL_DEFAULT


def free_port(rng: random.Random | None = None) -> int:
    """A loopback TCP port nobody listens on, for a child process to bind a moment later.

    Not one the kernel hands out itself (``bind`` to port 0): those come from the ephemeral range,
    from which every outgoing connection also takes its local port, and the demo opens hundreds a
    second (load, probes, scrapes), so one of them could take the port between this pick and the
    child's ``bind`` — "address already in use" (seen in CI). Ports below the ephemeral range are
    never given to outgoing connections, so only another listener can race for one; each is tried
    here first, and never handed out twice by this process.
    """
    draw = rng or random.SystemRandom()
    low, high = ephemeral_range()
    band = (max(1024, low - _BAND), low - 1) if low > 1024 + 1000 else (high + 1, 65535)
    with _handed_out_lock:
        for _ in range(256):
            port = draw.randint(*band)
            if port not in _handed_out and _bindable(port):
                _handed_out.add(port)
                return port
    with socket.socket() as s:  # a crowded band: the kernel's pick, as before
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def release(ports: Ports) -> None:
    """Let ``free_port`` hand these out again (their processes have exited): a long demo starts
    thousands of replicas, more than the band below the ephemeral range holds."""
    with _handed_out_lock:
        _handed_out.difference_update((ports.engine, ports.sidecar, ports.gate, ports.admin))


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


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


def log_path(recipe: ReplicaRecipe, name: str, part: str) -> Path:
    """Where a replica's ``part`` ("engine" or "sidecar") writes its output."""
    return recipe.log_dir / f"{name}-{part}.log"


def spawn(
    recipe: ReplicaRecipe, name: str, ports: Ports, cold_start_s: float, started_at: float, *, mode: str
) -> tuple[list[subprocess.Popen[bytes]], list[IO[bytes]]]:
    """Start a replica's two processes, each in its own session, writing to its log (opened with
    ``mode``: "wb" for a first start, "ab" to keep an earlier attempt's lines). On an ``OSError``
    (out of processes, an unwritable log) whatever it started is stopped before it is raised."""
    logs = [log_path(recipe, name, part).open(mode) for part in ("engine", "sidecar")]
    argvs = [
        recipe.engine_argv(ports, cold_start_s=cold_start_s, started_at=started_at),
        recipe.sidecar_argv(ports),
    ]
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for argv, out in zip(argvs, logs, strict=True):
            processes.append(
                subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
    except OSError:
        for process in processes:
            reap(process, 0.0)
        for out in logs:
            out.close()
        raise
    return processes, logs


def lost_its_port(recipe: ReplicaRecipe, name: str) -> bool:
    """Whether one of the replica's processes says, at the end of its log, that it could not
    listen because the address was in use (another listener took the port after ``free_port``)."""
    for part in ("engine", "sidecar"):
        try:
            with log_path(recipe, name, part).open("rb") as out:
                out.seek(max(0, out.seek(0, 2) - 8192))
                tail = out.read().decode("utf-8", "replace").lower()
        except OSError:
            continue
        if "address already in use" in tail:
            return True
    return False
