"""Which requests take a slot, and which model label a request gets (issue 15 defect 2, SLIs)."""

from __future__ import annotations

from fleetslo.sidecar.gate.paths import NOT_ADMITTED_PATHS, ModelNames, is_admitted
from fleetslo.sidecar.gate.testing import ENGINE_PATHS


def test_reads_tokenizer_health_and_operator_paths_are_not_admitted() -> None:
    assert not is_admitted("GET", "/v1/models") and not is_admitted("HEAD", "/health")
    for path in NOT_ADMITTED_PATHS:
        assert not is_admitted("POST", path), path
    for path in (*ENGINE_PATHS, "/v1/completions", "/v1/chat/completions", "/v9/some-new-endpoint"):
        assert is_admitted("POST", path), path


def test_the_model_label_is_a_served_name_whatever_the_client_sends() -> None:
    names = ModelNames(lambda: ["llama", "qwen"])
    assert names.of(b'{"model": "qwen", "prompt": "the \\"model\\": \\"llama\\""}') == "qwen"
    assert names.of(b'{"prompt": "x", "model":"llama"}') == "llama"
    assert names.of(b'{"model": "made-up-%d"}') == "unknown"  # bounded: no series per string
    single = ModelNames(lambda: ["llama"])
    assert single.of(b'{"model": "my-lora"}') == "llama"  # an adapter counts under its engine
    assert ModelNames(tuple, default="served").of(b"{}") == "served"  # before the first scrape
