"""``fleetslo demo --engine vllm`` without a real engine: the trace a CPU replica can serve, how many
replicas this machine holds, the command line each replica starts with, and the clear errors when
the vLLM environment is missing or the options cannot work in real time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fleetslo.cli import main
from fleetslo.control.local.replica import Ports
from fleetslo.control.local.template import CommandRecipe
from fleetslo.core.errors import ConfigError
from fleetslo.sim.demo import vllm
from fleetslo.sim.demo.loadgen import request_body
from fleetslo.sim.demo.scenario import MAX_MODEL_LEN, MAX_OUTPUT_TOKENS, DemoOptions, shape_trace, shorten
from fleetslo.sim.profile import builtin_profile
from fleetslo.sim.workload import Request, Trace


def test_prompts_are_shortened_and_answers_capped_to_fit_the_tiny_model() -> None:
    trace = Trace((Request(0.0, 2049, 10), Request(1.0, 1, 500), Request(2.0, 40_000, 100)), "t")
    short = shorten(trace)
    assert [(r.input_tokens, r.output_tokens) for r in short.requests] == [
        (257, 10), (1, MAX_OUTPUT_TOKENS), (MAX_MODEL_LEN - MAX_OUTPUT_TOKENS, MAX_OUTPUT_TOKENS)
    ]  # fmt: skip
    assert [r.arrival_s for r in short.requests] == [0.0, 1.0, 2.0]


def test_the_vllm_demo_replays_the_shortened_trace_in_real_time() -> None:
    options = DemoOptions(trace=None, scenario="spike", duration_s=30.0, speedup=1.0, rps=1.0, engine="vllm")
    trace = shape_trace(None, options.check())
    assert trace.duration_s <= 30.0
    assert all(r.input_tokens + r.output_tokens <= MAX_MODEL_LEN for r in trace.requests)
    with pytest.raises(ConfigError, match="real time"):
        DemoOptions(speedup=10.0, engine="vllm").check()
    with pytest.raises(ConfigError, match="--engine"):
        DemoOptions(engine="tgi").check()


def test_the_machine_holds_a_replica_per_core_while_memory_lasts() -> None:
    assert vllm.capacity(("0", "1"), available=10e9) == ("0", "1")
    assert vllm.capacity(("0", "1", "2"), available=5e9) == ("0",)
    with pytest.raises(ConfigError, match="GB"):
        vllm.capacity(("0", "1"), available=1e9)


def test_each_replica_is_a_real_vllm_bound_to_its_own_core(tmp_path: Path) -> None:
    setup = vllm.VllmSetup(Path("/env/bin/python"), Path("/models/tiny"), ("0", "1"))
    spec = vllm.local_spec(setup, tmp_path, max_num_seqs=16, warm=1)
    recipe = CommandRecipe(spec, "tiny-llama", tmp_path / "token", tmp_path, slo_ttft_s=2.0, slo_tpot_s=0.05)
    first, second = (recipe.engine_argv(Ports.pick(), cold_start_s=0.0, started_at=0.0) for _ in range(2))
    assert first[1:3] == ["-c", "0"] and second[1:3] == ["-c", "1"]  # taskset, one core each
    assert "VLLM_CPU_OMP_THREADS_BIND=0" in first and "VLLM_CPU_OMP_THREADS_BIND=1" in second
    assert "--no-enable-prefix-caching" in first  # the demo's prompts would all hit the cache
    assert first[first.index("--served-model-name") + 1] == "tiny-llama"
    assert spec.start_timeout == vllm.START_TIMEOUT_S


def test_the_load_generator_asks_for_exactly_the_traces_tokens() -> None:
    body = json.loads(request_body("tiny-llama", 3, 7))
    assert body == {
        "model": "tiny-llama",
        "prompt": [0, 0, 0],
        "max_tokens": 7,
        "ignore_eos": True,
        "stream": True,
    }


def test_the_packaged_profile_serves_the_tiny_model() -> None:
    profile = builtin_profile(vllm.PROFILE)
    assert profile.model == vllm.MODEL_NAME
    assert profile.frontend_queue is not None


def test_a_missing_vllm_environment_says_how_to_install_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-env" / "bin" / "python"
    status = main(
        ["demo", "--engine", "vllm", "--vllm-python", str(missing), "--report", str(tmp_path / "r.html")]
    )
    assert status == 2
    err = capsys.readouterr().err
    assert "bash scripts/install-vllm.sh" in err and str(missing) in err
    assert not (tmp_path / "r-files" / "logs").exists()  # nothing was started
