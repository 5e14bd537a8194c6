"""``fleetslo exporter``'s one settings root: the exporter, its GPU telemetry and the optional gate.

The CLI reads flags, the ``--config`` file and the environment, then validates everything here in
one ``load``, so a bad value anywhere fails with its path (``gate.max_queue``, ``gpu.interval``).
"""

from __future__ import annotations

from pydantic import Field

from fleetslo.core.config import Frozen
from fleetslo.sidecar.gpu.settings import GpuSettings
from fleetslo.sidecar.settings import ExporterSettings, GateServerSettings


class SidecarSettings(Frozen):
    """Everything one sidecar runs with, validated once."""

    exporter: ExporterSettings = Field(default_factory=ExporterSettings)
    gpu: GpuSettings = Field(default_factory=GpuSettings)
    #: ``None``: no gate (no ``--gate-listen``).
    gate: GateServerSettings | None = None
