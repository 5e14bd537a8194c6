"""The days benchmark's plumbing: the arrival cache replays what the reader streams; the classic
forecasters it compares with recover what synthetic series were built with."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from fleetslo.sim.longrun import DAY_S
from fleetslo.sim.sampled import every_mth
from fleetslo.sim.traces import fixed_tokens
from fleetslo.sim.traces.servegen import arrivals, load_servegen

from benchmarks import days_forecast, days_runs, days_stream


def test_the_cache_replays_every_mth_request_of_each_day(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    # two days of one client, 2/s then 3/s, in 10-minute windows
    rows = [f"{k * 600},{2.0 if k < 144 else 3.0},1.0,Gamma,1.0,1.0" for k in range(288)]
    (data_dir / "chunk-0-trace.csv").write_text("\n".join(rows) + "\n")
    data = load_servegen(data_dir)
    tokens = fixed_tokens(50, 5)
    cache = tmp_path / "cache"
    for day in (0, 1):
        days_stream.ensure_day(data, cache, day, rate_scale=0.05, m=3, fallback=tokens)
    replayed = list(days_stream.replay(cache, 0, 2))
    direct = [
        (day * DAY_S + r.arrival_s, r.input_tokens, r.output_tokens)
        for day in (0, 1)
        for r in every_mth(
            arrivals(data, rate_scale=0.05, start_s=day * DAY_S, end_s=(day + 1) * DAY_S, fallback=tokens), 3
        )
    ]
    assert [r.arrival_s for r in replayed] == pytest.approx([t for t, _, _ in direct])
    assert [(r.input_tokens, r.output_tokens) for r in replayed] == [(p, o) for _, p, o in direct]
    # a day on its own, times from its start
    second = list(days_stream.replay(cache, 1, 2))
    assert second[0].arrival_s == pytest.approx(direct[len(replayed) - len(second)][0] - DAY_S)
    # a complete file is not written again
    stamp = days_stream.day_file(cache, 0).stat().st_mtime_ns
    days_stream.ensure_day(data, cache, 0, rate_scale=0.05, m=3, fallback=tokens)
    assert days_stream.day_file(cache, 0).stat().st_mtime_ns == stamp


def test_arima_recovers_the_coefficient_of_an_autoregressive_series() -> None:
    rng = random.Random(3)
    changes, logs = [0.0], [math.log(100.0)]
    for _ in range(3000):
        changes.append(-0.4 * changes[-1] + rng.gauss(0, 0.05))
        logs.append(logs[-1] + changes[-1])
    rates = [math.exp(v) for v in logs]
    predict = days_forecast.arima(rates, 1, 2000)
    # the forecast is the last value moved by -0.4 of the last change
    k = 2500
    expected = math.exp(logs[k] - 0.4 * (logs[k] - logs[k - 1]))
    assert predict(k) == pytest.approx(expected, rel=0.01)
    assert days_forecast.lag_autocorrelation(rates, (1,))[1] == pytest.approx(-0.4, abs=0.06)


def test_holt_winters_learns_a_repeating_day() -> None:
    day = [100 * (1.5 + math.sin(2 * math.pi * k / days_forecast.DAY)) for k in range(days_forecast.DAY)]
    rates = day * 10
    predict, _ = days_forecast.holt_winters(rates, range(2 * days_forecast.DAY, 7 * days_forecast.DAY))
    k = 8 * days_forecast.DAY + 40
    assert predict(k) == pytest.approx(rates[k + 1], rel=0.02)


def test_the_one_day_units_follow_the_fleetslo_streams() -> None:
    plan = days_runs.Plan(Path("."), None, None, 8, (7, 8))  # type: ignore[arg-type]
    units = days_runs.units(plan, ["oracle", "fleetslo", "hpa-util"])
    assert units == [
        days_runs.Unit("fleetslo", (7, 8)),
        days_runs.Unit("oracle", (7,)),
        days_runs.Unit("hpa-util", (7,)),
        days_runs.Unit("oracle", (8,)),
        days_runs.Unit("hpa-util", (8,)),
    ]


def test_every_forecaster_is_scored_on_the_same_windows() -> None:
    day = days_forecast.DAY
    rates = [10.0] * (9 * day)
    rates[7 * day + 5] = 0.0  # a gap: neither the window into it nor the one out of it is scored
    perfect = days_forecast.mape_per_day(rates, lambda k: rates[k + 1], range(7, 8))
    assert perfect.per_day == [0.0]
    # a forecaster silent on a scored window is charged 100 % there, not excused
    silent = days_forecast.mape_per_day(rates, lambda k: None if k == 7 * day + 20 else 10.0, range(7, 8))
    assert silent.per_day[0] == pytest.approx(100 / (day - 2))


@pytest.mark.parametrize("mode", ["point", "band", "off"])
def test_each_day_of_the_chain_starts_fleetslo_as_a_restarted_controller_does(mode: str) -> None:
    """The learned model resumed, the seasonal forecast bootstrapped from the history (not in
    ``off``), and the band only in ``band`` mode."""
    from dataclasses import replace

    from fleetslo.policy.fleetslo.learning import PerformanceModel
    from fleetslo.policy.registry import make_policy
    from fleetslo.sim.profile import builtin_profile
    from fleetslo.sim.scenario import make_spec

    spec = make_spec(builtin_profile("mi325x-qwen3-235b-fp8-tp4"), ttft_s=2.0, tpot_s=0.05)
    inner = make_policy("fleetslo", spec)
    base = inner.initial_state(spec)
    model = PerformanceModel(prior=base.model.prior, ln_speed=0.25, windows=7)
    learned = replace(base, model=model).learned()
    history = [(k * 300.0, 1000.0 + 10 * k) for k in range(2 * 288)]
    wrapped = days_runs.Foresight(inner, mode=mode, history=history if mode != "off" else [], learned=learned)
    state = wrapped.initial_state(spec)
    assert state.model.windows == 7 and state.model.ln_speed == pytest.approx(0.25)  # resumed
    assert state.forecast.banded == (mode == "band")
    if mode == "off":
        assert state.forecast.seasonal is None
    else:
        assert state.forecast.seasonal is not None and state.forecast.seasonal.ready()
