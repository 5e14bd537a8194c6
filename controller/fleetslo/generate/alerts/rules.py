"""The data the generators produce: rule groups as plain values, before any YAML exists.

Kept apart from rendering so tests can inspect what was generated (names, labels, thresholds)
without parsing text, and so the renderer can never change what a rule means.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetslo.core.conventions import AlertName

#: Where each alert's runbook section is (``fleetslo alerts build`` writes it beside the rules);
#: relative to the repository. Point ``runbook_url`` at your own copy by prefixing this path.
RUNBOOKS = "alerts/generated/runbooks.md"


def runbook_anchor(name: AlertName) -> str:
    """The Markdown heading anchor of an alert's section (GitHub style: lower case)."""
    return name.value.lower()


@dataclass(frozen=True, slots=True)
class Recording:
    record: str
    expr: str
    labels: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"record": self.record, "expr": self.expr}
        if self.labels:
            out["labels"] = dict(self.labels)
        return out


@dataclass(frozen=True, slots=True)
class Alert:
    alert: AlertName
    expr: str
    hold: str
    labels: Mapping[str, str]
    summary: str
    description: str
    runbook: str

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"alert": self.alert.value, "expr": self.expr}
        if self.hold != "0s":
            out["for"] = self.hold
        out["labels"] = dict(self.labels)
        out["annotations"] = {
            "summary": self.summary,
            "description": self.description,
            "runbook": self.runbook,
            "runbook_url": f"{RUNBOOKS}#{runbook_anchor(self.alert)}",
        }
        return out


Rule = Recording | Alert


@dataclass(frozen=True, slots=True)
class Group:
    name: str
    rules: tuple[Rule, ...]
    #: Comment lines the renderer puts above the group (why a rule looks the way it does).
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "rules": [r.to_dict() for r in self.rules]}

    def alerts(self) -> list[Alert]:
        return [r for r in self.rules if isinstance(r, Alert)]

    def recordings(self) -> list[Recording]:
        return [r for r in self.rules if isinstance(r, Recording)]


def duration(seconds: float) -> str:
    """A Prometheus duration: ``5m``, ``1h``, ``1d``, ``28d`` (whole units only)."""
    whole = int(seconds)
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if whole and whole % size == 0:
            return f"{whole // size}{unit}"
    return f"{whole}s"
