"""The sidecar's fault suites at ``make test`` size: every figure with a goal meets it."""

from __future__ import annotations

import asyncio

import pytest

from benchmarks.faults import sidecar

pytestmark = pytest.mark.slow


def test_the_sidecar_fault_suites_meet_their_goals() -> None:
    figures = asyncio.run(sidecar._async_suites(quick=True))  # the parser's part: test_parser_fuzz
    judged = [f for f in figures if f.goal in ("0", "<= 8")]
    assert len(judged) >= 8
    for f in judged:
        limit = 8 if f.goal == "<= 8" else 0
        assert isinstance(f.value, int) and f.value <= limit, f.line()
