"""``fleetslo demo`` end to end, as a user runs it: exit 0, a report, no process left behind, and
numbers that agree with ``fleetslo simulate`` on the same trace and settings — with a CPU hog
beside it (``CpuHog``), because the verdict must be the controller's on a busy laptop too.

**The tolerance, and why.** The live run and the simulation share the engine model, the policy, the
observation code and the judge, but the live run happens in real time at ``speedup``× speed:

* every request's latency includes the real path (client → gate → engine → back), and whatever the
  host lags. The demo keeps the lag of each part (load generator, clients and router, engines,
  controller) within 5 % of the TTFT target in simulated seconds, and the token path's (clients,
  router, engines) within what moves the median request's TPOT by 5 % of its target, or starts
  again slower (a run it judges kept up), so only requests within ~0.1-0.3 s of a target can be
  judged differently: request attainment within **0.05**;
* the controller decides at the same simulated instants, but reads pages up to one sidecar interval
  old (5 s simulated) and sees a replica ready within one poll (0.5 s simulated) of the simulator;
  and the batch limit is the gate's (requests in flight) rather than the engine's (running
  sequences), so under a binding limit the queue sits in the gate, out of vLLM's TTFT and waiting
  gauge. A scale step can move by one decision interval (15 s) either way, and the policy sizes
  with margins it measures from the p90s it observes (``calibration``): the live p90s carry the
  host's lag, so the live fleet may hold one replica more (or less) for part of the run. So: the
  fleets' mean sizes within **one replica** of each other (``MEAN_REPLICAS_TOLERANCE``; a relative
  bound on replica-hours is less than one replica's worth on a fleet of 3-5, and failed on exactly
  that: 4.02 live against 3.47 simulated), and at most **one** one-minute window judged differently.

Measured on 2 cores shared with other work (load average 7-12) plus the hog, 40 s runs: the host
fell behind 10× (load generator p90 lag 13-29 ms of wall time, 0.13-0.29 s simulated), the demo
started again at 3.3-5×, and then agreed: request attainment 0.3 % apart, replica-hours 1.7 %, no
window apart. Without the lag check a 10× run on the same machine drifted 11.7 % on replica-hours;
before the gates measured in simulated seconds, the controller saw latencies 10× too small and
the verdict followed the host load (95 %, 60 %, 10 % of minutes for one scenario).

With the TTFT budget alone, and two checks behind in a row to give up, runs that kept up still
parted: live mean replicas 3.46-4.40 against 3.47 simulated (one CI run 4.64), the live side
learning a larger TPOT margin from lag that TPOT divides only by a 13-token answer's 12 tokens.
With one check to give up and the token path's budget (0.03 s here), 8 runs beside a busy loop or
a whole test suite restarted in 6 (at 2.1-5×; judged runs 43-194 s of wall time) and all agreed:
mean replicas 3.47 against 3.47, request attainment within 0.004.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import ROOT, require_tool

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1200)]

CHROMIUM = "/usr/bin/chromium"
DURATION = "40s"
#: Wall seconds a demo may take: 40 s, and again slower if the host fell behind (measured: a run
#: restarted twice, at 10× and then 5×, and judged at 2.1× took about 320 s in all; 1× is 400 s more).
DEMO_TIMEOUT_S = 1000
REQUESTS_TOLERANCE, MEAN_REPLICAS_TOLERANCE, WINDOWS_TOLERANCE = 0.05, 1.0, 1


def _start_time(pid: int) -> str | None:
    """The start time of a live (non-zombie) process, to tell it from a later one with the same PID."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


@dataclass
class Descendants:
    """Every process the demo starts (watched through /proc while it runs)."""

    root: int
    seen: dict[int, str] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def watch(self) -> None:
        while not self.stop.wait(0.1):
            family = {self.root}
            for entry in Path("/proc").iterdir():
                if entry.name.isdigit() and _parent(int(entry.name)) in family | set(self.seen):
                    started = _start_time(int(entry.name))
                    if started is not None:
                        self.seen.setdefault(int(entry.name), started)
                        family.add(int(entry.name))

    def alive(self) -> list[int]:
        return [pid for pid, started in self.seen.items() if _start_time(pid) == started]


@dataclass
class Ran:
    returncode: int
    output: str
    descendants: Descendants
    report: Path

    @property
    def results(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.report.parent / "report-files" / "results.json").read_text())
        return data


class CpuHog:
    """A bounded busy loop in its own process: the "other core busy" of a laptop doing something
    else. It stops by itself after ``seconds`` and is killed on exit in any case."""

    def __init__(self, seconds: float) -> None:
        loop = f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"
        self.process = subprocess.Popen([sys.executable, "-c", loop])

    def __enter__(self) -> CpuHog:
        return self

    def __exit__(self, *_: object) -> None:
        self.process.kill()
        self.process.wait()


