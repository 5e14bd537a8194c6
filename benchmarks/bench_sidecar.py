"""CPU and memory of a running sidecar at a 5 s interval, scraped by a Prometheus-like client.

Starts ``fleetslo exporter`` as a real process against a fake vLLM serving a live-growing real
capture (one model, one engine: what a replica serves), fetches the sidecar's /metrics every 5 s
as Prometheus would, and reads the process's CPU time and RSS from /proc. The CPU share is CPU
seconds over wall seconds, measured after a warm-up. Targets (issue 2): < 1% of one core and
< 80 MB RSS. The same run is repeated with the 8-model x 4-engine page for scale.
Set BENCH_SIDECAR_SECONDS to change the measured duration (default 60).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
from fleetslo.control.local.replica import free_port
from fleetslo.testing import FakeVllmServer, replay_page

from benchmarks.pages import CAPTURE, large_page

INTERVAL = 5.0
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run(page: str, seconds: float) -> dict[str, float]:
    port = free_port()
    with FakeVllmServer(replay_page(page, 20.0)) as fake:
        cmd = [
            sys.executable, "-m", "fleetslo.cli", "--log-level", "error", "exporter",
            "--vllm-url", fake.url, "--listen", f"127.0.0.1:{port}", "--interval", f"{INTERVAL}s",
            "--slo-ttft", "2s", "--slo-tpot", "50ms",
        ]  # fmt: skip
        process = subprocess.Popen(cmd)
        try:
            url = f"http://127.0.0.1:{port}/metrics"
            _wait(url)
            time.sleep(2 * INTERVAL)  # warm-up: imports done, first windows filling
            cpu0, wall0 = cpu_seconds(process.pid), time.monotonic()
            peak = 0.0
            while time.monotonic() - wall0 < seconds:
                httpx.get(url, timeout=5)
                peak = max(peak, rss_mb(process.pid))
                time.sleep(INTERVAL)
            cpu = cpu_seconds(process.pid) - cpu0
            wall = time.monotonic() - wall0
            return {
                "cpu_percent_of_core": 100 * cpu / wall, "rss_mb_peak": peak, "seconds": wall,
                "scrape_errors": _scrape_errors(httpx.get(url, timeout=5).text),
            }  # fmt: skip
        finally:
            process.terminate()
            process.wait(timeout=10)


def _scrape_errors(page: str) -> float:
    """Failed scrapes of the fake vLLM during the run: a figure is only valid with none."""
    total = 0.0
    for line in page.splitlines():
        if line.startswith("fleetslo_engine_scrape_errors_total"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _wait(url: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError("sidecar did not start")


def main() -> dict[str, dict[str, float]]:
    seconds = float(os.environ.get("BENCH_SIDECAR_SECONDS", "60"))
    results = {
        "replica page (1 model, 1 engine)": run(CAPTURE.read_text(encoding="utf-8"), seconds),
        "large page (8 models x 4 engines)": run(large_page(), seconds),
    }
    for name, r in results.items():
        print(f"{name:36s} cpu {r['cpu_percent_of_core']:5.2f}% of a core   rss {r['rss_mb_peak']:5.1f} MB"
              f"   over {r['seconds']:.0f} s, {r['scrape_errors']:.0f} failed scrapes"
              "   (targets < 1%, < 80 MB)")  # fmt: skip
    return results


if __name__ == "__main__":
    main()
