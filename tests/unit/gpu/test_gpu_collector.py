"""The GPU collector: families from the last report, absent values absent, promtool-clean output."""

from __future__ import annotations

import subprocess
from pathlib import Path

from fleetslo.core import conventions as cv
from fleetslo.core.model import GpuSample
from fleetslo.sidecar.gpu.collector import GpuCollector
from fleetslo.sidecar.gpu.efficiency import GpuWindow, TokenWindow
from fleetslo.sidecar.gpu.reader import Backend
from fleetslo.sidecar.gpu.sampler import GpuReport
from fleetslo.sidecar.gpu.sysfs import SysfsReader
from fleetslo.testing import FakeClock
from prometheus_client import CollectorRegistry, generate_latest

from tests.support import require_tool
from tests.unit.gpu.gpu_fakes import build_sysfs, mi100, mi300x

FULL = GpuSample(
    0, uuid="afff74a1", model="AMD Instinct MI300X", vendor="amd", pci_bus_id="0000:05:00.0",
    utilization=0.64, memory_used_bytes=150e9, memory_total_bytes=192e9, power_watts=717.0,
    power_limit_watts=750.0, energy_joules=152.59, temperatures_celsius={"junction": 45.0, "memory": 39.0},
    clocks_hertz={"graphics": 2.1e9}, ecc_errors={"correctable": 3.0, "uncorrectable": 0.0},
)  # fmt: skip
SPARSE = GpuSample(1, uuid="0aff74a1", utilization=None, memory_used_bytes=1e9)
ID0 = {"gpu": "0", "uuid": "afff74a1", "model": "AMD Instinct MI300X"}
ID1 = {"gpu": "1", "uuid": "0aff74a1", "model": ""}


class Source:
    def __init__(self, report: GpuReport | None, window: GpuWindow | None = None) -> None:
        self.report, self._window = report, window

    def latest(self) -> GpuReport | None:
        return self.report

    def window(self, seconds: float) -> GpuWindow | None:
        return self._window


def report(
    *samples: GpuSample, up: bool = True, at: float = 1000.0, errors: dict[str, int] | None = None
) -> GpuReport:
    return GpuReport(
        Backend.AMDSMI, up, 1.7e9, at, samples, None if up else "timeout", 0.02, 1.7e9, errors or {}
    )


def registry_for(source: Source, clock: FakeClock | None = None, **kwargs: object) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GpuCollector(source, stale_after=15.0, monotonic=clock or FakeClock(1000.0), **kwargs))  # type: ignore[arg-type]
    return registry


def test_every_family_carries_gpu_uuid_and_model_in_base_units() -> None:
    r = registry_for(Source(report(FULL, SPARSE)))
    assert r.get_sample_value(cv.GPU_COLLECTOR_UP, {"backend": "amdsmi"}) == 1.0
    assert r.get_sample_value(cv.GPU_UTILIZATION, ID0) == 0.64
    assert r.get_sample_value(cv.GPU_POWER, ID0) == 717.0
    assert r.get_sample_value(cv.GPU_ENERGY + "_total", ID0) == 152.59
    assert r.get_sample_value(cv.GPU_TEMPERATURE, {**ID0, "sensor": "junction"}) == 45.0
    assert r.get_sample_value(cv.GPU_CLOCK, {**ID0, "clock": "graphics"}) == 2.1e9
    assert r.get_sample_value(cv.GPU_ECC_ERRORS + "_total", {**ID0, "severity": "correctable"}) == 3.0
    info = {**ID0, "vendor": "amd", "serial": "", "pci_bus_id": "0000:05:00.0", "driver_version": "",
            "compute_partition": "", "memory_partition": "", "partition_id": ""}  # fmt: skip
    assert r.get_sample_value(cv.GPU_INFO, info) == 1.0


def test_values_a_backend_could_not_read_are_absent_not_zero() -> None:
    r = registry_for(Source(report(FULL, SPARSE)))
    assert r.get_sample_value(cv.GPU_MEMORY_USED, ID1) == 1e9
    for name in (cv.GPU_UTILIZATION, cv.GPU_POWER, cv.GPU_ENERGY + "_total", cv.GPU_MEMORY_TOTAL):
        assert r.get_sample_value(name, ID1) is None, name
    assert r.get_sample_value(cv.GPU_TEMPERATURE, {**ID0, "sensor": "edge"}) is None


