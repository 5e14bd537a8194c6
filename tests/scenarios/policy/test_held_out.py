"""A held-out workload the defaults were never chosen on (``benchmarks/heldout.py``), replayed on the
simulated MI325X fleet: ServeGen's reasoning model, its day compressed into two hours, with its
clients' own length distributions.

Its answers are long and their mix moves: around 30 minutes in, tokens per request double while
arrivals fall from 14 to 8 per second. Requests then stay twice as long, and a stay learned once
(running / completions) read the extra running requests as a queue: the fleet grew from 14 to 52
replicas where the oracle needed 8-13. With the stay from the model at each window's mix the
fleet peaks at 28 (the old policy's 52 fails the first assertion) at the same attainment (0.983:
two windows at the start, before the first replicas ordered can serve, TPOT 50-57 ms). With the
unreachable TTFT target relaxed instead of the model given up, the start is met; with the margins
rebased as the model learns, the two windows lost are at 2,460 and 5,100 s, p90 TTFT 2.06 and
2.09 s against 2 s with TPOT at 33-39 ms, each in the window a replica joined on a fleet above
the oracle's need (19 against 14, 10 against 9): the router's flood onto a newcomer, not a fleet
short of capacity, which is what the second assertion tells apart. (With TPOT checked only once
the longest answers were decoded on the fleet as it is, the same two windows, the second at
2.28 s: the flood's size follows which requests reach the newcomer first.) Since the request mix
is read off whole windows only (stop 38) the first sizing no longer reads a filling fleet's few
completions (which over-read this day's long answers, and bought headroom by mistake): the
window at 360 s is lost to capacity (7 ready where 10 are needed, TTFT 4.7 s, TPOT 49 ms), the
cold start of the replicas the first whole window ordered. That one is allowed; no later one is.
"""

from __future__ import annotations

import itertools
from functools import cache

import pytest
from fleetslo.sim import oracle
from fleetslo.sim.compare import SimulateOptions, make_named_policy
from fleetslo.sim.result_types import SimResult
from fleetslo.sim.scenario import run_policy

from benchmarks.bench_policy import scenario, sizes
from benchmarks.heldout import HELDOUT

REASONING = next(w for w in HELDOUT if w.name.startswith("reasoning day"))

pytestmark = pytest.mark.slow


@cache
def replayed() -> tuple[SimResult, oracle.OraclePlan]:
    sc = scenario(REASONING)
    policy = make_named_policy("fleetslo", sc, SimulateOptions(policies=("fleetslo",)))
    return run_policy(sc, policy), oracle.plan(sc)


def test_a_mix_of_longer_answers_does_not_buy_a_fleet_for_a_queue_that_is_not_there() -> None:
    result, plan = replayed()
    peak_need = max(plan.need)
    assert max(sizes(result).values()) <= 2 * peak_need, (max(sizes(result).values()), peak_need)


def test_the_reasoning_day_loses_no_window_to_a_lack_of_capacity() -> None:
    result, plan = replayed()
    # Three windows of 120 at most, each of the kinds below (stop 54: minute 45 lost at 2.12 s
    # TTFT, TPOT 41 ms, as 3 replicas joined the 20 ready where the oracle needs 5).
    assert result.window_attainment is not None and result.window_attainment >= 0.975
    windows = result.windows
    missed = [
        (w.start_s, w.p90_ttft_s, w.p90_tpot_s, before.ready_replicas, w.ready_replicas, plan.need[k])
        for k, (before, w) in enumerate(itertools.pairwise(windows), start=1)
        if w.met is False
    ]
    # Lost only to TTFT with TPOT met (a capacity shortfall shows in TPOT first: the start's
    # 50-57 ms before the relaxed target), in a window a replica joined a fleet already at the
    # oracle's need or above: the router's flood onto the newcomer. Or while the replicas the
    # first whole window ordered still start (its end, plus a cold start, plus their window).
    minute = windows[1].start_s - windows[0].start_s  # the judging window, and the rates' window
    assert result.cold_start_s is not None  # run_policy records the scenario's
    first_orders_serve = 2 * minute + result.cold_start_s
    assert windows[0].met is not False
    assert all(
        start < first_orders_serve or (
            ttft is not None and ttft <= 3.0 and tpot is not None and tpot <= 0.05
            and was is not None and now is not None and now > was >= need
        )
        for start, ttft, tpot, was, now, need in missed
    ), missed  # fmt: skip
