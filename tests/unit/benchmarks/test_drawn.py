"""The drawn workloads: a seed decides everything, the ranges are the documented ones, and the
reshaping and sizing do what they say."""

from __future__ import annotations

import math

from fleetslo.sim.workload import Request, Trace

from benchmarks.drawn import COUNT, MAX_REQUESTS, draw, drawn, reshaped, sized


def test_a_seed_draws_the_same_workload_every_time_and_seeds_differ() -> None:
    first = [draw(s) for s in range(COUNT)]
    again = [draw(s) for s in range(COUNT)]
    described = [
        (d.source, d.curve, d.ttft_s, d.tpot_s, d.cold_start_s, d.profile, d.peak_need) for d in first
    ]
    assert described == [
        (d.source, d.curve, d.ttft_s, d.tpot_s, d.cold_start_s, d.profile, d.peak_need) for d in again
    ]
    assert len(set(described)) == COUNT


def test_two_hundred_draws_stay_inside_the_documented_ranges_and_cover_them() -> None:
    draws = [draw(s) for s in range(200)]
    assert all(0.75 <= d.ttft_s <= 8.0 and 0.035 <= d.tpot_s <= 0.1 for d in draws)
    assert all(60.0 <= d.cold_start_s <= 600.0 and 6 <= d.peak_need <= 60 for d in draws)
    for t in (0.0, 900.0, 1800.0, 3599.0):
        assert all(0.2 <= d.shape(t) <= 4.0 for d in draws)
    sources = {d.source.split(" ")[0].rstrip(",") for d in draws}
    assert {"azure-conv", "azure-code", "mooncake", "ServeGen", "Poisson", "gamma"} <= sources
    curves = {d.curve.split(" ")[0] for d in draws}
    assert {"flat", "swing", "down"} <= curves and any("step at" in d.curve for d in draws)
    assert any("ramp" in d.curve for d in draws) and any(", x" in d.curve for d in draws)  # two spikes
    assert {d.kind for d in draws} == {"smooth", "bursty", "step"}
    assert all((d.kind == "step") == (d.step_at_s is not None) for d in draws)


def test_reshaping_follows_the_curve_minute_by_minute() -> None:
    # one request every 0.1 s for an hour; the curve doubles the rate from 20 to 40 minutes
    trace = Trace(tuple(Request(0.1 * k, 200, 20) for k in range(36_000)), "10/s")
    shaped = reshaped(trace, lambda t: 2.0 if 1200.0 <= t < 2400.0 else 1.0, seed=3)
    minutes = [0] * 60
    for r in shaped.requests:
        minutes[min(59, int(r.arrival_s // 60))] += 1
    before, during, after = minutes[2:18], minutes[22:38], minutes[42:58]
    assert all(525 <= m <= 675 for m in before + after)  # 600 a minute (binomial, sd 17)
    assert all(1150 <= m <= 1250 for m in during)  # all kept, copies jittered
    assert reshaped(trace, lambda t: 2.0 if 1200.0 <= t < 2400.0 else 1.0, seed=3).requests == shaped.requests


def test_a_drawn_workload_is_sized_to_its_fleet_and_builds_the_same_trace_twice() -> None:
    d = next(d for d in (draw(s) for s in range(COUNT)) if d.source.startswith(("Poisson", "gamma")))
    workload, scale = sized(d)
    trace = workload.build()
    assert workload.name.startswith(f"drawn {d.seed}: {d.source}")
    assert scale > 0 and math.isfinite(scale) and 0 < len(trace) <= 1.05 * MAX_REQUESTS
    assert trace.requests == workload.build().requests
    assert (
        workload.kind == d.kind and workload.cold_start_s == d.cold_start_s and workload.profile == d.profile
    )


def test_the_set_starts_where_it_is_told_and_keeps_only_the_seeds_named() -> None:
    picked = drawn(count=3, words=["drawn 21:"], first=20)
    assert [w.name.split(":")[0] for w in picked] == ["drawn 21"]
    assert drawn(count=2, words=["drawn 5:"], first=20) == ()  # seed 5 is not among 20-21
