"""The held-out workloads: built from data the suite never used, deterministically, and selectable."""

from __future__ import annotations

import pytest
from fleetslo.sim.workload import Request, Trace

from benchmarks.bench_policy import choose
from benchmarks.heldout import HELDOUT, VARIANTS, looped, servegen_span, summary
from benchmarks.workloads import WORKLOADS


def test_looping_plays_the_trace_again_after_its_end() -> None:
    trace = Trace((Request(0.0, 10, 2), Request(5.0, 20, 3)), "t")
    twice = looped(trace, 2)
    assert [r.arrival_s for r in twice.requests] == [0.0, 5.0, 6.0, 11.0]
    assert [r.input_tokens for r in twice.requests] == [10, 20, 10, 20]


def test_the_reasoning_class_brings_its_own_long_answers() -> None:
    """Ten minutes of ServeGen's reasoning model: its clients' own length distributions, answers
    several times longer than the Azure conversation mix (p50 ~130 tokens) that fills in for
    clients without data; the same requests every time."""
    first = servegen_span("reason/deepseek-r1", 0.0, 600.0, 1.0)
    again = servegen_span("reason/deepseek-r1", 0.0, 600.0, 1.0)
    assert first.requests == again.requests
    figures = summary(first)
    assert 5_000 < figures["requests"] < 15_000  # about 16 requests/s
    assert figures["output_p50"] > 400


def test_compressing_a_span_keeps_its_requests_and_shortens_it() -> None:
    real = servegen_span("reason/deepseek-r1", 0.0, 1200.0, 1.0)
    fast = servegen_span("reason/deepseek-r1", 0.0, 1200.0, 4.0, compress=4.0)
    assert fast.duration_s < real.duration_s / 3.5
    assert len(fast) == pytest.approx(len(real), rel=0.1)  # 4x the rate over a quarter of the time


def test_the_held_out_set_is_apart_from_the_suite_and_selectable() -> None:
    assert not {w.name for w in HELDOUT} & {w.name for w in WORKLOADS}
    assert [w.name for w in choose("heldout", False, "")] == [w.name for w in HELDOUT]
    picked = choose("all", False, "mooncake, chat")
    assert [w.name for w in picked] == ["chat (azure-conv x15)", HELDOUT[0].name]
    with pytest.raises(SystemExit, match="BENCH_POLICY_SET"):
        choose("tuned", False, "")


def test_every_held_out_workload_builds() -> None:
    for w in HELDOUT:
        figures = summary(w.build())
        assert figures["requests"] > 10_000 and figures["minutes"] >= 50, (w.name, figures)


def test_the_variants_are_apart_from_both_sets_and_selectable_on_their_own() -> None:
    names = {w.name for w in VARIANTS}
    assert len(names) == 6 and not names & ({w.name for w in HELDOUT} | {w.name for w in WORKLOADS})
    assert [w.name for w in choose("variants", False, "")] == [w.name for w in VARIANTS]
    assert not {w.name for w in choose("all", False, "")} & names  # make bench does not run them
    small = next(w for w in VARIANTS if w.name.startswith("m-small"))
    figures = summary(small.build())
    assert figures["requests"] > 10_000 and figures["minutes"] >= 100, figures
