"""``fleetslo exporter`` as a real process: serves /metrics for a fake vLLM, exits 0 on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fleetslo.testing import FakeVllmServer, replay_page

from tests.prometheus import free_port
from tests.support import AFTER_LOAD, capture

pytestmark = pytest.mark.integration


def wait_for(url: str, check: str, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            text = httpx.get(url, timeout=1).text
            if check in text:
                return text
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} never showed {check!r}")


def test_the_exporter_process_serves_signals_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "exporter.log"
    with FakeVllmServer(replay_page(capture(AFTER_LOAD), 20.0)) as fake, log.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "fleetslo.cli", "exporter", "--vllm-url", fake.url,
             "--listen", f"127.0.0.1:{port}", "--interval", "200ms", "--windows", "1s", "--slo-ttft", "2s"],
            stderr=stderr,
        )  # fmt: skip
        try:
            page = wait_for(  # the log is in the failure message below if this times out
                f"http://127.0.0.1:{port}/metrics", 'fleetslo_ttft_seconds{model_name="tiny-llama"'
            )
            assert 'fleetslo_engine_up{model_name="tiny-llama"} 1.0' in page
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=10) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
