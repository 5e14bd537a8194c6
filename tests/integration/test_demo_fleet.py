"""``LocalFleet`` with real processes: what the demo's controller drives, through unchanged adapters."""

from __future__ import annotations

import math
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from fleetslo.control.actuators.gate import GateActuator
from fleetslo.control.local.fleet import LocalFleet, LocalFleetError
from fleetslo.control.local.replica import LOOPBACK, Ports, ReplicaRecipe, free_port
from fleetslo.control.sources.direct import DirectSource
from fleetslo.core import conventions as cv
from fleetslo.core.metrics.exposition import parse_vllm
from fleetslo.core.metrics.gate_families import read_gate
from fleetslo.core.model import ReplicaCounts
from fleetslo.sim.demo.loadgen import request_body
from fleetslo.sim.demo.scenario import fleet_slo
from fleetslo.sim.profile import builtin_profile
from fleetslo.sim.scenario import make_spec
from fleetslo.sim.server.clock import SpeedClock
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.integration

PROFILE = "mi300x-llama3.1-8b-fp8-tp1"
SPEEDUP = 20.0  # the 20 s cold start below lasts one wall second


def wait_until(check: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def warm_fleet(tmp_path: Path, profile: str = PROFILE) -> LocalFleet:
    """A fleet of replicas that start without a cold start, logging under ``tmp_path``; an unknown
    ``profile`` makes every engine exit at start."""
    spec = make_spec(builtin_profile(PROFILE), cold_start_s=20.0, name="demo")
    (tmp_path / "token").write_text("s3cret-s3cret-s3cret")
    recipe = ReplicaRecipe(
        profile=profile, model_name=spec.target.model_name, speedup=SPEEDUP, cold_start_s=0.0,
        token_file=tmp_path / "token", log_dir=tmp_path, slo_ttft_s=2.0, slo_tpot_s=0.05,
    )  # fmt: skip
    return LocalFleet(spec.target, recipe, SpeedClock(SPEEDUP).now)


def test_the_local_fleet_starts_scales_drains_and_stops_its_processes(tmp_path: Path) -> None:
    spec = make_spec(builtin_profile(PROFILE), cold_start_s=20.0, name="demo")
    target = spec.target
    (tmp_path / "token").write_text("s3cret-s3cret-s3cret")
    recipe = ReplicaRecipe(
        profile=PROFILE,
        model_name=target.model_name,
        speedup=SPEEDUP,
        cold_start_s=20.0,
        token_file=tmp_path / "token",
        log_dir=tmp_path,
        slo_ttft_s=2.0,
        slo_tpot_s=0.05,
        max_inflight=64,
        sidecar_interval_s=0.2,
    )
    clock = SpeedClock(SPEEDUP)
    fleet = LocalFleet(target, recipe, clock.now)
    gate = GateActuator(
        fleet, "s3cret-s3cret-s3cret", admin_url=fleet.admin_url, drain_timeout=5.0, poll_interval=0.05
    )
    source = DirectSource(fleet, url=fleet.sidecar_url, interval=15.0, gpu_utilization=False)
    try:
        fleet.start(1)
        assert fleet.counts() == ReplicaCounts(1, 0, 0) and [p.ready for p in fleet.pods(target)] == [True]
        asked = time.monotonic()
        assert fleet.scale(target, 2).changed
        assert fleet.read(target).desired == 2 and fleet.counts().starting == 1
        wait_until(lambda: fleet.counts().ready == 2)
        assert time.monotonic() - asked >= 20.0 / SPEEDUP - 0.05, "ready only after the cold start"

        wait_until(
            lambda: source.observe(fleet_slo(spec), fleet.counts(), None, clock.now()).replicas_reporting == 2
        )
        assert gate.read_limit(target) == 64
        gate.set_limit(target, 7)
        assert gate.read_limit(target) == 7

        drained = gate.drain(target, 1)
        assert len(drained) == 1
        wait_until(lambda: drained[0] not in [p.name for p in fleet.pods(target) if p.ready])
        fleet.mark(target, drained)
        fleet.scale(target, 1)
        assert [p.name for p in fleet.pods(target)] != drained and len(fleet.pods(target)) == 1
        gone = next(r for r in fleet.replicas if r.name == drained[0])
        wait_until(lambda: gone.gone_at is not None)
        assert all(p.poll() is not None for p in gone.processes)
        assert [name for name, _ in fleet.gates()] == [p.name for p in fleet.pods(target)]
    finally:
        gate.close()
        source.close()
        fleet.close()
    assert all(p.poll() is not None for r in fleet.replicas for p in r.processes)
    assert fleet.replica_seconds(clock.now()) > 0


def test_the_gate_and_the_engine_measure_latency_in_one_clock(tmp_path: Path) -> None:
    """The sim-server runs ``SPEEDUP`` times faster than the wall and its page is in simulated
    seconds; the gate in front of it must measure in the same clock, or the controller (which
    prefers the gate's histograms) sees latencies ``SPEEDUP`` times too small and the SLO
    feedback is off. Mean TPOT of the same requests, gate vs engine: within a factor 1.5; mean
    TTFT: the gate's at least the engine's and at most 1 s (50 ms of wall time) more — the gate
    adds the real path (loopback hops, a 2000-token prompt to parse: ~10 ms of wall time, 0.2 s
    simulated at 20×) to the engine's ~0.1 s. In the wrong clock both would be 20× too small."""
    spec = make_spec(builtin_profile(PROFILE), cold_start_s=20.0, name="demo")
    (tmp_path / "token").write_text("s3cret-s3cret-s3cret")
    recipe = ReplicaRecipe(
        profile=PROFILE, model_name=spec.target.model_name, speedup=SPEEDUP, cold_start_s=0.0,
        token_file=tmp_path / "token", log_dir=tmp_path, slo_ttft_s=2.0, slo_tpot_s=0.05, max_inflight=64,
    )  # fmt: skip
    clock = SpeedClock(SPEEDUP)
    fleet = LocalFleet(spec.target, recipe, clock.now)
    try:
        fleet.start(1)
        (_, gate), replica = fleet.gates()[0], fleet.replicas[0]
        body = request_body(spec.target.model_name, 2000, 200)
        with httpx.Client(timeout=30) as http, ThreadPoolExecutor(4) as pool:

            def stream(_: int) -> None:
                with http.stream("POST", f"{gate}/v1/completions", content=body) as response:
                    assert response.status_code == 200
                    for _chunk in response.iter_bytes():
                        pass

            list(pool.map(stream, range(8)))
            sidecar = http.get(f"http://127.0.0.1:{replica.ports.sidecar}/metrics").text
            engine = http.get(f"http://127.0.0.1:{replica.ports.engine}/metrics").text
    finally:
        fleet.close()
    gate_reading = read_gate(text_string_to_metric_families(sidecar))
    vllm = parse_vllm(engine)[spec.target.model_name]
    assert gate_reading is not None
    means = {}
    for family in (cv.Histogram.TTFT, cv.Histogram.TPOT):
        measured, simulated = gate_reading.histograms[family], vllm.histogram(family)
        assert simulated is not None and measured.count == simulated.count == 8
        means[family] = (measured.mean() or math.nan, simulated.mean() or math.nan)
    gate_ttft, engine_ttft = means[cv.Histogram.TTFT]
    assert engine_ttft <= gate_ttft <= engine_ttft + 1.0, means
    gate_tpot, engine_tpot = means[cv.Histogram.TPOT]
    assert engine_tpot / 1.5 < gate_tpot < engine_tpot * 1.5, means


def test_a_replica_whose_port_was_taken_starts_again_on_new_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another listener binds the sidecar's port between the pick and the sidecar's own bind (the
    CI failure of eda3171): the sidecar exits with "address already in use", and the fleet starts
    the replica again on new ports instead of giving up on the demo."""
    squatter = socket.socket()
    squatter.bind((LOOPBACK, free_port()))
    squatter.listen(1)
    taken = squatter.getsockname()[1]
    picks = iter([Ports(free_port(), taken, free_port(), free_port())])
    real_pick = Ports.pick
    monkeypatch.setattr(Ports, "pick", classmethod(lambda cls: next(picks, None) or real_pick()))
    fleet = warm_fleet(tmp_path)
    try:
        fleet.start(1, timeout=30.0)
        (only,) = fleet.replicas
        assert only.relaunches == 1 and only.ports.sidecar != taken
        assert fleet.counts() == ReplicaCounts(1, 0, 0)
        assert "address already in use" in (tmp_path / "demo-0-sidecar.log").read_text().lower()
    finally:
        fleet.close()
        squatter.close()


def test_a_replica_that_fails_for_another_reason_is_not_started_again(tmp_path: Path) -> None:
    fleet = warm_fleet(tmp_path, profile="no-such-profile")
    try:
        with pytest.raises(LocalFleetError, match="exited while starting"):
            fleet.start(1, timeout=30.0)
        assert [r.relaunches for r in fleet.replicas] == [0]
    finally:
        fleet.close()


def test_a_failed_start_the_monitor_saw_first_still_fails_the_start(tmp_path: Path) -> None:
    """The CI failure of eef30f8: under load the monitor saw the engine exit first and stopped the
    replica, so the start, which looked only for starting replicas whose process had exited, waited
    out its timeout ("not ready after 30s") instead of saying the replica exited."""
    fleet = warm_fleet(tmp_path, profile="no-such-profile")
    try:
        with fleet._lock:
            replica = fleet._launch(cold_start_s=0.0)
        wait_until(lambda: replica.processes[0].poll() is not None)  # the engine refused its profile
        fleet._step(replica, poll_ready=True)  # the monitor's turn comes first
        assert replica.ready_at is None and replica.phase.value == "stopping"
        with pytest.raises(LocalFleetError, match="exited while starting"):
            fleet._check_failed_start()
    finally:
        fleet.close()