def run_demo(
    tmp: Path,
    *args: str,
    interrupt_after: str | None = None,
    before: Callable[[str], None] = lambda _: None,
    interrupt_after_s: float = 0.0,
) -> Ran:
    """Run ``fleetslo demo``; with ``interrupt_after``, Ctrl-C ``interrupt_after_s`` wall seconds
    after the first output line containing it."""
    report = tmp / "report.html"
    command = [
        sys.executable,
        "-m",
        "fleetslo.cli",
        "demo",
        "--duration",
        DURATION,
        "--report",
        str(report),
        *args,
    ]
    process = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    descendants = Descendants(process.pid)
    watcher = threading.Thread(target=descendants.watch, daemon=True)
    watcher.start()
    lines: list[str] = []
    timer: threading.Timer | None = None
    try:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if timer is not None and "starting again at" in line and timer.is_alive():
                timer.cancel()  # the host fell behind: interrupt the run that replaces this one
                timer = None
            if interrupt_after is not None and interrupt_after in line and timer is None:
                before("".join(lines))
                # What Ctrl-C in a terminal does: SIGINT to the foreground process group.
                timer = threading.Timer(interrupt_after_s, os.killpg, (process.pid, signal.SIGINT))
                timer.start()
        returncode = process.wait(timeout=DEMO_TIMEOUT_S)
    finally:
        if timer is not None:
            timer.cancel()
        failed = process.poll() is None
        if failed:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if process.stdout is not None:
            process.stdout.close()
        time.sleep(0.3)
        descendants.stop.set()
        watcher.join()
        if failed:  # a run the test gave up on must not leave replicas or Prometheus behind
            for pid in descendants.alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    return Ran(returncode, "".join(lines), descendants, report)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ran]:
    """The demo with a CPU hog beside it: the agreement must hold on a busy machine too."""
    with CpuHog(DEMO_TIMEOUT_S):
        yield run_demo(tmp_path_factory.mktemp("demo"))


def test_the_demo_exits_0_writes_the_report_and_leaves_no_process(demo: Ran) -> None:
    assert demo.returncode == 0, demo.output[-3000:]
    assert len(demo.descendants.seen) >= 4, "it should have run replicas (two processes each)"
    assert demo.descendants.alive() == [], demo.output[-2000:]
    page = demo.report.read_text(encoding="utf-8")
    assert "fleetslo · live demo" in page and "fleetslo · simulated" in page and "best of 7 baselines" in page
    verdict = demo.output.strip().splitlines()[-1]
    assert verdict.startswith("fleetslo held the SLO in ") and "the best baseline, " in verdict, verdict
    live = demo.results["live"]
    assert live["completed"] > 0.95 * live["requests"] and live["rejected"] == 0
    # The run judged is one the host kept up with (a slower one if it had to start again), and
    # the output, the report and the results say how it went.
    host = live["host"]
    assert host["kept_up"] is True and host["checks"] > 0, host
    assert "Host: kept up with" in demo.output and "Host: kept up with" in page
    assert len(host["restarts"]) == demo.output.count("starting again at")


def test_the_demo_agrees_with_fleetslo_simulate_on_the_same_trace(demo: Ran) -> None:
    results = demo.results
    fleetslo = shutil.which("fleetslo", path=str(Path(sys.executable).parent))
    command = [fleetslo or "fleetslo", *results["simulate_command"][1:], "--json"]
    simulated = json.loads(
        subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    )
    for key in ("window_attainment", "request_attainment", "replica_hours", "requests"):
        assert simulated[key] == pytest.approx(results["simulated"][key]), (
            key
        )  # the printed command replays it
    live = results["live"]
    windows = len([w for w in live["windows"] if w["met"] is not None])
    assert live["requests"] == simulated["requests"]
    assert abs(live["request_attainment"] - simulated["request_attainment"]) <= REQUESTS_TOLERANCE
    assert abs(live["mean_replicas"] - simulated["mean_replicas"]) <= MEAN_REPLICAS_TOLERANCE, _scale_steps(
        live, simulated
    )
    assert (
        abs(live["window_attainment"] - simulated["window_attainment"]) * windows <= WINDOWS_TOLERANCE + 1e-9
    )


def _scale_steps(live: dict[str, Any], simulated: dict[str, Any]) -> str:
    """Both fleets' scale events, for a failure to show where the two runs parted."""
    lines = [f"mean replicas {live['mean_replicas']:.2f} live, {simulated['mean_replicas']:.2f} simulated"]
    for name, run in (("live", live), ("simulated", simulated)):
        for e in run["events"]:
            lines.append(f"{name} {e['t_s']:g}s {e['replicas_from']}->{e['replicas_to']}: {e['message']}")
        for w in run["windows"]:
            lines.append(f"{name} window {w['start_s']:g}s p90 TTFT {w['p90_ttft_s']} TPOT {w['p90_tpot_s']}")
    return "\n".join(lines)


