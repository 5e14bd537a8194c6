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

from fleetslo.sidecar.gpu.attribution import resolve
from fleetslo.sidecar.gpu.backends import auto_order, make_reader
from fleetslo.sidecar.gpu.collector import GpuCollector
from fleetslo.sidecar.gpu.efficiency import TokenWindow
from fleetslo.sidecar.gpu.podresources import pod_selection
from fleetslo.sidecar.gpu.reader import Backend
from fleetslo.sidecar.gpu.sampler import GpuSampler
from fleetslo.sidecar.gpu.settings import GpuSettings


@dataclass(frozen=True, slots=True)
class GpuTelemetry:
    """A sampler (call ``start``/``stop``) and the collector to register on ``/metrics``."""

    sampler: GpuSampler
    collector: GpuCollector

    def start(self) -> None:
        self.sampler.start()

    def stop(self) -> None:
        self.sampler.stop()


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
    order = auto_order() if settings.backend is Backend.AUTO else (settings.backend,)
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