def test_a_failed_read_is_up_zero_with_errors_by_reason_and_no_values() -> None:
    r = registry_for(Source(report(up=False, errors={"timeout": 2})))
    assert r.get_sample_value(cv.GPU_COLLECTOR_UP, {"backend": "amdsmi"}) == 0.0
    errors = cv.GPU_COLLECTOR_ERRORS + "_total"
    assert r.get_sample_value(errors, {"backend": "amdsmi", "reason": "timeout"}) == 2.0
    assert r.get_sample_value(errors, {"backend": "amdsmi", "reason": "parse"}) == 0.0
    assert r.get_sample_value(cv.GPU_LAST_SAMPLE, {}) == 1.7e9


def test_a_stale_report_is_served_as_down() -> None:
    clock = FakeClock(1000.0)
    r = registry_for(Source(report(FULL)), clock)
    assert r.get_sample_value(cv.GPU_UTILIZATION, ID0) == 0.64
    clock.advance(16.0)
    assert r.get_sample_value(cv.GPU_COLLECTOR_UP, {"backend": "amdsmi"}) == 0.0
    assert r.get_sample_value(cv.GPU_UTILIZATION, ID0) is None


def test_nothing_is_yielded_before_the_first_read() -> None:
    assert generate_latest(registry_for(Source(None))) == b""


def test_efficiency_joins_tokens_with_the_gpu_window() -> None:
    window = GpuWindow(seconds=60, gpus=4, energy_joules=60 * 2000.0, busy_gpu_seconds=120.0)
    rows = [TokenWindow("qwen3", 60.0, 60_000.0, 60.0), TokenWindow("qwen3", 300.0, None)]
    r = registry_for(Source(report(FULL), window), tokens=lambda: rows)
    assert r.get_sample_value(cv.TOKENS_PER_JOULE, {"model_name": "qwen3", "window": "1m"}) == 0.5
    per_1k = cv.GPU_SECONDS_PER_1K_TOKENS
    assert r.get_sample_value(per_1k, {"model_name": "qwen3", "window": "1m", "basis": "allocated"}) == 4.0
    assert r.get_sample_value(per_1k, {"model_name": "qwen3", "window": "1m", "basis": "busy"}) == 2.0
    assert r.get_sample_value(cv.TOKENS_PER_JOULE, {"model_name": "qwen3", "window": "5m"}) is None


def test_the_gpu_section_passes_promtool_check_metrics(tmp_path: Path) -> None:
    promtool = require_tool("promtool", "apt-get install prometheus")
    window = GpuWindow(seconds=60, gpus=2, energy_joules=6000.0, busy_gpu_seconds=30.0)
    real = SysfsReader(build_sysfs(tmp_path, {0: mi100(), 1: mi300x()})).read()
    page = generate_latest(
        registry_for(Source(report(FULL, *real[1:]), window), tokens=lambda: [TokenWindow("m", 60, 600.0)])
    )
    assert b"fleetslo_gpu_utilization_ratio{" in page and b"fleetslo_tokens_per_joule{" in page
    result = subprocess.run(
        [promtool, "check", "metrics"], input=page, capture_output=True, timeout=30, check=False
    )
    assert result.returncode == 0, (result.stdout + result.stderr).decode()
    assert result.stdout + result.stderr == b"", (result.stdout + result.stderr).decode()


def test_families_lists_every_family_the_collector_yields_with_its_type() -> None:
    from fleetslo.sidecar.gpu.collector import FAMILIES

    window = GpuWindow(seconds=60.0, gpus=1, energy_joules=600.0, busy_gpu_seconds=30.0)
    tokens = [TokenWindow("m", 60.0, 6000.0, 60.0)]
    collector = GpuCollector(Source(report(FULL), window), 15.0, lambda: tokens, FakeClock(1000.0))
    yielded = {family.name: (family.type, family.documentation) for family in collector.collect()}
    declared = {spec.name: (spec.kind, spec.help) for spec in FAMILIES}
    assert yielded == declared
