"""Exact per-request latency from an OpenAI-style server-sent-event stream, without re-parsing it.

``StreamTimer`` watches the raw bytes the proxy forwards (it never changes or holds them back)
and notes when the first and the last *token event* went by and how many tokens there were:

- a token event is one engine output step: a chunk with a non-empty ``choices`` list (vLLM sends
  one per step and choice, ``/v1/completions`` and ``/v1/chat/completions`` alike), or a
  ``response.*.delta`` event of ``/v1/responses``. Its *text may be empty* and it still counts: a
  skipped special token, a stop string held back, half of a UTF-8 character or an EOS all cost a
  step (and count in vLLM's ``completion_tokens``). Not token events: vLLM's opening chat chunk
  (``"delta":{"role":"assistant","content":""}``, sent before any step), usage-only chunks
  (``"choices":[]``), ``[DONE]`` and comments;
- TTFT = first token event − arrival at the gate (so gate queueing is included);
- TPOT = (last − first) / (output tokens − 1), vLLM's own definition. Output tokens are, best
  first: ``usage.completion_tokens`` (the client asked for ``stream_options.include_usage``; with
  ``continuous_usage_stats`` every chunk carries the running count, and the last one wins), the
  ``token_ids`` lists of the events (``return_token_ids``), else one per token event. The last is
  a lower bound: under load vLLM merges several steps' tokens into one event, so TPOT without
  usage can only be over-stated (conservative for an SLO), never under-stated.

Events are matched with byte-level regular expressions on each complete event instead of a JSON
parse: inside a JSON string every quote is escaped, so ``"choices":[{`` can only match a real
key. An event split across chunks is scanned once it is complete. With ``n > 1`` choices the
events of all choices are counted together.

Pure: bytes and timestamps in, numbers out. It must not do I/O or block the stream.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: A chunk with at least one choice: one engine step of one choice.
_CHOICE = re.compile(rb'"choices"\s*:\s*\[\s*\{')
#: vLLM's opening chat chunk names the role; it is sent before the first step.
_ROLE = re.compile(rb'"delta"\s*:\s*\{\s*"role"\s*:')
#: Text in a chunk (a server that sends the first token together with the role).
_CONTENT = re.compile(rb'"(?:text|content|reasoning_content|reasoning)"\s*:\s*"(?!")')
#: ``/v1/responses`` streams typed events; each ``*.delta`` is one step's output.
_RESPONSES_DELTA = re.compile(rb'"type"\s*:\s*"response\.[a-z_.]*delta"')
_USAGE = re.compile(rb'"(?:completion_tokens|output_tokens)"\s*:\s*(\d+)')
_TOKEN_IDS = re.compile(rb'"token_ids"\s*:\s*\[([0-9,\s]*)\]')
_EVENT_END = re.compile(rb"\r?\n\r?\n")
#: An incomplete event longer than this is scanned anyway, so a stream without blank lines
#: cannot make the timer buffer without bound.
_MAX_CARRY = 1 << 20


@dataclass(frozen=True, slots=True)
class StreamLatency:
    """What one finished stream measured; a field that cannot be computed is ``None``."""

    ttft: float | None
    tpot: float | None
    output_tokens: int | None
    tokens_from_usage: bool


class StreamTimer:
    """Follows one response stream; feed it every chunk with the time it arrived."""

    __slots__ = ("_carry", "arrival", "counted_tokens", "deltas", "first", "last", "usage_tokens")

    def __init__(self, arrival: float) -> None:
        self.arrival = arrival
        self.first: float | None = None
        self.last: float | None = None
        #: Token events seen, and the tokens they carried by ``token_ids`` (else one each).
        self.deltas = 0
        self.counted_tokens = 0
        self.usage_tokens: int | None = None
        self._carry = b""

    def feed(self, chunk: bytes, now: float) -> None:
        """Note the content events completed by ``chunk`` (which arrived at ``now``)."""
        if not self._carry and chunk.endswith(b"\n\n"):
            self._scan(chunk, len(chunk), now)  # the usual case: whole events, nothing pending
            return
        data = self._carry + chunk if self._carry else chunk
        end = _complete_prefix(data)
        if end == 0 and len(data) <= _MAX_CARRY:
            self._carry = data
            return
        if end == 0:
            end = len(data)
        self._carry = data[end:]
        self._scan(data, end, now)

    def finish(self, now: float) -> StreamLatency:
        """The stream ended: scan what is left and compute the latencies."""
        if self._carry:
            data, self._carry = self._carry, b""
            self._scan(data, len(data), now)
        tokens = self.usage_tokens if self.usage_tokens is not None else self.counted_tokens
        return StreamLatency(
            ttft=None if self.first is None else self.first - self.arrival,
            tpot=self._tpot(tokens),
            output_tokens=tokens if self.first is not None or self.usage_tokens is not None else None,
            tokens_from_usage=self.usage_tokens is not None,
        )

    @property
    def ttft(self) -> float | None:
        return None if self.first is None else self.first - self.arrival

    def _scan(self, data: bytes, end: int, now: float) -> None:
        for event in _EVENT_END.split(data[:end] if end < len(data) else data):
            if event:
                self._event(event, now)

    def _event(self, event: bytes, now: float) -> None:
        if b'"completion_tokens"' in event or b'"output_tokens"' in event:
            usage = _USAGE.findall(event)
            if usage:
                self.usage_tokens = int(usage[-1])
        if not _is_token_event(event):
            return
        if self.first is None:
            self.first = now
        self.last = now
        self.deltas += 1
        ids = _TOKEN_IDS.search(event) if b'"token_ids"' in event else None
        self.counted_tokens += max(1, ids.group(1).count(b",") + 1) if ids and ids.group(1).strip() else 1

    def _tpot(self, tokens: int) -> float | None:
        if self.first is None or self.last is None or tokens < 2:
            return None
        return (self.last - self.first) / (tokens - 1)


def _is_token_event(event: bytes) -> bool:
    if _CHOICE.search(event):
        return _ROLE.search(event) is None or _CONTENT.search(event) is not None
    return b'"response.' in event and _RESPONSES_DELTA.search(event) is not None


def _complete_prefix(data: bytes) -> int:
    """Length of the part of ``data`` made of complete events (up to the last blank line)."""
    lf = data.rfind(b"\n\n")
    crlf = data.rfind(b"\r\n\r\n")
    return max(lf + 2 if lf >= 0 else 0, crlf + 4 if crlf >= 0 else 0)
