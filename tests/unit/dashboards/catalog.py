"""What the dashboards and alerts query, for the tests: every expression (with Grafana's variables
substituted), every metric name in it, and which process produces each name.

Shared by the unit tests (names against conventions and a real vLLM capture) and the integration
test (queries against a real Prometheus scraping fake vLLM servers and sidecars).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from fleetslo.core import conventions as cv
from fleetslo.core.spec import FleetSLO
from fleetslo.generate.alerts.health_rules import health_group
from fleetslo.generate.alerts.rules import Group
from fleetslo.generate.alerts.spec import target_spec
from fleetslo.generate.alerts.target_rules import target_group
from fleetslo.generate.dashboards.build import dashboards

NAME = re.compile(r"(?<![\w:$])(?:ray_vllm:|vllm:|vllm_|fleetslo_|fleetslo:)[A-Za-z0-9_:]*[A-Za-z0-9_]")
SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_info")
#: Grafana's variables as the integration test sets them (All = .*; windows short enough for a
#: test that runs for seconds with a 1 s scrape interval).
VARIABLES = {"$__rate_interval": "15s", "$__range": "1m", "$__interval": "15s", "$quantile": "0.9"}


class Producer(StrEnum):
    VLLM = "vLLM"
    SIDECAR = "sidecar"
    GPU = "sidecar GPU telemetry"
    GATE = "admission gate"
    CONTROLLER = "controller"
    RULES = "recording rules"


@dataclass(frozen=True)
class Query:
    where: str  # dashboard / panel / refId, or rule file / rule
    expr: str

    def promql(self) -> str:
        """The expression with Grafana's variables replaced (any other $var by .*)."""
        out = self.expr
        for var, value in VARIABLES.items():
            out = out.replace(var, value)
        return re.sub(r"\$\w+", ".*", out)

    def names(self) -> set[str]:
        return set(NAME.findall(self.expr))

    def producers(self) -> set[Producer]:
        return {producer(n) for n in self.names()}


def producer(name: str) -> Producer:
    if name.startswith("fleetslo:"):
        return Producer.RULES
    if name.startswith(("vllm:", "vllm_", "ray_vllm:")):
        return Producer.VLLM
    for prefix, who in (("fleetslo_controller_", Producer.CONTROLLER), ("fleetslo_gate_", Producer.GATE),
                        ("fleetslo_gpu_", Producer.GPU), (cv.TOKENS_PER_JOULE, Producer.GPU)):  # fmt: skip
        if name.startswith(prefix):
            return who
    return Producer.SIDECAR


def base_name(name: str) -> str:
    """The family name: without the exposition suffix (``_bucket``, ``_total``, …)."""
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def dashboard_queries() -> list[Query]:
    """Every panel target and annotation of every dashboard."""
    out = []
    for uid, dashboard in dashboards().items():
        for panel in _panels(dashboard["panels"]):
            for target in panel.get("targets", []):
                out.append(Query(f"{uid} / {panel['title']} / {target['refId']}", target["expr"]))
        for annotation in dashboard["annotations"]["list"]:
            if "expr" in annotation:
                out.append(Query(f"{uid} / annotation {annotation['name']}", annotation["expr"]))
    return out


def variable_selectors() -> list[Query]:
    """The series selector inside each ``label_values(selector, label)`` variable query."""
    out = []
    for uid, dashboard in dashboards().items():
        for variable in dashboard["templating"]["list"]:
            match = re.match(r"^label_values\((.*), *\w+\)$", variable["query"])
            if match:
                out.append(Query(f"{uid} / variable {variable['name']}", match.group(1)))
    return out


def rule_groups(slos: list[FleetSLO]) -> list[Group]:
    return [health_group(), *(target_group(target_spec(s)) for s in slos)]


def rule_queries(slos: list[FleetSLO]) -> list[Query]:
    return [
        Query(f"{g.name} / {getattr(r, 'record', None) or getattr(r, 'alert', '')}", r.expr)
        for g in rule_groups(slos)
        for r in g.rules
    ]


def recorded_names(slos: list[FleetSLO]) -> set[str]:
    return {r.record for g in rule_groups(slos) for r in g.recordings()}
