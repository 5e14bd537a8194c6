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


def test_the_two_week_run_streams_fleetslo_from_day_one_and_chains_only_the_restarted_variant() -> None:
    plan = days_runs.Plan(Path("."), None, None, 8, (7, 8), online_from=0)  # type: ignore[arg-type]
    units = days_runs.units(plan, ["fleetslo", "fleetslo seasonal off", days_runs.RESTARTED, "oracle"])
    assert units == [
        days_runs.Unit("fleetslo", (7, 8), first=0),
        days_runs.Unit("fleetslo seasonal off", (7, 8), first=0),
        days_runs.Unit(days_runs.RESTARTED, (7, 8)),
        days_runs.Unit("oracle", (7,)),
        days_runs.Unit("oracle", (8,)),
    ]


class _Static:
    """Stands in for ``days_runs.Foresight``: the days' plumbing under a fixed fleet of 2 (a
    fleetslo day is 5,760 decisions; these tests check which days run and how they are reported)."""

    def __init__(self, inner: object, *, mode: str, history: object, learned: object) -> None:
        from fleetslo.policy.baselines import StaticPolicy

        self.policy = StaticPolicy(2)
        self.name, self.interval, self.last_state = "static", self.policy.interval, None

    def initial_state(self, spec: object) -> object:
        return self.policy.initial_state(spec)  # type: ignore[arg-type]

    def decide(self, obs: object, state: object, spec: object, now: float) -> object:
        return self.policy.decide(obs, state, spec, now)  # type: ignore[arg-type]


def test_an_online_unit_is_one_fleet_from_its_first_day_and_reports_only_the_days_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Day 1 is simulated, not reported; day 2's row is that same stream's second day: its requests
    the cache's, its replica-hours a whole day of the fleet scaled back by m (no reset at midnight)."""
    from fleetslo.sim import oracle
    from fleetslo.sim.profile import builtin_profile
    from fleetslo.sim.sampled import sampled_spec
    from fleetslo.sim.scenario import Scenario, make_spec
    from fleetslo.sim.workload import Trace

    monkeypatch.setattr(days_runs, "Foresight", _Static)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    rows = [f"{k * 600},{0.05 if (k % 144) < 72 else 0.15},1.0,Gamma,1.0,1.0" for k in range(288)]
    (data_dir / "chunk-0-trace.csv").write_text("\n".join(rows) + "\n")
    data, tokens, cache, m = load_servegen(data_dir), fixed_tokens(200, 20), tmp_path / "cache", 2
    for day in (0, 1):
        days_stream.ensure_day(data, cache, day, rate_scale=1.0, m=m, fallback=tokens)
    profile = builtin_profile("mi325x-qwen3-235b-fp8-tp4")
    spec = sampled_spec(make_spec(profile, min_replicas=2, max_replicas=8, cold_start_s=300.0), m)
    plan = days_runs.Plan(
        cache, Scenario(Trace(()), "tiny", profile, spec, initial_replicas=1),
        oracle.Capacity(2.0, 4000.0, 400.0, 4), m, (1,), online_from=0,
    )  # fmt: skip
    out = tmp_path / "units.jsonl"
    (row,) = days_runs.run_unit(plan, days_runs.Unit("fleetslo", (1,), first=0), out)
    assert days_runs.read_rows(out) == [row]
    assert row["day"] == 2 and row["online_from"] == 1
    assert row["requests"] == sum(days_runs.minute_counts(cache, 1)[0])
    assert row["window_attainment"] == 1.0
    # a whole day of 2 replicas (the stream ends with the day's last request, a minute or so early)
    assert row["replica_hours"] == pytest.approx(2 * 24 * m, rel=1e-3)
    # the restarted variant is a chain of the reported days: the same day, started on its own
    (chained,) = days_runs.run_unit(plan, days_runs.Unit(days_runs.RESTARTED, (1,)), out)
    assert chained["requests"] == row["requests"] and "online_from" not in chained
    assert len(days_runs.read_rows(out)) == 2


@pytest.mark.parametrize(
    ("name", "headroom", "memory"),
    [
        ("no-foresight +10%", 0.1, 5),
        ("no-foresight +0% memory 1 min", 0.0, 1),
        ("no-foresight +30% memory 1 min", 0.3, 1),
        ("no-foresight +30% memory 5 min", 0.3, 5),
    ],
)
def test_each_frontier_column_replays_its_own_reactive_schedule(
    name: str, headroom: float, memory: int
) -> None:
    from fleetslo.sim import oracle
    from fleetslo.sim.profile import builtin_profile
    from fleetslo.sim.scenario import Scenario, make_spec
    from fleetslo.sim.workload import Trace

    spec = make_spec(builtin_profile("mi325x-qwen3-235b-fp8-tp4"), min_replicas=2, max_replicas=20)
    scenario = Scenario(Trace(()), "t", profile=None, spec=spec, initial_replicas=1)  # type: ignore[arg-type]
    plan = days_runs.Plan(Path("."), scenario, None, 8, (7,))  # type: ignore[arg-type]
    need = [3, 3, 9, 4, 4, 12, 2, 2, 2, 2, 5, 5]
    policy = days_runs.policy_for(plan, name, 7, need, None)
    assert policy.schedule == oracle.no_foresight_schedule(need, headroom, memory, 12, 2)
    assert name == "no-foresight +10%" or name in days_runs.FRONTIER_SWEEP


