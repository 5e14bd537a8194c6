"""Settings and the FleetSLO spec: durations, ranges, and errors that name key, value and rule."""

from __future__ import annotations

from typing import Any

import pytest
from fleetslo.core.config import load, parse_duration
from fleetslo.core.errors import ConfigError
from fleetslo.core.spec import FleetSLO, load_fleetslo_documents
from fleetslo.sidecar.settings import ExporterSettings

SPEC: dict[str, Any] = {
    "apiVersion": "fleetslo/v1",
    "kind": "FleetSLO",
    "metadata": {"name": "qwen3"},
    "spec": {
        "target": {
            "kind": "Deployment",
            "namespace": "llm",
            "name": "qwen3",
            "model_name": "Qwen/Qwen3-235B",
        },
        "objectives": {"ttft": {"quantile": 0.9, "threshold": "2s"}, "tpot": {"threshold": "50ms"}},
        "replicas": {"min": 2, "max": 40, "cold_start": "5m"},
        "batch_limit": {"min": 8, "max": 256, "actuator": "gate"},
        "cost": {"per_replica_hour": 12.5, "gpus_per_replica": 4},
    },
}


@pytest.mark.parametrize(
    ("text", "seconds"), [("50ms", 0.05), ("2s", 2.0), ("1.5m", 90.0), ("1h", 3600.0), (3, 3.0), ("7", 7.0)]
)
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["fast", "-1s", "2 weeks", True, None])
def test_bad_durations_are_rejected(bad: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(bad)


def test_a_full_spec_loads_with_units_converted() -> None:
    slo = load(FleetSLO, SPEC)
    assert slo.spec.objectives.ttft.threshold == 2.0
    assert slo.spec.objectives.tpot.threshold == 0.05
    assert slo.spec.objectives.tpot.quantile == 0.9
    assert slo.spec.replicas.cold_start == 300.0


def test_an_observation_covers_the_longer_objective_window() -> None:
    slo = load(FleetSLO, with_change("spec.objectives.tpot.window", "5m"))
    assert slo.spec.objectives.ttft.window < slo.spec.objectives.tpot.window == 300.0
    assert slo.spec.objectives.observation_window == 300.0


def with_change(path: str, value: object) -> dict[str, Any]:
    import copy

    data = copy.deepcopy(SPEC)
    node = data
    keys = path.split(".")
    for k in keys[:-1]:
        node = node[k]
    node[keys[-1]] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("spec.replicas.max", 0, r"spec\.replicas\.max: .*greater than or equal to 1.*got 0"),
        ("spec.replicas.min", 50, r"spec\.replicas: .*min \(50\) must be <= max \(40\)"),
        ("spec.objectives.ttft.quantile", 1.5, r"spec\.objectives\.ttft\.quantile: .*less than 1.*got 1\.5"),
        ("spec.objectives.tpot.threshold", "soon", r"spec\.objectives\.tpot\.threshold: .*duration"),
        ("spec.target.kind", "Pod", r"spec\.target\.kind: .*Deployment.*got 'Pod'"),
        ("spec.mode", "yolo", r"spec\.mode: .*enforce.*got 'yolo'"),
        ("apiVersion", "fleetslo/v2", r"apiVersion: .*fleetslo/v1"),
        ("spec.replicas.maxx", 3, r"spec\.replicas\.maxx: unknown key"),
    ],
)
def test_bad_specs_name_the_key_the_value_and_what_is_allowed(path: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(FleetSLO, with_change(path, value), "slo.yaml")


def test_documents_need_unique_names_and_at_least_one_spec() -> None:
    with pytest.raises(ConfigError, match="unique"):
        load_fleetslo_documents([SPEC, SPEC], "f.yaml")
    with pytest.raises(ConfigError, match="no FleetSLO"):
        load_fleetslo_documents([None], "f.yaml")
    assert len(load_fleetslo_documents([SPEC], "f.yaml")) == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"vllm_url": "localhost:8000"}, r"vllm_url: expected an http:// or https:// URL"),
        ({"listen": "9400"}, r"listen: expected host:port"),
        ({"interval": "0s"}, r"interval: .*greater than 0"),
        ({"interval": "10m"}, r"interval: must be between"),
        ({"windows": "1s,1m"}, r"windows: 1s is shorter than two scrape intervals"),
        ({"windows": ""}, r"at least one window"),
    ],
)
def test_bad_exporter_settings(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(ExporterSettings, options)


def test_exporter_defaults_and_derived_values() -> None:
    s = load(ExporterSettings, {"windows": "30s, 1m,5m", "slo_ttft": "2s"})
    assert s.windows == [30.0, 60.0, 300.0] and s.slo_ttft == 2.0
    assert s.scrape_timeout == 5.0 and s.ring_size == 63
