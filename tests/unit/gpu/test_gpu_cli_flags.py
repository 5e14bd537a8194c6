"""The exporter's GPU flags, config keys and visible-devices environment, as cli.py reads them."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleetslo.cli import _gpu_options, build_parser, main, merged_options
from fleetslo.core.config import load
from fleetslo.core.errors import ConfigError
from fleetslo.core.model import GpuSample
from fleetslo.sidecar.gpu.attribution import resolve, select
from fleetslo.sidecar.gpu.reader import Backend
from fleetslo.sidecar.gpu.settings import GpuSettings
from fleetslo.sidecar.settings import ExporterSettings

KEYS = ("vllm_url", "interval", "gpu_backend", "gpus", "sysfs_root", "gpu_interval", "gpu_timeout")


def settings_from(argv: list[str], environ: dict[str, str]) -> tuple[ExporterSettings, GpuSettings]:
    options = merged_options(build_parser().parse_args(["exporter", *argv]), KEYS)
    gpu = load(GpuSettings, _gpu_options(options, environ), "gpu settings")
    return load(ExporterSettings, options, "exporter settings"), gpu


def test_flags_and_environment_become_gpu_settings() -> None:
    exporter, gpu = settings_from(
        [
            "--gpu-backend",
            "amd-smi",
            "--sysfs-root",
            "/host/sys",
            "--gpu-interval",
            "10s",
            "--gpu-timeout",
            "3s",
        ],
        {
            "ROCR_VISIBLE_DEVICES": "4,5,6,7",
            "HIP_VISIBLE_DEVICES": "0,1",
            "POD_NAME": "qwen-0",
            "HOME": "/root",
        },
    )
    assert exporter.vllm_url == "http://127.0.0.1:8000"
    assert (gpu.backend, gpu.sysfs_root, gpu.interval, gpu.command_timeout) == (
        Backend.AMD_SMI,
        "/host/sys",
        10,
        3,
    )
    assert (gpu.rocr_visible_devices, gpu.hip_visible_devices, gpu.pod_name) == ("4,5,6,7", "0,1", "qwen-0")
    selection = resolve(gpu.gpus, gpu.rocr_visible_devices, gpu.hip_visible_devices, gpu.cuda_visible_devices)
    assert selection is not None
    assert [s.index for s in select([GpuSample(i) for i in range(8)], selection)] == [4, 5]


def test_gpu_keys_in_the_config_file_are_not_rejected_by_the_exporter_settings(tmp_path: Path) -> None:
    config = tmp_path / "sidecar.yaml"
    config.write_text("vllm_url: http://vllm:8000\ngpu_backend: sysfs\ngpus: all\n")
    exporter, gpu = settings_from(["--config", str(config)], {})
    assert exporter.vllm_url == "http://vllm:8000"
    assert (gpu.backend, gpu.gpus) == (Backend.SYSFS, "all")


def test_bad_gpu_settings_name_the_key_and_value() -> None:
    with pytest.raises(ConfigError, match="interval"):
        settings_from(["--gpu-interval", "1ms"], {})
    with pytest.raises(ConfigError, match="gpus"):
        settings_from(["--gpus", ",,"], {})
    assert main(["exporter", "--gpu-interval", "forever"]) == 2


def test_an_unknown_backend_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["exporter", "--gpu-backend", "dcgm"])
    assert "invalid choice" in capsys.readouterr().err
