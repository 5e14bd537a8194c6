"""The command line: help, version, and bad input exiting 2 with a message that names the problem."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fleetslo import __version__
from fleetslo.cli import main


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"fleetslo {__version__}"


def test_help_lists_the_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "exporter" in capsys.readouterr().out


def test_no_subcommand_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage:" in capsys.readouterr().out


def test_a_bad_flag_value_exits_2_naming_key_and_value(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["exporter", "--interval", "fast"]) == 2
    err = capsys.readouterr().err
    assert "interval" in err and "fast" in err


def test_a_broken_config_file_exits_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "sidecar.yaml"
    bad.write_text("windows: [1m\n")
    assert main(["exporter", "--config", str(bad)]) == 2
    assert "sidecar.yaml: not valid YAML" in capsys.readouterr().err
    missing = tmp_path / "nope.yaml"
    assert main(["exporter", "--config", str(missing)]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_config_file_values_are_validated_and_flags_override_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "sidecar.yaml"
    config.write_text("slo-ttft: 2s\ninterval: 0\n")
    assert main(["exporter", "--config", str(config)]) == 2
    assert "interval" in capsys.readouterr().err
    config.write_text("slo_ttft: 2s\ninterval: 0\nwindows: nonsense\n")
    assert main(["exporter", "--config", str(config), "--interval", "5s"]) == 2
    err = capsys.readouterr().err
    assert "windows" in err and "interval" not in err.split("windows")[0].split(":", 1)[1]


def test_fake_vllm_with_a_missing_capture_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fake-vllm", "--capture", "/nonexistent/capture.txt"]) == 2
    assert "No such file" in capsys.readouterr().err


def _tiny_trace(tmp_path: Path) -> Path:
    trace = tmp_path / "trace.csv"
    rows = [f"{i * 0.5},{200 + i},{20}" for i in range(120)]
    trace.write_text("arrival_s,input_tokens,output_tokens\n" + "\n".join(rows) + "\n")
    return trace


def test_simulate_report_into_a_missing_folder_creates_it_and_prints_the_table_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "missing-dir" / "deeper" / "x.html"
    argv = ["simulate", "--trace", str(_tiny_trace(tmp_path)), "--profile", "mi300x-llama3.1-8b-fp8-tp1"]
    assert main([*argv, "--report", str(report)]) == 0
    assert "<svg" in report.read_text(encoding="utf-8")
    assert "static" in capsys.readouterr().out  # the results table


def test_simulate_with_an_unwritable_report_stops_before_the_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    argv = ["simulate", "--trace", str(_tiny_trace(tmp_path)), "--profile", "mi300x-llama3.1-8b-fp8-tp1"]
    assert main([*argv, "--report", str(blocker / "x.html")]) == 2
    captured = capsys.readouterr()
    assert "--report" in captured.err and "a-file" in captured.err
    assert captured.out == "", "it must stop before simulating anything"
    assert main([*argv, "--report", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_a_validator_message_names_the_value_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["exporter", "--interval", "abc"]) == 2
    err = capsys.readouterr().err
    assert err.count("abc") == 1, err


def test_a_missing_kubeconfig_is_a_runtime_failure_not_bad_usage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "controller.yaml"
    missing = tmp_path / "no-such-kubeconfig"
    config.write_text(f"kubernetes: {{in_cluster: false, kubeconfig: {missing}}}\n")
    slo = Path(__file__).resolve().parents[3] / "examples" / "slo" / "llama-8b-small.yaml"
    assert main(["run", "--config", str(config), "--slo", str(slo)]) == 1
    err = capsys.readouterr().err
    assert "no-such-kubeconfig" in err and err.count("\n") == 1, err


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 0)])
def test_sigint_exits_130_and_sigterm_0(sig: signal.Signals, status: int) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "fleetslo.cli", "sim-server", "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if "ready" in line:  # the signal handlers are installed by now
                break
        process.send_signal(sig)
        assert process.wait(timeout=20) == status
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def test_demo_with_an_unwritable_report_stops_before_starting_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(["demo", "--report", str(blocker / "x.html")]) == 2
    assert "--report" in capsys.readouterr().err


def test_the_sidecar_settings_are_one_root_and_errors_name_the_part(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Exporter, GPU and gate settings validate together (``sidecar.root``): one error names each
    bad value by its path in the root."""
    args = ["exporter", "--interval", "0", "--gate-listen", "127.0.0.1:0", "--gate-max-queue", "-1"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "sidecar settings" in err and "exporter.interval" in err and "gate.max_queue" in err
