"""The fresh shapes: eight workloads apart from every other set, each the shape its name says."""

from __future__ import annotations

from fleetslo.sim.workload import Request, Trace

from benchmarks.bench_policy import choose
from benchmarks.fresh import FRESH, _conv, on_off
from benchmarks.heldout import HELDOUT, VARIANTS
from benchmarks.probes import PROBES
from benchmarks.workloads import WORKLOADS


def _per_minute(trace: Trace) -> list[int]:
    counts = [0] * 60
    for r in trace.requests:
        counts[min(59, int(r.arrival_s // 60))] += 1
    return counts


def test_the_fresh_set_is_apart_from_every_other_set_and_selectable_on_its_own() -> None:
    names = {w.name for w in FRESH}
    assert len(names) == len(FRESH) == 8 and not names & {
        w.name for w in WORKLOADS + HELDOUT + VARIANTS + PROBES
    }
    assert [w.name for w in choose("fresh", False, "")] == [w.name for w in FRESH]


def test_on_off_keeps_only_the_on_minutes() -> None:
    trace = Trace(tuple(Request(float(t), 100, 10) for t in range(0, 1440, 10)), "every 10 s")
    kept = on_off(trace, 480.0, 240.0)
    assert kept.requests and all(r.arrival_s % 720.0 < 480.0 for r in kept.requests)
    assert len(kept.requests) == 96  # 2 periods x 48 of every 72


def test_the_dip_thins_only_its_twenty_minutes_and_is_deterministic() -> None:
    workload = next(w for w in FRESH if w.name.startswith("dip to 0.3x"))
    dipped, again, whole = workload.build(), workload.build(), _conv(10)

    def split(trace: Trace) -> tuple[list[Request], list[Request]]:
        inside = [r for r in trace.requests if 900.0 <= r.arrival_s < 2100.0]
        return inside, [r for r in trace.requests if not 900.0 <= r.arrival_s < 2100.0]

    (kept, outside), (all_inside, all_outside) = split(dipped), split(whole)
    assert 0.27 < len(kept) / len(all_inside) < 0.33
    assert outside == all_outside
    assert dipped.requests == again.requests


def test_the_swing_and_the_gaps_are_what_their_names_say() -> None:
    swing = next(w for w in FRESH if w.name.startswith("x4 swing")).build()
    minutes = _per_minute(swing)
    assert max(minutes) > 3.3 * min(minutes)  # 30/s x (1 +- 0.6): 48/s at the peaks, 12/s between
    assert min(minutes[8:12]) > 2 * max(minutes[18:22])  # a peak at 10 min, a trough at 20
    gaps = _per_minute(next(w for w in FRESH if w.name.startswith("on 8 min")).build())
    assert all(gaps[m] == 0 for m in range(60) if m % 12 >= 8)
    assert all(gaps[m] > 0 for m in range(60) if m % 12 < 8)
