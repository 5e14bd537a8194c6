"""``spec.profile`` seeds the capacity model's prior in ``fleetslo run``; ``spec.forecast.events``
reach the seasonal forecaster; a missing or broken profile is a config error at start."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fleetslo.cli import main
from fleetslo.cli.control import STATE_FILE, default_state_file, read_profile
from fleetslo.control.resources import load_resources
from fleetslo.control.service import Environment, make_policy_for
from fleetslo.control.settings import ControllerSettings
from fleetslo.control.watch import refuse_unreadable_profiles
from fleetslo.core.config import load
from fleetslo.core.errors import ConfigError
from fleetslo.core.spec import RESOURCE_API_VERSION
from fleetslo.policy.base import Carried, LoadSample
from fleetslo.policy.fleetslo import FleetSLOPolicy
from fleetslo.policy.fleetslo.physics import CONSERVATIVE_PRIOR, StepCost
from fleetslo.policy.forecast import KnownEvent
from fleetslo.sim.profile import builtin_profile

from tests.loop_support import make_slo
from tests.support import ROOT

PROFILE = "mi325x-qwen3-235b-fp8-tp4"
SETTINGS = load(ControllerSettings, {}, "settings")
ENV = Environment(in_pod=False, identity="test", profiles=read_profile)
LAUNCH = {"name": "launch", "start": "2026-12-01T18:00:00Z", "duration": "1h", "rate_factor": 2.5}
AT = 1_796_148_000.0  # 2026-12-01T18:00:00Z


def prior_of(slo_profile: str | None) -> StepCost:
    slo = make_slo(**({"profile": slo_profile} if slo_profile else {}))
    policy = make_policy_for(slo, SETTINGS, ENV)
    assert isinstance(policy, FleetSLOPolicy)
    return policy.initial_state(slo.spec).model.prior


def test_a_packaged_profile_seeds_the_prior() -> None:
    prior = prior_of(PROFILE)
    step = builtin_profile(PROFILE).step_time
    assert prior.source == f"engine profile {PROFILE}"
    assert prior.overhead_s == step.overhead_s and prior.per_kv_token_s == step.per_kv_token_s
    assert prior_of(None) is CONSERVATIVE_PRIOR  # no profile: the conservative prior, and it says so


def test_a_profile_file_seeds_the_prior(tmp_path: Path) -> None:
    data = builtin_profile(PROFILE).model_dump(mode="json")
    data["name"], data["step_time"]["overhead_s"] = "measured-here", 0.0123
    path = tmp_path / "measured.yaml"  # what `fleetslo profile --out` writes: a profile document
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    prior = prior_of(str(path))
    assert prior.overhead_s == 0.0123 and prior.source == "engine profile measured-here"


@pytest.mark.parametrize(
    ("profile", "message"),
    [("no-such-profile", "unknown profile 'no-such-profile'"), ("missing.yaml", "cannot read")],
)
def test_a_missing_profile_is_a_config_error_naming_the_fleetslo(profile: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        make_policy_for(make_slo("qwen", profile=profile), SETTINGS, ENV)
    assert "FleetSLO qwen: spec.profile" in str(raised.value)


def test_a_broken_profile_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("name: half\nstep_time: {overhead_s: -1}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"broken\.yaml"):
        make_policy_for(make_slo("qwen", profile=str(path)), SETTINGS, ENV)


def test_fleetslo_run_stops_with_exit_2_on_a_bad_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = yaml.safe_load((ROOT / "examples" / "slo" / "llama-8b-small.yaml").read_text(encoding="utf-8"))
    spec["spec"]["profile"] = "no-such-profile"
    slo = tmp_path / "slo.yaml"
    slo.write_text(yaml.safe_dump(spec), encoding="utf-8")
    # no cluster is reachable here: the profile is checked before anything connects
    assert main(["run", "--slo", str(slo)]) == 2
    err = capsys.readouterr().err
    assert "FleetSLO llama-8b: spec.profile" in err and "unknown profile" in err


def test_a_resource_with_an_unreadable_profile_is_not_held() -> None:
    def resource(name: str, profile: str) -> dict[str, object]:
        return {
            "apiVersion": RESOURCE_API_VERSION, "kind": "FleetSLO",
            "metadata": {"name": name, "namespace": "infer"},
            "spec": {"target": {"name": name, "model_name": "m"}, "profile": profile,
                     "objectives": {"ttft": {"threshold": "2s"}, "tpot": {"threshold": "50ms"}},
                     "replicas": {"max": 4}},
        }  # fmt: skip

    loaded = load_resources([resource("good", PROFILE), resource("bad", "no-such-profile")])
    refuse_unreadable_profiles(loaded, ENV)
    assert [h.slo.metadata.name for h in loaded.held] == ["good"]
    assert "spec.profile" in loaded.invalid["infer", "bad"]  # its status will say why (InvalidSpec)


def test_the_state_file_defaults_next_to_the_config(tmp_path: Path) -> None:
    config, slo = tmp_path / "etc" / "controller.yaml", tmp_path / "specs" / "slo.yaml"
    assert default_state_file(None, str(config), str(slo)) == config.parent / STATE_FILE
    assert default_state_file(None, None, str(slo)) == slo.parent / STATE_FILE
    assert default_state_file("/var/lib/x.json", str(config), None) == Path("/var/lib/x.json")


# --- known events ---------------------------------------------------------------------------


def test_the_spec_s_events_reach_the_seasonal_forecaster() -> None:
    end = {**LAUNCH, "duration": None, "end": "2026-12-01T19:30:00+01:00"}  # 18:30 UTC
    del end["duration"]
    slo = make_slo(forecast={"events": [LAUNCH, end]})
    state = FleetSLOPolicy().initial_state(slo.spec)
    assert state.forecast.seasonal is not None
    assert state.forecast.seasonal.events == (
        KnownEvent(AT, AT + 3600.0, 2.5),
        KnownEvent(AT, AT + 1800.0, 2.5),
    )


def test_a_known_event_lifts_the_forecast_over_its_window() -> None:
    """Two flat days in the metrics store, then the launch: the rate expected during the hour of
    the launch is 2.5x the usual, and the usual outside it."""
    policy = FleetSLOPolicy()
    slo = make_slo(forecast={"events": [LAUNCH]})
    history = [LoadSample(AT - 2 * 86_400 + k * 300.0, 10.0, 10_000.0) for k in range(2 * 288 - 12)]
    state, restored = policy.restore(policy.initial_state(slo.spec), slo.spec, Carried(None, history))
    assert restored.history_used == len(history)
    now = AT - 600.0  # ten minutes before the launch
    forecast = state.forecast.update(now, 10_000.0, 600.0)
    assert forecast.seasonal_ahead(900.0) == pytest.approx(25_000.0, rel=0.02)  # 18:05, in the launch
    assert forecast.seasonal_ahead(300.0) == pytest.approx(10_000.0, rel=0.02)  # 17:55, before it
    plain = policy.restore(policy.initial_state(make_slo().spec), slo.spec, Carried(None, history))[0]
    assert plain.forecast.update(now, 10_000.0, 600.0).seasonal_ahead(900.0) == pytest.approx(
        10_000.0, rel=0.02
    )
