"""Test helpers shared by all tiers: real captures, and tool lookup that fails loudly."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
VLLM_CAPTURES = FIXTURES / "vllm"


def capture(name: str) -> str:
    """The text of a real vLLM /metrics capture in tests/fixtures/vllm."""
    return (VLLM_CAPTURES / name).read_text(encoding="utf-8")


AFTER_LOAD = "vllm-0.32.0-cpu_v1_after_load.txt"
UNDER_LOAD = "vllm-0.32.0-cpu_v1_under_load_8running_32waiting.txt"
IDLE = "vllm-0.32.0-cpu_v1_idle.txt"


def require_tool(name: str, install_hint: str) -> str:
    """Path of an external tool the test runs for real; a failure naming the install if absent.

    Tests that need a real Prometheus, promtool, helm or chromium must not silently pass without
    it. Outside CI a developer may opt out with FLEETSLO_SKIP_MISSING_TOOLS=1.
    """
    path = shutil.which(name)
    if path:
        return path
    message = f"{name} is not installed: {install_hint} (or run `make tools` as root)"
    if os.environ.get("FLEETSLO_SKIP_MISSING_TOOLS") and not os.environ.get("CI"):
        pytest.skip(message)
    pytest.fail(message)
