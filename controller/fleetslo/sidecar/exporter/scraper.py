"""Reads a vLLM server's ``/metrics`` page and classifies every way that can fail.

Asks for text format 0.0.4 so metric names keep their colons (prometheus-client >= 0.23 escapes
them to underscores when asked for OpenMetrics; client_python #1177). Each failure becomes an
``EngineScrapeError`` whose ``reason`` is one of a small fixed set, which is the ``reason`` label
of the error counter. Parsing happens here too: an answer that is not vLLM metrics is a failed
scrape, not an empty success.
"""

from __future__ import annotations

import asyncio

import aiohttp

from fleetslo.core.errors import EngineScrapeError, ExpositionError
from fleetslo.core.metrics.exposition import parse_vllm
from fleetslo.core.model import EngineSnapshot

ACCEPT = "text/plain; version=0.0.4; charset=utf-8"
MAX_PAGE_BYTES = 64 * 1024 * 1024


class VllmScraper:
    """Fetches and parses one vLLM ``/metrics`` page per call."""

    def __init__(self, base_url: str, timeout: float, session: aiohttp.ClientSession) -> None:
        self.url = base_url.rstrip("/") + "/metrics"
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self.session = session
        #: The text of the last page read successfully (served raw for the controller's direct source).
        self.last_page: str | None = None

    async def scrape(self) -> dict[str, EngineSnapshot]:
        text = await self._fetch()
        try:
            models = parse_vllm(text)
        except ExpositionError as exc:
            raise EngineScrapeError(f"{self.url}: {exc}", "parse") from exc
        if not models:
            raise EngineScrapeError(f"{self.url}: the page has no vLLM metrics", "no_vllm_metrics")
        self.last_page = text
        return models

    async def _fetch(self) -> str:
        try:
            async with self.session.get(self.url, headers={"Accept": ACCEPT}, timeout=self.timeout) as resp:
                if resp.status != 200:
                    raise EngineScrapeError(f"{self.url}: HTTP {resp.status}", "http_status")
                body = await _read_all(resp, MAX_PAGE_BYTES)
        except TimeoutError as exc:
            raise EngineScrapeError(
                f"{self.url}: no answer within {self.timeout.total:g}s", "timeout"
            ) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise EngineScrapeError(f"{self.url}: {type(exc).__name__}: {exc}", "connect") from exc
        if len(body) > MAX_PAGE_BYTES:
            raise EngineScrapeError(f"{self.url}: page larger than {MAX_PAGE_BYTES} bytes", "parse")
        try:
            return body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise EngineScrapeError(f"{self.url}: page is not UTF-8 text", "parse") from exc


async def _read_all(resp: aiohttp.ClientResponse, limit: int) -> bytes:
    """The whole body, up to ``limit`` + 1 bytes (one byte more says it was too large).

    ``StreamReader.read(n)`` returns whatever has arrived, at most ``n`` bytes, so a single read of a
    page that spans several TCP segments returns a truncated page; read until the end instead.
    """
    chunks, size = [], 0
    async for chunk in resp.content.iter_chunked(256 * 1024):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            break
    return b"".join(chunks)


async def sleep_until(loop: asyncio.AbstractEventLoop, deadline: float) -> None:
    """Sleep until the loop's monotonic clock reaches ``deadline`` (no drift across ticks)."""
    delay = deadline - loop.time()
    if delay > 0:
        await asyncio.sleep(delay)
