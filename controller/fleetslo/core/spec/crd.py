"""The FleetSLO CustomResourceDefinition, generated from the pydantic models: one spec, two forms.

Each field's OpenAPI schema comes from its annotation and its pydantic constraints (bounds,
lengths, enums, required keys, ``extra="forbid"`` as no unknown fields); durations (the
``PositiveDuration`` type) become an int-or-string with the parser's pattern; a model's cross-field
checks come from its ``cel_rules`` (``x-kubernetes-validations``), written beside the Python check
they mirror. The status schema comes from ``fleetslo.core.spec.status`` the same way.

What the API server cannot check (the error-budget period's 1d–366d range on a duration string)
is checked by the controller when it loads the resource, and reported on its conditions.

Pure: ``crd()`` returns the object; the chart's copy is written and drift-checked by the tests.
"""

from __future__ import annotations

import types
import typing
from enum import Enum
from typing import Any, Literal

import annotated_types as at
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic.functional_validators import BeforeValidator

from fleetslo.core.config import parse_duration
from fleetslo.core.spec.resource import RESOURCE_API_VERSION
from fleetslo.core.spec.status import FleetSLOStatus
from fleetslo.core.spec.v1 import FleetSLOSpec

GROUP, VERSION = RESOURCE_API_VERSION.split("/")
KIND, PLURAL, SINGULAR, LIST_KIND = "FleetSLO", "fleetslos", "fleetslo", "FleetSLOList"

#: A positive duration as the spec's parser reads it ("500ms", "2s", "5m", "1h", "28d", "60").
DURATION_PATTERN = r"^\s*([0-9]*[1-9][0-9]*(\.[0-9]+)?|[0-9]+\.[0-9]*[1-9][0-9]*)\s*(ms|s|m|h|d)?\s*$"

#: What `kubectl get fleetslo` prints.
PRINTER_COLUMNS = (
    ("Target", "string", ".spec.target.name", 0),
    ("Mode", "string", ".status.mode", 0),
    ("Replicas", "integer", ".status.replicas.current", 0),
    ("Desired", "integer", ".status.replicas.desired", 0),
    ("TTFT", "number", ".status.observed.ttftSeconds", 0),
    ("TPOT", "number", ".status.observed.tpotSeconds", 0),
    ("Attainment", "number", ".status.observed.attainment", 0),
    ("Ready", "string", '.status.conditions[?(@.type=="Ready")].status', 0),
    ("Reason", "string", ".status.lastDecision.reason", 0),
    ("Batch", "integer", ".status.batchLimit", 1),
    ("Conflict", "string", ".status.conflictsWith", 1),
    ("Age", "date", ".metadata.creationTimestamp", 0),
)


def crd() -> dict[str, Any]:
    """The ``apiextensions.k8s.io/v1`` CustomResourceDefinition of ``fleetslos.fleetslo.io``."""
    spec_schema = model_schema(FleetSLOSpec)
    spec_schema["description"] = (
        "What fleetslo holds the target to (the same keys as a FleetSLO file's spec)."
    )
    status_schema = model_schema(FleetSLOStatus)
    status_schema["description"] = "What the controller sees, decides and does (written by fleetslo)."
    version = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "subresources": {"status": {}},
        "additionalPrinterColumns": [
            {"name": name, "type": kind, "jsonPath": path, **({"priority": prio} if prio else {})}
            for name, kind, path, prio in PRINTER_COLUMNS
        ],
        "schema": {
            "openAPIV3Schema": {
                "type": "object",
                "description": "A FleetSLO: one scaled vLLM workload and its latency objectives.",
                "required": ["spec"],
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "metadata": {"type": "object"},
                    "spec": spec_schema,
                    "status": status_schema,
                },
            }
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": KIND,
                "listKind": LIST_KIND,
                "plural": PLURAL,
                "singular": SINGULAR,
                "shortNames": ["fslo"],
                "categories": ["fleetslo"],
            },
            "versions": [version],
        },
    }


