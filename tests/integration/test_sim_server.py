"""``fleetslo sim-server`` as a real process: cold start, OpenAI answers, a vLLM page Prometheus scrapes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fleetslo.core import conventions as cv
from fleetslo.core.metrics.exposition import parse_vllm
from prometheus_client.parser import text_string_to_metric_families

from tests.prometheus import PrometheusServer, free_port

pytestmark = pytest.mark.integration

MODEL = "demo-model"
#: 20 simulated seconds per wall second: the 200 s cold start below takes ten wall seconds, well
#: beyond the process's own start-up (0.5 s here alone, over 1 s beside the rest of the suite, and
#: more than 3.3 s in a fresh-clone run beside three demo runs: with a one-second, then a
#: three-second cold start the listener sometimes came up after it had ended and never answered 503).
SPEEDUP, COLD_START = 20.0, 200.0


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    launched: float
    first_503: float | None
    first_200: float


def _wait_healthy(url: str, process: subprocess.Popen[bytes], launched: float) -> tuple[float | None, float]:
    first_503 = None
    while time.time() - launched < 30:
        assert process.poll() is None, "the sim-server exited while starting"
        try:
            status = httpx.get(f"{url}/health", timeout=1).status_code
        except httpx.HTTPError:
            status = None
        now = time.time()
        if status == 503 and first_503 is None:
            first_503 = now
        if status == 200:
            return first_503, now
        time.sleep(0.02)
    raise AssertionError("the sim-server never became healthy")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    port = free_port()
    log = tmp_path_factory.mktemp("sim-server") / "sim-server.log"
    launched = time.time()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fleetslo.cli",
                "sim-server",
                "--profile",
                "mi300x-llama3.1-8b-fp8-tp1",
                "--listen",
                f"127.0.0.1:{port}",
                "--speedup",
                str(SPEEDUP),
                "--cold-start",
                f"{COLD_START}s",
                "--started-at",
                repr(launched),
                "--model-name",
                MODEL,
                "--custom-histogram-buckets",
                json.dumps({"time_to_first_token": [0.05, 0.1, 0.5, 2.0]}),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            first_503, first_200 = _wait_healthy(url, process, launched)
            yield Server(url, process, launched, first_503, first_200)
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=10) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


def test_health_is_503_for_the_cold_start_divided_by_the_speedup(server: Server) -> None:
    assert server.first_503 is not None, "the listener should answer 503 while the engine starts"
    ready_after = server.first_200 - server.launched
    assert COLD_START / SPEEDUP - 0.05 <= ready_after <= COLD_START / SPEEDUP + 1.5


def test_non_streamed_completion_and_chat_have_max_tokens_tokens(server: Server) -> None:
    answer = httpx.post(
        f"{server.url}/v1/completions",
        json={"model": MODEL, "prompt": [7] * 300, "max_tokens": 12},
        timeout=10,
    ).json()
    assert answer["usage"] == {"prompt_tokens": 300, "total_tokens": 312, "completion_tokens": 12}
    assert answer["choices"][0]["finish_reason"] == "length"
    chat = httpx.post(
        f"{server.url}/v1/chat/completions",
        timeout=10,
        json={"messages": [{"role": "user", "content": "x" * 40}], "max_tokens": 3},
    ).json()
    assert chat["usage"]["prompt_tokens"] == 10 and chat["choices"][0]["message"]["content"]


def test_a_stream_sends_one_event_per_token_at_the_engines_pace(server: Server) -> None:
    body = {
        "prompt": "hello " * 50,
        "max_tokens": 400,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    arrivals, started = [], time.monotonic()
    with httpx.stream("POST", f"{server.url}/v1/completions", json=body, timeout=30) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = []
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(line.removeprefix("data: "))
                arrivals.append(time.monotonic() - started)
    assert events[-1] == "[DONE]"
    tokens = [json.loads(e) for e in events[:-1] if json.loads(e)["choices"]]
    assert len(tokens) == 400
    assert json.loads(events[-2])["usage"]["completion_tokens"] == 400
    # 400 decode steps of >= 6 ms simulated each: at least 0.12 s of wall time, spread over releases.
    assert arrivals[-1] >= 400 * 0.006 / SPEEDUP
    assert len({round(t, 3) for t in arrivals}) > 2, "tokens should arrive over time, not in one burst"


def test_wrong_model_and_too_long_prompts_are_refused_like_vllm(server: Server) -> None:
    wrong = httpx.post(f"{server.url}/v1/completions", json={"model": "nope", "prompt": "hi"}, timeout=5)
    assert wrong.status_code == 404
    long = httpx.post(f"{server.url}/v1/completions", json={"prompt": [1] * 131_000, "max_tokens": 1000})
    assert long.status_code == 400 and "maximum context length" in long.json()["error"]["message"]
    models = httpx.get(f"{server.url}/v1/models", timeout=5).json()
    assert [m["id"] for m in models["data"]] == [MODEL]


def test_metrics_parse_with_both_parsers_and_count_the_requests(server: Server) -> None:
    for _ in range(3):
        httpx.post(f"{server.url}/v1/completions", json={"prompt": [1] * 100, "max_tokens": 2}, timeout=10)
    page = httpx.get(f"{server.url}/metrics", headers={"Accept": "text/plain; version=0.0.4"}, timeout=5).text
    snapshot = parse_vllm(page)[MODEL]
    assert snapshot.counter(cv.Counter.REQUEST_SUCCESS) >= 3
    ttft = snapshot.histogram(cv.Histogram.TTFT)
    assert ttft is not None and ttft.bounds == (0.05, 0.1, 0.5, 2.0, float("inf"))
    names = {f.name for f in text_string_to_metric_families(page)}
    assert {"vllm:time_to_first_token_seconds", "vllm:prompt_tokens", "process_cpu_seconds"} <= names


def test_a_real_prometheus_scrapes_the_page(server: Server, tmp_path: Path) -> None:
    for _ in range(2):
        httpx.post(f"{server.url}/v1/completions", json={"prompt": [1] * 100, "max_tokens": 2}, timeout=10)
    target = server.url.removeprefix("http://")
    with PrometheusServer(tmp_path, [target], interval="1s") as prom:
        # Prometheus 2.x asks for OpenMetrics, which prometheus-client answers with escaped names.
        served = prom.wait_for('sum({__name__=~"vllm[:_]request_success_total"})')
        assert float(served[0]["value"][1]) >= 2
        buckets = prom.wait_for('count({__name__=~"vllm[:_]time_to_first_token_seconds_bucket"})')
        assert float(buckets[0]["value"][1]) == 5
        health = prom.query('up{job="test"}')
        assert health and health[0]["value"][1] == "1"
