"""GPU samples from AMD's ``amdsmi`` Python library (ROCm >= 6): the preferred AMD backend.

The wheel is a ctypes wrapper around ``libamd_smi.so``. Importing it without the library prints
two lines to stdout and raises ``KeyError: 'libamd_smi.so'`` (a too-old library raises
``AttributeError``), so the import is lazy, silenced, and every one of those errors means "not
available". ``amdsmi_init`` raises ``AmdSmiLibraryException`` (code 34) when the amdgpu driver
is not loaded. Unsupported values come back as the string ``"N/A"``, not as exceptions.

Units (amdsmi.h and amd_smi.cc): activity %, memory bytes (from ``amdsmi_get_gpu_memory_*``),
power W but power cap µW, energy ``accumulator x resolution`` µJ, temperature °C, clocks MHz.
MI300 reports ``current_socket_power`` and no ``average_socket_power`` (MI200 the reverse).

Must not call ``amdsmi_get_gpu_pci_throughput``: it reads ``pcie_bw`` and blocks a second.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any, Final

from fleetslo.core.errors import GpuReadError, GpuUnavailable
from fleetslo.core.model import GpuSample
from fleetslo.sidecar.gpu import units
from fleetslo.sidecar.gpu.reader import Backend

#: What ``import amdsmi`` raises when the wheel or its shared library is missing or mismatched.
IMPORT_ERRORS: Final = (ImportError, OSError, KeyError, AttributeError)
DRIVER_NOT_LOADED: Final = 34
#: (our sensor name, amdsmi temperature type names to try, newest spelling first)
_SENSORS: Final = (("edge", ("EDGE",)), ("junction", ("HOTSPOT", "JUNCTION")), ("memory", ("VRAM",)))
_CLOCKS: Final = (("graphics", "GFX"), ("memory", "MEM"))
_ECC: Final = (("correctable", "correctable_count"), ("uncorrectable", "uncorrectable_count"),
               ("deferred", "deferred_count"))  # fmt: skip


def import_amdsmi() -> ModuleType:
    """``import amdsmi`` with its stdout chatter swallowed; ``GpuUnavailable`` if it cannot load."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            return importlib.import_module("amdsmi")
    except IMPORT_ERRORS as exc:
        raise GpuUnavailable(f"amdsmi: cannot load ({type(exc).__name__}: {exc})", "no_library") from exc


