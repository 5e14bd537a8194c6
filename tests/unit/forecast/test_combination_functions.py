"""``forecast.combination``: the candidates' weights, their mean and weighted quantile, by hand."""

from __future__ import annotations

import math

import pytest
from fleetslo.policy.forecast.combination import Skill, mean, quantile, weights


def test_weights_follow_skill_and_the_unscored_wait() -> None:
    skills = {"a": Skill(0.10, 50), "b": Skill(0.105, 50), "c": Skill(0.5, 3)}
    w = weights(skills, min_scored=12, temperature=0.05)
    assert set(w) == {"a", "b"}  # c has not been scored enough to weigh in
    assert w["a"] == 1.0 and w["b"] == pytest.approx(math.exp(-1))  # 5 % worse: e^-1
    assert weights({"a": Skill(), "b": Skill(0.2, 1)}, min_scored=12, temperature=0.05) == {
        "a": 1.0,
        "b": 1.0,
    }


def test_the_quantile_covers_the_highest_forecast_holding_the_tail_weight() -> None:
    found = {"a": 100.0, "b": 200.0, "c": 300.0}
    weight = {"a": 0.5, "b": 0.3, "c": 0.2}
    assert mean(found, weight) == pytest.approx(170.0)
    assert quantile(found, weight, 0.9) == 300.0  # c alone holds 0.2 >= 0.1
    assert quantile(found, weight, 0.75) == 200.0  # c's 0.2 < 0.25; with b, 0.5
    assert quantile(found, weight, 0.4) == 100.0
    assert quantile(found, {"a": 0.95, "b": 0.03, "c": 0.02}, 0.9) == 100.0  # a tail under 0.1
    assert quantile({"a": 5.0}, {"a": 1.0}, 0.9) == 5.0


def test_a_skill_is_a_plain_mean_while_few_are_scored_then_decays() -> None:
    s = Skill().scoring(0.2, decay=0.99).scoring(-0.4, decay=0.99)
    assert s == Skill(pytest.approx(0.3), 2)  # type: ignore[arg-type]
    many = Skill(0.1, 1000).scoring(1.1, decay=0.99)
    assert many.mae == pytest.approx(0.1 + 0.01 * 1.0) and many.scored == 1001
