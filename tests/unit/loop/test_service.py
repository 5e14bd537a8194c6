"""``fleetslo run`` as a process part: scheduler ticks, health and metrics endpoints, shutdown, CLI errors."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from fleetslo.cli import main
from fleetslo.control.actuators.catalog import Wiring, make_gate
from fleetslo.control.actuators.fleet import FleetActuator
from fleetslo.control.actuators.wrappers import (
    DryRunReplicas,
    MeasuredBatchLimit,
    MeasuredDrainer,
    MeasuredReplicas,
)
from fleetslo.control.audit import Auditor
from fleetslo.control.instruments import ControllerMetrics
from fleetslo.control.kube.workloads import Workloads
from fleetslo.control.leader import AlwaysLeader
from fleetslo.control.loop import Binding, Controller
from fleetslo.control.service import (
    Actuators,
    Environment,
    Running,
    Service,
    make_fleet,
    make_source,
    make_tracer,
)
from fleetslo.control.settings import ControllerSettings
from fleetslo.control.sources.prometheus import PrometheusSource
from fleetslo.core.config import load
from fleetslo.core.errors import ConfigError
from fleetslo.core.spec import BatchActuator
from fleetslo.policy.registry import make_policy
from fleetslo.testing import FakePodDirectory, FakeReplicaActuator, FakeSource

from tests.loop_support import make_slo


def wait_for(url: str, status: int = 200, timeout: float = 5.0) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while True:
        response = httpx.get(url, timeout=1.0)
        if response.status_code == status or time.monotonic() > deadline:
            return response
        time.sleep(0.05)


def test_the_service_ticks_every_target_and_serves_health_and_metrics() -> None:
    settings = load(ControllerSettings, {"listen": "127.0.0.1:0", "interval": "200ms", "policy": "static"})
    slos = [make_slo("a", replicas=(2, 5)), make_slo("b", replicas=(3, 5))]
    metrics, workload = ControllerMetrics(), FakeReplicaActuator(initial=1)
    bindings = [
        Binding(s, make_policy("static", s.spec), FakeSource(), FleetActuator(workload)) for s in slos
    ]
    controller = Controller(bindings, Auditor(metrics), leader=AlwaysLeader())
    service = Service(Running(controller, metrics, None), settings).start()
    try:
        base = f"http://127.0.0.1:{service.port}"
        assert wait_for(f"{base}/readyz").status_code == 200
        assert httpx.get(f"{base}/healthz").status_code == 200
        page = httpx.get(f"{base}/metrics").text
        assert 'fleetslo_controller_decisions_total{reason="FixedSize",target="a"}' in page
        assert "fleetslo_controller_leader 1.0" in page
        assert httpx.get(f"{base}/nope").status_code == 404
    finally:
        service.stop()
    assert sorted(workload.writes) == [("infer/a", 2), ("infer/b", 3)]


def test_advisory_targets_get_dry_run_actuators_inside_the_measured_ones() -> None:
    metrics, actuators = ControllerMetrics(), Actuators(FakeReplicaActuator())
    advisory = make_fleet(make_slo("a", mode="advisory"), actuators, metrics, dry_run=False, drain=True)
    enforced = make_fleet(make_slo("b"), actuators, metrics, dry_run=False, drain=True)
    assert isinstance(advisory.replicas, MeasuredReplicas) and isinstance(
        advisory.replicas.inner, DryRunReplicas
    )
    assert isinstance(enforced.replicas, MeasuredReplicas) and isinstance(
        enforced.replicas.inner, FakeReplicaActuator
    )
    assert enforced.drainer is None  # no gate: nothing can drain, scale-downs are plain


@pytest.fixture
def keep_log_handlers() -> Iterator[None]:
    """``main`` installs a JSON handler on the root logger's current stderr; put the old ones back."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:], root.level = handlers, level


@pytest.mark.usefixtures("keep_log_handlers")
def test_a_gate_target_drains_through_the_gate_and_needs_its_token() -> None:
    settings = load(ControllerSettings, {})

    def wiring(token: str | None) -> Wiring:
        return Wiring(settings, Workloads(None), FakePodDirectory(), token, "t")  # type: ignore[arg-type]

    with pytest.raises(ConfigError, match=r"gate.token_file"):
        make_gate(wiring(None))
    gate = make_gate(wiring("tok"))
    actuators = Actuators(FakeReplicaActuator(), {BatchActuator.GATE: gate}, gate)
    fleet = make_fleet(
        make_slo("a", batch_actuator="gate"), actuators, ControllerMetrics(), dry_run=False, drain=True
    )
    assert isinstance(fleet.drainer, MeasuredDrainer) and fleet.drainer.inner is gate
    assert isinstance(fleet.batch, MeasuredBatchLimit) and fleet.batch.inner is gate
    gate.close()


def test_run_rejects_bad_input_with_exit_status_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--slo", str(tmp_path / "missing.yaml")]) == 2
    slo = tmp_path / "slo.yaml"
    slo.write_text("apiVersion: fleetslo/v1\nkind: FleetSLO\nmetadata: {name: a}\nspec: {}\n")
    assert main(["run", "--slo", str(slo)]) == 2
    assert "spec.target: required" in capsys.readouterr().err
    config = tmp_path / "controller.yaml"
    config.write_text("leader_election: {lease_duration: 1s}\n")
    good = tmp_path / "good.yaml"
    good.write_text(
        "apiVersion: fleetslo/v1\nkind: FleetSLO\nmetadata: {name: a}\nspec:\n"
        "  target: {name: a, model_name: m}\n  objectives: {ttft: {threshold: 2s}, tpot: {threshold: 50ms}}\n"
        "  replicas: {max: 4}\n"
    )
    assert main(["run", "--slo", str(good), "--config", str(config)]) == 2
    assert "lease_duration" in capsys.readouterr().err
    config.write_text("policy_options: {headroom: 0.2, hysterisis: 0.05}\n")  # a typo
    assert main(["run", "--slo", str(good), "--config", str(config)]) == 2
    assert "policy fleetslo: unknown option(s) hysterisis" in capsys.readouterr().err


def prometheus(**options: object) -> ControllerSettings:
    return load(ControllerSettings, {"source": {"prometheus": {"url": "https://thanos:10902", **options}}})


def test_prometheus_tls_options_build_a_client() -> None:
    env = Environment(in_pod=False, identity="t")
    source = make_source(prometheus(insecure_skip_verify=True), env, FakePodDirectory())
    assert isinstance(source, PrometheusSource)
    source.close()
    with pytest.raises(ConfigError, match="ca_file"):
        make_source(prometheus(ca_file="/nope"), env, FakePodDirectory())


def test_spans_go_to_the_otlp_endpoint_and_are_flushed_on_shutdown() -> None:
    received: list[str] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            received.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings = load(ControllerSettings, {"otlp_endpoint": f"http://127.0.0.1:{server.server_address[1]}"})
    tracer, shutdown = make_tracer(settings)
    with Auditor(ControllerMetrics(), tracer=tracer).span("qwen", make_slo("qwen").spec.target):
        pass
    assert shutdown is not None
    shutdown()
    server.shutdown()
    server.server_close()
    assert received == ["/v1/traces"]
