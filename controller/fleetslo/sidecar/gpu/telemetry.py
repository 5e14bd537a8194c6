"""Assembling GPU telemetry for the sidecar: settings in, a started sampler and its collector out.

This is the one entry point the exporter calls (``build_gpu_telemetry``), so the exporter knows
nothing of backends, selection or PodResources. Building never touches a GPU; the first read
happens on the sampler's thread after ``start()``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from fleetslo.sidecar.gpu.amdsmi_cli import AmdSmiCliReader
from fleetslo.sidecar.gpu.amdsmi_lib import AmdSmiLibReader
from fleetslo.sidecar.gpu.attribution import resolve
from fleetslo.sidecar.gpu.collector import GpuCollector
from fleetslo.sidecar.gpu.efficiency import TokenWindow
from fleetslo.sidecar.gpu.nvml import NvmlReader
from fleetslo.sidecar.gpu.podresources import pod_selection
from fleetslo.sidecar.gpu.reader import AUTO_ORDER, Backend, GpuReader
from fleetslo.sidecar.gpu.rocm_smi import RocmSmiReader
from fleetslo.sidecar.gpu.sampler import GpuSampler
from fleetslo.sidecar.gpu.settings import GpuSettings
from fleetslo.sidecar.gpu.sysfs import SysfsReader


@dataclass(frozen=True, slots=True)
class GpuTelemetry:
    """A sampler (call ``start``/``stop``) and the collector to register on ``/metrics``."""

    sampler: GpuSampler
    collector: GpuCollector

    def start(self) -> None:
        self.sampler.start()

    def stop(self) -> None:
        self.sampler.stop()


def make_reader(backend: Backend, settings: GpuSettings) -> GpuReader:
    """One backend's reader, configured; ``auto`` and ``none`` are not readers."""
    timeout = settings.command_timeout
    factories: dict[Backend, Callable[[], GpuReader]] = {
        Backend.AMDSMI: AmdSmiLibReader,
        Backend.AMD_SMI: partial(AmdSmiCliReader, timeout=timeout),
        Backend.SYSFS: partial(SysfsReader, settings.sysfs_root),
        Backend.ROCM_SMI: partial(RocmSmiReader, timeout=timeout),
        Backend.NVML: NvmlReader,
    }
    if backend not in factories:
        raise ValueError(f"{backend} is not a single backend")
    return factories[backend]()


def build_gpu_telemetry(
    settings: GpuSettings,
    windows: Sequence[float],
    tokens: Callable[[], Sequence[TokenWindow]] | None = None,
) -> GpuTelemetry | None:
    """The sampler and collector for ``settings`` (not started); ``None`` for ``--gpu-backend none``.

    ``windows`` are the exporter's windows (the efficiency history must cover the longest);
    ``tokens`` returns generated tokens per model and window, for the efficiency signals.
    """
    if settings.backend is Backend.NONE:
        return None
    order = AUTO_ORDER if settings.backend is Backend.AUTO else (settings.backend,)
    selection = resolve(settings.gpus, settings.rocr_visible_devices, settings.hip_visible_devices,
                        settings.cuda_visible_devices)  # fmt: skip
    sampler = GpuSampler(
        [make_reader(b, settings) for b in order],
        interval=settings.interval,
        history=max(windows, default=0.0),
        selection=selection,
        pod_lookup=partial(
            pod_selection, settings.pod_resources_socket, settings.pod_namespace, settings.pod_name
        ),
    )
    return GpuTelemetry(sampler, GpuCollector(sampler, settings.stale_after, tokens))


class TokenSignals(Protocol):
    """What the vLLM side publishes per model and window (the exporter's ``WindowSignals``)."""

    @property
    def model_name(self) -> str: ...
    @property
    def window(self) -> float: ...
    @property
    def seconds(self) -> float: ...
    @property
    def generation_tokens_per_second(self) -> float | None: ...


def tokens_from_signals(signals: Callable[[], Iterable[TokenSignals]]) -> Callable[[], list[TokenWindow]]:
    """Adapt the exporter's windowed vLLM signals into the token windows the efficiency needs."""

    def tokens() -> list[TokenWindow]:
        return [
            TokenWindow(
                s.model_name, s.window, _increase(s.generation_tokens_per_second, s.seconds), s.seconds
            )
            for s in signals()
        ]

    return tokens


def _increase(rate: float | None, seconds: float) -> float | None:
    return None if rate is None else rate * seconds
