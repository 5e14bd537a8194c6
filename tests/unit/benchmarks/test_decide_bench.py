"""The sizing search's benchmark (``benchmarks decide``): both ways of testing a candidate find the
same counts. How much faster one is, is the benchmark's to report, not a test's."""

from __future__ import annotations

import pytest

from benchmarks import bench_decide


def test_both_searches_find_every_count_the_loads_were_built_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_decide, "ROUNDS", 1)
    result = bench_decide.run()
    assert result["same"] == result["searches"] == 20
    # the loads are n replicas' capacity each, at its edge: the searches land on n exactly
    assert result["counts"] == [2, 5, 12, 30, 90] * 4
