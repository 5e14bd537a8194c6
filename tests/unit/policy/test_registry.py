"""The policy registry: names, option routing, errors people can act on, the oracle hook."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest
from fleetslo.core.errors import ConfigError
from fleetslo.policy.baselines import HpaRunningPolicy, KedaWaitingPolicy, StaticPolicy
from fleetslo.policy.registry import OPTIONS, POLICIES, check_options, describe, make_policy


def test_names_and_summaries() -> None:
    assert POLICIES == ("static", "hpa-util", "hpa-running", "keda-waiting", "llmd-slo", "fleetslo", "oracle")
    assert set(describe()) == set(POLICIES)


@pytest.mark.parametrize("name", [n for n in POLICIES if n != "oracle"])
def test_every_baseline_builds_with_defaults_and_its_name(name: str, spec) -> None:  # type: ignore[no-untyped-def]
    policy = make_policy(name, spec)
    assert policy.name == name
    assert policy.interval > 0


def test_options_are_routed_and_irrelevant_ones_ignored(spec) -> None:  # type: ignore[no-untyped-def]
    shared: dict[str, Any] = {"max_num_seqs": 64, "replicas": 3, "waiting_threshold": 2.0, "schedule": None}
    static = make_policy("static", spec, **shared)
    running = make_policy("hpa-running", spec, **shared)
    keda = make_policy("keda-waiting", spec, **shared)
    assert isinstance(static, StaticPolicy) and static.replicas == 3
    assert isinstance(running, HpaRunningPolicy) and running.target(spec) == pytest.approx(0.8 * 64)
    assert isinstance(keda, KedaWaitingPolicy) and keda.threshold == 2.0
    assert make_policy("llmd-slo", spec, **shared).name == "llmd-slo"


def test_unknown_policy_lists_the_valid_ones(spec) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError) as info:
        make_policy("hpa-cpu", spec)
    assert "'hpa-cpu'" in str(info.value)
    assert all(name in str(info.value) for name in POLICIES)


def test_unknown_option_is_an_error_not_ignored(spec) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match=r"unknown option.*max_num_seq\b"):
        make_policy("static", spec, max_num_seq=64)
    assert "max_num_seqs" in OPTIONS


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("static", {"replicas": -1}),
        ("hpa-util", {"target_utilization": 1.5}),
        ("hpa-running", {"target_fraction": 0}),
        ("keda-waiting", {"waiting_threshold": 0}),
    ],
)
def test_bad_option_values(name: str, options: dict[str, Any], spec) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match=name):
        make_policy(name, spec, **options)


def test_oracle_needs_a_schedule(spec) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match="precomputed schedule"):
        make_policy("oracle", spec)


def test_oracle_hook_builds_the_simulators_class(spec, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    fake = types.ModuleType("fleetslo.policy.oracle")

    class OraclePolicy:
        name = "oracle"
        interval = 15.0

        def __init__(self, schedule: object) -> None:
            self.schedule = schedule

    fake.OraclePolicy = OraclePolicy  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fleetslo.policy.oracle", fake)
    policy = make_policy("oracle", spec, schedule=[(0.0, 3)], max_num_seqs=64)
    assert isinstance(policy, OraclePolicy) and policy.schedule == [(0.0, 3)]


def test_every_fleetslo_tunable_is_an_option(spec) -> None:  # type: ignore[no-untyped-def]
    from fleetslo.policy.fleetslo import FleetSLOPolicy

    policy = make_policy("fleetslo", spec, headroom=0.2, hysteresis=0.05, min_scale_down=0.1, replicas=3)
    assert isinstance(policy, FleetSLOPolicy)
    assert (policy.config.headroom, policy.config.hysteresis, policy.config.min_scale_down) == (
        0.2,
        0.05,
        0.1,
    )
    assert "behavior" not in OPTIONS  # a structure, not a number to pass on a command line
    with pytest.raises(ConfigError, match="fleetslo: bad option value"):
        make_policy("fleetslo", spec, headroom="lots")


def test_check_options_holds_one_chosen_policy_to_its_own_options() -> None:
    check_options("fleetslo", {"headroom": 0.2})
    with pytest.raises(
        ConfigError, match=r"policy fleetslo: unknown option\(s\) replicas; it takes: .*headroom"
    ):
        check_options("fleetslo", {"replicas": 3})  # another policy's option: a mistake here
    with pytest.raises(ConfigError, match="unknown policy 'hpa-cpu'"):
        check_options("hpa-cpu", {})
