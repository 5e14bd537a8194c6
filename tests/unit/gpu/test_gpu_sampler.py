"""The sampler: backend detection, selection, failures as reports, and a hung read never blocking."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from fleetslo.core import conventions as cv
from fleetslo.core.errors import GpuReadError, GpuUnavailable
from fleetslo.core.model import GpuSample
from fleetslo.sidecar.gpu.attribution import parse_gpus
from fleetslo.sidecar.gpu.collector import GpuCollector
from fleetslo.sidecar.gpu.reader import Backend
from fleetslo.sidecar.gpu.sampler import GpuSampler
from fleetslo.sidecar.gpu.testing import FakeGpuReader
from fleetslo.testing import FakeClock
from prometheus_client import CollectorRegistry

FOUR = [GpuSample(i, uuid=f"u{i}", utilization=0.5, energy_joules=1000.0 * i) for i in range(4)]


def sampler(*readers: FakeGpuReader, clock: FakeClock | None = None, **kwargs: object) -> GpuSampler:
    clock = clock or FakeClock()
    return GpuSampler(list(readers), interval=5.0, history=60.0, clock=clock, monotonic=clock, **kwargs)  # type: ignore[arg-type]


def test_auto_detection_takes_the_first_backend_that_returns_gpus_and_logs_it_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    missing = FakeGpuReader(backend=Backend.AMDSMI)
    missing.error = GpuUnavailable("amdsmi: cannot load", "no_library")
    empty = FakeGpuReader([], backend=Backend.AMD_SMI)
    sysfs = FakeGpuReader(FOUR, backend=Backend.SYSFS)
    s = sampler(missing, empty, sysfs)
    with caplog.at_level(logging.INFO, logger="fleetslo.gpu"):
        first, second = s.sample_once(), s.sample_once()
    assert first.up and second.up and first.backend is Backend.SYSFS
    assert (missing.reads, empty.reads, missing.closes, empty.closes) == (1, 1, 1, 1)
    chosen = [r.message for r in caplog.records if "using backend" in r.message]
    assert chosen == ["gpu: using backend sysfs (auto; amdsmi: no_library; amd-smi: no GPUs)"]


def test_no_backend_at_all_is_a_down_report_with_a_reason() -> None:
    nothing = FakeGpuReader(backend=Backend.NVML)
    nothing.error = GpuUnavailable("pynvml: not installed", "no_library")
    report = sampler(nothing, FakeGpuReader([], backend=Backend.SYSFS)).sample_once()
    assert (report.up, report.backend, report.reason) == (False, Backend.NONE, "no_backend")


def test_only_the_selected_gpus_are_reported() -> None:
    report = sampler(FakeGpuReader(FOUR), selection=parse_gpus("1,3")).sample_once()
    assert [s.index for s in report.samples] == [1, 3]


def test_the_pod_lookup_is_asked_only_when_nothing_chose_the_gpus() -> None:
    asked = []

    def lookup() -> tuple[None, str]:
        asked.append(1)
        return None, "no PodResources socket"

    s = sampler(FakeGpuReader(FOUR), pod_lookup=lookup)
    s.sample_once()
    s.sample_once()
    assert asked == [1]
    assert len(s.latest().samples) == 4  # type: ignore[union-attr]


def test_failures_are_reports_with_reasons_and_counted_and_the_reader_is_reopened() -> None:
    reader = FakeGpuReader(FOUR)
    s = sampler(reader)
    assert s.sample_once().up
    reader.error = GpuReadError("amd-smi: no answer within 8s", "timeout")
    down = s.sample_once()
    assert (down.up, down.reason, down.errors) == (False, "timeout", {"timeout": 1})
    assert reader.closes == 1
    assert down.last_success is not None
    reader.error = None
    assert s.sample_once().up


def test_unexpected_exceptions_and_empty_readings_do_not_end_the_sampler() -> None:
    reader = FakeGpuReader([GpuSample(0, uuid="only-identity")])
    s = sampler(reader)
    assert s.sample_once().reason == "no_data"  # identity but no value: not "up"
    reader.error = ZeroDivisionError("bug in a vendor library")
    assert s.sample_once().reason == "internal"
    assert sampler(FakeGpuReader(FOUR), selection=parse_gpus("7")).sample_once().reason == "no_matching_gpus"


def test_the_energy_window_follows_the_ring_of_reads() -> None:
    clock = FakeClock(0.0)
    energy = [0.0]
    reader = FakeGpuReader(lambda: [GpuSample(0, utilization=1.0, energy_joules=energy[0])])
    s = sampler(reader, clock=clock)
    for _ in range(13):
        s.sample_once()
        clock.advance(5.0)
        energy[0] += 5 * 400.0
    w = s.window(60.0)
    assert w is not None
    assert (w.seconds, w.energy_joules, w.busy_gpu_seconds) == (60.0, 60 * 400.0, 60.0)
    assert s.window(3600.0) is None  # not covered yet


def test_a_hung_read_never_blocks_metrics_and_turns_the_collector_down_once_stale() -> None:
    reader = FakeGpuReader(FOUR)
    s = GpuSampler([reader], interval=0.05, history=1.0)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GpuCollector(s, stale_after=0.3))
    s.start()
    try:
        _wait_for(lambda: registry.get_sample_value(cv.GPU_COLLECTOR_UP, {"backend": "sysfs"}) == 1.0)
        reader.hang = threading.Event()  # the next read never returns
        started = time.monotonic()
        _wait_for(lambda: registry.get_sample_value(cv.GPU_COLLECTOR_UP, {"backend": "sysfs"}) == 0.0)
        assert registry.get_sample_value(cv.GPU_UTILIZATION, {"gpu": "0", "uuid": "u0", "model": ""}) is None
        assert time.monotonic() - started < 3
    finally:
        assert reader.hang is not None
        reader.hang.set()
        s.stop()


def _wait_for(condition: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)
