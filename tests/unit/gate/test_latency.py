"""StreamTimer: first/last token event, token counts, any chunking, against a JSON-parsing reference."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fleetslo.sidecar.gate.latency import StreamTimer
from fleetslo.sidecar.gate.testing import sse_events
from hypothesis import given, settings
from hypothesis import strategies as st

BODY = b'{"max_tokens": 5}'


def run(events: list[bytes], times: list[float], arrival: float = 0.0) -> StreamTimer:
    timer = StreamTimer(arrival)
    for event, at in zip(events, times, strict=True):
        timer.feed(event, at)
    return timer


def test_chat_ttft_is_the_first_content_delta_not_the_role_chunk() -> None:
    events = sse_events(BODY, chat=True, tokens=5, usage=False)
    # role chunk at 1.0, tokens at 2..6 (the last with the finish reason), DONE at 7
    times = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    m = run(events, times, arrival=0.5).finish(7.0)
    assert m.ttft == 1.5
    assert m.tpot == 1.0  # (6 - 2) / (5 - 1)
    assert (m.output_tokens, m.tokens_from_usage) == (5, False)


def test_completions_and_usage_tokens_take_precedence_over_counted_deltas() -> None:
    events = sse_events(BODY, chat=False, tokens=5, usage=True)
    times = [1.0, 2.0, 3.0, 4.0, 5.0, 5.0, 5.0]
    m = run(events, times).finish(5.0)
    assert m.ttft == 1.0 and m.tpot == 1.0
    assert (m.output_tokens, m.tokens_from_usage) == (5, True)
    # A server that batches two tokens per delta: usage says 10, so TPOT halves.
    usage = b'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":9}}\n\n'
    m = run([*events[:5], usage], [1.0, 2.0, 3.0, 4.0, 5.0, 5.0]).finish(5.0)
    assert m.tpot == 0.5


def test_one_token_has_a_ttft_but_no_tpot_and_no_token_has_neither() -> None:
    one = run(sse_events(BODY, True, 1, False), [0.1, 0.2, 0.3]).finish(0.3)
    assert one.ttft == 0.2 and one.tpot is None
    none = run(sse_events(BODY, True, 0, False), [0.1, 0.3]).finish(0.3)
    assert none.ttft is None and none.tpot is None and none.output_tokens is None


@pytest.mark.parametrize(
    "event",
    [
        b'data: {"choices":[{"delta":{"content":"a \\"text\\":\\"x\\" b"}}]}\n\n',
        b'data: {"choices":[{"delta":{"reasoning_content":"think"}}]}\n\n',
        b'data: {"choices":[{"delta":{"reasoning":"think"}}]}\n\n',
        b'data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]}\n\n',
        b'data: { "choices" : [ { "text" : "spaced" } ] }\r\n\r\n',
    ],
)
def test_content_of_every_kind_counts_once(event: bytes) -> None:
    timer = run([event], [1.0])
    assert (timer.first, timer.deltas) == (1.0, 1)


@pytest.mark.parametrize(
    "event",
    [
        # Issue 14: a step whose text is empty is still a token (a skipped special token, a stop
        # string held back, half a UTF-8 character, the EOS that ends the stream).
        b'data: {"choices":[{"delta":{"content":""}}]}\n\n',
        b'data: {"choices":[{"delta":{"content":null}}]}\n\n',
        b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\n',
        b'data: {"choices":[{"text":"","finish_reason":"length"}]}\n\n',
        b'data: {"choices":[{"delta":{"tool_calls":[]}}]}\n\n',
        b'data: {"choices":[{"delta":{"role":"assistant","content":"Hi"}}]}\n\n',
        b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":""}\n\n',
    ],
)
def test_a_step_with_empty_text_is_still_a_token_event(event: bytes) -> None:
    timer = run([event], [1.0])
    assert (timer.first, timer.deltas) == (1.0, 1)


def test_the_first_token_with_empty_text_sets_ttft() -> None:
    empty = b'data: {"choices":[{"index":0,"text":"","logprobs":null,"finish_reason":null}]}\n\n'
    later = b'data: {"choices":[{"index":0,"text":"\xc3\xa9","logprobs":null,"finish_reason":null}]}\n\n'
    m = run([empty, later, later], [1.0, 2.0, 3.0], arrival=0.25).finish(3.0)
    assert m.ttft == 0.75
    assert m.tpot == 1.0 and m.output_tokens == 3


def test_several_tokens_in_one_event_take_their_count_from_usage_or_token_ids() -> None:
    # vLLM merges steps under load: 9 tokens in 3 events over 2 s is 0.25 s per token, not 1 s.
    events = sse_events(BODY, chat=True, tokens=9, usage=True, per_event=3)
    m = run(events, [0.0, 1.0, 2.0, 3.0, 3.0, 3.0]).finish(3.0)
    assert (m.tpot, m.output_tokens, m.tokens_from_usage) == (0.25, 9, True)
    ids = [
        b'data: {"choices":[{"text":"abc","token_ids":[%s]}]}\n\n' % n
        for n in (b"1,2,3", b"4, 5, 6", b"7,8,9")
    ]
    m = run(ids, [1.0, 2.0, 3.0]).finish(3.0)
    assert (m.tpot, m.output_tokens, m.tokens_from_usage) == (0.25, 9, False)
    # Without either, one token per event: TPOT can only come out high, never low.
    m = run(
        sse_events(BODY, chat=True, tokens=9, usage=False, per_event=3), [0.0, 1.0, 2.0, 3.0, 3.0]
    ).finish(3.0)
    assert (m.tpot, m.output_tokens) == (1.0, 3)


def test_continuous_usage_stats_in_every_chunk_end_with_the_final_count() -> None:
    def chunk(text: str, done: int) -> bytes:
        usage = b'"usage":{"prompt_tokens":3,"completion_tokens":%d,"total_tokens":%d}' % (done, done + 3)
        return b'data: {"choices":[{"text":"%s"}],%s}\n\n' % (text.encode(), usage)

    m = run([chunk("a", 1), chunk("bc", 3), chunk("", 4)], [1.0, 2.0, 3.0]).finish(3.0)
    assert (m.output_tokens, m.tokens_from_usage) == (4, True)
    assert m.tpot == 2.0 / 3


@pytest.mark.parametrize(
    "event",
    [
        b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n',
        b'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":9}}\n\n',
        b'event: response.created\ndata: {"type":"response.created","response":{}}\n\n',
        b"data: [DONE]\n\n",
        b": keep-alive comment\n\n",
    ],
)
def test_events_without_a_step_do_not_count(event: bytes) -> None:
    assert run([event], [1.0]).deltas == 0


def test_an_event_split_across_chunks_is_timed_when_it_completes() -> None:
    event = b'data: {"choices":[{"delta":{"content":"hello"}}]}\n\n'
    timer = StreamTimer(0.0)
    timer.feed(event[:20], 1.0)
    timer.feed(event[20:-1], 2.0)
    assert timer.first is None
    timer.feed(event[-1:], 3.0)
    assert timer.first == 3.0


def test_a_stream_without_a_final_blank_line_is_scanned_at_the_end() -> None:
    timer = StreamTimer(0.0)
    timer.feed(b'data: {"choices":[{"text":"a"}]}', 1.0)
    assert timer.finish(2.0).ttft == 2.0


def _reference(events: list[bytes]) -> tuple[list[int], int | None]:
    """Indexes of the token events, and the usage tokens, by parsing every event's JSON."""
    content, usage = [], None
    for i, event in enumerate(events):
        payload = event.removeprefix(b"data: ").strip()
        if payload == b"[DONE]":
            continue
        obj: dict[str, Any] = json.loads(payload)
        for choice in obj["choices"]:
            delta = choice.get("delta") or {}
            if "role" not in delta or delta.get("content"):
                content.append(i)
        if obj.get("usage"):
            usage = obj["usage"]["completion_tokens"]
    return content, usage


