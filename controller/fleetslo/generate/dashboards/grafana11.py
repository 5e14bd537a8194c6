"""Rewrite grafanalib's JSON into what Grafana 11 loads without migrations or warnings.

grafanalib 0.7 writes ``schemaVersion`` 12, legacy target fields (``intervalFactor: 2`` halves
the query resolution, ``step``, ``query``), Angular-era dashboard keys and many ``null`` fields;
Grafana 11 no longer accepts string datasources (grafana#91470) — ``panels`` already passes
``{type, uid}`` everywhere, and this module checks it. Pure dict → dict.
"""

from __future__ import annotations

from typing import Any

#: Grafana 11.0's dashboard schema: nothing older to migrate from.
SCHEMA_VERSION = 39
_DASHBOARD_DROP = ("rows", "style", "hideControls", "sharedCrosshair", "__inputs", "gnetId", "id")
_PANEL_DROP = ("span", "minSpan", "height", "error", "cacheTimeout", "hideTimeOverride", "maxPerRow",
               "repeatDirection", "repeat", "columns", "fontSize", "interval", "timeFrom", "timeShift",
               "editable", "maxDataPoints", "thresholds", "mappings", "color")  # fmt: skip
_TARGET_DROP = ("query", "target", "metric", "intervalFactor", "step", "interval")
_VARIABLE_DROP = ("tagsQuery", "tagValuesQuery", "useTags", "auto", "auto_min", "auto_count")
BUILTIN_ANNOTATION = {
    "builtIn": 1,
    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
    "enable": True,
    "hide": True,
    "iconColor": "rgba(0, 211, 255, 1)",
    "name": "Annotations & Alerts",
    "type": "dashboard",
}


def normalize(dashboard: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in dashboard.items() if k not in _DASHBOARD_DROP and v is not None}
    out["schemaVersion"] = SCHEMA_VERSION
    out["panels"] = [_panel(p) for p in dashboard["panels"]]
    out["templating"] = {"list": [_variable(v) for v in dashboard["templating"]["list"]]}
    out["annotations"] = {"list": [BUILTIN_ANNOTATION, *dashboard["annotations"]["list"]]}
    return out


def _panel(panel: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in panel.items() if k not in _PANEL_DROP and v is not None}
    if out["type"] == "row":
        out.pop("datasource", None)
        out["panels"] = [_panel(p) for p in panel.get("panels", [])]
        return out
    out["targets"] = [_target(t) for t in panel["targets"]]
    defaults = out["fieldConfig"]["defaults"]
    defaults.update({k: v for k, v in defaults.items() if v is not None})
    for key in [k for k, v in defaults.items() if v is None]:
        del defaults[key]
    custom = defaults.get("custom", {})
    for key in [k for k, v in custom.items() if v is None]:
        del custom[key]
    steps = defaults.get("thresholds", {}).get("steps") or [{"color": "green", "value": None}]
    defaults["thresholds"] = {"mode": "absolute", "steps": steps}
    if out["type"] == "stat":
        defaults["color"] = {"mode": "thresholds"}
    return out


def _target(target: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in target.items() if k not in _TARGET_DROP}
    out["editorMode"] = "code"
    out["range"] = not target.get("instant", False)
    return out


def _variable(variable: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in variable.items() if k not in _VARIABLE_DROP and v is not None}
    current = out.get("current") or {}
    if current.get("value") == "$__all":
        out["current"] = {"selected": True, "text": ["All"], "value": ["$__all"]}
    elif current.get("value") is None:
        out.pop("current", None)  # Grafana picks the first option (the default datasource)
    return out


def datasource_refs(node: Any) -> list[Any]:
    """Every ``datasource`` value anywhere in the dashboard (tests check each is a ``{type, uid}``)."""
    found: list[Any] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "datasource":
                found.append(value)
            found.extend(datasource_refs(value))
    elif isinstance(node, list):
        for item in node:
            found.extend(datasource_refs(item))
    return found
