"""The chart's README documents every value: its table is generated from values.yaml."""

from __future__ import annotations

from tests.helm.values_table import README, readme_with_table


def test_readme_values_table_matches_values_yaml() -> None:
    text = README.read_text(encoding="utf-8")
    assert text == readme_with_table(text), (
        "helm/fleetslo/README.md's values table is stale: "
        "run `.venv/bin/python -m tests.helm.values_table --write`"
    )
