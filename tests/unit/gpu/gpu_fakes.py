"""Fakes for the GPU tests: sysfs trees laid out as the kernel does, tool scripts, vendor modules.

The sysfs trees follow torvalds/linux Documentation/gpu/amdgpu (thermal.rst, driver-misc.rst)
and the real topology: ``class/drm/cardN`` is a symlink into the PCI device's ``drm/`` folder and
``cardN/device`` points back at the PCI device, whose ``hwmon/hwmonM`` holds the sensors. MI300X
(GC 9.4.3) hides the edge sensor and ``power1_average``; older cards show edge and average power.
"""

from __future__ import annotations

import os
import stat
import sys
import textwrap
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gpu"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


@dataclass
class Card:
    """One amdgpu PCI function: its attributes and its hwmon files."""

    bdf: str
    attributes: dict[str, str] = field(default_factory=dict)
    hwmon: dict[str, str] = field(default_factory=dict)
    vendor: str = "0x1002"
    driver: str | None = "amdgpu"


def mi300x(bdf: str = "0000:05:00.0", unique_id: str = "8d1457e2c20f59d2") -> Card:
    """An MI300X in SPX/NPS1: junction and memory sensors only, power1_input, no power1_average."""
    return Card(
        bdf,
        {
            "device": "0x74a1", "gpu_busy_percent": "37", "mem_busy_percent": "12",
            "mem_info_vram_total": str(196592 * 2**20), "mem_info_vram_used": "1234567168",
            "unique_id": unique_id, "product_name": "AMD Instinct MI300X OAM",
            "serial_number": "692347006052", "current_compute_partition": "SPX",
            "current_memory_partition": "NPS1", "pcie_replay_count": "0",
        },
        {
            "name": "amdgpu", "temp2_input": "35000", "temp2_label": "junction", "temp3_input": "33000",
            "temp3_label": "mem", "power1_input": "133000000", "power1_cap": "750000000",
            "freq1_input": "137000000", "freq1_label": "sclk",
            "freq2_input": "900000000", "freq2_label": "mclk",
        },
    )  # fmt: skip


def mi100(bdf: str = "0000:83:00.0") -> Card:
    """An MI100: edge + junction + memory sensors and power1_average (no power1_input), no FRU name."""
    return Card(
        bdf,
        {
            "device": "0x738c", "gpu_busy_percent": "0", "mem_busy_percent": "0",
            "mem_info_vram_total": "34342961152", "mem_info_vram_used": "6750208",
            "unique_id": "79ccd55167a2124a",
        },
        {
            "name": "amdgpu", "temp1_input": "53000", "temp1_label": "edge", "temp2_input": "55000",
            "temp2_label": "junction", "temp3_input": "53000", "temp3_label": "mem",
            "power1_average": "36000000", "power1_cap": "290000000",
        },
    )  # fmt: skip


def build_sysfs(root: Path, cards: Mapping[int, Card], partitions: int = 0) -> Path:
    """A sysfs tree under ``root``: ``cards`` by DRM card number, plus ``partitions`` XCP nodes."""
    drm = root / "class" / "drm"
    drm.mkdir(parents=True, exist_ok=True)
    (root / "bus/pci/drivers/amdgpu").mkdir(parents=True, exist_ok=True)
    (root / "bus/pci/drivers/ast").mkdir(parents=True, exist_ok=True)
    for number, card in cards.items():
        _pci_card(root, number, card)
    for n in range(partitions):
        _partition_node(root, 100 + n, n + 1)
    return root


def _pci_card(root: Path, number: int, card: Card) -> None:
    device = root / "devices/pci0000:00/0000:00:01.0" / card.bdf
    device.mkdir(parents=True)
    _write(device, {"vendor": card.vendor, **card.attributes})
    if card.driver:
        os.symlink(os.path.relpath(root / "bus/pci/drivers" / card.driver, device), device / "driver")
    if card.hwmon:
        _write(device / "hwmon" / f"hwmon{number + 2}", card.hwmon)
    # pcie_bw blocks a second in the kernel; a FIFO blocks forever, so reading it hangs the test.
    os.mkfifo(device / "pcie_bw")
    for node in (f"card{number}", f"renderD{128 + number}"):
        (device / "drm" / node).mkdir(parents=True)
        os.symlink("../..", device / "drm" / node / "device")
        os.symlink(os.path.relpath(device / "drm" / node, root / "class/drm"), root / "class/drm" / node)
    connector = device / "drm" / f"card{number}" / f"card{number}-DP-1"
    connector.mkdir()
    os.symlink(os.path.relpath(connector, root / "class/drm"), root / "class/drm" / connector.name)


def _partition_node(root: Path, number: int, xcp: int) -> None:
    """A CPX/DPX partition node: a platform device without any PCI attribute."""
    node = root / f"devices/platform/amdgpu_xcp.{xcp}/drm/card{number}"
    node.mkdir(parents=True)
    os.symlink("../..", node / "device")
    os.symlink(os.path.relpath(node, root / "class/drm"), root / "class/drm" / f"card{number}")


def _write(folder: Path, files: Mapping[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, value in files.items():
        (folder / name).write_text(value + "\n")


def device_dir(root: Path, card: Card) -> Path:
    return root / "devices/pci0000:00/0000:00:01.0" / card.bdf


# --- executables on PATH ----------------------------------------------------------------------


def fake_tool(bin_dir: Path, name: str, body: str) -> Path:
    """An executable shell script ``name`` in ``bin_dir``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def amd_smi_printing(bin_dir: Path, metric: str, listed: str, static: str) -> Path:
    """A fake ``amd-smi`` answering ``metric|list|static --json`` with fixture files."""
    return fake_tool(
        bin_dir,
        "amd-smi",
        f"""\
        case "$1" in
          metric) cat '{FIXTURES / metric}' ;;
          list) cat '{FIXTURES / listed}' ;;
          static) cat '{FIXTURES / static}' ;;
          *) echo "unknown command $1" >&2; exit 2 ;;
        esac
        """,
    )


# --- vendor modules ---------------------------------------------------------------------------


def install_module(monkeypatch: Any, name: str, attributes: Mapping[str, Any]) -> types.ModuleType:
    """A fake module ``name`` in ``sys.modules`` for the duration of the test."""
    module = types.ModuleType(name)
    for key, value in attributes.items():
        setattr(module, key, value)
    monkeypatch.setitem(sys.modules, name, module)
    return module
