"""The exit status a serving process gives for each way it can be stopped."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
from fleetslo.sidecar.lifecycle import run_until_signalled


def _signalling(signum: int) -> object:
    async def serve(stop: asyncio.Event) -> None:
        os.kill(os.getpid(), signum)
        await asyncio.wait_for(stop.wait(), timeout=10)

    return serve


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
def test_a_signal_stops_the_server_with_the_status_a_service_should_give(signum: int, status: int) -> None:
    assert run_until_signalled(_signalling(signum)) == status  # type: ignore[arg-type]


def test_a_ctrl_c_before_the_handlers_are_installed_exits_130_without_a_traceback() -> None:
    async def serve(stop: asyncio.Event) -> None:
        raise KeyboardInterrupt

    assert run_until_signalled(serve) == 130


def test_a_server_that_returns_on_its_own_exits_0() -> None:
    async def serve(stop: asyncio.Event) -> None:
        return None

    assert run_until_signalled(serve) == 0
