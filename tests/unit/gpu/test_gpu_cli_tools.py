"""The amd-smi and rocm-smi backends: recorded outputs, and fake executables on PATH that print a
fixture, hang, print garbage or fail."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from fleetslo.core.errors import GpuReadError, GpuUnavailable
from fleetslo.sidecar.gpu import amdsmi_cli, rocm_smi
from fleetslo.sidecar.gpu.amdsmi_cli import AmdSmiCliReader
from fleetslo.sidecar.gpu.command import parse_json
from fleetslo.sidecar.gpu.rocm_smi import RocmSmiReader

from tests.unit.gpu.gpu_fakes import FIXTURES, amd_smi_printing, fake_tool, fixture

METRIC6 = "amd-smi_metric_json_MI300X_rocm6_SYNTHETIC.json"
METRIC7 = "amd-smi_metric_json_MI300X_rocm7_SYNTHETIC.json"
LIST = "amd-smi_list_json_MI300X_SYNTHETIC.json"
STATIC6 = "amd-smi_static_json_MI300X_rocm6_SYNTHETIC.json"
STATIC7_MI210 = "amd-smi_static_json_MI210_rocm7.json"
MIB = 2**20


# --- amd-smi: recorded and hand-written outputs ------------------------------------------------


def test_the_recorded_rocm6_power_output_with_its_command_line_reads_socket_power() -> None:
    doc = parse_json(fixture("amd-smi_metric_-p_json_changelog.json.txt"), "amd-smi")
    (s,) = amdsmi_cli.samples(doc, {})
    assert s.power_watts == 10.0
    assert s.utilization is None and s.temperatures_celsius == {} and s.energy_joules is None


def test_the_recorded_rocm7_static_output_gives_identity_and_power_cap() -> None:
    identity = amdsmi_cli.identities([], json.loads(fixture(STATIC7_MI210)))
    assert identity[0].model == "AMD Instinct MI210"
    assert identity[0].power_limit_watts == 300.0
    assert identity[0].driver_version is not None and identity[0].driver_version.startswith("Linux")


def test_rocm6_metric_list_is_converted_to_base_units_and_na_is_absent() -> None:
    identity = amdsmi_cli.identities(json.loads(fixture(LIST)), json.loads(fixture(STATIC6)))
    first, second = amdsmi_cli.samples(json.loads(fixture(METRIC6)), identity)
    assert first.uuid == "afff74a1-0000-1000-8054-e92b0a5d57c8"
    assert (first.model, first.pci_bus_id, first.serial) == ("MI300X-O", "0000:05:00.0", "0xAF54E92B0A5D57C8")
    assert first.utilization == 1.0 and first.memory_bandwidth_utilization == 0.0
    assert first.power_watts == 234.0 and first.power_limit_watts == 750.0
    assert first.memory_total_bytes == 196592 * MIB and first.memory_used_bytes == 7524 * MIB
    assert first.temperatures_celsius == {"junction": 42.0, "memory": 41.0}  # MI300X: no edge
    assert first.clocks_hertz == {"graphics": 2102e6, "memory": 1300e6}
    assert first.ecc_errors == {"correctable": 0.0, "uncorrectable": 0.0, "deferred": 0.0}
    assert first.energy_joules == pytest.approx(78098902.29747205)
    assert second.ecc_errors == {} and second.energy_joules is None and second.power_limit_watts is None


def test_rocm7_gpu_data_wrapper_reads_the_same_way() -> None:
    (s,) = amdsmi_cli.samples(json.loads(fixture(METRIC7)), {})
    assert s.utilization == pytest.approx(0.83)
    assert s.energy_joules == 1234567.5
    assert s.ecc_errors["correctable"] == 2.0


def test_energy_without_a_unit_is_dropped_because_its_unit_changed_across_releases() -> None:
    (s,) = amdsmi_cli.samples([{"gpu": 0, "energy": {"total_energy_consumption": 12345}}], {})
    assert s.energy_joules is None


def test_a_document_without_a_gpu_list_is_a_parse_error() -> None:
    with pytest.raises(GpuReadError) as error:
        amdsmi_cli.samples({"unexpected": 1}, {})
    assert error.value.reason == "parse"


# --- amd-smi: a fake executable ---------------------------------------------------------------


def test_the_reader_runs_amd_smi_and_reads_identity_once(tmp_path: Path) -> None:
    tool = amd_smi_printing(tmp_path / "bin", METRIC6, LIST, STATIC6)
    reader = AmdSmiCliReader(str(tool), timeout=10)
    assert [s.uuid for s in reader.read()] == [
        "afff74a1-0000-1000-8054-e92b0a5d57c8",
        "0aff74a1-0000-1000-805b-ce698de95724",
    ]
    tool.write_text(tool.read_text().replace("list)", "list) exit 3 ;; never)"))
    assert len(reader.read()) == 2  # identity is cached: a broken `list` no longer matters


def test_the_reader_finds_amd_smi_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    amd_smi_printing(tmp_path / "bin", METRIC7, LIST, STATIC6)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    (s,) = AmdSmiCliReader(timeout=10).read()
    assert s.model == "MI300X-O"


def test_a_hanging_tool_is_killed_at_the_timeout_with_its_children(tmp_path: Path) -> None:
    # `sleep` is a child of the shell and holds stdout open: killing only the shell would leave
    # the reader waiting for EOF until the sleep ends.
    tool = fake_tool(tmp_path, "amd-smi", "sleep 30\n")
    started = time.monotonic()
    with pytest.raises(GpuReadError) as error:
        AmdSmiCliReader(str(tool), timeout=0.5).read()
    assert error.value.reason == "timeout"
    assert time.monotonic() - started < 5


def test_garbage_output_is_a_parse_error(tmp_path: Path) -> None:
    tool = fake_tool(tmp_path, "amd-smi", "echo 'Segmentation fault {{{'\n")
    with pytest.raises(GpuReadError) as error:
        AmdSmiCliReader(str(tool)).read()
    assert error.value.reason == "parse"


def test_a_failing_tool_reports_its_exit_status_and_stderr(tmp_path: Path) -> None:
    tool = fake_tool(tmp_path, "amd-smi", "echo 'AMDSMI_STATUS_DRIVER_NOT_LOADED' >&2; exit 1\n")
    with pytest.raises(GpuReadError, match="DRIVER_NOT_LOADED") as error:
        AmdSmiCliReader(str(tool)).read()
    assert error.value.reason == "exit_status"


def test_a_missing_tool_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(GpuUnavailable) as error:
        AmdSmiCliReader(str(tmp_path / "no-such-amd-smi")).read()
    assert error.value.reason == "no_tool"


# --- rocm-smi ---------------------------------------------------------------------------------


def test_the_recorded_mi100_rocm_smi_json_reads_every_card() -> None:
    cards = rocm_smi.samples(json.loads(fixture("rocm-smi_json_MI100_rocm602.json")))
    assert [s.index for s in cards] == [0, 1, 2, 3]
    s = cards[0]
    assert (s.uuid, s.model, s.pci_bus_id) == (
        "79ccd55167a2124a",
        "Arcturus GL-XL [Instinct MI100]",
        "0000:83:00.0",
    )
    assert s.driver_version == "6.3.6"
    assert s.temperatures_celsius == {"edge": 53.0, "junction": 55.0, "memory": 53.0}
    assert s.power_watts == 36.0 and s.power_limit_watts == 290.0
    assert s.memory_total_bytes == 34342961152 and s.memory_used_bytes == 6750208
    assert s.clocks_hertz == {"graphics": 300e6, "memory": 1200e6}
    assert s.utilization == 0.0 and s.serial is None  # "Serial Number": "N/A"


def rocm_smi_text_as_json(text: str) -> dict[str, dict[str, str]]:
    """``rocm-smi -a`` text → the ``--json`` document (same labels as keys, per SOURCES.md)."""
    doc: dict[str, dict[str, str]] = {}
    for match in re.finditer(r"^GPU\[(\d+)\]\s*: (.+?): (.*)$", text, re.MULTILINE):
        doc.setdefault(f"card{match.group(1)}", {}).setdefault(match.group(2), match.group(3).strip())
    return doc


def test_the_recorded_mi300x_rocm_smi_output_reads_junction_memory_and_socket_power() -> None:
    cards = rocm_smi.samples(rocm_smi_text_as_json(fixture("rocm-smi_-a_MI300X_x4.txt")))
    assert len(cards) == 4
    s = cards[0]
    assert s.temperatures_celsius == {"junction": 35.0, "memory": 33.0}
    assert s.power_watts == 133.0 and s.power_limit_watts == 750.0
    assert s.energy_joules == pytest.approx(78098902.29747205)
    assert (s.compute_partition, s.memory_partition) == ("SPX", "NPS1")
    assert (s.serial, s.uuid, s.model) == ("692347006052", "8d1457e2c20f59d2", "AMD Instinct MI300X OAM")
    assert s.clocks_hertz == {"graphics": 137e6, "memory": 900e6}


def test_rocm_smi_printing_a_warning_instead_of_json_is_a_parse_error(tmp_path: Path) -> None:
    tool = fake_tool(tmp_path, "rocm-smi", "echo 'WARNING: No JSON data to report'\n")
    with pytest.raises(GpuReadError) as error:
        RocmSmiReader(str(tool)).read()
    assert error.value.reason == "parse"


def test_rocm_smi_is_run_with_json_and_without_the_blocking_pcie_bandwidth_flag(tmp_path: Path) -> None:
    out = tmp_path / "argv"
    body = f"echo \"$@\" > '{out}'\ncat '{FIXTURES / 'rocm-smi_json_MI100_rocm602.json'}'\n"
    tool = fake_tool(tmp_path / "bin", "rocm-smi", body)
    assert len(RocmSmiReader(str(tool)).read()) == 4
    argv = out.read_text().split()
    assert "--json" in argv and "--showpcibandwidth" not in argv
