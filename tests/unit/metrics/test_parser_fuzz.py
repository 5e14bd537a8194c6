"""The parser against a PromQL reference on a few hundred mutations of the real captures (the
benchmark ``python -m benchmarks faults`` runs 10,000): no crash, no disagreement."""

from __future__ import annotations

from benchmarks.parser_fuzz import fuzz, mutate, reference


def test_mutated_real_captures_parse_as_the_promql_reference_reads_them() -> None:
    result = fuzz(300)
    assert result.tried == 300
    assert (result.crashes, result.wrong) == (0, 0), result.examples
    assert result.skipped < 10  # the reference read nearly every input: the comparison is real


def test_the_reference_sees_what_the_old_parser_got_wrong() -> None:
    # The reference must be able to fail: both names of a family on one page, and a duplicate.
    page = (
        'vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.6\n'
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.6\n'
        'vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 10\n'
        'vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 10\n'
    )
    expected = reference(page)["m"]
    assert expected == {"kv_cache_usage_perc": 0.6, "request_success": 10.0}


def test_mutations_are_seeded_and_change_the_page() -> None:
    import random

    from benchmarks.parser_fuzz import CAPTURES

    text = CAPTURES[0].read_text(encoding="utf-8")
    assert mutate(text, random.Random(1), False) == mutate(text, random.Random(1), False)
    assert mutate(text, random.Random(1), False) != text
