"""Where vLLM is missing or of a version the plugin was not written for, it says so in one
warning line and records nothing: it must never break the engine it is loaded into."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from fleetslo.engine import plugin


def test_an_unsupported_vllm_gets_one_warning_and_a_silent_plugin(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plugin, "vllm_version", lambda: (0, 6))
    config = SimpleNamespace(model_config=SimpleNamespace(served_model_name="m"))
    with caplog.at_level(logging.WARNING, logger="vllm.fleetslo"):
        logger = plugin.FleetSLOStatLogger(config)
        logger.record(SimpleNamespace(iteration_details=None), None)
    assert not logger.enabled
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "fleetslo engine plugin: vLLM 0.6 is not supported (supported: 0.32); no per-step data"
    ]
    assert logger.book.steps == 0


def test_the_version_check_names_an_unreadable_version(caplog: pytest.LogCaptureFixture) -> None:
    # No vLLM in this environment: the general plugin's check still answers in one line.
    with caplog.at_level(logging.WARNING, logger="vllm.fleetslo"):
        plugin.check_support()
    assert [r.getMessage() for r in caplog.records] == [
        "fleetslo engine plugin: vLLM of unknown version is not supported (supported: 0.32); no per-step data"
    ]
