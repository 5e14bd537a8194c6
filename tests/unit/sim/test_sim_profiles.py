"""Profiles: every packaged one loads, says where its numbers came from, and the calibrated ones
reproduce the published charts within 15%."""

from __future__ import annotations

import pytest
from fleetslo.core.errors import ConfigError
from fleetslo.sim.harness import closed_loop
from fleetslo.sim.profile import EngineProfile, builtin_profile, builtin_profiles, profile_from_mapping

REQUIRED = {
    "mi325x-qwen3-235b-fp8-tp4",
    "mi300x-qwen3-235b-fp8-tp4",
    "mi325x-qwen3-235b-fp8-tp8",
    "mi300x-llama3.1-8b-fp8-tp1",
}

#: MI300X TP8 bars of the same chart (research/traces_perf.md §2.2): (TTFT s, TPOT s, output tok/s).
MI300X_TP8 = {64: (5.7, 0.046, 1220.0), 128: (8.9, 0.079, 1440.0)}


def errors(profile: EngineProfile, points: dict[int, tuple[float, float, float]]) -> dict[str, float]:
    assert profile.calibration is not None
    w = profile.calibration.workload
    out = {}
    for c, (ttft, tpot, tps) in points.items():
        got = closed_loop(profile, c, w.input_tokens, w.output_tokens, c * w.num_prompts_per_concurrency)
        out[f"ttft@{c}"] = got.mean_ttft_s / ttft - 1
        out[f"tpot@{c}"] = got.mean_tpot_s / tpot - 1
        out[f"tps@{c}"] = got.output_tokens_per_s / tps - 1
    return out


def test_required_profiles_are_packaged_with_provenance() -> None:
    assert set(builtin_profiles()) >= REQUIRED
    for name in builtin_profiles():
        profile = builtin_profile(name)
        assert profile.name == name
        assert profile.provenance.derived, name
        assert profile.provenance.sources, name
        assert profile.cold_start_s >= 60
    assert builtin_profile("mi325x-qwen3-235b-fp8-tp4").cold_start_s >= 120  # minutes for a 235B model


def test_tp8_mi325x_reproduces_the_rocm_blog_chart_within_15_percent() -> None:
    profile = builtin_profile("mi325x-qwen3-235b-fp8-tp8")
    assert profile.calibration is not None
    points = {
        p.concurrency: (p.mean_ttft_s, p.mean_tpot_s, p.output_tokens_per_s)
        for p in profile.calibration.points
    }
    assert set(points) == {64, 128}
    errs = errors(profile, points)
    print({k: f"{v:+.1%}" for k, v in errs.items()})
    assert max(abs(v) for v in errs.values()) < 0.15, errs


def test_mi300x_scaling_reproduces_the_mi300x_bars_within_15_percent() -> None:
    # The MI300X profile is the MI325X one with memory terms x 6.0/5.3 and compute terms x 1.09;
    # applied to the TP8 fit, the same factors must land on the MI300X bars of the same chart.
    tp8 = builtin_profile("mi325x-qwen3-235b-fp8-tp8")
    st = tp8.step_time
    mem, compute = 6.0 / 5.3, 1.09
    scaled = tp8.model_copy(
        update={
            "step_time": st.model_copy(
                update={
                    "overhead_s": st.overhead_s * mem,
                    "per_kv_token_s": st.per_kv_token_s * mem,
                    "per_seq_s": st.per_seq_s * compute,
                    "per_prefill_token_s": st.per_prefill_token_s * compute,
                    "per_attention_token2_s": st.per_attention_token2_s * compute,
                }
            )
        }
    )
    errs = errors(scaled, MI300X_TP8)
    print({k: f"{v:+.1%}" for k, v in errs.items()})
    assert max(abs(v) for v in errs.values()) < 0.15, errs
    tp4_325, tp4_300 = (
        builtin_profile("mi325x-qwen3-235b-fp8-tp4"),
        builtin_profile("mi300x-qwen3-235b-fp8-tp4"),
    )
    assert tp4_300.step_time.overhead_s == pytest.approx(tp4_325.step_time.overhead_s * mem, rel=0.01)
    assert tp4_300.step_time.per_prefill_token_s == pytest.approx(
        tp4_325.step_time.per_prefill_token_s * compute, rel=0.01
    )


def test_two_tp4_replicas_out_serve_one_tp8_replica_per_node() -> None:
    tp8, tp4 = builtin_profile("mi325x-qwen3-235b-fp8-tp8"), builtin_profile("mi325x-qwen3-235b-fp8-tp4")
    node_tp8 = closed_loop(tp8, 64, 5600, 140, 256).requests_per_s
    node_tp4 = 2 * closed_loop(tp4, 32, 5600, 140, 128).requests_per_s
    assert tp4.gpus_per_replica * 2 == tp8.gpus_per_replica
    assert node_tp4 > node_tp8


def test_a_bad_profile_names_the_key_and_the_value() -> None:
    good = builtin_profile("mi325x-qwen3-235b-fp8-tp4").model_dump()
    with pytest.raises(ConfigError, match=r"step_time\.per_prefill_token_s"):
        profile_from_mapping(
            {**good, "step_time": {**good["step_time"], "per_prefill_token_s": -1}}, "x.yaml"
        )
    with pytest.raises(ConfigError, match="max_num_batched_tokens"):
        profile_from_mapping({**good, "max_num_batched_tokens": 10}, "x.yaml")
    with pytest.raises(ConfigError, match="unknown profile 'nope'"):
        builtin_profile("nope")


def test_overrides_keep_validation() -> None:
    profile = builtin_profile("mi325x-qwen3-235b-fp8-tp4").with_overrides(cold_start_s=90.0)
    assert profile.cold_start_s == 90.0
    with pytest.raises(ConfigError):
        profile.with_overrides(cold_start_s=-1)
