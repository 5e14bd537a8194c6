"""GPU samples from the ``amd-smi`` command line tool's ``--json`` output.

``amd-smi list --json`` and ``amd-smi static --json`` give identity (read once, retried until
they succeed); ``amd-smi metric --json`` gives telemetry on every read. Shapes handled:
ROCm 6 prints a top-level list ``[{"gpu": 0, …}]``, ROCm 7 wraps it as ``{"gpu_data": […]}``;
numbers come as ``{"value": N, "unit": "W"}`` (bare numbers on older builds), unsupported values
as ``"N/A"``; "MB" means MiB. Sections read (amdsmi_cli/amdsmi_commands.py ``metric_gpu``):
``usage``, ``power``, ``clock.gfx_0``/``mem_0``, ``temperature.{edge,hotspot,mem}``,
``mem_usage``, ``ecc``, ``energy``.

The parsing functions are pure and total: any JSON in, samples with ``None`` holes out, never an
exception other than ``GpuReadError`` for a document that has no GPU list at all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final

from fleetslo.core.errors import GpuReadError
from fleetslo.core.model import GpuSample
from fleetslo.sidecar.gpu import units
from fleetslo.sidecar.gpu.command import parse_json, run_tool
from fleetslo.sidecar.gpu.reader import Backend

_TEMPERATURES: Final = {"edge": "edge", "hotspot": "junction", "junction": "junction", "mem": "memory"}
_ECC: Final = {
    "correctable": ("total_correctable_count", "correctable"),
    "uncorrectable": ("total_uncorrectable_count", "uncorrectable"),
    "deferred": ("total_deferred_count", "deferred"),
}


class AmdSmiCliReader:
    """Runs ``amd-smi`` (path ``tool``) with ``timeout`` seconds per call."""

    def __init__(self, tool: str = "amd-smi", timeout: float = 8.0) -> None:
        self._tool = tool
        self._timeout = timeout
        self._identity: dict[int, GpuSample] | None = None

    @property
    def backend(self) -> Backend:
        return Backend.AMD_SMI

    def close(self) -> None:
        self._identity = None

    def read(self) -> Sequence[GpuSample]:
        metric = parse_json(run_tool([self._tool, "metric", "--json"], self._timeout), "amd-smi metric")
        if self._identity is None:
            listed = parse_json(run_tool([self._tool, "list", "--json"], self._timeout), "amd-smi list")
            static = parse_json(run_tool([self._tool, "static", "--json"], self._timeout), "amd-smi static")
            self._identity = identities(listed, static)
        return samples(metric, self._identity)


def gpu_entries(doc: object) -> list[Mapping[str, Any]]:
    """The per-GPU objects of either output shape, each with an integer ``gpu`` index."""
    if isinstance(doc, Mapping) and "gpu_data" in doc:
        doc = doc["gpu_data"]
    if not isinstance(doc, list):
        raise GpuReadError("amd-smi: expected a list of GPUs or {'gpu_data': [...]}", "parse")
    return [e for e in doc if isinstance(e, Mapping) and _index(e) is not None]


def identities(listed: object, static: object) -> dict[int, GpuSample]:
    """Identity-only samples by index, from ``list --json`` and ``static --json``."""
    out: dict[int, GpuSample] = {}
    for entry in gpu_entries(listed):
        index = _index(entry)
        if index is not None:
            out[index] = GpuSample(index, uuid=units.text(entry.get("uuid")), vendor="amd")
    for entry in gpu_entries(static):
        index = _index(entry)
        if index is not None:
            out[index] = _static(out.get(index) or GpuSample(index, vendor="amd"), entry)
    return out


def _static(base: GpuSample, entry: Mapping[str, Any]) -> GpuSample:
    return dataclasses.replace(
        base,
        model=units.text(dig(entry, "asic", "market_name")),
        serial=units.text(dig(entry, "board", "product_serial"))
        or units.text(dig(entry, "asic", "asic_serial")),
        pci_bus_id=units.text(dig(entry, "bus", "bdf")) or base.pci_bus_id,
        driver_version=units.text(dig(entry, "driver", "version"))
        or units.text(dig(entry, "driver", "driver_version")),
        compute_partition=units.text(dig(entry, "partition", "compute_partition")),
        memory_partition=units.text(dig(entry, "partition", "memory_partition")),
        partition_id=units.text(dig(entry, "partition", "partition_id")),
        power_limit_watts=units.first(
            units.quantity(dig(entry, "limit", "socket_power"), "w"),
            units.quantity(dig(entry, "limit", "power"), "w"),
        ),
    )


def samples(metric: object, identity: Mapping[int, GpuSample]) -> list[GpuSample]:
    """Telemetry samples from ``metric --json``, merged onto the identity of the same index."""
    out = []
    for entry in gpu_entries(metric):
        index = _index(entry)
        if index is not None:
            out.append(_telemetry(identity.get(index) or GpuSample(index, vendor="amd"), entry))
    return out


def _telemetry(base: GpuSample, entry: Mapping[str, Any]) -> GpuSample:
    return dataclasses.replace(
        base,
        utilization=units.quantity(dig(entry, "usage", "gfx_activity"), "%"),
        memory_bandwidth_utilization=units.quantity(dig(entry, "usage", "umc_activity"), "%"),
        memory_used_bytes=units.quantity(dig(entry, "mem_usage", "used_vram"), "mb"),
        memory_total_bytes=units.quantity(dig(entry, "mem_usage", "total_vram"), "mb"),
        power_watts=units.first(
            units.quantity(dig(entry, "power", "socket_power"), "w"),
            units.quantity(dig(entry, "power", "current_socket_power"), "w"),
            units.quantity(dig(entry, "power", "average_socket_power"), "w"),
        ),
        energy_joules=_energy(dig(entry, "energy", "total_energy_consumption")),
        temperatures_celsius=_keyed(dig(entry, "temperature"), _TEMPERATURES, "c"),
        clocks_hertz=_clocks(dig(entry, "clock")),
        ecc_errors=_ecc(dig(entry, "ecc")),
    )


def _energy(raw: object) -> float | None:
    """Only a value with its unit: the bare number's unit changed across amd-smi releases."""
    return units.quantity(raw, "j") if isinstance(raw, Mapping) else None


def _clocks(section: object) -> dict[str, float]:
    clocks = {
        "graphics": units.quantity(dig(section, "gfx_0", "clk"), "mhz"),
        "memory": units.quantity(dig(section, "mem_0", "clk"), "mhz"),
    }
    return {name: value for name, value in clocks.items() if value is not None}


def _ecc(section: object) -> dict[str, float]:
    out = {}
    for severity, keys in _ECC.items():
        value = next((v for k in keys if (v := units.quantity(dig(section, k), "count")) is not None), None)
        if value is not None:
            out[severity] = value
    return out


def _keyed(section: object, names: Mapping[str, str], unit: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, name in names.items():
        value = units.quantity(dig(section, key), unit)
        if value is not None:
            out.setdefault(name, value)
    return out


def dig(node: object, *path: str) -> object:
    """``node[path[0]][path[1]]…``, or ``None`` as soon as a step is not a mapping with that key."""
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def _index(entry: Mapping[str, Any]) -> int | None:
    raw = entry.get("gpu")
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and 0 <= raw < 4096 else None
