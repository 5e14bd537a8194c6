"""``alerts build`` and ``dashboards build`` own only what they generate (the folder's manifest,
``.fleetslo-generated``): a user's own files beside them are never removed or overwritten, and
``--check`` compares the whole generated set, so the committed folders stay drift-tested."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fleetslo.cli import main
from fleetslo.generate.alerts.build import MANIFEST

from tests.support import ROOT

EXAMPLES = sorted((ROOT / "examples" / "slo").glob("*.yaml"))
LLAMA = ROOT / "examples" / "slo" / "llama-8b-small.yaml"


def alerts(*extra: str, specs: list[Path] = EXAMPLES) -> list[str]:
    return ["alerts", "build", *(a for spec in specs for a in ("--slo", str(spec))), *extra]


def test_dashboards_build_leaves_a_users_dashboard_alone(tmp_path: Path) -> None:
    mine = tmp_path / "node-exporter-full.json"
    mine.write_text('{"title": "mine"}\n')
    assert main(["dashboards", "build", "--out", str(tmp_path)]) == 0
    assert main(["dashboards", "build", "--out", str(tmp_path)]) == 0
    assert mine.read_text() == '{"title": "mine"}\n'
    assert main(["dashboards", "build", "--out", str(tmp_path), "--check"]) == 0, "a user's file is no drift"
    assert "node-exporter-full.json" not in (tmp_path / MANIFEST).read_text()


def test_alerts_build_never_overwrites_or_removes_a_users_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules, routing = tmp_path / "my-team.rules.yaml", tmp_path / "alertmanager.yaml"
    rules.write_text("groups: [{name: my-team, rules: []}]\n")
    routing.write_text("route: {receiver: my-pager}\n")
    assert main(alerts("--out", str(tmp_path))) == 1
    assert "alertmanager.yaml exists and was not written by fleetslo" in capsys.readouterr().err
    assert routing.read_text() == "route: {receiver: my-pager}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alertmanager.yaml", "my-team.rules.yaml"]
    routing.rename(tmp_path / "my-alertmanager.yaml")
    assert main(alerts("--out", str(tmp_path))) == 0
    assert main(alerts("--out", str(tmp_path), specs=[LLAMA])) == 0  # fewer specs: their files go
    assert rules.read_text() == "groups: [{name: my-team, rules: []}]\n"
    assert (tmp_path / "my-alertmanager.yaml").exists()
    assert not (tmp_path / "qwen3-235b.rules.yaml").exists()
    assert "removed" in capsys.readouterr().out


def test_a_build_with_fewer_specs_is_drift_for_the_whole_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's one-spec command run into the committed folder: the check of the whole
    example set must fail (it passed before, with a file silently gone)."""
    out = tmp_path / "generated"
    shutil.copytree(ROOT / "alerts" / "generated", out)
    assert main(alerts("--out", str(out), "--check")) == 0
    assert main(alerts("--out", str(out), specs=[LLAMA])) == 0
    assert main(alerts("--out", str(out), "--check")) == 1
    assert "qwen3-235b.rules.yaml: missing" in capsys.readouterr().err
    assert main(alerts("--out", str(out))) == 0
    assert main(alerts("--out", str(out), "--check")) == 0


def test_a_stale_file_edited_by_hand_is_kept_and_a_missing_manifest_is_drift(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(alerts("--out", str(tmp_path))) == 0
    (tmp_path / "qwen3-235b.rules.yaml").write_text("# my notes\n")
    assert main(alerts("--out", str(tmp_path), specs=[LLAMA])) == 0
    assert (tmp_path / "qwen3-235b.rules.yaml").read_text() == "# my notes\n"
    assert "edited since" in capsys.readouterr().err
    (tmp_path / MANIFEST).unlink()
    assert main(alerts("--out", str(tmp_path), "--check", specs=[LLAMA])) == 1
    assert f"{MANIFEST}: missing" in capsys.readouterr().err
