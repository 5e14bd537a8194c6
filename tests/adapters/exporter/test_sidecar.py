"""The sidecar over real sockets against a fake vLLM: derived metrics, every failure mode, recovery.

Scrapes are driven one at a time with a fake monotonic clock, so windows are deterministic; the
HTTP paths (scraping vLLM, serving /metrics) are real.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
from fleetslo.core import conventions as cv
from fleetslo.sidecar.app import Sidecar
from fleetslo.sidecar.settings import ExporterSettings
from fleetslo.testing import FakeClock, FakeVllmServer, grow_capture
from prometheus_client.parser import text_string_to_metric_families

from tests.support import AFTER_LOAD, capture, require_tool

TEXT = capture(AFTER_LOAD)


def samples(page: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(page):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(page: str, name: str, **labels: str) -> float | None:
    for (n, ls), v in samples(page).items():
        if n == name and all(dict(ls).get(k) == x for k, x in labels.items()):
            return v
    return None


def names(page: str) -> set[str]:
    return {n for n, _ in samples(page)}


Scenario = Callable[
    [Sidecar, FakeVllmServer, FakeClock, Callable[[str], Awaitable[tuple[int, str]]]], Awaitable[None]
]


def run(fake: FakeVllmServer, scenario: Scenario, **overrides: object) -> None:
    options: dict[str, object] = {
        "vllm_url": fake.url, "listen": "127.0.0.1:0", "interval": 1.0, "timeout": 2.0,
        "windows": [5.0], "slo_ttft": 2.5, "slo_tpot": 0.05,
    }  # fmt: skip
    options.update(overrides)
    clock = FakeClock()

    async def main() -> None:
        sidecar = Sidecar(ExporterSettings.model_validate(options), clock=clock)
        async with aiohttp.ClientSession() as session:
            await sidecar.start(session)

            async def get(path: str) -> tuple[int, str]:
                async with session.get(f"http://127.0.0.1:{sidecar.port}{path}") as resp:
                    return resp.status, await resp.text()

            try:
                await scenario(sidecar, fake, clock, get)
            finally:
                await sidecar.stop()

    asyncio.run(main())


async def scrapes(
    sidecar: Sidecar, clock: FakeClock, fake: FakeVllmServer, n: int, start: float = 1.0
) -> None:
    for i in range(n):
        fake.page = grow_capture(TEXT, start + i)
        await sidecar.scrape_once()
        clock.advance(1.0)


def test_the_sidecar_serves_windowed_quantiles_attainment_and_rates() -> None:
    async def scenario(sidecar, fake, clock, get) -> None:  # type: ignore[no-untyped-def]
        await scrapes(sidecar, clock, fake, 7)
        status, page = await get("/metrics")
        assert status == 200
        assert value(page, cv.ENGINE_UP, model_name="tiny-llama") == 1
        p90 = value(page, cv.TTFT_SECONDS, model_name="tiny-llama", quantile="0.9", window="5s")
        assert p90 is not None and abs(p90 - 5.03125) < 1e-9
        assert value(page, cv.REQUESTS_PER_SECOND, window="5s") == 79.0
        assert value(page, cv.SLO_ATTAINMENT, slo="tpot", window="5s") == 1.0
        assert fake.accept_headers[-1].startswith("text/plain; version=0.0.4")

    with FakeVllmServer(TEXT) as fake:
        run(fake, scenario)


def test_before_a_window_fills_its_series_are_absent_not_zero() -> None:
    async def scenario(sidecar, fake, clock, get) -> None:  # type: ignore[no-untyped-def]
        await scrapes(sidecar, clock, fake, 2)
        _, page = await get("/metrics")
        assert value(page, cv.ENGINE_UP) == 1
        assert cv.TTFT_SECONDS not in names(page)
        assert cv.REQUESTS_PER_SECOND not in names(page)

    with FakeVllmServer(TEXT) as fake:
        run(fake, scenario)


def test_a_dead_vllm_is_engine_up_zero_with_a_reason_and_the_sidecar_recovers_by_itself() -> None:
    fake = FakeVllmServer(TEXT).start()
    port = fake.port

    async def scenario(sidecar, fake_, clock, get) -> None:  # type: ignore[no-untyped-def]
        await scrapes(sidecar, clock, fake, 7)
        fake.stop()
        await sidecar.scrape_once()
        _, page = await get("/metrics")
        assert value(page, cv.ENGINE_UP, model_name="tiny-llama") == 0
        assert value(page, cv.ENGINE_SCRAPE_ERRORS + "_total", reason="connect") == 1
        assert cv.TTFT_SECONDS not in names(page) and cv.REQUESTS_RUNNING not in names(page)
        status, _ = await get("/vllm/metrics")
        assert status == 503
        back = FakeVllmServer(grow_capture(TEXT, 9.0), port=port).start()
        try:
            for i in range(6):
                clock.advance(1.0)
                back.page = grow_capture(TEXT, 9.0 + i)
                await sidecar.scrape_once()
            _, page = await get("/metrics")
            assert value(page, cv.ENGINE_UP) == 1
            assert value(page, cv.TTFT_SECONDS, quantile="0.9") is not None
        finally:
            back.stop()

    run(fake, scenario)


def test_each_kind_of_bad_answer_is_counted_under_its_own_reason() -> None:
    async def scenario(sidecar, fake, clock, get) -> None:  # type: ignore[no-untyped-def]
        fake.page = "<html>502 Bad Gateway</html>"
        await sidecar.scrape_once()
        fake.page = 'vllm:num_requests_running{model_name="m"} lots\n'
        await sidecar.scrape_once()
        fake.page, fake.status = TEXT, 500
        await sidecar.scrape_once()
        fake.status, fake.delay = 200, 3.0
        await sidecar.scrape_once()
        fake.delay = 0.0
        _, page = await get("/metrics")
        for reason in ("no_vllm_metrics", "parse", "http_status", "timeout"):
            assert value(page, cv.ENGINE_SCRAPE_ERRORS + "_total", reason=reason) == 1, reason
        # Never up yet, so no model is known: no engine_up{model_name=""} (issue 15).
        assert value(page, cv.ENGINE_UP) is None
        status, text = await get("/readyz")
        assert status == 200 and "engine down (timeout" in text

    with FakeVllmServer(TEXT) as fake:
        run(fake, scenario)


def test_health_readiness_and_raw_passthrough() -> None:
    async def scenario(sidecar, fake, clock, get) -> None:  # type: ignore[no-untyped-def]
        assert (await get("/healthz"))[0] == 200
        assert (await get("/readyz"))[0] == 503
        await scrapes(sidecar, clock, fake, 1)
        assert (await get("/readyz"))[0] == 200
        status, raw = await get("/vllm/metrics")
        assert status == 200 and "vllm:time_to_first_token_seconds_bucket" in raw

    with FakeVllmServer(TEXT) as fake:
        run(fake, scenario)


def test_the_sidecar_page_passes_promtool_check_metrics(tmp_path: Path) -> None:
    promtool = require_tool("promtool", "apt-get install prometheus")
    pages: list[str] = []

    async def scenario(sidecar, fake, clock, get) -> None:  # type: ignore[no-untyped-def]
        await scrapes(sidecar, clock, fake, 7)
        pages.append((await get("/metrics"))[1])

    with FakeVllmServer(TEXT) as fake:
        run(fake, scenario)
    result = subprocess.run(
        [promtool, "check", "metrics"], input=pages[0], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_page_larger_than_one_read_is_read_whole() -> None:
    """A 1 MB page arrives in many TCP segments; the sidecar must read all of it, not the first."""
    from benchmarks.pages import large_page

    page = large_page()

    async def scenario(sidecar, fake, clock, get) -> None:  # type: ignore[no-untyped-def]
        for i in range(3):
            fake.page = grow_capture(page, 1.0 + i)
            await sidecar.scrape_once()
            clock.advance(1.0)
        _, metrics = await get("/metrics")
        assert value(metrics, cv.ENGINE_SCRAPE_ERRORS + "_total", reason="parse") == 0
        assert value(metrics, cv.ENGINE_UP, model_name="model-7") == 1

    assert len(page) > 1_000_000
    with FakeVllmServer(page) as fake:
        run(fake, scenario)


def test_one_impossible_sample_is_rejected_counted_and_never_poisons_the_windows() -> None:
    # Issue 15 defect 9: one NaN counter left requests/s NaN ten minutes later, and one bucket
    # set to 1e20 moved p90 TTFT from 5.03 to 6.68 s.
    async def scenario(sidecar, fake, clock, get) -> None:  # type: ignore[no-untyped-def]
        await scrapes(sidecar, clock, fake, 7)
        poisoned = grow_capture(TEXT, 8.0).splitlines()
        for i, line in enumerate(poisoned):
            if line.startswith("vllm:request_success_total{"):
                poisoned[i] = line.rsplit(" ", 1)[0] + " NaN"
            elif line.startswith("vllm:time_to_first_token_seconds_bucket{") and 'le="2.5"' in line:
                poisoned[i] = line.rsplit(" ", 1)[0] + " 1e20"
        fake.page = "\n".join(poisoned) + "\n"
        await sidecar.scrape_once()
        clock.advance(1.0)
        _, page = await get("/metrics")
        assert "NaN" not in page and "nan" not in page
        assert value(page, cv.ENGINE_REJECTED_SAMPLES + "_total", reason="non_finite") >= 1
        assert value(page, cv.ENGINE_REJECTED_SAMPLES + "_total", reason="not_monotonic") == 1
        await scrapes(sidecar, clock, fake, 8, start=9.0)
        _, page = await get("/metrics")
        assert value(page, cv.REQUESTS_PER_SECOND, window="5s") == 79.0
        p90 = value(page, cv.TTFT_SECONDS, model_name="tiny-llama", quantile="0.9", window="5s")
        assert p90 is not None and abs(p90 - 5.03125) < 1e-9

    with FakeVllmServer(TEXT) as fake:
        run(fake, scenario)


def test_a_page_over_the_size_bound_is_a_failed_scrape_with_its_own_reason() -> None:
    async def scenario(sidecar, fake, clock, get) -> None:  # type: ignore[no-untyped-def]
        fake.page = TEXT + "# padding\n" * 20_000
        await sidecar.scrape_once()
        _, page = await get("/metrics")
        assert value(page, cv.ENGINE_SCRAPE_ERRORS + "_total", reason="page_too_large") == 1
        await scrapes(sidecar, clock, fake, 1)
        assert value((await get("/metrics"))[1], cv.ENGINE_UP, model_name="tiny-llama") == 1

    with FakeVllmServer(TEXT) as fake:
        run(fake, scenario, max_page_bytes="128KiB")


def test_the_page_says_what_each_latency_source_measures() -> None:
    async def scenario(sidecar, fake, clock, get) -> None:  # type: ignore[no-untyped-def]
        await scrapes(sidecar, clock, fake, 1)
        _, page = await get("/metrics")
        info = cv.LATENCY_SOURCE_INFO + "_info"
        assert value(page, info, source="vllm", ttft_starts="engine", includes_api_server="false") == 1
        assert value(page, info, source="gate") is None  # no gate here

    with FakeVllmServer(TEXT) as fake:
        run(fake, scenario)
