"""Gate settings and flags: validation that names key and value, defaults, the admin token file."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fleetslo import cli
from fleetslo.core.config import load, parse_size
from fleetslo.core.errors import ConfigError
from fleetslo.sidecar.settings import GateServerSettings


def gate_options(argv: list[str]) -> dict[str, object] | None:
    args = cli.build_parser().parse_args(["exporter", *argv])
    keys = (*cli._EXPORTER_KEYS, *cli._GPU_KEYS, *cli._GATE_KEYS, "admin_token_file")
    return cli._gate_options(cli.merged_options(args, keys))


@pytest.mark.parametrize(("text", "size"), [("10MiB", 10 * 1024**2), ("512KiB", 512 * 1024), ("1gb", 10**9),
                                            ("2048", 2048), (4096, 4096), (" 1.5 k ", 1500)])  # fmt: skip
def test_sizes_parse_with_binary_and_decimal_units(text: object, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("bad", ["ten", "10 parsecs", "", True, None, -1.5])
def test_bad_sizes_are_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="expected a size"):
        parse_size(bad)


def test_defaults_are_loopback_admin_no_limit_and_10_mib_bodies() -> None:
    s = load(GateServerSettings, {"listen": "0.0.0.0:8080", "upstream": "http://127.0.0.1:8000/"})
    assert (s.admin_listen, s.max_inflight, s.max_queue, s.queue_timeout) == (
        "127.0.0.1:8081",
        None,
        1024,
        30.0,
    )
    assert (s.max_body, s.upstream, s.admin_token) == (10 * 1024**2, "http://127.0.0.1:8000", None)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("max_inflight", 0, "max_inflight: Input should be greater than or equal to 1"),
        ("max_queue", -1, "max_queue"),
        ("queue_timeout", "2h", "queue_timeout: must be at most 1h"),
        ("queue_timeout", "soon", "queue_timeout: expected a duration"),
        ("upstream", "ftp://x", "upstream: expected an http"),
        ("admin_listen", "nowhere", "admin_listen: expected host:port"),
        ("max_body", "1KB", "max_body"),
    ],
)
def test_bad_values_name_the_key_and_the_value(key: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(
            GateServerSettings,
            {"listen": "0.0.0.0:8080", "upstream": "http://x:1", key: value},
            "gate settings",
        )


def test_the_token_never_shows_in_a_repr() -> None:
    secret = "hunter2-hunter2-hunter2"
    s = load(GateServerSettings, {"listen": ":8080", "upstream": "http://x:1", "admin_token": secret})
    assert secret not in repr(s) and secret not in str(s.model_dump())
    assert s.admin_token is not None and s.admin_token.get_secret_value() == secret


def test_a_short_admin_token_is_a_clear_error_naming_the_length_not_the_token() -> None:
    with pytest.raises(ConfigError, match="shorter than 16 characters") as error:
        load(GateServerSettings, {"listen": ":8080", "upstream": "http://x:1", "admin_token": "abc"})
    assert "abc" not in str(error.value).replace("admin_token", "")


def test_without_gate_listen_the_gate_is_off_and_other_gate_flags_are_an_error() -> None:
    assert gate_options([]) is None
    with pytest.raises(ConfigError, match="gate_max_inflight given without gate_listen"):
        gate_options(["--gate-max-inflight", "4"])
    assert cli.main(["exporter", "--admin-token-file", "/x"]) == cli.EXIT_USAGE


def test_gate_flags_become_settings_and_the_upstream_defaults_to_the_vllm_url(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("  s3cret-of-sixteen-chars\n")
    options = gate_options(["--vllm-url", "http://vllm:8000", "--gate-listen", ":8080",
                            "--gate-max-inflight", "16", "--gate-queue-timeout", "5s",
                            "--admin-token-file", str(token)])  # fmt: skip
    assert options is not None
    s = load(GateServerSettings, options)
    assert (s.upstream, s.max_inflight, s.queue_timeout) == ("http://vllm:8000", 16, 5.0)
    assert s.admin_token is not None and s.admin_token.get_secret_value() == "s3cret-of-sixteen-chars"
    assert s.admin_token_file == str(token)  # the gate re-reads it on rotation


def test_gate_settings_come_from_the_config_file_too(tmp_path: Path) -> None:
    config = tmp_path / "sidecar.yaml"
    config.write_text("gate-listen: 0.0.0.0:8080\ngate_upstream: http://up:9\ngate_max_body: 1MiB\n")
    options = gate_options(["--config", str(config), "--gate-upstream", "http://flag:1"])
    assert options is not None
    s = load(GateServerSettings, options)
    assert (s.listen, s.upstream, s.max_body) == ("0.0.0.0:8080", "http://flag:1", 1024**2)


@pytest.mark.parametrize("content", [None, "", "  \n"])
def test_a_missing_or_empty_token_file_turns_the_admin_api_off_with_a_warning(
    tmp_path: Path, content: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "token"
    if content is not None:
        path.write_text(content)
    with caplog.at_level(logging.WARNING):
        options = gate_options(["--gate-listen", ":8080", "--admin-token-file", str(path)])
    assert options is not None and options["admin_token"] is None
    assert "admin API stays off" in caplog.text


def test_the_port_bounds_come_from_flags_with_safe_defaults() -> None:
    s = load(GateServerSettings, {"listen": ":8080", "upstream": "http://x:1"})
    assert (s.header_timeout, s.body_timeout, s.max_pending_bodies, s.max_pending_bytes) == (
        15.0, 30.0, 2048, 128 * 1024**2,
    )  # fmt: skip
    flags = ["--gate-listen", ":8080", "--gate-header-timeout", "5s", "--gate-body-timeout", "10s",
             "--gate-max-pending-bodies", "32", "--gate-max-pending-bytes", "64MiB",
             "--gate-served-model-name", "llama"]  # fmt: skip
    options = gate_options(flags)
    assert options is not None
    s = load(GateServerSettings, options)
    got = (s.header_timeout, s.body_timeout, s.max_pending_bodies, s.max_pending_bytes, s.served_model_name)
    assert got == (5.0, 10.0, 32, 64 * 1024**2, "llama")
