"""FleetSLO specs for the controller's tests (sources, actuators, loop, Kubernetes adapters)."""

from __future__ import annotations

from typing import Any

from fleetslo.core.config import load
from fleetslo.core.spec import FleetSLO


def make_slo(
    name: str = "qwen",
    *,
    kind: str = "Deployment",
    namespace: str = "infer",
    workload: str | None = None,
    model: str = "qwen",
    mode: str = "enforce",
    replicas: tuple[int, int] = (1, 20),
    window: str = "60s",
    ttft: str = "2s",
    tpot: str = "50ms",
    batch_actuator: str = "none",
    **spec: Any,
) -> FleetSLO:
    """A valid FleetSLO; ``workload`` defaults to ``name``."""
    return load(
        FleetSLO,
        {
            "apiVersion": "fleetslo/v1",
            "kind": "FleetSLO",
            "metadata": {"name": name},
            "spec": {
                "target": {
                    "kind": kind,
                    "namespace": namespace,
                    "name": workload or name,
                    "model_name": model,
                },
                "objectives": {
                    "ttft": {"threshold": ttft, "window": window},
                    "tpot": {"threshold": tpot, "window": window},
                },
                "replicas": {"min": replicas[0], "max": replicas[1], "cold_start": "5m"},
                "batch_limit": {"min": 1, "max": 256, "actuator": batch_actuator},
                "mode": mode,
                **spec,
            },
        },
    )
