"""The model-against-engine benchmark (``benchmarks model``) measures what it says: every profile,
mix and load once, the knee told by the engine, the model's TTFT within its band below it."""

from __future__ import annotations

import pytest

from benchmarks import bench_model


def test_the_grid_is_measured_and_the_model_holds_its_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_model, "REQUESTS", 3000)
    result = bench_model.run()
    points = result["points"]
    assert len(points) == len(bench_model.PROFILES) * len(bench_model.MIXES) * len(bench_model.LOADS)
    assert result["below_knee"] + result["past_knee"] == len(points)
    # every point at 105 % of the step physics' limit is past the engine's knee, none below 85 %
    assert {p["load"] for p in points if p["past_knee"]} == {1.05}
    assert result["past_knee_called"] == result["past_knee"] == 9
    assert result["ttft_within"] >= 0.9 * result["below_knee"]
