"""The amdsmi and NVML backends against fake ``amdsmi`` / ``pynvml`` modules in ``sys.modules``,
shaped as the real wheels are (amdsmi 7.0.2, nvidia-ml-py 13.x; see research/rocm.md §2, §5)."""

from __future__ import annotations

import sys
from enum import IntEnum
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fleetslo.core.errors import GpuReadError, GpuUnavailable
from fleetslo.sidecar.gpu.amdsmi_lib import AmdSmiLibReader, import_amdsmi
from fleetslo.sidecar.gpu.nvml import NvmlReader, import_pynvml

from tests.unit.gpu.gpu_fakes import install_module

# --- a fake amdsmi ----------------------------------------------------------------------------


class AmdSmiException(Exception):
    pass


class AmdSmiLibraryException(AmdSmiException):
    def __init__(self, code: int) -> None:
        super().__init__(f"Error code: {code}")
        self.err_code = code

    def get_error_code(self) -> int:
        return self.err_code


class TemperatureType(IntEnum):
    EDGE = 0
    HOTSPOT = 1
    VRAM = 2


class Clk(IntEnum):
    GFX = 0
    MEM = 1


def fake_amdsmi(monkeypatch: pytest.MonkeyPatch, gpus: int = 2, init_error: int | None = None) -> Any:
    """MI300X-like: current socket power valid, average N/A, EDGE temperature unsupported."""

    def init() -> None:
        if init_error is not None:
            raise AmdSmiLibraryException(init_error)

    def temp(h: int, kind: TemperatureType, metric: int) -> Any:
        if kind is TemperatureType.EDGE:
            raise AmdSmiLibraryException(2)  # NOT_SUPPORTED
        return {TemperatureType.HOTSPOT: 45, TemperatureType.VRAM: 39}[kind]

    return install_module(monkeypatch, "amdsmi", {
        "AmdSmiException": AmdSmiException,
        "AmdSmiLibraryException": AmdSmiLibraryException,
        "AmdSmiTemperatureType": TemperatureType,
        "AmdSmiTemperatureMetric": SimpleNamespace(CURRENT=0),
        "AmdSmiMemoryType": SimpleNamespace(VRAM=0),
        "AmdSmiClkType": Clk,
        "amdsmi_init": init,
        "amdsmi_shut_down": lambda: None,
        "amdsmi_get_processor_handles": lambda: list(range(gpus)),
        "amdsmi_get_gpu_device_uuid": lambda h: f"uuid-{h}",
        "amdsmi_get_gpu_device_bdf": lambda h: f"0000:{5 + h:02x}:00.0",
        "amdsmi_get_gpu_asic_info": lambda h: {"market_name": "AMD Instinct MI300X", "asic_serial": "N/A"},
        "amdsmi_get_gpu_board_info": lambda h: {"product_serial": "692347006052"},
        "amdsmi_get_gpu_kfd_info": lambda h: {"kfd_id": 1, "node_id": 2, "current_partition_id": 0},
        "amdsmi_get_gpu_driver_info": lambda h: {"driver_version": "6.10.5"},
        "amdsmi_get_gpu_compute_partition": lambda h: "SPX",
        "amdsmi_get_gpu_memory_partition": lambda h: "NPS1",
        "amdsmi_get_gpu_activity": lambda h: {"gfx_activity": 64, "umc_activity": 20, "mm_activity": "N/A"},
        "amdsmi_get_gpu_memory_usage": lambda h, kind: 150 * 2**30,
        "amdsmi_get_gpu_memory_total": lambda h, kind: 192 * 2**30,
        "amdsmi_get_power_info": lambda h: {"current_socket_power": 717, "average_socket_power": "N/A",
                                            "power_limit": 750_000_000},
        "amdsmi_get_power_cap_info": lambda h: {"power_cap": 750_000_000},
        "amdsmi_get_energy_count": lambda h: {"energy_accumulator": 10_000_000, "counter_resolution": 15.259,
                                              "timestamp": 1},
        "amdsmi_get_temp_metric": temp,
        "amdsmi_get_clock_info": lambda h, kind: {"clk": 2100 if kind is Clk.GFX else 1300, "min_clk": 500},
        "amdsmi_get_gpu_total_ecc_count": lambda h: {"correctable_count": 3, "uncorrectable_count": 0,
                                                     "deferred_count": "N/A"},
    })  # fmt: skip


