"""The GPU backends, one row each: the extension point for a new way of reading GPUs.

Adding a backend is its reader module (a ``GpuReader``), its ``Backend`` label value, and one row
here. Everything else reads this table: the order ``auto`` tries backends in, the reader that
``--gpu-backend NAME`` builds, the CLI's choices, and the chart's ``gpuBackend`` enum (a test
compares ``values.schema.json`` with ``choices()``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fleetslo.sidecar.gpu.amdsmi_cli import AmdSmiCliReader
from fleetslo.sidecar.gpu.amdsmi_lib import AmdSmiLibReader
from fleetslo.sidecar.gpu.nvml import NvmlReader
from fleetslo.sidecar.gpu.reader import Backend, GpuReader
from fleetslo.sidecar.gpu.rocm_smi import RocmSmiReader
from fleetslo.sidecar.gpu.settings import GpuSettings
from fleetslo.sidecar.gpu.sysfs import SysfsReader


@dataclass(frozen=True, slots=True)
class BackendEntry:
    """One way of reading GPUs: its label value, how to build its reader, and what it needs."""

    backend: Backend
    make: Callable[[GpuSettings], GpuReader]
    needs: str


#: Every backend, in the order ``auto`` tries them: the richest and cheapest source first, parsing
#: a deprecated CLI's output only when nothing better is there, NVIDIA last.
BACKENDS: tuple[BackendEntry, ...] = (
    BackendEntry(Backend.AMDSMI, lambda s: AmdSmiLibReader(), "the amdsmi library (ROCm 6+)"),
    BackendEntry(Backend.AMD_SMI, lambda s: AmdSmiCliReader(timeout=s.command_timeout), "the amd-smi CLI"),
    BackendEntry(Backend.SYSFS, lambda s: SysfsReader(s.sysfs_root), "the amdgpu driver's sysfs files"),
    BackendEntry(Backend.ROCM_SMI, lambda s: RocmSmiReader(timeout=s.command_timeout), "rocm-smi (legacy)"),
    BackendEntry(Backend.NVML, lambda s: NvmlReader(), "NVML (pip install 'fleetslo[nvidia]')"),
)  # fmt: skip
_BY_BACKEND = {entry.backend: entry for entry in BACKENDS}


def auto_order() -> tuple[Backend, ...]:
    return tuple(entry.backend for entry in BACKENDS)


def choices() -> list[str]:
    """What ``--gpu-backend`` accepts: ``auto``, every backend, ``none``."""
    return [Backend.AUTO.value, *(entry.backend.value for entry in BACKENDS), Backend.NONE.value]


def make_reader(backend: Backend, settings: GpuSettings) -> GpuReader:
    """One backend's reader, configured; ``auto`` and ``none`` are not readers."""
    entry = _BY_BACKEND.get(backend)
    if entry is None:
        raise ValueError(f"{backend} is not a single backend")
    return entry.make(settings)
