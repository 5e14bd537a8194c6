"""Exact per-request latency from an OpenAI-style server-sent-event stream, without re-parsing it.

``StreamTimer`` watches the raw bytes the proxy forwards (it never changes or holds them back)
and notes when the first and the last *content* event went by and how many there were:

- a content event carries a non-empty ``text`` (``/v1/completions``), ``content``,
  ``reasoning_content`` or ``reasoning`` (chat deltas), or a ``tool_calls`` list. vLLM's first
  chat chunk (``"role":"assistant","content":""``), its finish chunk and the usage chunk carry no
  token and do not count;
- TTFT = first content event − arrival at the gate (so gate queueing is included);
- TPOT = (last − first) / (output tokens − 1). Output tokens are ``usage.completion_tokens`` when
  the stream has a usage object (the client asked for ``stream_options.include_usage``),
  otherwise the number of content deltas — one per token in vLLM unless ``--stream-interval`` or
  speculative decoding batches several tokens into one delta, which then over-states TPOT.

Events are matched with one byte-level regular expression per forwarded chunk instead of a JSON
parse per event: inside a JSON string every quote is escaped, so ``"text":"`` can only match a
real key. An event split across chunks is scanned once it is complete. With ``n > 1`` choices the
deltas of all choices are counted together.

Pure: bytes and timestamps in, numbers out. It must not do I/O or block the stream.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: A key whose string value is non-empty, or a non-empty tool_calls list.
_CONTENT = re.compile(
    rb'"(?:text|content|reasoning_content|reasoning)"\s*:\s*"(?!")'
    rb'|"tool_calls"\s*:\s*\[\s*\{'
)
_USAGE = re.compile(rb'"completion_tokens"\s*:\s*(\d+)')
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

    __slots__ = ("_carry", "arrival", "deltas", "first", "last", "usage_tokens")

    def __init__(self, arrival: float) -> None:
        self.arrival = arrival
        self.first: float | None = None
        self.last: float | None = None
        self.deltas = 0
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
        tokens = self.usage_tokens if self.usage_tokens is not None else self.deltas
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
        found = len(_CONTENT.findall(data, 0, end))
        if found:
            if self.first is None:
                self.first = now
            self.last = now
            self.deltas += found
        if b'"completion_tokens"' in data:
            matches = _USAGE.findall(data, 0, end)
            if matches:
                self.usage_tokens = int(matches[-1])

    def _tpot(self, tokens: int) -> float | None:
        if self.first is None or self.last is None or tokens < 2:
            return None
        return (self.last - self.first) / (tokens - 1)


def _complete_prefix(data: bytes) -> int:
    """Length of the part of ``data`` made of complete events (up to the last blank line)."""
    lf = data.rfind(b"\n\n")
    crlf = data.rfind(b"\r\n\r\n")
    return max(lf + 2 if lf >= 0 else 0, crlf + 4 if crlf >= 0 else 0)