texts = st.lists(
    st.sampled_from(["a", '"', "\\", ":", "{", "}", " ", "é", "\n", '"text":"', '"content":"', "[DONE]"]),
    max_size=6,
).map("".join)


@settings(max_examples=150, deadline=None)
@given(
    tokens=st.lists(texts, max_size=12),
    chat=st.booleans(),
    usage=st.booleans(),
    cuts=st.lists(st.integers(min_value=1, max_value=5000), max_size=8),
)
def test_any_content_and_any_chunking_match_the_json_reference(
    tokens: list[str], chat: bool, usage: bool, cuts: list[int]
) -> None:
    events = sse_events(BODY, chat, len(tokens), usage, text=lambda i: tokens[i])
    content, used = _reference(events)
    stream = b"".join(events)
    ends = [sum(len(e) for e in events[: i + 1]) for i in range(len(events))]
    bounds = sorted({c % (len(stream) + 1) for c in cuts} | {len(stream)} - {0})
    # Re-chunk the stream arbitrarily; a chunk's time is the number of events it completes.
    timer, start = StreamTimer(0.0), 0
    for end in bounds:
        timer.feed(stream[start:end], float(sum(1 for e in ends if e <= end)))
        start = end

    def seen_at(event: int) -> float:
        """The time of the chunk that completes ``event``: when the timer can first see it."""
        end = min(b for b in bounds if b >= ends[event])
        return float(sum(1 for e in ends if e <= end))

    m = timer.finish(99.0)
    assert timer.deltas == len(content)
    assert timer.first == (seen_at(content[0]) if content else None)
    assert timer.last == (seen_at(content[-1]) if content else None)
    assert m.output_tokens == (used if used is not None else (len(content) or None))