def model_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A structural OpenAPI schema of ``model``: its fields, their constraints, its CEL rules."""
    properties = {name: field_schema(info) for name, info in model.model_fields.items()}
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if model.__doc__ and model.__module__.startswith("fleetslo."):
        schema["description"] = _first_paragraph(model.__doc__)
    required = [name for name, info in model.model_fields.items() if info.is_required()]
    if required:
        schema["required"] = required
    rules = getattr(model, "cel_rules", ())
    if rules:
        schema["x-kubernetes-validations"] = [{"rule": r.rule, "message": r.message} for r in rules]
    if model.model_config.get("extra") != "forbid":
        schema["x-kubernetes-preserve-unknown-fields"] = True
    return schema


def field_schema(info: FieldInfo) -> dict[str, Any]:
    """One field: its type's schema plus the bounds pydantic checks."""
    if _is_duration(info.metadata):
        return _duration()
    schema = type_schema(info.annotation)
    for constraint in info.metadata:
        schema.update(_constraint(constraint, schema.get("type")))
    if isinstance(info.json_schema_extra, dict):
        schema.update({k: v for k, v in info.json_schema_extra.items() if k.startswith("x-kubernetes-")})
    return schema


def _is_duration(metadata: Any) -> bool:
    return any(isinstance(m, BeforeValidator) and m.func is parse_duration for m in metadata)


def type_schema(annotation: Any) -> dict[str, Any]:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated and _is_duration(annotation.__metadata__):
        return _duration()  # an optional duration: the Annotated type sits inside the union
    if origin in (types.UnionType, typing.Union):
        present = [a for a in args if a is not type(None)]
        if len(present) > 1 and all(isinstance(a, type) and issubclass(a, Enum) for a in present):
            # One field, several enums (a target's kind: Kubernetes workloads or standalone kinds).
            return {"type": "string", "enum": [m.value for a in present for m in a]}
        if len(present) != 1:
            raise TypeError(f"no CRD schema for the union {annotation!r}")
        return type_schema(present[0])  # optional: simply not required (and never null)
    if origin is Literal:
        return {"type": "string", "enum": list(args)}
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": type_schema(args[0])}
        raise TypeError(f"no CRD schema for the fixed tuple {annotation!r}")
    if origin is dict:
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return model_schema(annotation)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return {"type": "string", "enum": [m.value for m in annotation]}
    simple = {bool: "boolean", int: "integer", float: "number", str: "string"}
    if annotation in simple:
        return {"type": simple[annotation]}
    raise TypeError(f"no CRD schema for {annotation!r}")


def _constraint(constraint: object, kind: str | None) -> dict[str, Any]:
    """An annotated-types bound in OpenAPI v3.0's words (exclusive bounds are flags there)."""
    if isinstance(constraint, at.Gt):
        return {"minimum": constraint.gt, "exclusiveMinimum": True}
    if isinstance(constraint, at.Ge):
        return {"minimum": constraint.ge}
    if isinstance(constraint, at.Lt):
        return {"maximum": constraint.lt, "exclusiveMaximum": True}
    if isinstance(constraint, at.Le):
        return {"maximum": constraint.le}
    if isinstance(constraint, at.MinLen):
        return {"minItems" if kind == "array" else "minLength": constraint.min_length}
    if isinstance(constraint, at.MaxLen):
        return {"maxItems" if kind == "array" else "maxLength": constraint.max_length}
    pattern = getattr(constraint, "pattern", None)
    if isinstance(pattern, str):
        return {"pattern": pattern}
    raise TypeError(f"no CRD schema for the constraint {constraint!r}")


def _duration() -> dict[str, Any]:
    return {
        "x-kubernetes-int-or-string": True,
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": DURATION_PATTERN,
        "description": "A positive duration: 500ms, 2s, 5m, 1h, 28d, or whole seconds.",
    }


def _first_paragraph(doc: str) -> str:
    return " ".join(doc.strip().split("\n\n")[0].split()).replace("``", "")
