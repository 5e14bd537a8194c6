"""The FleetSLO CRD: generated from the pydantic spec, committed in the chart, valid for Kubernetes,
and as strict as the Python loader.

"As strict" is tested by running both on the same documents: the CRD's OpenAPI schema (with
jsonschema's draft 4 validator — OpenAPI 3.0's boolean exclusive bounds are draft 4's) plus its
CEL rules (cel-python, with the Kubernetes list library's ``isSorted`` added and list-type sets
checked for repeats, as the API server does) must accept exactly what ``load_fleetslo_documents``
accepts, for every example and for each way a spec can be wrong. The one documented exception —
the error-budget period's 1d–366d range, which a schema cannot read out of "28d" — is asserted too.

Regenerate the chart's copy after a spec change with ``make helm-golden`` (FLEETSLO_UPDATE_GOLDEN=1).
"""

from __future__ import annotations

import copy
import itertools
import os
from typing import Any

import celpy
import jsonschema
import kubernetes_validate
import pytest
import yaml
from fleetslo.core.errors import ConfigError
from fleetslo.core.spec import RESOURCE_API_VERSION, load_fleetslo_documents
from fleetslo.core.spec.crd import crd

from tests.support import ROOT

CRD_FILE = ROOT / "helm" / "fleetslo" / "crds" / "fleetslo.io_fleetslos.yaml"
HEADER = "# Generated from the spec's models (fleetslo.core.spec.crd): do not edit; `make helm-golden`.\n"
EXAMPLES = sorted((ROOT / "examples" / "slo").glob("*.yaml"))


def crd_text() -> str:
    return HEADER + yaml.safe_dump(crd(), sort_keys=False, width=110)


def test_the_chart_carries_the_generated_crd() -> None:
    text = crd_text()
    if os.environ.get("FLEETSLO_UPDATE_GOLDEN"):
        CRD_FILE.parent.mkdir(parents=True, exist_ok=True)
        CRD_FILE.write_text(text, encoding="utf-8")
    assert CRD_FILE.read_text(encoding="utf-8") == text, (
        f"{CRD_FILE} differs from the spec's models: run `make helm-golden` and review the diff"
    )


@pytest.mark.parametrize("version", ["1.27.0", "1.37.0"])
def test_the_crd_is_a_valid_custom_resource_definition(version: str) -> None:
    kubernetes_validate.validate(crd(), version, strict=True)


# --------------------------------------------------------------------------------------------
# the API server's checks, replayed: schema + CEL
# --------------------------------------------------------------------------------------------


def _schema() -> dict[str, Any]:
    return crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


