"""The GPU section of the sidecar's ``/metrics``: fresh families from the sampler's last report.

A custom collector (DESIGN guideline 7): every ``collect()`` builds new families from the newest
``GpuReport``, so a GPU, a sensor or a whole backend that stops reporting simply disappears. A
value the backend could not read is not yielded (absent, never 0). A report older than
``stale_after`` counts as the collector being down: its values are withheld rather than served
as if current. Efficiency signals are yielded when a token source is given (the vLLM side).

Never reads a GPU: ``collect()`` must return quickly whatever the hardware is doing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Protocol

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fleetslo.core import conventions as cv
from fleetslo.core.families import FamilySpec, Kind, by_name, describe
from fleetslo.core.model import GpuSample
from fleetslo.sidecar.gpu.efficiency import GpuWindow, TokenWindow, efficiency
from fleetslo.sidecar.gpu.sampler import GpuReport

#: Error reasons pre-created at 0 so ``rate()`` sees the first failure as an increase.
KNOWN_ERRORS = ("timeout", "parse", "no_data")
_IDENTITY = [cv.LABEL_GPU, cv.LABEL_UUID, cv.LABEL_GPU_MODEL]
_INFO_FIELDS = ("vendor", "serial", "pci_bus_id", "driver_version", "compute_partition",
                "memory_partition", "partition_id")  # fmt: skip
_BACKEND, _MODEL_WINDOW = (cv.LABEL_BACKEND,), (cv.MODEL_LABEL, cv.LABEL_WINDOW)
_ID = tuple(_IDENTITY)
#: (name, help, GpuSample attribute) of the plain per-GPU gauges.
_GAUGES = (
    (cv.GPU_UTILIZATION, "Share of time the GPU's compute engines were busy (0-1)", "utilization"),
    (cv.GPU_MEMORY_BANDWIDTH_UTILIZATION, "Share of time the memory controller was busy (0-1)",
     "memory_bandwidth_utilization"),
    (cv.GPU_MEMORY_USED, "GPU memory (VRAM) in use, in bytes", "memory_used_bytes"),
    (cv.GPU_MEMORY_TOTAL, "GPU memory (VRAM) size, in bytes", "memory_total_bytes"),
    (cv.GPU_POWER, "Power drawn by the GPU (socket/board), in watts", "power_watts"),
    (cv.GPU_POWER_LIMIT, "Power cap the GPU is held to, in watts", "power_limit_watts"),
)  # fmt: skip
#: (family type, name, help, extra label, GpuSample attribute) of the families keyed by one label.
_KEYED: tuple[tuple[Kind, str, str, str, str], ...] = (
    ("gauge", cv.GPU_TEMPERATURE, "GPU temperature by sensor, in degrees Celsius",
     cv.LABEL_SENSOR, "temperatures_celsius"),
    ("gauge", cv.GPU_CLOCK, "GPU clock frequency by domain, in hertz", cv.LABEL_CLOCK, "clocks_hertz"),
    ("counter", cv.GPU_ECC_ERRORS, "ECC errors since the driver loaded, by severity",
     cv.LABEL_SEVERITY, "ecc_errors"),
)  # fmt: skip


#: Every family ``GpuCollector`` can yield: ``collect()`` builds from it, ``describe()`` reads it,
#: and a push exporter (OTLP) declares its instruments from it up front, since instruments cannot
#: appear as families come and go.
FAMILIES: tuple[FamilySpec, ...] = (
    FamilySpec(cv.GPU_COLLECTOR_UP, "gauge", "1 if the last GPU read succeeded and is recent", _BACKEND),
    FamilySpec(cv.GPU_COLLECTOR_ERRORS, "counter", "Failed GPU reads, by reason",
               (*_BACKEND, cv.LABEL_REASON)),
    FamilySpec(cv.GPU_SAMPLE_DURATION, "gauge", "Time the last GPU read took, in seconds"),
    FamilySpec(cv.GPU_LAST_SAMPLE, "gauge", "Unix time of the last successful GPU read"),
    FamilySpec(cv.GPU_INFO, "gauge", "Identity of each GPU exported (value is always 1)",
               (*_ID, *_INFO_FIELDS)),
    *(FamilySpec(name, "gauge", documentation, _ID) for name, documentation, _ in _GAUGES),
    FamilySpec(cv.GPU_ENERGY, "counter", "Energy used by the GPU since the driver loaded, in joules", _ID),
    *(FamilySpec(name, kind, documentation, (*_ID, label)) for kind, name, documentation, label, _ in _KEYED),
    FamilySpec(cv.TOKENS_PER_JOULE, "gauge", "Generated tokens per joule of GPU energy over the window",
               _MODEL_WINDOW),
    FamilySpec(cv.GPU_SECONDS_PER_1K_TOKENS, "gauge",
               "GPU-seconds per 1000 generated tokens over the window (allocated or busy)",
               (*_MODEL_WINDOW, cv.LABEL_BASIS)),
)  # fmt: skip
_F = by_name(FAMILIES)


class GpuSource(Protocol):
    """What the collector needs from the sampler (a fake in tests)."""

    def latest(self) -> GpuReport | None: ...

    def window(self, seconds: float) -> GpuWindow | None: ...


class GpuCollector(Collector):
    """Yields the GPU families; ``tokens`` supplies generated tokens per model and window."""

    def __init__(
        self,
        source: GpuSource,
        stale_after: float,
        tokens: Callable[[], Sequence[TokenWindow]] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source
        self.stale_after = stale_after
        self.tokens = tokens
        self._monotonic = monotonic

    def describe(self) -> list[Metric]:
        """From the table: registering must not trigger a ``collect()`` (no GPU state is needed)."""
        return describe(FAMILIES)

    def collect(self) -> Iterator[Metric]:
        report = self.source.latest()
        if report is None:
            return
        fresh = report.up and self._monotonic() - report.monotonic_at <= self.stale_after
        yield from _health(report, fresh)
        if fresh:
            yield from _per_gpu(report.samples)
            if self.tokens is not None:
                yield from _efficiency(self.source, self.tokens())


def _health(report: GpuReport, fresh: bool) -> Iterator[Metric]:
    backend = [report.backend.value]
    up = _F[cv.GPU_COLLECTOR_UP].gauge()
    up.add_metric(backend, 1.0 if fresh else 0.0)
    yield up
    errors = _F[cv.GPU_COLLECTOR_ERRORS].counter()
    for reason, count in sorted({**dict.fromkeys(KNOWN_ERRORS, 0), **report.errors}.items()):
        errors.add_metric([*backend, reason], float(count))
    yield errors
    if report.duration is not None:
        yield _gauge(cv.GPU_SAMPLE_DURATION, report.duration)
    if report.last_success is not None:
        yield _gauge(cv.GPU_LAST_SAMPLE, report.last_success)


def _gauge(name: str, value: float) -> GaugeMetricFamily:
    return _F[name].gauge(value)


def _per_gpu(samples: Sequence[GpuSample]) -> Iterator[Metric]:
    yield _info(samples)
    for name, _, attribute in _GAUGES:
        family = _F[name].gauge()
        for s in samples:
            value = getattr(s, attribute)
            if value is not None:
                family.add_metric(_identity(s), value)
        yield family
    energy = _F[cv.GPU_ENERGY].counter()
    for s in samples:
        if s.energy_joules is not None:
            energy.add_metric(_identity(s), s.energy_joules)
    yield energy
    for kind, name, _, _, attribute in _KEYED:
        keyed = _F[name].counter() if kind == "counter" else _F[name].gauge()
        for s in samples:
            values: Mapping[str, float] = getattr(s, attribute)
            for key, value in sorted(values.items()):
                keyed.add_metric([*_identity(s), key], value)
        yield keyed


def _info(samples: Sequence[GpuSample]) -> GaugeMetricFamily:
    family = _F[cv.GPU_INFO].gauge()
    for s in samples:
        family.add_metric([*_identity(s), *(getattr(s, f) or "" for f in _INFO_FIELDS)], 1.0)
    return family


def _identity(s: GpuSample) -> list[str]:
    return [str(s.index), s.uuid or "", s.model or ""]


def _efficiency(source: GpuSource, rows: Sequence[TokenWindow]) -> Iterator[Metric]:
    per_joule = _F[cv.TOKENS_PER_JOULE].gauge()
    per_1k = _F[cv.GPU_SECONDS_PER_1K_TOKENS].gauge()
    for row in rows:
        e = efficiency(row.tokens, row.seconds, source.window(row.window))
        labels = [row.model_name, cv.window_label(row.window)]
        if e.tokens_per_joule is not None:
            per_joule.add_metric(labels, e.tokens_per_joule)
        if e.allocated_gpu_seconds_per_1k_tokens is not None:
            per_1k.add_metric([*labels, "allocated"], e.allocated_gpu_seconds_per_1k_tokens)
        if e.busy_gpu_seconds_per_1k_tokens is not None:
            per_1k.add_metric([*labels, "busy"], e.busy_gpu_seconds_per_1k_tokens)
    yield per_joule
    yield per_1k
