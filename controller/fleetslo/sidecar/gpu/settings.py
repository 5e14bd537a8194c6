"""Settings of the sidecar's GPU telemetry, validated once at load (pydantic v2).

Values arrive already read: ``cli.py`` reads the flags and the visible-devices environment
variables and passes them in; nothing here touches the environment or the filesystem.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fleetslo.core.config import PositiveDuration
from fleetslo.sidecar.gpu.attribution import parse_gpus
from fleetslo.sidecar.gpu.podresources import DEFAULT_SOCKET
from fleetslo.sidecar.gpu.reader import Backend


class GpuSettings(BaseModel):
    """``--gpu-backend``, ``--gpus``, ``--sysfs-root``, ``--gpu-interval`` and what they need."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: ``auto`` tries amdsmi, amd-smi, sysfs, rocm-smi, NVML in that order; ``none`` turns GPU
    #: telemetry off.
    backend: Backend = Backend.AUTO
    #: ``all``, or indices / UUIDs / PCI addresses; unset: the visible-devices variables, then
    #: the kubelet PodResources socket, then every GPU.
    gpus: str | None = None
    #: Where the host's sysfs is mounted (containers often mount it at /host/sys).
    sysfs_root: str = Field(default="/sys", min_length=1)
    #: How often the GPUs are read. Each read of a CLI backend costs a process start.
    interval: PositiveDuration = 5.0
    #: How long one CLI call may take before it is killed; default: the interval, at most 10 s.
    timeout: PositiveDuration | None = None
    hip_visible_devices: str | None = None
    rocr_visible_devices: str | None = None
    cuda_visible_devices: str | None = None
    pod_resources_socket: str | None = DEFAULT_SOCKET
    pod_name: str | None = None
    pod_namespace: str | None = None

    @field_validator("gpus")
    @classmethod
    def _check_gpus(cls, value: str | None) -> str | None:
        if value is not None and value.strip():
            selection = parse_gpus(value)
            if not selection.everything and not selection.indices and not selection.ids:
                raise ValueError("expected 'all' or a list such as 0,1,2,3")
        return value

    @field_validator("interval")
    @classmethod
    def _check_interval(cls, value: float) -> float:
        if not 0.5 <= value <= 300:
            raise ValueError(f"must be between 500ms and 5m (got {value:g}s)")
        return value

    @property
    def command_timeout(self) -> float:
        return self.timeout if self.timeout is not None else min(self.interval, 10.0)

    @property
    def stale_after(self) -> float:
        """A report older than this is not served: two missed reads plus one slow one."""
        return 2 * self.interval + self.command_timeout
