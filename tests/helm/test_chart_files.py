"""The chart cannot drift from the code: what it renders loads with the controller's own loaders,
values.schema.json names exactly the settings the code knows, and the rules and dashboards it embeds
are the generated ones (`make helm-files` copies them after `fleetslo alerts/dashboards build`).
"""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any

import fleetslo
import pytest
import yaml
from fleetslo.control.settings import ControllerSettings
from fleetslo.core.config import load
from fleetslo.core.spec import FleetSLO, load_fleetslo_documents
from pydantic import BaseModel

from tests.helm.chart import (
    CHART,
    NAMESPACE,
    REFERENCE,
    REFERENCE_SLO,
    VALUES,
    find,
    one,
    render,
    values_file,
)
from tests.support import ROOT

EVERYTHING = ("-f", str(VALUES / "everything.yaml"))
SCHEMA = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
EXAMPLES = ROOT / "examples" / "slo"


def _config_map(*args: str) -> dict[str, str]:
    data: dict[str, str] = one(render(*args), "ConfigMap", "fleetslo-controller")["data"]
    return data


@pytest.mark.parametrize(
    "args",
    [REFERENCE, EVERYTHING, (*REFERENCE_SLO, "--set", "controller.dryRun=true")],
    ids=["mi325x", "everything", "dry-run"],
)
def test_rendered_config_and_specs_load_with_the_controllers_loaders(args: tuple[str, ...]) -> None:
    data = _config_map(*args)
    settings = load(ControllerSettings, yaml.safe_load(data["controller.yaml"]), "controller.yaml")
    specs = load_fleetslo_documents(list(yaml.safe_load_all(data["slos.yaml"])), "slos.yaml")
    assert settings.leader_election.enabled and settings.leader_election.namespace == "fleetslo"
    assert settings.gate.token_file == "/var/run/fleetslo/gate-token/token"
    assert settings.engine_args.container == "vllm"
    assert specs[0].metadata.name == "qwen3-235b"


def test_by_default_the_controller_holds_the_resources_of_its_own_namespace_and_no_file() -> None:
    data = _config_map()
    settings = load(ControllerSettings, yaml.safe_load(data["controller.yaml"]), "controller.yaml")
    assert "slos.yaml" not in data
    assert settings.resources.enabled and settings.resources.namespaces == [NAMESPACE]
    deployment = one(render(), "Deployment", "fleetslo-controller")
    assert not [a for a in deployment["spec"]["template"]["spec"]["containers"][0]["args"] if "--slo" in a]


def test_cluster_wide_rbac_watches_every_namespace() -> None:
    data = _config_map("--set", "rbac.clusterWide=true")
    settings = load(ControllerSettings, yaml.safe_load(data["controller.yaml"]), "controller.yaml")
    assert settings.resources.namespaces == []  # every namespace


def test_controller_settings_from_values_reach_the_config() -> None:
    settings = load(ControllerSettings, yaml.safe_load(_config_map(*EVERYTHING)["controller.yaml"]))
    assert settings.source.prometheus.url == "https://thanos-query.monitoring.svc:10902"
    assert settings.source.prometheus.max_age == 90.0
    assert settings.source.prometheus.bearer_token_file == "/var/run/fleetslo/prometheus-token/token"
    assert settings.backoff == [1.0, 5.0, 30.0]


def test_the_controller_reads_the_files_the_deployment_mounts() -> None:
    deployment = one(render(*EVERYTHING), "Deployment", "fleetslo-controller")
    (c,) = deployment["spec"]["template"]["spec"]["containers"]
    mounts = {m["mountPath"] for m in c["volumeMounts"]}
    settings = load(ControllerSettings, yaml.safe_load(_config_map(*EVERYTHING)["controller.yaml"]))
    for path in (settings.gate.token_file, settings.source.prometheus.bearer_token_file):
        assert path is not None and str(Path(path).parent) in mounts
    assert "--config=/etc/fleetslo/controller.yaml" in c["args"] and "/etc/fleetslo" in mounts
    assert c["ports"][0]["containerPort"] == int(settings.listen.rpartition(":")[2])


def _examples(*names: str) -> list[FleetSLO]:
    docs = [
        doc for name in names for doc in yaml.safe_load_all((EXAMPLES / name).read_text(encoding="utf-8"))
    ]
    return load_fleetslo_documents(docs, "examples")


def _chart_specs(*args: str) -> list[FleetSLO]:
    return load_fleetslo_documents(list(yaml.safe_load_all(_config_map(*args)["slos.yaml"])), "chart")


def test_the_mi325x_values_fleetslo_is_the_reference_example() -> None:
    # The bundled rule files were generated from examples/slo: a spec that drifted from its
    # example would get another spec's alert thresholds.
    assert _chart_specs(*REFERENCE) == _examples("qwen3-235b-fp8-mi325x.yaml")


def test_everything_values_use_the_example_specs() -> None:
    assert _chart_specs(*EVERYTHING) == _examples("qwen3-235b-fp8-mi325x.yaml", "llama-8b-small.yaml")


@pytest.mark.parametrize(
    ("generated", "bundled", "pattern"),
    [
        (ROOT / "alerts" / "generated", CHART / "files" / "alerts", "*.yaml"),
        (ROOT / "dashboards" / "generated", CHART / "files" / "dashboards", "*.json"),
    ],
    ids=["alerts", "dashboards"],
)
def test_bundled_files_equal_the_generated_ones(generated: Path, bundled: Path, pattern: str) -> None:
    want = {f.name: f.read_text(encoding="utf-8") for f in generated.glob(pattern)}
    have = {f.name: f.read_text(encoding="utf-8") for f in bundled.glob(pattern)}
    stale = sorted(n for n in want.keys() | have.keys() if want.get(n) != have.get(n))
    assert not stale, f"{bundled} drifted from {generated} ({', '.join(stale)}): run `make helm-files`"


