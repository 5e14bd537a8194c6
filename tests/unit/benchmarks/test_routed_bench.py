"""The routed-fleet benchmark (``benchmarks routed``) measures the model's error behind the
router: about none on chat, on the safe side and large on long prompts where replicas idle."""

from __future__ import annotations

import pytest

from benchmarks import bench_routed


def test_the_model_errs_on_the_safe_side_of_a_routed_fleet_and_by_how_much(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bench_routed, "FLEETS", (8,))
    monkeypatch.setattr(bench_routed, "LOADS", (0.3, 0.5))
    points = bench_routed.run(seconds=420)["points"]
    assert len(points) == len(bench_routed.ROUTED_MIXES) * 2
    ratio = {
        (p["mix"], p["load"]): (p["model_ttft"] / p["fleet_ttft"], p["model_tpot"] / p["fleet_tpot"])
        for p in points
    }
    for load in (0.3, 0.5):
        ttft, tpot = ratio[("chat", load)]
        assert 0.95 <= ttft <= 1.4 and 0.95 <= tpot <= 1.05  # many decode at once: the router changes little
    for mix in ("long", "long, short answers"):
        ttfts = [ratio[(mix, load)][0] for load in (0.3, 0.5)]
        # a prompt rarely waits behind another's prefill on a fleet that idles: the model's lone
        # replica (M/G/1-like prefill queue) reads high, more so as the load grows
        assert 1.0 <= ttfts[0] < ttfts[1] and ttfts[1] >= 1.5
        assert all(0.85 <= ratio[(mix, load)][1] <= 1.6 for load in (0.3, 0.5))
