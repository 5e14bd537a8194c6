"""Reads a vLLM server's ``/metrics`` page and classifies every way that can fail.

Asks for text format 0.0.4 so metric names keep their colons (prometheus-client >= 0.23 escapes
them to underscores when asked for OpenMetrics; client_python #1177). Each failure becomes an
``EngineScrapeError`` whose ``reason`` is one of a small fixed set, which is the ``reason`` label
of the error counter. Parsing happens here too, on a worker thread so a large page never stalls
the event loop the gate and ``/metrics`` share (issue 15 defect 13: a 50 MB page stalled both for
4.2 s); a page over ``max_page_bytes`` is refused unread (``page_too_large``). An answer that is
not vLLM metrics is a failed scrape, not an empty success.
"""

from __future__ import annotations

import asyncio

import aiohttp

from fleetslo.core.errors import EngineScrapeError, ExpositionError
from fleetslo.core.metrics.exposition import Page, parse_page

ACCEPT = "text/plain; version=0.0.4; charset=utf-8"
#: Default bound on one page: real vLLM pages are 0.1-2 MB, even with many LoRA adapters.
MAX_PAGE_BYTES = 16 * 1024 * 1024
PAGE_TOO_LARGE = "page_too_large"


class VllmScraper:
    """Fetches and parses one vLLM ``/metrics`` page per call."""

    def __init__(
        self,
        base_url: str,
        timeout: float,
        session: aiohttp.ClientSession,
        max_page_bytes: int = MAX_PAGE_BYTES,
    ) -> None:
        self.url = base_url.rstrip("/") + "/metrics"
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self.session = session
        self.max_page_bytes = max_page_bytes
        #: The text of the last page read successfully (served raw for the controller's direct source).
        self.last_page: str | None = None

    async def scrape(self) -> Page:
        body = await self._fetch()
        text, page = await asyncio.to_thread(self._parse, body)
        if not page.models:
            raise EngineScrapeError(f"{self.url}: the page has no vLLM metrics", "no_vllm_metrics")
        self.last_page = text
        return page

    def _parse(self, body: bytes) -> tuple[str, Page]:
        """Decode and parse (on a worker thread)."""
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise EngineScrapeError(f"{self.url}: page is not UTF-8 text", "parse") from exc
        try:
            return text, parse_page(text)
        except ExpositionError as exc:
            raise EngineScrapeError(f"{self.url}: {exc}", "parse") from exc

    async def _fetch(self) -> bytes:
        limit = self.max_page_bytes
        try:
            async with self.session.get(self.url, headers={"Accept": ACCEPT}, timeout=self.timeout) as resp:
                if resp.status != 200:
                    raise EngineScrapeError(f"{self.url}: HTTP {resp.status}", "http_status")
                if resp.content_length is not None and resp.content_length > limit:
                    raise EngineScrapeError(_too_large(self.url, limit), PAGE_TOO_LARGE)
                body = await _read_all(resp, limit)
        except TimeoutError as exc:
            raise EngineScrapeError(
                f"{self.url}: no answer within {self.timeout.total:g}s", "timeout"
            ) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise EngineScrapeError(f"{self.url}: {type(exc).__name__}: {exc}", "connect") from exc
        if len(body) > limit:
            raise EngineScrapeError(_too_large(self.url, limit), PAGE_TOO_LARGE)
        return body


def _too_large(url: str, limit: int) -> str:
    return f"{url}: page larger than {limit} bytes (raise the sidecar's max_page_bytes if it is real)"


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
