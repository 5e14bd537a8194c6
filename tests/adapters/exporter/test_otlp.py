"""The OTLP bridge pushes the same signals as /metrics to a real OTLP/HTTP receiver (protobuf)."""

from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from fleetslo.core import conventions as cv
from fleetslo.core.metrics.exposition import parse_vllm
from fleetslo.core.model import GpuSample
from fleetslo.sidecar.exporter.collector import EngineCollector
from fleetslo.sidecar.exporter.otlp import OtlpBridge, metrics_url
from fleetslo.sidecar.exporter.tracker import EngineTracker
from fleetslo.sidecar.gpu.collector import FAMILIES, GpuCollector
from fleetslo.sidecar.gpu.reader import Backend
from fleetslo.sidecar.gpu.sampler import GpuReport
from fleetslo.sidecar.thresholds import SloThresholds
from fleetslo.testing import FakeClock, grow_capture
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

from tests.support import AFTER_LOAD, capture


class Receiver:
    """A minimal OTLP/HTTP metrics receiver that keeps every decoded request."""

    def __init__(self) -> None:
        self.requests: list[ExportMetricsServiceRequest] = []
        self.paths: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                message = ExportMetricsServiceRequest()
                message.ParseFromString(body)
                receiver.requests.append(message)
                receiver.paths.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def points(self) -> dict[str, list[tuple[dict[str, str], float]]]:
        out: dict[str, list[tuple[dict[str, str], float]]] = {}
        for request in self.requests[:1]:
            for rm in request.resource_metrics:
                for sm in rm.scope_metrics:
                    for metric in sm.metrics:
                        for p in (*metric.gauge.data_points, *metric.sum.data_points):
                            attrs = {a.key: a.value.string_value for a in p.attributes}
                            out.setdefault(metric.name, []).append((attrs, p.as_double))
        return out


def push_once(bridge: OtlpBridge, receiver: Receiver) -> None:
    """Start the bridge, export once, and stop both ends."""
    bridge.start()
    try:
        assert bridge.force_flush()
    finally:
        bridge.shutdown()
        receiver.server.shutdown()
        receiver.server.server_close()


def collector() -> EngineCollector:
    tracker = EngineTracker(ring_size=50, interval=5.0)
    text = capture(AFTER_LOAD)
    for i in range(13):
        tracker.record_success(5.0 * i, 0.01, parse_vllm(grow_capture(text, 1 + i)))
    return EngineCollector(tracker, [60.0], SloThresholds(ttft=2.5, tpot=0.05), "http://vllm")


def test_metrics_url_appends_the_otlp_path_once() -> None:
    assert metrics_url("http://c:4318") == "http://c:4318/v1/metrics"
    assert metrics_url("http://c:4318/v1/metrics/") == "http://c:4318/v1/metrics"


def test_the_bridge_pushes_quantiles_attainment_rates_and_engine_up() -> None:
    receiver = Receiver()
    bridge = OtlpBridge(receiver.url, 3600.0, collector())
    push_once(bridge, receiver)
    assert set(receiver.paths) == {"/v1/metrics"}
    points = receiver.points()
    ttft = {(a["quantile"], a["window"]): v for a, v in points[cv.TTFT_SECONDS]}
    assert ttft[("0.9", "1m")] == pytest.approx(5.03125)
    attainment = {a["slo"]: v for a, v in points[cv.SLO_ATTAINMENT]}
    assert attainment["tpot"] == 1.0 and attainment["ttft"] == pytest.approx(55 / 79)
    assert points[cv.REQUESTS_PER_SECOND][0][1] == pytest.approx(79 / 5)
    assert points[cv.ENGINE_UP] == [({"model_name": "tiny-llama"}, 1.0)]
    resource = receiver.requests[0].resource_metrics[0].resource
    assert {a.key: a.value.string_value for a in resource.attributes}["service.name"] == "fleetslo-sidecar"


def test_a_down_collector_endpoint_does_not_raise_into_the_sidecar() -> None:
    bridge = OtlpBridge("http://127.0.0.1:9", 3600.0, collector(), timeout=1.0)
    bridge.start()
    try:
        assert bridge.force_flush() in (True, False)
    finally:
        bridge.shutdown()


def test_gpu_telemetry_is_pushed_too_gauges_as_gauges_counters_as_cumulative_sums() -> None:
    gpu = GpuSample(
        0, uuid="afff74a1", model="AMD Instinct MI300X", utilization=0.64, power_watts=717.0,
        energy_joules=152.59, temperatures_celsius={"junction": 45.0}, memory_used_bytes=None,
    )  # fmt: skip
    report = GpuReport(Backend.AMDSMI, True, 1.7e9, 1000.0, (gpu,), None, 0.02, 1.7e9, {})
    source = type("Source", (), {"latest": lambda self: report, "window": lambda self, s: None})()
    receiver = Receiver()
    bridge = OtlpBridge(receiver.url, 3600.0, collector())
    bridge.add_collector(GpuCollector(source, stale_after=15.0, monotonic=FakeClock(1000.0)), FAMILIES)
    push_once(bridge, receiver)
    points = receiver.points()
    identity = {"gpu": "0", "uuid": "afff74a1", "model": "AMD Instinct MI300X"}
    assert points[cv.GPU_UTILIZATION] == [(identity, 0.64)]
    assert points[cv.GPU_TEMPERATURE] == [({**identity, "sensor": "junction"}, 45.0)]
    assert points[cv.GPU_COLLECTOR_UP] == [({"backend": "amdsmi"}, 1.0)]
    assert cv.GPU_MEMORY_USED not in points  # not read: absent, never 0
    metrics = {m.name: m for rm in receiver.requests[0].resource_metrics
               for sm in rm.scope_metrics for m in sm.metrics}  # fmt: skip
    energy = metrics[cv.GPU_ENERGY]
    assert energy.sum.is_monotonic and energy.unit == "J"
    assert energy.sum.data_points[0].as_double == pytest.approx(152.59)
    assert metrics[cv.GPU_POWER].unit == "W" and metrics[cv.GPU_POWER].HasField("gauge")
