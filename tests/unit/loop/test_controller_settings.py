"""``fleetslo run`` settings: defaults that work, errors that name key, value and rule."""

from __future__ import annotations

import pytest
from fleetslo.control.settings import ControllerSettings, SourceKind
from fleetslo.core.config import load
from fleetslo.core.errors import ConfigError


def test_defaults_are_client_go_election_and_prometheus() -> None:
    settings = load(ControllerSettings, {})
    le = settings.leader_election
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (15.0, 10.0, 2.0)
    assert settings.source.kind == SourceKind.PROMETHEUS and settings.dry_run is False
    assert settings.backoff == [1.0, 2.0, 5.0, 10.0, 30.0, 60.0]


def test_a_full_file_loads() -> None:
    settings = load(ControllerSettings, {
        "listen": "127.0.0.1:0", "interval": "2s", "policy": "hpa-util", "dry_run": True,
        "source": {"kind": "direct", "direct": {"port": 9400},
                   "prometheus": {"url": "https://thanos:10902/", "max_age": "2m"}},
        "kubernetes": {"in_cluster": False}, "engine_args": {"min_interval": "1h", "lasting": "15m"},
        "backoff": "1s,10s", "permanent_retry": "5m",
    })  # fmt: skip
    assert settings.source.prometheus.url == "https://thanos:10902"
    assert settings.source.prometheus.max_age == 120.0 and settings.engine_args.min_interval == 3600.0
    assert settings.backoff == [1.0, 10.0] and settings.kubernetes.in_cluster == "false"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"leader_election": {"lease_duration": "5s"}}, "renew_deadline (10s) < lease_duration (5s)"),
        ({"interval": "20m"}, "interval: must be between 100ms and 10m"),
        ({"source": {"prometheus": {"url": "prometheus:9090"}}}, "source.prometheus.url"),
        ({"leader_election": {"namespace": "Bad_NS"}}, "leader_election.namespace"),
        ({"listen": "nowhere"}, "listen"),
        ({"sourse": {}}, "sourse: unknown key"),
    ],
)
def test_bad_settings_name_the_key(data: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(ControllerSettings, data, "controller.yaml")
    assert message in str(caught.value) and "controller.yaml" in str(caught.value)
