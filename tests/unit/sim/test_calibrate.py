"""Fitting a profile: the step-time fit recovers known coefficients from phase means, the front
end is the client's latency beyond the engine's, and missing engine data is reported, not zeroed."""

from __future__ import annotations

import math
import random

import pytest
from fleetslo.engine.bench import Phase, PhaseResult, bucket_key
from fleetslo.engine.book import STEP_BUCKETS
from fleetslo.engine.client import Shot
from fleetslo.engine.procstat import ProcessTimes
from fleetslo.sim.calibrate import (
    MIN_STEPS_FOR_SPREAD,
    fit,
    fit_frontend,
    fit_frontend_queue,
    nnls,
    step_spread,
)
from fleetslo.sim.profile import StepTime

TRUE = StepTime(overhead_s=0.004, per_seq_s=0.0005, per_prefill_token_s=0.0002, per_kv_token_s=1e-6)


def _phase(name: str, seqs: float, prefill: float, kv: float, steps: int = 100) -> PhaseResult:
    t = TRUE.overhead_s + TRUE.per_seq_s * seqs + TRUE.per_prefill_token_s * prefill
    t += TRUE.per_kv_token_s * kv
    engine: dict[str, float | None] = {
        "fleetslo_engine_steps": steps,
        "fleetslo_engine_step_seconds": t * steps,
        "fleetslo_engine_step_prefill_seqs": 0.0,
        "fleetslo_engine_step_decode_seqs": seqs * steps,
        "fleetslo_engine_step_prefill_tokens": prefill * steps,
        "fleetslo_engine_step_kv_tokens": kv * steps,
        # the engine saw 10 ms TTFT and 5 ms TPOT; the client 60 ms and 6 ms (below)
        "vllm:time_to_first_token_seconds_sum": 0.01 * 4,
        "vllm:time_to_first_token_seconds_count": 4,
        "vllm:request_time_per_output_token_seconds_sum": 0.005 * 4,
        "vllm:request_time_per_output_token_seconds_count": 4,
    }
    shots = tuple(Shot(0.0, 64, 16, 0.06, 0.006, True) for _ in range(4))
    return PhaseResult(Phase(name, int(seqs), 64, 16, 4), shots, 1.0, engine)


def test_step_fit_recovers_the_coefficients_from_phase_means() -> None:
    shapes = (("a", 1, 0, 200), ("b", 4, 10, 900), ("c", 8, 40, 2600), ("d", 2, 300, 700))
    phases = [_phase(*shape) for shape in shapes]
    result = fit(phases)
    assert result.steps_measured
    assert result.step_time.overhead_s == pytest.approx(TRUE.overhead_s, rel=1e-6)
    assert result.step_time.per_seq_s == pytest.approx(TRUE.per_seq_s, rel=1e-6)
    assert result.step_time.per_prefill_token_s == pytest.approx(TRUE.per_prefill_token_s, rel=1e-6)
    assert result.step_time.per_kv_token_s == pytest.approx(TRUE.per_kv_token_s, rel=1e-5)
    assert max(abs(r) for r in result.residuals.values()) < 1e-6


def test_front_end_is_client_latency_beyond_the_engine() -> None:
    frontend = fit_frontend([_phase("a", 1, 0, 200), _phase("b", 4, 10, 900)])
    assert frontend is not None
    assert frontend.per_request_s == pytest.approx(0.05)
    assert frontend.per_output_token_s == pytest.approx(0.001)


def test_without_vllm_sums_the_front_end_is_not_fitted() -> None:
    phase = _phase("a", 1, 0, 200)
    bare = PhaseResult(phase.phase, phase.shots, phase.wall_s, {})
    assert fit_frontend([bare]) is None


def test_without_the_plugin_step_means_come_from_the_client_and_say_so() -> None:
    phases = [_phase(n, c, 0, 0) for n, c in (("a", 1), ("b", 4))]
    bare = [PhaseResult(p.phase, p.shots, p.wall_s, {}) for p in phases]
    assert not fit(bare).steps_measured


def test_nnls_keeps_coefficients_non_negative() -> None:
    rows = [[1.0, 1.0], [1.0, 2.0], [1.0, 3.0]]
    coef = nnls(rows, [3.0, 2.0, 1.0])  # the unconstrained slope would be -1
    assert min(coef) >= 0
    assert coef[1] == 0


def _server_phase(name: str, clients: int, prompt: int, output: int, n: int, *, wall: float) -> PhaseResult:
    """A phase whose API server spent 2 ms/request, 10 us/prompt token, 50 us/output token and
    20 ms per wall second idle, and waited 1.5 s for a CPU per CPU second (stretch 2.5)."""
    cpu = 0.020 * wall + n * (0.002 + 1e-5 * prompt + 5e-5 * output)
    shots = tuple(Shot(0.0, prompt, output, 0.05, 0.005, True) for _ in range(n))
    return PhaseResult(Phase(name, clients, prompt, output, n), shots, wall, {}, ProcessTimes(cpu, 1.5 * cpu))