def test_prometheus_rule_is_the_generated_rules_of_the_specs() -> None:
    rule = one(render(*EVERYTHING), "PrometheusRule")
    files = ["fleetslo-health", "qwen3-235b", "llama-8b"]
    groups = [
        group
        for name in files
        for group in yaml.safe_load((ROOT / "alerts" / "generated" / f"{name}.rules.yaml").read_text())[
            "groups"
        ]
    ]
    assert rule["spec"]["groups"] == groups
    for group in rule["spec"]["groups"]:  # the PrometheusRule CRD types labels and annotations as strings
        for r in group["rules"]:
            assert isinstance(r["expr"], str)
            for value in [*(r.get("labels") or {}).values(), *(r.get("annotations") or {}).values()]:
                assert isinstance(value, str), (r.get("alert") or r.get("record"), value)


def test_rule_files_for_own_specs_come_in_by_values(tmp_path: Path) -> None:
    own = yaml.safe_load((ROOT / "alerts" / "generated" / "llama-8b.rules.yaml").read_text())
    own["groups"][0]["name"] = "my-own-group"
    path = tmp_path / "own.rules.yaml"
    path.write_text(yaml.safe_dump(own))
    rule = one(
        render(*EVERYTHING, "--set-file", f"monitoring.prometheusRule.ruleFiles.llama-8b={path}"),
        "PrometheusRule",
    )
    assert [g["name"] for g in rule["spec"]["groups"]][-1] == "my-own-group"


def test_alertmanager_secret_is_the_generated_routing_with_our_receivers() -> None:
    secret = one(render(*EVERYTHING), "Secret", "fleetslo-alertmanager")
    config = yaml.safe_load(secret["stringData"]["alertmanager.yaml"])
    generated = yaml.safe_load((ROOT / "alerts" / "generated" / "alertmanager.yaml").read_text())
    assert config["route"] == generated["route"] and config["inhibit_rules"] == generated["inhibit_rules"]
    assert config["receivers"] == values_file("everything.yaml")["monitoring"]["alertmanager"]["receivers"]


def test_dashboards_embed_the_generated_json() -> None:
    maps = [o for o in find(render(), "ConfigMap") if "dashboard" in o["metadata"]["name"]]
    for m in maps:
        ((name, text),) = m["data"].items()
        assert json.loads(text) == json.loads((ROOT / "dashboards" / "generated" / name).read_text())


def test_chart_app_version_is_the_package_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    assert chart["appVersion"] == fleetslo.__version__


# --------------------------------------------------------------------------------------------
# values.schema.json against the pydantic models
# --------------------------------------------------------------------------------------------


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside ``annotation`` (``Model``, ``Model | None``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        models = [m for m in map(_model_of, typing.get_args(annotation)) if m is not None]
        return models[0] if models else None
    return None


def _schema_object(schema: dict[str, Any]) -> dict[str, Any] | None:
    if schema.get("type") == "object" or "properties" in schema:
        return schema
    for option in schema.get("anyOf", []) + schema.get("oneOf", []):
        found = _schema_object(option)
        if found is not None:
            return found
    if schema.get("type") == ["object", "null"]:
        return schema
    return None


def _compare(model: type[BaseModel], schema: dict[str, Any], where: str) -> list[str]:
    """Differences between a model's fields (by alias) and a schema object's properties, recursively."""
    fields = {(f.alias or name): f for name, f in model.model_fields.items()}
    props = schema.get("properties", {})
    problems = [f"{where}: the schema lacks {k!r}" for k in sorted(fields.keys() - props.keys())]
    problems += [f"{where}: the code has no {k!r}" for k in sorted(props.keys() - fields.keys())]
    if schema.get("additionalProperties", True) is not False:
        problems.append(f"{where}: unknown keys must be refused (additionalProperties: false)")
    for key in sorted(fields.keys() & props.keys()):
        inner = _model_of(fields[key].annotation)
        sub = _schema_object(props[key])
        if inner is not None:
            if sub is None:
                problems.append(f"{where}.{key}: the schema does not describe an object")
            else:
                problems += _compare(inner, sub, f"{where}.{key}")
    return problems


def test_schema_of_a_fleetslo_is_the_settings_model() -> None:
    assert _compare(FleetSLO, SCHEMA["properties"]["slos"]["items"], "slos[]") == []


def test_schema_of_the_controller_config_is_the_settings_model() -> None:
    config = SCHEMA["properties"]["controller"]["properties"]["config"]
    assert _compare(ControllerSettings, config, "controller.config") == []


def test_the_charts_gpu_backends_are_the_sidecars() -> None:
    from fleetslo.sidecar.gpu.backends import choices

    sidecar = SCHEMA["properties"]["vllm"]["properties"]["sidecar"]["properties"]
    assert sidecar["gpuBackend"]["enum"] == choices()


def test_the_charts_batch_actuators_are_the_controllers() -> None:
    """The spec's enum, the actuator table and the chart's schema name the same batch-limit actuators."""
    from fleetslo.control.actuators.catalog import BATCH_LIMIT_ACTUATORS
    from fleetslo.core.spec import BatchActuator

    built = [e.kind.value for e in BATCH_LIMIT_ACTUATORS]
    assert sorted([*built, BatchActuator.NONE.value]) == sorted(a.value for a in BatchActuator)
    batch = SCHEMA["properties"]["slos"]["items"]["properties"]["spec"]["properties"]["batch_limit"]
    assert sorted(batch["properties"]["actuator"]["enum"]) == sorted(a.value for a in BatchActuator)
