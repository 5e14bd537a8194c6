"""``benchmarks stream``: the trace it writes is a valid Azure CSV on a daily curve, and its two runs
(whole file, ``--stream``) of a small one judge the fleet the same while each reports its own peak."""

from __future__ import annotations

from pathlib import Path

from fleetslo.sim.traces import load_trace

from benchmarks import bench_stream


def test_the_written_trace_reads_back_with_its_daily_curve(tmp_path: Path) -> None:
    path = tmp_path / "days.csv"
    n = bench_stream.write_days(path, days=0.25, mean_rate=2.0)
    trace = load_trace(path)
    assert len(trace) == n > 0
    hours = [0] * 6
    for r in trace.requests:
        hours[int(r.arrival_s // 3600)] += 1
    # 00:00-06:00 is the curve's trough (lowest at 03:00): the first hour is busier than the fourth
    assert hours[0] > hours[3] and trace.duration_s < 0.25 * 86_400


def test_both_runs_judge_the_same_and_each_measures_its_own_peak(tmp_path: Path) -> None:
    path = tmp_path / "days.csv"
    bench_stream.write_days(path, days=0.01, mean_rate=10.0)
    streamed, whole = bench_stream.run(path, "--stream"), bench_stream.run(path)
    assert all(streamed["result"][k] == whole["result"][k] for k in bench_stream.SAME)
    assert streamed["result"]["stream"] is True and "stream" not in whole["result"]
    assert 10 < streamed["peak_mb"] < 2000 and 10 < whole["peak_mb"] < 2000
