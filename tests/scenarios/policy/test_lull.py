"""A lull: arrivals stop for four minutes and come back at the level they left, replayed on the
simulated MI325X fleet (the chat trace at x6, nothing arriving between 20 and 24 minutes).

The fleet holds its replicas through the lull (peak memory and stabilization). Before, the loads
sized in the lull (nearly nothing) were checked against the traffic that came back, a miss of
hundreds of times, and the load margin multiplied every later load by it: on ServeGen's m-mid
day 6 (``benchmarks/probes.py``), whose data has such gaps, the fleet went from 31 replicas to
the maximum of 96 for the same 61 requests/s. A load the smallest fleet carries anyway is no
longer checked; what is left is the trend's extrapolation of the rise from nothing (x1.5 at most):
here the fleet peaks at 32 after the lull, as the traffic also grows (35 -> 50 requests/s; the
oracle needs 15), where with the lull's loads checked it bought the maximum, 96.
"""

from __future__ import annotations

import pytest
from fleetslo.sim.compare import SimulateOptions, make_named_policy
from fleetslo.sim.scenario import run_policy
from fleetslo.sim.traces import load_trace, rate_scale
from fleetslo.sim.workload import Trace

from benchmarks.bench_policy import scenario, sizes
from benchmarks.fresh import FRESH
from benchmarks.workloads import CONV, TRACES, Workload

pytestmark = pytest.mark.slow

LULL = (1200.0, 1440.0)


def lulled() -> Trace:
    trace = rate_scale(load_trace(TRACES / CONV), 6, seed=0)
    kept = tuple(r for r in trace.requests if not LULL[0] <= r.arrival_s < LULL[1] and r.arrival_s < 2400.0)
    return Trace(kept, f"{trace.source}, nothing in [{LULL[0]:g}, {LULL[1]:g}) s")


def test_the_traffic_coming_back_after_a_lull_does_not_buy_the_maximum() -> None:
    sc = scenario(Workload("lull", lulled, "smooth"))
    result = run_policy(sc, make_named_policy("fleetslo", sc, SimulateOptions(policies=("fleetslo",))))
    after = max(n for t, n in sizes(result).items() if t >= LULL[1])
    assert after <= sc.spec.replicas.max / 2, after
    assert result.window_attainment is not None and result.window_attainment >= 0.97


def test_traffic_that_comes_and_goes_pays_for_no_miss_its_returns_did_not_make() -> None:
    """The chat trace x8, on for 8 minutes and off for 4 (``benchmarks/fresh.py``). The loads sized
    on the windows overlapping each gap count less than arrives; checked, they taught the margin
    misses of up to x4 at every return: 30.1 replica-hours. Not checked: 24.9, every window met
    (the oracle pays 11.9, and no reactive schedule meets 0.99 here at any swept headroom)."""
    workload = next(w for w in FRESH if w.name.startswith("on 8 min"))
    sc = scenario(workload)
    result = run_policy(sc, make_named_policy("fleetslo", sc, SimulateOptions(policies=("fleetslo",))))
    assert result.window_attainment is not None and result.window_attainment >= 0.99
    assert result.replica_hours <= 27.0, result.replica_hours