def api_server_errors(resource: dict[str, Any]) -> list[str]:
    """What the API server would refuse in ``resource`` (schema, list sets, CEL rules)."""
    schema = _schema()
    errors = [e.message for e in jsonschema.Draft4Validator(_strict(schema)).iter_errors(resource)]
    if errors:
        return errors
    return _cel_errors(schema, resource, "")


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with unknown fields refused, as a structural schema prunes or (strict) refuses them."""
    out = copy.deepcopy(schema)
    if (
        out.get("type") == "object"
        and "properties" in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
        out["properties"] = {k: _strict(v) for k, v in out["properties"].items()}
    if "items" in out:
        out["items"] = _strict(out["items"])
    return out


def _cel_errors(schema: dict[str, Any], value: Any, path: str) -> list[str]:
    errors: list[str] = []
    if (
        schema.get("x-kubernetes-list-type") == "set"
        and isinstance(value, list)
        and len(set(value)) != len(value)
    ):
        errors.append(f"{path}: duplicate entries")
    for rule in schema.get("x-kubernetes-validations", []):
        env = celpy.Environment()
        program = env.program(env.compile(rule["rule"]), functions={"isSorted": _is_sorted})
        if not program.evaluate({"self": celpy.json_to_cel(value)}):
            errors.append(f"{path}: {rule['message']}")
    if isinstance(value, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key in value:
                errors.extend(_cel_errors(sub, value[key], f"{path}.{key}"))
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):  # the API server runs an item's rules on every item
            errors.extend(_cel_errors(schema["items"], item, f"{path}[{i}]"))
    return errors


def _is_sorted(values: Any) -> celpy.celtypes.BoolType:
    items = list(values)
    return celpy.celtypes.BoolType(all(a <= b for a, b in itertools.pairwise(items)))


def python_errors(resource: dict[str, Any]) -> str | None:
    try:
        load_fleetslo_documents([resource], "resource")
    except ConfigError as exc:
        return str(exc)
    return None


def as_resource(document: dict[str, Any]) -> dict[str, Any]:
    return {**document, "apiVersion": RESOURCE_API_VERSION,
            "metadata": {**document["metadata"], "namespace": "llm"}}  # fmt: skip


def _example(i: int | None = None) -> dict[str, Any]:
    """An example as a resource; by default the reference one (replicas 2–16, batch 8–256, gate)."""
    path = ROOT / "examples" / "slo" / "qwen3-235b-fp8-mi325x.yaml" if i is None else EXAMPLES[i]
    return as_resource(yaml.safe_load(path.read_text(encoding="utf-8")))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_is_a_valid_resource_for_both(path: Any) -> None:
    resource = as_resource(yaml.safe_load(path.read_text(encoding="utf-8")))
    assert api_server_errors(resource) == []
    assert python_errors(resource) is None


def _set(doc: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    *parents, last = dotted.split(".")
    node = doc
    for key in parents:
        node = node.setdefault(key, {})
    if value is _DELETE:
        node.pop(last, None)
    else:
        node[last] = value
    return doc


_DELETE = object()
_DELETE_KEY = "<delete>"
#: A launch at 18:00 UTC: twice the usual traffic for an hour.
_LAUNCH = {"name": "launch", "start": "2026-12-01T18:00:00Z", "duration": "1h", "rate_factor": 2.0}


def _without_deleted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_deleted(v) for k, v in value.items() if v != _DELETE_KEY}
    if isinstance(value, list):
        return [_without_deleted(v) for v in value]
    return value


#: (change to the reference example, whether a valid spec results) — both checkers must agree.
CASES: list[tuple[str, Any, bool]] = [
    ("spec.replicas.min", 17, False),  # min > max (16)
    ("spec.replicas.min", 16, True),
    ("spec.replicas.min", _DELETE, True),  # default 1
    ("spec.replicas.max", 0, False),
    ("spec.replicas.max", 10_001, False),
    ("spec.batch_limit.min", 300, False),  # > max 256
    ("spec.batch_limit.max", 4, False),  # < min 8
    ("spec.batch_limit.actuator", "magic", False),
    ("spec.objectives.ttft.quantile", 1.0, False),
    ("spec.objectives.ttft.quantile", 0.0, False),
    ("spec.objectives.ttft.quantile", 0.99, True),
    ("spec.objectives.ttft.threshold", "0s", False),
    ("spec.objectives.ttft.threshold", "0.5s", True),
    ("spec.objectives.ttft.threshold", "two seconds", False),
    ("spec.objectives.ttft.threshold", 2, True),
    ("spec.objectives.ttft.threshold", "1500ms", True),
    ("spec.objectives.tpot.window", "5m", True),
    ("spec.objectives.ttft.buckets", [0.5, 0.25], False),
    ("spec.objectives.ttft.buckets", [0.5, 0.5], False),
    ("spec.objectives.ttft.buckets", [-1.0, 2.0], False),
    ("spec.objectives.ttft.buckets", [], False),
    ("spec.objectives.ttft.buckets", [0.5, 2.0], True),
    ("spec.objectives.availability", {"target": 0.999}, True),
    ("spec.objectives.availability", {"target": 1.5}, False),
    ("spec.target.kind", "DaemonSet", False),
    ("spec.target.name", "", False),
    ("spec.target.model_name", _DELETE, False),
    ("spec.target.replicas", 3, False),  # unknown field
    ("spec.mode", "advisory", True),
    ("spec.mode", "yolo", False),
    ("spec.cost.gpus_per_replica", 0, False),
    ("spec.cost.per_replica_hour", -1, False),
    ("spec.objectives", _DELETE, False),
    ("spec.profile", "mi325x-qwen3-235b-fp8-tp4", True),  # read when the controller starts
    ("spec.forecast", {"events": [_LAUNCH]}, True),
    (
        "spec.forecast",
        {"events": [{**_LAUNCH, "duration": _DELETE_KEY, "end": "2026-12-01T19:30:00+01:00"}]},
        True,
    ),
    (
        "spec.forecast",
        {"events": [{**_LAUNCH, "duration": _DELETE_KEY, "end": "2026-12-01T17:00:00Z"}]},
        False,
    ),
    ("spec.forecast", {"events": [{**_LAUNCH, "end": "2026-12-01T19:00:00Z"}]}, False),  # end and duration
    ("spec.forecast", {"events": [{**_LAUNCH, "duration": _DELETE_KEY}]}, False),  # neither
    ("spec.forecast", {"events": [{**_LAUNCH, "duration": "0s"}]}, False),
    ("spec.forecast", {"events": [{**_LAUNCH, "rate_factor": 0}]}, False),
    ("spec.forecast", {"events": [{**_LAUNCH, "rate_factor": 101}]}, False),
    ("spec.forecast", {"events": [{**_LAUNCH, "start": "tomorrow at six"}]}, False),
    ("spec.forecast", {"events": [{**_LAUNCH, "start": "2026-12-01T18:00:00"}]}, False),  # no offset
    ("spec.forecast", {"events": [{**_LAUNCH, "name": ""}]}, False),
    ("spec.forecast", {"events": [{**_LAUNCH, "factor": 2}]}, False),  # unknown field
    ("spec.forecast", {"events": [_LAUNCH] * 65}, False),
]


@pytest.mark.parametrize(("path", "value", "valid"), CASES, ids=[f"{p}={v!r}" for p, v, _ in CASES])
def test_the_api_server_and_the_loader_agree(path: str, value: Any, valid: bool) -> None:
    resource = _set(_example(), path, _without_deleted(value))
    api, python = api_server_errors(resource), python_errors(resource)
    assert (api == []) is valid, api
    assert (python is None) is valid, python


def test_the_one_check_left_to_the_controller_is_the_period_range() -> None:
    """A schema cannot read a number out of "400d"; the loader refuses it, and the controller
    reports it on the resource's conditions."""
    resource = _set(_example(), "spec.objectives.period", "400d")
    assert api_server_errors(resource) == []
    assert python_errors(resource) is not None


