"""GPU samples from NVIDIA's NVML through ``pynvml`` (PyPI ``nvidia-ml-py``), for NVIDIA fleets.

``import pynvml`` succeeds even without a driver; ``nvmlInit`` then raises
``NVMLError_LibraryNotFound`` (no ``libnvidia-ml.so.1``) or ``NVMLError_DriverNotLoaded``. The
module is imported lazily and its absence means "not available". Units: utilization %, memory
bytes, power and power limit mW, energy mJ, temperature °C, clocks MHz. NVML has no hotspot
sensor in the calls used here; its die temperature is ``sensor="gpu"``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, Final

from fleetslo.core.errors import GpuReadError, GpuUnavailable
from fleetslo.core.model import GpuSample
from fleetslo.sidecar.gpu import units
from fleetslo.sidecar.gpu.reader import Backend

#: NVMLError subclass name -> reason token, for failures of ``nvmlInit``.
_INIT_REASONS: Final = {
    "NVMLError_LibraryNotFound": "no_library",
    "NVMLError_DriverNotLoaded": "driver_not_loaded",
    "NVMLError_NoPermission": "no_permission",
}


def import_pynvml() -> ModuleType:
    """``import pynvml``; ``GpuUnavailable`` when the package is not installed."""
    try:
        return importlib.import_module("pynvml")
    except ImportError as exc:
        raise GpuUnavailable("pynvml: not installed (pip install nvidia-ml-py)", "no_library") from exc


class NvmlReader:
    """Initialises NVML on first read, keeps the handles, re-initialises after a failure."""

    def __init__(self, loader: Callable[[], ModuleType] = import_pynvml) -> None:
        self._loader = loader
        self._nv: Any = None
        self._handles: list[Any] = []
        self._identity: list[GpuSample] = []

    @property
    def backend(self) -> Backend:
        return Backend.NVML

    def read(self) -> Sequence[GpuSample]:
        if self._nv is None:
            self._open()
        return [self._telemetry(h, base) for h, base in zip(self._handles, self._identity, strict=True)]

    def close(self) -> None:
        nv, self._nv = self._nv, None
        if nv is not None:
            # Already shut down, or the driver went away: nothing is left to release.
            with contextlib.suppress(nv.NVMLError):
                nv.nvmlShutdown()

    def _open(self) -> None:
        nv = self._loader()
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            reason = _INIT_REASONS.get(type(exc).__name__, "init")
            raise GpuUnavailable(f"nvml: init failed ({exc})", reason) from exc
        try:
            handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
        except nv.NVMLError as exc:
            nv.nvmlShutdown()
            raise GpuReadError(f"nvml: cannot list GPUs ({exc})", "library") from exc
        if not handles:
            nv.nvmlShutdown()
            raise GpuUnavailable("nvml: no GPU found", "no_devices")
        self._nv, self._handles = nv, handles
        self._identity = [self._identify(i, h) for i, h in enumerate(handles)]

    def _call(self, name: str, *args: Any) -> Any:
        """One NVML call; ``None`` when it raises (``NVMLError_NotSupported`` and the like)."""
        try:
            return getattr(self._nv, name)(*args)
        except (self._nv.NVMLError, AttributeError, TypeError, ValueError):
            return None

    def _identify(self, index: int, h: Any) -> GpuSample:
        pci = self._call("nvmlDeviceGetPciInfo", h)
        return GpuSample(
            index=index,
            uuid=_text(self._call("nvmlDeviceGetUUID", h)),
            model=_text(self._call("nvmlDeviceGetName", h)),
            vendor="nvidia",
            serial=_text(self._call("nvmlDeviceGetSerial", h)),
            pci_bus_id=_text(getattr(pci, "busId", None)),
            driver_version=_text(self._call("nvmlSystemGetDriverVersion")),
        )

    def _telemetry(self, h: Any, base: GpuSample) -> GpuSample:
        nv = self._nv
        rates, memory = (
            self._call("nvmlDeviceGetUtilizationRates", h),
            self._call("nvmlDeviceGetMemoryInfo", h),
        )
        temperature = self._call("nvmlDeviceGetTemperature", h, getattr(nv, "NVML_TEMPERATURE_GPU", 0))
        return dataclasses.replace(
            base,
            utilization=units.quantity(getattr(rates, "gpu", None), "%"),
            memory_bandwidth_utilization=units.quantity(getattr(rates, "memory", None), "%"),
            memory_used_bytes=units.quantity(getattr(memory, "used", None), "b"),
            memory_total_bytes=units.quantity(getattr(memory, "total", None), "b"),
            power_watts=units.quantity(self._call("nvmlDeviceGetPowerUsage", h), "mw"),
            power_limit_watts=units.quantity(self._call("nvmlDeviceGetEnforcedPowerLimit", h), "mw"),
            energy_joules=units.quantity(self._call("nvmlDeviceGetTotalEnergyConsumption", h), "mj"),
            temperatures_celsius=_present({"gpu": units.quantity(temperature, "c")}),
            clocks_hertz=_present(
                {
                    "graphics": units.quantity(self._clock(h, "NVML_CLOCK_SM"), "mhz"),
                    "memory": units.quantity(self._clock(h, "NVML_CLOCK_MEM"), "mhz"),
                }
            ),
            ecc_errors=self._ecc(h),
        )

    def _clock(self, h: Any, kind: str) -> Any:
        member = getattr(self._nv, kind, None)
        return None if member is None else self._call("nvmlDeviceGetClockInfo", h, member)

    def _ecc(self, h: Any) -> dict[str, float]:
        """Volatile counts (since driver load): counters that reset, like AMD's."""
        volatile = getattr(self._nv, "NVML_VOLATILE_ECC", 0)
        kinds = (("correctable", "NVML_MEMORY_ERROR_TYPE_CORRECTED"),
                 ("uncorrectable", "NVML_MEMORY_ERROR_TYPE_UNCORRECTED"))  # fmt: skip
        return _present(
            {
                severity: units.quantity(
                    self._call("nvmlDeviceGetTotalEccErrors", h, getattr(self._nv, member, None), volatile),
                    "count",
                )
                for severity, member in kinds
            }
        )


def _present(values: dict[str, float | None]) -> dict[str, float]:
    return {k: v for k, v in values.items() if v is not None}


def _text(raw: object) -> str | None:
    """NVML strings are ``bytes`` in old bindings and ``str`` in new ones."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    return units.text(raw)