@pytest.mark.parametrize("name", [*days_runs.FLEETSLO_VARIANTS, "hpa-running"])
def test_every_policy_of_the_two_weeks_is_made_as_the_suite_makes_it(name: str) -> None:
    """The simulated FleetSLO names its engine profile: fleetslo's model starts from the profile's
    step costs (the two-week run once left it on the conservative prior), the baselines get the
    engine's max_num_seqs, exactly as ``fleetslo simulate`` and ``benchmarks policy`` build them."""
    from fleetslo.policy.fleetslo.physics import CONSERVATIVE_PRIOR
    from fleetslo.sim.compare import step_cost
    from fleetslo.sim.profile import builtin_profile
    from fleetslo.sim.scenario import Scenario, make_spec
    from fleetslo.sim.workload import Trace

    profile = builtin_profile("mi325x-qwen3-235b-fp8-tp4")
    spec = make_spec(profile, min_replicas=2, max_replicas=20)
    plan = days_runs.Plan(Path("."), Scenario(Trace(()), "t", profile, spec, 1), None, 8, (7,))  # type: ignore[arg-type]
    policy = days_runs.policy_for(plan, name, 0, [3] * 10, None)
    if name == "hpa-running":
        assert policy.max_num_seqs == profile.max_num_seqs
        return
    assert policy.inner.config.step_cost == step_cost(profile)
    state = policy.inner.initial_state(spec)
    assert state.model.prior is not CONSERVATIVE_PRIOR


def test_the_two_week_row_sums_replica_hours_and_reads_them_against_the_oracle() -> None:
    """Only a policy with every day counts; attainment is the days' mean, never a day missing as 0."""
    rows = [
        {"policy": "oracle", "day": 8, "window_attainment": 1.0, "replica_hours": 100.0},
        {"policy": "oracle", "day": 9, "window_attainment": 0.96, "replica_hours": 300.0},
        {"policy": "fleetslo", "day": 8, "window_attainment": 0.99, "replica_hours": 120.0},
        {"policy": "fleetslo", "day": 9, "window_attainment": 0.97, "replica_hours": 360.0},
        {"policy": "hpa-util", "day": 8, "window_attainment": 1.0, "replica_hours": 900.0},
        {"policy": "llmd-slo", "day": 8, "window_attainment": None, "replica_hours": 10.0},
        {"policy": "llmd-slo", "day": 9, "window_attainment": 0.5, "replica_hours": 10.0},
    ]
    total = days_runs.totals(rows, ["fleetslo", "oracle", "hpa-util", "llmd-slo"], [8, 9])
    assert set(total) == {"fleetslo", "oracle", "llmd-slo"}  # hpa-util ran one day of two
    assert total["fleetslo"]["window_attainment"] == pytest.approx(0.98)
    assert total["fleetslo"]["replica_hours"] == 480.0
    assert total["fleetslo"]["vs_oracle"] == pytest.approx(1.2)
    assert total["oracle"]["vs_oracle"] == pytest.approx(1.0)
    assert total["llmd-slo"]["window_attainment"] == 0.5  # a day with nothing judged is left out
    assert days_runs.totals(rows, ["fleetslo"], [8, 9])["fleetslo"]["vs_oracle"] is None


def test_the_launch_controllers_start_with_a_token_rate_history() -> None:
    """The metrics store the launch's controllers bootstrap from holds what they observe live:
    tokens per second (prompt + output), as the Prometheus bootstrap reads it, minute by minute as
    the requests came. It once held the curve's request rate, about 1,240 times smaller."""
    from fleetslo.sim.traces.multiday import MultiDayCurve

    from benchmarks import bench_days

    curve = MultiDayCurve(12.0, amplitude=0.3)
    start = 7200.0
    history = bench_days.launch_history(curve, start, seed=1)
    assert [t for t, _ in history[:2]] == [-start, -start + 60.0] and history[-1][0] == -60.0
    rng = random.Random(0)
    per_request = sum(sum(bench_days.FALLBACK_TOKENS(rng)) for _ in range(50_000)) / 50_000
    expected = sum(curve.rate(start + t + 30.0) for t, _ in history) / len(history) * per_request
    assert sum(rate for _, rate in history) / len(history) == pytest.approx(expected, rel=0.05)
    # observed, with the noise of real arrivals: no two minutes alike
    assert len({round(rate) for _, rate in history}) > len(history) // 2
