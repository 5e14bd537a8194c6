"""The generated artifacts: committed for the example specs and drift-tested, every alert named
in conventions with the labels and annotations operators rely on, every recorded name declared,
and the CLI's write / --check / warning behaviour."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml
from fleetslo.cli import main, read_yaml_documents
from fleetslo.core import conventions as cv
from fleetslo.core.errors import ConfigError
from fleetslo.core.spec import load_fleetslo_documents
from fleetslo.generate.alerts.build import ALERTMANAGER_FILE, HEALTH_FILE, RUNBOOKS_FILE, generate
from fleetslo.generate.alerts.health_rules import health_group
from fleetslo.generate.alerts.spec import target_spec
from fleetslo.generate.alerts.target_rules import target_group

from tests.support import ROOT
from tests.unit.alerts import test_promtool_burn, test_promtool_health
from tests.unit.alerts.promtool_support import spec, spec_document

EXAMPLES = sorted((ROOT / "examples" / "slo").glob("*.yaml"))
GENERATED = ROOT / "alerts" / "generated"
#: Alerts whose value is a constant by construction (down = 0, absent = 1): no value to show.
CONSTANT_VALUE = {cv.AlertName.VLLM_TARGET_DOWN, cv.AlertName.ENGINE_DOWN, cv.AlertName.SIDECAR_DOWN,
                  cv.AlertName.MODEL_NOT_SCRAPED, cv.AlertName.CONTROLLER_NO_LEADER,
                  cv.AlertName.GPU_COLLECTOR_DOWN}  # fmt: skip


def build_args(*extra: str) -> list[str]:
    args = ["alerts", "build"]
    for path in EXAMPLES:
        args += ["--slo", str(path.relative_to(ROOT))]
    return [*args, *extra]


def all_alerts() -> list:  # type: ignore[type-arg]
    slos = [
        s for path in EXAMPLES for s in load_fleetslo_documents(read_yaml_documents(str(path)), path.name)
    ]
    return [*health_group().alerts(), *(a for s in slos for a in target_group(target_spec(s)).alerts())]


def test_examples_exist_and_load() -> None:
    assert [p.name for p in EXAMPLES] == ["llama-8b-small.yaml", "qwen3-235b-fp8-mi325x.yaml"]


def test_committed_rules_match_the_examples(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert main(build_args("--check")) == 0, (
        "alerts/generated drifted: run `fleetslo alerts build` (see README)"
    )


def test_check_reports_drift_and_build_repairs_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.chdir(ROOT)
    out = tmp_path / "gen"
    shutil.copytree(GENERATED, out)
    (out / HEALTH_FILE).write_text("groups: []\n")
    (out / "stale.rules.yaml").write_text("groups: []\n")
    assert main(build_args("--out", str(out), "--check")) == 1
    err = capsys.readouterr().err
    assert f"{HEALTH_FILE}: differs" in err and "stale.rules.yaml: not generated" in err
    assert main(build_args("--out", str(out))) == 0
    assert main(build_args("--out", str(out), "--check")) == 0
    assert not (out / "stale.rules.yaml").exists()


def test_build_warns_when_a_threshold_is_not_a_bucket_edge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec_document(ttft={"threshold": "2s"})))
    assert main(["alerts", "build", "--slo", str(path), "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert (
        "warning: m-slo ttft: threshold 2s is not a bucket edge" in err
        and "--custom-histogram-buckets" in err
    )
    text = (tmp_path / "out" / "m-slo.rules.yaml").read_text()
    assert "# WARNING m-slo ttft" in text
    # vLLM's histogram counts at its edge below; the gate's SLO-aligned one at the threshold itself.
    assert 'vllm:time_to_first_token_seconds_bucket{namespace="llm", model_name="m", le="1.0"' in text
    assert 'vllm:time_to_first_token_seconds_bucket{namespace="llm", model_name="m", le="2.0"' not in text
    assert 'fleetslo_gate_ttft_seconds_bucket{namespace="llm", le="2.0"' in text


def test_a_bad_spec_exits_2_naming_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec_document(tpot={"threshold": "1ms"})))
    assert main(["alerts", "build", "--slo", str(path), "--out", str(tmp_path)]) == 2
    assert "spec.objectives.tpot.threshold" in capsys.readouterr().err


def test_two_workloads_of_one_model_are_two_slos_but_one_workload_has_one_spec() -> None:
    canary = spec_document()
    canary["metadata"]["name"] = "canary"
    canary["spec"]["target"]["name"] = "m-canary"
    output = generate([("x", load_fleetslo_documents([spec_document(), canary], "x"))])
    assert {"m-slo.rules.yaml", "canary.rules.yaml"} <= set(output.files)
    again = spec_document()
    again["metadata"]["name"] = "again"
    with pytest.raises(ConfigError, match="Deployment llm/m-deploy"):
        generate([("x", load_fleetslo_documents([spec_document(), again], "x"))])


def test_every_alert_name_is_generated_and_proven_by_promtool() -> None:
    generated = {a.alert for a in all_alerts()}
    assert generated == set(cv.AlertName)
    fired = {c.alert for c in [*test_promtool_health.HEALTH_CASES, *test_promtool_health.TARGET_CASES]
             if any(firing for _, firing in c.checks)}  # fmt: skip
    fired |= {cv.AlertName.TTFT_BUDGET_BURN, cv.AlertName.TPOT_BUDGET_BURN}  # test_promtool_burn
    assert fired == set(cv.AlertName)
    assert test_promtool_burn.TTFT == cv.AlertName.TTFT_BUDGET_BURN


def test_every_alert_has_severity_annotations_and_the_value() -> None:
    for a in all_alerts():
        assert a.labels[cv.LABEL_SEVERITY] in (cv.SEVERITY_PAGE, cv.SEVERITY_TICKET), a.alert
        assert a.summary and a.description and a.runbook, a.alert
        if a.alert not in CONSTANT_VALUE:
            assert "$value" in a.description or "$value" in a.summary, a.alert
        if a.alert in (
            cv.AlertName.TTFT_BUDGET_BURN,
            cv.AlertName.TPOT_BUDGET_BURN,
            cv.AlertName.SLO_BUCKET_MISSING,
        ):
            assert a.labels[cv.LABEL_SLO] in ("ttft", "tpot") and a.labels[cv.MODEL_LABEL], a.alert


def test_per_target_alerts_carry_the_target_and_name_the_model() -> None:
    for a in target_group(target_spec(spec())).alerts():
        assert a.labels[cv.MODEL_LABEL] == "m", a.alert
        assert (a.labels[cv.LABEL_NAMESPACE], a.labels[cv.LABEL_WORKLOAD]) == ("llm", "m-deploy"), a.alert
        assert a.summary.startswith("m (llm/m-deploy): "), a.alert


def test_every_alert_links_its_runbook_section() -> None:
    output = generate([("x.yaml", [spec()])])
    headings = {line[3:] for line in output.files[RUNBOOKS_FILE].splitlines() if line.startswith("## ")}
    for a in all_alerts():
        url = a.to_dict()["annotations"]["runbook_url"]
        path, anchor = url.split("#")
        assert path == "alerts/generated/runbooks.md" and anchor == a.alert.value.lower(), a.alert
        assert a.alert.value in headings, a.alert


def test_every_recorded_name_is_declared_in_conventions() -> None:
    declared = {v for k, v in vars(cv).items() if k.startswith("RULE_")}
    dynamic = re.compile(r"^fleetslo:slo_(error_ratio|requests|good):rate\d+[mhd]$")
    groups = [health_group(), target_group(target_spec(spec()))]
    recorded = {r.record for g in groups for r in g.recordings()}
    assert {r for r in recorded if not dynamic.match(r)} <= declared
    assert declared <= recorded


def test_files_parse_and_alertmanager_config_is_complete() -> None:
    output = generate([("x.yaml", [spec()])])
    for name, text in output.files.items():
        if name == RUNBOOKS_FILE:
            assert text.startswith("<!-- Generated by `fleetslo alerts build`"), name
            continue
        assert text.startswith("# Generated by `fleetslo alerts build`"), name
        yaml.safe_load(text)
    am = yaml.safe_load(output.files[ALERTMANAGER_FILE])
    assert {r["name"] for r in am["receivers"]} == {"fleetslo-default", "fleetslo-page", "fleetslo-ticket"}
