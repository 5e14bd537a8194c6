"""A measuring client for a real OpenAI-compatible vLLM: one streamed completion with an exact
prompt length (token ids) and an exact output length (``ignore_eos``), timed as a client sees it.

TTFT is send → first streamed token; TPOT is (last token − first token) / (tokens − 1), the tokens
counted from the final usage record (``stream_options.include_usage``), not from events: under load
vLLM may put several tokens into one event. Used by ``fleetslo profile`` and the real-engine tests.
It must not decide what to send or when (``bench`` does).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx


@dataclass(frozen=True, slots=True)
class Shot:
    """One request as the client measured it (wall-clock seconds from ``time.monotonic``)."""

    sent: float
    prompt_tokens: int
    output_tokens: int
    ttft_s: float | None
    tpot_s: float | None
    ok: bool
    error: str = ""


def prompt_ids(length: int, salt: int, vocab: int = 256) -> list[int]:
    """A prompt of exactly ``length`` token ids below ``vocab`` (every byte-level tokenizer has the
    256 byte tokens), different per ``salt`` so that requests share no prefix-cache blocks."""
    return [(salt * 7919 + i * 31) % (vocab - 10) + 10 for i in range(length)]


def completion_body(model: str, prompt_tokens: int, output_tokens: int, salt: int) -> dict[str, object]:
    return {
        "model": model,
        "prompt": prompt_ids(prompt_tokens, salt),
        "max_tokens": output_tokens,
        "min_tokens": output_tokens,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def shoot(
    http: httpx.AsyncClient,
    url: str,
    body: dict[str, object],
    clock: Callable[[], float] = time.monotonic,
) -> Shot:
    """Send one streamed completion to ``url``/v1/completions and time it; never raises for HTTP."""
    prompt = body["prompt"]
    prompt_len = len(prompt) if isinstance(prompt, list) else 0
    sent = clock()
    first = last = None
    tokens = 0
    try:
        async with http.stream("POST", f"{url}/v1/completions", json=body) as response:
            if response.status_code != 200:
                await response.aread()
                return Shot(sent, prompt_len, 0, None, None, False, f"HTTP {response.status_code}")
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                event = json.loads(line[6:])
                if "error" in event:  # vLLM reports a bad request inside a 200 stream
                    message = str(event["error"].get("message", event["error"]))[:200]
                    return Shot(sent, prompt_len, tokens, None, None, False, message)
                if event.get("choices"):
                    now = clock()
                    first = now if first is None else first
                    last = now
                usage = event.get("usage")
                if usage:
                    tokens = int(usage.get("completion_tokens", tokens))
    except (httpx.HTTPError, ValueError) as exc:
        return Shot(sent, prompt_len, tokens, None, None, False, type(exc).__name__)
    ttft = None if first is None else first - sent
    tpot = (last - first) / (tokens - 1) if first is not None and last is not None and tokens > 1 else None
    return Shot(sent, prompt_len, tokens, ttft, tpot, first is not None)
