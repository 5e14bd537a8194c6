"""The sim-server's OpenAI surface: token counts, vLLM's errors, and streams the gate measures right."""

from __future__ import annotations

import json

import pytest
from fleetslo.sidecar.gate.latency import StreamTimer
from fleetslo.sim.server import openai

MODEL = "tiny-model"


def ask(body: object, chat: bool = False, max_len: int = 4096) -> openai.Ask:
    return openai.parse_request(json.dumps(body).encode(), chat=chat, model=MODEL, max_len=max_len)


def test_token_ids_are_counted_exactly_and_text_is_estimated_at_four_characters_a_token() -> None:
    assert ask({"prompt": [1, 2, 3, 4, 5], "max_tokens": 7}).prompt_tokens == 5
    assert ask({"prompt": "x" * 10}).prompt_tokens == 3
    assert ask({"prompt": [[9] * 11]}).prompt_tokens == 11
    assert ask({"prompt": ""}).prompt_tokens == 1
    chat = ask(
        {
            "messages": [
                {"role": "user", "content": "abcd" * 5},
                {"role": "user", "content": [{"type": "text", "text": "efgh"}]},
            ]
        },
        chat=True,
    )
    assert chat.prompt_tokens == 6


def test_max_tokens_defaults_to_sixteen_and_chat_prefers_max_completion_tokens() -> None:
    assert ask({"prompt": "hi"}).max_tokens == 16
    assert ask({"prompt": "hi", "max_tokens": 3}).max_tokens == 3
    chat = ask(
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "max_completion_tokens": 9},
        chat=True,
    )
    assert chat.max_tokens == 9
    streamed = ask({"prompt": "hi", "stream": True, "stream_options": {"include_usage": True}})
    assert streamed.stream and streamed.include_usage


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        ({"model": "other", "prompt": "hi"}, 404, "does not exist"),
        ({"prompt": "hi", "max_tokens": 0}, 400, "max_tokens"),
        ({"prompt": ["a", "b"]}, 400, "prompt"),
        ({"prompt": "hi", "n": 2}, 400, "n=1"),
        ({"prompt": [0] * 4000, "max_tokens": 100}, 400, "maximum context length is 4096 tokens"),
        ("not an object", 400, "JSON object"),
    ],
)
def test_bad_requests_fail_as_vllm_fails_them(body: object, status: int, fragment: str) -> None:
    with pytest.raises(openai.BadRequest) as caught:
        ask(body)
    assert caught.value.status == status
    assert fragment in str(caught.value)
    assert caught.value.body()["error"]["code"] == status


def test_a_body_that_is_not_json_is_a_400() -> None:
    with pytest.raises(openai.BadRequest, match="not valid JSON"):
        openai.parse_request(b"{", chat=False, model=MODEL, max_len=10)


@pytest.mark.parametrize("chat", [False, True])
def test_streams_are_one_event_per_token_and_the_gate_timer_counts_them(chat: bool) -> None:
    request = openai.Ask(chat, MODEL, prompt_tokens=2, max_tokens=5, stream=True, include_usage=True)
    events = openai.EventStream(request, "id-1", 1)
    timer = StreamTimer(arrival=0.0)
    timer.feed(events.opening(), 0.5)
    timer.feed(events.tokens(0, 1), 1.0)
    timer.feed(events.tokens(1, 5), 3.0)
    timer.feed(events.closing(), 3.0)
    latency = timer.finish(3.0)
    assert latency.ttft == 1.0 and latency.output_tokens == 5 and latency.tpot == pytest.approx(0.5)
    text = (events.opening() + events.tokens(0, 5)).decode()
    chunks = [json.loads(e.removeprefix("data: ")) for e in text.split("\n\n") if e]
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert all(c["object"] == ("chat.completion.chunk" if chat else "text_completion") for c in chunks)
    closing = events.closing().decode()
    assert closing.endswith("data: [DONE]\n\n")
    assert json.loads(closing.split("\n\n")[0].removeprefix("data: "))["usage"]["completion_tokens"] == 5


def test_the_full_answer_has_max_tokens_words_and_usage() -> None:
    request = ask({"prompt": [1, 2, 3], "max_tokens": 4})
    answer = openai.full_answer(request, "cmpl-1", 7)
    assert answer["choices"][0]["text"] == "".join(openai.token_text(i) for i in range(4))
    assert answer["usage"] == {"prompt_tokens": 3, "total_tokens": 7, "completion_tokens": 4}
    chat = openai.full_answer(openai.Ask(True, MODEL, 2, 3, False, False), "chatcmpl-1", 7)
    assert chat["object"] == "chat.completion" and chat["choices"][0]["message"]["role"] == "assistant"
