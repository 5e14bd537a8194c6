"""GPU samples from the legacy ``rocm-smi --json`` tool (deprecated by AMD, still on many hosts).

Output shape: ``{"card0": {"<label>": "<string>", …}, …, "system": {"Driver version": …}}``;
every value is a string such as ``"35.0"``, ``"(300Mhz)"`` or ``"N/A"``, and the label carries
the unit (``"VRAM Total Memory (B)"``). MI300 prints ``Current Socket Graphics Package Power``
and only junction and memory temperatures; MI100/MI200 print ``Average Graphics Package Power``
and an edge temperature. ``cardN`` is rocm-smi's device index, not the DRM card number.

The parsing functions are pure and total: any JSON in, samples with ``None`` holes out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from fleetslo.core.errors import GpuReadError
from fleetslo.core.model import GpuSample
from fleetslo.sidecar.gpu import units
from fleetslo.sidecar.gpu.command import parse_json, run_tool
from fleetslo.sidecar.gpu.reader import AMD_DEVICE_NAMES, Backend

#: Long flags that exist since ROCm 4, so an old rocm-smi does not reject the command line.
#: ``--showpcibandwidth`` is left out on purpose: it blocks for a second per GPU.
FLAGS: Final = (
    "--showid", "--showuniqueid", "--showproductname", "--showbus", "--showserial", "--showtemp",
    "--showpower", "--showmaxpower", "--showuse", "--showmemuse", "--showmeminfo", "vram",
    "--showclocks", "--showenergycounter", "--showdriverversion", "--json",
)  # fmt: skip
_CARD = re.compile(r"^card(\d+)$")
_TEMPERATURE = re.compile(r"^Temperature \(Sensor (\w+)\) \(C\)$")
_SENSORS: Final = {"edge": "edge", "junction": "junction", "memory": "memory", "hotspot": "junction"}
_MHZ = re.compile(r"\(\s*(\d+(?:\.\d+)?)\s*mhz\s*\)", re.IGNORECASE)
_POWER_KEYS: Final = ("Current Socket Graphics Package Power (W)", "Average Graphics Package Power (W)")


class RocmSmiReader:
    """Runs ``rocm-smi`` (path ``tool``) with ``timeout`` seconds per call."""

    def __init__(self, tool: str = "rocm-smi", timeout: float = 8.0) -> None:
        self._tool = tool
        self._timeout = timeout

    @property
    def backend(self) -> Backend:
        return Backend.ROCM_SMI

    def close(self) -> None:
        """Nothing to release."""

    def read(self) -> Sequence[GpuSample]:
        return samples(parse_json(run_tool([self._tool, *FLAGS], self._timeout), "rocm-smi"))


def samples(doc: object) -> list[GpuSample]:
    """One sample per ``cardN`` object, in index order."""
    if not isinstance(doc, Mapping):
        raise GpuReadError("rocm-smi: expected a JSON object of cards", "parse")
    driver = units.text(_get(doc.get("system"), "Driver version"))
    cards = []
    for key, card in doc.items():
        match = _CARD.match(str(key))
        if match and isinstance(card, Mapping):
            cards.append(_sample(int(match.group(1)), card, driver))
    return sorted(cards, key=lambda s: s.index)


def _sample(index: int, card: Mapping[str, Any], driver: str | None) -> GpuSample:
    unique = units.text(card.get("Unique ID"))
    return GpuSample(
        index=index,
        uuid=unique.lower().removeprefix("0x") if unique else None,
        model=_model(card),
        vendor="amd",
        serial=units.text(card.get("Serial Number")),
        pci_bus_id=units.text(card.get("PCI Bus")),
        driver_version=driver,
        compute_partition=units.text(card.get("Compute Partition")),
        memory_partition=units.text(card.get("Memory Partition")),
        utilization=units.quantity(card.get("GPU use (%)"), "%"),
        memory_bandwidth_utilization=units.quantity(card.get("GPU memory use (%)"), "%"),
        memory_used_bytes=units.quantity(card.get("VRAM Total Used Memory (B)"), "b"),
        memory_total_bytes=units.quantity(card.get("VRAM Total Memory (B)"), "b"),
        power_watts=next(
            (v for k in _POWER_KEYS if (v := units.quantity(card.get(k), "w")) is not None), None
        ),
        power_limit_watts=units.quantity(card.get("Max Graphics Package Power (W)"), "w"),
        energy_joules=units.quantity(card.get("Accumulated Energy (uJ)"), "uj"),
        temperatures_celsius=_temperatures(card),
        clocks_hertz=_clocks(card),
    )


def _model(card: Mapping[str, Any]) -> str | None:
    named = units.text(card.get("Card Series")) or units.text(card.get("Card series"))
    return named or AMD_DEVICE_NAMES.get(str(card.get("Device ID", "")).lower())


def _temperatures(card: Mapping[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, raw in card.items():
        match = _TEMPERATURE.match(str(key))
        value = units.quantity(raw, "c") if match else None
        if match and value is not None:
            out.setdefault(_SENSORS.get(match.group(1).lower(), match.group(1).lower()), value)
    return out


def _clocks(card: Mapping[str, Any]) -> dict[str, float]:
    """``"(300Mhz)"`` under ``sclk clock speed:`` (JSON) or ``"S: (137Mhz)"`` under ``sclk clock level``."""
    out: dict[str, float] = {}
    for prefix, name in (("sclk", "graphics"), ("mclk", "memory")):
        for key in (f"{prefix} clock speed:", f"{prefix} clock level"):
            raw = card.get(key)
            match = _MHZ.search(raw) if isinstance(raw, str) else None
            value = units.quantity(f"{match.group(1)} MHz", "mhz") if match else None
            if value is not None:
                out.setdefault(name, value)
    return out


def _get(node: object, key: str) -> object:
    return node.get(key) if isinstance(node, Mapping) else None
