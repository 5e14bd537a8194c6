"""The demo's traffic and scenario: the span, the rate, the spike, and the very settings simulate uses."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from fleetslo.core.errors import ConfigError
from fleetslo.sim import compare
from fleetslo.sim.demo.scenario import (
    DEFAULT_TRACE,
    SPIKE_AT,
    SPIKE_LENGTH,
    DemoOptions,
    build_scenario,
    fleet_slo,
    shape_trace,
    trace_csv,
)
from fleetslo.sim.profile import builtin_profile
from fleetslo.sim.traces import load_trace, parse_trace
from fleetslo.sim.workload import Trace

from tests.support import ROOT

OPTIONS = DemoOptions(duration_s=60.0, speedup=10.0, rps=2.0, spike=3.0)


@pytest.fixture(scope="module")
def code_trace() -> Trace:
    return load_trace(ROOT / DEFAULT_TRACE)


def rate(trace: Trace, start: float, end: float) -> float:
    return sum(1 for r in trace.requests if start <= r.arrival_s < end) / (end - start)


def test_the_real_trace_is_squeezed_into_the_span_scaled_and_spiked(code_trace: Trace) -> None:
    trace = shape_trace(code_trace, OPTIONS)
    span = OPTIONS.span_s
    assert trace.requests[-1].arrival_s <= span + 1.0
    at, end = SPIKE_AT * span, (SPIKE_AT + SPIKE_LENGTH) * span
    plain = shape_trace(code_trace, replace(OPTIONS, spike=1.0))
    assert len(plain) / span == pytest.approx(2.0, rel=0.05)
    assert rate(trace, at, end) == pytest.approx(3.0 * rate(plain, at, end), rel=0.1)
    assert rate(trace, 0, at) == rate(plain, 0, at), "outside the spike the traffic is untouched"


def test_the_synthetic_scenario_steps_up_by_the_spike() -> None:
    trace = shape_trace(None, replace(OPTIONS, trace=None, scenario="spike", duration_s=200.0))
    span = 2000.0
    assert rate(trace, 0, SPIKE_AT * span) == pytest.approx(2.0, rel=0.15)
    assert rate(trace, SPIKE_AT * span, (SPIKE_AT + SPIKE_LENGTH) * span) == pytest.approx(6.0, rel=0.15)


def test_the_trace_file_reads_back_exactly(code_trace: Trace) -> None:
    trace = shape_trace(code_trace, OPTIONS)
    read = parse_trace(trace_csv(trace).splitlines(), "demo").trace
    assert read.requests == trace.requests


def test_the_scenario_is_the_one_fleetslo_simulate_builds(code_trace: Trace) -> None:
    profile = builtin_profile(OPTIONS.profile)
    trace = shape_trace(code_trace, OPTIONS)
    ours = build_scenario(trace, profile, OPTIONS)
    theirs = compare.build_scenario(
        trace, "x", profile, compare.SimulateOptions(max_replicas=OPTIONS.max_replicas)
    )
    assert ours.initial_replicas == theirs.initial_replicas
    assert ours.spec.objectives == theirs.spec.objectives and ours.spec.replicas == theirs.spec.replicas
    assert ours.spec.batch_limit == theirs.spec.batch_limit and ours.bucket_layout() == theirs.bucket_layout()
    assert fleet_slo(ours.spec).spec is ours.spec and fleet_slo(ours.spec).metadata.name == "demo"


@pytest.mark.parametrize(
    ("change", "flag"),
    [
        ({"duration_s": 5.0}, "--duration"),
        ({"speedup": 0.0}, "--speedup"),
        ({"rps": 0.0}, "--rps"),
        ({"spike": 0.5}, "--spike"),
        ({"max_replicas": 40}, "--max-replicas"),
        ({"min_replicas": 9}, "--min-replicas"),
        ({"scenario": "flat"}, "--scenario"),
    ],
)
def test_options_the_demo_cannot_run_with_fail_naming_the_flag(change: dict[str, Any], flag: str) -> None:
    with pytest.raises(ConfigError, match=flag):
        replace(OPTIONS, **change).check()
