"""The OpenAI-compatible surface of the sim-server: request bodies in, vLLM-shaped answers out.

**Token counts.** The engine model needs a prompt length and an output length, and there is no
tokenizer here:

* ``/v1/completions`` with ``prompt`` as a list of token ids (vLLM accepts those) uses its length
  exactly — the load generator sends prompts this way; with ``prompt`` as text, and for
  ``/v1/chat/completions`` (the characters of every message's text content), the count is estimated
  as one token per 4 characters, rounded up (English text averages ~4 characters per token);
* the answer always has exactly ``max_tokens`` tokens (``max_completion_tokens`` too, for chat) as
  with ``ignore_eos``: there is no model to stop early. Without one, 16 tokens (vLLM's completions
  default; vLLM's chat default, the rest of the context, would be tens of thousands of tokens).

Errors follow vLLM: a wrong model is 404, a bad body or a request longer than the context is 400,
each with OpenAI's ``{"error": {...}}`` body. ``n`` > 1 and batched prompts are refused (400).
The text is a fixed cycle of words, one per token. Pure: bytes and numbers in, bytes out.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_MAX_TOKENS = 16
CHARS_PER_TOKEN = 4
_WORDS = (" The", " fleet", " holds", " its", " latency", " targets", " while", " traffic", " spikes", ".")


class BadRequest(Exception):
    """The request cannot be served; ``status`` and an OpenAI-style error body."""

    def __init__(self, status: int, message: str, type_: str = "BadRequestError", param: str | None = None):
        super().__init__(message)
        self.status, self.type, self.param = status, type_, param

    def body(self) -> dict[str, Any]:
        return {"error": {"message": str(self), "type": self.type, "param": self.param, "code": self.status}}


@dataclass(frozen=True, slots=True)
class Ask:
    """One generation request, reduced to what the engine model and the answer need."""

    chat: bool
    model: str
    prompt_tokens: int
    max_tokens: int
    stream: bool
    include_usage: bool


def parse_request(body: bytes, *, chat: bool, model: str, max_len: int) -> Ask:
    """Validate a request body; ``BadRequest`` with vLLM's status and message otherwise."""
    try:
        data = json.loads(body or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(400, f"the body is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BadRequest(400, "expected a JSON object")
    asked = data.get("model")
    if asked is not None and asked != model:
        raise BadRequest(404, f"The model `{asked}` does not exist.", "NotFoundError", "model")
    if data.get("n", 1) != 1:
        raise BadRequest(400, "the simulator serves n=1 only", param="n")
    prompt = _chat_tokens(data) if chat else _prompt_tokens(data)
    limit = _max_tokens(data, chat)
    if prompt + limit > max_len:
        raise BadRequest(
            400,
            f"This model's maximum context length is {max_len} tokens. However, you requested "
            f"{prompt + limit} tokens ({prompt} in the messages, {limit} in the completion). "
            "Please reduce the length of the messages or completion.",
        )
    options = data.get("stream_options")
    usage = isinstance(options, Mapping) and bool(options.get("include_usage"))
    return Ask(chat, model, prompt, limit, bool(data.get("stream", False)), usage)


def estimate_tokens(text: str) -> int:
    """Prompt tokens for ``text``: one per ``CHARS_PER_TOKEN`` characters, at least one."""
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


def _prompt_tokens(data: Mapping[str, Any]) -> int:
    prompt = data.get("prompt")
    if isinstance(prompt, str):
        return estimate_tokens(prompt)
    if isinstance(prompt, list) and prompt and all(type(t) is int for t in prompt):
        return len(prompt)
    if isinstance(prompt, list) and len(prompt) == 1:
        return _prompt_tokens({"prompt": prompt[0]})
    raise BadRequest(400, "prompt: expected a string or a list of token ids (one prompt)", param="prompt")


def _chat_tokens(data: Mapping[str, Any]) -> int:
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest(400, "messages: expected a non-empty list", param="messages")
    chars = 0
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list):  # content parts: count the text ones
            content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
        if not isinstance(content, str | None):
            raise BadRequest(400, "messages: each content must be text or a list of parts", param="messages")
        chars += len(content or "")
    return max(1, math.ceil(chars / CHARS_PER_TOKEN))


def _max_tokens(data: Mapping[str, Any], chat: bool) -> int:
    value = data.get("max_completion_tokens") if chat else None
    if value is None:
        value = data.get("max_tokens")
    if value is None:
        return DEFAULT_MAX_TOKENS
    if type(value) is not int or value < 1:
        raise BadRequest(400, f"max_tokens: expected an integer >= 1 (got {value!r})", param="max_tokens")
    return value


def token_text(index: int) -> str:
    """The text of output token ``index`` (0-based)."""
    return _WORDS[index % len(_WORDS)]


def usage(ask: Ask, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": ask.prompt_tokens,
        "total_tokens": ask.prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
    }


def full_answer(ask: Ask, ident: str, created: int) -> dict[str, Any]:
    """The non-streamed answer once all ``max_tokens`` tokens exist."""
    text = "".join(token_text(i) for i in range(ask.max_tokens))
    if ask.chat:
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "logprobs": None,
            "finish_reason": "length",
            "stop_reason": None,
        }
        kind = "chat.completion"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length", "stop_reason": None}
        kind = "text_completion"
    return {
        "id": ident,
        "object": kind,
        "created": created,
        "model": ask.model,
        "choices": [choice],
        "usage": usage(ask, ask.max_tokens),
    }


class EventStream:
    """The server-sent events of one streamed answer, built as the tokens become available."""

    def __init__(self, ask: Ask, ident: str, created: int) -> None:
        self.ask = ask
        self._head = {
            "id": ident,
            "object": "chat.completion.chunk" if ask.chat else "text_completion",
            "created": created,
            "model": ask.model,
        }

    def opening(self) -> bytes:
        """vLLM's first chat chunk: the assistant role with empty content (no token yet)."""
        if not self.ask.chat:
            return b""
        return self._event(
            [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": ""},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ]
        )

    def tokens(self, start: int, end: int) -> bytes:
        """One event per token ``start..end-1``; the last token of the answer carries the finish reason."""
        return b"".join(self._event([self._choice(i)]) for i in range(start, end))

    def closing(self) -> bytes:
        """The usage event (if the client asked for it) and ``[DONE]``."""
        tail = b""
        if self.ask.include_usage:
            tail = self._event([], usage=usage(self.ask, self.ask.max_tokens))
        return tail + b"data: [DONE]\n\n"

    def _choice(self, index: int) -> dict[str, Any]:
        finish = "length" if index == self.ask.max_tokens - 1 else None
        if self.ask.chat:
            return {
                "index": 0,
                "delta": {"content": token_text(index)},
                "logprobs": None,
                "finish_reason": finish,
            }
        return {
            "index": 0,
            "text": token_text(index),
            "logprobs": None,
            "finish_reason": finish,
            "stop_reason": None,
        }

    def _event(self, choices: list[dict[str, Any]], **extra: Any) -> bytes:
        payload = {**self._head, "choices": choices, **extra}
        return b"data: " + json.dumps(payload, separators=(", ", ": ")).encode() + b"\n\n"