def test_a_resource_s_target_namespace_defaults_to_its_own() -> None:
    resource = _set(_example(), "spec.target.namespace", _DELETE)
    resource["metadata"]["namespace"] = "team-a"
    (slo,) = load_fleetslo_documents([resource], "resource")
    assert slo.spec.target.namespace == "team-a"


def test_kubectl_get_output_loads_as_the_same_specs() -> None:
    """`kubectl get fleetslo -o yaml` prints a List with server fields and a status."""
    items = []
    for i in range(len(EXAMPLES)):
        item = _example(i)
        item["metadata"] |= {"uid": "x", "resourceVersion": "7", "generation": 2}
        item["status"] = {"mode": "advisory"}
        items.append(item)
    listed = load_fleetslo_documents([{"apiVersion": "v1", "kind": "List", "items": items}], "kubectl")
    files = load_fleetslo_documents(
        [yaml.safe_load(p.read_text(encoding="utf-8")) for p in EXAMPLES], "files"
    )
    assert [s.spec for s in listed] == [s.spec for s in files]
    assert [s.metadata.name for s in listed] == [s.metadata.name for s in files]


def test_alerts_build_reads_kubectl_get_output_as_it_reads_the_files(tmp_path: Any) -> None:
    """`kubectl get fleetslo -A -o yaml > fleetslos.yaml; fleetslo alerts build --slo fleetslos.yaml`."""
    from fleetslo.cli import main

    items = [_example(i) | {"status": {"mode": "enforce"}} for i in range(len(EXAMPLES))]
    listed = tmp_path / "fleetslos.yaml"
    listed.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}), encoding="utf-8")
    from_list, from_files = tmp_path / "from-list", tmp_path / "from-files"
    assert main(["alerts", "build", "--slo", str(listed), "--out", str(from_list)]) == 0
    files = [a for p in EXAMPLES for a in ("--slo", str(p))]
    assert main(["alerts", "build", *files, "--out", str(from_files)]) == 0
    rules = sorted(p.name for p in from_files.glob("*.rules.yaml"))
    assert rules and sorted(p.name for p in from_list.glob("*.rules.yaml")) == rules
    for name in rules:  # the same rules; only the header comment names another source file
        assert yaml.safe_load((from_list / name).read_text()) == yaml.safe_load(
            (from_files / name).read_text()
        )
