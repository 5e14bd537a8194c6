"""Every collector describes itself from its table: what it yields is what it describes, and a
second collector with a clashing name fails at ``register()`` instead of sharing ``/metrics``."""

from __future__ import annotations

import pytest
from fleetslo.control.instruments import ControllerMetrics
from fleetslo.core.families import FamilySpec, describe
from fleetslo.sidecar.exporter.collector import EngineCollector
from fleetslo.sidecar.exporter.tracker import EngineTracker
from fleetslo.sidecar.gate.admission import Admission
from fleetslo.sidecar.gate.collector import GateCollector
from fleetslo.sidecar.gate.stats import GateStats
from fleetslo.sidecar.gpu.collector import GpuCollector
from fleetslo.sidecar.gpu.efficiency import GpuWindow, TokenWindow
from fleetslo.sim.server.exposition import VllmCollector
from fleetslo.testing import FakeClock
from prometheus_client import CollectorRegistry
from prometheus_client.registry import Collector

from tests.unit.demo.test_simserver_exposition import page_source
from tests.unit.exporter.test_tracker import SLO, feed
from tests.unit.gpu.test_gpu_collector import FULL, Source, report


def engine_collector() -> Collector:
    tracker = EngineTracker(ring_size=100, interval=5.0)
    feed(tracker, 0.0, 13)
    return EngineCollector(tracker, [30.0, 60.0], SLO, "http://127.0.0.1:8000")


def gate_collector() -> Collector:
    admission = Admission(limit=4, max_queue=8)
    return GateCollector(admission, GateStats(2.0, 0.05))


def gpu_collector() -> Collector:
    window = GpuWindow(seconds=60.0, gpus=1, energy_joules=600.0, busy_gpu_seconds=30.0)
    tokens = [TokenWindow("m", 60.0, 6000.0, 60.0)]
    return GpuCollector(Source(report(FULL), window), 15.0, lambda: tokens, FakeClock(1000.0))


def controller_gauges() -> Collector:
    metrics = ControllerMetrics()
    metrics.state("a", desired=3, current=2, batch_limit=16)
    return metrics.target_gauges


def sim_vllm_collector() -> Collector:
    return VllmCollector(page_source())


COLLECTORS = {
    "exporter": engine_collector,
    "gate": gate_collector,
    "gpu": gpu_collector,
    "controller": controller_gauges,
    "sim-server": sim_vllm_collector,
}


@pytest.mark.parametrize("make", COLLECTORS.values(), ids=COLLECTORS.keys())
def test_what_a_collector_yields_is_what_it_describes(make) -> None:  # type: ignore[no-untyped-def]
    collector = make()
    described = {(m.name, m.type) for m in collector.describe()}
    yielded = {(m.name, m.type) for m in collector.collect()}
    assert yielded, "the fixture should make the collector yield something"
    assert yielded <= described


@pytest.mark.parametrize("make", COLLECTORS.values(), ids=COLLECTORS.keys())
def test_a_clashing_name_fails_at_register(make) -> None:  # type: ignore[no-untyped-def]
    collector = make()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    first = collector.describe()[0]

    class Clash(Collector):
        def describe(self):  # type: ignore[no-untyped-def]
            return describe([FamilySpec(first.name, first.type, "another family of the same name")])  # type: ignore[arg-type]

        def collect(self):  # type: ignore[no-untyped-def]
            return iter(())

    with pytest.raises(ValueError, match="Duplicated timeseries"):
        registry.register(Clash())
