"""A Local target's command template: per-replica ports, CPUs round robin behind taskset, env
values filled in too, and a misspelt placeholder named in the error."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fleetslo.control.local.replica import Ports
from fleetslo.control.local.template import CommandRecipe
from fleetslo.core.errors import ConfigError
from fleetslo.core.spec import LocalFleet


def _recipe(tmp_path: Path, **spec: object) -> CommandRecipe:
    local = LocalFleet.model_validate(
        {"command": ["serve", "--port", "{port}", "--name", "{model_name}"], **spec}
    )
    return CommandRecipe(local, "m", tmp_path / "token", tmp_path, slo_ttft_s=2.0, slo_tpot_s=0.05)


def test_each_replica_gets_its_port_and_the_next_cpus(tmp_path: Path) -> None:
    recipe = _recipe(tmp_path, cpus=["0", "1"], env={"BIND": "{cpus}", "N": "r{replica}"})
    first = recipe.engine_argv(Ports(8001, 1, 2, 3), cold_start_s=0, started_at=0)
    second = recipe.engine_argv(Ports(8002, 1, 2, 3), cold_start_s=0, started_at=0)
    third = recipe.engine_argv(Ports(8003, 1, 2, 3), cold_start_s=0, started_at=0)
    taskset = shutil.which("taskset")
    assert first == [taskset, "-c", "0", "env", "BIND=0", "N=r0", "serve", "--port", "8001", "--name", "m"]
    assert second[:5] == [taskset, "-c", "1", "env", "BIND=1"]
    assert third[2] == "0"


def test_without_cpus_or_env_the_command_runs_as_written(tmp_path: Path) -> None:
    argv = _recipe(tmp_path).engine_argv(Ports(9, 1, 2, 3), cold_start_s=0, started_at=0)
    assert argv == ["serve", "--port", "9", "--name", "m"]


def test_an_unknown_placeholder_is_named(tmp_path: Path) -> None:
    recipe = _recipe(tmp_path, command=["serve", "{prot}"])
    with pytest.raises(ConfigError, match="prot"):
        recipe.engine_argv(Ports(9, 1, 2, 3), cold_start_s=0, started_at=0)


def test_the_sidecar_fronts_the_engine_port_with_the_gate(tmp_path: Path) -> None:
    argv = _recipe(tmp_path).sidecar_argv(Ports(9, 10, 11, 12))
    assert argv[argv.index("--vllm-url") + 1] == "http://127.0.0.1:9"
    assert argv[argv.index("--gate-listen") + 1] == "127.0.0.1:11"
