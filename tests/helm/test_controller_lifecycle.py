"""The controller pod's grace period outlasts the reconcile it may be finishing (defect 4, issue 15).

A stopped controller waits for its running reconciles, and one of them may be waiting on a drain:
with 30 s of grace against a 60 s drain timeout the kubelet killed it mid-drain and the drained
gate was never resumed.
"""

from __future__ import annotations

import pytest

from tests.helm.chart import one, render


def grace(*args: str) -> int:
    spec = one(render(*args), "Deployment", "fleetslo-controller")["spec"]["template"]["spec"]
    return int(spec["terminationGracePeriodSeconds"])


@pytest.mark.parametrize(
    ("config", "drain", "budget"),
    [(None, 60, 20), ('{"gate": {"drain_timeout": "2m"}, "kubernetes": {"api_budget": "30s"}}', 120, 30),
     ('{"gate": {"drain_timeout": 90}}', 90, 20)],
)  # fmt: skip
def test_the_grace_period_outlasts_a_drain_and_the_scale_write_after_it(
    config: str | None, drain: int, budget: int
) -> None:
    args = () if config is None else ("--set-json", f"controller.config={config}")
    assert grace(*args) > drain + budget