#: Measures the laid-out page in the browser: how far the summary table and the page overflow
#: their boxes horizontally, and which strip labels fall outside their SVG (clipped).
LAYOUT_PROBE = """<script>
const wrap = document.querySelector('section .table-wrap');
const labels = [...document.querySelectorAll('svg.strip text')];
const layout = {
  summary: wrap.scrollWidth - wrap.clientWidth,
  page: document.documentElement.scrollWidth - document.documentElement.clientWidth,
  clipped: labels.filter(t => { const b = t.getBBox(); return b.x < 0 || b.x + b.width > 1080; })
    .map(t => t.textContent),
};
document.body.setAttribute('data-layout', JSON.stringify(layout));
</script>"""


def _chromium(tmp_path: Path, width: int, *args: str) -> subprocess.CompletedProcess[str]:
    if not Path(CHROMIUM).exists():
        hint = f"{CHROMIUM} not found: install it with `apt-get install -y --no-install-recommends chromium`"
        if os.environ.get("CI") == "true":
            pytest.fail(hint)
        pytest.skip(hint)
    return subprocess.run(
        [
            CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={width},2600", *args,
        ],
        check=True, capture_output=True, text=True, timeout=90,
    )  # fmt: skip


@pytest.mark.parametrize("width", [1400, 800])
def test_the_report_lays_out_in_headless_chromium(demo: Ran, tmp_path: Path, width: int) -> None:
    """At a desktop and a narrow width: a screenshot with the plots drawn (kept under
    $FLEETSLO_SCREENSHOTS when set, to look at), and the laid-out page measured in the browser."""
    page = demo.report.read_text(encoding="utf-8")
    assert "<svg" in page and "<script" not in page
    png = tmp_path / f"report-{width}.png"
    _chromium(tmp_path, width, f"--screenshot={png}", demo.report.as_uri())
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000, "an empty page would be a few KB"
    if keep := os.environ.get("FLEETSLO_SCREENSHOTS"):
        shutil.copy(png, Path(keep) / png.name)
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", LAYOUT_PROBE + "</body>"), encoding="utf-8")
    dom = _chromium(tmp_path, width, "--dump-dom", probe.as_uri()).stdout
    found = re.search(r'data-layout="([^"]*)"', dom)
    assert found is not None, dom[-2000:]
    layout = json.loads(found.group(1).replace("&quot;", '"'))
    assert layout["page"] == 0, f"the page scrolls sideways at {width}px"
    assert layout["clipped"] == [], f"strip labels clipped at {width}px"
    if width >= 1400:
        assert layout["summary"] == 0, f"the summary table overflows by {layout['summary']}px at {width}px"


def test_prometheus_scrapes_the_demo_and_ctrl_c_still_stops_everything(tmp_path: Path) -> None:
    require_tool("prometheus", "apt-get install prometheus")
    seen: dict[str, Any] = {}

    def look(output: str) -> None:
        # The newest one: a run the host could not keep up with starts again, Prometheus too.
        urls = re.findall(r"Prometheus: (http://\S+)", output)
        assert urls, output
        base = urls[-1]
        seen["rules"] = httpx.get(f"{base}/api/v1/rules", timeout=5).json()["data"]["groups"]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            targets = httpx.get(f"{base}/api/v1/targets", timeout=5).json()["data"]["activeTargets"]
            seen["up"] = {t["labels"]["job"] for t in targets if t["health"] == "up"}
            if len(seen["up"]) == 3:
                return
            time.sleep(0.2)

    ran = run_demo(
        tmp_path,
        "--scenario",
        "spike",
        "--prometheus",
        interrupt_after="router: http://",
        before=look,
        interrupt_after_s=15.0,
    )
    assert seen["up"] == {"vllm", "fleetslo-sidecar", "fleetslo-controller"}
    assert {g["name"] for g in seen["rules"]} == {"fleetslo-slo-demo", "fleetslo-health"}
    assert "rule groups loaded: fleetslo-health, fleetslo-slo-demo" in ran.output
    assert ran.returncode == 130, ran.output[-3000:]
    assert ran.descendants.alive() == []
    assert ran.report.exists()
    # Ctrl-C at 15 s of 40: judged on the part that ran, against the same part simulated.
    results = ran.results
    live, simulated = results["live"], results["simulated"]
    assert live["interrupted"] is True and live["judged_until_s"] is not None
    assert live["judged_until_s"] < 0.6 * 400, "about 15 s of the 40 s (400 simulated s) ran"
    assert live["requests"] == simulated["requests"] == results["baseline"]["requests"] < 1000
    assert "--duration" in results["simulate_command"]
    assert abs(live["request_attainment"] - simulated["request_attainment"]) <= REQUESTS_TOLERANCE
    assert ran.output.strip().splitlines()[-1].startswith("INTERRUPTED — judged on the first ")
