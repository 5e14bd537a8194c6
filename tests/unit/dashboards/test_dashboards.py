"""The committed dashboards: drift-tested, Grafana 11 shaped (``{type, uid}`` datasources through
the ``$datasource`` variable, schema 39, no legacy target fields), every panel with a unit and a
description, laid out without overlaps, with namespace and model variables, and every query
valid PromQL for promtool."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from fleetslo.cli import main
from fleetslo.generate.dashboards.build import dashboards, generate
from fleetslo.generate.dashboards.grafana11 import SCHEMA_VERSION, datasource_refs

from tests.support import ROOT, require_tool
from tests.unit.dashboards.catalog import _panels, dashboard_queries, variable_selectors

GENERATED = ROOT / "dashboards" / "generated"
UIDS = {"fleetslo-fleet", "fleetslo-gpu", "fleetslo-controller"}
PROMETHEUS_DS = {"type": "prometheus", "uid": "${datasource}"}


def all_dashboards() -> dict[str, dict[str, Any]]:
    return dashboards()


def test_committed_json_matches_the_builders(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["dashboards", "build", "--check"]) == 0, "run `fleetslo dashboards build` and commit"


def test_check_fails_on_a_hand_edit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "d"
    assert main(["dashboards", "build", "--out", str(out)]) == 0
    path = out / "fleetslo-gpu.json"
    path.write_text(path.read_text().replace('"GPUs reporting"', '"GPUs"'))
    assert main(["dashboards", "build", "--out", str(out), "--check"]) == 1
    assert "fleetslo-gpu.json: differs" in capsys.readouterr().err


def test_json_is_sorted_and_stable() -> None:
    files = generate()
    assert set(files) == {f"{uid}.json" for uid in UIDS}
    for text in files.values():
        assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"
    assert generate() == files


def test_every_datasource_is_a_type_uid_reference_to_the_variable() -> None:
    for uid, d in all_dashboards().items():
        refs = datasource_refs(d)
        assert refs, uid
        for ref in refs:
            assert isinstance(ref, dict), f"{uid}: string datasource {ref!r} (Grafana 11 rejects it)"
            assert ref == PROMETHEUS_DS or ref["type"] == "grafana", f"{uid}: {ref}"
        names = [v["name"] for v in d["templating"]["list"]]
        assert names[0] == "datasource" and d["templating"]["list"][0]["type"] == "datasource"


def test_grafana_11_shape() -> None:
    for uid, d in all_dashboards().items():
        assert d["schemaVersion"] == SCHEMA_VERSION and d["uid"] == uid
        assert not {"rows", "style", "sharedCrosshair", "hideControls"} & set(d)
        for panel in _panels(d["panels"]):
            assert panel["type"] in ("row", "timeseries", "stat", "table"), panel["type"]
            for target in panel.get("targets", []):
                assert not {"intervalFactor", "step", "query", "target"} & set(target), (uid, panel["title"])
                assert target["range"] is not target["instant"]


def test_every_panel_has_a_unit_a_description_and_distinct_ref_ids() -> None:
    for uid, d in all_dashboards().items():
        ids = [p["id"] for p in _panels(d["panels"])]
        assert len(ids) == len(set(ids)), uid
        for panel in _panels(d["panels"]):
            if panel["type"] == "row":
                continue
            where = f"{uid} / {panel['title']}"
            assert panel["fieldConfig"]["defaults"].get("unit"), f"{where}: no unit"
            assert panel.get("description"), f"{where}: no description"
            refs = [t["refId"] for t in panel["targets"]]
            assert refs and len(refs) == len(set(refs)), where


def test_panels_sit_on_the_grid_without_overlapping() -> None:
    for uid, d in all_dashboards().items():
        taken: set[tuple[int, int]] = set()
        for panel in d["panels"]:
            pos = panel["gridPos"]
            assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, (uid, panel["title"])
            cells = {
                (x, y)
                for x in range(pos["x"], pos["x"] + pos["w"])
                for y in range(pos["y"], pos["y"] + pos["h"])
            }
            assert not cells & taken, (uid, panel["title"])
            taken |= cells


def test_namespace_and_model_variables_filter_the_fleet_panels() -> None:
    fleet = all_dashboards()["fleetslo-fleet"]
    variables = {v["name"]: v for v in fleet["templating"]["list"]}
    assert {"datasource", "namespace", "model", "quantile"} <= set(variables)
    for name in ("namespace", "model"):
        assert variables[name]["includeAll"] and variables[name]["allValue"] == ".*"
    exprs = [q.expr for q in dashboard_queries() if q.where.startswith("fleetslo-fleet / ")]
    assert all("$model" in e for e in exprs if "vllm:" in e or "fleetslo:slo" in e)


def test_controller_decisions_are_annotations_on_the_fleet_dashboard() -> None:
    annotations = all_dashboards()["fleetslo-fleet"]["annotations"]["list"]
    decisions = [a for a in annotations if a.get("name") == "Controller decisions"]
    assert decisions and "fleetslo_controller_decisions_total" in decisions[0]["expr"]
    assert decisions[0]["datasource"] == PROMETHEUS_DS and "{{reason}}" in decisions[0]["titleFormat"]


@pytest.mark.integration
def test_every_query_is_valid_promql(tmp_path: Path) -> None:
    """promtool parses each query (variables substituted) as the expression of a recording rule."""
    queries = [*dashboard_queries(), *variable_selectors()]
    rules = [{"record": f"fleetslo_parse_check_{i}", "expr": q.promql()} for i, q in enumerate(queries)]
    path = tmp_path / "parse.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "parse", "rules": rules}]}))
    promtool = require_tool("promtool", "apt-get install prometheus")
    result = subprocess.run(
        [promtool, "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules)} rules found" in result.stdout
