"""The gate benchmark runs end to end at a tiny size (so it cannot rot) and loses no byte."""

from __future__ import annotations

import pytest

from benchmarks import bench_gate


def test_a_tiny_benchmark_run_reports_every_figure_and_no_lost_byte(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The spawned gate and upstream read these when they import the module.
    monkeypatch.setenv("BENCH_GATE_STREAMS", "4")
    monkeypatch.setenv("BENCH_GATE_SECONDS", "0.4")
    monkeypatch.setenv("BENCH_GATE_NO_PIN", "1")
    monkeypatch.setattr(bench_gate, "STREAMS", 4)
    monkeypatch.setattr(bench_gate, "SECONDS", 0.4)
    bench_gate.main()
    out = capsys.readouterr().out
    for figure in ("p99", "paced, 1 event per chunk", "flat-out wall rate", "events per CPU-second"):
        assert figure in out
    assert "0 streams differ, 0 errors" in out
