"""The live terminal view of the demo: traffic, latency against the targets, the fleet, the decisions.

``Status`` is a plain snapshot (numbers only, built by ``status``); ``render`` turns it into a rich
renderable and ``line`` into one line for logs and CI, where there is no terminal to redraw.
Latencies are the clients' own, exact, over the last simulated minute (what a user felt), next to the
p90s the controller saw in its last observation (bucket-interpolated, as on a real fleet).

Presentation only: it reads numbers, it changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from fleetslo.core.model import ReplicaCounts
from fleetslo.sim.demo.loadgen import LoadGenerator
from fleetslo.sim.result import exact_quantile
from fleetslo.sim.result_types import ScaleEventRecord

#: The sliding window of the live numbers, in simulated seconds.
WINDOW_S = 60.0


@dataclass(frozen=True, slots=True)
class Status:
    title: str
    now: float
    span: float
    wall: float
    arrival_rate: float
    p90_ttft: float | None
    p90_tpot: float | None
    ttft_target: float
    tpot_target: float
    sent: int
    served: int
    rejected: int
    counts: ReplicaCounts
    batch_limit: int
    in_flight: int
    waiting: int
    observed_ttft: float | None
    observed_tpot: float | None
    decisions: Sequence[ScaleEventRecord]
    #: Lines about the run itself (host lag, what Prometheus scrapes), shown under the numbers.
    notes: Sequence[str] = ()


def recent_latency(loadgen: LoadGenerator, now: float, q: float = 0.9) -> tuple[float | None, float | None]:
    """Exact p90 TTFT and TPOT of the requests that arrived in the last ``WINDOW_S`` and finished."""
    ttfts, tpots = [], []
    for served in reversed(loadgen.recent):
        if served.arrival < now - WINDOW_S:
            break
        ttfts.append(served.ttft)
        if served.tpot is not None:
            tpots.append(served.tpot)
    return exact_quantile(q, ttfts), exact_quantile(q, tpots)


def arrival_rate(loadgen: LoadGenerator, now: float) -> float:
    """Requests sent per simulated second over the last window."""
    records, count = loadgen.records, 0
    for record in reversed(records[: loadgen.sent]):
        if record.arrival < now - WINDOW_S:
            break
        count += 1
    return count / min(WINDOW_S, max(now, 1.0))


def _clock(seconds: float) -> str:
    seconds = max(0.0, seconds)
    return f"{int(seconds // 60):d}:{int(seconds % 60):02d}"


def _latency(value: float | None, target: float) -> Text:
    if value is None:
        return Text("—", style="dim")
    unit = f"{value * 1000:.1f} ms" if target < 1 else f"{value:.2f} s"
    goal = f"{target * 1000:g} ms" if target < 1 else f"{target:g} s"
    ok = value <= target
    return Text(f"{unit} / {goal} {'✓' if ok else '✗'}", style="green" if ok else "bold red")


def _short(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"


def render(s: Status) -> RenderableType:
    head = Text.assemble(
        (s.title, "bold"),
        f"   simulated {_clock(s.now)} / {_clock(s.span)}   wall {s.wall:.0f}s",
    )
    numbers = Table.grid(padding=(0, 2))
    numbers.add_column(style="bold")
    numbers.add_column()
    numbers.add_column(style="dim")
    numbers.add_row(
        "traffic", f"{s.arrival_rate:.2f} req/s", f"sent {s.sent} · served {s.served} · rejected {s.rejected}"
    )
    numbers.add_row(
        "p90 TTFT", _latency(s.p90_ttft, s.ttft_target), f"controller saw {_short(s.observed_ttft)}"
    )
    numbers.add_row(
        "p90 TPOT", _latency(s.p90_tpot, s.tpot_target), f"controller saw {_short(s.observed_tpot)}"
    )
    c = s.counts
    numbers.add_row(
        "replicas",
        f"{c.ready} ready · {c.starting} starting · {c.draining} draining",
        f"batch limit {s.batch_limit} · in flight {s.in_flight} · waiting {s.waiting}",
    )
    decisions = Table(title="last decisions", title_justify="left", expand=True, show_edge=False)
    for heading in ("at", "reason", "replicas", "limit", "why"):
        decisions.add_column(
            heading, no_wrap=True, overflow="ellipsis", ratio=1 if heading == "why" else None
        )
    for e in s.decisions:
        moved = (
            f"{e.replicas_from} → {e.replicas_to}" if e.replicas_to != e.replicas_from else str(e.replicas_to)
        )
        decisions.add_row(_clock(e.t_s), e.reason, moved, str(e.batch_limit), e.message)
    note = Text("latency: what clients saw over the last simulated minute", style="dim")
    notes = [Text(n, style="bold yellow" if n.startswith("HOST") else "dim") for n in s.notes]
    return Group(head, numbers, note, *notes, decisions)


def line(s: Status) -> str:
    """The same snapshot as one line (no terminal)."""
    ttft = "—" if s.p90_ttft is None else f"{s.p90_ttft:.2f}s"
    tpot = "—" if s.p90_tpot is None else f"{s.p90_tpot * 1000:.1f}ms"
    last = s.decisions[-1] if s.decisions else None
    why = f" · {last.reason}: {last.message}" if last is not None else ""
    return (
        f"[{_clock(s.now)}/{_clock(s.span)}] {s.arrival_rate:.2f} req/s · p90 TTFT {ttft} · "
        f"p90 TPOT {tpot} · ready {s.counts.ready} starting {s.counts.starting} · limit {s.batch_limit}{why}"
        + "".join(f" · {n}" for n in s.notes)
    )