class AmdSmiLibReader:
    """Initialises amdsmi on first read, keeps the handles, re-initialises after a failure."""

    def __init__(self, loader: Callable[[], ModuleType] = import_amdsmi) -> None:
        self._loader = loader
        self._lib: Any = None
        self._handles: list[Any] = []
        self._identity: list[GpuSample] = []
        self._errors: tuple[type[BaseException], ...] = ()

    @property
    def backend(self) -> Backend:
        return Backend.AMDSMI

    def read(self) -> Sequence[GpuSample]:
        if self._lib is None:
            self._open()
        return [self._telemetry(h, base) for h, base in zip(self._handles, self._identity, strict=True)]

    def close(self) -> None:
        lib, self._lib = self._lib, None
        if lib is not None:
            with contextlib.suppress(Exception):  # shutting down a broken library must not raise
                lib.amdsmi_shut_down()

    def _open(self) -> None:
        lib = self._loader()
        library_error = getattr(lib, "AmdSmiException", Exception)
        try:
            lib.amdsmi_init()
        except library_error as exc:
            raise _init_error(exc) from exc
        try:
            handles = list(lib.amdsmi_get_processor_handles())
        except library_error as exc:
            with contextlib.suppress(Exception):
                lib.amdsmi_shut_down()
            raise GpuReadError(f"amdsmi: cannot list GPUs ({exc})", "library") from exc
        if not handles:
            lib.amdsmi_shut_down()
            raise GpuUnavailable("amdsmi: no GPU found", "no_devices")
        self._lib, self._handles = lib, handles
        self._errors = (library_error, KeyError, TypeError, ValueError, AttributeError)
        self._identity = [self._identify(i, h) for i, h in enumerate(handles)]

    def _call(self, name: str, *args: Any) -> Any:
        """One library call; ``None`` when it raises (unsupported, no permission, retry …)."""
        try:
            return getattr(self._lib, name)(*args)
        except self._errors:
            return None

    def _enum(self, enum: str, member: str) -> Any:
        return getattr(getattr(self._lib, enum, None), member, None)

    def _identify(self, index: int, h: Any) -> GpuSample:
        asic, board = self._call("amdsmi_get_gpu_asic_info", h), self._call("amdsmi_get_gpu_board_info", h)
        kfd, driver = self._call("amdsmi_get_gpu_kfd_info", h), self._call("amdsmi_get_gpu_driver_info", h)
        return GpuSample(
            index=index,
            uuid=units.text(self._call("amdsmi_get_gpu_device_uuid", h)),
            model=units.text(_get(asic, "market_name")),
            vendor="amd",
            serial=units.text(_get(board, "product_serial")) or units.text(_get(asic, "asic_serial")),
            pci_bus_id=units.text(self._call("amdsmi_get_gpu_device_bdf", h)),
            driver_version=units.text(_get(driver, "driver_version")),
            compute_partition=units.text(self._call("amdsmi_get_gpu_compute_partition", h)),
            memory_partition=units.text(self._call("amdsmi_get_gpu_memory_partition", h)),
            partition_id=units.text(_get(kfd, "current_partition_id")),
        )

    def _telemetry(self, h: Any, base: GpuSample) -> GpuSample:
        activity, power = self._call("amdsmi_get_gpu_activity", h), self._call("amdsmi_get_power_info", h)
        vram = self._enum("AmdSmiMemoryType", "VRAM")
        return dataclasses.replace(
            base,
            utilization=units.quantity(_get(activity, "gfx_activity"), "%"),
            memory_bandwidth_utilization=units.quantity(_get(activity, "umc_activity"), "%"),
            memory_used_bytes=units.quantity(self._call("amdsmi_get_gpu_memory_usage", h, vram), "b"),
            memory_total_bytes=units.quantity(self._call("amdsmi_get_gpu_memory_total", h, vram), "b"),
            power_watts=_socket_power(power),
            power_limit_watts=units.quantity(
                _get(self._call("amdsmi_get_power_cap_info", h), "power_cap"), "uw"
            ),
            energy_joules=_energy(self._call("amdsmi_get_energy_count", h)),
            temperatures_celsius=self._temperatures(h),
            clocks_hertz=self._clocks(h),
            ecc_errors=_ecc(self._call("amdsmi_get_gpu_total_ecc_count", h)),
        )

    def _temperatures(self, h: Any) -> dict[str, float]:
        current = self._enum("AmdSmiTemperatureMetric", "CURRENT")
        out = {}
        for sensor, names in _SENSORS:
            kind = next((k for n in names if (k := self._enum("AmdSmiTemperatureType", n)) is not None), None)
            value = (
                None
                if kind is None
                else units.quantity(self._call("amdsmi_get_temp_metric", h, kind, current), "c")
            )
            if value is not None:
                out[sensor] = value
        return out

    def _clocks(self, h: Any) -> dict[str, float]:
        out = {}
        for name, member in _CLOCKS:
            info = self._call("amdsmi_get_clock_info", h, self._enum("AmdSmiClkType", member))
            value = units.quantity(_get(info, "clk"), "mhz")
            if value is not None:
                out[name] = value
        return out


def _init_error(exc: BaseException) -> GpuReadError:
    code = getattr(exc, "err_code", None)
    if code is None and callable(getattr(exc, "get_error_code", None)):
        code = exc.get_error_code()  # type: ignore[attr-defined]
    if code == DRIVER_NOT_LOADED or "DRIVER_NOT_LOADED" in str(exc):
        return GpuUnavailable(f"amdsmi: amdgpu driver not loaded ({exc})", "driver_not_loaded")
    return GpuUnavailable(f"amdsmi: init failed ({exc})", "init")


def _socket_power(info: object) -> float | None:
    keys = ("current_socket_power", "socket_power", "average_socket_power")
    return units.first(*(units.quantity(_get(info, key), "w") for key in keys))


def _energy(info: object) -> float | None:
    """``energy_accumulator`` (``power`` in amdsmi 6.0) x ``counter_resolution`` µJ, in joules."""
    accumulator = units.number(_get(info, "energy_accumulator"))
    if accumulator is None:
        accumulator = units.number(_get(info, "power"))
    resolution = units.number(_get(info, "counter_resolution"))
    if accumulator is None or resolution is None:
        return None
    return units.in_range(accumulator * resolution * 1e-6, units.Quantity.JOULES)


def _ecc(info: object) -> dict[str, float]:
    out = {}
    for severity, key in _ECC:
        value = units.quantity(_get(info, key), "count")
        if value is not None:
            out[severity] = value
    return out


def _get(node: object, key: str) -> object:
    return node.get(key) if isinstance(node, Mapping) else None
