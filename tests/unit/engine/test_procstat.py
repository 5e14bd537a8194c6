"""Reading a local server's CPU time and run-queue wait from /proc, and finding it by its port:
against real processes and real sockets, and with what is gone reported as unreadable."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from fleetslo.engine.bench import difference
from fleetslo.engine.procstat import ProcessTimes, listening_pid, process_times

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")


def test_cpu_time_grows_with_work_done() -> None:
    before = process_times(os.getpid())
    sum(i * i for i in range(300_000))
    after = process_times(os.getpid())
    assert before is not None and after is not None
    spent = difference(before, after)
    assert spent is not None and spent.cpu_s > 0 and spent.wait_s >= 0


def test_a_process_that_is_gone_is_unreadable_not_zero() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert process_times(child.pid) is None
    assert difference(ProcessTimes(1.0, 1.0), None) is None
    assert difference(ProcessTimes(2.0, 1.0), ProcessTimes(1.0, 1.0)) is None  # a thread left


def test_the_listener_of_a_port_is_found() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert listening_pid(port) == os.getpid()
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening
        assert listening_pid(port) is None
