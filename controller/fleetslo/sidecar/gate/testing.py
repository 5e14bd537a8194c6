"""A fake vLLM OpenAI-compatible server for gate tests, demos and benchmarks (public, like ``testing``).

``FakeOpenAIUpstream`` serves ``/v1/completions`` and ``/v1/chat/completions`` on a real socket,
streamed (server-sent events shaped like vLLM's) or not, with controllable timing, and records
what a test needs to check the gate: requests seen, in flight now and at most, cancelled (the
client — the gate — hung up), completed. Its answers are a pure function of the request body,
so a stream fetched directly and one fetched through the gate must be byte-identical.

Per request, ``max_tokens`` sets the number of tokens and ``stream_options.include_usage`` adds
the usage chunk, as in vLLM. Server attributes set the rest: ``first_token_delay``,
``token_delay``, ``status`` (answer this instead), ``break_after`` (abort the connection after
that many tokens, as a crashing vLLM would) and ``text`` (the text of token ``i``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

CREATED = 1_700_000_000
#: vLLM endpoints that run the model without streaming tokens back (answered by ``_work``).
ENGINE_PATHS = ("/v1/responses", "/invocations", "/pooling", "/v1/embeddings", "/classify", "/score",
                "/v1/score", "/rerank", "/v1/rerank", "/v2/rerank", "/v1/audio/transcriptions")  # fmt: skip


def default_text(i: int) -> str:
    # Quotes and a key-like string inside the text: a byte-level scanner must not be fooled.
    return f' tok{i} "text":"x"' if i % 7 == 3 else f" tok{i}"


class FakeOpenAIUpstream:
    """A loopback OpenAI-style server; ``await start()``, use ``url``, ``await stop()``."""

    def __init__(self, tokens: int = 16, first_token_delay: float = 0.0, token_delay: float = 0.0) -> None:
        self.tokens = tokens
        self.first_token_delay = first_token_delay
        self.token_delay = token_delay
        self.status = 200
        self.break_after: int | None = None
        #: Hang up on this many requests without answering (a keep-alive connection closing).
        self.drop_next = 0
        self.text: Callable[[int], str] = default_text
        #: Tokens merged into one event, as vLLM does under load (its output steps coalesce).
        self.per_event = 1
        self.requests = 0
        self.inflight = 0
        self.max_inflight = 0
        self.cancelled = 0
        self.completed = 0
        self.bodies: list[bytes] = []
        self.headers: list[dict[str, str]] = []  # lower-case names
        self._events: dict[tuple[bytes, bool, int, bool], list[bytes]] = {}  # answers are pure: cache them
        self.port: int | None = None
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> FakeOpenAIUpstream:
        app = web.Application(client_max_size=1 << 30)
        app.router.add_post("/v1/completions", self._generate)
        app.router.add_post("/v1/chat/completions", self._generate)
        app.router.add_get("/v1/models", self._models)
        for path in ENGINE_PATHS:
            app.router.add_post(path, self._work)
        app.router.add_route("*", "/{tail:.*}", self._echo)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        await web.TCPSite(self._runner, host, port).start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _models(self, _: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "fake", "object": "model"}]})

    async def _work(self, request: web.Request) -> web.Response:
        """An engine endpoint that is not a token stream: busy for ``first_token_delay``."""
        raw = await request.read()
        self.requests += 1
        self.bodies.append(raw)
        self.inflight += 1
        self.max_inflight = max(self.max_inflight, self.inflight)
        try:
            await asyncio.sleep(self.first_token_delay)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.inflight -= 1
        self.completed += 1
        return web.json_response({"object": "list", "data": [], "path": request.path})

    async def _echo(self, request: web.Request) -> web.Response:
        body = await request.read()
        return web.Response(body=body, headers={"X-Path": request.raw_path, "X-Method": request.method})

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        self.requests += 1
        self.bodies.append(raw)
        self.headers.append({k.lower(): v for k, v in request.headers.items()})
        if self.drop_next > 0 and request.transport is not None:
            self.drop_next -= 1
            request.transport.abort()
            return web.Response()
        if self.status != 200:
            error = {"error": {"message": "fake error", "type": "fake", "code": self.status}}
            return web.json_response(error, status=self.status)
        self.inflight += 1
        self.max_inflight = max(self.max_inflight, self.inflight)
        try:
            return await self._answer(request, raw)
        except (asyncio.CancelledError, ConnectionError):
            self.cancelled += 1
            raise
        finally:
            self.inflight -= 1

    async def _answer(self, request: web.Request, raw: bytes) -> web.StreamResponse:
        body: dict[str, Any] = json.loads(raw or b"{}")
        chat = request.path.endswith("/chat/completions")
        tokens = int(body.get("max_tokens", self.tokens))
        if not body.get("stream"):
            await asyncio.sleep(self.first_token_delay + self.token_delay * max(tokens - 1, 0))
            self.completed += 1
            return web.json_response(whole_answer(raw, chat, tokens, self.text))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
        await response.prepare(request)
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        first = 1 if chat else 0  # chat opens with a role chunk that carries no token
        key = (raw, chat, tokens, usage)
        if key not in self._events:
            self._events[key] = sse_events(raw, chat, tokens, usage, self.text, per_event=self.per_event)
        steps = -(-tokens // self.per_event)
        for i, event in enumerate(self._events[key]):
            await self._pace(i - first, steps)
            if self.break_after is not None and i - first >= self.break_after and request.transport:
                request.transport.abort()  # as a crashing vLLM would: no final chunk
                return response
            await response.write(event)
        await response.write_eof()
        self.completed += 1
        return response

    async def _pace(self, k: int, steps: int) -> None:
        """Before the event of step ``k`` (negative: before the first step; >= steps: after)."""
        if k == 0:
            await asyncio.sleep(self.first_token_delay)
        elif 0 < k < steps and self.token_delay:
            await asyncio.sleep(self.token_delay)


def _request_id(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()[:16]


def sse_events(
    raw: bytes,
    chat: bool,
    tokens: int,
    usage: bool,
    text: Callable[[int], str] = default_text,
    *,
    per_event: int = 1,
) -> list[bytes]:
    """The events of one streamed answer, vLLM-shaped: [role chunk,] one per token (the last with
    the finish reason), [usage,] DONE."""
    rid, obj = (f"chatcmpl-{_request_id(raw)}", "chat.completion.chunk") if chat else (
        f"cmpl-{_request_id(raw)}", "text_completion")  # fmt: skip
    head = {"id": rid, "object": obj, "created": CREATED, "model": "fake"}
    payloads: list[dict[str, Any]] = []
    if chat:
        payloads.append({**head, "choices": [_chat_choice({"role": "assistant", "content": ""}, None)]})
    for i in range(0, tokens, per_event):
        # As vLLM does, the last step's chunk carries the finish reason with its token(s).
        finish = "length" if i + per_event >= tokens else None
        piece = "".join(text(j) for j in range(i, min(i + per_event, tokens)))
        choice = _chat_choice({"content": piece}, finish) if chat else _text_choice(piece, finish)
        payloads.append({**head, "choices": [choice]})
    if usage:
        payloads.append({**head, "choices": [], "usage": _usage(tokens)})
    events = [b"data: " + json.dumps(p, separators=(",", ":")).encode() + b"\n\n" for p in payloads]
    return [*events, b"data: [DONE]\n\n"]


def whole_answer(
    raw: bytes, chat: bool, tokens: int, text: Callable[[int], str] = default_text
) -> dict[str, Any]:
    content = "".join(text(i) for i in range(tokens))
    if chat:
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": content},
                                  "finish_reason": "length"}  # fmt: skip
        return {"id": f"chatcmpl-{_request_id(raw)}", "object": "chat.completion", "created": CREATED,
                "model": "fake", "choices": [choice], "usage": _usage(tokens)}  # fmt: skip
    choices = [_text_choice(content, "length")]
    return {"id": f"cmpl-{_request_id(raw)}", "object": "text_completion", "created": CREATED,
            "model": "fake", "choices": choices, "usage": _usage(tokens)}  # fmt: skip


def _chat_choice(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}


def _text_choice(text: str, finish: str | None) -> dict[str, Any]:
    return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "stop_reason": None}


def _usage(tokens: int) -> dict[str, int]:
    return {"prompt_tokens": 5, "total_tokens": 5 + tokens, "completion_tokens": tokens}
