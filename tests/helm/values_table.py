"""The values table of helm/fleetslo/README.md, generated from values.yaml and its ``# --`` comments.

``python -m tests.helm.values_table --write`` rewrites the table between the README's markers;
tests/helm/test_chart_docs.py fails while the README and values.yaml disagree.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import yaml

from tests.helm.chart import CHART

README = CHART / "README.md"
BEGIN, END = "<!-- values-table:begin -->", "<!-- values-table:end -->"
#: Maps documented as one value (their keys are free-form or a whole Kubernetes/controller object).
OPAQUE = {
    "commonLabels", "slos", "controller.config", "controller.resources", "controller.podAnnotations",
    "controller.podLabels", "controller.nodeSelector", "controller.affinity",
    "controller.serviceAccount.annotations", "sidecarPodSelector", "monitoring.labels",
    "monitoring.prometheusRule.ruleFiles", "monitoring.dashboards.labels",
    "monitoring.dashboards.annotations",
    "monitoring.alertmanager.config", "vllm.model.volume", "vllm.model.pvc.dataSource", "vllm.env",
    "vllm.resources", "vllm.cache.volume", "vllm.nodeSelector", "vllm.podAnnotations", "vllm.podLabels",
    "vllm.securityContext", "vllm.sidecar.resources",
}  # fmt: skip
_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][\w.-]*):")


def comments() -> dict[str, str]:
    """Each key path's ``# --`` comment (continued by the ``#`` lines after it)."""
    found: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    pending: list[str] = []
    collecting = False
    for line in (CHART / "values.yaml").read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if stripped.startswith("# --"):
            pending, collecting = [stripped[4:].strip()], True
            continue
        if stripped.startswith("#"):
            if collecting:
                pending.append(stripped[1:].strip())
            continue
        match = _KEY.match(line)
        if not match or stripped.startswith("-"):
            pending, collecting = [], False
            continue
        indent = len(match["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match["key"]))
        if pending:
            found[".".join(k for _, k in stack)] = " ".join(pending)
        pending, collecting = [], False
    return found


def rows(values: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and path not in OPAQUE:
            out += rows(value, f"{path}.")
        else:
            out.append((path, value))
    return out


def _default(path: str, value: Any) -> str:
    if path == "slos":
        return "the reference FleetSLO (Qwen3-235B, p90 TTFT ≤ 2 s, TPOT ≤ 50 ms)"
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    return f"`{text}`" if len(text) <= 60 else f"`{text[:57]}…`"


def table() -> str:
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    notes = comments()
    lines = ["| key | default | description |", "|---|---|---|"]
    for path, value in rows(values):
        lines.append(f"| `{path}` | {_default(path, value)} | {notes.get(path, '').replace('|', '/')} |")
    return "\n".join(lines)


def readme_with_table(text: str) -> str:
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return f"{text[:start]}\n{table()}\n{text[end:]}"


if __name__ == "__main__":
    if "--write" in sys.argv:
        README.write_text(readme_with_table(README.read_text(encoding="utf-8")), encoding="utf-8")
    else:
        print(table())
