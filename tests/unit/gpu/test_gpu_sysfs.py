"""The sysfs backend on fake trees laid out as the kernel documents them."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest
from fleetslo.core.errors import GpuUnavailable
from fleetslo.sidecar.gpu.sysfs import SysfsReader

from tests.unit.gpu.gpu_fakes import Card, build_sysfs, device_dir, mi100, mi300x


def test_an_mi300x_reads_junction_and_memory_temperatures_and_instant_power_in_base_units(
    tmp_path: Path,
) -> None:
    (s,) = SysfsReader(build_sysfs(tmp_path, {1: mi300x()})).read()
    assert s.index == 0
    assert s.uuid == "8d1457e2c20f59d2"
    assert s.model == "AMD Instinct MI300X OAM"
    assert s.pci_bus_id == "0000:05:00.0"
    assert (s.compute_partition, s.memory_partition) == ("SPX", "NPS1")
    assert s.utilization == pytest.approx(0.37)
    assert s.memory_bandwidth_utilization == pytest.approx(0.12)
    assert s.memory_total_bytes == 196592 * 2**20
    assert s.memory_used_bytes == 1234567168
    assert s.power_watts == pytest.approx(133.0)
    assert s.power_limit_watts == pytest.approx(750.0)
    assert s.temperatures_celsius == {"junction": 35.0, "memory": 33.0}
    assert s.clocks_hertz == {"graphics": 137e6, "memory": 900e6}
    # sysfs has no energy counter and no trusted ECC totals: absent, not 0.
    assert s.energy_joules is None
    assert s.ecc_errors == {}


def test_an_older_card_reads_edge_temperature_and_average_power_and_is_named_by_device_id(
    tmp_path: Path,
) -> None:
    (s,) = SysfsReader(build_sysfs(tmp_path, {0: mi100()})).read()
    assert s.temperatures_celsius == {"edge": 53.0, "junction": 55.0, "memory": 53.0}
    assert s.power_watts == pytest.approx(36.0)
    assert s.model == "AMD Instinct MI100"
    assert s.utilization == 0.0  # a real idle reading stays 0


def test_gpus_are_indexed_in_pci_order_not_by_drm_card_number(tmp_path: Path) -> None:
    cards = {3: mi300x("0000:26:00.0", "bbbb"), 1: mi300x("0000:05:00.0", "aaaa")}
    samples = SysfsReader(build_sysfs(tmp_path, cards)).read()
    assert [(s.index, s.pci_bus_id, s.uuid) for s in samples] == [
        (0, "0000:05:00.0", "aaaa"),
        (1, "0000:26:00.0", "bbbb"),
    ]


def test_partition_nodes_other_vendors_and_connectors_are_not_gpus(tmp_path: Path) -> None:
    bmc = Card("0000:02:00.0", {"device": "0x2000"}, vendor="0x1a03", driver="ast")
    root = build_sysfs(tmp_path, {0: bmc, 1: mi300x()}, partitions=3)
    samples = SysfsReader(root).read()
    assert [s.pci_bus_id for s in samples] == ["0000:05:00.0"]


def test_a_missing_or_vanished_file_is_absent_and_the_rest_still_reads(tmp_path: Path) -> None:
    card = mi300x()
    root = build_sysfs(tmp_path, {1: card})
    device = device_dir(root, card)
    (device / "gpu_busy_percent").unlink()
    (device / "mem_info_vram_used").unlink()
    (device / "mem_info_vram_used").mkdir()  # unreadable: reading a directory fails
    shutil.rmtree(device / "hwmon")
    (s,) = SysfsReader(root).read()
    assert s.utilization is None
    assert s.memory_used_bytes is None
    assert s.power_watts is None and s.temperatures_celsius == {}
    assert s.memory_total_bytes == 196592 * 2**20


def test_garbage_and_sentinel_values_are_absent(tmp_path: Path) -> None:
    card = mi300x()
    card.attributes["gpu_busy_percent"] = "garbage"
    card.hwmon["temp2_input"] = "65535000"  # 0xFFFF °C: the sensor is not there
    (s,) = SysfsReader(build_sysfs(tmp_path, {1: card})).read()
    assert s.utilization is None
    assert s.temperatures_celsius == {"memory": 33.0}


def test_no_amdgpu_device_is_reported_as_unavailable(tmp_path: Path) -> None:
    with pytest.raises(GpuUnavailable) as missing_root:
        SysfsReader(tmp_path / "nothing").read()
    assert missing_root.value.reason == "no_devices"
    with pytest.raises(GpuUnavailable):
        SysfsReader(build_sysfs(tmp_path / "partitions-only", {}, partitions=2)).read()


def test_pcie_bw_is_never_read(tmp_path: Path) -> None:
    """pcie_bw is a FIFO here: opening it would block the reader forever."""
    root = build_sysfs(tmp_path, {1: mi300x(), 2: mi300x("0000:26:00.0", "bbbb")})
    result: list[int] = []
    worker = threading.Thread(target=lambda: result.append(len(SysfsReader(root).read())), daemon=True)
    worker.start()
    worker.join(timeout=5)
    assert result == [2], "the sysfs reader blocked: it must never open pcie_bw"
