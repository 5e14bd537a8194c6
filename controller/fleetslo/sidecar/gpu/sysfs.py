"""GPU samples from the amdgpu driver's sysfs files: the backend that needs no ROCm library.

Layout (torvalds/linux ``Documentation/gpu/amdgpu/thermal.rst``, ``driver-misc.rst``), under a
configurable root so containers with the host's ``/sys`` mounted elsewhere, and tests, work:

    <root>/class/drm/cardN/device -> the PCI device, with gpu_busy_percent, mem_busy_percent,
        mem_info_vram_{used,total} (bytes), unique_id, product_name, serial_number,
        current_{compute,memory}_partition, and hwmon/hwmonM/ (name "amdgpu") with
        temp*_input (m°C) + temp*_label, power1_input or power1_average (µW), power1_cap (µW),
        freq*_input (Hz) + freq*_label

Only cards whose ``device`` is a PCI device of vendor 0x1002 count: CPX/DPX partition nodes
(``amdgpu_xcp.N``) have no PCI attributes, and their physical sensors are on partition 0 anyway.
Devices are indexed 0..N-1 in PCI address order, the order HIP and amd-smi enumerate them in.

This module must never read ``pcie_bw``: the kernel sleeps one second inside that read. Any file
may vanish or be unreadable at any moment (hot unplug, driver reload): that value is ``None``.
sysfs has no energy counter and no ECC totals this reader trusts, so those stay absent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from fleetslo.core.errors import GpuUnavailable
from fleetslo.core.model import GpuSample
from fleetslo.sidecar.gpu import units
from fleetslo.sidecar.gpu.reader import AMD_DEVICE_NAMES, Backend

AMD_VENDOR: Final = "0x1002"
_CARD = re.compile(r"^card\d+$")
_BDF = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_TEMP_LABELS: Final = {"edge": "edge", "junction": "junction", "mem": "memory", "hotspot": "junction"}
_FREQ_LABELS: Final = {"sclk": "graphics", "mclk": "memory"}


class SysfsReader:
    """Reads every amdgpu PCI device under ``root``; see the module docstring for the layout."""

    def __init__(self, root: str | Path = "/sys") -> None:
        self._root = Path(root)

    @property
    def backend(self) -> Backend:
        return Backend.SYSFS

    def close(self) -> None:
        """Nothing to release: every read opens and closes its files."""

    def read(self) -> Sequence[GpuSample]:
        devices = amd_devices(self._root)
        if not devices:
            raise GpuUnavailable(f"no amdgpu PCI device under {self._root / 'class/drm'}", "no_devices")
        return [read_device(index, device) for index, device in enumerate(devices)]


def amd_devices(root: Path) -> list[Path]:
    """The PCI device directories of amdgpu cards under ``root``, in PCI address order, deduplicated."""
    drm = root / "class" / "drm"
    try:
        cards = [entry for entry in drm.iterdir() if _CARD.match(entry.name)]
    except OSError:
        return []
    found: dict[str, Path] = {}
    for card in cards:
        device = card / "device"
        if _read(device / "vendor") == AMD_VENDOR and _is_amdgpu(device):
            resolved = _resolve(device)
            found.setdefault(resolved.name if resolved else str(device), device)
    return [found[key] for key in sorted(found)]


def _is_amdgpu(device: Path) -> bool:
    """Bound to the amdgpu driver (a VGA function of another driver has no ``mem_info_*``)."""
    driver = _resolve(device / "driver")
    if driver is not None:
        return driver.name == "amdgpu"
    return (device / "mem_info_vram_total").exists()


def read_device(index: int, device: Path) -> GpuSample:
    """One sample from one card's ``device`` directory; unreadable files give ``None``."""
    hwmon = _amdgpu_hwmon(device)
    resolved = _resolve(device)
    bdf = resolved.name if resolved is not None and _BDF.match(resolved.name) else None
    return GpuSample(
        index=index,
        uuid=_unique_id(device),
        model=_read(device / "product_name") or AMD_DEVICE_NAMES.get(_read(device / "device") or ""),
        vendor="amd",
        serial=_read(device / "serial_number"),
        pci_bus_id=bdf,
        compute_partition=_read(device / "current_compute_partition"),
        memory_partition=_read(device / "current_memory_partition"),
        utilization=_value(device / "gpu_busy_percent", "%"),
        memory_bandwidth_utilization=_value(device / "mem_busy_percent", "%"),
        memory_used_bytes=_value(device / "mem_info_vram_used", "b"),
        memory_total_bytes=_value(device / "mem_info_vram_total", "b"),
        power_watts=_power(hwmon),
        power_limit_watts=_value(hwmon / "power1_cap", "uw") if hwmon else None,
        temperatures_celsius=_labelled(hwmon, "temp", _TEMP_LABELS, "mc"),
        clocks_hertz=_labelled(hwmon, "freq", _FREQ_LABELS, "hz"),
    )


def _amdgpu_hwmon(device: Path) -> Path | None:
    try:
        candidates = sorted((device / "hwmon").iterdir())
    except OSError:
        return None
    return next((h for h in candidates if _read(h / "name") == "amdgpu"), None)


def _power(hwmon: Path | None) -> float | None:
    """``power1_input`` (MI300: instantaneous socket power), else ``power1_average`` (MI100/200)."""
    if hwmon is None:
        return None
    current = _value(hwmon / "power1_input", "uw")
    return current if current is not None else _value(hwmon / "power1_average", "uw")


def _labelled(hwmon: Path | None, prefix: str, names: dict[str, str], unit: str) -> dict[str, float]:
    """``{prefix}N_input`` keyed by its ``{prefix}N_label``; never assume which index is which."""
    if hwmon is None:
        return {}
    out: dict[str, float] = {}
    for path in sorted(hwmon.glob(f"{prefix}*_input")):
        stem = path.name.removesuffix("_input")
        label = _read(hwmon / f"{stem}_label")
        name = names.get(label.lower(), label.lower()) if label else stem
        value = units.quantity(_read(path), unit)
        if value is not None:
            out.setdefault(name, value)
    return out


def _unique_id(device: Path) -> str | None:
    """``unique_id`` as ROCm prints it in ``GPU-<id>`` UUIDs: lower-case hex, no ``0x``."""
    raw = _read(device / "unique_id")
    return raw.lower().removeprefix("0x") if raw else None


def _value(path: Path, unit: str) -> float | None:
    return units.quantity(_read(path), unit)


def _read(path: Path) -> str | None:
    """A sysfs attribute's text, stripped; ``None`` when missing, unreadable or empty."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(4096)
    except OSError:
        return None
    return units.text(raw.decode("utf-8", "replace"))


def _resolve(path: Path) -> Path | None:
    try:
        return path.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
