"""What one local server process spent: its CPU time and the time it waited for a CPU (Linux /proc).

``fleetslo profile`` reads these around each phase for the API server process of the vLLM it
benchmarks: its CPU seconds are the front end's work (tokenising, detokenising, streaming), and its
run-queue wait says how much longer than that work it took on this host (``cpu_stretch``). Summed
over every thread of the process; the engine core and its workers are other processes and are not
counted. ``listening_pid`` finds the process that listens on a loopback port (a vLLM started here).
Reads only; a process that is gone or unreadable gives ``None``, never 0.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
#: /proc/net/tcp state of a listening socket.
_LISTEN = "0A"


@dataclass(frozen=True, slots=True)
class ProcessTimes:
    """Seconds of CPU a process has used (user + system) and waited runnable for a CPU, so far."""

    cpu_s: float
    wait_s: float


def process_times(pid: int, proc: Path = PROC) -> ProcessTimes | None:
    """The process's totals over all its threads, or ``None`` if it cannot be read."""
    # schedstat (nanoseconds) rather than stat's clock ticks: a phase's front-end work is tens of
    # milliseconds, the size of a tick. A thread that ends in between takes its share with it
    # (vLLM's API server keeps its threads), so a difference that comes out negative is unreadable.
    run_ns = wait_ns = 0
    try:
        for task in (proc / str(pid) / "task").iterdir():
            run, wait = (int(v) for v in (task / "schedstat").read_text().split()[:2])
            run_ns, wait_ns = run_ns + run, wait_ns + wait
    except (OSError, ValueError):
        return None
    return ProcessTimes(run_ns / 1e9, wait_ns / 1e9)


def listening_pid(port: int, proc: Path = PROC) -> int | None:
    """The pid of the process with a TCP socket listening on ``port`` (IPv4 or IPv6), if any."""
    inodes = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if len(parts) > 9 and parts[3] == _LISTEN and int(parts[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(parts[9])
    if not inodes:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for entry in proc.iterdir():
        if entry.name.isdigit() and _holds(entry, wanted):
            return int(entry.name)
    return None


def _holds(process: Path, sockets: set[str]) -> bool:
    try:
        return any(os.readlink(fd) in sockets for fd in (process / "fd").iterdir())
    except OSError:
        return False