def test_amdsmi_values_are_converted_to_base_units(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_amdsmi(monkeypatch)
    first, second = AmdSmiLibReader().read()
    assert (second.index, second.uuid, second.pci_bus_id) == (1, "uuid-1", "0000:06:00.0")
    assert (first.model, first.serial, first.driver_version) == (
        "AMD Instinct MI300X",
        "692347006052",
        "6.10.5",
    )
    assert (first.compute_partition, first.memory_partition, first.partition_id) == ("SPX", "NPS1", "0")
    assert first.utilization == pytest.approx(0.64) and first.memory_bandwidth_utilization == pytest.approx(
        0.2
    )
    assert first.memory_used_bytes == 150 * 2**30 and first.memory_total_bytes == 192 * 2**30
    assert first.power_watts == 717.0  # current socket power; average is N/A on MI300
    assert first.power_limit_watts == 750.0  # power cap is in µW
    assert first.energy_joules == pytest.approx(10_000_000 * 15.259e-6)
    assert first.temperatures_celsius == {"junction": 45.0, "memory": 39.0}  # EDGE raised: absent
    assert first.clocks_hertz == {"graphics": 2100e6, "memory": 1300e6}
    assert first.ecc_errors == {"correctable": 3.0, "uncorrectable": 0.0}  # deferred N/A: absent


def test_amdsmi_on_mi200_falls_back_to_average_socket_power(monkeypatch: pytest.MonkeyPatch) -> None:
    module = fake_amdsmi(monkeypatch, gpus=1)
    module.amdsmi_get_power_info = lambda h: {"current_socket_power": "N/A", "average_socket_power": 250}
    (s,) = AmdSmiLibReader().read()
    assert s.power_watts == 250.0


def test_amdsmi_with_the_driver_not_loaded_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_amdsmi(monkeypatch, init_error=34)
    with pytest.raises(GpuUnavailable) as error:
        AmdSmiLibReader().read()
    assert error.value.reason == "driver_not_loaded"


def test_amdsmi_with_no_gpu_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_amdsmi(monkeypatch, gpus=0)
    with pytest.raises(GpuUnavailable) as error:
        AmdSmiLibReader().read()
    assert error.value.reason == "no_devices"


def test_importing_amdsmi_without_its_library_raises_keyerror_and_is_unavailable_and_quiet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the real wheel does without libamd_smi.so: two lines on stdout, then KeyError."""
    package = tmp_path / "amdsmi"
    package.mkdir()
    (package / "__init__.py").write_text(
        "print('/opt/rocm/lib/libamd_smi.so: cannot open shared object file: No such file or directory')\n"
        "print('Unable to find libamd_smi.so library try installing amd-smi-lib from your package manager')\n"
        "_libraries = {}\n"
        "_libraries['libamd_smi.so']\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "amdsmi", raising=False)
    with pytest.raises(GpuUnavailable) as error:
        import_amdsmi()
    assert error.value.reason == "no_library"
    assert isinstance(error.value.__cause__, KeyError)
    assert capsys.readouterr().out == ""


def test_amdsmi_not_installed_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "amdsmi", None)  # makes `import amdsmi` raise ImportError
    with pytest.raises(GpuUnavailable):
        AmdSmiLibReader().read()


GIB = 2**30

# --- a fake pynvml ----------------------------------------------------------------------------


class NVMLError(Exception):
    pass


class NVMLError_LibraryNotFound(NVMLError):  # the real class name
    pass


class NVMLError_NotSupported(NVMLError):
    pass


def fake_pynvml(monkeypatch: pytest.MonkeyPatch, init_error: type[NVMLError] | None = None) -> Any:
    def init() -> None:
        if init_error is not None:
            raise init_error("NVML Shared Library Not Found")

    def not_supported(*_: Any) -> Any:
        raise NVMLError_NotSupported("Not Supported")

    return install_module(monkeypatch, "pynvml", {
        "NVMLError": NVMLError,
        "NVML_TEMPERATURE_GPU": 0, "NVML_CLOCK_SM": 1, "NVML_CLOCK_MEM": 2, "NVML_VOLATILE_ECC": 0,
        "NVML_MEMORY_ERROR_TYPE_CORRECTED": 0, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED": 1,
        "nvmlInit": init,
        "nvmlShutdown": lambda: None,
        "nvmlDeviceGetCount": lambda: 1,
        "nvmlDeviceGetHandleByIndex": lambda i: f"h{i}",
        "nvmlDeviceGetUUID": lambda h: "GPU-5f1c0b7e-0000-1111-2222-333344445555",
        "nvmlDeviceGetName": lambda h: b"NVIDIA H100 80GB HBM3",
        "nvmlDeviceGetSerial": not_supported,
        "nvmlDeviceGetPciInfo": lambda h: SimpleNamespace(busId="00000000:1B:00.0"),
        "nvmlSystemGetDriverVersion": lambda: "550.54.15",
        "nvmlDeviceGetUtilizationRates": lambda h: SimpleNamespace(gpu=91, memory=40),
        "nvmlDeviceGetMemoryInfo": lambda h: SimpleNamespace(total=80 * GIB, used=70 * GIB, free=10 * GIB),
        "nvmlDeviceGetPowerUsage": lambda h: 612_345,
        "nvmlDeviceGetEnforcedPowerLimit": lambda h: 700_000,
        "nvmlDeviceGetTotalEnergyConsumption": lambda h: 987_654_321,
        "nvmlDeviceGetTemperature": lambda h, sensor: 67,
        "nvmlDeviceGetClockInfo": lambda h, kind: 1980 if kind == 1 else 2619,
        "nvmlDeviceGetTotalEccErrors": not_supported,
    })  # fmt: skip


def test_nvml_values_are_converted_to_base_units(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_pynvml(monkeypatch)
    (s,) = NvmlReader().read()
    assert (s.vendor, s.model, s.serial) == ("nvidia", "NVIDIA H100 80GB HBM3", None)
    assert s.uuid == "GPU-5f1c0b7e-0000-1111-2222-333344445555"
    assert s.utilization == pytest.approx(0.91) and s.memory_bandwidth_utilization == pytest.approx(0.4)
    assert s.memory_used_bytes == 70 * 2**30 and s.memory_total_bytes == 80 * 2**30
    assert s.power_watts == pytest.approx(612.345) and s.power_limit_watts == 700.0
    assert s.energy_joules == pytest.approx(987_654.321)
    assert s.temperatures_celsius == {"gpu": 67.0}
    assert s.clocks_hertz == {"graphics": 1980e6, "memory": 2619e6}
    assert s.ecc_errors == {}  # not supported: absent, not 0


def test_nvml_without_its_library_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_pynvml(monkeypatch, init_error=NVMLError_LibraryNotFound)
    with pytest.raises(GpuUnavailable) as error:
        NvmlReader().read()
    assert error.value.reason == "no_library"


def test_pynvml_not_installed_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with pytest.raises(GpuUnavailable, match="nvidia-ml-py"):
        import_pynvml()


def test_a_library_failing_to_list_gpus_is_a_read_error_and_reinitialises(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = fake_pynvml(monkeypatch)
    calls = []
    module.nvmlInit = lambda: calls.append("init")

    def broken() -> int:
        raise NVMLError("GPU is lost")

    module.nvmlDeviceGetCount = broken
    reader = NvmlReader()
    with pytest.raises(GpuReadError):
        reader.read()
    module.nvmlDeviceGetCount = lambda: 1
    assert len(reader.read()) == 1
    assert calls == ["init", "init"]