def test_front_end_queue_work_comes_from_the_server_process_cpu_time() -> None:
    phases = [
        _server_phase("c1", 1, 64, 32, 8, wall=2.0), _server_phase("c4", 4, 64, 32, 16, wall=1.0),
        _server_phase("p16", 2, 16, 16, 8, wall=0.6), _server_phase("p768", 2, 768, 16, 8, wall=1.5),
        _server_phase("o128", 4, 64, 128, 12, wall=5.0),
    ]  # fmt: skip
    queue = fit_frontend_queue(phases)
    assert queue is not None
    assert queue.per_request_cpu_s == pytest.approx(0.002, rel=1e-6)
    assert queue.per_prompt_token_cpu_s == pytest.approx(1e-5, rel=1e-6)
    assert queue.per_output_token_cpu_s == pytest.approx(5e-5, rel=1e-6)
    assert queue.cpu_stretch == pytest.approx(2.5)


def test_without_the_server_process_times_there_is_no_queue_model() -> None:
    phase = _server_phase("c1", 1, 64, 32, 8, wall=2.0)
    bare = PhaseResult(phase.phase, phase.shots, phase.wall_s, {})
    assert fit_frontend_queue([bare] * 5) is None
    assert fit_frontend_queue([phase] * 3) is None  # four unknowns need four phases


def _histogram_phase(name: str, cv: float, n: int = 20_000, median: float = 0.008) -> PhaseResult:
    """A phase whose steps were lognormal with this cv, as the plugin's histogram counts them."""
    sigma = math.sqrt(math.log1p(cv * cv))
    rng = random.Random(7)
    steps = [median * math.exp(rng.gauss(0.0, sigma)) for _ in range(n)]
    engine: dict[str, float | None] = {
        "fleetslo_engine_steps": float(n),
        "fleetslo_engine_step_seconds": sum(steps),
    }
    for bound in STEP_BUCKETS:
        engine[bucket_key(bound)] = float(sum(1 for t in steps if t <= bound))
    return PhaseResult(Phase(name, 4, 64, 32, 16), (), 1.0, engine)


@pytest.mark.parametrize("cv", [0.2, 0.5, 0.9])
def test_step_spread_recovers_a_lognormal_cv_from_the_buckets(cv: float) -> None:
    spread = step_spread(_histogram_phase("c4", cv))
    assert spread == pytest.approx(cv, rel=0.1)


def test_step_spread_is_missing_without_the_histogram_or_enough_steps() -> None:
    phase = _histogram_phase("c4", 0.5)
    assert step_spread(PhaseResult(phase.phase, (), 1.0, {"fleetslo_engine_steps": 20_000.0})) is None
    assert step_spread(_histogram_phase("c4", 0.5, n=MIN_STEPS_FOR_SPREAD - 1)) is None


def test_the_fit_takes_the_median_spread_of_the_sweep_phases_as_noise() -> None:
    shapes = (("c1", 1, 0, 200), ("c4", 4, 10, 900), ("c8", 8, 40, 2600), ("p384", 2, 300, 700))
    phases = [_phase(*shape) for shape in shapes]
    plain = fit(phases)
    assert plain.step_time.noise_cv == 0.0 and plain.step_spread == {}
    spread = [_histogram_phase(n, cv) for n, cv in (("c1", 0.3), ("s8-0", 0.5), ("s8-1", 0.6))]
    noisy = fit([*phases, _histogram_phase("p384", 0.99), *spread])
    assert set(noisy.step_spread) == {"c1", "s8-0", "s8-1"}  # the prompt sweep mixes compositions
    assert noisy.step_time.noise_cv == pytest.approx(0.5, rel=0.1)


def test_a_measured_idle_rate_keeps_the_work_out_of_the_idle_term() -> None:
    # Closed-loop phases whose wall time is proportional to their requests: with idle fitted too,
    # wall and requests are one column twice over; with the idle rate measured, the work is found.
    phases = [_server_phase("c1", 1, 64, 32, n, wall=0.1 * n) for n in (4, 8, 16)] + [
        _server_phase("p384", 2, 384, 16, 8, wall=0.8),
        _server_phase("o128", 4, 64, 128, 12, wall=1.2),
    ]
    queue = fit_frontend_queue(phases, idle_cpu_per_s=0.020)
    assert queue is not None
    assert queue.per_request_cpu_s == pytest.approx(0.002, rel=1e-6)
    assert queue.per_output_token_cpu_s == pytest.approx(5e-5, rel=1e-6)
