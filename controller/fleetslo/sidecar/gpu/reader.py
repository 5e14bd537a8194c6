"""The one interface every GPU backend implements, and the names of the backends.

A ``GpuReader`` returns one ``GpuSample`` per device it can see, in base units, or raises a
``GpuReadError`` whose ``reason`` says why. Readers may block (a CLI, a C library, sysfs under a
wedged driver); callers therefore run them off the serving path (see ``sampler``). Which GPUs
belong to this replica is decided after reading (see ``attribution``), not by the readers.

This module defines types only; it must not import any vendor library.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Protocol

from fleetslo.core.model import GpuSample


class Backend(StrEnum):
    """The ``backend`` label values, and the choices of ``--gpu-backend``."""

    AUTO = "auto"
    AMDSMI = "amdsmi"
    AMD_SMI = "amd-smi"
    SYSFS = "sysfs"
    ROCM_SMI = "rocm-smi"
    NVML = "nvml"
    NONE = "none"


#: AMD PCI device IDs seen in real captures (tests/fixtures/gpu): a model name when the board's
#: FRU EEPROM has none. Unverified IDs (MI325X) are deliberately left out.
AMD_DEVICE_NAMES: dict[str, str] = {
    "0x74a1": "AMD Instinct MI300X",
    "0x740f": "AMD Instinct MI210",
    "0x738c": "AMD Instinct MI100",
}


class GpuReader(Protocol):
    """A source of GPU samples (amdsmi, a CLI, sysfs, NVML, or a fake in tests)."""

    @property
    def backend(self) -> Backend:
        """Which backend this is (the ``backend`` label)."""
        ...

    def read(self) -> Sequence[GpuSample]:
        """Every device this backend sees; raises ``GpuReadError`` (or a subclass) on failure."""
        ...

    def close(self) -> None:
        """Release library handles; reading after ``close`` may re-open them."""
        ...
