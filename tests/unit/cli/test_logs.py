"""Logs are quiet by default and complete at ``--log-level debug``, which is accepted before and
after the subcommand; a sidecar whose vLLM is still starting warns once per interval, not per scrape."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import aiohttp
import httpx
import pytest
from fleetslo.cli import build_parser
from fleetslo.core import logs
from fleetslo.sidecar.app import SCRAPE_WARNING_EVERY_S, Sidecar
from fleetslo.sidecar.settings import ExporterSettings
from prometheus_client import CollectorRegistry, start_http_server

from tests.prometheus import free_port


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name in logs.CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET)


@pytest.mark.parametrize(
    ("argv", "level"),
    [
        (["demo"], "info"),
        (["demo", "--log-level", "debug"], "debug"),
        (["--log-level", "warning", "demo"], "warning"),
        (["--log-level", "warning", "demo", "--log-level", "debug"], "debug"),
        (["run", "--slo", "x.yaml", "--log-level", "debug"], "debug"),
    ],
)
def test_log_level_is_accepted_before_and_after_the_subcommand(argv: list[str], level: str) -> None:
    assert build_parser().parse_args(argv).log_level == level


def _request_lines(level: str, capsys: pytest.CaptureFixture[str]) -> int:
    logs.configure(level)
    port = free_port()
    server, _ = start_http_server(port, "127.0.0.1", registry=CollectorRegistry())
    try:
        with httpx.Client() as http:
            for _ in range(3):
                http.get(f"http://127.0.0.1:{port}/metrics")
    finally:
        server.shutdown()
        server.server_close()
    return capsys.readouterr().err.count("HTTP Request")


def test_httpx_request_lines_only_at_debug(capsys: pytest.CaptureFixture[str]) -> None:
    assert _request_lines("info", capsys) == 0
    assert _request_lines("debug", capsys) == 3


def test_scheduler_lines_only_at_debug() -> None:
    logs.configure("info")
    assert not logging.getLogger("apscheduler.executors.default").isEnabledFor(logging.INFO)
    assert logging.getLogger("apscheduler.executors.default").isEnabledFor(logging.WARNING)
    logs.configure("debug")
    assert logging.getLogger("apscheduler.executors.default").isEnabledFor(logging.DEBUG)


@pytest.mark.asyncio
async def test_a_cold_start_warns_once_per_interval_and_everything_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    settings = ExporterSettings(
        vllm_url=f"http://127.0.0.1:{free_port()}", listen="127.0.0.1:0", interval=1.0
    )
    sidecar = Sidecar(settings, clock=lambda: now[0])
    caplog.set_level(logging.DEBUG, logger="fleetslo.exporter")
    async with aiohttp.ClientSession() as session:
        await sidecar.start(session)
        try:
            scrapes = int(5 * SCRAPE_WARNING_EVERY_S)  # 5 intervals of failing scrapes, 1 s apart
            for _ in range(scrapes):
                await sidecar.scrape_once()
                now[0] += 1.0
        finally:
            await sidecar.stop()
    failed = [r for r in caplog.records if r.getMessage().startswith("scrape failed")]
    warnings = [r for r in failed if r.levelno == logging.WARNING]
    assert len(warnings) == 5, [r.getMessage() for r in warnings]
    assert "more failures since the last warning" in warnings[1].getMessage()
    assert len(failed) == scrapes, "every failure is still there at debug level"
