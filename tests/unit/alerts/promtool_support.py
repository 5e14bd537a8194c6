"""Helpers for driving ``promtool test rules`` from Python: write generated rules, build test
documents, render the alerts' annotation templates the way Prometheus does, run promtool.

Expected annotations are rendered here (a small subset of Go's text/template: ``$labels.x``,
``$value`` and the humanize functions the rules use), because promtool compares them exactly.
"""

from __future__ import annotations

import math
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from fleetslo.core.spec import FleetSLO, load_fleetslo_documents
from fleetslo.generate.alerts.build import HEALTH_FILE, RULES_SUFFIX, generate
from fleetslo.generate.alerts.rules import Alert

from tests.support import require_tool

MODEL = "m"
TARGET = "m-slo"
NAMESPACE, WORKLOAD = "llm", "m-deploy"
#: A pod of the spec's Deployment, as a pod monitor labels its series (``pod_regex`` matches it).
POD = {"namespace": NAMESPACE, "pod": f"{WORKLOAD}-7d9f8c6b5-x2x4z"}
#: A pod of another Deployment serving the same model in the same namespace: another SLO.
OTHER_POD = {"namespace": NAMESPACE, "pod": f"{WORKLOAD}-canary-6c8b7f5d4-q9w8e"}
#: The labels of the spec's recorded SLO series.
SLO_LABELS = {"namespace": NAMESPACE, "workload": WORKLOAD, "model_name": MODEL}


def spec_document(**objectives: Any) -> dict[str, Any]:
    """A FleetSLO for model ``m``: p90 TTFT <= 0.5s and p90 TPOT <= 50ms unless overridden."""
    objs: dict[str, Any] = {"ttft": {"threshold": "500ms"}, "tpot": {"threshold": "50ms"}, **objectives}
    return {
        "apiVersion": "fleetslo/v1",
        "kind": "FleetSLO",
        "metadata": {"name": TARGET},
        "spec": {
            "target": {"name": WORKLOAD, "namespace": NAMESPACE, "model_name": MODEL},
            "objectives": objs,
            "replicas": {"min": 1, "max": 4},
        },
    }


def spec(**objectives: Any) -> FleetSLO:
    return load_fleetslo_documents([spec_document(**objectives)], "test")[0]


def write_rules(directory: Path, slos: Sequence[FleetSLO], health: bool = False) -> list[str]:
    """Generated rule files for ``slos`` in ``directory`` (with ``health``, the fleet file too).

    promtool evaluates every rule at every step, so tests load only the files they exercise.
    """
    output = generate([("test.yaml", slos)])
    names = []
    for name, text in output.files.items():
        (directory / name).write_text(text, encoding="utf-8")
        if name.endswith(RULES_SUFFIX) and (health or name != HEALTH_FILE):
            names.append(name)
    return sorted(names)


def run_promtool(directory: Path, rule_files: Sequence[str], tests: Sequence[Mapping[str, Any]],
                 evaluation_interval: str = "1m", name: str = "test.yaml") -> None:  # fmt: skip
    promtool = require_tool("promtool", "apt-get install prometheus")
    document = {
        "rule_files": list(rule_files),
        "evaluation_interval": evaluation_interval,
        "tests": list(tests),
    }
    path = directory / name
    path.write_text(yaml.safe_dump(document, sort_keys=False, width=1000), encoding="utf-8")
    result = subprocess.run(
        [promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, (
        f"promtool test rules failed:\n{result.stdout[-6000:]}{result.stderr[-2000:]}"
    )


# --------------------------------------------------------------------------------------------
# Prometheus template rendering (the subset the generated annotations use)
# --------------------------------------------------------------------------------------------

_PREFIXES_BIG = ("", "k", "M", "G", "T", "P", "E", "Z", "Y")
_PREFIXES_SMALL = ("", "m", "u", "n", "p", "f", "a", "z", "y")


def go_g4(v: float) -> str:
    """Go's ``%.4g`` (Python's agrees for finite values)."""
    return f"{v:.4g}"


def humanize(v: float) -> str:
    if v == 0 or math.isnan(v) or math.isinf(v):
        return go_g4(v)
    if abs(v) >= 1:
        i = 0
        while abs(v) >= 1000 and i < len(_PREFIXES_BIG) - 1:
            v, i = v / 1000, i + 1
        return f"{go_g4(v)}{_PREFIXES_BIG[i]}"
    i = 0
    while abs(v) < 1 and i < len(_PREFIXES_SMALL) - 1:
        v, i = v * 1000, i + 1
    return f"{go_g4(v)}{_PREFIXES_SMALL[i]}"


def humanize_duration(v: float) -> str:
    if abs(v) < 1:
        return f"{humanize(v)}s"
    sign = "-" if v < 0 else ""
    s = int(abs(v))
    days, hours, minutes, seconds = s // 86400, s // 3600 % 24, s // 60 % 60, s % 60
    if days:
        return f"{sign}{days}d {hours}h {minutes}m {seconds}s"
    if hours:
        return f"{sign}{hours}h {minutes}m {seconds}s"
    if minutes:
        return f"{sign}{minutes}m {seconds}s"
    return f"{sign}{go_g4(abs(v))}s"


def go_value(v: float) -> str:
    """``{{ $value }}``: Go's shortest float formatting (``4``, not ``4.0``)."""
    return str(int(v)) if v == int(v) and abs(v) < 1e21 else repr(v)


_FUNCS = {
    None: go_value,
    "humanize": humanize,
    "humanizePercentage": lambda v: f"{go_g4(v * 100)}%",
    "humanizeDuration": humanize_duration,
}
_TEMPLATE = re.compile(r"\{\{ \$(labels\.(\w+)|value)(?: \| (\w+))? \}\}")


def render(template: str, labels: Mapping[str, str], value: float) -> str:
    def one(match: re.Match[str]) -> str:
        if match.group(2):
            return labels.get(match.group(2), "")
        return _FUNCS[match.group(3)](value)

    return _TEMPLATE.sub(one, template)


def expected(alert: Alert, series: Mapping[str, str], value: float) -> dict[str, Any]:
    """One ``exp_alerts`` entry: the series' labels plus the rule's, annotations rendered."""
    labels = {**series, **alert.labels}
    annotations = {key: render(text, labels, value) for key, text in alert.to_dict()["annotations"].items()}
    return {"exp_labels": labels, "exp_annotations": annotations}
