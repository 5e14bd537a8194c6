"""A controller restart in virtual time: the learned model comes back from the state file.

The real ``Controller``, ``Restorer``, ``FileStateStore`` and ``fleetslo`` policy; the fleet is
``ModelFleet`` (an engine three times faster than the conservative prior) behind the in-memory
replica actuator. A restarted controller's decisions are the old one's learned size from its
first decision on; without the file it relearns by over-provisioning; a corrupt or foreign file is
a logged, marked degraded start from the prior, and the next save writes a good file again.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from fleetslo.control.audit import Auditor
from fleetslo.control.instruments import ControllerMetrics
from fleetslo.control.leader import AlwaysLeader
from fleetslo.control.loop import Binding, Controller, Outcome
from fleetslo.control.ports import HistorySource
from fleetslo.control.service import Actuators, make_fleet
from fleetslo.control.state import SCHEMA, FileStateStore, Restorer, StateStore
from fleetslo.core.errors import ApiUnavailable, SourceUnavailable
from fleetslo.core.spec import FleetSLO
from fleetslo.policy.base import LoadSample
from fleetslo.policy.registry import make_policy
from fleetslo.testing import FakeReplicaActuator

from tests.loop_support import make_slo
from tests.restart_support import ModelFleet

SLO = make_slo("qwen", replicas=(1, 60))
STEP = 60.0


class Run:
    """One controller process: a policy deciding once a minute, its fleet, its state store."""

    def __init__(
        self, workload: FakeReplicaActuator, store: StateStore | None, policy: str = "fleetslo",
        source: Any = None,
    ) -> None:  # fmt: skip
        metrics = ControllerMetrics()
        self.workload = workload
        self.restorer = Restorer({"qwen": store}) if store is not None else None
        fleet = make_fleet(SLO, Actuators(workload), metrics, dry_run=False, drain=False)
        binding = Binding(
            SLO, make_policy(policy, SLO.spec, interval=STEP), source or ModelFleet(20.0), fleet
        )
        self.controller = Controller(
            [binding], Auditor(metrics), leader=AlwaysLeader(), restorer=self.restorer
        )

    def run(self, start: float, seconds: float) -> list[int]:
        sizes = []
        for k in range(int(seconds / STEP)):
            assert self.controller.tick_target("qwen", start + k * STEP) == Outcome.DECIDED
            self.workload.settle()
            sizes.append(self.workload.desired["infer/qwen"])
        return sizes


def learned(path: Path) -> tuple[FakeReplicaActuator, list[int]]:
    workload = FakeReplicaActuator(initial=8)
    return workload, Run(workload, FileStateStore(path)).run(0.0, 2400.0)


def test_a_restarted_controller_sizes_as_the_old_one_learned(tmp_path: Path) -> None:
    path = tmp_path / "fleetslo-state.json"
    workload, before = learned(path)
    assert max(before) > 2 * before[-1]  # the prior over-provisioned: there was something to learn
    saved = json.loads(path.read_text(encoding="utf-8"))["targets"]["qwen"]
    assert saved["schema"] == SCHEMA and saved["learned"]["model"]["windows"] > 30
    again = Run(workload, FileStateStore(path))
    after = again.run(2400.0, 900.0)
    assert again.restorer is not None and again.restorer.started["qwen"].learned == "resumed"
    assert after == [before[-1]] * len(after)


def test_without_the_file_a_restart_over_provisions(tmp_path: Path) -> None:
    workload, before = learned(tmp_path / "state.json")
    after = Run(workload, None).run(2400.0, 900.0)
    assert max(after) > before[-1]


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("{not json", "not JSON"),
        ('["a list"]', "no targets object"),
        ('{"targets": {"qwen": "garbage"}}', "not an object"),
        ('{"targets": {"qwen": {"schema": 7}}}', "record schema 7"),
        ('{"targets": {"qwen": {"schema": 1, "policy": "fleetslo", "learned": {"version": 1, "model": '
         '{"prior": {"overhead_s": 0.05, "per_seq_s": 0, "per_prefill_token_s": 1e-4, "per_kv_token_s": 0}, '
         '"ln_speed": NaN}}}}}', "non-finite"),
        ('{"targets": {"qwen": {"schema": 1, "policy": "fleetslo", "learned": {"version": 1}}}}',
         "does not parse"),
    ],
)  # fmt: skip
def test_a_corrupt_or_foreign_state_file_is_a_marked_degraded_start(
    tmp_path: Path, content: str, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "state.json"
    path.write_text(content, encoding="utf-8")
    run = Run(FakeReplicaActuator(initial=4), FileStateStore(path))
    with caplog.at_level(logging.WARNING, logger="fleetslo.state"):
        sizes = run.run(0.0, 300.0)
    assert run.restorer is not None
    started = run.restorer.started["qwen"]
    assert started.learned == "discarded" and why in started.why
    assert any("persisted state was discarded" in r.getMessage() for r in caplog.records)
    assert len(sizes) == 5  # decided every minute from the prior: no crash
    rewritten = json.loads(path.read_text(encoding="utf-8"))["targets"]["qwen"]
    assert rewritten["start"]["learned"] == "discarded" and rewritten["learned"]["model"]["windows"] >= 1


class Flaky:
    """A store the API cannot reach for the first ``failures`` reads."""

    def __init__(self, inner: StateStore, failures: int) -> None:
        self.inner, self.failures = inner, failures

    def load(self, name: str) -> object | None:
        if self.failures > 0:
            self.failures -= 1
            raise ApiUnavailable("api down")
        return self.inner.load(name)

    def save(self, name: str, record: Any) -> None:
        self.inner.save(name, record)


def test_a_store_that_cannot_be_read_fails_the_reconcile_rather_than_overwrite_the_model(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.json"
    workload, _ = learned(path)
    saved = path.read_text(encoding="utf-8")
    run = Run(workload, Flaky(FileStateStore(path), failures=2))
    outcomes = [run.controller.tick_target("qwen", 2400.0 + t) for t in range(10)]
    assert outcomes[:1] == [Outcome.FAILED] and Outcome.DECIDED in outcomes
    assert run.restorer is not None and run.restorer.started["qwen"].learned == "resumed"
    assert (
        json.loads(saved)["targets"]["qwen"]["learned"]["model"]["windows"] > 30
    )  # never overwritten by a prior


def test_the_baselines_keep_nothing_and_read_nothing(tmp_path: Path) -> None:
    class Watched(FileStateStore):
        loads = 0

        def load(self, name: str) -> object | None:
            Watched.loads += 1
            return super().load(name)

    path = tmp_path / "state.json"
    run = Run(FakeReplicaActuator(initial=4), Watched(path), policy="hpa-util")
    run.run(0.0, 300.0)
    assert Watched.loads == 0 and not path.exists()


# --- the load history at start ------------------------------------------------------------

DAY = 86_400.0
NOW = 30 * DAY + 9 * 3600.0  # a morning, a month into the epoch


class Remembering(ModelFleet):
    """``ModelFleet`` over a metrics store that holds ``days`` of a daily curve of tokens/s."""

    def __init__(self, days: float, error: Exception | None = None) -> None:
        super().__init__(20.0)
        self.days, self.error = days, error
        self.asked: list[tuple[float, float, float]] = []

    def load_history(self, slo: FleetSLO, now: float, *, days: float, step: float) -> list[LoadSample]:
        self.asked.append((now, days, step))
        if self.error is not None:
            raise self.error
        start = now - min(days, self.days) * DAY
        n = int((now - start) / step)
        times = [start + k * step for k in range(n)]
        return [LoadSample(t, 20.0, 20.0 * 1750 * (1.5 if t % DAY > 43_200 else 1.0)) for t in times]


def test_the_history_reaches_the_seasonal_forecast_before_the_first_decision(tmp_path: Path) -> None:
    source = Remembering(days=3)
    assert isinstance(source, HistorySource)
    run = Run(FakeReplicaActuator(initial=4), FileStateStore(tmp_path / "s.json"), source=source)
    run.controller.tick_target("qwen", NOW)
    assert source.asked == [(NOW, 14.0, 300.0)]  # the default 14 days, at the forecaster's 5-minute bin
    assert run.restorer is not None and run.restorer.started["qwen"].history_used == 3 * 288
    state = run.controller._runtime["qwen"].policy_state
    assert state.forecast.seasonal.ready()  # a day and more of history: the forecast forecasts


@pytest.mark.parametrize("error", [SourceUnavailable("prometheus down"), None])
def test_no_history_is_a_start_without_one_never_zeros(
    tmp_path: Path, error: Exception | None, caplog: pytest.LogCaptureFixture
) -> None:
    source = Remembering(days=0, error=error)
    run = Run(FakeReplicaActuator(initial=4), FileStateStore(tmp_path / "s.json"), source=source)
    with caplog.at_level(logging.INFO, logger="fleetslo.state"):
        assert run.controller.tick_target("qwen", NOW) == Outcome.DECIDED
    assert run.restorer is not None and run.restorer.started["qwen"].history_used == 0
    state = run.controller._runtime["qwen"].policy_state
    assert state.forecast.seasonal.bins == ()  # nothing invented
    assert any("forecast starts empty" in r.getMessage() for r in caplog.records)
